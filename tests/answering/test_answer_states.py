"""The answer-state rule and the off-topic and apparatus withdrawals, on hand-made verdicts (no index, no model)."""

from __future__ import annotations

import dataclasses

import pytest

from rag_contract.answering.grounding import Claim, Verdict
from rag_contract.answering.relevance import ANSWERS, OFF_TOPIC, RULE_RELEVANCE, STOPS_SHORT, Features, Relevance
from rag_contract.answering.service import (
    RULE_NEVER_ANSWERS,
    AnswerState,
    decide,
    withdraw_apparatus,
    withdraw_off_topic,
)

KEPT = Verdict(Claim("kept", "s#1"), True, None, None, 1.0, ())
GONE = Verdict(Claim("gone", "s#2"), False, "coverage", "coverage 0.50 < floor 0.67", 0.5, ("x",))


def relevance(verdict: str) -> Relevance:
    return Relevance(verdict, 0.0, Features(0.0, 0.0, 0.0, 0.0, 0.0), ("stale-if-error",), (), ())


@pytest.mark.parametrize(
    ("verdicts", "rel", "state"),
    [
        ([KEPT], ANSWERS, AnswerState.GROUNDED),
        ([KEPT, KEPT, KEPT], ANSWERS, AnswerState.GROUNDED),
        ([KEPT], None, AnswerState.PARTIAL),  # kept, but no relevance verdict says it answers
        ([KEPT], STOPS_SHORT, AnswerState.PARTIAL),
        ([KEPT], OFF_TOPIC, AnswerState.PARTIAL),  # decide alone; withdraw_off_topic empties it first
        ([KEPT, GONE], ANSWERS, AnswerState.PARTIAL),  # one of two withdrawn
        ([GONE, KEPT, KEPT], ANSWERS, AnswerState.PARTIAL),
        ([GONE], ANSWERS, AnswerState.UNSUPPORTED),
        ([GONE, GONE], ANSWERS, AnswerState.UNSUPPORTED),
        ([], ANSWERS, AnswerState.UNSUPPORTED),  # nothing drafted
    ],
)
def test_the_state_of_each_mix_of_verdicts(verdicts, rel, state):
    assert decide(verdicts, rel) is state


def test_relevance_defaults_to_answers():
    assert decide([KEPT]) is AnswerState.GROUNDED


@pytest.mark.parametrize("verdict", [ANSWERS, STOPS_SHORT])
def test_only_an_off_topic_verdict_withdraws(verdict):
    assert withdraw_off_topic([KEPT, GONE], relevance(verdict)) == (KEPT, GONE)
    assert isinstance(withdraw_off_topic([KEPT], relevance(verdict)), tuple)


def test_off_topic_withdraws_each_kept_claim_under_rule_relevance_and_leaves_the_rest():
    rel = relevance(OFF_TOPIC)
    out = withdraw_off_topic([KEPT, GONE, KEPT], rel)
    withdrawn = dataclasses.replace(KEPT, kept=False, rule=RULE_RELEVANCE, detail=rel.reason())
    assert out == (withdrawn, GONE, withdrawn)
    assert out[0].detail == "the claims are off topic: no kept claim addresses 'stale-if-error'"
    assert (out[0].coverage, out[0].missing, out[0].claim) == (KEPT.coverage, KEPT.missing, KEPT.claim)
    assert decide(out, OFF_TOPIC) is AnswerState.UNSUPPORTED


def test_a_kept_claim_citing_a_section_that_never_answers_is_withdrawn():
    refs = Verdict(Claim("refs", "s#9"), True, None, None, 1.0, ())
    out = withdraw_apparatus([KEPT, refs, GONE], frozenset({"s#9"}))
    assert out[0] is KEPT and out[2] is GONE  # the others untouched
    assert (out[1].kept, out[1].rule, out[1].claim) == (False, RULE_NEVER_ANSWERS, refs.claim)
    assert out[1].detail == "cites s#9, a section that never answers (references, acknowledgements, ...)"
    assert out[1].coverage == 1.0 and out[1].missing == ()
    assert withdraw_apparatus([KEPT, refs], frozenset()) == (KEPT, refs)
    # an already withdrawn claim keeps the rule that withdrew it
    gone_refs = dataclasses.replace(GONE, claim=Claim("gone", "s#9"))
    assert withdraw_apparatus([gone_refs], frozenset({"s#9"})) == (gone_refs,)
