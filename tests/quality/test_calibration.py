"""Calibration's pieces: folds, the logistic fit, and the states it predicts being the service's."""

from __future__ import annotations

import numpy as np

from rag_contract.answering.relevance import ANSWERS, OFF_TOPIC, STOPS_SHORT, Features
from rag_contract.config.questions import Question
from rag_contract.config.thresholds import RelevanceConfig
from rag_contract.quality.calibration import (
    FOLDS,
    Row,
    _answers,
    fit_logistic,
    fit_relevance,
    folds,
    grounded_citing,
    state_of,
)


def test_folds_are_stratified_deterministic_and_stable_under_additions():
    qs = [Question(f"q{i}", "x", ("s",)) for i in range(50)] + [
        Question(f"u{i}", "x", (), answerable=False, expected_state="unsupported", why="w") for i in range(10)
    ]
    a = folds(qs)
    assert a == folds(list(reversed(qs)))
    for stratum in ("q", "u"):
        sizes = np.bincount([f for qid, f in a.items() if qid.startswith(stratum)], minlength=FOLDS)
        assert sizes.max() - sizes.min() <= 1
    grown = folds(qs + [Question("q999", "x", ("s",))])
    moved = sum(a[q] != grown[q] for q in a)
    assert moved < len(a) / 2  # a new question does not reshuffle the rest


def test_logistic_fit_separates_a_separable_set_and_returns_raw_weights():
    x = np.array([[0.0], [0.1], [0.2], [0.8], [0.9], [1.0]])
    y = np.array([0, 0, 0, 1, 1, 1], dtype=float)
    w, b = fit_logistic(x, y)
    z = x @ w + b
    assert (z[y == 1] > 0).all() and (z[y == 0] < 0).all()


def row(qid, answerable, sim, cites=False, expected_state=None, all_kept=True, ceiling=ANSWERS) -> Row:
    return Row(qid, answerable, expected_state, Features(sim, 0.0, 0.0, 0.0, 0.0), ceiling, all_kept, cites, cites)


CONFIG = RelevanceConfig(
    {
        "bias": 0.0,
        "similarity": 1.0,
        "coverage": 0.0,
        "unseen": 0.0,
        "section": 0.0,
        "retrieval": 0.0,
        "unmentioned": 0.0,
    },
    0.5,
    0.2,
)


def test_state_of_is_the_service_decision():
    assert state_of(row("q", True, 0.6), CONFIG) == "grounded"
    assert state_of(row("q", True, 0.6, all_kept=False), CONFIG) == "partial"
    assert state_of(row("q", True, 0.3), CONFIG) == "partial"
    assert state_of(row("q", True, 0.1), CONFIG) == "unsupported"
    assert state_of(row("q", True, 0.9, ceiling=OFF_TOPIC), CONFIG) == "unsupported"  # an unknown subject
    assert state_of(row("q", True, 0.9, ceiling=STOPS_SHORT), CONFIG) == "partial"  # no number for "how long"
    assert state_of(row("q", True, 0.1, ceiling=STOPS_SHORT), CONFIG) == "unsupported"
    assert state_of(Row("q", True, None, None, OFF_TOPIC, True, False), CONFIG) == "unsupported"


def test_the_answer_threshold_refuses_what_an_invented_answer_would_cost():
    rows = [row(f"q{i}", True, 0.5 + i / 100, cites=True) for i in range(10)]
    rows += [row("u1", False, 0.58, expected_state="unsupported")]
    cheap = fit_relevance(rows, false_answer_cost=0.5)
    dear = fit_relevance(rows, false_answer_cost=100.0)
    assert state_of(rows[-1], dear) != "grounded" and dear.answer_at > cheap.answer_at
    assert sum(state_of(r, cheap) == "grounded" for r in rows[:-1]) >= sum(
        state_of(r, dear) == "grounded" for r in rows[:-1]
    )


