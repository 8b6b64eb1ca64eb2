"""One deterministic clock for every test that drives time (nothing sleeps).

``FakeClock(now)`` reads ``now``; a test moves it by hand (``advance(s)`` or assigning
``now``). With ``step``, each reading first moves it on by ``step`` seconds, so a deadline
is spent by reading the clock alone (``jump_clock``, ``tick_clock``).
"""

from __future__ import annotations


class FakeClock:
    """Seconds, moved by hand or by ``step`` per reading."""

    def __init__(self, now: float = 0.0, step: float = 0.0) -> None:
        self.now = now
        self.step = step

    def __call__(self) -> float:
        if self.step:
            self.now += self.step
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def jump_clock() -> FakeClock:
    """One second per reading: the first stage spends any deadline."""
    return FakeClock(step=1.0)


def tick_clock() -> FakeClock:
    """One millisecond per reading: budgets small, non-zero and deterministic."""
    return FakeClock(step=0.001)
