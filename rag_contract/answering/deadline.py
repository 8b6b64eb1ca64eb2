"""The request deadline: a ceiling on service time, enforced, on an injectable clock.

Contract: a ``Deadline`` is started at request entry with ``request_deadline_ms`` and a
clock (``time.perf_counter`` in service, a fake in tests). ``stage(name)`` times one stage
(retrieval, drafting, grounding) and checks the deadline when the stage ends;
``check()`` is called inside the per-claim grounding loop. Either raises
``DeadlineExceeded`` the moment the spend passes the deadline, so a request that spent its
budget is abandoned rather than answered from the claims checked so far. ``report()`` is
the budget every response carries: the deadline, what was spent, and time per stage.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from types import MappingProxyType

Clock = Callable[[], float]  # seconds, monotonic


@dataclass(frozen=True)
class BudgetReport:
    deadline_ms: float
    spent_ms: float
    stages: Mapping[str, float]  # ms per stage, in the order they ran

    def as_dict(self) -> dict:
        return {
            "deadline_ms": self.deadline_ms,
            "spent_ms": round(self.spent_ms, 3),
            "stages": {k: round(v, 3) for k, v in self.stages.items()},
        }


class DeadlineExceeded(Exception):
    def __init__(self, stage: str, report: BudgetReport):
        self.stage = stage
        self.report = report
        super().__init__(f"deadline of {report.deadline_ms:g} ms spent during {stage} ({report.spent_ms:.1f} ms spent)")


class Deadline:
    def __init__(self, deadline_ms: float, clock: Clock):
        self.deadline_ms = deadline_ms
        self._clock = clock
        self._start = clock()
        self._stages: dict[str, float] = {}
        self._current: str | None = None

    def spent_ms(self) -> float:
        return (self._clock() - self._start) * 1000.0

    def report(self) -> BudgetReport:
        return BudgetReport(self.deadline_ms, self.spent_ms(), MappingProxyType(dict(self._stages)))

    def check(self) -> None:
        if self.spent_ms() > self.deadline_ms:
            raise DeadlineExceeded(self._current or "request", self.report())

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        self._current = name
        began = self._clock()
        try:
            yield
        finally:
            self._stages[name] = self._stages.get(name, 0.0) + (self._clock() - began) * 1000.0
        self.check()
        self._current = None
