"""The answers report measures answers, not the machine: no question is abandoned in it however
slow the clock runs, so a loaded CI runner records the states a quiet one does."""

from __future__ import annotations

from rag_contract.answering.drafting import FixtureDrafter
from rag_contract.answering.service import Service
from rag_contract.index.registry import Registry
from rag_contract.quality.evaluation import answers_report


class Crawling:
    """A clock on which every reading is a minute after the last: any deadline is spent at once."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        self.now += 60.0
        return self.now


def test_a_clock_too_slow_for_any_deadline_measures_the_same_answers(project, index):
    questions = project.questions.questions[:8]
    drafter = FixtureDrafter(project.paths.drafts)
    slow = answers_report(Service(Registry(index), project.thresholds, drafter, clock=Crawling()), questions, "v")
    quick = answers_report(Service(Registry(index), project.thresholds, drafter), questions, "v")
    assert slow["states"].get("abandoned", 0) == 0
    assert slow == quick
