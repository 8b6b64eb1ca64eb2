"""The per-client token bucket: arithmetic, identity, middleware, and the CI probe."""

from __future__ import annotations

import ipaddress
import logging
import subprocess
import sys
import threading
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.responses import JSONResponse
from starlette.routing import Route, WebSocketRoute
from starlette.testclient import TestClient

from rag_contract.web.ratelimit import (
    PROBE_NOW,
    Allowance,
    BucketState,
    Decision,
    MemoryStore,
    RateLimitMiddleware,
    StoreUnavailable,
    bucket_ttl_ms,
    client_identity,
    probe,
    refill_and_take,
)
from rag_contract.web.ratelimit.identity import MAX_ADDRESS_CHARS, address_key
from tests.support.clocks import FakeClock

START = 1000.0  # where a limiter test's clock starts; the test moves it by hand


def takes(store: MemoryStore, key: str, times: list[float], allowance: Allowance) -> list[Decision]:
    return [store.take(key, t, allowance) for t in times]


# --- bucket arithmetic ---------------------------------------------------------------------


def test_new_client_gets_exactly_burst_at_once():
    allowance = Allowance(per_minute=60, burst=5, trusted_proxy_hops=0)
    decisions = takes(MemoryStore(), "a", [0.0] * 7, allowance)
    assert [d.allowed for d in decisions] == [True] * 5 + [False] * 2
    assert all(d.retry_after_s == 0 for d in decisions[:5])
    assert all(d.retry_after_s == 1 for d in decisions[5:])


def test_bucket_refills_continuously_at_per_minute_over_60():
    allowance = Allowance(per_minute=60, burst=2, trusted_proxy_hops=0)  # 1 token / s
    store = MemoryStore()
    assert takes(store, "a", [0.0, 0.0], allowance) == [Decision(True, 0)] * 2
    assert store.take("a", 0.5, allowance) == Decision(False, 1)  # half a token
    assert store.take("a", 1.0, allowance) == Decision(True, 0)  # one whole token
    assert store.take("a", 1.0, allowance) == Decision(False, 1)
    assert takes(store, "a", [3.0, 3.0, 3.0], allowance) == [Decision(True, 0)] * 2 + [Decision(False, 1)]


def test_refill_is_capped_at_burst():
    allowance = Allowance(per_minute=600, burst=3, trusted_proxy_hops=0)
    store = MemoryStore()
    takes(store, "a", [0.0] * 3, allowance)
    admitted = [d.allowed for d in takes(store, "a", [3600.0] * 5, allowance)]
    assert admitted == [True] * 3 + [False] * 2


@pytest.mark.parametrize(
    ("at", "expected"),
    [
        (0.0, 60),  # a whole token missing: 60 s at 1/min
        (0.5, 60),  # 59.5 s rounds up
        (30.0, 30),
        (59.01, 1),  # 0.99 s rounds up to 1, never 0
        (59.999, 1),
    ],
)
def test_retry_after_is_whole_seconds_rounded_up(at, expected):
    allowance = Allowance(per_minute=1, burst=1, trusted_proxy_hops=0)
    store = MemoryStore()
    assert store.take("a", 0.0, allowance).allowed
    assert store.take("a", at, allowance) == Decision(False, expected)


def test_retry_after_is_honest_and_refusals_take_nothing():
    allowance = Allowance(per_minute=7, burst=1, trusted_proxy_hops=0)  # 60/7 = 8.57 s / token
    store = MemoryStore()
    assert store.take("a", 0.0, allowance).allowed
    refused = store.take("a", 0.0, allowance)
    assert refused == Decision(False, 9)
    for _ in range(10):  # hammering while refused does not push the next token further away
        assert store.take("a", 8.0, allowance) == Decision(False, 1)
    assert store.take("a", 8.6, allowance).allowed


