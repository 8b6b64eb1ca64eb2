"""Where buckets live: ``MemoryStore`` for one process; ``RedisStore`` (``redis_store``),
shared by instances, is the same protocol.

Both apply ``bucket.refill_and_take``: the memory store calls it, the redis store runs the
same arithmetic in one Lua script, so the two give identical decision sequences for the
same times. A store that cannot decide raises ``StoreUnavailable``; the middleware then
refuses the request (fail closed).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
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

    The buckets are kept in order of last use, so the ones idle longest are at the front.
    Each ``take`` drops buckets from the front while they have been idle for longer than
    ``full_refill_s`` (they are full, i.e. equivalent to no entry) or while there are more
    than ``max_buckets``: past the bound, the buckets used longest ago go first. So a stream
    of new client addresses cannot grow it without bound, whatever its rate;
    ``tests/web/test_identity_bound.py`` holds 100 000 identities to the bound in count and
    bytes. A dropped bucket is a client forgotten early: its next request finds a full
    bucket, so under a flood of more than ``max_buckets`` clients per refill time a client
    can be granted up to one burst more than its allowance (the residual risk, in
    docs/threat-model.md).

    Every step is O(1) whatever the table holds (every bucket is dropped at most once after
    it was stored), so a new client costs the same whether the table is empty or full: an
    ``OrderedDict`` finds its oldest entry in constant time, where a plain dict's first entry
    is found by stepping over every slot deleted before it, which made each new client under
    a sustained stream of them cost tens of microseconds once the bound was reached.
    """

    # ~300 bytes a bucket (key, state, expiry, dict slot and order links): about 15 MB at the bound.
    MAX_BUCKETS = 50_000
    # A dict update under a lock takes microseconds: decided on the event loop, no thread hop.
    blocking = False

    def __init__(self, max_buckets: int = MAX_BUCKETS) -> None:
        if max_buckets < 1:
            raise ValueError(f"max_buckets must be >= 1, got {max_buckets!r}")
        self._lock = threading.Lock()
        # key -> (state, time after which the entry equals a fresh bucket), in order of last use
        self._buckets: OrderedDict[str, tuple[BucketState, float]] = OrderedDict()
        self._max_buckets = max_buckets

    def take(self, key: str, now: float, allowance: Allowance) -> Decision:
        with self._lock:
            buckets = self._buckets
            entry = buckets.pop(key, None)
            state, decision = refill_and_take(entry[0] if entry else None, now, allowance)
            buckets[key] = (state, state.last_ts + allowance.full_refill_s)
            self._forget(float(now))
            return decision

    def __len__(self) -> int:
        with self._lock:
            return len(self._buckets)

    def _forget(self, now: float) -> None:
        """Drop, from the front, buckets full by ``now`` and any past the bound. The front is the
        bucket used longest ago; with a clock that stepped back it may still be live while one
        behind it is full, which only keeps a full bucket a little longer (it decides alike)."""
        buckets = self._buckets
        while buckets:
            oldest = next(iter(buckets))
            if len(buckets) <= self._max_buckets and buckets[oldest][1] > now:
                return
            del buckets[oldest]
