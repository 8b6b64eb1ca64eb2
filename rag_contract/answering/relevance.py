"""Relevance: do the claims that survived grounding address the question that was asked?

Grounding says a claim is in its passage; it cannot say the claim answers the question (an answer
about the Secure attribute is grounded, and no answer about the Partitioned attribute). This check
is answer-level, deterministic and model-free at request time. Its seven features:

- ``similarity``: the best cosine between the question's vector and the index vector of a kept
  claim's sentence. A claim is matched to the sentences of its cited section whose content words
  it contains (``MATCH_SHARE``); a claim matched to none contributes nothing, so a paraphrase the
  check cannot place is never vouched for by meaning;
- ``coverage``: the IDF-weighted share of the question's content words that the kept claims (or
  the titles of the sections they cite) contain;
- ``unseen``: the IDF-weighted share of the question's content words the corpus never uses;
- ``section``: the best cosine between the question's vector and a chunk of a section a kept claim
  cites (the claim's context: a sentence alone can say too little to look relevant);
- ``retrieval``: the best retrieval score among the sections the kept claims cite. In the
  serving mode ``fused`` that score is itself a fitted logit of "this section is one a reader
  would cite" (``retrieval.ranking``): how sure retrieval was of what the claims stand on;
- ``selected``: the answer's confidence: the answer-sentence selector's probability
  (``answering.selection``) for the best sentence a kept claim quotes (0 when none is quoted);
- ``unmentioned``: how many of the question's focus words (``answering.asked``: what it asks
  about, not the engineer's scenario) no kept claim or cited title mentions, counted up to
  ``FOCUS_COUNTED`` and divided by it. A question that names many things and is answered by
  claims mentioning few of them is seldom answered: the count, not the share, is what the
  opened sealed sets bear out (docs/adr/0009).

One rule needs no fitting: a question that names a protocol element by its shape (a field name
such as ``Clear-Site-Data``, an attribute or parameter such as ``SameSite`` or ``__Host-``), by
the kind of element it calls it ("the Partitioned attribute"), or by setting it
(``stale-if-error=86400``, ``rel=preload``) that the corpus never contains cannot be answered by
it, whatever the claims say: quoting the neighbouring elements would answer a question nobody
asked. Its verdict is ``off_topic``, and the reason names the element. Names an engineer chooses
are their own context, not a standard's, and are left out: custom ``X-`` fields, a cookie's own
name (``Set-Cookie: sid=...``, ``Cookie: a=1; b=2``) and parameters of a URI's query or path
(after ``?``, ``&`` or ``;``).

Two rules of ``answering.asked`` bound the verdict from above, whatever the logit says: a
question about a subject the corpus does not cover (a rare name no answering section contains)
is ``off_topic``, naming it; an answer whose kept claims hold no instance of the answer type the
question asks for (no number for "how long", no status code for "which status"), or never
mention the question's focus, is ``stops_short`` at best, and the reason says what is missing.

``logit = bias + sum(weight x feature)`` with weights in eval/thresholds.yaml (``relevance``),
fitted with cross-validation by ``rag-contract calibrate``. At or above ``answer_at`` the verdict
is ``answers``; below ``refuse_below`` it is ``off_topic`` (the kept claims are withdrawn under
rule ``relevance`` and the answer is a refusal); in between it is ``stops_short`` (the answer is
partial). Every verdict names the question's weightiest words that no kept claim addresses and,
among them, those the corpus never contains.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np

from rag_contract.answering.asked import (
    AnswerType,
    Asked,
    analyse,
    mentions_focus,
    missing_types,
    unmentioned_focus,
)
from rag_contract.answering.grounding import Verdict
from rag_contract.answering.premises import premises, unsupported_premise
from rag_contract.config.thresholds import RelevanceConfig
from rag_contract.index.store import Index
from rag_contract.retrieval.terms import coverage
from rag_contract.retrieval.vectors import similarities
from rag_contract.text.english import Frequency, zipf
from rag_contract.text.words import content_words

ANSWERS = "answers"
STOPS_SHORT = "stops_short"
OFF_TOPIC = "off_topic"
RULE_RELEVANCE = "relevance"
MATCH_SHARE = 0.6  # share of a sentence's content words a claim must contain to stand for it
NAMED_TERMS = 3  # how many unaddressed words a verdict names
FOCUS_COUNTED = 10  # unmentioned focus words past this many say nothing more


@dataclass(frozen=True)
class Features:
    similarity: float
    coverage: float
    unseen: float
    section: float
    retrieval: float
    unmentioned: float = 0.0
    selected: float = 0.0  # the selector's probability for the best sentence a kept claim quotes

    def as_dict(self) -> dict[str, float]:
        return {
            "similarity": self.similarity,
            "coverage": self.coverage,
            "unseen": self.unseen,
            "section": self.section,
            "retrieval": self.retrieval,
            "unmentioned": self.unmentioned,
            "selected": self.selected,
        }


@dataclass(frozen=True)
class Relevance:
    verdict: str  # answers | stops_short | off_topic
    logit: float
    features: Features
    unaddressed: tuple[str, ...]  # the question's weightiest words no kept claim contains
    absent: tuple[str, ...]  # of those, the words the corpus never uses
    unknown: tuple[str, ...] = ()  # names the question asks about that no answering section contains
    asked: Asked | None = None  # what the question asks for and what it is about
    missing: tuple[AnswerType, ...] = ()  # answer types asked for that no kept claim holds
    focus_said: bool = True  # some kept claim (or a title it cites) mentions the question's focus
    unmentioned: tuple[str, ...] = ()  # the focus words none of them mentions (feature ``unmentioned``)
    unsupported: tuple[str, ...] = ()  # the words of a premise of the question that no kept claim says
    premises: tuple[tuple[str, ...], ...] = ()  # what the question states the specification requires

    @property
    def ceiling(self) -> str:
        """The best verdict the rules allow, whatever the logit: off_topic for an unknown subject,
        stops_short for a missing answer type, an unmentioned focus or a premise the claims do
        not say, else answers."""
        if self.unknown:
            return OFF_TOPIC
        return STOPS_SHORT if self.missing or not self.focus_said or self.unsupported else ANSWERS

    def _standing(self) -> str:
        """Why an answer stands: the instances it gives and the focus it mentions."""
        if self.asked is None:
            return ""
        bits = []
        wants = [t.wants for t in dict.fromkeys(self.asked.types) if t.wants]
        if wants:
            bits.append("they give " + " and ".join(wants))
        if self.asked.focus:
            bits.append("they mention the question's focus")
        return (": " + " and ".join(bits)) if bits else ""

    def _about(self) -> str:
        focus = self.asked.focus[:NAMED_TERMS] if self.asked else ()
        return " ".join(focus)

    def reason(self) -> str:
        if self.verdict == ANSWERS:
            return "the kept claims address the question" + self._standing()
        parts = []
        if self.unknown:
            parts.append(
                "the question names " + ", ".join(f"'{t}'" for t in self.unknown) + ", which the corpus never contains"
            )
        for t in self.missing:
            parts.append(f"no kept claim gives {t.wants} for '{self._about()}'")
        if self.unsupported:
            parts.append(
                "no kept claim says what the question takes as given: "
                + ", ".join(f"'{t}'" for t in self.unsupported[:NAMED_TERMS])
            )
        if not self.focus_said and self.asked:
            parts.append("no kept claim mentions " + ", ".join(f"'{t}'" for t in self.asked.focus[:NAMED_TERMS]))
        elif self.unmentioned and self.asked:
            parts.append(
                f"the claims leave {len(self.unmentioned)} of the {len(self.asked.focus)} words the question is "
                "about unmentioned: " + ", ".join(f"'{t}'" for t in self.unmentioned[:NAMED_TERMS])
            )
        if self.unaddressed:
            parts.append("no kept claim addresses " + ", ".join(f"'{t}'" for t in self.unaddressed))
        if self.absent:
            parts.append("the corpus never uses " + ", ".join(f"'{t}'" for t in self.absent))
        what = "the claims stop short of the question" if self.verdict == STOPS_SHORT else "the claims are off topic"
        return what + (": " + "; ".join(parts) if parts else "")

    def as_dict(self) -> dict:
        return {
            "verdict": self.verdict,
            "logit": round(self.logit, 4),
            "features": {k: round(v, 4) for k, v in self.features.as_dict().items()},
            "unaddressed": list(self.unaddressed),
            "absent": list(self.absent),
            "unknown": list(self.unknown),
            **(self.asked.as_dict() if self.asked else {}),
            "missing": [t.value for t in self.missing],
            "unmentioned": list(self.unmentioned),
            "premises": [list(p) for p in self.premises],
            "unsupported": list(self.unsupported),
            "ceiling": self.ceiling,
            "reason": self.reason(),
        }


def claim_similarity(index: Index, verdict: Verdict, query_vector: np.ndarray | None) -> float:
    if query_vector is None:
        return 0.0
    claim_terms = set(content_words(verdict.claim.text))
    best = 0.0
    for row in index.sentences_of(verdict.claim.section_id):
        terms = index.sentence_terms(row)
        if terms and len(terms & claim_terms) >= MATCH_SHARE * len(terms):
            best = max(best, float(np.dot(index.sentence_vectors[row], query_vector)))
    return best


def addressed_terms(kept: Sequence[Verdict], index: Index) -> set[str]:
    """The words the kept claims say, with the titles of the sections they cite."""
    out: set[str] = set()
    for v in kept:
        out |= set(content_words(v.claim.text))
        if v.claim.section_id in index.sections:
            out |= set(content_words(index.section(v.claim.section_id).title))
    return out


def features(
    question: str,
    query_vector: np.ndarray | None,
    kept: Sequence[Verdict],
    index: Index,
    addressed: set[str],
    scores: Mapping[str, float],
    unmentioned: Sequence[str] = (),
) -> Features:
    """``addressed``: the words the kept claims say (``addressed_terms``), computed once by the
    caller; ``scores``: the retrieval score of each retrieved section (a cited section that was
    not retrieved contributes nothing); ``unmentioned``: the focus words none of them mentions
    (``asked.unmentioned_focus``)."""
    terms = set(content_words(question))
    w = index.weights
    similarity = max((claim_similarity(index, v, query_vector) for v in kept), default=0.0)
    unseen = coverage(terms, {t for t in terms if not w.known(t)}, w)
    section = 0.0
    if query_vector is not None:
        rows = [i for sid in {v.claim.section_id for v in kept} for i in index.chunks_of(sid)]
        section = float(similarities(index.vectors[rows], query_vector).max()) if rows else 0.0
    cited = [scores[sid] for sid in {v.claim.section_id for v in kept} if sid in scores]
    retrieval = max(cited) if cited else 0.0
    return Features(
        round(similarity, 6),
        round(coverage(terms, addressed, w), 6),
        round(unseen, 6),
        round(section, 6),
        round(retrieval, 6),
        round(min(len(unmentioned), FOCUS_COUNTED) / FOCUS_COUNTED, 6),
    )


def logit(f: Features, weights: Mapping[str, float]) -> float:
    return (
        weights["bias"]
        + weights["similarity"] * f.similarity
        + weights["coverage"] * f.coverage
        + weights["unseen"] * f.unseen
        + weights["section"] * f.section
        + weights["retrieval"] * f.retrieval
        + weights["unmentioned"] * f.unmentioned
        # absent before a selector is fitted: the answer's confidence weighs nothing then
        + weights.get("selected", 0.0) * f.selected
    )


# Field-name case (Clear-Site-Data), an inner capital (SameSite, includeSubDomains), or a leading
# double underscore (__Host-): the shapes standards give the names of their elements.
_ELEMENT = re.compile(
    r"(?<![\w-])(__[A-Za-z][\w-]*|[A-Z][a-z0-9]+(?:-[A-Z][A-Za-z0-9]+)+|[a-z]+[A-Z][A-Za-z]*|[A-Z][a-z]+[A-Z][A-Za-z]*)(?![\w])"
)


# A capitalised word the question sets before the kind of element it is ("the Partitioned
# attribute", "which Schema keyword"), not at the start of a sentence: the name of an element.
_NAMED_AS = re.compile(
    r"(?<![.?!:]\s)(?<=\s)([A-Z][A-Za-z0-9]*)\s+"
    r"(?:attribute|directive|header|field|parameter|scheme|method|coding|keyword|prefix)s?\b"
)


# A name set to a value (``stale-if-error=86400``), not inside a URI's query or path parameters
# (``?a=1&b=2``, ``;v=1``) and not a comparison (``==``).
_SETTING = re.compile(r"(?<![\w?&;=/.%-])([A-Za-z][\w-]*)=(?!=)")
# Cookie names are the sender's own: the first pair of a Set-Cookie, every pair of a Cookie header.
_COOKIE_NAMES = re.compile(r"\bSet-Cookie:\s*([^\s=;,'\"]+)=|\bCookie:\s*((?:[^\s=;,'\"]+=[^;\s'\"]*(?:;\s*)?)+)")
_PAIR_NAME = re.compile(r"([^\s=;]+)=")


def _cookie_names(question: str) -> set[int]:
    """Where the cookie names the question quotes start."""
    out: set[int] = set()
    for m in _COOKIE_NAMES.finditer(question):
        if m.group(1):
            out.add(m.start(1))
        else:
            out.update(m.start(2) + n.start(1) for n in _PAIR_NAME.finditer(m.group(2)))
    return out


def unknown_elements(question: str, index: Index) -> tuple[str, ...]:
    out: dict[str, str] = {}
    for m in _ELEMENT.finditer(question):
        name = m.group(1)
        key = name.lower().rstrip("-")
        if name[:2].upper() not in ("X-", "X_") and key not in index.vocabulary:
            out.setdefault(key, name)
    for m in _NAMED_AS.finditer(question):
        # spelled as the question spells it: "partitioned" as a word is no "Partitioned" attribute
        if m.group(1) not in index.spellings:
            out.setdefault(m.group(1).lower(), m.group(1))
    cookies = _cookie_names(question)
    for m in _SETTING.finditer(question):
        key = m.group(1).lower()
        if m.start(1) not in cookies and key not in index.vocabulary:
            out.setdefault(key, m.group(1))
    return tuple(out.values())


_ORDER = {OFF_TOPIC: 0, STOPS_SHORT: 1, ANSWERS: 2}


def verdict_for(score: float, config: RelevanceConfig, ceiling: str = ANSWERS) -> str:
    """The verdict of the logit ``score`` under ``config``, no better than ``ceiling``."""
    verdict = ANSWERS if score >= config.answer_at else STOPS_SHORT if score >= config.refuse_below else OFF_TOPIC
    return min(verdict, ceiling, key=_ORDER.__getitem__)


def assess(
    question: str,
    query_vector: np.ndarray | None,
    kept: Sequence[Verdict],
    index: Index,
    config: RelevanceConfig,
    scores: Mapping[str, float],
    frequency: Frequency = zipf,
    asked: Asked | None = None,
    selected: float = 0.0,
) -> Relevance:
    """``scores``: the retrieval score of each retrieved section, by section id; ``frequency``:
    how common a word is in English (``text.english``); ``asked``: the question analysed, when
    the caller already did; ``selected``: the answer's confidence (``answering.selection``), the
    selector's probability for the best sentence a kept claim quotes."""
    said = addressed_terms(kept, index)
    asked = asked or analyse(question, index.answering, frequency)
    stated = premises(question)
    unmentioned = unmentioned_focus(asked, said)
    f = replace(features(question, query_vector, kept, index, said, scores, unmentioned), selected=round(selected, 6))
    score = logit(f, config.weights)
    w = index.weights
    # weightiest first; ties in question order, so the reason reads the same every time
    ordered = sorted(dict.fromkeys(content_words(question)), key=lambda t: -w(t))
    unaddressed = tuple(t for t in ordered if t not in said)[:NAMED_TERMS]
    absent = tuple(t for t in unaddressed if not w.known(t))
    named = unknown_elements(question, index)
    unknown = named + tuple(u for u in asked.unknown if u.lower() not in {n.lower() for n in named})
    missing = missing_types(asked, [(v.claim.text, addressed_terms([v], index)) for v in kept])
    r = Relevance(
        ANSWERS,
        score,
        f,
        unaddressed,
        absent,
        unknown,
        asked,
        missing,
        mentions_focus(asked, said),
        unmentioned,
        unsupported_premise(stated, said),
        stated,
    )
    return replace(r, verdict=verdict_for(score, config, r.ceiling))
