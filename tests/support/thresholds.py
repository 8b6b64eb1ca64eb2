"""Thresholds variants the tests need: grounding alone, with the relevance check out of the way."""

from __future__ import annotations

import dataclasses

from rag_contract.config.thresholds import Thresholds


def relevance_always_answers(t: Thresholds) -> Thresholds:
    """Every kept claim counts as addressing the question (protocol elements the corpus never names
    still refuse): for tests of the grounding rules and the states they decide on their own."""
    return dataclasses.replace(
        t, relevance=dataclasses.replace(t.relevance, answer_at=float("-inf"), refuse_below=float("-inf"))
    )
