"""Work done on the event loop one piece at a time, one computation per key at a time.

Why: a fixed answer costs ~10-100 ms of GIL-bound work, cold (11 ms median here). Computed inline by each request,
a cold stampede over distinct ids (182 at once, right after start) ran them back to back
before the loop could read anything else, and ``/health`` waited ~600 ms behind them. On a
worker thread they would hold the GIL against the loop, and each hand-over between the two
threads costs a scheduler wake-up, which on a busy machine is milliseconds: answers came out
several times slower, many past their deadline (tried: 224 distinct ids took 10 s against
4.8 s inline). Here one worker on the loop computes one
piece, then leaves the loop to everything else for as long as the piece took (at least
``MIN_PAUSE_S``): a request arriving meanwhile is read and answered before the next piece,
whatever number of loop turns it needs, and one arriving during a piece waits at most that
piece. A ``sleep(0)`` would not do: a request needs several turns of the loop (uvloop runs
ready callbacks back to back without reading a socket in between), each behind a piece. So
a queue of pieces takes at most half the loop's time; a piece nobody queued before it
starts at once.

Contract (``SingleFlight()``; every method is called on the one event loop that serves it):

- ``start(key, owner, compute)`` returns ``(future, started)``: the pending computation for
  ``key`` on ``owner`` (by identity: the index the request acquired; then ``started`` is
  False), else a new one queued (True). Queued work runs in order of arrival, one piece at a
  time, each followed by a pause as long as itself.
- ``run(key, owner, compute)``: ``start`` and wait for it; ``(result, started)``. A caller
  arriving while a computation for ``key`` on the same owner is pending awaits that one: a
  stampede on one id costs one computation.
- A finished computation is never handed out again: the next call starts a new one (what to
  reuse is the caller's memo). One for another owner is never joined: after a cutover the
  first request for an id computes on the new index.
- ``run_alone(compute)``: ``compute`` queued behind the others like any computation, but
  never joined and never joining: its one caller's own. A caller of ``run_alone`` that goes
  away before its turn drops the computation (nobody else awaits it); once it has run, going
  away drops only the result.
- A caller of ``run`` that goes away cancels only its own wait, never the computation. At
  most one pending computation per key: the table is bounded by the keys (the fixed question
  ids). An exception raised by ``compute`` is its future's (a caller that went away leaves it
  unseen, and nothing is logged).
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

T = TypeVar("T")
MIN_PAUSE_S = 0.001  # after a piece that took less: still a pause long enough to read a request
_ALONE = object()  # the key of every run_alone computation: in no pending entry, so never joined


class SingleFlight(Generic[T]):
    def __init__(self) -> None:
        self._pending: dict[Hashable, tuple[object, asyncio.Future[T]]] = {}
        self._queue: deque[tuple[Hashable, Callable[[], T], asyncio.Future[T]]] = deque()
        self._worker: asyncio.Task[None] | None = None

    def start(self, key: Hashable, owner: object, compute: Callable[[], T]) -> tuple[asyncio.Future[T], bool]:
        pending = self._pending.get(key)
        if pending is not None and pending[0] is owner and not pending[1].done():
            return pending[1], False
        future = self._queued(key, compute)
        self._pending[key] = (owner, future)
        return future, True

    async def run(self, key: Hashable, owner: object, compute: Callable[[], T]) -> tuple[T, bool]:
        future, started = self.start(key, owner, compute)
        # Shielded: a waiter that is cancelled leaves the computation to the others.
        return await asyncio.shield(future), started

    async def run_alone(self, compute: Callable[[], T]) -> T:
        # Not shielded: nobody else waits for it, so a caller that goes away takes it along.
        return await self._queued(_ALONE, compute)

    def _queued(self, key: Hashable, compute: Callable[[], T]) -> asyncio.Future[T]:
        future: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        future.add_done_callback(_retrieved)
        self._queue.append((key, compute, future))
        if self._worker is None or self._worker.done():
            self._worker = asyncio.get_running_loop().create_task(self._work())
        return future

    async def _work(self) -> None:
        loop = asyncio.get_running_loop()
        while self._queue:
            key, compute, future = self._queue.popleft()
            if future.done():  # its one caller went away before its turn (run_alone)
                continue
            began = loop.time()
            try:
                future.set_result(compute())
            except Exception as exc:  # the caller's to see, as it would inline
                future.set_exception(exc)
            finally:
                if self._pending.get(key, (None, None))[1] is future:
                    del self._pending[key]
            # The loop's time: as long as the piece took, everything else runs before the next.
            await asyncio.sleep(max(MIN_PAUSE_S, loop.time() - began))


def _retrieved(future: asyncio.Future) -> None:
    # Marks an exception as seen, so a precomputation nobody awaited logs no "never retrieved".
    if not future.cancelled():
        future.exception()
