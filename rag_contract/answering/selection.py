"""Which sentence answers: every sentence of the offered passages scored as an answer to the question.

Contract: ``candidates(question, query, passages)`` gives each sentence of the offered passages
(in passage rank, then position order) its features, all in [0, 1] and all computed from what
the request already holds (no model runs here):

- ``similarity``: cosine between the question's vector and the sentence's index vector;
- ``coverage``: the IDF-weighted share of the question's content words the sentence or its
  section title says (``retrieval.terms``);
- ``focus``: the share of the question's focus words (``answering.asked``: what it asks about,
  not its scenario) the sentence or its title mentions, stems counted (1 when it has none);
- ``instance``: 1 when the sentence holds an instance of every answer type the question asks
  for (a number for "how long", a status code for "which status", a name for "which header"),
  tied to its focus as the relevance check ties them (``asked.missing_types``), else 0;
- ``rank``: 1 / (1 + the passage's rank); ``position``: 1 / (1 + the sentence's place in its
  section): answers tend to sit early in the best sections;
- ``length``: the sentence's word count over ``LONG_WORDS``, at most 1 (a fragment says little);
- ``<a>_x_<b>``: the product of every two of the above (``SELECTOR_PAIRS``), so that the fitted
  model can weigh one feature by another: a linear score alone must give a sentence's cosine
  the same worth whether or not it names what the question asks about.

``score(c, weights) = bias + sum(weight x feature)`` with ``SELECTOR_FEATURES`` weights from
``eval/thresholds.yaml`` (``drafting.selector``), a logistic regression of "this sentence carries
the question's annotated evidence" fitted out of fold by ``rag-contract calibrate``. ``ranked``
orders the candidates by score, ties by passage rank then position, so the order is a pure
function of its inputs. ``confidence`` is the best score among the sentences kept claims quote:
the answer's confidence, one number the relevance check weighs.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import numpy as np

from rag_contract.answering.asked import Asked, missing_types, unmentioned_focus
from rag_contract.answering.evidence import Candidate, PassageText, Query, score_evidence
from rag_contract.config.thresholds import SELECTOR_FEATURES
from rag_contract.text.words import content_words

LONG_WORDS = 40


def candidates(question: str, query: Query, passages: Sequence[PassageText], asked: Asked | None) -> list[Candidate]:
    # similarity and coverage exactly as the unfitted drafter scores them (``evidence``)
    scored = {(e.rank, e.position): e for e in score_evidence(question, query, passages, 0.0)}
    out = []
    for rank, p in enumerate(passages):
        title = frozenset(content_words(p.title))
        kept = p.sentence_terms
        for pos, sentence in enumerate(p.sentences):
            e = scored[(rank, pos)]
            said = (kept[pos] if kept is not None else frozenset(content_words(sentence))) | title
            focus, instance = _focus_and_instance(asked, sentence, said)
            base = (
                e.similarity,
                e.coverage,
                round(focus, 6),
                instance,
                round(1.0 / (1 + rank), 6),
                round(1.0 / (1 + pos), 6),
                round(min(len(sentence.split()) / LONG_WORDS, 1.0), 6),
            )
            out.append(Candidate(p.section_id, pos, rank, sentence, (*base, *_pairs(base))))
    return out


def _pairs(f: tuple[float, ...]) -> tuple[float, ...]:
    """The products of every two features, in ``SELECTOR_PAIRS`` order."""
    return tuple(round(a * b, 6) for i, a in enumerate(f) for b in f[i + 1 :])


def _focus_and_instance(asked: Asked | None, sentence: str, said: frozenset[str]) -> tuple[float, float]:
    """The share of the focus words ``said`` mentions (1 when there are none), and whether the sentence
    holds an instance of every answer type asked (``asked.missing_types``, which counts an instance
    only beside a focus word: one that mentions none holds none, and is not scanned for one)."""
    if asked is None:
        return 1.0, 1.0
    if not asked.focus:
        return 1.0, 0.0 if missing_types(asked, [(sentence, said)]) else 1.0
    unsaid = unmentioned_focus(asked, said)
    focus = 1.0 - len(unsaid) / len(asked.focus)
    if len(unsaid) == len(asked.focus):
        # no focus word, so no claim tied to the focus: what missing_types finds with none given
        return focus, 0.0 if missing_types(asked, ()) else 1.0
    return focus, 0.0 if missing_types(asked, [(sentence, said)]) else 1.0


def score(c: Candidate, weights: Mapping[str, float]) -> float:
    return weights["bias"] + sum(weights[name] * v for name, v in zip(SELECTOR_FEATURES[1:], c.features, strict=True))


def ranked(cs: Sequence[Candidate], weights: Mapping[str, float]) -> list[tuple[Candidate, float]]:
    scored = [(c, round(score(c, weights), 6)) for c in cs]
    scored.sort(key=lambda cs_: (-cs_[1], cs_[0].rank, cs_[0].position))
    return scored


def probability(logit: float) -> float:
    return float(1.0 / (1.0 + np.exp(-logit)))


def confidence(claims: Iterable[str], cs: Sequence[Candidate], weights: Mapping[str, float]) -> float | None:
    """The best score among the candidates the claims quote (a claim quotes a sentence it
    contains); None when no claim quotes any, as a paraphrase does."""
    texts = list(claims)
    quoted = [score(c, weights) for c in cs if any(c.text in t for t in texts)]
    return round(max(quoted), 6) if quoted else None
