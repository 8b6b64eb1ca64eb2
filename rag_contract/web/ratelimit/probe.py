"""The gate's probe: drive an ASGI app in-process and report whether the limiter is there.

``probe`` uses no HTTP client and no server: a frozen clock, a fresh store, requests
delivered through the ASGI interface the way a server would. The CI gate runs it against
the real app.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from starlette.types import ASGIApp, Message

from rag_contract.web.ratelimit.bucket import Allowance

PROBE_NOW = 1000.0  # the frozen time the probe hands to build_app: nothing ever refills


@dataclass(frozen=True)
class ProbeResult:
    passed: bool
    detail: str  # "ok: ..." or every failed check, each prefixed (a)/(b)/(c)
    served: int  # check (a): requests not refused among the first `burst`
    refused_at: int | None  # check (a): 1-based index of the first 429, None if none
    retry_after: str | None  # check (a): Retry-After of that 429, verbatim
    failures: tuple[str, ...] = ()


@dataclass(frozen=True)
class _Reply:
    status: int  # 500 when the app raised or ended without a response, as a server would
    headers: dict[str, str]  # lower-cased names, last value wins


async def _call(app: ASGIApp, path: str, peer: str, forwarded: list[str] | None) -> _Reply:
    """One GET through the ASGI interface, the way a server would deliver it."""
    path, _, query = path.partition("?")
    headers = [(b"host", b"localhost"), (b"user-agent", b"ragc-ratelimit-probe")]
    if forwarded is not None:
        headers.append((b"x-forwarded-for", ", ".join(forwarded).encode("latin-1")))
    scope: dict[str, Any] = {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": "1.1",
        "method": "GET",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "root_path": "",
        "query_string": query.encode(),
        "headers": headers,
        "client": (peer, 40000),
        "server": ("localhost", 80),
    }
    done = asyncio.Event()
    delivered = False
    status = 0
    reply_headers: dict[str, str] = {}

    async def receive() -> Message:
        nonlocal delivered
        if not delivered:
            delivered = True
            return {"type": "http.request", "body": b"", "more_body": False}
        await done.wait()  # the client stays connected until the response is complete
        return {"type": "http.disconnect"}

    async def send(message: Message) -> None:
        nonlocal status
        if message["type"] == "http.response.start":
            status = int(message["status"])
            for name, value in message.get("headers", ()):
                reply_headers[name.decode("latin-1").lower()] = value.decode("latin-1")
        elif message["type"] == "http.response.body" and not message.get("more_body", False):
            done.set()

    try:
        async with asyncio.timeout(10):
            await app(scope, receive, send)
    except Exception:  # noqa: BLE001 - a crashing handler is not the limiter's business
        pass  # (timeouts included: then no 429 was sent, which the checks report)
    finally:
        done.set()
    return _Reply(status or 500, reply_headers)


def _chain(client: str, hops: int, forged: list[str]) -> list[str]:
    """X-Forwarded-For as our proxies would leave it: forged entries, then the client as
    seen by the outermost trusted proxy, then each inner proxy's view."""
    inner = [f"10.255.0.{k}" for k in range(1, hops)]
    return [*forged, client, *inner]


_PROXY_PEER = "10.255.0.254"  # the proxy that connects to us when hops > 0


async def _run_probe(app: ASGIApp, allowance: Allowance, path: str) -> ProbeResult:
    burst, hops = allowance.burst, allowance.trusted_proxy_hops
    failures: list[str] = []

    async def as_client(client: str, forged: list[str] | None = None) -> _Reply:
        if hops == 0:
            return await _call(app, path, client, forged)
        return await _call(app, path, _PROXY_PEER, _chain(client, hops, forged or []))

    # (a) one client: exactly `burst` served, then a 429 with a usable Retry-After.
    replies = [await as_client("198.51.100.1") for _ in range(burst + 1)]
    refused = [i + 1 for i, r in enumerate(replies) if r.status == 429]
    refused_at = refused[0] if refused else None
    served = sum(1 for r in replies[:burst] if r.status != 429)
    retry_after = replies[refused_at - 1].headers.get("retry-after") if refused_at else None
    if refused_at is None:
        failures.append(
            f"(a) one client: none of {burst + 1} requests to {path} was refused with 429 "
            f"(burst {burst}); the rate limiter is not in the middleware stack"
        )
    else:
        if refused_at <= burst:
            failures.append(f"(a) one client: refused at request {refused_at}, expected exactly {burst} served")
        if retry_after is None:
            failures.append("(a) one client: the 429 has no Retry-After header")
        elif not (retry_after.isascii() and retry_after.isdigit() and int(retry_after) > 0):
            failures.append(f"(a) one client: Retry-After {retry_after!r} is not a positive whole number")
        if "x-index-version" in replies[refused_at - 1].headers:
            failures.append("(a) one client: the 429 carries X-Index-Version; the limiter must run before the app")

    # (b) forged X-Forwarded-For entries (everything a caller controls) do not buy a new bucket.
    if hops == 0:
        forgeries = [[f"203.0.113.{i % 250}"] for i in range(1, burst + 2)]
        what = "varying X-Forwarded-For with trusted_proxy_hops=0"
    else:
        # zero, one or two forged entries, all different: neither a value nor a count of
        # entries on the left may move which entry is read
        forgeries = [[f"203.0.113.{i % 250}", f"192.0.2.{7 * i % 250}"][: i % 3] for i in range(1, burst + 2)]
        what = f"varying the forgeable entries left of the trusted hop ({hops})"
    replies = [await as_client("198.51.100.2", forged) for forged in forgeries]
    if replies[-1].status != 429:
        failures.append(f"(b) {what}: request {burst + 1} was served (status {replies[-1].status}), not refused")

    # (c) two callers differing only where it counts get separate buckets.
    first = [await as_client("198.51.100.3", ["203.0.113.250"]) for _ in range(burst + 1)]
    second = await as_client("198.51.100.4", ["203.0.113.250"])
    where = "peer address" if hops == 0 else f"trusted hop entries[-{hops}]"
    if first[-1].status != 429:
        failures.append(f"(c) first caller was not refused after {burst + 1} requests")
    elif second.status == 429:
        failures.append(f"(c) two callers differing only at the {where} share one bucket")

    if failures:
        detail = "; ".join(failures)
    else:
        detail = (
            f"ok: {burst} served then 429 with Retry-After {retry_after}; forged X-Forwarded-For "
            f"refused; callers differing at the {where} limited separately"
        )
    return ProbeResult(not failures, detail, served, refused_at, retry_after, tuple(failures))


def probe(
    build_app: Callable[[Callable[[], float]], ASGIApp],
    allowance: Allowance,
    path: str = "/health",
) -> ProbeResult:
    """Prove the limiter is installed in the app ``build_app(clock)`` returns.

    ``build_app`` receives a frozen clock (``PROBE_NOW``) to wire into its rate-limit
    middleware, with a fresh store, configured with ``allowance``. The app is driven
    in-process through ASGI (no HTTP client, no server, no lifespan). Synchronous: call it
    outside a running event loop. Checks, each named in ``detail`` when it fails:
    (a) one client gets exactly ``burst`` requests, then a 429 whose Retry-After is a
    positive whole number and which carries no X-Index-Version; (b) varying what a caller
    can forge in X-Forwarded-For is still refused past the burst; (c) two callers differing
    only at the trusted hop (the peer, with 0 hops) get separate buckets.
    """
    app = build_app(lambda: PROBE_NOW)
    return asyncio.run(_run_probe(app, allowance, path))
