"""One request as one trace: a root span and one child span per budget stage, as plain values.

``span_plan`` decides what a trace says; ``otel`` builds it in the exporting process and
``otlp_wire`` encodes it through the redaction rule. The stage spans (retrieval, drafting, grounding,
relevance; ``reused`` for a kept fixed answer) carry the budget's own stage times: their
durations are the ones the response reports, laid end to end from the request's start (the
core does not record where in the request each began).

Text attributes (question, claims, passage titles) are always in the plan; whether they leave
the process is decided at export, in one place (``redaction``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from rag_contract.observability import redaction
from rag_contract.observability.memo import BoundedMemo
from rag_contract.observability.otlp_wire import Attributes
from rag_contract.observability.request import RequestFacts

_NS_PER_MS = 1_000_000


@dataclass(frozen=True)
class StageSpan:
    name: str
    start_ns: int
    end_ns: int
    attributes: Mapping[str, Any]


@dataclass(frozen=True)
class SpanPlan:
    name: str
    start_ns: int
    end_ns: int
    attributes: Mapping[str, Any]
    stages: tuple[StageSpan, ...]
    failed: bool  # a 5xx: the span's status is ERROR (with no description)


MEMO_LIMIT = 4096


class SharedLayers:
    """The shared layers of root spans, one object per distinct content (bounded): requests that
    say the same thing (one route, status and kept answer) share one, which the encoder keeps
    encoded. Used by one thread at a time (the exporting one)."""

    def __init__(self, limit: int = MEMO_LIMIT):
        self._layers: BoundedMemo[tuple, Mapping[str, Any]] = BoundedMemo(limit)

    def get(self, key: tuple, build: Callable[[], Mapping[str, Any]]) -> Mapping[str, Any]:
        layer = self._layers.get(key)
        if layer is None:
            layer = self._layers.keep(key, MappingProxyType(build()))
        return layer


def _shared(facts: RequestFacts, question_sha256: str | None) -> dict[str, Any]:
    """What the root span says that does not change from one request to the next of its kind."""
    attrs: dict[str, Any] = {
        "http.request.method": facts.method,
        "http.route": facts.route,
        "http.response.status_code": facts.status,
        "rag.state": facts.state,
    }
    if facts.refused:
        attrs["rag.refused"] = facts.refused
    o = facts.observation
    if o is not None:
        attrs.update(
            {
                "rag.question.sha256": question_sha256 or redaction.question_digest(o.question),
                redaction.QUESTION_TEXT: o.question,
                "rag.claims.kept": len(o.kept),
                "rag.claims.withdrawn": len(o.withdrawn),
                "rag.withdrawn.rules": sorted(set(o.withdrawn_rules)),
                "rag.passages.count": len(o.passage_ids),
                "rag.passages.ids": list(o.passage_ids),
            }
        )
        optional = {
            "rag.index_version": o.index_version,
            "rag.drafter": o.drafter,
            "rag.budget.deadline_ms": o.deadline_ms,
            redaction.CLAIMS_TEXT: list(o.kept) or None,
            redaction.WITHDRAWN_TEXT: list(o.withdrawn) or None,
            redaction.PASSAGE_TITLES: list(o.passage_titles) or None,
        }
        attrs.update({k: v for k, v in optional.items() if v is not None})
    return attrs


def _shared_key(facts: RequestFacts, question_sha256: str | None) -> tuple:
    o = facts.observation
    head = (facts.method, facts.route, facts.status, facts.state, facts.refused)
    if o is None:
        return head
    return (*head, o.question, question_sha256, o.index_version, o.drafter, o.deadline_ms, o.kept, o.withdrawn,
            o.withdrawn_rules, o.passage_ids, o.passage_titles)  # fmt: skip


def span_plan(
    facts: RequestFacts, client_key: str, layers: SharedLayers | None = None, question_sha256: str | None = None
) -> SpanPlan:
    """The trace of ``facts``; ``client_key`` is the already hashed client identity, and
    ``question_sha256`` the question's digest when it was taken before the text was withheld (None:
    taken here from the question). The root's attributes are ``Attributes``: the shared layer from
    ``layers`` (built afresh without it), the client key and the time spent in its own."""
    start = facts.started_ns
    end = start + int(facts.latency_s * 1e9)
    digest = question_sha256

    def build() -> dict[str, Any]:
        return _shared(facts, digest)

    shared = layers.get(_shared_key(facts, digest), build) if layers is not None else build()
    own: dict[str, Any] = {"rag.client.key": client_key}
    stages: list[StageSpan] = []
    o = facts.observation
    if o is not None:
        if o.spent_ms is not None:
            own["rag.budget.spent_ms"] = o.spent_ms
        at = start
        for name, ms in o.stages_ms.items():
            stage_end = at + int(ms * _NS_PER_MS)
            stages.append(StageSpan(name, at, stage_end, {"rag.stage.ms": round(ms, 3)}))
            at = stage_end
    name = f"{facts.method} {facts.route}"
    return SpanPlan(
        name,
        start,
        max(end, stages[-1].end_ns if stages else end),
        Attributes(shared, own),
        tuple(stages),
        facts.status >= 500,
    )
