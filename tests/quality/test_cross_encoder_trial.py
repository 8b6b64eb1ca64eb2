"""The cross-encoder trial (tools.cross_encoder_trial, tools.cross_encoder_pairs): how it builds
training pairs, keeps folds apart, re-ranks and measures. Training needs torch and is run by hand
(docs/adr/0011); these rules, and the committed figures' agreement with the items they come from,
are what its results rest on."""

import json
from pathlib import Path

import pytest

from rag_contract.config.questions import Question
from rag_contract.quality.calibration import folds
from tools.cross_encoder_pairs import NEGATIVES, RERANK, key, quotable, scored_pairs, training_pairs
from tools.cross_encoder_trial import (
    METHODS,
    answer,
    confidences,
    cut_within,
    items,
    point,
    reranked,
    summarise,
)

RESULTS = Path(__file__).parents[2] / "eval" / "results" / "cross_encoder_trial.json"


def cand(claim, label=False, rank=0, selector=0.0):
    return {"claim": claim, "label": label, "rank": rank, "selector": selector, "features": [0.5] * 7}


def row(id_, fold, answerable=True, cands=(), sections=3, set_="committed"):
    return {
        "project": "rfc",
        "set": set_,
        "id": id_,
        "question": f"question {id_}",
        "answerable": answerable,
        "evidence": answerable,
        "fold": fold,
        "sections": sections,
        "candidates": list(cands),
    }


def test_training_pairs_leave_the_fold_out_and_keep_every_positive_and_the_hardest_negatives():
    negatives = [cand(f"n{i}") for i in range(NEGATIVES + 3)]
    rows = [
        row("a", 0, cands=[cand("yes", True), *negatives]),
        row("b", 1, cands=[negatives[0], cand("late yes", True, rank=4), *negatives[1:]]),
        row("c", 1, answerable=False, cands=negatives),
    ]
    pairs = training_pairs(rows, 0)
    assert all(q != "question a" for q, _, _ in pairs)  # fold 0 is held out
    assert ("question b", "late yes", 1.0) in pairs  # a positive from any offered passage
    b_negatives = [t for q, t, y in pairs if q == "question b" and y == 0.0]
    assert b_negatives == [f"n{i}" for i in range(NEGATIVES)]  # the selector's best non-answers, in order
    assert [y for q, _, y in pairs if q == "question c"] == [0.0] * NEGATIVES
    assert {q for q, _, _ in training_pairs(rows, 1)} == {"question a"}


def test_scored_pairs_are_the_folds_best_quotable_committed_candidates_only():
    many = [cand(f"s{i}") for i in range(RERANK + 2)]
    rows = [
        row("a", 0, cands=[cand("far", rank=3), *many], sections=3),
        row("b", 1, cands=many),
        row("dev", 0, cands=many, set_="rfc-sealed-2"),
    ]
    got = list(scored_pairs(rows, 0))
    assert [t for _, _, t in got] == [f"s{i}" for i in range(RERANK)]  # rank 3 is past the drafter's 3 sections
    assert {k for k, _, _ in got} == {key(rows[0])} == {"rfc:committed:a"}
    assert quotable(rows[0])[0]["claim"] == "s0"


def test_every_question_falls_in_exactly_one_fold_whatever_the_trial_adds():
    # the trial reuses calibration's folds: rows built from them never train the model that scores them
    qs = [Question(id=f"q{i}", question=f"q{i}?", answerable=i % 3 != 0) for i in range(20)]
    assignment = folds(qs)
    rows = [row(q.id, assignment[q.id], q.answerable, [cand("x", q.answerable)]) for q in qs]
    for f in range(5):
        trained = {q for q, _, _ in training_pairs(rows, f)}
        scored = {q for _, q, _ in scored_pairs(rows, f)}
        assert not trained & scored
        assert scored == {r["question"] for r in rows if r["fold"] == f}


def test_reranked_orders_the_top_by_score_and_keeps_the_rest_in_selector_order():
    cs = [cand(f"s{i}") for i in range(RERANK + 2)]
    r = row("a", 0, cands=cs)
    scores = [float(i) for i in range(RERANK)]  # the last of the top scores best
    order = reranked(r, scores)
    assert [c["claim"] for c in order[:2]] == [f"s{RERANK - 1}", f"s{RERANK - 2}"]
    assert [c["claim"] for c in order[RERANK:]] == [f"s{RERANK}", f"s{RERANK + 1}"]
    assert reranked(r, None) == cs
    with pytest.raises(ValueError, match="scores for"):
        reranked(r, [1.0])


def test_answer_drops_a_claim_inside_a_kept_one_as_the_drafter_does():
    order = [cand("A long claim."), cand("long claim"), cand("B."), cand("C."), cand("D.")]
    assert [c["claim"] for c in answer(order)] == ["A long claim.", "B.", "C."]


