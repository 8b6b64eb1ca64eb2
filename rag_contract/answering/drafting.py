"""Drafters: turn a question and its retrieved passages into claims, each citing one section.

Drafting is the one step that is not arithmetic, so it sits behind a protocol:

- ``ExtractiveDrafter``: deterministic, no model. Quotes, from each of the top few retrieved
  sections, the sentence that scores best against the question by meaning and by words
  (``evidence``), each citing its section. It does not decide whether they answer: grounding
  checks each claim against its passage and the relevance check (``relevance``) whether the kept
  claims address the question.
- ``FixtureDrafter``: replays ``eval/fixtures/drafts/<question id>.json``. It freezes the
  drafter's output and nothing else: retrieval, grounding and the state decision rerun on
  every replay. It is the only drafter the gate can reach.
- ``LiveDrafter`` (``answering.live_drafter``): the ``openai`` client, by hand only.

A fixture records its drafter, the prompt fingerprint (question + passages offered), the
index version and the date, so a replay against a different index is visible.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from rag_contract.answering.evidence import PassageText, Query, score_evidence
from rag_contract.answering.grounding import Claim
from rag_contract.answering.selection import candidates, ranked
from rag_contract.config.thresholds import DraftingConfig
from rag_contract.config.unreadable import not_utf8, unreadable
from rag_contract.corpus.sentences import joinable, sentences
from rag_contract.retrieval.terms import TermWeights

__all__ = ["Draft", "DraftError", "Drafter", "ExtractiveDrafter", "FixtureDrafter", "PassageText", "sentences"]


class DraftError(RuntimeError):
    """A drafter could not produce claims (missing fixture, refused model response)."""


class Drafter(Protocol):
    @property
    def name(self) -> str: ...

    def draft(
        self, question_id: str | None, question: str, passages: Sequence[PassageText], query: Query | None = None
    ) -> tuple[Claim, ...]: ...


def prompt_fingerprint(question: str, passages: Sequence[PassageText]) -> str:
    """What was asked: the question and the passages offered, in order."""
    h = hashlib.sha256(question.encode())
    for p in passages:
        h.update(f"\0{p.section_id}\0{p.text}".encode())
    return h.hexdigest()[:16]


# --- extractive ----------------------------------------------------------------------------


# Two adjacent sentences make one claim when the first cannot stand alone: it introduces what
# follows (ends with a colon) or is too short to state a fact by itself.
LEAD_IN_WORDS = 8


def claim_text(position: int, passage: PassageText) -> str:
    """The claim the extractive drafter quotes for the sentence at ``position``: the sentence, and the
    next one when it cannot stand alone."""
    first = passage.sentences[position]
    if (
        (first.endswith(":") or len(first.split()) < LEAD_IN_WORDS)
        and position + 1 < len(passage.sentences)
        and _joinable(passage, position, position + 1)
    ):
        return f"{first} {passage.sentences[position + 1]}"
    return first


def _joinable(passage: PassageText, a: int, b: int) -> bool:
    kinds = passage.sentence_kinds
    return not kinds or joinable(kinds[a], kinds[b])


@dataclass(frozen=True)
class ExtractiveDrafter:
    """Quotes the best-scoring sentence (``evidence.score_evidence``) of each of the ``sections``
    top-ranked passages, best first, at most ``max_claims``, each citing its section; a sentence
    that cannot stand alone takes the next one with it. It always drafts: whether the claims
    answer the question is the relevance check's decision, made where it can be measured.

    One sentence per section, from the top few only: where retrieval cannot tell sibling sections
    apart (the syntax rule and the processing rule, the request and the response directive), a
    second sentence of the first section used to displace the one sibling that answered, and a
    sentence from a section ranked far down rarely answers anything. ``sections`` is fitted with
    cross-validation (``rag-contract calibrate``); docs/adr/0003 has the measurements.

    With a fitted ``selector`` (``answering.selection``) the drafter quotes the best-scoring
    sentences of those sections, whichever section each is in: the selector's best three carry
    the question's evidence more often than the best sentence of each of three sections
    (docs/adr/0011)."""

    max_claims: int
    lexical_weight: float
    sections: int
    name: str = "extractive"
    # the learned answer-sentence selector's weights (``answering.selection``); None: similarity
    # plus ``lexical_weight`` x coverage, as before a selector is fitted
    selector: Mapping[str, float] | None = None

    @classmethod
    def committed(cls, drafting: DraftingConfig) -> ExtractiveDrafter:
        """The drafter as ``eval/thresholds.yaml`` configures it (term weights come with each request's index)."""
        return cls(
            drafting.extractive_max_claims,
            drafting.evidence_lexical_weight,
            drafting.extractive_sections,
            selector=drafting.selector,
        )

    def order(self, question: str, query: Query, offered: Sequence[PassageText]) -> list[tuple[str, int]]:
        """(section id, sentence position) of every offered sentence, best answer first."""
        if self.selector is not None:
            # the request's candidates when it scored them (over every passage it offers, in
            # passage order: the first len(offered) passages are these)
            cs = query.candidates
            if cs is None:
                cs = tuple(candidates(question, query, offered, query.asked))
            within = [c for c in cs if c.rank < len(offered)]
            return [(c.section_id, c.position) for c, _ in ranked(within, self.selector)]
        return [(e.section_id, e.position) for e in score_evidence(question, query, offered, self.lexical_weight)]

    def draft(
        self,
        question_id: str | None,
        question: str,
        passages: Sequence[PassageText],
        query: Query | None = None,
    ) -> tuple[Claim, ...]:
        query = query or Query(None, TermWeights.uniform())
        offered = passages[: self.sections]
        by_id = {p.section_id: p for p in offered}
        claims: list[Claim] = []
        quoted: set[str] = set()
        for section_id, position in self.order(question, query, offered):
            # unfitted, one sentence a section (a sibling's second sentence displaced the answer);
            # the selector ranks every sentence on its own, and its best few carry the evidence
            # more often than the best of each section (docs/adr/0011)
            if section_id in quoted and self.selector is None:
                continue
            claim = Claim(claim_text(position, by_id[section_id]), section_id)
            if all(claim.text not in c.text and c.text not in claim.text for c in claims):
                claims.append(claim)
                quoted.add(section_id)
            if len(claims) == self.max_claims:
                break
        return tuple(claims)


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
    except OSError as exc:
        raise DraftError(unreadable(path, exc)) from None
    except UnicodeDecodeError as exc:
        raise DraftError(not_utf8(path, exc)) from None
    except (KeyError, TypeError, json.JSONDecodeError) as exc:
        raise DraftError(f"{Path(path).name}: not a valid draft ({exc})") from None


@dataclass(frozen=True)
class FixtureDrafter:
    directory: Path
    name: str = "fixture"

    def path(self, question_id: str) -> Path:
        return Path(self.directory) / f"{question_id}.json"

    def draft(
        self, question_id: str | None, question: str, passages: Sequence[PassageText], query: Query | None = None
    ) -> tuple[Claim, ...]:
        if question_id is None:
            raise DraftError("the fixture drafter replays recorded questions only")
        return read_draft(self.path(question_id)).claims


@dataclass(frozen=True)
class RecordedOrDrafted:
    """Replays a question's recorded draft when there is one, and drafts it with ``fallback``
    when there is none: how a question file of any schema is answered without recording it
    first. The committed set never goes through this (the gate requires every draft)."""

    recorded: FixtureDrafter
    fallback: Drafter

    @property
    def name(self) -> str:
        return f"{self.recorded.name}, else {self.fallback.name}"

    def draft(
        self, question_id: str | None, question: str, passages: Sequence[PassageText], query: Query | None = None
    ) -> tuple[Claim, ...]:
        if question_id is not None and self.recorded.path(question_id).is_file():
            return self.recorded.draft(question_id, question, passages, query)
        return self.fallback.draft(question_id, question, passages, query)
