"""Calibration's out-of-fold ranking through fold legs is calibration's own: with every fold's
legs taken from the committed vectors, it gives exactly the ranks of the per-fold fusion fit on
those vectors. So the only thing that changes with per-fold adapted models is the vectors."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from rag_contract.project import Paths
from rag_contract.quality.adapted_folds import FOLDS_FILE, FoldLegsError, fold_meta, load_fold_legs, save_fold_legs
from rag_contract.quality.calibration import (
    FOLDS,
    adapted_fold_legs,
    adapted_oof_ranks,
    expected_rank,
    fit_fusion,
    folds,
)
from rag_contract.retrieval.ranking import vector_legs


def test_fold_legs_of_the_committed_vectors_rank_as_calibration_does(tmp_path, project, index):
    questions = project.questions.questions
    answerable = [q for q in questions if q.answerable]
    assignment = folds(questions)
    same = [vector_legs(index, index.question_vectors[q.question]) for q in answerable]
    path = tmp_path / "legs.npz"
    save_fold_legs(
        path, fold_meta(project, assignment), [q.question for q in answerable], dict.fromkeys(range(FOLDS), same)
    )
    ranks = adapted_oof_ranks(index, questions, assignment, load_fold_legs(path, fold_meta(project, assignment)))
    vectors = {q.question: index.question_vectors[q.question] for q in answerable}
    for f in range(FOLDS):
        fusion = fit_fusion(index, [q for q in answerable if assignment[q.id] != f], vectors)
        for q in answerable:
            if assignment[q.id] == f:
                assert ranks[q.id] == expected_rank(index, q, vectors[q.question], fusion), q.id


def test_a_folds_own_legs_decide_its_ranks(tmp_path, project, index):
    """Legs that put the expected section first for one fold move only that fold's ranks."""
    questions = project.questions.questions
    answerable = [q for q in questions if q.answerable]
    assignment = folds(questions)
    position = {sid: i for i, sid in enumerate(index.section_order)}
    same = [vector_legs(index, index.question_vectors[q.question]) for q in answerable]
    oracle = []
    for q, (dense, sentence) in zip(answerable, same, strict=True):
        dense, sentence = dense.copy(), sentence.copy()
        for sid in q.expected:
            dense[position[sid]] = sentence[position[sid]] = 1.0
        oracle.append((dense, sentence))
    path = tmp_path / "legs.npz"
    meta = fold_meta(project, assignment)
    save_fold_legs(path, meta, [q.question for q in answerable], {0: oracle} | {f: same for f in range(1, FOLDS)})
    legs = load_fold_legs(path, meta)
    moved = adapted_oof_ranks(index, questions, assignment, legs)
    save_fold_legs(path, meta, [q.question for q in answerable], dict.fromkeys(range(FOLDS), same))
    base = adapted_oof_ranks(index, questions, assignment, load_fold_legs(path, meta))
    fold0 = [q.id for q in answerable if assignment[q.id] == 0]
    assert np.mean([moved[i] for i in fold0]) < np.mean([base[i] for i in fold0])
    assert all(moved[q.id] == base[q.id] for q in answerable if assignment[q.id] != 0)


def test_an_adapted_index_reads_the_fold_models_only_from_a_complete_file_of_its_inputs(tmp_path, project, index):
    questions = project.questions.questions
    answerable = [q for q in questions if q.answerable]
    assignment = folds(questions)
    here = replace(project, paths=Paths(tmp_path))
    path = tmp_path / "models" / FOLDS_FILE
    source, legs = adapted_fold_legs(here, assignment)
    assert legs is None and "tuned on these questions" in source and "missing" in source
    same = [vector_legs(index, index.question_vectors[q.question]) for q in answerable]
    texts = [q.question for q in answerable]
    save_fold_legs(path, fold_meta(project, assignment), texts, {0: same})
    source, legs = adapted_fold_legs(here, assignment)
    assert legs is None and "lacks folds [1, 2, 3, 4]" in source
    save_fold_legs(path, fold_meta(project, assignment), texts, dict.fromkeys(range(FOLDS), same))
    source, legs = adapted_fold_legs(here, assignment)
    assert legs is not None and source.startswith("one adapted model per fold")
    save_fold_legs(path, fold_meta(project, assignment) | {"question_fingerprint": "other"}, texts, {0: same})
    with pytest.raises(FoldLegsError, match="question_fingerprint"):
        adapted_fold_legs(here, assignment)