def test_clock_going_backwards_refills_nothing_and_credits_no_interval_twice():
    allowance = Allowance(per_minute=60, burst=1, trusted_proxy_hops=0)
    state, decision = refill_and_take(None, 100.0, allowance)
    assert decision.allowed
    state, decision = refill_and_take(state, 90.0, allowance)  # an instance 10 s behind
    assert decision == Decision(False, 1)
    assert state == BucketState(0.0, 100.0)
    state, decision = refill_and_take(state, 100.5, allowance)
    assert decision == Decision(False, 1)  # only the 0.5 s after 100.0 counts


def test_keys_have_separate_buckets():
    allowance = Allowance(per_minute=60, burst=1, trusted_proxy_hops=0)
    store = MemoryStore()
    assert store.take("a", 0.0, allowance).allowed
    assert not store.take("a", 0.0, allowance).allowed
    assert store.take("b", 0.0, allowance).allowed


def test_ttl_is_full_refill_time_plus_one_second():
    assert bucket_ttl_ms(Allowance(per_minute=60, burst=10, trusted_proxy_hops=0)) == 11_000
    assert bucket_ttl_ms(Allowance(per_minute=120, burst=1, trusted_proxy_hops=0)) == 1_500
    assert bucket_ttl_ms(Allowance(per_minute=7, burst=2, trusted_proxy_hops=0)) == 18_143  # ceil(17142.86 + 1000)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"per_minute": 0, "burst": 1, "trusted_proxy_hops": 0}, "per_minute must be a positive finite number, got 0"),
        ({"per_minute": -5, "burst": 1, "trusted_proxy_hops": 0}, "per_minute .* got -5"),
        ({"per_minute": float("inf"), "burst": 1, "trusted_proxy_hops": 0}, "per_minute .* got inf"),
        ({"per_minute": float("nan"), "burst": 1, "trusted_proxy_hops": 0}, "per_minute .* got nan"),
        ({"per_minute": 60, "burst": 0, "trusted_proxy_hops": 0}, "burst must be an integer >= 1, got 0"),
        ({"per_minute": 60, "burst": 2.5, "trusted_proxy_hops": 0}, "burst .* got 2.5"),
        ({"per_minute": 60, "burst": True, "trusted_proxy_hops": 0}, "burst .* got True"),
        (
            {"per_minute": 60, "burst": 1, "trusted_proxy_hops": -1},
            "trusted_proxy_hops must be an integer >= 0, got -1",
        ),
        ({"per_minute": 60, "burst": 1, "trusted_proxy_hops": 1.5}, "trusted_proxy_hops .* got 1.5"),
        ({"per_minute": 60, "burst": 1, "trusted_proxy_hops": True}, "trusted_proxy_hops .* got True"),
    ],
)
def test_allowance_refuses_nonsense_naming_the_field_and_value(kwargs, message):
    with pytest.raises(ValueError, match=message):
        Allowance(**kwargs)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"per_minute": 1e-9, "burst": 1, "trusted_proxy_hops": 0},  # the smallest rates and depths allowed
        {"per_minute": 60, "burst": 1, "trusted_proxy_hops": 0},
        {"per_minute": 60, "burst": 1, "trusted_proxy_hops": 1},
    ],
)
def test_allowance_accepts_the_boundaries(kwargs):
    Allowance(**kwargs)


def test_memory_store_forgets_idle_buckets_without_changing_decisions():
    allowance = Allowance(per_minute=60, burst=2, trusted_proxy_hops=0)  # full after 2 s
    store = MemoryStore()
    reference: dict[str, BucketState] = {}  # the rule with nothing ever forgotten
    for i in range(20_000):
        key, now = f"client-{i % 7_000}", i * 0.001
        state, expected = refill_and_take(reference.get(key), now, allowance)
        reference[key] = state
        assert store.take(key, now, allowance) == expected
    assert len(store) == 2_000  # the live buckets only: the clients of the last 2 s, at 1 000 clients/s


