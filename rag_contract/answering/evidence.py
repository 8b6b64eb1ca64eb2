"""Evidence chosen by meaning: every sentence of the retrieved passages, scored against the question.

Contract: ``score_evidence(query, passages, lexical_weight)`` returns every sentence of the
offered passages with

- ``similarity``: cosine between the question's vector and the sentence's vector, both from the
  acquired index (0 when there is no question vector, as in lexical-only serving);
- ``coverage``: the IDF-weighted share of the question's content words found in the sentence or
  its section title (``retrieval.terms.coverage``);
- ``score = similarity + lexical_weight * coverage``, ties broken by passage rank, then by the
  sentence's position, so the order is a pure function of its inputs.

Nothing is embedded here: the sentence vectors were built with the index and the question vector
is the one the request already holds, so the gate's replay needs no model.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from rag_contract.answering.asked import Asked
from rag_contract.config.thresholds import SELECTOR_FEATURES
from rag_contract.retrieval.terms import TermWeights, covering
from rag_contract.retrieval.vectors import similarities
from rag_contract.text.words import content_words


@dataclass(frozen=True)
class PassageText:
    """One retrieved section as a drafter sees it: its text and, from the acquired index, its
    sentences and their vectors."""

    section_id: str
    title: str
    text: str
    sentences: tuple[str, ...] = ()
    sentence_vectors: np.ndarray | None = field(default=None, repr=False, compare=False)
    # the content words of each sentence, as the index keeps them (None: computed here)
    sentence_terms: tuple[frozenset[str], ...] | None = field(default=None, repr=False, compare=False)
    # each sentence's kind (``corpus.sections.KINDS``: prose, item, row, code); empty: all prose
    sentence_kinds: tuple[str, ...] = field(default=(), repr=False, compare=False)


@dataclass(frozen=True)
class Candidate:
    """A sentence of the offered passages as the answer-sentence selector sees it
    (``answering.selection``, which computes the features)."""

    section_id: str
    position: int  # the sentence's place in its section
    rank: int  # the passage's rank, 0-based
    text: str
    features: tuple[float, ...]  # SELECTOR_FEATURES[1:], in that order

    def as_dict(self) -> dict[str, float]:
        return dict(zip(SELECTOR_FEATURES[1:], self.features, strict=True))


@dataclass(frozen=True)
class Query:
    """What the request knows about its question besides the text: its vector (if any), the
    term weights of the index it acquired, once analysed, what it asks (``answering.asked``) and,
    once scored, the selector's candidates: every sentence of the passages it offers the drafter,
    in passage then position order (``selection.candidates``), computed once for the drafter's
    choice and the answer's confidence."""

    vector: np.ndarray | None = field(repr=False, compare=False)
    weights: TermWeights = field(repr=False)
    asked: Asked | None = field(default=None, repr=False, compare=False)
    candidates: tuple[Candidate, ...] | None = field(default=None, repr=False, compare=False)


@dataclass(frozen=True)
class Evidence:
    section_id: str
    position: int  # the sentence's position in its section
    rank: int  # the passage's rank, 0-based
    text: str
    similarity: float
    coverage: float
    score: float


def score_evidence(
    question: str, query: Query, passages: Sequence[PassageText], lexical_weight: float
) -> list[Evidence]:
    share = covering(set(content_words(question)), query.weights)  # a set, as coverage() was given
    out = []
    for rank, p in enumerate(passages):
        title = set(content_words(p.title))
        sims = (
            similarities(p.sentence_vectors, query.vector)
            if query.vector is not None and p.sentence_vectors is not None and len(p.sentences)
            else np.zeros(len(p.sentences))
        )
        kept = p.sentence_terms
        for pos, (sentence, sim) in enumerate(zip(p.sentences, sims, strict=True)):
            said = kept[pos] if kept is not None else frozenset(content_words(sentence))
            cov = share(said | title)
            out.append(Evidence(p.section_id, pos, rank, sentence, round(float(sim), 6), round(cov, 6), 0.0))
    scored = [
        Evidence(e.section_id, e.position, e.rank, e.text, e.similarity, e.coverage,
                 round(e.similarity + lexical_weight * e.coverage, 6))
        for e in out
    ]  # fmt: skip
    scored.sort(key=lambda e: (-e.score, e.rank, e.position))
    return scored
