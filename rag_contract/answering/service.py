"""Answers and their states; ``Service.answer``: acquire once, retrieve, draft, ground, decide.

States, decided per request from where failure was detected (never from a similarity score):

- ``grounded``: every claim kept, and the kept claims address the question (``relevance``);
- ``partial``: some kept: the answer is those, and the withdrawn ones are shown with the rule;
  or all kept but they stop short of the question, and the answer says which of its words
  no claim addresses;
- ``unsupported``: none kept (none drafted, grounding withdrew them all, or relevance found
  them off topic and withdrew them): a refusal naming the passages consulted and the claims
  rejected;
- ``no_context``: nothing retrieved, because no index is available: a service error (503).

A free-text question whose vector comes through ``BatchedVectors`` (a call of the embedder
shared with the questions that arrived beside it) has two more stages in its budget, before
retrieval: ``embedding_wait`` (its wait for that call to begin) and ``embedding`` (the call).

``abandoned`` is not a state: a request that spends its deadline never reached a verdict.
It comes back as ``Abandoned`` (error, detail, index version, budget; no state).

The index is acquired exactly once, at entry; the question vector, the chunks, the passages
and the version reported all come from that one object, so a cutover during the request
cannot move it onto another index.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from enum import StrEnum

import numpy as np

from rag_contract.answering.asked import analyse
from rag_contract.answering.batching import BatchedVectors
from rag_contract.answering.deadline import BudgetReport, Clock, Deadline, DeadlineExceeded
from rag_contract.answering.drafting import Drafter
from rag_contract.answering.evidence import PassageText, Query
from rag_contract.answering.grounding import Verdict, check_claims
from rag_contract.answering.relevance import ANSWERS, OFF_TOPIC, RULE_RELEVANCE, Relevance, assess
from rag_contract.answering.selection import candidates, confidence, probability
from rag_contract.config.thresholds import Thresholds
from rag_contract.embedders.base import Embedder
from rag_contract.index.registry import Registry
from rag_contract.index.store import Index
from rag_contract.retrieval.ranking import rank_sections
from rag_contract.text.english import Frequency, zipf


class AnswerState(StrEnum):
    GROUNDED = "grounded"
    PARTIAL = "partial"
    UNSUPPORTED = "unsupported"
    NO_CONTEXT = "no_context"

    @property
    def http_status(self) -> int:
        # A refusal is something the service decided (200); no_context is a failure (503).
        return 503 if self is AnswerState.NO_CONTEXT else 200


@dataclass(frozen=True)
class Passage:
    section_id: str
    title: str
    rank: int
    score: float


@dataclass(frozen=True)
class Answer:
    question_id: str | None
    question: str
    state: AnswerState
    kept: tuple[Verdict, ...]
    withdrawn: tuple[Verdict, ...]
    passages: tuple[Passage, ...]
    index_version: str | None
    budget: BudgetReport
    drafter: str
    detail: str | None = None  # why no_context
    relevance: Relevance | None = None  # None when no claim survived grounding

    @property
    def http_status(self) -> int:
        return self.state.http_status

    def as_dict(self) -> dict:
        return {
            "question_id": self.question_id,
            "question": self.question,
            "state": self.state.value,
            "claims": [
                {"text": v.claim.text, "section_id": v.claim.section_id, "coverage": v.coverage} for v in self.kept
            ],
            "withdrawn": [
                {
                    "text": v.claim.text,
                    "section_id": v.claim.section_id,
                    "rule": v.rule,
                    "detail": v.detail,
                    "missing": list(v.missing),
                    "coverage": v.coverage,
                }
                for v in self.withdrawn
            ],
            "passages": [
                {"section_id": p.section_id, "title": p.title, "rank": p.rank, "score": round(p.score, 6)}
                for p in self.passages
            ],
            "relevance": self.relevance.as_dict() if self.relevance else None,
            "index_version": self.index_version,
            "drafter": self.drafter,
            "budget": self.budget.as_dict(),
            **({"detail": self.detail} if self.detail else {}),
        }


@dataclass(frozen=True)
class Abandoned:
    question_id: str | None
    question: str
    error: str
    detail: str
    index_version: str
    budget: BudgetReport
    http_status: int = 503

    def as_dict(self) -> dict:
        return {
            "question_id": self.question_id,
            "question": self.question,
            "error": self.error,
            "detail": self.detail,
            "index_version": self.index_version,
            "budget": self.budget.as_dict(),
        }


def decide(verdicts: Sequence[Verdict], relevance: str | None = ANSWERS) -> AnswerState:
    """The state from the per-claim verdicts and the answer-level relevance verdict."""
    kept = sum(1 for v in verdicts if v.kept)
    if not kept:
        return AnswerState.UNSUPPORTED
    if kept == len(verdicts) and relevance == ANSWERS:
        return AnswerState.GROUNDED
    return AnswerState.PARTIAL


RULE_NEVER_ANSWERS = "never_answers"


def withdraw_apparatus(verdicts: Sequence[Verdict], never_answers: frozenset[str]) -> tuple[Verdict, ...]:
    """A kept claim citing a section that never answers (references, acknowledgements, ...:
    ``corpus.roles``) is withdrawn under rule ``never_answers``: a bibliography entry names a
    specification, it does not say what the specification says."""
    return tuple(
        replace(
            v,
            kept=False,
            rule=RULE_NEVER_ANSWERS,
            detail=f"cites {v.claim.section_id}, a section that never answers (references, acknowledgements, ...)",
        )
        if v.kept and v.claim.section_id in never_answers
        else v
        for v in verdicts
    )


def withdraw_off_topic(verdicts: Sequence[Verdict], relevance: Relevance) -> tuple[Verdict, ...]:
    """An off-topic answer keeps nothing: each kept claim is withdrawn under rule ``relevance``."""
    if relevance.verdict != OFF_TOPIC:
        return tuple(verdicts)
    return tuple(
        replace(v, kept=False, rule=RULE_RELEVANCE, detail=relevance.reason()) if v.kept else v for v in verdicts
    )


@dataclass(frozen=True)
class Deliberation:
    """Everything a request decided before its state: what was consulted, each claim's verdict,
    and (when any claim survived grounding) the relevance of the kept claims."""

    passages: tuple[Passage, ...]
    verdicts: tuple[Verdict, ...]
    relevance: Relevance | None


QueryVector = Callable[[Index, str], np.ndarray]  # or BatchedVectors (answering/batching.py)


def stored_vector(index: Index, text: str) -> np.ndarray:
    return index.question_vectors[text]


def committed_vector(embedder: Embedder) -> QueryVector:
    """A fixed question: the vector committed in the acquired index (``stored_vector``).

    A question added to eval/questions.yaml after the index was built has none; it is
    embedded locally instead of failing the request (``/health`` reports the question set
    as changed until the index is rebuilt).
    """

    def query_vector(index: Index, text: str) -> np.ndarray:
        vec = index.question_vectors.get(text)
        return vec if vec is not None else embedder.embed([text])[0]

    return query_vector


def consult(index: Index, thresholds: Thresholds, question: str, qvec: np.ndarray | None) -> tuple[Passage, ...]:
    """The passages a drafter is offered for ``question``: the top sections in serving mode."""
    r = thresholds.retrieval
    hits = rank_sections(index, question, qvec, r.serving_mode, r.top_k, r.rrf_k, r.fusion)
    return tuple(Passage(h.section_id, h.title, i + 1, h.score) for i, h in enumerate(hits))


def passage_texts(index: Index, passages: Sequence[Passage]) -> list[PassageText]:
    """The texts a drafter is offered: every passage but those that never answer."""
    out = []
    for p in passages:
        if p.section_id in index.never_answers:
            continue
        rows = index.sentences_of(p.section_id)
        out.append(
            PassageText(
                p.section_id,
                p.title,
                index.section(p.section_id).text,
                tuple(index.sentences[i].text for i in rows),
                index.sentence_vectors[rows.start : rows.stop],
                tuple(index.sentence_terms(i) for i in rows),
                tuple(index.sentences[i].kind for i in rows),
            )
        )
    return out


def request_query(index: Index, question: str, qvec: np.ndarray | None, frequency: Frequency = zipf) -> Query:
    """What a served request knows of ``question`` besides its passages: its vector, the acquired
    index's term weights and what it asks (``asked.analyse``): what recording and calibration
    draft with too."""
    return Query(qvec, index.weights, analyse(question, index.answering, frequency))


def offered(
    index: Index, thresholds: Thresholds, question: str, query_vector: QueryVector | None = None
) -> list[PassageText]:
    """The passages a drafter is offered for ``question``, exactly as a served request
    retrieves them: what recording sends, what pricing prices, what the gate times."""
    lexical_only = thresholds.retrieval.serving_mode == "lexical"
    qvec = None if lexical_only else (query_vector or stored_vector)(index, question)
    return passage_texts(index, consult(index, thresholds, question, qvec))


class Service:
    """The request path. Dependencies are passed in: registry, thresholds, drafter, clock,
    how a query vector is obtained (the committed vector for the fixed set; the local embedder
    for free text) and how common a word is in English (``text.english``: the first answer to
    reach the relevance check loads its list, about 40 ms, unless the caller warmed it)."""

    def __init__(
        self,
        registry: Registry,
        thresholds: Thresholds,
        drafter: Drafter,
        clock: Clock = time.perf_counter,
        query_vector: QueryVector = stored_vector,
        frequency: Frequency = zipf,
    ):
        self.registry = registry
        self.thresholds = thresholds
        self.drafter = drafter
        self.clock = clock
        self.query_vector = query_vector
        self.frequency = frequency

    def answer(self, question: str, question_id: str | None = None) -> Answer | Abandoned:
        deadline = Deadline(self.thresholds.budget.request_deadline_ms, self.clock)
        index = self.registry.acquire()  # the only acquire of this request
        return self._answer(index, question, question_id, deadline)

    def answer_unhurried(self, question: str, question_id: str | None = None) -> Answer | Abandoned:
        """``answer`` with no deadline: what measurement records (states, claims, rules), so a
        loaded machine cannot turn an answer into an abandoned one. Latency is gated on its own
        (``budget``)."""
        index = self.registry.acquire()
        return self._answer(index, question, question_id, Deadline(float("inf"), self.clock))

    def answer_on(self, index: Index | None, question: str, question_id: str | None = None) -> Answer | Abandoned:
        """``answer`` on an index the caller acquired (its one acquire of the request), for a
        caller that keys something on that very object; None answers no_context."""
        deadline = Deadline(self.thresholds.budget.request_deadline_ms, self.clock)
        return self._answer(index, question, question_id, deadline)

    def _answer(
        self, index: Index | None, question: str, question_id: str | None, deadline: Deadline
    ) -> Answer | Abandoned:
        if index is None:
            return Answer(
                question_id,
                question,
                AnswerState.NO_CONTEXT,
                (),
                (),
                (),
                None,
                deadline.report(),
                self.drafter.name,
                detail=self.registry.load_error or "no index is installed",
            )
        lexical_only = self.thresholds.retrieval.serving_mode == "lexical"
        batched = isinstance(self.query_vector, BatchedVectors) and not lexical_only
        qvec: np.ndarray | None = None
        try:
            if batched:
                # A free-text question's vector comes from a shared call of the embedder: the
                # wait for that call is a stage of its own, spent from this deadline.
                assert isinstance(self.query_vector, BatchedVectors)
                ticket = self.query_vector.queue(index, question)
                try:
                    with deadline.stage("embedding_wait"):
                        ticket.started()
                    with deadline.stage("embedding"):
                        qvec = ticket.vector()
                finally:
                    ticket.forgo()  # abandoned before its own call ran: the embedder is freed
            with deadline.stage("retrieval"):
                if not batched and not lexical_only:
                    qvec = self.query_vector(index, question)
                passages = consult(index, self.thresholds, question, qvec)
            if not passages:
                return Answer(
                    question_id,
                    question,
                    AnswerState.NO_CONTEXT,
                    (),
                    (),
                    (),
                    index.version,
                    deadline.report(),
                    self.drafter.name,
                    detail="retrieval returned no passages",
                )
            d = self._deliberate(index, question, question_id, qvec, passages, deadline)
        except DeadlineExceeded as exc:
            return Abandoned(question_id, question, "abandoned", str(exc), index.version, exc.report)
        verdicts = withdraw_off_topic(d.verdicts, d.relevance) if d.relevance else d.verdicts
        return Answer(
            question_id=question_id,
            question=question,
            state=decide(verdicts, d.relevance.verdict if d.relevance else None),
            kept=tuple(v for v in verdicts if v.kept),
            withdrawn=tuple(v for v in verdicts if not v.kept),
            passages=passages,
            index_version=index.version,
            budget=deadline.report(),
            drafter=self.drafter.name,
            relevance=d.relevance,
        )

    def _deliberate(
        self,
        index: Index,
        question: str,
        question_id: str | None,
        qvec: np.ndarray | None,
        passages: tuple[Passage, ...],
        deadline: Deadline,
    ) -> Deliberation:
        with deadline.stage("drafting"):
            texts = passage_texts(index, passages)
            query = request_query(index, question, qvec, self.frequency)
            selector = self.thresholds.drafting.selector
            if selector is not None:
                # scored once: the drafter's choice and the answer's confidence read the same candidates
                query = replace(query, candidates=tuple(candidates(question, query, texts, query.asked)))
            claims = self.drafter.draft(question_id, question, texts, query)
        with deadline.stage("grounding"):
            retrieved = {p.section_id: index.passages[p.section_id] for p in passages}
            verdicts = withdraw_apparatus(
                check_claims(claims, retrieved, self.thresholds.grounding.coverage_floor, checkpoint=deadline.check),
                index.never_answers,
            )
        kept = [v for v in verdicts if v.kept]
        with deadline.stage("relevance"):
            scores = {p.section_id: p.score for p in passages}
            selected = 0.0
            if kept and selector is not None and query.candidates is not None:
                best = confidence((v.claim.text for v in kept), query.candidates, selector)
                selected = probability(best) if best is not None else 0.0
            relevance = None
            if kept:
                r = self.thresholds.relevance
                relevance = assess(question, qvec, kept, index, r, scores, self.frequency, query.asked, selected)
        return Deliberation(passages, tuple(verdicts), relevance)

    def deliberate(self, question: str, question_id: str | None = None) -> Deliberation | None:
        """What ``answer`` weighs before it decides, without a deadline (for calibration):
        None when no index is installed or nothing is retrieved."""
        index = self.registry.acquire()
        if index is None:
            return None
        qvec = None if self.thresholds.retrieval.serving_mode == "lexical" else self.query_vector(index, question)
        passages = consult(index, self.thresholds, question, qvec)
        if not passages:
            return None
        return self._deliberate(index, question, question_id, qvec, passages, Deadline(float("inf"), self.clock))