def test_answers_count_what_a_reader_gets_an_answer_from():
    qs = [
        Question("a1", "q1", ("s#1",)),
        Question("a2", "q2", ("s#1",)),
        Question("a3", "q3", ("s#1",)),
        Question("a4", "q4", ("s#1",)),
        Question("u1", "q5", answerable=False, expected_state="partial"),
    ]
    rows = {
        "a1": row("a1", True, 0.9, cites=True),
        "a2": row("a2", True, 0.5, cites=True),
        "a3": row("a3", True, 0.5, cites=False),
        "a4": row("a4", True, 0.1, cites=True),
        "u1": row("u1", False, 0.9),
    }
    states = {"a1": "grounded", "a2": "partial", "a3": "grounded", "a4": "unsupported", "u1": "grounded"}
    out = _answers(qs, rows, states)
    assert out["grounded_citing_expected"] == 0.25  # a1
    assert out["answered_citing_expected"] == 0.5  # a1 and a2: partial counts, a citation is needed, a refusal is none
    assert out["answered_unanswerable"] == ["u1"]


def test_the_grounded_floor_bounds_how_far_the_cost_pushes_the_threshold():
    # an unanswerable question above most answers: at a high cost the fit refuses nearly all of them
    rows = [row(f"q{i}", True, 0.5 + i / 100, cites=True) for i in range(10)]
    rows += [row(f"u{i}", False, s, expected_state="partial") for i, s in ((1, 0.545), (2, 0.2), (3, 0.575))]
    free = fit_relevance(rows, false_answer_cost=100.0)
    assert grounded_citing(rows, free) < 0.5
    floored = fit_relevance(rows, false_answer_cost=100.0, min_grounded_citing=0.5)
    assert grounded_citing(rows, floored) >= 0.5
    # within the floor the cost still decides: the cut above u1 (which nets more), not the lowest
    assert grounded_citing(rows, floored) == 0.5 and state_of(rows[10], floored) == "unsupported"
    assert fit_relevance(rows, 100.0, min_grounded_citing=0.0) == free  # a floor of nothing binds nothing


def test_a_floor_no_cut_keeps_leaves_the_most_answering_cut():
    rows = [row("q1", True, 0.6, cites=False), row("u1", False, 0.9, expected_state="partial")]
    config = fit_relevance(rows, 8.0, min_grounded_citing=0.9)
    assert state_of(rows[0], config) == "grounded" and state_of(rows[1], config) == "grounded"


def test_grounded_citing_counts_answerable_rows_only():
    rows = [row("q1", True, 0.9, cites=True), row("q2", True, 0.9), row("u1", False, 0.9, expected_state="partial")]
    assert grounded_citing(rows, CONFIG) == 0.5
    assert grounded_citing([], CONFIG) == 0.0


def test_the_false_answer_bound_holds_in_every_source_of_questions():
    # pooled, two of twenty refusals shown is within a tenth; but both are the committed set's,
    # a fifth of its ten: the operating point must hold for that source too
    answers = [
        Row(f"q{i}", True, None, Features(0.5 + i / 100, 0, 0, 0, 0), ANSWERS, True, True, True) for i in range(10)
    ]
    committed = [row("c0", False, 0.58, expected_state="partial"), row("c1", False, 0.56, expected_state="partial")]
    committed += [row(f"c{i}", False, 0.1, expected_state="unsupported") for i in range(2, 10)]
    sealed = [row(f"d{i}", False, 0.1, expected_state="unsupported") for i in range(10)]
    rows = [*answers, *committed, *sealed]
    pooled = fit_relevance(rows, max_false_answer_rate=0.1)
    assert state_of(committed[1], pooled) == "grounded"  # the pool alone lets it through
    sources = (frozenset(r.id for r in [*answers, *committed]), frozenset(r.id for r in sealed))
    held = fit_relevance(rows, max_false_answer_rate=0.1, sources=sources)
    assert state_of(committed[1], held) == "unsupported" and state_of(committed[0], held) == "grounded"
    assert held.answer_at > pooled.answer_at
    assert fit_relevance(rows, max_false_answer_rate=0.1, sources=(frozenset(r.id for r in rows),)) == pooled
