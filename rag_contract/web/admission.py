"""Bounded admission for free-text answering: a cap on answers in flight and a short queue.

Why: answering is CPU-bound and holds the GIL for most of its work, so answers run at once
share one core's time. With no cap, 64 concurrent ``/ask`` requests all start, each runs
about 64 times slower than alone, and most pass their deadline before a stage ends: they
are abandoned late, after costing the others their time. A cap keeps every admitted answer
close to its unloaded service time; what cannot be admitted is refused at once, which a
client can act on (``Retry-After``), instead of late.

Contract (``Admission(limits)``, used as ``async with admission.slot(): ...``):

- at most ``limits.max_in_flight`` slots are held at once;
- a request that finds them all held waits in a FIFO queue of at most ``limits.max_queued``;
  a request that finds the queue full is refused at once with ``Shed("queue_full")``, and
  ``refusal_now()`` says so before the request's body is even read;
- a queued request that has not been handed a slot within ``limits.max_queue_wait_ms`` is
  refused with ``Shed("queue_wait")``; so no request waits longer than that to be admitted,
  and an admitted request starts its deadline with it whole;
- a released slot goes to the longest waiter, never to a newcomer ahead of the queue;
- a request cancelled while queued (its client went away) leaves the queue and takes no slot.

The object lives on one event loop and is only touched from it (no locks are needed); the
answering itself runs in a worker thread while its slot is held.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import AsyncIterator
from dataclasses import dataclass


@dataclass(frozen=True)
class AdmissionLimits:
    """``thresholds.admission``: the cap, the queue and how long a request may wait in it."""

    max_in_flight: int
    max_queued: int
    max_queue_wait_ms: float
    retry_after_s: int  # what a shed (and an abandoned) 503 tells the client to wait


class Shed(Exception):
    """The request was not admitted: ``reason`` is ``queue_full`` or ``queue_wait``."""

    def __init__(self, reason: str, limits: AdmissionLimits):
        self.reason = reason
        self.retry_after_s = limits.retry_after_s
        if reason == "queue_full":
            detail = f"{limits.max_in_flight} answers in flight and {limits.max_queued} queued"
        else:
            detail = f"no answer slot freed within {limits.max_queue_wait_ms:g} ms"
        super().__init__(f"overloaded: {detail}; retry after {limits.retry_after_s} s")

    def as_dict(self) -> dict:
        return {"error": "overloaded", "reason": self.reason, "detail": str(self), "retry_after_s": self.retry_after_s}


class Admission:
    def __init__(self, limits: AdmissionLimits):
        self.limits = limits
        self._in_flight = 0
        self._waiting: deque[asyncio.Future[None]] = deque()

    @property
    def in_flight(self) -> int:
        return self._in_flight

    @property
    def queued(self) -> int:
        return sum(1 for f in self._waiting if not f.done())

    def refusal_now(self) -> Shed | None:
        """The ``Shed`` a request arriving now would meet at once (every slot held and the queue
        full), or None: asked before a request's body is read and screened, so a refused request
        costs no more than its headers."""
        queued = self.queued
        # Full queue, unless a slot is free with nobody ahead (with max_queued 0, "full" is always).
        if queued >= self.limits.max_queued and (queued or self._in_flight >= self.limits.max_in_flight):
            return Shed("queue_full", self.limits)
        return None

    @contextlib.asynccontextmanager
    async def slot(self) -> AsyncIterator[None]:
        """Hold one slot for the block; ``Shed`` when none can be had within the limits."""
        await self._acquire()
        try:
            yield
        finally:
            self._release()

    async def _acquire(self) -> None:
        if (shed := self.refusal_now()) is not None:
            raise shed
        if self._in_flight < self.limits.max_in_flight and not self.queued:
            self._in_flight += 1
            return
        handed: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiting.append(handed)
        try:
            await asyncio.wait_for(asyncio.shield(handed), self.limits.max_queue_wait_ms / 1000.0)
        except (TimeoutError, asyncio.CancelledError) as exc:
            if handed.done():
                # The slot was handed over in the same instant: give it on rather than lose it.
                self._release()
            else:
                handed.cancel()
            self._forget(handed)
            if isinstance(exc, asyncio.CancelledError):
                raise
            raise Shed("queue_wait", self.limits) from None

    def _release(self) -> None:
        # A slot passes straight to the longest waiter (the count stays), else it is freed.
        while self._waiting:
            waiter = self._waiting.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return
        self._in_flight -= 1

    def _forget(self, handed: asyncio.Future[None]) -> None:
        with contextlib.suppress(ValueError):
            self._waiting.remove(handed)
