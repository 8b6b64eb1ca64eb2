"""A sealed set's ranks under a trial embedder are calibration's own: with the committed vectors as
legs, they are exactly the ranks of ``fit_fusion`` fitted on the other questions; and they come from
the held questions' own legs, so a better embedding of them moves them and nothing else."""

from __future__ import annotations

import numpy as np

from rag_contract.quality.calibration import expected_rank, fit_fusion
from rag_contract.retrieval.ranking import vector_legs
from tools.encoder_trial import moved, sealed_ranks


def _split(project):
    questions = project.questions.questions
    held = list(questions[::7])  # answerable and not: only the answerable ones are ranked
    fitted = [q for q in questions if q not in held]
    return fitted, held


def test_sealed_ranks_of_the_committed_vectors_are_those_of_the_fusion_fitted_on_the_rest(project, index):
    fitted, held = _split(project)
    legs = {q.question: vector_legs(index, index.question_vectors[q.question]) for q in (*fitted, *held)}
    ranks = sealed_ranks(index, fitted, held, legs)
    assert set(ranks) == {q.id for q in held if q.answerable}
    assert any(not q.answerable for q in held)
    vectors = {q.question: index.question_vectors[q.question] for q in fitted if q.answerable}
    fusion = fit_fusion(index, [q for q in fitted if q.answerable], vectors)
    for q in held:
        if q.answerable:
            assert ranks[q.id] == expected_rank(index, q, index.question_vectors[q.question], fusion), q.id


def test_the_held_questions_own_legs_decide_their_ranks(project, index):
    fitted, held = _split(project)
    legs = {q.question: vector_legs(index, index.question_vectors[q.question]) for q in (*fitted, *held)}
    base = sealed_ranks(index, fitted, held, legs)
    position = {sid: i for i, sid in enumerate(index.section_order)}
    oracle = dict(legs)
    better = [q for q in held if q.answerable][::2]
    for q in better:
        dense, sentence = (leg.copy() for leg in legs[q.question])
        for sid in q.expected:
            dense[position[sid]] = sentence[position[sid]] = 1.0
        oracle[q.question] = (dense, sentence)
    moved = sealed_ranks(index, fitted, held, oracle)
    assert np.mean([moved[q.id] for q in better]) < np.mean([base[q.id] for q in better])
    # the fusion is fitted on the committed questions alone: a held question's legs move no other
    assert all(moved[i] == base[i] for i in base if i not in {q.id for q in better})


def test_moved_counts_only_the_questions_ranked_both_times():
    before = {"a": 1, "b": 3, "c": 2, "d": 5, "only_before": 1}
    after = {"a": 2, "b": 1, "c": 2, "d": 4, "only_after": 9}
    assert moved(before, after) == {"questions": 4, "up": 2, "down": 1, "to_first": 1, "off_first": 1}
