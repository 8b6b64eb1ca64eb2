"""The learned judge's trial (tools.judge_trial, tools.judge_pairs): how it builds pairs and measures a veto. Training
needs torch and is run by hand (ADR 0008); these rules are what its figures rest on."""

import math

import pytest

from tools.judge_pairs import training_pairs
from tools.judge_trial import auroc, best_cut, evidence_sentences, measure, net, veto


def test_auroc_counts_ties_half_and_is_nan_without_a_side():
    assert auroc([3, 4], [1, 2]) == 1.0
    assert auroc([1], [2]) == 0.0
    assert auroc([1, 2], [2]) == 0.25
    assert math.isnan(auroc([], [1]))


def test_evidence_sentences_are_those_holding_it_or_inside_it():
    texts = ["A cache  MUST NOT store it.", "Other text.", "It is stored"]
    assert evidence_sentences(texts, "A cache MUST NOT store it. It is stored for an hour") == [
        "A cache  MUST NOT store it.",
        "It is stored",
    ]
    assert evidence_sentences(texts, "stored") == ["It is stored"]


def row(**kw):
    base = {
        "question": "q",
        "answerable": True,
        "expected": ["a#1"],
        "claims": [],
        "claim_sections": [],
        "candidates": [],
        "positives": [],
    }
    return base | kw


def test_training_pairs_label_what_answers_and_what_only_touches():
    answerable = row(
        positives=["the evidence"],
        claims=["kept from a", "kept from b"],
        claim_sections=["a#1", "b#2"],
        candidates=[{"section": "a#1", "text": "expected"}, {"section": "b#2", "text": "neighbour"}],
    )
    assert training_pairs([answerable]) == [
        ("q", "the evidence", 1.0),
        ("q", "kept from a", 1.0),
        ("q", "neighbour", 0.0),
    ]
    refusal = row(
        answerable=False, claims=["said"], claim_sections=["b#2"], candidates=[{"section": "a#1", "text": "x"}]
    )
    assert training_pairs([refusal]) == [("q", "said", 0.0), ("q", "x", 0.0)]


def item(answerable, score, state="grounded", cites=True, fold=0, project="rfc"):
    return {"answerable": answerable, "score": score, "state": state, "cites": cites, "fold": fold, "project": project}


def test_the_cut_nets_most_and_vetoes_least_on_ties():
    items = [item(True, 0.9), item(True, 0.5), item(False, 0.4), item(True, 0.1, cites=False)]
    assert net(items, 0.45, 8.0) == 2 and net(items, -math.inf, 8.0) == 2 - 8
    assert best_cut(items, 8.0) == 0.5  # 0.5 nets as much as any higher-vetoing cut below it would not
    assert best_cut([item(True, 0.9), item(True, 0.2)], 8.0) == -math.inf  # nothing to gain: no veto


def test_veto_reports_rules_then_judge():
    items = [item(True, 0.9), item(True, 0.3), item(False, 0.4), item(False, 0.8), item(True, 0.9, state="partial")]
    v = veto(items, lambda i: 0.5)
    assert v["grounded_citing"] == [round(2 / 3, 4), round(1 / 3, 4)]
    assert v["unanswerable_grounded"] == [2, 1]


@pytest.mark.parametrize("project", ["rfc", "starlette"])
def test_measure_fits_each_folds_cut_on_the_other_folds(project):
    rows, oof = {"rfc": [], "starlette": [], "sealed": []}, {}
    for fold in range(2):
        for n, (answerable, score) in enumerate([(True, 0.9), (False, 0.2), (True, 0.6)]):
            rid = f"{fold}{n}"
            rows[project].append(
                {"id": rid, "fold": fold, "answerable": answerable, "oof_state": "grounded", "oof_cites": True}
            )
            oof[f"{project}:{rid}"] = score
    rows["sealed"] = [{"id": "s", "answerable": False, "served_state": "grounded", "served_cites": False}]
    result = measure(rows, {"oof": oof, "sealed": {"s": 0.1}}, 8.0)
    assert result["out_of_fold"][project]["unanswerable_grounded"] == [2, 0]
    assert result["out_of_fold"][project]["grounded_citing"] == [1.0, 1.0]
    assert result["sealed"]["unanswerable_grounded"] == [1, 0]
    assert result["auroc_out_of_fold"] == 1.0
