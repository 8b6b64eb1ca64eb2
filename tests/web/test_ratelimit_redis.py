"""RedisStore against a real redis-server: shared buckets, expiry, atomicity, failure, parity."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
import uuid
from collections import Counter

import httpx
import pytest
import redis
from hypothesis import given, settings
from hypothesis import strategies as st
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.responses import JSONResponse
from starlette.routing import Route
from starlette.testclient import TestClient

from rag_contract.web.ratelimit import (
    Allowance,
    BucketState,
    MemoryStore,
    RateLimitMiddleware,
    StoreUnavailable,
    probe,
    refill_and_take,
)
from rag_contract.web.ratelimit.redis_store import REDIS_KEY_PREFIX, RedisStore
from tests.support.redis_server import RedisServer, free_port

pytestmark = pytest.mark.redis

FROZEN = 1000.0


@pytest.fixture
def client(redis_server: RedisServer):
    connection = redis.Redis.from_url(redis_server.url)
    connection.flushdb()
    yield connection
    connection.close()


def app_with(store, allowance: Allowance, clock, calls: Counter) -> Starlette:
    def answer(request):
        calls["answer"] += 1
        return JSONResponse({"answer": "42"})

    return Starlette(
        routes=[Route("/answer", answer), Route("/health", answer)],
        middleware=[Middleware(RateLimitMiddleware, allowance=allowance, store=store, clock=clock)],
    )


def test_two_instances_share_one_bucket(redis_server, client):
    allowance = Allowance(per_minute=60, burst=4, trusted_proxy_hops=0)
    calls = Counter()
    instances = [
        TestClient(
            app_with(RedisStore.from_url(redis_server.url), allowance, lambda: FROZEN, calls),
            client=("198.51.100.7", 1),
        )
        for _ in range(2)
    ]
    statuses = [instances[i % 2].get("/answer").status_code for i in range(8)]
    assert statuses == [200] * 4 + [429] * 4
    assert calls["answer"] == 4
    refused = instances[1].get("/answer")
    assert refused.headers["retry-after"] == "1"
    assert client.exists(REDIS_KEY_PREFIX + "198.51.100.7") == 1


def test_probe_passes_on_an_app_backed_by_redis(redis_server, client):
    allowance = Allowance(per_minute=60, burst=3, trusted_proxy_hops=1)
    result = probe(
        lambda clock: app_with(RedisStore.from_url(redis_server.url), allowance, clock, Counter()), allowance
    )
    assert result.passed, result.detail


def test_ttl_is_the_full_refill_time_plus_one_second_and_idle_keys_go(client):
    store = RedisStore(client)
    slow = Allowance(per_minute=60, burst=10, trusted_proxy_hops=0)  # 10 s to refill, TTL 11 s
    store.take("slow", FROZEN, slow)
    assert 10_000 < client.pttl(REDIS_KEY_PREFIX + "slow") <= 11_000

    fast = Allowance(per_minute=60_000, burst=1, trusted_proxy_hops=0)  # 1 ms to refill, TTL 1.001 s
    store.take("fast", FROZEN, fast)
    key = REDIS_KEY_PREFIX + "fast"
    assert 0 < client.pttl(key) <= 1_001
    deadline = time.monotonic() + 1.8
    while client.exists(key) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert client.exists(key) == 0
    assert client.exists(REDIS_KEY_PREFIX + "slow") == 1


def test_every_take_renews_the_ttl(client):
    store = RedisStore(client)
    allowance = Allowance(per_minute=60, burst=10, trusted_proxy_hops=0)
    key = REDIS_KEY_PREFIX + "renew"
    store.take("renew", FROZEN, allowance)
    client.pexpire(key, 50)
    store.take("renew", FROZEN, allowance)
    assert client.pttl(key) > 10_000


def test_concurrent_hammering_never_over_admits(redis_server, client):
    allowance = Allowance(per_minute=60, burst=7, trusted_proxy_hops=0)
    barrier = threading.Barrier(16)
    admitted: Counter[int] = Counter()
    errors: list[BaseException] = []

    def hammer(worker: int) -> None:
        store = RedisStore.from_url(redis_server.url, timeout_s=5)  # one "instance" per thread
        try:
            barrier.wait()
            admitted[worker] = sum(store.take("hammered", FROZEN, allowance).allowed for _ in range(25))
        except BaseException as exc:  # surfaced below; a thread's exception is otherwise lost
            errors.append(exc)

    threads = [threading.Thread(target=hammer, args=(i,)) for i in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert sum(admitted.values()) == 7  # of 400, all at the same frozen instant


def test_unreachable_redis_raises_store_unavailable_and_the_middleware_answers_503(caplog):
    store = RedisStore.from_url(f"redis://127.0.0.1:{free_port()}/0")  # nothing listens there
    allowance = Allowance(per_minute=60, burst=5, trusted_proxy_hops=0)
    started = time.monotonic()
    with pytest.raises(StoreUnavailable, match="ConnectionError"):
        store.take("anyone", FROZEN, allowance)
    assert time.monotonic() - started < 2.0

    calls = Counter()
    http = TestClient(app_with(store, allowance, lambda: FROZEN, calls))
    with caplog.at_level(logging.ERROR, logger="rag_contract.web.ratelimit.middleware"):
        response = http.get("/answer")
    assert response.status_code == 503
    assert response.headers["retry-after"] == "1"
    assert response.json()["error"] == "rate_limit_unavailable"
    assert calls["answer"] == 0
    assert any(r.name == "rag_contract.web.ratelimit.middleware" and r.levelno == logging.ERROR for r in caplog.records)


# Same-instant bursts, fractional and irrational-ish gaps, long idles, a clock that jumps back,
# and wall-clock-sized timestamps where float rounding bites.
TIME_SERIES = [
    [0.0] * 6 + [0.1, 0.2, 1.0 / 3, 0.5, 0.9999, 1.0, 1.0001, 2.5, 2.5, 2.5, 60.0, 59.0, 61.5, 3600.0, 3600.0],
    [1_700_000_000.123456 + i * 0.173 for i in range(40)],
    [1_700_000_000.0 + t for t in (0, 0, 0, 8.571428, 8.5714286, 17.1, 16.0, 30.0, 30.0, 30.0, 30.0)],
]
ALLOWANCES = [
    Allowance(per_minute=60, burst=3, trusted_proxy_hops=0),
    Allowance(per_minute=7, burst=2, trusted_proxy_hops=0),
    Allowance(per_minute=0.5, burst=1, trusted_proxy_hops=0),
    Allowance(per_minute=1000, burst=10, trusted_proxy_hops=0),
]


@pytest.mark.parametrize("allowance", ALLOWANCES, ids=lambda a: f"{a.per_minute:g}pm-b{a.burst}")
@pytest.mark.parametrize("series", range(len(TIME_SERIES)))
def test_redis_and_memory_decide_identically(client, allowance, series):
    times = TIME_SERIES[series] + [TIME_SERIES[series][-1]] * 11  # ends past any burst here
    memory, shared = MemoryStore(), RedisStore(client)
    from_memory = [memory.take("k", t, allowance) for t in times]
    from_redis = [shared.take("k", t, allowance) for t in times]
    assert from_redis == from_memory
    assert any(not d.allowed for d in from_memory)  # the series actually exercises refusals


@pytest.fixture(scope="module")
def shared_client(redis_server):
    connection = redis.Redis.from_url(redis_server.url)
    yield connection
    connection.close()


@settings(max_examples=150, deadline=None)
@given(
    per_minute=st.floats(min_value=0.5, max_value=600, allow_nan=False),
    burst=st.integers(min_value=1, max_value=8),
    start=st.floats(min_value=0, max_value=2e9, allow_nan=False),
    steps=st.lists(st.floats(min_value=-5, max_value=30, allow_nan=False), min_size=1, max_size=40),
)
def test_redis_and_memory_agree_bit_for_bit(shared_client, per_minute, burst, start, steps):
    allowance = Allowance(per_minute=per_minute, burst=burst, trusted_proxy_hops=0)
    store, key = RedisStore(shared_client), f"parity-{uuid.uuid4().hex}"
    state: BucketState | None = None
    now = start
    for step in steps:
        now += step
        state, expected = refill_and_take(state, now, allowance)
        assert store.take(key, now, allowance) == expected
    saved = shared_client.hmget(REDIS_KEY_PREFIX + key, "tokens", "ts")
    assert BucketState(float(saved[0]), float(saved[1])) == state  # stored state too, not just decisions
    shared_client.delete(REDIS_KEY_PREFIX + key)


# --- decisions asked for in one turn of the event loop share one round trip ---------------------


def _commands(connection: redis.Redis) -> Counter:
    """Calls of each command redis has run so far, the INFO that asks not counted (a script's
    own commands are counted too, under their names)."""
    stats = connection.info("commandstats")
    return Counter({k.removeprefix("cmdstat_"): v["calls"] for k, v in stats.items() if k != "cmdstat_info"})


def _round_trips(calls: Counter, decisions: int) -> int:
    """EVALSHA calls, once the rest is shown to be the script's own work: HMGET, HSET and
    PEXPIRE once per decision, and nothing else sent."""
    assert +calls == Counter({"evalsha": calls["evalsha"], "hmget": decisions, "hset": decisions, "pexpire": decisions})
    return calls["evalsha"]


def test_concurrent_requests_cost_one_round_trip_and_decide_as_one_by_one(redis_server, client):
    allowance = Allowance(per_minute=60, burst=3, trusted_proxy_hops=0)
    store = RedisStore.from_url(redis_server.url)
    keys = ["a", "b", "a", "a", "c", "a", "b"]  # "a" past its burst within the batch

    async def together() -> tuple[list, Counter]:
        await store.take_async("warm", FROZEN, allowance)  # the script is loaded, the pool connected
        before = _commands(client)
        decisions = await asyncio.gather(*(store.take_async(k, FROZEN, allowance) for k in keys))
        return decisions, _commands(client) - before

    decisions, calls = asyncio.run(together())
    assert _round_trips(calls, len(keys)) == 1  # one EVALSHA over seven keys
    one_by_one = MemoryStore()
    assert decisions == [one_by_one.take(k, FROZEN, allowance) for k in keys]
    assert [d.allowed for d in decisions] == [True, True, True, True, True, False, True]


def test_requests_through_the_middleware_in_one_turn_share_one_round_trip(redis_server, client):
    allowance = Allowance(per_minute=60, burst=2, trusted_proxy_hops=1)
    answered = Counter()
    app = app_with(RedisStore.from_url(redis_server.url), allowance, lambda: FROZEN, answered)
    clients = [f"198.51.100.{i % 5}" for i in range(20)]  # five clients, four requests each

    async def together() -> tuple[list[int], Counter]:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://rl") as http:
            await http.get("/health", headers={"X-Forwarded-For": "203.0.113.9"})  # warm
            before = _commands(client)
            replies = await asyncio.gather(*(http.get("/answer", headers={"X-Forwarded-For": c}) for c in clients))
            return [r.status_code for r in replies], _commands(client) - before

    statuses, calls = asyncio.run(together())
    assert _round_trips(calls, len(clients)) == 1
    assert Counter(zip(clients, statuses, strict=True)) == Counter(
        {(c, 200): 2 for c in set(clients)} | {(c, 429): 2 for c in set(clients)}
    )
    assert answered["answer"] == 1 + 10  # the warm-up, then two per client


def test_a_failed_round_trip_refuses_every_request_of_it():
    store = RedisStore.from_url(f"redis://127.0.0.1:{free_port()}/0")  # nothing listens there
    allowance = Allowance(per_minute=60, burst=5, trusted_proxy_hops=0)

    async def together() -> list:
        return await asyncio.gather(
            *(store.take_async(f"k{i}", FROZEN, allowance) for i in range(3)), return_exceptions=True
        )

    outcomes = asyncio.run(together())
    assert all(isinstance(o, StoreUnavailable) and "ConnectionError" in str(o) for o in outcomes)


@settings(max_examples=60, deadline=None)
@given(
    per_minute=st.floats(min_value=0.5, max_value=600, allow_nan=False),
    burst=st.integers(min_value=1, max_value=4),
    start=st.floats(min_value=0, max_value=2e9, allow_nan=False),
    turns=st.lists(
        st.lists(st.tuples(st.sampled_from("abc"), st.floats(min_value=-2, max_value=10)), min_size=1, max_size=6),
        min_size=1,
        max_size=6,
    ),
)
def test_decisions_coalesced_in_turns_equal_the_rule_applied_one_by_one(
    redis_server, shared_client, per_minute, burst, start, turns
):
    allowance = Allowance(per_minute=per_minute, burst=burst, trusted_proxy_hops=0)
    store, run = RedisStore.from_url(redis_server.url), uuid.uuid4().hex
    states: dict[str, BucketState | None] = {}
    expected, now = [], start
    for turn in turns:
        for key, step in turn:
            now += step
            states[key], decision = refill_and_take(states.get(key), now, allowance)
            expected.append(decision)

    async def asked_in_turns() -> list:
        decided, at = [], start
        for turn in turns:
            times = []
            for _, step in turn:
                at += step
                times.append(at)
            decided += await asyncio.gather(
                *(store.take_async(f"{run}-{key}", t, allowance) for (key, _), t in zip(turn, times, strict=True))
            )
        return decided

    assert asyncio.run(asked_in_turns()) == expected
    shared_client.delete(*(REDIS_KEY_PREFIX + f"{run}-{k}" for k in "abc"))