def test_each_take_forgets_the_buckets_full_by_then():
    allowance = Allowance(per_minute=60, burst=2, trusted_proxy_hops=0)  # full 2 s after last use
    store = MemoryStore()
    store.take("a", 0.0, allowance)
    store.take("b", 1.0, allowance)
    store.take("a", 1.5, allowance)  # a used again: now b is the one used longest ago
    assert len(store) == 2
    store.take("c", 2.5, allowance)  # a and b still refilling
    assert len(store) == 3
    store.take("c", 3.0, allowance)  # b full at 3.0 exactly: forgotten
    assert len(store) == 2
    store.take("d", 10.0, allowance)  # everything else full
    assert len(store) == 1


def test_a_clock_stepping_back_keeps_a_full_bucket_only_as_one_that_decides_alike():
    allowance = Allowance(per_minute=60, burst=2, trusted_proxy_hops=0)
    store = MemoryStore(max_buckets=3)
    store.take("late", 100.0, allowance)  # full at 102, at the front
    assert takes(store, "early", [50.0, 50.0, 50.0], allowance)[-1] == Decision(False, 1)  # empty, full at 52
    store.take("x", 60.0, allowance)
    assert len(store) == 3  # "early" is full by 60 but behind a live bucket: kept for now
    assert takes(store, "early", [60.0, 60.0, 60.0], allowance) == [Decision(True, 0)] * 2 + [Decision(False, 1)]
    store.take("y", 60.0, allowance)
    assert len(store) == 3  # the bound still holds: "late", used longest ago, went first


