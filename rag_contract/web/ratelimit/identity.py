"""Who a request counts against: the client identity behind our own proxies.

Only entries our own proxies wrote are trusted; anything a caller can forge (entries left
of the trusted hop) never changes the identity.

An identity is an address in one canonical spelling, so one client cannot become many by
spelling itself differently, and a key is never longer than an address:

- IPv4 ``a.b.c.d`` (``1.2.3.4:5678`` without its port);
- IPv6 keyed by its /64 (``2001:db8:0:1::/64``): one subscriber is usually handed a whole
  /64, so keying by the full address would give each client 2**64 buckets. ``[v6]:port``
  loses its port and brackets, a zone (``%eth0``) goes with the host bits, an IPv4-mapped address
  (``::ffff:1.2.3.4``) is the IPv4 address it maps;
- anything else in the trusted entry (a name, ``unknown``, 8 KB of text) is no address:
  the request falls back to the peer, like a missing entry.
"""

from __future__ import annotations

import ipaddress
import re

# Longer than any spelling of an address with a port and zone ("[v6%zone]:65535"); a longer
# entry is refused before it is parsed.
MAX_ADDRESS_CHARS = 64
IPV6_PREFIX_BITS = 64
# An IPv4 address already in its canonical spelling (four decimal octets, 0-255, no leading
# zero): what ``str(ipaddress.ip_address(text))`` would return, found without parsing it into
# an object, which costs several microseconds on every request.
_OCTET = "(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])"
_CANONICAL_IPV4 = re.compile(rf"{_OCTET}\.{_OCTET}\.{_OCTET}\.{_OCTET}")


def address_key(text: str | None) -> str | None:
    """``text`` as the canonical key of the address it names, or None when it names none."""
    if not text:
        return None
    text = text.strip()
    if len(text) > MAX_ADDRESS_CHARS:
        return None
    if _CANONICAL_IPV4.fullmatch(text):
        return text
    if text.startswith("["):
        inner, sep, rest = text[1:].partition("]")
        if not sep or (rest and not (rest.startswith(":") and rest[1:].isdigit())):
            return None
        text = inner
    elif text.count(":") == 1:
        host, _, port = text.partition(":")
        if not port.isdigit():
            return None
        text = host
    try:
        address = ipaddress.ip_address(text)
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return str(address.ipv4_mapped)
        network = ipaddress.IPv6Network((int(address) >> IPV6_PREFIX_BITS << IPV6_PREFIX_BITS, IPV6_PREFIX_BITS))
        return str(network)
    return str(address)


def client_identity(peer: str | None, forwarded_for: str | None, hops: int) -> str:
    """The bucket key for a request.

    ``hops == 0``: the TCP peer. Otherwise the X-Forwarded-For entry ``hops`` in from the
    right (``entries[-hops]``): each trusted proxy appends the address it saw, so that entry
    was written by our outermost proxy. A caller can only add entries on the LEFT, which we
    never read. With fewer than ``hops`` entries, or an entry at that position that is no
    address, we fall back to the peer: everyone behind the proxy then shares one bucket,
    which fails safe. Addresses are keyed by ``address_key``; a peer that is no address (a
    test client's name) is used as it is.
    """
    fallback = address_key(peer) or peer or "unknown-peer"
    if hops <= 0 or not forwarded_for:
        return fallback
    entries = forwarded_for.split(",")
    if len(entries) < hops:
        return fallback
    return address_key(entries[-hops]) or fallback
