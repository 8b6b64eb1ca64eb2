"""The gate's verdict for a CI page: escaping, the bar's line, worst first, at most ten, bounded."""

from __future__ import annotations

from rag_contract.quality.ci_report import (
    FailedItem,
    annotation,
    bar_line,
    bar_path,
    error_annotations,
    escape_property,
    step_summary,
    worst_first,
)
from rag_contract.quality.report_diff import ReportSet, diff_reports

THRESHOLDS = """\
measured_on: "abc"
retrieval:
  floors:
    recall@1: 0.5
  ceilings:
    q01: 3
    q02: 4
budget:
  max_request_ms: 40
"""


def test_data_and_properties_are_escaped_so_a_message_cannot_end_the_command():
    line = annotation("eval/thresholds.yaml", 6, "gate: a,b", "100% sure\r\nnext: line")
    assert line == "::error file=eval/thresholds.yaml,line=6,title=gate%3A a%2Cb::100%25 sure%0D%0Anext: line"
    assert escape_property("a:b,c%") == "a%3Ab%2Cc%25"


def test_each_check_points_at_its_bar_and_falls_back_to_a_parent_then_line_one():
    assert bar_line(THRESHOLDS, bar_path("retrieval/ceiling/q02")) == 7
    assert bar_line(THRESHOLDS, bar_path("retrieval/floor/recall@1")) == 4
    assert bar_line(THRESHOLDS, bar_path("budget/latency")) == 9
    assert bar_line(THRESHOLDS, bar_path("retrieval/ceiling/q77")) == 5  # no entry: the ceilings block
    assert bar_line(THRESHOLDS, bar_path("report/retrieval")) == 1
    assert bar_line(": not yaml: [", bar_path("retrieval/ceiling/q01")) == 1


def test_worst_first_and_at_most_ten_annotations():
    failures = [FailedItem(f"retrieval/ceiling/q{i:02d}", "m", {"rank": 3 + i, "ceiling": 3}) for i in range(1, 13)]
    failures.append(FailedItem("retrieval/floor/recall@1", "m", {"measured": 0.4, "floor": 0.5}))
    ordered = worst_first(failures)
    assert ordered[0].check_id == "retrieval/floor/recall@1"
    assert ordered[1].check_id == "retrieval/ceiling/q12"  # 12 past its ceiling: the worst ceiling
    assert len(error_annotations(failures, THRESHOLDS, "eval/thresholds.yaml")) == 10


def _reports(ranks: dict[str, int]) -> ReportSet:
    questions = [{"id": q, "rank": r} for q, r in ranks.items()]
    mode = {"recall@1": 0.5, "recall@3": 0.5, "recall@5": 0.5, "recall@10": 0.5, "mrr": 0.5, "questions": questions}
    return ReportSet({"index_version": "v", "serving_mode": "fused", "modes": {"fused": mode}})


def test_the_summary_lists_failures_before_the_rank_deltas_and_stays_within_its_bound():
    diff = diff_reports(_reports({"q01": 1, "q02": 5}), _reports({"q01": 7, "q02": 2}))
    failure = FailedItem("retrieval/ceiling/q01", "q01 | is at rank 7\nceiling 3", {"rank": 7, "ceiling": 3})
    text = step_summary([failure], 10, diff)
    assert "| `retrieval/ceiling/q01` | rank 1 → 7, ceiling 3 | q01 \\| is at rank 7 ceiling 3 |" in text
    assert text.index("`retrieval/ceiling/q01`") < text.index("| q01 | 1 → 7 (+6) |") < text.index("| q02 | 5 → 2")
    many = [FailedItem(f"retrieval/ceiling/q{i}", "x" * 300, {"rank": 9, "ceiling": 3}) for i in range(500)]
    bounded = step_summary(many, 0, diff, max_bytes=4096, max_rows=500)
    assert len(bounded.encode()) <= 4096 and bounded.endswith("(truncated: the full report is in the job log)\n")


def test_a_questions_answer_item_follows_the_rank_that_explains_it_and_points_at_its_held_level():
    failures = [
        FailedItem("answers/answer/q23", "m", {"state": "unsupported", "level": "unanswered", "held_at": "accurate"}),
        FailedItem("retrieval/ceiling/q23", "m", {"rank": 4, "ceiling": 3}),
        FailedItem("answers/min_coverage", "m", {"measured": 0.4, "bar": 0.5}),
    ]
    assert [f.check_id for f in worst_first(failures)] == [
        "answers/min_coverage",
        "retrieval/ceiling/q23",
        "answers/answer/q23",
    ]
    assert bar_path("answers/answer/q23") == ("answers", "known_misses", "q23")