def test_memory_store_is_atomic_under_threads():
    allowance = Allowance(per_minute=60, burst=7, trusted_proxy_hops=0)
    store = MemoryStore()
    barrier = threading.Barrier(16)
    admitted = Counter()

    def hammer() -> None:
        barrier.wait()
        admitted[threading.get_ident()] = sum(store.take("k", 1000.0, allowance).allowed for _ in range(200))

    threads = [threading.Thread(target=hammer) for _ in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sum(admitted.values()) == 7


# --- properties ----------------------------------------------------------------------------

allowances = st.builds(
    Allowance,
    per_minute=st.floats(min_value=0.5, max_value=600, allow_nan=False, allow_infinity=False),
    burst=st.integers(min_value=1, max_value=12),
    trusted_proxy_hops=st.just(0),
)


@settings(max_examples=300, deadline=None)
@given(
    allowance=allowances,
    start=st.floats(min_value=0, max_value=2e9, allow_nan=False),
    gaps=st.lists(st.floats(min_value=0, max_value=20, allow_nan=False), min_size=1, max_size=60),
)
def test_admitted_in_any_window_never_exceeds_burst_plus_rate_times_window(allowance, start, gaps):
    times, now = [], start
    for gap in gaps:
        now += gap
        times.append(now)
    store = MemoryStore()
    admitted = [store.take("k", t, allowance).allowed for t in times]
    rate = allowance.per_minute / 60.0
    for i in range(len(times)):
        count = 0
        for j in range(i, len(times)):
            count += admitted[j]
            # 1e-6: float noise in the sums, far below one request
            assert count <= allowance.burst + rate * (times[j] - times[i]) + 1e-6


@settings(max_examples=300, deadline=None)
@given(
    allowance=allowances,
    times=st.lists(st.floats(min_value=0, max_value=1e4, allow_nan=False), min_size=1, max_size=60),
)
def test_a_jittery_clock_buys_no_extra_requests(allowance, times):
    store = MemoryStore()
    admitted = sum(store.take("k", t, allowance).allowed for t in times)
    credited = max(0.0, max(times) - times[0])  # only forward progress past the first request refills
    assert admitted <= allowance.burst + allowance.per_minute / 60.0 * credited + 1e-6


@settings(max_examples=300, deadline=None)
@given(
    allowance=allowances,
    tokens=st.floats(min_value=0, max_value=0.999999, allow_nan=False),
    last=st.floats(min_value=0, max_value=2e6, allow_nan=False),
    wait=st.floats(min_value=0, max_value=100, allow_nan=False),
)
def test_retry_after_is_the_smallest_whole_wait_that_works(allowance, tokens, last, wait):
    state = BucketState(min(tokens, allowance.burst), last)
    now = last + wait
    state, decision = refill_and_take(state, now, allowance)
    if decision.allowed:
        return
    assert decision.retry_after_s >= 1
    assert refill_and_take(state, now + decision.retry_after_s + 1e-6, allowance)[1].allowed
    if decision.retry_after_s > 1:
        assert not refill_and_take(state, now + decision.retry_after_s - 1 - 1e-6, allowance)[1].allowed


# --- client identity -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("peer", "forwarded_for", "hops", "expected"),
    [
        ("10.0.0.9", None, 0, "10.0.0.9"),
        ("10.0.0.9", "1.1.1.1, 2.2.2.2", 0, "10.0.0.9"),  # no trusted proxy: header ignored
        ("10.0.0.9", "2.2.2.2", 1, "2.2.2.2"),
        ("10.0.0.9", "6.6.6.6, 2.2.2.2", 1, "2.2.2.2"),  # forged left entry ignored
        ("10.0.0.9", "6.6.6.6,7.7.7.7,   2.2.2.2  ", 1, "2.2.2.2"),  # spaces stripped
        ("10.0.0.9", "6.6.6.6, 2.2.2.2, 10.1.1.1", 2, "2.2.2.2"),
        ("10.0.0.9", "2.2.2.2, 10.1.1.1", 2, "2.2.2.2"),
        ("10.0.0.9", "10.1.1.1", 2, "10.0.0.9"),  # too few entries: peer (shared bucket)
        ("10.0.0.9", None, 1, "10.0.0.9"),  # header absent
        ("10.0.0.9", "", 1, "10.0.0.9"),
        ("10.0.0.9", "6.6.6.6, ", 1, "10.0.0.9"),  # empty entry at the trusted hop
        (None, None, 0, "unknown-peer"),
        ("2001:db8::1", "2001:db8::2", 1, "2001:db8::/64"),
        # One address, one key, however it is spelled: ports, brackets, zeros, case, zones.
        ("10.0.0.9", "2.2.2.2:5678", 1, "2.2.2.2"),
        ("10.0.0.9", " 2.2.2.2:1 ", 1, "2.2.2.2"),
        ("10.0.0.9", "[2001:db8::2]:443", 1, "2001:db8::/64"),
        ("10.0.0.9", "[2001:DB8:0:0::2]", 1, "2001:db8::/64"),
        ("10.0.0.9", "2001:0db8:0000:0000:ffff:ffff:ffff:ffff", 1, "2001:db8::/64"),
        ("10.0.0.9", "fe80::1%eth0", 1, "fe80::/64"),
        ("10.0.0.9", "::ffff:2.2.2.2", 1, "2.2.2.2"),  # IPv4-mapped: the IPv4 address
        ("10.0.0.9", "2001:db8:0:1::9", 1, "2001:db8:0:1::/64"),  # the next /64 is another client
        # No address at the trusted hop: the peer, as for a missing entry.
        ("10.0.0.9", "unknown", 1, "10.0.0.9"),
        ("10.0.0.9", "x" * 8192, 1, "10.0.0.9"),
        ("10.0.0.9", "2.2.2.2:http", 1, "10.0.0.9"),
        ("10.0.0.9", "[2001:db8::2]x", 1, "10.0.0.9"),
        ("10.0.0.9", "[2001:db8::2", 1, "10.0.0.9"),
        ("10.0.0.9", "[2.2.2.2]:80", 1, "2.2.2.2"),
        ("10.0.0.9", "[2001:db8::2]:", 1, "10.0.0.9"),
        ("10.0.0.9", "1.2.3.4.5", 1, "10.0.0.9"),
        ("10.0.0.9", "example.com", 1, "10.0.0.9"),
        ("10.0.0.9", "6.6.6.6, 2.2.2.2, junk", 1, "10.0.0.9"),
        # The peer is keyed the same way; a peer that is no address is used as it is.
        ("2001:db8::1", None, 0, "2001:db8::/64"),
        ("testclient", None, 0, "testclient"),
        ("testclient", "junk", 1, "testclient"),
    ],
)
def test_client_identity(peer, forwarded_for, hops, expected):
    assert client_identity(peer, forwarded_for, hops) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (None, None),
        ("", None),
        ("2.2.2.2", "2.2.2.2"),
        ("0" * (MAX_ADDRESS_CHARS + 1), None),
        ("   " + "1.2.3.4" + " " * (MAX_ADDRESS_CHARS - 10), "1.2.3.4"),  # at the bound, stripped
        ("[fe80::1%eth0]:8080", "fe80::/64"),
        ("2001:db8:1:2:3:4:5:6", "2001:db8:1:2::/64"),
        ("[fe80::1%" + "a" * (MAX_ADDRESS_CHARS - 16) + "]:65535", "fe80::/64"),  # exactly at the bound
        ("[2001:db8::2]:8", "2001:db8::/64"),  # a one-digit port
        ("1.2.3.4%eth0", None),  # a zone belongs to IPv6 only
        # Dotted quads: the canonical spelling is its own key; any other is no address at all.
        ("0.0.0.0", "0.0.0.0"),
        ("255.255.255.255", "255.255.255.255"),
        ("249.250.199.100", "249.250.199.100"),
        ("01.2.3.4", None),
        ("1.2.3.00", None),
        ("256.1.1.1", None),
        ("1.2.3.4.", None),
        ("1.2.3", None),
        ("1.2.3.\u0663", None),  # a digit, but not an ASCII one
        (" 10.1.2.3 ", "10.1.2.3"),
    ],
)
def test_address_key(text, expected):
    assert address_key(text) == expected


