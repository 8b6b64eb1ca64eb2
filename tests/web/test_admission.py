"""Bounded admission for free-text answering: a cap in flight, a short queue, and an immediate
503 with Retry-After past them, so no admitted answer runs out its deadline waiting.

The rules are shown on the ``Admission`` object alone (one event loop, no network); the
served behaviour with real concurrency: 64 clients at once against uvicorn on loopback, with
a query step slowed to 30 ms so that answers overlap.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from starlette.testclient import TestClient

from rag_contract.config.thresholds import AdmissionConfig, ThresholdsError, parse_thresholds, to_plain
from rag_contract.index.registry import Registry
from rag_contract.web.admission import Admission, AdmissionLimits, Shed
from rag_contract.web.observe import ObserveMiddleware, mark_shed
from rag_contract.web.serving import embedded_vector
from tests.support.apps import fresh_status, generous, make_app
from tests.support.clocks import jump_clock

LIMITS = AdmissionLimits(max_in_flight=2, max_queued=3, max_queue_wait_ms=200.0, retry_after_s=1)
CLIENTS = 64
BUSY_S = 0.04  # CPU each answer spends beyond its own, so 64 at once cost ~2.6 s of CPU
STORM_DEADLINE_MS = 1000.0  # far above an answer alone, below 64 of them sharing the CPU
CLIENT_TIMEOUT_S = 20.0


# --- the rules, on one event loop -----------------------------------------------------


async def _hold(admission: Admission, name: str, log: list[str], release: asyncio.Event) -> None:
    async with admission.slot():
        log.append(name)
        await release.wait()


def test_at_most_max_in_flight_hold_a_slot_and_the_queue_is_served_in_order():
    async def scenario() -> list[str]:
        admission, log, release = Admission(LIMITS), [], asyncio.Event()
        tasks = [asyncio.create_task(_hold(admission, f"r{i}", log, release)) for i in range(5)]
        await asyncio.sleep(0.01)
        assert admission.in_flight == 2 and admission.queued == 3 and log == ["r0", "r1"]
        release.set()
        await asyncio.gather(*tasks)
        assert admission.in_flight == 0 and admission.queued == 0
        return log

    assert asyncio.run(scenario()) == ["r0", "r1", "r2", "r3", "r4"]


async def _shed_past(holders: int, limits: AdmissionLimits) -> tuple[Shed, float, int, int]:
    """``holders`` requests take what ``limits`` admit, then one more asks for a slot: the ``Shed``
    it gets, how long it took to get it, what is queued just after, and what is in flight once
    the holders are done."""
    admission, release = Admission(limits), asyncio.Event()
    held = [asyncio.create_task(_hold(admission, str(i), [], release)) for i in range(holders)]
    await asyncio.sleep(0.01)
    started = time.perf_counter()
    with pytest.raises(Shed) as shed:
        async with admission.slot():
            pass
    waited = time.perf_counter() - started
    queued_after = admission.queued
    release.set()
    await asyncio.gather(*held)
    return shed.value, waited, queued_after, admission.in_flight


def test_past_the_queue_a_request_is_shed_at_once():
    shed, elapsed, _, _ = asyncio.run(_shed_past(5, LIMITS))
    assert shed.reason == "queue_full"
    assert elapsed < 0.05  # no waiting at all; the bound only absorbs a loaded machine


def test_a_queued_request_is_shed_when_no_slot_frees_within_the_wait():
    limits = dataclasses.replace(LIMITS, max_queue_wait_ms=30.0)
    shed, waited, queued_after, in_flight_after = asyncio.run(_shed_past(2, limits))
    assert shed.reason == "queue_wait" and "30 ms" in str(shed)
    assert 0.025 <= waited < 1.0
    assert queued_after == 0 and in_flight_after == 0  # the shed request left no trace


def test_a_request_cancelled_in_the_queue_takes_no_slot():
    async def scenario() -> tuple[int, int]:
        admission, release = Admission(LIMITS), asyncio.Event()
        held = [asyncio.create_task(_hold(admission, str(i), [], release)) for i in range(2)]
        await asyncio.sleep(0.01)
        waiter = asyncio.create_task(_hold(admission, "gone", [], release))
        await asyncio.sleep(0.01)
        waiter.cancel()
        await asyncio.gather(waiter, return_exceptions=True)
        release.set()
        await asyncio.gather(*held)
        return admission.in_flight, admission.queued

    assert asyncio.run(scenario()) == (0, 0)


# --- the thresholds rules -------------------------------------------------------------


@pytest.mark.parametrize(
    "key, value, message",
    [
        ("max_in_flight", 0, r"admission.max_in_flight: must be > 0"),
        ("max_in_flight", 10_000, r"admission.max_in_flight: must be > 0 and at most 64"),
        ("max_queued", -1, r"admission.max_queued: must be between 0 and 1024"),
        ("max_queue_wait_ms", float("inf"), r"admission.max_queue_wait_ms: must be a finite number"),
        ("max_queue_wait_ms", 100.0, r"admission.max_queue_wait_ms: a queued request may wait at most half"),
        ("retry_after_s", 0, r"admission.retry_after_s: must be > 0"),
    ],
)
def test_admission_limits_are_checked_at_load(project, key, value, message):
    raw = to_plain(project.thresholds)
    raw["admission"][key] = value
    with pytest.raises(ThresholdsError, match=message):
        parse_thresholds(raw)


# --- served: real concurrency on loopback ---------------------------------------------


class BusyVector:
    """The query step of /ask with ``BUSY_S`` of CPU added, holding the interpreter as
    answering does, and instrumented: how many run at once, at most."""

    def __init__(self, inner):
        self.inner = inner
        self.lock = threading.Lock()
        self.now = 0
        self.peak = 0

    def __call__(self, index, text):
        with self.lock:
            self.now += 1
            self.peak = max(self.peak, self.now)
        try:
            spin_until = time.thread_time() + BUSY_S  # this thread's CPU, whatever the machine's load
            while time.thread_time() < spin_until:
                pass
            return self.inner(index, text)
        finally:
            with self.lock:
                self.now -= 1


@dataclasses.dataclass(frozen=True)
class Reply:
    status_code: int
    headers: dict[str, str]
    body: dict
    seconds: float  # from the request's last byte sent to the reply's last byte received

    def json(self) -> dict:
        return self.body


QUESTION = json.dumps({"question": "What is a URI?"}).encode()
REQUEST = (
    b"POST /ask HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nConnection: close\r\n"
    b"Content-Length: " + str(len(QUESTION)).encode() + b"\r\n\r\n" + QUESTION
)


def _ask(port: int, barrier: threading.Barrier) -> Reply:
    """One POST /ask over a plain socket. The clients share the server's process, so each
    does as little Python as it can: the bytes are built once, and a reply is parsed after
    it has arrived (an HTTP client library per thread would compete with the server for the
    interpreter and slow the answers it is measuring)."""
    with socket.create_connection(("127.0.0.1", port), timeout=CLIENT_TIMEOUT_S) as sock:
        barrier.wait(timeout=CLIENT_TIMEOUT_S)
        sock.sendall(REQUEST)
        started = time.perf_counter()
        raw = b""
        while chunk := sock.recv(65536):
            raw += chunk
        seconds = time.perf_counter() - started
    head, _, body = raw.partition(b"\r\n\r\n")
    status_line, *lines = head.decode("latin-1").split("\r\n")
    headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines)}
    return Reply(int(status_line.split()[1]), headers, json.loads(body), seconds)


def storm(project, index, drafts, embedder, live_server, limits: AdmissionConfig) -> tuple[list[Reply], int]:
    """``CLIENTS`` POST /ask at once against uvicorn on loopback, each answer costing
    ``BUSY_S`` of CPU more than usual, under a deadline of ``STORM_DEADLINE_MS`` on the real
    clock. Returns the replies and the most answers that ever ran at once."""
    t = generous(project.thresholds)
    t = dataclasses.replace(
        t,
        budget=dataclasses.replace(t.budget, request_deadline_ms=STORM_DEADLINE_MS),
        admission=limits,
    )
    vector = BusyVector(embedded_vector(embedder))
    app = make_app(
        project,
        Registry(index),
        drafts=drafts,
        embedder=embedder,
        thresholds=t,
        ask_vector=vector,
        service_clock=time.perf_counter,  # the real deadline: an answer that runs late is abandoned
        status=fresh_status(index),
    )
    server = live_server(app)
    barrier = threading.Barrier(CLIENTS)
    with ThreadPoolExecutor(CLIENTS) as pool:
        replies = list(pool.map(lambda _: _ask(server.port, barrier), range(CLIENTS)))
    return replies, vector.peak


def test_64_concurrent_asks_are_answered_or_shed_with_retry_after_and_none_is_abandoned(
    project, index, tmp_path, embedder, live_server
):
    limits = project.thresholds.admission
    replies, peak = storm(project, index, tmp_path, embedder, live_server, limits)

    errors = [r.body.get("error") for r in replies if r.status_code != 200]
    assert {r.status_code for r in replies} <= {200, 503}
    assert set(errors) <= {"overloaded"}, [
        (r.body["detail"], r.body.get("budget"))
        for r in replies
        if r.status_code != 200 and r.body.get("error") != "overloaded"
    ]
    assert peak <= limits.max_in_flight
    answered = [r for r in replies if r.status_code == 200]
    shed = [r for r in replies if r.status_code == 503]
    assert len(answered) >= limits.max_in_flight and shed
    for r in shed:
        assert r.headers["retry-after"] == str(limits.retry_after_s)
        assert r.body["reason"] in ("queue_full", "queue_wait")
    # Shedding is decided on arrival: a refused client hears so before an answer it would have waited for.
    full = sorted(r.seconds for r in shed if r.body["reason"] == "queue_full")
    assert full and full[len(full) // 2] < sorted(r.seconds for r in answered)[len(answered) // 2]


def test_without_the_cap_the_same_storm_abandons_answers(project, index, tmp_path, embedder, live_server):
    # The check above turning red: every client admitted at once, each answer runs ~64x slower.
    unbounded = AdmissionConfig(
        max_in_flight=CLIENTS, max_queued=0, max_queue_wait_ms=1.0, retry_after_s=1, refusals_per_s=0.0
    )
    replies, peak = storm(project, index, tmp_path, embedder, live_server, unbounded)
    assert peak > project.thresholds.admission.max_in_flight
    assert any(r.status_code == 503 and r.body["error"] == "abandoned" for r in replies)


def test_a_shed_ask_page_is_503_with_retry_after(project, index, tmp_path, embedder):
    t = generous(project.thresholds)
    t = dataclasses.replace(t, admission=dataclasses.replace(t.admission, max_in_flight=1, max_queued=0))
    app = make_app(project, Registry(index), drafts=tmp_path, embedder=embedder, thresholds=t)
    admission = app.state.web.admission
    admission._in_flight = 1  # one answer already running; the queue holds none
    with TestClient(app) as client:
        page = client.get("/ask", params={"q": "What is a URI?"})
        api = client.post("/ask", json={"question": "What is a URI?"})
    assert page.status_code == 503 and page.headers["retry-after"] == "1"
    assert "overloaded" in page.text and "What is a URI?" in page.text
    assert api.status_code == 503 and api.headers["retry-after"] == "1"
    assert api.json()["error"] == "overloaded" and api.json()["reason"] == "queue_full"


def test_an_abandoned_answer_carries_retry_after(project, index, tmp_path, embedder):
    app = make_app(project, Registry(index), drafts=tmp_path, embedder=embedder, service_clock=jump_clock())
    client = TestClient(app)
    for r in (
        client.get("/answer/q01"),
        client.post("/ask", json={"question": "What is a URI?"}),
        client.get("/q/q01"),
    ):
        assert r.status_code == 503
        assert r.headers["retry-after"] == str(project.thresholds.admission.retry_after_s)


@pytest.mark.parametrize("reason", ["queue_full", "queue_wait"])
def test_a_shed_request_is_observed_refused_with_the_admissions_reason(reason):
    seen = []

    class Recorder:
        def observe(self, facts):
            seen.append(facts)

    async def shedding(scope, receive, send):
        mark_shed(scope, reason)
        await send({"type": "http.response.start", "status": 503, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    client = TestClient(ObserveMiddleware(shedding, Recorder(), (), 0))  # no lifespan: a bare ASGI app
    assert client.post("/ask").status_code == 503
    assert client.get("/health").status_code == 503
    assert [f.refused for f in seen] == [f"shed_{reason}"] * 2


def test_refusal_now_is_the_shed_a_request_would_meet_on_arrival():
    async def scenario() -> list[str | None]:
        admission, release = Admission(LIMITS), asyncio.Event()
        seen = [getattr(admission.refusal_now(), "reason", None)]
        held = []
        for i in range(LIMITS.max_in_flight + LIMITS.max_queued):
            held.append(asyncio.create_task(_hold(admission, str(i), [], release)))
            await asyncio.sleep(0.01)
            seen.append(getattr(admission.refusal_now(), "reason", None))
        release.set()
        await asyncio.gather(*held)
        seen.append(getattr(admission.refusal_now(), "reason", None))
        return seen

    # free, one held, both held, then 1, 2 and 3 queued (full), and free again
    assert asyncio.run(scenario()) == [None, None, None, None, None, "queue_full", None]


def test_an_overloaded_ask_is_refused_before_its_body_is_read(project, index, tmp_path, embedder):
    t = generous(project.thresholds)
    t = dataclasses.replace(t, admission=dataclasses.replace(t.admission, max_in_flight=1, max_queued=0))
    app = make_app(project, Registry(index), drafts=tmp_path, embedder=embedder, thresholds=t)
    app.state.web.admission._in_flight = 1  # one answer already running; the queue holds none
    with TestClient(app) as client:
        # Not even JSON: had the body been read, this would be a 4xx, not the shed.
        r = client.post("/ask", content=b"\xff not json", headers={"Content-Type": "application/json"})
    assert r.status_code == 503 and r.json()["reason"] == "queue_full"
    assert r.headers["retry-after"] == "1" and r.headers["connection"] == "close"
