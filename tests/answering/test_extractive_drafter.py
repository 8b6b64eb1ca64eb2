"""The extractive drafter's shape: one sentence per section, from the top ``sections`` passages
only, best first, at most ``max_claims``."""

from __future__ import annotations

import numpy as np

from rag_contract.answering.drafting import ExtractiveDrafter
from rag_contract.answering.evidence import PassageText, Query
from rag_contract.retrieval.terms import TermWeights

QUESTION = "how are stale responses served"
# Sentences built to score in a known order against QUESTION by word coverage alone (no vectors):
# more of its words, higher score.
FULL = "Caches may serve stale responses that are served late."
MOST = "Stale responses may be kept by caches."
SOME = "Responses are stored by caches."


def passage(section_id: str, *sentences: str) -> PassageText:
    return PassageText(section_id, "Title", " ".join(sentences), tuple(sentences), np.zeros((len(sentences), 4)))


def draft(drafter: ExtractiveDrafter, passages: list[PassageText]) -> list[tuple[str, str]]:
    claims = drafter.draft(None, QUESTION, passages, Query(None, TermWeights.uniform()))
    return [(c.section_id, c.text) for c in claims]


def test_one_sentence_per_section_even_when_its_second_outscores_the_next_section():
    passages = [passage("a", FULL, MOST), passage("b", SOME)]
    assert draft(ExtractiveDrafter(3, 1.0, 4), passages) == [("a", FULL), ("b", SOME)]


def test_sections_past_the_top_are_not_quoted():
    passages = [passage("a", SOME), passage("b", "Responses vary."), passage("c", FULL)]
    assert [s for s, _ in draft(ExtractiveDrafter(3, 1.0, 2), passages)] == ["a", "b"]
    assert [s for s, _ in draft(ExtractiveDrafter(3, 1.0, 3), passages)] == ["c", "a", "b"]


def test_best_first_and_at_most_max_claims():
    passages = [passage("a", SOME), passage("b", MOST), passage("c", FULL), passage("d", "Nothing here.")]
    assert [s for s, _ in draft(ExtractiveDrafter(2, 1.0, 4), passages)] == ["c", "b"]


def test_a_section_whose_best_sentence_repeats_a_claim_offers_its_next():
    passages = [passage("a", FULL), passage("b", FULL, SOME)]
    assert draft(ExtractiveDrafter(3, 1.0, 4), passages) == [("a", FULL), ("b", SOME)]


def test_a_lead_in_is_never_joined_with_a_code_unit():
    lead = "Uses a 307 status code by default:"
    code = "from starlette.responses import RedirectResponse\nresponse = RedirectResponse(url='/')"
    prose = "The redirect keeps the request method."
    with_code = PassageText("a", "Title", "", (lead, code), np.zeros((2, 4)), sentence_kinds=("prose", "code"))
    with_prose = PassageText("b", "Title", "", (lead, prose), np.zeros((2, 4)), sentence_kinds=("prose", "prose"))
    q = Query(None, TermWeights.uniform())
    assert [c.text for c in ExtractiveDrafter(1, 1.0, 1).draft(None, "status code", [with_code], q)] == [lead]
    assert [c.text for c in ExtractiveDrafter(1, 1.0, 1).draft(None, "status code", [with_prose], q)] == [
        f"{lead} {prose}"
    ]
