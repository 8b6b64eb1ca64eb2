"""Two report sets compared: moves worst first, added and removed questions, aggregate deltas."""

from __future__ import annotations

from rag_contract.quality.report_diff import (
    ReportSet,
    diff_reports,
    load_report_set,
    render_markdown,
    render_text,
    save_report_set,
)


def _set(ranks: dict, states: dict | None = None, mrr: float = 0.5) -> ReportSet:
    questions = [{"id": q, "rank": r} for q, r in ranks.items()]
    mode = {"recall@1": 0.5, "recall@3": 0.6, "recall@5": 0.7, "recall@10": 0.8, "mrr": mrr, "questions": questions}
    answers = None
    if states is not None:
        answers = {
            "grounded_rate": 0.5,
            "state_agreement": 0.5,
            "answered_unanswerable": 1,
            "questions": [{"id": q, "state": s} for q, s in states.items()],
        }
    return ReportSet({"index_version": "v1", "serving_mode": "fused", "modes": {"fused": mode}}, answers)


def test_moves_are_worst_first_with_new_and_removed_questions_and_aggregate_deltas():
    old = _set({"q1": 1, "q2": 4, "q3": 2, "q9": 1}, {"q1": "grounded", "q2": "partial", "q3": "grounded"})
    new = _set({"q1": 6, "q2": 1, "q3": 2, "q4": 3}, {"q1": "grounded", "q2": "partial", "q3": "partial"}, mrr=0.4)
    diff = diff_reports(old, new)
    assert [m.id for m in diff.moves] == ["q1", "q3", "q2"]  # +5, a state change, then -3
    assert diff.move("q1").rank_text() == "1 → 6 (+5)" and diff.move("q3").state_text() == "grounded → partial"
    assert diff.added == ("q4",) and diff.removed == ("q9",) and diff.unchanged == 0
    assert {a.name: a.delta for a in diff.aggregates}["mrr"] == -0.1
    assert "| q1 | 1 → 6 (+5) | grounded |" in render_markdown(diff)
    assert "q1         1 → 6 (+5)" in render_text(diff)


def test_a_miss_ranks_below_everything_and_states_need_answers_on_both_sides():
    diff = diff_reports(_set({"q1": 3}, {"q1": "grounded"}), _set({"q1": None}))
    assert diff.moves[0].rank_delta > 0 and diff.moves[0].new_state is None
    assert diff.removed == ()  # no answers report on one side: states are not compared at all


def test_a_saved_report_set_reads_back(tmp_path):
    reports = _set({"q1": 2}, {"q1": "partial"})
    save_report_set(reports, tmp_path / "results")
    assert load_report_set(tmp_path / "results") == reports
