"""The refusal-cost report: committed figures equal a fresh run over the committed calibration
report, and each count is the correct answers whose logit is no higher than the question's."""

from __future__ import annotations

import json

from tools.refusal_cost import CALIBRATION, REPORT, cost


def _row(qid: str, logit: float, state: str = "grounded", cites: bool = True) -> dict:
    row = {"id": qid, "in_sample_logit": logit, "in_sample_state": state, "in_sample_cites_expected": cites}
    return row | ({"in_sample_rank": 1} if qid.startswith("q") else {})


def _calibration(rows: list[dict], answered: list[str]) -> dict:
    return {
        "index_version": "v",
        "question_fingerprint": "f",
        "params": {"relevance.answer_at": 0.0},
        "in_sample": {"answers": {"answered_unanswerable": answered}},
        "questions": rows,
    }


def test_committed_report_matches_a_fresh_run(root):
    committed = json.loads((root / REPORT).read_text())
    fresh = cost(json.loads((root / CALIBRATION).read_text()))
    assert committed == json.loads(json.dumps(fresh)), "rerun `python -m tools.refusal_cost` and commit"


def test_refusing_a_question_costs_the_correct_answers_at_or_below_its_logit():
    rows = [
        _row("q1", 0.5),
        _row("q2", 1.0),
        _row("q3", 2.0),
        _row("q4", 0.1, cites=False),  # grounded but citing the wrong section: not a correct answer
        _row("q5", 0.2, state="partial"),  # not served as an answer
        _row("u1", 1.0),
        _row("u2", 3.0),
        _row("u3", 0.0, state="unsupported"),
    ]
    out = cost(_calibration(rows, ["u1", "u2"]))
    assert out["correct_answers"] == 3
    assert out["answered_unanswerable"] == [
        {"id": "u2", "logit": 3.0, "correct_answers_refused_with_it": 3},
        {"id": "u1", "logit": 1.0, "correct_answers_refused_with_it": 2},  # a tie goes with it
    ]
