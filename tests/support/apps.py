"""The app under test, assembled in one place: ``create_app`` over explicit parts.

``make_app(project, registry, ...)`` builds what ``serve`` builds, from parts a test can
replace: two services over ``registry`` (the fixed questions: ``FixtureDrafter`` over
``drafts`` with the committed question vector; free text: the extractive drafter with the
local embedder's vector), a service clock, the /health status, and the rate limiter's
clock and store. Unless a test says otherwise the thresholds are ``generous`` (a rate
allowance no test reaches unless it is about the limiter), both clocks are ``FROZEN`` (a
response's budget is all zeros) and /health reports a fresh index (``fresh_status``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from starlette.applications import Starlette

from rag_contract.answering.drafting import Drafter, ExtractiveDrafter, FixtureDrafter
from rag_contract.answering.service import QueryVector, Service, committed_vector
from rag_contract.config.thresholds import Thresholds
from rag_contract.embedders.local import LocalEmbedder
from rag_contract.index.registry import Registry
from rag_contract.index.status import IndexStatus
from rag_contract.index.store import Index
from rag_contract.observability.observer import Observer
from rag_contract.project import Project
from rag_contract.web.app import create_app
from rag_contract.web.ratelimit import BucketStore, MemoryStore
from rag_contract.web.serving import embedded_vector

Clock = Callable[[], float]
FROZEN: Clock = lambda: 0.0  # noqa: E731 - a clock that never moves: budgets are all zeros


def generous(thresholds: Thresholds) -> Thresholds:
    """``thresholds`` with a rate allowance no test reaches."""
    rl = dataclasses.replace(thresholds.rate_limit, max_requests_per_minute=1e9, max_client_burst=10**9)
    return dataclasses.replace(thresholds, rate_limit=rl)


def fresh_status(index: Index | None = None) -> Callable[[], dict[str, Any]]:
    """/health's status for an up-to-date index: ``index``'s version on both sides, or no
    versions at all when no index is given."""
    if index is None:
        return lambda: {"fresh": True, "index_version": None, "rebuild_version": None, "changes": [], "error": None}
    return lambda: IndexStatus(index.version, index.version, ()).as_dict()


def make_app(
    project: Project,
    registry: Registry,
    *,
    embedder: LocalEmbedder | None = None,
    drafts: Path | None = None,
    thresholds: Thresholds | None = None,
    fixture_drafter: Drafter | None = None,
    fixture_vector: QueryVector | None = None,
    ask_drafter: Drafter | None = None,
    ask_vector: QueryVector | None = None,
    service_clock: Clock = FROZEN,
    status: Callable[[], Mapping[str, Any]] | None = None,
    rate_clock: Clock = FROZEN,
    rate_store: BucketStore | None = None,
    observer: Observer | None = None,
) -> Starlette:
    """The served app over explicit parts; each one left out takes the default above.

    ``drafts`` is needed unless ``fixture_drafter`` is given, ``embedder`` unless both
    query vectors are.
    """
    t = generous(project.thresholds) if thresholds is None else thresholds
    if fixture_drafter is None:
        if drafts is None:
            raise ValueError("make_app: pass drafts (a recorded drafts directory) or a fixture_drafter")
        fixture_drafter = FixtureDrafter(drafts)
    if (fixture_vector is None or ask_vector is None) and embedder is None:
        raise ValueError("make_app: pass the embedder, or both query vectors")
    fixture_vector = committed_vector(embedder) if fixture_vector is None else fixture_vector
    ask_vector = embedded_vector(embedder) if ask_vector is None else ask_vector
    ask_drafter = ExtractiveDrafter.committed(t.drafting) if ask_drafter is None else ask_drafter
    return create_app(
        registry=registry,
        fixture_service=Service(registry, t, fixture_drafter, service_clock, fixture_vector),
        ask_service=Service(registry, t, ask_drafter, service_clock, ask_vector),
        questions=project.questions,
        thresholds=t,
        status=fresh_status() if status is None else status,
        clock=rate_clock,
        rate_store=MemoryStore() if rate_store is None else rate_store,
        about=project.about,
        observer=observer,
    )
