"""A fixed question's answer, computed once per served Index object and reused while it is served.

An answer to a fixed question is a function of the Index (corpus, vectors, question vectors
and version travel together in it), the question, its recorded draft, the thresholds and the
code. Within one process only the Index can change: thresholds are loaded once, and recorded
drafts are build artefacts (replacing them means a restart, as for ``Listing``). So the
answer is kept per Index **object**, keyed by identity: a request that acquired index A is
served A's answer or computes one on A, and the first request after a cutover to B finds
nothing under B and computes there. Nothing is ever looked up by version, so two Index
objects of one version never share an entry either.

What is kept (``Entity``) is everything in the response but the budget: the answer, its JSON
body without the budget (encoded once), and a weak entity tag over those bytes. The tag is
weak because two responses under it differ in the budget alone (RFC 9110 section 8.8.1); it
digests the bytes that do not differ, so it changes whenever anything the answer depends on
changes, whether or not anyone listed that input. The budget stays truthful: a request that
computes reports the core's budget; a request served from the entry reports what it spent,
as one stage, ``reused``.

Only answers that reached a verdict on an index are kept (grounded, partial, unsupported);
no_context, abandoned and undraftable outcomes are returned as they are and recomputed next
time, so a transient failure is never served twice.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Generic, TypeVar

from rag_contract.answering.deadline import BudgetReport, Clock
from rag_contract.answering.service import Answer, AnswerState
from rag_contract.config.questions import Question
from rag_contract.index.store import Index
from rag_contract.web.validators import entity_tag

REUSED = "reused"  # the one budget stage of a request served from a kept answer

OutcomeT = TypeVar("OutcomeT")


def encode(body: Mapping[str, Any]) -> bytes:
    """JSON exactly as Starlette's ``JSONResponse`` renders it."""
    return json.dumps(body, ensure_ascii=False, allow_nan=False, indent=None, separators=(",", ":")).encode("utf-8")


def _finite(value: object) -> bool:
    """An int or a finite float: a number ``json.dumps`` writes as its ``repr``."""
    return type(value) in (int, float) and value - value == 0  # type: ignore[operator]  # NaN, inf: nan


def budget_json(budget: BudgetReport) -> bytes:
    """``encode(budget.as_dict())``, byte for byte, written directly: the one part of a kept
    answer's body that each request encodes, where ``json.dumps`` costs more than the rest of
    the response. Anything but finite numbers is left to ``encode``."""
    spent = round(budget.spent_ms, 3)
    stages = []
    for name, ms in budget.stages.items():
        ms = round(ms, 3)
        if not _finite(ms):
            return encode(budget.as_dict())
        stages.append(f"{_STRING(name)}:{ms!r}")
    if not (_finite(spent) and _finite(budget.deadline_ms)):
        return encode(budget.as_dict())
    members = f'"deadline_ms":{budget.deadline_ms!r},"spent_ms":{spent!r},"stages":{{{",".join(stages)}}}'
    return ("{" + members + "}").encode()


# A string as ``encode`` (ensure_ascii off) writes it, quotes and escapes included.
_STRING = json.encoder.encode_basestring


@dataclass(frozen=True)
class Entity:
    """One fixed question's answer on one Index, minus the budget."""

    answer: Answer
    view: Mapping[str, Any]  # answer.as_dict() without "budget"
    head: bytes  # encode(view) without its closing brace
    etag: str

    @classmethod
    def of(cls, answer: Answer) -> Entity:
        view = {k: v for k, v in answer.as_dict().items() if k != "budget"}
        head = encode(view)[:-1]
        return cls(answer, MappingProxyType(view), head, entity_tag([head], weak=True))

    def body(self, budget: BudgetReport) -> bytes:
        """The response body: the kept bytes with this request's budget as the last member."""
        return self.head + b',"budget":' + budget_json(budget) + b"}"

    def as_dict(self, budget: BudgetReport) -> dict[str, Any]:
        """What a page renders: the answer with this request's budget."""
        return {**self.view, "budget": budget.as_dict()}


@dataclass(frozen=True)
class Served:
    """An answer as one request serves it: the kept entity and what this request spent."""

    entity: Entity
    budget: BudgetReport


def keepable(index: Index | None, outcome: object) -> bool:
    """Only a verdict reached on ``index`` itself is kept."""
    return (
        index is not None
        and isinstance(outcome, Answer)
        and outcome.state is not AnswerState.NO_CONTEXT
        and outcome.index_version == index.version
    )


class FixedAnswers(Generic[OutcomeT]):
    """Per-Index memo of fixed answers. ``compute(index, question)`` answers on the index the
    request acquired (``Service.answer_on``); ``deadline_ms`` and ``clock`` time a reuse."""

    def __init__(self, compute: Callable[[Index | None, Question], OutcomeT], deadline_ms: float, clock: Clock):
        self._compute = compute
        self._deadline_ms = deadline_ms
        self._clock = clock
        # (index, {question id: entity}); rebound whole when the index changes, so a reader
        # sees one index's entries or the other's, never a mixture.
        self._entry: tuple[Index, dict[str, Entity]] | None = None

    def lookup(self, index: Index | None, question_id: str) -> Entity | None:
        entry = self._entry
        if index is None or entry is None or entry[0] is not index:
            return None
        return entry[1].get(question_id)

    def serve(self, index: Index | None, question: Question) -> Served | OutcomeT:
        """The kept answer with this request's budget, else the outcome computed on ``index``
        (kept when it is an answer reached on ``index``)."""
        began = self._clock()
        entity = self.lookup(index, question.id)
        if entity is not None:
            spent = (self._clock() - began) * 1000.0
            return Served(entity, BudgetReport(self._deadline_ms, spent, MappingProxyType({REUSED: spent})))
        outcome = self._compute(index, question)
        if index is None or not isinstance(outcome, Answer) or not keepable(index, outcome):
            return outcome
        entity = Entity.of(outcome)
        self._keep(index, question.id, entity)
        return Served(entity, outcome.budget)

    def _keep(self, index: Index, question_id: str, entity: Entity) -> None:
        entry = self._entry
        if entry is not None and entry[0] is index:
            entry[1][question_id] = entity
        else:
            # A request still finishing on the previous index may rebind it back; the next
            # request on the current one then recomputes: slower for a moment, never wrong.
            self._entry = (index, {question_id: entity})
