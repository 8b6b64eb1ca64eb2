"""Per-client token bucket, the first thing every HTTP request meets.

Contract:
- A client is identified by ``client_identity(peer, X-Forwarded-For, trusted_proxy_hops)``.
  Only entries our own proxies wrote are trusted; anything a caller can forge (entries left
  of the trusted hop) never changes the identity.
- Each identity owns a bucket of depth ``burst`` that refills continuously at
  ``per_minute / 60`` tokens per second and starts full. A request takes one token; with
  less than one token it is refused and told, in whole seconds rounded up, when one token
  will be there. ``refill_and_take`` is that rule as one pure function; ``MemoryStore``
  applies it in-process and ``RedisStore`` runs the same arithmetic in one Lua script, so
  the two give identical decision sequences for the same times.
- ``RateLimitMiddleware`` decides before the app runs, on every HTTP path. Refused -> 429
  with ``Retry-After``; store unreachable -> 503 with ``Retry-After: 1`` (fail closed: an
  unlimited service is the outage we are guarding against). Lifespan and websocket scopes
  pass through untouched.
- ``probe`` drives an ASGI app in-process (no HTTP client) with a frozen clock and reports
  whether the limiter is installed and behaves: used by the CI gate against the real app.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import threading
import weakref
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass
from typing import Any, Protocol

import anyio.to_thread
import redis
import redis.backoff
import redis.exceptions
import redis.retry

logger = logging.getLogger(__name__)

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

REDIS_KEY_PREFIX = "ragc:rl:"


# --- values -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Allowance:
    """What one client may do: ``per_minute`` sustained, ``burst`` at once."""

    per_minute: float  # max_requests_per_minute: refill rate of the bucket
    burst: int  # max_client_burst: bucket depth, also what a new client starts with
    trusted_proxy_hops: int  # how many proxies in front of us append to X-Forwarded-For

    def __post_init__(self) -> None:
        # A zero or infinite rate would divide by zero / never refuse; refuse the config instead.
        if not (math.isfinite(self.per_minute) and self.per_minute > 0):
            raise ValueError(f"per_minute must be a positive finite number, got {self.per_minute!r}")
        if isinstance(self.burst, bool) or not isinstance(self.burst, int) or self.burst < 1:
            raise ValueError(f"burst must be an integer >= 1, got {self.burst!r}")
        if (
            isinstance(self.trusted_proxy_hops, bool)
            or not isinstance(self.trusted_proxy_hops, int)
            or self.trusted_proxy_hops < 0
        ):
            raise ValueError(f"trusted_proxy_hops must be an integer >= 0, got {self.trusted_proxy_hops!r}")

    @property
    def tokens_per_second(self) -> float:
        return self.per_minute / 60.0

    @property
    def full_refill_s(self) -> float:
        """Seconds an empty bucket takes to become full; after that a bucket is as good as new."""
        return self.burst / self.tokens_per_second


@dataclass(frozen=True)
class Decision:
    allowed: bool
    retry_after_s: int  # whole seconds (rounded up) until one token is available; 0 when allowed


@dataclass(frozen=True)
class BucketState:
    tokens: float  # always in [0, burst]
    last_ts: float  # latest time the bucket was refilled to; never moves backwards


class StoreUnavailable(Exception):
    """The bucket store could not be asked; the caller must refuse, not serve unlimited."""


# --- the rule ---------------------------------------------------------------------------


def refill_and_take(state: BucketState | None, now: float, allowance: Allowance) -> tuple[BucketState, Decision]:
    """Refill ``state`` up to ``now`` and try to take one token.

    ``None`` is a client never seen (or forgotten after ``full_refill_s``): a full bucket.
    A clock that goes backwards (another instance slightly behind) refills nothing and does
    not move ``last_ts`` back, so the same interval is never credited twice. A refused
    request takes nothing. ``_TAKE_LUA`` is this function, operation for operation: change
    both or neither.
    """
    now = float(now)
    rate = allowance.per_minute / 60.0
    capacity = float(allowance.burst)
    if state is None:
        tokens, last = capacity, now
    else:
        tokens, last = state.tokens, state.last_ts
    elapsed = now - last
    if elapsed < 0.0:
        elapsed = 0.0
    tokens = min(capacity, tokens + elapsed * rate)
    if now > last:
        last = now
    if tokens >= 1.0:
        return BucketState(tokens - 1.0, last), Decision(True, 0)
    # tokens < 1 so this is > 0, and ceil makes it at least 1: never "retry after 0".
    return BucketState(tokens, last), Decision(False, math.ceil((1.0 - tokens) / rate))


def bucket_ttl_ms(allowance: Allowance) -> int:
    """How long an idle bucket is worth keeping: full refill time plus one second of slack
    (for clock skew between instances). An expired bucket and a full one decide alike."""
    return math.ceil((allowance.full_refill_s + 1.0) * 1000.0)


def client_identity(peer: str | None, forwarded_for: str | None, hops: int) -> str:
    """The bucket key for a request.

    ``hops == 0``: the TCP peer. Otherwise the X-Forwarded-For entry ``hops`` in from the
    right (``entries[-hops]``): each trusted proxy appends the address it saw, so that entry
    was written by our outermost proxy. A caller can only add entries on the LEFT, which we
    never read. With fewer than ``hops`` entries (or an empty one at that position) we fall
    back to the peer: everyone behind the proxy then shares one bucket, which fails safe.
    """
    fallback = peer if peer else "unknown-peer"
    if hops <= 0 or not forwarded_for:
        return fallback
    entries = [entry.strip() for entry in forwarded_for.split(",")]
    if len(entries) < hops:
        return fallback
    chosen = entries[-hops]
    return chosen if chosen else fallback


# --- stores -----------------------------------------------------------------------------


class BucketStore(Protocol):
    def take(self, key: str, now: float, allowance: Allowance) -> Decision: ...


class MemoryStore:
    """Buckets in a dict, for one process. Thread-safe: sync handlers run in a threadpool.

    Buckets idle for longer than ``full_refill_s`` are dropped now and then (they are full,
    i.e. equivalent to no entry), so a stream of new client addresses cannot grow the dict
    without bound.
    """

    _MIN_SWEEP_SIZE = 1024
    # A dict update under a lock takes microseconds: decided on the event loop, no thread hop.
    blocking = False

    def __init__(self) -> None:
        self._lock = threading.Lock()
        # key -> (state, time after which the entry equals a fresh bucket)
        self._buckets: dict[str, tuple[BucketState, float]] = {}
        self._sweep_at_size = self._MIN_SWEEP_SIZE

    def take(self, key: str, now: float, allowance: Allowance) -> Decision:
        with self._lock:
            entry = self._buckets.get(key)
            state, decision = refill_and_take(entry[0] if entry else None, now, allowance)
            self._buckets[key] = (state, state.last_ts + allowance.full_refill_s)
            if len(self._buckets) >= self._sweep_at_size:
                self._sweep(float(now))
            return decision

    def __len__(self) -> int:
        with self._lock:
            return len(self._buckets)

    def _sweep(self, now: float) -> None:
        # Amortised O(1): the next sweep waits until the dict has doubled again.
        self._buckets = {k: v for k, v in self._buckets.items() if v[1] > now}
        self._sweep_at_size = max(self._MIN_SWEEP_SIZE, 2 * len(self._buckets))


# KEYS[1] bucket hash {tokens, ts}; ARGV: now, per_minute, burst, ttl_ms.
# Mirrors refill_and_take exactly. Numbers are stored with %.17g so a float survives the
# round trip through a redis string bit for bit (Lua's default tostring keeps only 14 digits
# and the two stores would drift apart).
_TAKE_LUA = """
local now = tonumber(ARGV[1])
local rate = tonumber(ARGV[2]) / 60.0
local capacity = tonumber(ARGV[3])
local ttl_ms = tonumber(ARGV[4])
local saved = redis.call('HMGET', KEYS[1], 'tokens', 'ts')
local tokens, last
if saved[1] and saved[2] then
  tokens = tonumber(saved[1])
  last = tonumber(saved[2])