_OCTETS = st.one_of(
    st.integers(0, 300).map(str),
    st.from_regex(r"0[0-9]{1,2}", fullmatch=True),
    st.text("0123456789\u0663 +", max_size=4),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(_OCTETS, min_size=3, max_size=5))
def test_a_dotted_quad_is_keyed_as_ipaddress_spells_it(octets):
    # The key of an IPv4 address is ipaddress's canonical spelling, however it was found.
    text = ".".join(octets)
    try:
        expected: str | None = str(ipaddress.ip_address(text.strip()))
    except ValueError:
        expected = None
    assert address_key(text) == expected


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=200))
def test_an_identity_is_never_longer_than_an_address(header):
    # Whatever a trusted hop writes, the key is an address or the peer: never the header.
    key = client_identity("10.0.0.9", header, 1)
    assert key == "10.0.0.9" or address_key(key) == key
    assert len(key) <= len("ffff:ffff:ffff:ffff::/64")


def test_the_bucket_used_longest_ago_is_dropped_first():
    allowance = Allowance(per_minute=60, burst=2, trusted_proxy_hops=0)
    store = MemoryStore(max_buckets=2)
    assert takes(store, "a", [0.0, 0.0], allowance)[-1].allowed  # a is empty now
    store.take("b", 0.0, allowance)
    assert not store.take("a", 0.0, allowance).allowed  # a used last: b is older
    store.take("c", 0.0, allowance)  # drops b, not a
    assert len(store) == 2
    assert not store.take("a", 0.0, allowance).allowed  # a is still remembered, still empty


def test_memory_store_refuses_a_bound_of_zero():
    with pytest.raises(ValueError, match="max_buckets must be >= 1"):
        MemoryStore(max_buckets=0)


# --- middleware ----------------------------------------------------------------------------


