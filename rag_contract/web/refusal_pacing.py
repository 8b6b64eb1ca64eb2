"""Paced refusals: an overloaded worker sends at most ``per_s`` sheds a second, each in its turn.

Why: a shed 503 costs the event loop a request's worth of work (accept, parse, reply, close),
and a client that ignores ``Retry-After`` asks again the moment it is refused. Under a flood of
such clients the loop spends its turns refusing them, and every request, the admitted ones
too, waits behind everybody else's refusals: by Little's law each of N clients waits about N
divided by the replies the loop sends per second. Holding each refusal until its turn bounds
the refusals sent, and so the loop's work on them, whatever the clients do; a client that does
honour ``Retry-After`` loses nothing it was not told to wait anyway (make load, ADR 0001).

Contract (``RefusalPacing(per_s, max_hold_s)``; one per event loop, touched only from it):

- ``hold_s(now)``: how long a refusal arriving at ``now`` is held before it is sent. Refusals
  leave in the order they arrive, at least ``1 / per_s`` seconds apart; one arriving when the
  last turn is past is sent at once.
- A refusal whose turn would come more than ``max_hold_s`` after ``now`` is not held (0) and
  takes no turn. So at most about ``per_s * max_hold_s`` refusals are held at once, and with
  ``max_hold_s`` the ``Retry-After`` it carries, no refusal arrives later than the client is told
  to come back. Past that bound a flood is refused at once, as it is unpaced.
- ``per_s`` 0: refusals are not paced (every hold is 0).
- ``pace()``: waits out the hold on the running loop, reading the loop's own clock, the one its
  sleep counts, so the turns and the waits agree.
"""

from __future__ import annotations

import asyncio


class RefusalPacing:
    def __init__(self, per_s: float, max_hold_s: float):
        if per_s < 0 or max_hold_s < 0:
            raise ValueError(f"RefusalPacing: per_s and max_hold_s must be >= 0, got {per_s} and {max_hold_s}")
        self.per_s = per_s
        self.max_hold_s = max_hold_s
        self._last_turn: float | None = None  # when the last held (or at-once) refusal was sent

    def hold_s(self, now: float) -> float:
        """Seconds a refusal arriving at ``now`` waits; its turn is taken unless it is 0 by the bound."""
        if self.per_s <= 0:
            return 0.0
        turn = now if self._last_turn is None else max(now, self._last_turn + 1.0 / self.per_s)
        if turn - now > self.max_hold_s:
            return 0.0
        self._last_turn = turn
        return turn - now

    async def pace(self) -> None:
        """Hold the refusal about to be sent until its turn."""
        if (hold := self.hold_s(asyncio.get_running_loop().time())) > 0:
            await asyncio.sleep(hold)
