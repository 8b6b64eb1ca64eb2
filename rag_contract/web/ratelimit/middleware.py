"""The rate limiter as pure ASGI middleware: it decides before the app runs.

On every HTTP path: refused -> 429 with ``Retry-After``, sent in its turn (``pace``);
store unreachable -> 503 with ``Retry-After: 1`` (fail closed: an unlimited service is the
outage we are guarding against). Lifespan and websocket scopes pass through untouched.

Why the 429s are paced: a 429 costs the event loop a request's worth of work, and clients
that ignore ``Retry-After`` ask again the moment they are refused. Sent at once, 64 such
identities over 256 connections had the loop send ~6 400 refusals a second and nothing else:
``/health`` took seconds. Held until its turn (``refusal_pacing.py``, shared with admission's
sheds), each connection of the storm waits instead of asking again, so the refusals sent, and
the loop's work on them, are bounded whatever the clients do.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any, cast

import anyio.to_thread
from starlette.types import ASGIApp, Receive, Scope, Send

from rag_contract.web.ratelimit.bucket import Allowance
from rag_contract.web.ratelimit.identity import client_identity
from rag_contract.web.ratelimit.stores import AwaitableBucketStore, BucketStore, StoreUnavailable
from rag_contract.web.ratelimit.throttled_log import ThrottledLog

logger = logging.getLogger(__name__)
# One line per interval while the store is down, with the count of refusals held back.
UNAVAILABLE_LOG_INTERVAL_S = 10.0
# Where the identity a request was counted against is left in ``scope["state"]``, for whoever
# runs outside the limiter (the observer) to read instead of working it out again.
IDENTITY_STATE = "rag_contract.client"


def _header(scope: Scope, name: bytes) -> str | None:
    # Repeated header fields are one comma-joined list (RFC 9110 5.3), order preserved.
    values = [v.decode("latin-1") for k, v in scope.get("headers", ()) if k.lower() == name]
    return ",".join(values) if values else None


async def _send_json(send: Send, status: int, body: dict[str, Any], retry_after_s: int) -> None:
    payload = json.dumps(body, separators=(",", ":")).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(payload)).encode()),
                (b"retry-after", str(retry_after_s).encode()),
                (b"cache-control", b"no-store"),
                (b"x-content-type-options", b"nosniff"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": payload, "more_body": False})


class RateLimitMiddleware:
    """Pure ASGI middleware; install it outermost so a refusal costs nothing downstream.

    For every ``http`` scope: take a token for ``client_identity(...)`` at ``clock()``
    before calling ``app``. Refused -> 429 JSON ``{"error": "rate_limited", "detail",
    "retry_after_s"}`` with ``Retry-After``, and the app (hence X-Index-Version, answers)
    never runs. Store unavailable -> 503 ``{"error": "rate_limit_unavailable"}`` with
    ``Retry-After: 1``, logged at ERROR at most once per ``log_interval_s`` of
    ``log_clock`` (``ThrottledLog``: the next line counts the refusals held back). Other
    scope types pass through. ``pace`` (optional) is awaited before each 429 is sent: it
    holds the refusal until its turn (``RefusalPacing.pace``); without it 429s go at once.
    """

    def __init__(
        self,
        app: ASGIApp,
        allowance: Allowance,
        store: BucketStore,
        clock: Callable[[], float],
        log_interval_s: float = UNAVAILABLE_LOG_INTERVAL_S,
        log_clock: Callable[[], float] = time.monotonic,
        pace: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        self.app = app
        self.allowance = allowance
        self.store = store
        self.clock = clock
        # Its own clock: the limiter's may be frozen (the probe's), and a log must still move on.
        self.unavailable_log = ThrottledLog(logger, log_interval_s, log_clock)
        self.pace = pace

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        client = scope.get("client")
        identity = client_identity(
            client[0] if client else None,
            _header(scope, b"x-forwarded-for"),
            self.allowance.trusted_proxy_hops,
        )
        scope.setdefault("state", {})[IDENTITY_STATE] = identity
        now = self.clock()
        try:
            if getattr(self.store, "awaitable", False):
                decision = await cast(AwaitableBucketStore, self.store).take_async(identity, now, self.allowance)
            elif getattr(self.store, "blocking", True):
                # Off the event loop: a redis round trip (or its timeout) must not stall
                # every other connection.
                decision = await anyio.to_thread.run_sync(self.store.take, identity, now, self.allowance)
            else:
                decision = self.store.take(identity, now, self.allowance)
        except StoreUnavailable as exc:
            self.unavailable_log.error("rate limit store unavailable, refusing %s: %s", scope.get("path", "?"), exc)
            await _send_json(
                send,
                503,
                {
                    "error": "rate_limit_unavailable",
                    "detail": "the rate limiter cannot decide right now; retry shortly",
                    "retry_after_s": 1,
                },
                1,
            )
            return
        if decision.allowed:
            await self.app(scope, receive, send)
            return
        if self.pace is not None:
            await self.pace()
        await _send_json(
            send,
            429,
            {
                "error": "rate_limited",
                "detail": (
                    f"more than {self.allowance.burst} requests at once or "
                    f"{self.allowance.per_minute:g} per minute from this client; "
                    f"retry after {decision.retry_after_s} s"
                ),
                "retry_after_s": decision.retry_after_s,
            },
            decision.retry_after_s,
        )
