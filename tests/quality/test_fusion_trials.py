"""The fusion trials measure what calibration measures: the committed trial reproduces the
calibration report's out-of-fold retrieval, and a column that knows the answer is found."""

from __future__ import annotations

import json

import numpy as np
import pytest

from rag_contract.quality.calibration import FOLDS, expected_rank, fit_fusion, folds
from rag_contract.quality.evaluation import vectors_for
from tools.fusion_trials import TRIALS, Trial, main, out_of_fold


@pytest.fixture(scope="module")
def vectors(project, index):
    return vectors_for(index, project.questions.questions, None)


def served_out_of_fold(index, questions, vectors) -> dict:
    """Calibration's out-of-fold retrieval over the served vectors, from its own functions: each
    fold's fusion fitted on the other folds, its questions ranked (``calibrate`` reports this
    unless an adapted index's fold models rank them instead)."""
    assignment = folds(questions)
    ranks = {}
    for f in range(FOLDS):
        fusion = fit_fusion(index, [q for q in questions if q.answerable and assignment[q.id] != f], vectors)
        for q in questions:
            if q.answerable and assignment[q.id] == f:
                ranks[q.id] = expected_rank(index, q, vectors[q.question], fusion)
    n = len(ranks)
    return {
        "recall@1": round(sum(x <= 1 for x in ranks.values()) / n, 4),
        "mrr": round(sum(1 / x for x in ranks.values() if x <= 10) / n, 4),
        "recall@10": round(sum(x <= 10 for x in ranks.values()) / n, 4),
    }


def test_the_committed_trial_is_calibrations_out_of_fold_retrieval(project, index, root, vectors):
    got = out_of_fold(index, TRIALS["committed"], project.questions.questions, vectors)
    assert got == served_out_of_fold(index, project.questions.questions, vectors)
    report = json.loads((root / "eval" / "results" / "calibration.json").read_text())
    if report["out_of_fold_retrieval"] == "served vectors":  # else the adapted fold models ranked them
        assert got == {k: report["out_of_fold"]["retrieval"][k] for k in ("recall@1", "mrr", "recall@10")}


def test_a_column_that_marks_the_expected_sections_ranks_them_first(project, index, vectors):
    position = {sid: i for i, sid in enumerate(index.section_order)}
    marks = {}
    for q in project.questions.questions:
        if q.answerable:
            column = np.zeros(len(position))
            column[[position[s] for s in q.expected]] = 1.0
            marks[vectors[q.question].tobytes()] = column
    oracle = Trial(lambda _index, _f, vector: [marks[vector.tobytes()]])
    assert out_of_fold(index, oracle, project.questions.questions, vectors)["recall@1"] == 1.0


def test_an_unknown_trial_is_refused_by_name(capsys):
    with pytest.raises(SystemExit):
        main(["no_such_trial"])
    assert "no_such_trial" in capsys.readouterr().err