class IndexVersionHeader:
    """Stands in for the app's own middleware that stamps X-Index-Version on responses."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        async def stamped(message):
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []), (b"x-index-version", b"v1")]}
            await send(message)

        await self.app(scope, receive, stamped)


class UnavailableStore:
    def take(self, key, now, allowance):
        raise StoreUnavailable("redis rate-limit store failed: ConnectionError: refused")


def tiny_app(store, allowance: Allowance, clock, calls: Counter, *, limiter=RateLimitMiddleware) -> Starlette:
    def health(request):
        calls["health"] += 1
        return JSONResponse({"status": "ok"})

    def answer(request):
        calls["answer"] += 1
        return JSONResponse({"answer": "42"})

    async def socket(websocket):
        await websocket.accept()
        await websocket.send_text("hello")
        await websocket.close()

    middleware = [Middleware(IndexVersionHeader)]
    if limiter is not None:
        middleware.insert(0, Middleware(limiter, allowance=allowance, store=store, clock=clock))
    return Starlette(
        routes=[Route("/health", health), Route("/answer", answer), WebSocketRoute("/ws", socket)],
        middleware=middleware,
    )


def test_refused_request_gets_429_with_retry_after_and_never_reaches_the_app():
    calls, clock = Counter(), FakeClock(START)
    allowance = Allowance(per_minute=6, burst=2, trusted_proxy_hops=0)
    client = TestClient(tiny_app(MemoryStore(), allowance, clock, calls))
    for _ in range(2):
        ok = client.get("/answer")
        assert ok.status_code == 200 and ok.headers["x-index-version"] == "v1"
    refused = client.get("/answer")
    assert refused.status_code == 429
    assert refused.headers["retry-after"] == "10"
    assert "x-index-version" not in refused.headers
    body = refused.json()
    assert body["error"] == "rate_limited" and body["retry_after_s"] == 10 and body["detail"]
    assert "answer" not in body
    assert calls == Counter(answer=2)

    refused_health = client.get("/health")  # every path, same client bucket
    assert refused_health.status_code == 429
    assert calls["health"] == 0

    clock.now += 10
    assert client.get("/health").status_code == 200
    assert calls == Counter(answer=2, health=1)


def test_identity_comes_from_the_trusted_hop():
    calls = Counter()
    allowance = Allowance(per_minute=6, burst=1, trusted_proxy_hops=1)
    client = TestClient(tiny_app(MemoryStore(), allowance, FakeClock(START), calls), client=("10.0.0.1", 5000))
    assert client.get("/answer", headers={"x-forwarded-for": "198.51.100.1"}).status_code == 200
    assert client.get("/answer", headers={"x-forwarded-for": "6.6.6.6, 198.51.100.1"}).status_code == 429
    assert client.get("/answer", headers={"x-forwarded-for": "198.51.100.2"}).status_code == 200
    assert client.get("/answer").status_code == 200  # no header: the proxy peer's own bucket
    assert client.get("/answer").status_code == 429


def test_store_unavailable_is_503_with_retry_after_and_logged(caplog):
    calls = Counter()
    allowance = Allowance(per_minute=60, burst=5, trusted_proxy_hops=0)
    client = TestClient(tiny_app(UnavailableStore(), allowance, FakeClock(START), calls))
    with caplog.at_level(logging.ERROR, logger="rag_contract.web.ratelimit.middleware"):
        for path in ("/answer", "/health"):
            response = client.get(path)
            assert response.status_code == 503
            assert response.headers["retry-after"] == "1"
            assert response.json()["error"] == "rate_limit_unavailable"
            assert "x-index-version" not in response.headers
    assert calls == Counter()
    records = [r for r in caplog.records if r.name == "rag_contract.web.ratelimit.middleware"]
    # One line, not one per refusal: the second falls within the interval (test_throttled_log.py).
    assert len(records) == 1 and records[0].levelno == logging.ERROR
    assert "ConnectionError" in records[0].getMessage()


def test_lifespan_and_websocket_pass_through():
    started = []

    async def lifespan_app(scope, receive, send):
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    started.append(True)
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    await send({"type": "lifespan.shutdown.complete"})
                    return

    allowance = Allowance(per_minute=1, burst=1, trusted_proxy_hops=0)
    app = RateLimitMiddleware(lifespan_app, allowance, UnavailableStore(), FakeClock(START))
    with TestClient(app):
        pass
    assert started == [True]

    calls = Counter()
    client = TestClient(tiny_app(MemoryStore(), allowance, FakeClock(START), calls))
    client.get("/health")
    assert client.get("/health").status_code == 429
    with client.websocket_connect("/ws") as websocket:
        assert websocket.receive_text() == "hello"


# --- probe ---------------------------------------------------------------------------------


def limited(allowance: Allowance, *, limiter=RateLimitMiddleware):
    def build_app(clock):
        return tiny_app(MemoryStore(), allowance, clock, Counter(), limiter=limiter)

    return build_app


@pytest.mark.parametrize("hops", [0, 1, 2])
def test_probe_passes_on_a_limited_app(hops):
    allowance = Allowance(per_minute=30, burst=4, trusted_proxy_hops=hops)
    result = probe(limited(allowance), allowance)
    assert result.passed, result.detail
    assert (result.served, result.refused_at, result.retry_after) == (4, 5, "2")
    assert result.detail.startswith("ok")


def test_probe_freezes_the_clock_so_a_fast_refill_cannot_mask_the_limit():
    seen = []
    allowance = Allowance(per_minute=600_000, burst=2, trusted_proxy_hops=1)  # 10 000 tokens / s

    def build_app(clock):
        seen.append(clock())
        return limited(allowance)(clock)

    result = probe(build_app, allowance, path="/answer")
    assert result.passed, result.detail
    assert seen == [PROBE_NOW]


def test_probe_fails_without_the_limiter():
    allowance = Allowance(per_minute=30, burst=3, trusted_proxy_hops=1)
    result = probe(limited(allowance, limiter=None), allowance)
    assert not result.passed
    assert result.refused_at is None and result.served == 3
    assert result.failures[0].startswith("(a)")
    assert "not in the middleware stack" in result.detail


def without_retry_after(app, **kwargs):
    """A limiter whose 429 lost its Retry-After header."""
    inner = RateLimitMiddleware(app, **kwargs)

    async def middleware(scope, receive, send):
        async def strip(message):
            if message["type"] == "http.response.start" and message["status"] == 429:
                headers = [(k, v) for k, v in message["headers"] if k != b"retry-after"]
                message = {**message, "headers": headers}
            await send(message)

        await inner(scope, receive, strip)

    return middleware


def test_probe_fails_on_a_429_without_retry_after():
    allowance = Allowance(per_minute=30, burst=3, trusted_proxy_hops=0)
    result = probe(limited(allowance, limiter=without_retry_after), allowance)
    assert not result.passed
    assert result.refused_at == 4 and result.retry_after is None
    assert "(a) one client: the 429 has no Retry-After header" in result.failures


def with_retry_after(value: bytes):
    def factory(app, **kwargs):
        inner = RateLimitMiddleware(app, **kwargs)

        async def middleware(scope, receive, send):
            async def rewrite(message):
                if message["type"] == "http.response.start" and message["status"] == 429:
                    headers = [(k, value if k == b"retry-after" else v) for k, v in message["headers"]]
                    message = {**message, "headers": headers}
                await send(message)

            await inner(scope, receive, rewrite)

        return middleware

    return factory


@pytest.mark.parametrize("value", [b"0", b"1.5", b"Wed, 21 Oct 2015 07:28:00 GMT", b"-3"])
def test_probe_fails_on_a_retry_after_that_is_not_a_positive_whole_number(value):
    allowance = Allowance(per_minute=30, burst=3, trusted_proxy_hops=0)
    result = probe(limited(allowance, limiter=with_retry_after(value)), allowance)
    assert not result.passed
    assert "is not a positive whole number" in result.detail


def keyed_on_leftmost_entry(app, **kwargs):
    """A limiter that believes the first (caller-forgeable) X-Forwarded-For entry."""
    inner = RateLimitMiddleware(app, **kwargs)

    async def middleware(scope, receive, send):
        headers = []
        for name, value in scope["headers"]:
            if name == b"x-forwarded-for":
                value = value.split(b",")[0].strip()
            headers.append((name, value))
        await inner({**scope, "headers": headers}, receive, send)

    return middleware


def test_probe_fails_when_forged_forwarded_for_entries_buy_new_buckets():
    allowance = Allowance(per_minute=30, burst=3, trusted_proxy_hops=1)
    result = probe(limited(allowance, limiter=keyed_on_leftmost_entry), allowance)
    assert not result.passed
    checks = [f[:3] for f in result.failures]
    assert "(b)" in checks and "(a)" not in checks  # (c) fails too: both callers forge alike


def trusting_forwarded_for_without_proxy(app, *, allowance, **kwargs):
    """A limiter configured with a trusted hop although no proxy is in front."""
    return RateLimitMiddleware(app, allowance=Allowance(allowance.per_minute, allowance.burst, 1), **kwargs)


def test_probe_fails_when_forwarded_for_is_trusted_with_zero_hops():
    allowance = Allowance(per_minute=30, burst=3, trusted_proxy_hops=0)
    result = probe(limited(allowance, limiter=trusting_forwarded_for_without_proxy), allowance)
    assert not result.passed
    assert "(b) varying X-Forwarded-For with trusted_proxy_hops=0" in result.detail


def one_bucket_for_everyone(app, **kwargs):
    inner = RateLimitMiddleware(app, **kwargs)

    async def middleware(scope, receive, send):
        headers = [(k, v) for k, v in scope["headers"] if k != b"x-forwarded-for"]
        await inner({**scope, "headers": headers, "client": ("0.0.0.0", 0)}, receive, send)

    return middleware


@pytest.mark.parametrize("hops", [0, 1])
def test_probe_fails_when_callers_share_one_bucket(hops):
    allowance = Allowance(per_minute=30, burst=3, trusted_proxy_hops=hops)
    result = probe(limited(allowance, limiter=one_bucket_for_everyone), allowance)
    assert not result.passed
    assert "(c) two callers differing only at the" in result.detail


def test_probe_fails_when_the_limiter_runs_inside_the_app():
    allowance = Allowance(per_minute=30, burst=3, trusted_proxy_hops=0)

    def build_app(clock):
        return Starlette(
            routes=[Route("/health", lambda request: JSONResponse({"status": "ok"}))],
            middleware=[
                Middleware(IndexVersionHeader),  # outermost: stamps even the 429
                Middleware(RateLimitMiddleware, allowance=allowance, store=MemoryStore(), clock=clock),
            ],
        )

    result = probe(build_app, allowance)
    assert not result.passed
    assert "carries X-Index-Version" in result.detail


def test_probe_fails_when_the_configured_burst_differs():
    app_allowance = Allowance(per_minute=30, burst=2, trusted_proxy_hops=0)
    result = probe(limited(app_allowance), Allowance(per_minute=30, burst=3, trusted_proxy_hops=0))
    assert not result.passed
    assert "(a) one client: refused at request 3, expected exactly 3 served" in result.failures


def test_probe_survives_a_crashing_handler():
    allowance = Allowance(per_minute=30, burst=2, trusted_proxy_hops=0)

    def build_app(clock):
        def boom(request):
            raise RuntimeError("index not loaded")

        return Starlette(
            routes=[Route("/health", boom)],
            middleware=[Middleware(RateLimitMiddleware, allowance=allowance, store=MemoryStore(), clock=clock)],
        )

    result = probe(build_app, allowance)
    assert result.passed, result.detail


def test_importing_the_module_loads_no_http_client(root):
    code = "import sys, rag_contract.web.ratelimit; print('\\n'.join(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True, check=True)
    loaded = set(out.stdout.split())
    assert "rag_contract.web.ratelimit" in loaded
    # the package loads every part of the limiter, the probe included: all of it is checked here
    parts = ("bucket", "identity", "stores", "middleware", "probe")
    assert {f"rag_contract.web.ratelimit.{part}" for part in parts} <= loaded
    forbidden = {
        name
        for name in loaded
        if name.split(".")[0] in {"httpx", "requests", "urllib3", "aiohttp"}
        or name == "starlette.testclient"
        or name.startswith("starlette.testclient.")
    }
    assert forbidden == set()
