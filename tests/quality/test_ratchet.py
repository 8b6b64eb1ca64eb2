"""The ratchet: bars recomputed by the committed rules, tighten-only unless told, file comments kept."""

from __future__ import annotations

import shutil

import pytest

from rag_contract.config.thresholds import load_thresholds
from rag_contract.quality.ratchet import current_bars, measured_bars, ratchet
from rag_contract.quality.thresholds_file import rewrite_thresholds, write_fitted


def retrieval(ranks: dict[str, int | None], r1=0.5, r5=0.8, r10=0.9, mrr=0.6) -> dict:
    return {
        "serving_mode": "fused",
        "questions": len(ranks),
        "modes": {
            "fused": {
                "recall@1": r1, "recall@5": r5, "recall@10": r10, "mrr": mrr,
                "questions": [{"id": q, "rank": r} for q, r in ranks.items()],
            }
        },
    }  # fmt: skip


def test_ceilings_are_rank_plus_two_and_a_miss_still_has_one():
    bars = measured_bars(retrieval({"q1": 1, "q2": 14, "q3": None}), None)
    assert bars["retrieval.ceilings.q1"] == 3 and bars["retrieval.ceilings.q2"] == 16
    assert bars["retrieval.ceilings.q3"] > 10_000


def test_floors_sit_two_questions_below_and_recall_at_10_is_pinned():
    bars = measured_bars(retrieval({f"q{i}": 1 for i in range(100)}, r1=0.5, r10=0.93), None)
    assert bars["retrieval.floors.recall@1"] == 0.48  # 0.5 - 2/100
    assert bars["retrieval.floors.recall@10"] == 0.93


def test_tighten_only_keeps_the_committed_bar_unless_loosening_is_allowed():
    old = {"retrieval.ceilings.q1": 3, "retrieval.floors.mrr": 0.6}
    new = {"retrieval.ceilings.q1": 5, "retrieval.floors.mrr": 0.55}
    kept, changes = ratchet(old, new)
    assert kept == old and changes == []
    loose, changes = ratchet(old, new, allow_loosen=True)
    assert loose == new and all(c.loosened for c in changes)
    tight, changes = ratchet(old, {"retrieval.ceilings.q1": 2, "retrieval.floors.mrr": 0.7})
    assert tight == {"retrieval.ceilings.q1": 2, "retrieval.floors.mrr": 0.7}
    assert not any(c.loosened for c in changes)


def test_a_new_question_gains_a_ceiling_and_a_removed_one_loses_it():
    old = {"retrieval.ceilings.q1": 3, "retrieval.ceilings.q9": 4}
    out, changes = ratchet(old, {"retrieval.ceilings.q1": 3, "retrieval.ceilings.q2": 5})
    assert out == {"retrieval.ceilings.q1": 3, "retrieval.ceilings.q2": 5}
    assert {c.key for c in changes} == {"retrieval.ceilings.q2", "retrieval.ceilings.q9"}


def test_a_new_overanswered_exception_needs_consent_and_an_improvement_drops_it():
    key = "answers.known_overanswered.u1"
    assert ratchet({}, {key: "grounded"})[0] == {}
    assert ratchet({}, {key: "grounded"}, allow_loosen=True)[0] == {key: "grounded"}
    assert ratchet({key: "grounded"}, {key: "partial"})[0] == {key: "partial"}
    assert ratchet({key: "grounded"}, {})[0] == {}


def test_a_new_miss_needs_consent_a_worse_one_is_a_loosening_and_an_accurate_answer_drops_it():
    key = "answers.known_misses.q1"
    assert ratchet({}, {key: "uncited"})[0] == {}
    assert ratchet({}, {key: "uncited"}, allow_loosen=True)[0] == {key: "uncited"}
    assert ratchet({key: "uncited"}, {key: "unanswered"})[0] == {key: "unanswered"}
    assert ratchet({key: "unanswered"}, {key: "inaccurate"})[0] == {key: "unanswered"}
    assert ratchet({key: "unanswered"}, {key: "inaccurate"}, allow_loosen=True)[1][0].loosened
    assert ratchet({key: "inaccurate"}, {})[0] == {}


def test_each_answerable_question_short_of_accurate_is_measured_at_its_level():
    rows = [
        {"id": "q1", "answerable": True, "state": "grounded", "cites_expected": True, "accurate": True},
        {"id": "q2", "answerable": True, "state": "unsupported", "cites_expected": False, "accurate": False},
        {"id": "q3", "answerable": True, "state": "partial", "cites_expected": True, "accurate": False},
        {"id": "q4", "answerable": True, "state": "grounded", "cites_expected": False, "accurate": False},
    ]
    answers = {
        "grounded_rate": 0.5, "answerable": 4, "answered_unanswerable": 0, "state_agreement": 0.0, "refusals": 0,
        "accuracy": {"coverage": 0.75, "accuracy_when_answered": 0.3333, "false_answer_rate": None, "answered": 3},
        "questions": rows,
    }  # fmt: skip
    bars = measured_bars(retrieval({"q1": 1}), answers)
    assert {k: v for k, v in bars.items() if k.startswith("answers.known_misses.")} == {
        "answers.known_misses.q2": "unanswered",
        "answers.known_misses.q3": "inaccurate",
        "answers.known_misses.q4": "uncited",
    }
    assert "answers.min_coverage" not in bars  # no refusals: the false-answer rate has no denominator


@pytest.fixture
def thresholds_copy(tmp_path, root):
    path = tmp_path / "thresholds.yaml"
    shutil.copy(root / "eval" / "thresholds.yaml", path)
    return path


def test_rewriting_keeps_comments_and_changes_only_the_numbers(thresholds_copy):
    before = thresholds_copy.read_text()
    t = load_thresholds(thresholds_copy)
    bars = current_bars(t)
    rewrite_thresholds(thresholds_copy, bars, t.measured_on)
    assert thresholds_copy.read_text() == before  # nothing moved: not a byte changed
    first = next(iter(t.retrieval.ceilings))
    rewrite_thresholds(thresholds_copy, bars | {f"retrieval.ceilings.{first}": 99}, t.measured_on)
    after = thresholds_copy.read_text()
    assert f"    {first}: 99\n" in after
    assert [ln for ln in after.splitlines() if ln.lstrip().startswith("#")] == [
        ln for ln in before.splitlines() if ln.lstrip().startswith("#")
    ]


def test_a_fitted_value_the_loader_refuses_is_never_written(thresholds_copy):
    before = thresholds_copy.read_text()
    with pytest.raises(ValueError, match="relevance.refuse_below"):
        write_fitted(thresholds_copy, {"relevance.refuse_below": 5.0, "relevance.answer_at": 1.0})
    assert thresholds_copy.read_text() == before
