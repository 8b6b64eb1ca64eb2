"""The token bucket: what one client may do, and the one rule that decides a request.

Each identity owns a bucket of depth ``burst`` that refills continuously at
``per_minute / 60`` tokens per second and starts full. A request takes one token; with
less than one token it is refused and told, in whole seconds rounded up, when one token
will be there. ``refill_and_take`` is that rule as one pure function; the stores apply it
(``stores.MemoryStore`` in-process, ``redis_store.RedisStore`` as the same arithmetic in Lua).
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class Allowance:
    """What one client may do: ``per_minute`` sustained, ``burst`` at once."""

    per_minute: float  # max_requests_per_minute: refill rate of the bucket
    burst: int  # max_client_burst: bucket depth, also what a new client starts with
    trusted_proxy_hops: int  # how many proxies in front of us append to X-Forwarded-For

    def __post_init__(self) -> None:
        # A zero or infinite rate would divide by zero / never refuse; refuse the config instead.
        if not (math.isfinite(self.per_minute) and self.per_minute > 0):
            raise ValueError(f"per_minute must be a positive finite number, got {self.per_minute!r}")
        if isinstance(self.burst, bool) or not isinstance(self.burst, int) or self.burst < 1:
            raise ValueError(f"burst must be an integer >= 1, got {self.burst!r}")
        if (
            isinstance(self.trusted_proxy_hops, bool)
            or not isinstance(self.trusted_proxy_hops, int)
            or self.trusted_proxy_hops < 0
        ):
            raise ValueError(f"trusted_proxy_hops must be an integer >= 0, got {self.trusted_proxy_hops!r}")

    @property
    def tokens_per_second(self) -> float:
        return self.per_minute / 60.0

    @property
    def full_refill_s(self) -> float:
        """Seconds an empty bucket takes to become full; after that a bucket is as good as new."""
        return self.burst / self.tokens_per_second


@dataclass(frozen=True)
class Decision:
    allowed: bool
    retry_after_s: int  # whole seconds (rounded up) until one token is available; 0 when allowed


@dataclass(frozen=True)
class BucketState:
    tokens: float  # always in [0, burst]
    last_ts: float  # latest time the bucket was refilled to; never moves backwards


def refill_and_take(state: BucketState | None, now: float, allowance: Allowance) -> tuple[BucketState, Decision]:
    """Refill ``state`` up to ``now`` and try to take one token.

    ``None`` is a client never seen (or forgotten after ``full_refill_s``): a full bucket.
    A clock that goes backwards (another instance slightly behind) refills nothing and does
    not move ``last_ts`` back, so the same interval is never credited twice. A refused
    request takes nothing. ``redis_store._TAKE_LUA`` is this function, operation for operation:
    change both or neither.
    """
    now = float(now)
    rate = allowance.per_minute / 60.0
    capacity = float(allowance.burst)
    if state is None:
        tokens, last = capacity, now
    else:
        tokens, last = state.tokens, state.last_ts
    elapsed = now - last
    if elapsed < 0.0:
        elapsed = 0.0
    tokens = min(capacity, tokens + elapsed * rate)
    if now > last:
        last = now
    if tokens >= 1.0:
        return BucketState(tokens - 1.0, last), Decision(True, 0)
    # tokens < 1 so this is > 0, and ceil makes it at least 1: never "retry after 0".
    return BucketState(tokens, last), Decision(False, math.ceil((1.0 - tokens) / rate))


def bucket_ttl_ms(allowance: Allowance) -> int:
    """How long an idle bucket is worth keeping: full refill time plus one second of slack
    (for clock skew between instances). An expired bucket and a full one decide alike."""
    return math.ceil((allowance.full_refill_s + 1.0) * 1000.0)
