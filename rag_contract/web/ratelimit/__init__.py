"""Per-client token bucket, the first thing every HTTP request meets.

Contract:
- A client is identified by ``client_identity(peer, X-Forwarded-For, trusted_proxy_hops)``
  (``identity``). Only entries our own proxies wrote are trusted; anything a caller can
  forge (entries left of the trusted hop) never changes the identity.
- Each identity owns a bucket of depth ``burst`` that refills continuously at
  ``per_minute / 60`` tokens per second and starts full. A request takes one token; with
  less than one token it is refused and told, in whole seconds rounded up, when one token
  will be there. ``refill_and_take`` (``bucket``) is that rule as one pure function;
  ``MemoryStore`` applies it in-process (``stores``) and ``RedisStore`` runs the same
  arithmetic in one Lua script (``redis_store``), so the two give identical decision
  sequences for the same times.
- ``RateLimitMiddleware`` (``middleware``) decides before the app runs, on every HTTP path.
  Refused -> 429 with ``Retry-After``; store unreachable -> 503 with ``Retry-After: 1``
  (fail closed: an unlimited service is the outage we are guarding against). Lifespan and
  websocket scopes pass through untouched.
- ``probe`` (``probe``) drives an ASGI app in-process (no HTTP client) with a frozen clock
  and reports whether the limiter is installed and behaves: used by the CI gate against
  the real app.

The public names are re-exported here; import them from ``rag_contract.web.ratelimit``,
except ``RedisStore`` and ``REDIS_KEY_PREFIX``: import those from
``rag_contract.web.ratelimit.redis_store``, so the redis client loads only where it is used.
"""

from rag_contract.web.ratelimit.bucket import Allowance, BucketState, Decision, bucket_ttl_ms, refill_and_take
from rag_contract.web.ratelimit.identity import client_identity
from rag_contract.web.ratelimit.middleware import RateLimitMiddleware
from rag_contract.web.ratelimit.probe import PROBE_NOW, ProbeResult, probe
from rag_contract.web.ratelimit.stores import (
    AwaitableBucketStore,
    BucketStore,
    MemoryStore,
    StoreUnavailable,
)

__all__ = [
    "PROBE_NOW",
    "Allowance",
    "AwaitableBucketStore",
    "BucketState",
    "BucketStore",
    "Decision",
    "MemoryStore",
    "ProbeResult",
    "RateLimitMiddleware",
    "StoreUnavailable",
    "bucket_ttl_ms",
    "client_identity",
    "probe",
    "refill_and_take",
]
