"""Drafters: turn a question and its retrieved passages into claims, each citing one section.

Drafting is the one step that is not arithmetic, so it sits behind a protocol:

- ``ExtractiveDrafter``: deterministic, no model. Scores every sentence of the retrieved
  sections by the share of the question's content words it (with its section title) covers
  (its *confidence*, on a calibration-free 0..1 scale) and returns the best sentences at or above
  ``extractive_min_confidence`` as claims citing their section. No sentence that high, no
  claims: the answer is then a refusal, decided by grounding, not by a similarity score.
- ``FixtureDrafter``: replays ``eval/fixtures/drafts/<question id>.json``. It freezes the
  drafter's output and nothing else: retrieval, grounding and the state decision rerun on
  every replay. It is the only drafter the gate can reach.
- ``LiveDrafter`` (``rag_contract.live``): the ``openai`` client, by hand only.

A fixture records its drafter, the prompt fingerprint (question + passages offered), the
index version and the date, so a replay against a different index is visible.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Protocol

from rag_contract.answering.grounding import Claim, content_words
from rag_contract.corpus.sources import unwrap_hyphens


@dataclass(frozen=True)
class PassageText:
    section_id: str
    title: str
    text: str


class DraftError(RuntimeError):
    """A drafter could not produce claims (missing fixture, refused model response)."""


class Drafter(Protocol):
    name: str

    def draft(self, question_id: str | None, question: str, passages: Sequence[PassageText]) -> tuple[Claim, ...]: ...


def prompt_fingerprint(question: str, passages: Sequence[PassageText]) -> str:
    """What was asked: the question and the passages offered, in order."""
    h = hashlib.sha256(question.encode())
    for p in passages:
        h.update(f"\0{p.section_id}\0{p.text}".encode())
    return h.hexdigest()[:16]


# --- extractive ----------------------------------------------------------------------------

# Sentence ends: ". " / "? " / "! " / ":" before a blank line. Abbreviations common in RFC
# prose ("e.g.", "i.e.", "etc.") are not ends; ABNF blocks become their own "sentences"
# and rarely score, because they share few content words with a question.
_SENT_END = re.compile(r"(?<!\be\.g)(?<!\bi\.e)(?<!\betc)(?<=[.?!])\s+(?=[A-Z\"(])|\n\s*\n")


def sentences(text: str) -> list[str]:
    out = []
    # a line break inside a hyphenated name ("If-\n   Modified-Since") is not a space
    for part in _SENT_END.split(unwrap_hyphens(text)):
        s = re.sub(r"\s+", " ", part).strip()
        if len(s.split()) >= 4:
            out.append(s)
    return out


@dataclass(frozen=True)
class Scored:
    confidence: float
    sentence: str
    section_id: str
    rank: int  # passage rank, 0-based
    position: int  # sentence position in its section


@dataclass(frozen=True)
class TermWeights:
    """Inverse document frequency of content words over an index's sections.

    A question word the corpus never uses (``SameSite``) weighs the most: matching the
    question's generic words (``cookie``, ``attribute``) must not be enough to answer it.
    """

    idf: Mapping[str, float]
    unseen: float

    def __call__(self, term: str) -> float:
        return self.idf.get(term, self.unseen)

    @classmethod
    def of(cls, content_sets: Sequence[frozenset[str]]) -> TermWeights:
        n = len(content_sets)
        df = Counter(t for terms in content_sets for t in terms)
        idf = {t: math.log((n + 1) / (c + 1)) for t, c in df.items()}
        return cls(MappingProxyType(idf), math.log(n + 1))

    @classmethod
    def uniform(cls) -> TermWeights:
        return cls(MappingProxyType({}), 1.0)


def score_sentences(question: str, passages: Sequence[PassageText], weights: TermWeights) -> list[Scored]:
    """Every sentence of every passage with its confidence: the IDF-weighted share of the
    question's content words found in the sentence or its section's title (the heading a
    reader sees above it, and which grounding also counts as the passage's words)."""
    terms = set(content_words(question))
    total = sum(weights(t) for t in terms)
    scored = []
    for rank, p in enumerate(passages):
        title_terms = set(content_words(p.title))
        for pos, s in enumerate(sentences(p.text)):
            if not terms or total <= 0:
                conf = 0.0
            else:
                conf = sum(weights(t) for t in terms & (set(content_words(s)) | title_terms)) / total
            scored.append(Scored(round(conf, 4), s, p.section_id, rank, pos))
    # Best coverage first; ties to the better-ranked passage, then document order.
    scored.sort(key=lambda x: (-x.confidence, x.rank, x.position))
    return scored


@dataclass(frozen=True)
class ExtractiveDrafter:
    min_confidence: float
    max_claims: int
    weights: TermWeights = field(default_factory=TermWeights.uniform, repr=False)
    name: str = "extractive"

    @classmethod
    def for_index(cls, index, min_confidence: float, max_claims: int) -> ExtractiveDrafter:
        """Weights from the index's sections (computed once, ~50 ms)."""
        return cls(min_confidence, max_claims, TermWeights.of([p.content for p in index.passages.values()]))

    def draft(self, question_id: str | None, question: str, passages: Sequence[PassageText]) -> tuple[Claim, ...]:
        scored = score_sentences(question, passages, self.weights)
        picked = [s for s in scored if s.confidence >= self.min_confidence]
        return tuple(Claim(s.sentence, s.section_id) for s in picked[: self.max_claims])


# --- fixtures ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Draft:
    question_id: str
    question: str
    drafter: str
    prompt_fingerprint: str
    index_version: str
    recorded: str
    claims: tuple[Claim, ...]

    def to_json(self) -> str:
        return (
            json.dumps(
                {
                    "question_id": self.question_id,
                    "question": self.question,
                    "drafter": self.drafter,
                    "prompt_fingerprint": self.prompt_fingerprint,
                    "index_version": self.index_version,
                    "recorded": self.recorded,
                    "claims": [{"text": c.text, "section_id": c.section_id} for c in self.claims],
                },
                indent=1,
                ensure_ascii=False,
            )
            + "\n"
        )


def read_draft(path: Path) -> Draft:
    try:
        raw = json.loads(Path(path).read_text(encoding="utf-8"))
        return Draft(
            question_id=raw["question_id"],
            question=raw["question"],
            drafter=raw["drafter"],
            prompt_fingerprint=raw["prompt_fingerprint"],
            index_version=raw["index_version"],
            recorded=raw["recorded"],
            claims=tuple(Claim(c["text"], c["section_id"]) for c in raw["claims"]),
        )
    except FileNotFoundError:
        raise DraftError(f"{Path(path).name}: no recorded draft") from None
    except (KeyError, TypeError, json.JSONDecodeError) as exc:
        raise DraftError(f"{Path(path).name}: not a valid draft ({exc})") from None


@dataclass(frozen=True)
class FixtureDrafter:
    directory: Path
    name: str = "fixture"

    def path(self, question_id: str) -> Path:
        return Path(self.directory) / f"{question_id}.json"

    def draft(self, question_id: str | None, question: str, passages: Sequence[PassageText]) -> tuple[Claim, ...]:
        if question_id is None:
            raise DraftError("the fixture drafter replays recorded questions only")
        return read_draft(self.path(question_id)).claims
