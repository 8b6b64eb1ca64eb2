"""The deadline's arithmetic and its boundary: spent past the deadline raises; spent exactly
the deadline does not. Clock readings are binary fractions, so every figure is exact."""

from __future__ import annotations

import pytest

from rag_contract.answering.deadline import BudgetReport, Deadline, DeadlineExceeded
from tests.support.clocks import FakeClock


def test_spent_is_milliseconds_since_the_start():
    clock = FakeClock(now=10.0)
    d = Deadline(1000.0, clock)
    clock.advance(0.25)
    assert d.spent_ms() == 250.0
    assert d.deadline_ms == 1000.0


@pytest.mark.parametrize(
    ("spent_s", "raises"),
    [(0.24951171875, False), (0.25, False), (0.25048828125, True)],  # just below, at, just above 250 ms
)
def test_check_raises_only_past_the_deadline(spent_s, raises):
    clock = FakeClock()
    d = Deadline(250.0, clock)
    clock.advance(spent_s)
    if raises:
        with pytest.raises(DeadlineExceeded):
            d.check()
    else:
        d.check()


def test_a_check_outside_any_stage_names_the_request():
    clock = FakeClock()
    d = Deadline(100.0, clock)
    clock.advance(0.125)
    with pytest.raises(DeadlineExceeded) as e:
        d.check()
    assert e.value.stage == "request"
    assert str(e.value) == "deadline of 100 ms spent during request (125.0 ms spent)"
    assert e.value.report == BudgetReport(100.0, 125.0, {})


def test_a_stage_is_timed_and_the_deadline_checked_when_it_ends():
    clock = FakeClock()
    d = Deadline(100.0, clock)
    with d.stage("retrieval"):
        clock.advance(0.0625)
    assert d.report().stages == {"retrieval": 62.5}
    with pytest.raises(DeadlineExceeded) as e, d.stage("drafting"):
        clock.advance(0.0625)
    assert e.value.stage == "drafting"
    assert e.value.report.spent_ms == 125.0
    assert dict(e.value.report.stages) == {"retrieval": 62.5, "drafting": 62.5}
    assert str(e.value) == "deadline of 100 ms spent during drafting (125.0 ms spent)"


def test_a_stage_that_ends_within_the_deadline_leaves_no_stage_current():
    clock = FakeClock()
    d = Deadline(100.0, clock)
    with d.stage("retrieval"):
        clock.advance(0.03125)
    clock.advance(0.125)
    with pytest.raises(DeadlineExceeded) as e:
        d.check()
    assert e.value.stage == "request"


def test_a_check_inside_a_stage_names_the_stage():
    clock = FakeClock()
    d = Deadline(100.0, clock)
    with pytest.raises(DeadlineExceeded) as e, d.stage("grounding"):
        clock.advance(0.125)
        d.check()
    assert e.value.stage == "grounding"
    assert dict(e.value.report.stages) == {}, "the stage had not ended when the check fired"


def test_a_repeated_stage_adds_up_and_a_stage_that_raises_is_still_timed():
    clock = FakeClock()
    d = Deadline(1000.0, clock)
    for _ in range(2):
        with d.stage("grounding"):
            clock.advance(0.125)
    with pytest.raises(RuntimeError), d.stage("drafting"):
        clock.advance(0.25)
        raise RuntimeError("drafter failed")
    assert dict(d.report().stages) == {"grounding": 250.0, "drafting": 250.0}
    assert list(d.report().stages) == ["grounding", "drafting"]


def test_the_report_is_a_snapshot_rounded_to_microseconds():
    clock = FakeClock()
    d = Deadline(80.0, clock)
    with d.stage("retrieval"):
        clock.advance(0.0123456)
    report = d.report()
    with d.stage("drafting"):
        clock.advance(0.001)
    assert list(report.stages) == ["retrieval"], "a report does not change after it is taken"
    with pytest.raises(TypeError):
        report.stages["retrieval"] = 0.0  # type: ignore[index]
    assert report.as_dict() == {"deadline_ms": 80.0, "spent_ms": 12.346, "stages": {"retrieval": 12.346}}
