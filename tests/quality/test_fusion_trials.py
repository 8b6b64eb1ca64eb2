"""The fusion trials measure what calibration measures: the committed trial reproduces the
calibration report's out-of-fold retrieval, and a column that knows the answer is found."""

from __future__ import annotations

import json

import numpy as np
import pytest

from rag_contract.quality.evaluation import vectors_for
from tools.fusion_trials import TRIALS, Trial, main, out_of_fold


@pytest.fixture(scope="module")
def vectors(project, index):
    return vectors_for(index, project.questions.questions, None)


def test_the_committed_trial_is_the_calibration_reports_out_of_fold_retrieval(project, index, root, vectors):
    report = json.loads((root / "eval" / "results" / "calibration.json").read_text())["out_of_fold"]["retrieval"]
    got = out_of_fold(index, TRIALS["committed"], project.questions.questions, vectors)
    assert got == {k: report[k] for k in ("recall@1", "mrr", "recall@10")}


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
