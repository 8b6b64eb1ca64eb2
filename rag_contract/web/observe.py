"""The HTTP side of observing: an outermost ASGI middleware that times each request, and
``note``, which a handler calls with the outcome it got from the core.

The middleware sees every response, the limiter's refusals included (it sits outside the
limiter), and hands ``RequestFacts`` to the ``Observer`` once the response has been sent, so
traces, metrics and the access log add nothing to the request's own latency. A refusal before
any handler ran is named from the status: 429 ``rate_limited``, 503 ``limiter_unavailable``,
unless whoever refused called ``mark_shed`` (admission control) first.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from starlette.routing import BaseRoute, Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from rag_contract.answering.deadline import BudgetReport
from rag_contract.observability.observer import Observer
from rag_contract.observability.request import RequestFacts, observation_of
from rag_contract.web.ratelimit.identity import client_identity
from rag_contract.web.ratelimit.middleware import IDENTITY_STATE

_OUTCOME = "rag_contract.outcome"
_SHED = "rag_contract.shed"
OTHER_ROUTE = "other"  # a path no route matches: one label, however many such paths


def note(scope: Scope, outcome: object, budget: BudgetReport | None = None) -> None:
    """Record what the core answered for the request of ``scope`` (and the budget it reports,
    when that is not the outcome's own), for the observer; costs one dict store when nobody
    observes."""
    scope.setdefault("state", {})[_OUTCOME] = (outcome, budget)


def mark_shed(scope: Scope, reason: str) -> None:
    """Called by whatever refuses a request for load (admission control) before responding;
    ``reason`` is the admission's (``queue_full``: refused at once; ``queue_wait``: refused after
    waiting its bounded time in the queue)."""
    scope.setdefault("state", {})[_SHED] = reason


def route_of(scope: Scope, routes: Sequence[BaseRoute]) -> str:
    """The route template that matched (``/answer/{qid}``), found again for a request refused
    before routing; ``other`` when none does."""
    route = scope.get("route")
    if isinstance(route, Route):
        return route.path
    path = scope.get("path", "")
    for r in routes:
        if isinstance(r, Route) and r.path_regex.match(path):
            return r.path
    return OTHER_ROUTE


def _refused(scope: Scope, status: int, state: dict) -> str | None:
    if state.get(_SHED):
        return f"shed_{state[_SHED]}"
    if "route" in scope:
        return None
    return {429: "rate_limited", 503: "limiter_unavailable"}.get(status)


def _header(scope: Scope, name: bytes) -> str | None:
    values = [v.decode("latin-1") for k, v in scope.get("headers", ()) if k.lower() == name]
    return ",".join(values) if values else None


class ObserveMiddleware:
    """Pure ASGI; install outermost. Times each http request and calls ``observer.observe``."""

    def __init__(self, app: ASGIApp, observer: Observer, routes: Sequence[BaseRoute], trusted_proxy_hops: int):
        self.app = app
        self.observer = observer
        self.routes = tuple(routes)
        self.hops = trusted_proxy_hops

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started_ns = time.time_ns()
        began = time.perf_counter()
        status = 500  # what the client gets if the app raises before starting a response

        async def observed_send(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, observed_send)
        finally:
            self.observer.observe(self._facts(scope, status, time.perf_counter() - began, started_ns))

    def _facts(self, scope: Scope, status: int, latency_s: float, started_ns: int) -> RequestFacts:
        state = scope.get("state") or {}
        noted = state.get(_OUTCOME)
        client = state.get(IDENTITY_STATE)
        if client is None:  # the limiter did not run (it always does in the served app): as it would
            peer = scope.get("client")
            client = client_identity(peer[0] if peer else None, _header(scope, b"x-forwarded-for"), self.hops)
        return RequestFacts.of(
            route_of(scope, self.routes),
            scope.get("method", "GET"),
            status,
            latency_s,
            started_ns,
            client,
            observation_of(*noted) if noted else None,
            _refused(scope, status, state),
        )
