"""Who a request counts against: the client identity behind our own proxies.

Only entries our own proxies wrote are trusted; anything a caller can forge (entries left
of the trusted hop) never changes the identity.
"""

from __future__ import annotations


def client_identity(peer: str | None, forwarded_for: str | None, hops: int) -> str:
    """The bucket key for a request.

    ``hops == 0``: the TCP peer. Otherwise the X-Forwarded-For entry ``hops`` in from the
    right (``entries[-hops]``): each trusted proxy appends the address it saw, so that entry
    was written by our outermost proxy. A caller can only add entries on the LEFT, which we
    never read. With fewer than ``hops`` entries (or an empty one at that position) we fall
    back to the peer: everyone behind the proxy then shares one bucket, which fails safe.
    """
    fallback = peer if peer else "unknown-peer"
    if hops <= 0 or not forwarded_for:
        return fallback
    entries = [entry.strip() for entry in forwarded_for.split(",")]
    if len(entries) < hops:
        return fallback
    chosen = entries[-hops]
    return chosen if chosen else fallback
