"""Deterministic clocks for tests that drive the deadline (nothing sleeps)."""

from __future__ import annotations


class StepClock:
    """Each reading is ``step`` seconds after the previous one."""

    def __init__(self, step: float) -> None:
        self.step = step
        self.now = 0.0

    def __call__(self) -> float:
        self.now += self.step
        return self.now


def jump_clock() -> StepClock:
    """One second per reading: the first stage spends any deadline."""
    return StepClock(1.0)


def tick_clock() -> StepClock:
    """One millisecond per reading: budgets small, non-zero and deterministic."""
    return StepClock(0.001)
