"""What one request did, as the observers see it: plain values taken after the response is sent.

``Observation`` is what a handler learned from the core (state, index version, claims, budget);
``RequestFacts`` adds what the HTTP layer knows (route template, status, latency, who asked,
whether the limiter or admission refused it). Text fields (question, claims, passage titles) are
carried here so that one point, ``redaction``, decides whether any of it leaves the process.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, TypeVar

from rag_contract.answering.deadline import BudgetReport
from rag_contract.answering.service import Abandoned, Answer
from rag_contract.observability.memo import IdentityMemo

NO_STATE = "none"  # the state label of a request that asked the core nothing
ABANDONED = "abandoned"


@dataclass(frozen=True)
class Observation:
    """One outcome of the answering core, reduced to what traces and metrics may use."""

    state: str
    index_version: str | None
    question: str
    drafter: str | None = None
    stages_ms: Mapping[str, float] = field(default_factory=lambda: MappingProxyType({}))
    deadline_ms: float | None = None
    spent_ms: float | None = None
    kept: tuple[str, ...] = ()  # claim texts
    withdrawn: tuple[str, ...] = ()  # claim texts
    withdrawn_rules: tuple[str, ...] = ()  # one per withdrawn claim, in order
    passage_ids: tuple[str, ...] = ()
    passage_titles: tuple[str, ...] = ()


T = TypeVar("T")
_new = object.__new__


def _frozen(cls: type[T], fields: dict[str, Any]) -> T:
    """``cls(**fields)`` for a frozen dataclass with every field given, made without its
    ``__init__`` (which sets each field through ``object.__setattr__``, the most of what an
    observation costs a request: four times this); the instance is as frozen and compares equal
    all the same."""
    made = _new(cls)
    made.__dict__.update(fields)
    return made


def _stages(budget: BudgetReport) -> Mapping[str, float]:
    """The budget's stages as a read-only mapping no one else can change: the report's own when it is
    already a view (``Deadline.report`` and a kept answer's budget make a fresh one each), else a copy."""
    stages = budget.stages
    return stages if type(stages) is MappingProxyType else MappingProxyType(dict(stages))


# The budget aside, an Answer's observation depends on the Answer alone, and a kept fixed answer
# is the same Answer object on every request that serves it: its parts are taken once.
_PARTS_LIMIT = 256
_parts_memo: IdentityMemo[dict[str, Any]] = IdentityMemo(_PARTS_LIMIT)


def _answer_parts(answer: Answer) -> dict[str, Any]:
    hit = _parts_memo.get(answer)
    if hit is not None:
        return hit
    return _parts_memo.keep(
        answer,
        {
            "state": answer.state.value,
            "index_version": answer.index_version,
            "question": answer.question,
            "drafter": answer.drafter,
            "kept": tuple(v.claim.text for v in answer.kept),
            "withdrawn": tuple(v.claim.text for v in answer.withdrawn),
            "withdrawn_rules": tuple(v.rule or "" for v in answer.withdrawn),
            "passage_ids": tuple(p.section_id for p in answer.passages),
            "passage_titles": tuple(p.title for p in answer.passages),
        },
    )


def observation_of(outcome: object, budget: BudgetReport | None = None) -> Observation:
    """An ``Answer`` (with the budget this request reports, when it differs from the answer's own),
    an ``Abandoned``, or any other outcome that names its error in ``as_dict()["error"]``."""
    if isinstance(outcome, Answer):
        b = budget or outcome.budget
        return _frozen(
            Observation,
            {**_answer_parts(outcome), "stages_ms": _stages(b), "deadline_ms": b.deadline_ms, "spent_ms": b.spent_ms},
        )
    if isinstance(outcome, Abandoned):
        b = outcome.budget
        return Observation(ABANDONED, outcome.index_version, outcome.question, None, _stages(b), b.deadline_ms,
                           b.spent_ms)  # fmt: skip
    as_dict = getattr(outcome, "as_dict", None)
    body = as_dict() if callable(as_dict) else {}
    return Observation(
        state=str(body.get("error") or NO_STATE),
        index_version=body.get("index_version"),
        question=str(body.get("question") or ""),
    )


@dataclass(frozen=True)
class RequestFacts:
    """One request as the HTTP layer saw it. ``refused`` names a refusal made before any handler
    answered (``rate_limited``, ``limiter_unavailable``, ``shed_queue_full``, ``shed_queue_wait``);
    ``observation`` is None when no handler asked the core anything."""

    route: str
    method: str
    status: int
    latency_s: float
    started_ns: int  # wall clock, ns since the epoch: where a trace is placed in time
    client: str  # the rate limiter's client identity (hashed before it goes anywhere)
    observation: Observation | None = None
    refused: str | None = None

    @classmethod
    def of(
        cls,
        route: str,
        method: str,
        status: int,
        latency_s: float,
        started_ns: int,
        client: str,
        observation: Observation | None,
        refused: str | None,
    ) -> RequestFacts:
        """``RequestFacts(...)`` with every field given, as the request path makes one: without the
        frozen ``__init__`` (see ``_frozen``); equal to the one it would make."""
        return _frozen(
            cls,
            {
                "route": route,
                "method": method,
                "status": status,
                "latency_s": latency_s,
                "started_ns": started_ns,
                "client": client,
                "observation": observation,
                "refused": refused,
            },
        )

    @property
    def state(self) -> str:
        return self.observation.state if self.observation else NO_STATE

    @property
    def index_version(self) -> str | None:
        return self.observation.index_version if self.observation else None
