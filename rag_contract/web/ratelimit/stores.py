"""Where buckets live: ``MemoryStore`` for one process; ``RedisStore`` (``redis_store``),
shared by instances, is the same protocol.

Both apply ``bucket.refill_and_take``: the memory store calls it, the redis store runs the
same arithmetic in one Lua script, so the two give identical decision sequences for the
same times. A store that cannot decide raises ``StoreUnavailable``; the middleware then
refuses the request (fail closed).
"""

from __future__ import annotations

import threading
from typing import Protocol

from rag_contract.web.ratelimit.bucket import Allowance, BucketState, Decision, refill_and_take


class StoreUnavailable(Exception):
    """The bucket store could not be asked; the caller must refuse, not serve unlimited."""


class BucketStore(Protocol):
    """Decides one request for ``key`` at ``now``; raises ``StoreUnavailable`` when it cannot.

    The middleware reads two optional attributes as well: ``blocking`` (false: ``take`` is
    cheap enough for the event loop; absent: it runs in a worker thread) and ``awaitable``
    (true: the store is an ``AwaitableBucketStore`` and ``take_async`` is awaited instead).
    """

    def take(self, key: str, now: float, allowance: Allowance) -> Decision: ...


class AwaitableBucketStore(BucketStore, Protocol):
    """A store that decides on the event loop when ``awaitable`` is true."""

    @property
    def awaitable(self) -> bool: ...

    async def take_async(self, key: str, now: float, allowance: Allowance) -> Decision: ...


class MemoryStore:
    """Buckets in a dict, for one process. Thread-safe: sync handlers run in a threadpool.

    Buckets idle for longer than ``full_refill_s`` are dropped now and then (they are full,
    i.e. equivalent to no entry), and the dict never holds more than ``max_buckets``: past
    that, the buckets used longest ago are dropped first (the dict is kept in order of last
    use). So a stream of new client addresses cannot grow it without bound, whatever its
    rate; ``tests/web/test_ratelimit.py`` holds 100 000 identities to the bound in count and
    bytes. A dropped bucket is a client forgotten early: its next request finds a full
    bucket, so under a flood of more than ``max_buckets`` clients per refill time a client
    can be granted up to one burst more than its allowance (the residual risk, in
    docs/threat-model.md).
    """

    _MIN_SWEEP_SIZE = 1024
    # ~300 bytes a bucket (key, state, expiry, dict slot): about 15 MB at the bound.
    MAX_BUCKETS = 50_000
    # A dict update under a lock takes microseconds: decided on the event loop, no thread hop.
    blocking = False

    def __init__(self, max_buckets: int = MAX_BUCKETS) -> None:
        if max_buckets < 1:
            raise ValueError(f"max_buckets must be >= 1, got {max_buckets!r}")
        self._lock = threading.Lock()
        # key -> (state, time after which the entry equals a fresh bucket), in order of last use
        self._buckets: dict[str, tuple[BucketState, float]] = {}
        self._max_buckets = max_buckets
        self._sweep_at_size = self._MIN_SWEEP_SIZE

    def take(self, key: str, now: float, allowance: Allowance) -> Decision:
        with self._lock:
            entry = self._buckets.pop(key, None)
            state, decision = refill_and_take(entry[0] if entry else None, now, allowance)
            self._buckets[key] = (state, state.last_ts + allowance.full_refill_s)
            if len(self._buckets) >= self._sweep_at_size:
                self._sweep(float(now))
            while len(self._buckets) > self._max_buckets:
                del self._buckets[next(iter(self._buckets))]  # the bucket used longest ago
            return decision

    def __len__(self) -> int:
        with self._lock:
            return len(self._buckets)

    def _sweep(self, now: float) -> None:
        # Amortised O(1): the next sweep waits until the dict has doubled again.
        self._buckets = {k: v for k, v in self._buckets.items() if v[1] > now}
        self._sweep_at_size = max(self._MIN_SWEEP_SIZE, 2 * len(self._buckets))