def test_items_count_hits_at_one_two_three_and_read_confidence_from_the_best():
    r = row("a", 0, cands=[cand("s0", selector=2.0), cand("s1", True, selector=1.0), cand("s2")])
    (it,) = items([r, row("dev", 0, set_="sealed"), row("later", 1)], {key(r): [0.1, 3.0, -1.0]}, {0})
    assert it["selector_hits"] == [False, True, True]
    assert it["ce_hits"] == [True, True, True]
    assert it["selector_logit"] == 2.0
    assert (it["ce_logit"], it["ce_margin"]) == (3.0, pytest.approx(2.9))


def _item(fold, answerable, hit, sel, ce):
    return {
        "key": f"k{fold}{sel}{ce}",
        "project": "rfc",
        "fold": fold,
        "answerable": answerable,
        "evidence": answerable,
        "selector_hits": [hit] * 3,
        "ce_hits": [hit] * 3,
        "selector_logit": sel,
        "ce_logit": ce,
        "ce_margin": 0.0,
        "features": [0.5] * 7,
    }


def test_the_cut_is_the_most_answering_one_within_the_false_answer_bound():
    its = [_item(0, False, False, 0, c) for c in (1.0, 2.0, 3.0)] + [_item(0, True, True, 0, 0.5)]
    conf = [i["ce_logit"] for i in its]
    assert cut_within(its, conf, 0.34) == 3.0  # one of three unanswerable shown at most
    assert cut_within(its, conf, 0.0) == 4.0  # none: above every confidence
    assert cut_within(its, conf, 1.0) == 0.5
    p = point(its, conf, "cross_encoder", lambda n: conf[n] >= 2.0)
    assert (p["coverage"], p["false_answer_rate"], p["accuracy_when_answered"]) == (0.0, 0.6667, None)


def test_a_confidence_that_separates_reaches_the_floor_and_one_that_does_not_falls_short():
    its = []
    for f in range(5):
        its += [_item(f, True, True, 0.0, 5.0 + f), _item(f, True, True, 0.0, 4.0), _item(f, True, False, 0.0, 1.0)]
        its += [_item(f, False, False, 0.0, 0.5)]
    good = summarise(its)["methods"]["cross_encoder"]
    assert good["reaches_floor"]
    # the operating point bounds false answers only: it answers the inaccurate one above the unanswerable
    op = good["operating_point"]
    assert (op["coverage"], op["accuracy_when_answered"], op["false_answer_rate"]) == (1.0, 0.6667, 0.0)
    assert good["best_at_coverage_floor"]["accuracy_when_answered"] == 1.0
    flipped = [i | {"ce_logit": -i["ce_logit"]} for i in its]
    assert not summarise(flipped)["methods"]["cross_encoder"]["reaches_floor"]


def test_the_combined_confidence_of_a_fold_is_fitted_without_it():
    its = [_item(f, True, f % 2 == 0, 0.0, float(f)) for f in range(5) for _ in range(4)]
    base = confidences(its, "combined")
    changed = [i | {"selector_hits": [False] * 3, "ce_hits": [False] * 3} if i["fold"] == 0 else i for i in its]
    again = confidences(changed, "combined")
    # fold 0's labels changed: its own confidences do not move (they never saw them), the others' do
    assert [c for c, i in zip(again, its, strict=True) if i["fold"] == 0] == [
        c for c, i in zip(base, its, strict=True) if i["fold"] == 0
    ]
    assert again != base


@pytest.mark.parametrize("path", sorted(RESULTS.parent.glob("cross_encoder_trial*.json")), ids=lambda p: p.name)
def test_the_committed_figures_are_those_of_the_committed_items(path):
    result = json.loads(path.read_text())
    for name, figures in result["projects"].items():
        assert summarise([i for i in result["items"] if i["project"] == name]) == figures, name
    assert {i["fold"] for i in result["items"]} == set(result["folds_scored"])
    assert set(next(iter(result["projects"].values()))["methods"]) == set(METHODS)


ADR = Path(__file__).parents[2] / "docs" / "adr" / "0011-answers-that-say-the-answer.md"


def _two(v):
    return "n/a" if v is None else f"{v:.2f}"


@pytest.mark.skipif(not RESULTS.is_file(), reason="no committed trial results")
def test_the_adr_table_shows_the_committed_figures():
    result = json.loads(RESULTS.read_text())
    text = ADR.read_text()
    names = {"rfc": "RFC", "starlette": "Starlette", "cross_encoder": "cross-encoder"}
    for project, figures in result["projects"].items():
        for method, m in figures["methods"].items():
            hits = figures["best_k_carries_evidence"].get(method)
            op, best = m["operating_point"], m["best_at_coverage_floor"]
            cells = [
                names[project],
                names.get(method, method),
                " / ".join(_two(v) for v in hits) if hits else "same order",
                _two(m["all_answered"]["accuracy_when_answered"]),
                " / ".join(_two(op[k]) for k in ("coverage", "accuracy_when_answered", "false_answer_rate")),
                f"{_two(best['accuracy_when_answered'])} (false {_two(best['false_answer_rate'])})",
            ]
            assert "| " + " | ".join(cells) + " |" in text, (project, method)
