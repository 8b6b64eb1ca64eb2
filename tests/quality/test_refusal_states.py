"""The refusal-state separability report: committed figures equal a fresh run, and its
leave-one-out measure can tell a separable label from one it cannot predict."""

from __future__ import annotations

import json

from rag_contract.answering.relevance import ANSWERS, OFF_TOPIC, Features
from rag_contract.quality.calibration import Row
from tools.refusal_states import REPORT, leave_one_out, report


def _row(i: int, state: str, similarity: float, unknown: bool = False) -> Row:
    return Row(
        f"u{i}", False, state, Features(similarity, 0.2, 0.1, 0.5, 2.0), OFF_TOPIC if unknown else ANSWERS, True, False
    )


def test_committed_report_matches_a_fresh_run(project, root):
    committed = json.loads((root / REPORT).read_text())
    assert committed == json.loads(json.dumps(report(project))), "rerun `python -m tools.refusal_states` and commit"


def test_the_report_counts_every_committed_refusal(project, root):
    committed = json.loads((root / REPORT).read_text())
    refusals = [q for q in project.questions.questions if not q.answerable]
    assert committed["refusals"] == len(refusals)
    assert sum(committed["labels"].values()) == committed["with_kept_claims"] <= len(refusals)


def test_a_feature_that_separates_the_labels_is_predicted_left_out():
    rows = [_row(i, "partial", 0.8 + i / 100) for i in range(6)] + [
        _row(10 + i, "unsupported", 0.2 + i / 100) for i in range(6)
    ]
    assert leave_one_out(rows, ("similarity",)) == 1.0


def test_a_feature_unrelated_to_the_labels_is_not():
    # each similarity value carries both labels equally: leaving one out tips the fit the other way
    rows = [_row(i, "partial" if i % 2 else "unsupported", (0.1, 0.9, 0.9, 0.1)[i % 4]) for i in range(12)]
    assert leave_one_out(rows, ("similarity",)) < 0.5


def test_the_unknown_rule_is_a_feature_of_its_own():
    rows = [_row(i, "unsupported", 0.5, unknown=True) for i in range(6)] + [
        _row(10 + i, "partial", 0.5) for i in range(6)
    ]
    assert leave_one_out(rows, ("unknown",)) == 1.0