else
  tokens = capacity
  last = now
end
local elapsed = now - last
if elapsed < 0.0 then elapsed = 0.0 end
tokens = math.min(capacity, tokens + elapsed * rate)
if now > last then last = now end
local allowed = 0
local retry = 0
if tokens >= 1.0 then
  tokens = tokens - 1.0
  allowed = 1
else
  retry = math.ceil((1.0 - tokens) / rate)
end
redis.call('HSET', KEYS[1], 'tokens', string.format('%.17g', tokens), 'ts', string.format('%.17g', last))
redis.call('PEXPIRE', KEYS[1], ttl_ms)
return {allowed, retry}
"""


class RedisStore:
    """Buckets in redis, shared by every instance of the service.

    One EVALSHA per decision does refill and take atomically, so concurrent requests from
    any number of instances never over-admit. ``now`` comes from the caller (use wall-clock
    ``time.time`` in production so instances agree; a frozen clock in tests). Keys are
    ``prefix + identity`` and expire ``bucket_ttl_ms`` after their last use. Any redis
    failure raises ``StoreUnavailable``.
    """

    def __init__(
        self, client: redis.Redis, *, prefix: str = REDIS_KEY_PREFIX, url: str | None = None, timeout_s: float = 0.5
    ) -> None:
        self._client = client
        self._prefix = prefix
        self._script = client.register_script(_TAKE_LUA)  # hashes locally; no round trip
        self._url = url
        self._timeout_s = timeout_s
        # One asyncio client per event loop: a connection belongs to the loop that opened it.
        self._async: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Any] = weakref.WeakKeyDictionary()

    @classmethod
    def from_url(cls, url: str, *, timeout_s: float = 0.5, prefix: str = REDIS_KEY_PREFIX) -> RedisStore:
        """A store with a client that gives up quickly: a request waiting on a dead redis is
        worse than a prompt 503 (redis-py's default retries for seconds)."""
        client = redis.Redis.from_url(
            url,
            socket_timeout=timeout_s,
            socket_connect_timeout=timeout_s,
            # One immediate retry covers a pooled connection that died with a redis restart.
            retry=redis.retry.Retry(redis.backoff.NoBackoff(), 1),
        )
        return cls(client, prefix=prefix, url=url, timeout_s=timeout_s)

    def key(self, identity: str) -> str:
        return self._prefix + identity

    def _args(self, now: float, allowance: Allowance) -> list:
        return [repr(float(now)), repr(float(allowance.per_minute)), allowance.burst, bucket_ttl_ms(allowance)]

    @property
    def awaitable(self) -> bool:
        return self._url is not None

    async def take_async(self, key: str, now: float, allowance: Allowance) -> Decision:
        """``take`` on the event loop (redis.asyncio): no worker-thread hop per request.

        Measured under load with two workers on two cores: the thread hop per decision cost
        more than the redis round trip it wrapped.
        """
        import redis.asyncio  # noqa: PLC0415 -- only a Redis-backed deployment needs the client

        loop = asyncio.get_running_loop()
        script = self._async.get(loop)
        if script is None:
            client = redis.asyncio.Redis.from_url(
                self._url,
                socket_timeout=self._timeout_s,
                socket_connect_timeout=self._timeout_s,
                retry=redis.asyncio.retry.Retry(redis.backoff.NoBackoff(), 1),
            )
            script = self._async[loop] = client.register_script(_TAKE_LUA)
        try:
            allowed, retry_after = await script(keys=[self.key(key)], args=self._args(now, allowance))
        except redis.exceptions.RedisError as exc:
            raise StoreUnavailable(f"redis rate-limit store failed: {type(exc).__name__}: {exc}") from exc
        return Decision(bool(allowed), int(retry_after))

    def take(self, key: str, now: float, allowance: Allowance) -> Decision:
        try:
            allowed, retry_after = self._script(keys=[self.key(key)], args=self._args(now, allowance))
        except redis.exceptions.RedisError as exc:
            # Connection/timeout errors mostly, but also READONLY/OOM replies: in every case
            # we cannot decide, and the middleware must refuse.
            raise StoreUnavailable(f"redis rate-limit store failed: {type(exc).__name__}: {exc}") from exc
        return Decision(bool(allowed), int(retry_after))


# --- middleware -------------------------------------------------------------------------


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
    ``Retry-After: 1``, logged at ERROR. Other scope types pass through.
    """

    def __init__(
        self,
        app: ASGIApp,
        allowance: Allowance,
        store: BucketStore,
        clock: Callable[[], float],
    ) -> None:
        self.app = app
        self.allowance = allowance
        self.store = store
        self.clock = clock

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
        now = self.clock()
        try:
            if getattr(self.store, "awaitable", False):
                decision = await self.store.take_async(identity, now, self.allowance)
            elif getattr(self.store, "blocking", True):
                # Off the event loop: a redis round trip (or its timeout) must not stall
                # every other connection.
                decision = await anyio.to_thread.run_sync(self.store.take, identity, now, self.allowance)
            else:
                decision = self.store.take(identity, now, self.allowance)
        except StoreUnavailable as exc:
            logger.error("rate limit store unavailable, refusing %s: %s", scope.get("path", "?"), exc)
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


# --- probe (CI gate) --------------------------------------------------------------------

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
