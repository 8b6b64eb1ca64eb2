"""Answer accuracy from the annotated evidence: the match rule at its edges, and the figures."""

from __future__ import annotations

import pytest

from rag_contract.quality.accuracy import SHARE, Outcome, accurate, carries, contains, figures, line, share


def test_a_claim_quoting_the_evidence_carries_it_whatever_its_case_and_markup():
    evidence = "an Allow header field"
    assert contains("The origin server MUST generate an `Allow` header field in a 405 response.", evidence)
    assert carries("ALLOW: the **Allow** Header-Field lists methods", "allow header field")


def test_the_words_must_be_adjacent_and_in_order_to_be_contained():
    assert not contains("a header field that the origin must allow", "the Allow header field")
    assert not contains("field header Allow the", "the Allow header field")
    assert not contains("anything at all", "")


def test_a_claim_sharing_enough_of_the_evidence_words_carries_it():
    evidence = "recipients must treat stale responses as invalid"  # content words: 6 of them
    assert share("stale responses are invalid for recipients", evidence) >= SHARE
    assert carries("stale responses are invalid for recipients", evidence)


def test_a_claim_sharing_only_the_topic_does_not_carry_it():
    evidence = "recipients must treat stale responses as invalid"
    assert share("a cache stores responses", evidence) < SHARE
    assert not carries("a cache stores responses", evidence)


def test_the_share_threshold_is_inclusive():
    # five distinct content words; three of them is exactly the share
    evidence = "alpha bravo charlie delta echo"
    assert share("alpha bravo charlie", evidence) == pytest.approx(0.6)
    assert carries("alpha bravo charlie", evidence)
    assert not carries("alpha bravo", evidence)


def test_an_answer_is_accurate_when_any_kept_claim_carries_the_evidence():
    assert accurate(["nothing here", "it uses the Allow header field"], "the Allow header field")
    assert not accurate(["nothing here"], "the Allow header field")
    assert not accurate(["the Allow header field"], None)  # no evidence: nothing to be accurate about
    assert not accurate([], "the Allow header field")


def test_the_figures_count_answered_as_shown_with_claims():
    outcomes = [
        Outcome(True, "grounded", True),
        Outcome(True, "partial", False),
        Outcome(True, "unsupported", False),
        Outcome(True, "abandoned", False),
        Outcome(False, "partial", False),
        Outcome(False, "unsupported", False),
        Outcome(False, "grounded", False),
        Outcome(False, "no_context", False),
    ]
    assert figures(outcomes) == {
        "coverage": 0.5,
        "accuracy_when_answered": 0.5,
        "accurate_rate": 0.25,
        "false_answer_rate": 0.5,
        "answered": 2,
        "accurate": 1,
        "false_answers": 2,
    }


def test_a_rate_with_no_denominator_is_none_not_zero():
    f = figures([Outcome(True, "unsupported", False)])
    assert f["accuracy_when_answered"] is None and f["false_answer_rate"] is None and f["coverage"] == 0.0
    assert "accuracy when answered n/a" in line(f) and "false answers n/a" in line(f)
