"""Storms that must not starve the service: the limiter's 429s are sent in their turns (a retry
storm of refused clients, on any route, the liveness route too), ``/health`` takes no thread
from the shared pool, and fixed answers for distinct ids are computed one at a time with the
loop's turns between them, one computation per id."""

from __future__ import annotations

import asyncio
import dataclasses
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import anyio.to_thread
import httpx
import pytest

from rag_contract.answering.drafting import ExtractiveDrafter
from rag_contract.answering.service import Abandoned
from rag_contract.index.registry import Registry
from rag_contract.web.app import serve_fixed
from rag_contract.web.fixed_answers import Served
from rag_contract.web.single_flight import SingleFlight
from tests.support.apps import make_app

# --- 429s in their turns ------------------------------------------------------------------


def _refusal_times(project, index, embedder, path: str, per_s: float, requests: int) -> list[float]:
    """Seconds from the first request to each 429, ``requests`` sent at once by one client
    whose bucket holds one token (the limiter's clock frozen: nothing refills)."""
    t = project.thresholds
    rl = dataclasses.replace(t.rate_limit, max_client_burst=1, max_requests_per_minute=1.0)
    t = dataclasses.replace(t, rate_limit=rl, admission=dataclasses.replace(t.admission, refusals_per_s=per_s))
    app = make_app(project, Registry(index), embedder=embedder, fixture_drafter=_Blocked(project), thresholds=t)

    async def scenario() -> list[float]:
        loop = asyncio.get_running_loop()
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as client:
            assert (await client.get("/health/live")).status_code == 200  # the one token
            began = loop.time()

            async def refused() -> float:
                r = await client.get(path)
                assert r.status_code == 429 and r.json()["error"] == "rate_limited"
                assert int(r.headers["retry-after"]) >= 1
                return loop.time() - began

            return sorted(await asyncio.gather(*(refused() for _ in range(requests))))

    return asyncio.run(scenario())


@pytest.mark.parametrize("path", ["/health/live", "/questions", "/answer/q1"])
def test_a_storm_of_refused_requests_is_sent_in_turns_on_every_route(project, index, embedder, path):
    sent = _refusal_times(project, index, embedder, path, per_s=10.0, requests=5)
    # the fifth waited four turns of 100 ms: a client that ignores Retry-After cannot ask faster
    assert sent[-1] >= 0.4 - 0.005
    assert sent[-1] < 1.0  # and none is held past the bound (one second, its Retry-After)


def test_unpaced_429s_are_sent_at_once(project, index, embedder):
    # what the limiter did before: the refusals leave as fast as the loop can write them
    sent = _refusal_times(project, index, embedder, "/health/live", per_s=0.0, requests=5)
    assert sent[-1] < 0.2


def test_429s_and_sheds_share_one_pace(project, index, embedder):
    app = make_app(project, Registry(index), embedder=embedder, fixture_drafter=_Blocked(project))
    web = app.state.web
    # the limiter's pace is the WebState's RefusalPacing: one bound for every refusal a worker sends
    pace = next(m.kwargs["pace"] for m in app.user_middleware if "pace" in m.kwargs)
    assert pace.__self__ is web.refusals


# --- /health off the shared thread pool -----------------------------------------------------


class _Blocked:
    """The extractive drafter, each draft held until ``release`` is set (work that takes its time)."""

    def __init__(self, project) -> None:
        self.inner = ExtractiveDrafter.committed(project.thresholds.drafting)
        self.name = self.inner.name
        self.release = threading.Event()
        self.calls = 0
        self.lock = threading.Lock()

    def draft(self, question_id, question, passages, query=None):
        self.release.wait(timeout=30)
        with self.lock:
            self.calls += 1
        return self.inner.draft(question_id, question, passages, query)


def test_health_is_answered_while_the_shared_thread_pool_is_full(project, index, embedder):
    """Every thread of the shared pool held (here: one thread, held by a free-text answer):
    ``/health`` still answers, it takes no thread from that pool."""
    blocked = _Blocked(project)
    app = make_app(project, Registry(index), embedder=embedder, fixture_drafter=blocked, ask_drafter=blocked)

    async def scenario() -> tuple[int, float]:
        anyio.to_thread.current_default_thread_limiter().total_tokens = 1
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as client:
            ask = asyncio.create_task(client.post("/ask", json={"question": "What is a URI?"}))
            await asyncio.sleep(0.3)  # the answer holds the pool's one thread, blocked
            began = time.perf_counter()
            try:
                health = await asyncio.wait_for(client.get("/health"), 5.0)
            finally:
                blocked.release.set()
                await ask
            return health.status_code, time.perf_counter() - began

    status, waited = asyncio.run(scenario())
    assert status == 200 and waited < 1.0


# --- a cold stampede over distinct ids ------------------------------------------------------

DISTINCT = 40
DRAFT_S = 0.05


class _Slow(_Blocked):
    """The extractive drafter, each draft taking ``DRAFT_S`` of the thread that calls it."""

    def draft(self, question_id, question, passages, query=None):
        time.sleep(DRAFT_S)
        with self.lock:
            self.calls += 1
        return self.inner.draft(question_id, question, passages, query)


def test_a_cold_stampede_over_distinct_ids_leaves_the_loop_to_health(project, index, embedder, live_server):
    """Distinct ``GET /answer/{id}`` at once on a fresh app (2 s of drafting in all): between any
    two answers the loop serves everything else, so ``/health/live`` waits at most about one
    draft, not the whole stampede; each id is computed once however often it is asked."""
    slow = _Slow(project)
    server = live_server(make_app(project, Registry(index), embedder=embedder, fixture_drafter=slow))
    ids = [q.id for q in project.questions.questions if q.answerable][:DISTINCT]
    with httpx.Client(base_url=server.url, timeout=60) as http, ThreadPoolExecutor(2 * DISTINCT) as pool:
        answers = [pool.submit(http.get, f"/answer/{qid}") for qid in ids + ids]  # each id asked twice
        time.sleep(0.3)  # every request is in, the drafts under way
        began = time.perf_counter()
        live = http.get("/health/live", timeout=10)
        waited = time.perf_counter() - began
        drafted = slow.calls
        replies = [a.result(timeout=60) for a in answers]
    assert live.status_code == 200
    assert drafted < len(ids), (drafted, waited)  # asked while the stampede was still being answered
    assert waited < 0.5  # inline, it waited for every draft already under way (~1.5 s here)
    assert {r.status_code for r in replies} == {200}
    assert slow.calls == len(ids)  # one computation per id, the second asker joined it
    for first, second in zip(replies[: len(ids)], replies[len(ids) :], strict=True):
        assert first.headers["etag"] == second.headers["etag"]


# --- a joiner handed another's abandonment -------------------------------------------------


class _Clock:
    """A service clock that moves only when a draft spends time on it."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class _SpendsFirst(_Blocked):
    """The extractive drafter; each of its first ``slow`` drafts spends a second of ``clock`` (a
    cold first answer on a loaded machine: far past the 150 ms deadline), the others nothing."""

    def __init__(self, project, clock: _Clock, slow: int) -> None:
        super().__init__(project)
        self.clock, self.slow = clock, slow

    def draft(self, question_id, question, passages, query=None):
        self.calls += 1
        if self.calls <= self.slow:
            self.clock.now += 1.0
        return self.inner.draft(question_id, question, passages, query)


def _stampede(project, index, embedder, slow: int, joiners: int) -> tuple[list, _SpendsFirst]:
    """``1 + joiners`` requests for one fixed id at once on a fresh app, through ``serve_fixed``:
    the first starts the computation, the others join it before it runs."""
    clock = _Clock()
    drafter = _SpendsFirst(project, clock, slow)
    app = make_app(
        project,
        Registry(index),
        embedder=embedder,
        fixture_drafter=drafter,
        service_clock=clock,
        thresholds=project.thresholds,
    )
    web = app.state.web
    q = next(q for q in project.questions.questions if q.answerable)

    async def scenario() -> list:
        index_ = web.registry.acquire()
        return list(await asyncio.gather(*(serve_fixed(web, index_, q) for _ in range(1 + joiners))))

    return asyncio.run(scenario()), drafter


def test_a_joiner_handed_another_s_abandonment_computes_its_own_answer(project, index, embedder):
    served, drafter = _stampede(project, index, embedder, slow=1, joiners=3)
    assert isinstance(served[0], Abandoned)  # the shared computation spent its own deadline
    # each joiner was given the answer of a computation under a deadline of its own, not the 503
    assert all(isinstance(s, Served) and s.entity.answer.http_status == 200 for s in served[1:]), served
    # one retry computed it; the other joiners were served what that retry kept
    assert drafter.calls == 2


def test_a_joiner_computes_once_more_and_never_loops(project, index, embedder):
    served, drafter = _stampede(project, index, embedder, slow=10, joiners=2)
    # every computation spends its deadline: each joiner tried once under its own and got its own 503
    assert all(isinstance(s, Abandoned) for s in served)
    assert drafter.calls == 3  # the shared computation, then one per joiner: never a third try
    assert len({id(s) for s in served}) == 3  # each its own abandonment, not the shared one


def test_a_waiter_alone_that_goes_away_before_its_turn_drops_its_computation():
    async def scenario() -> list[str]:
        flights: SingleFlight[str] = SingleFlight()
        ran: list[str] = []
        owner = object()
        first = asyncio.create_task(flights.run("q1", owner, lambda: ran.append("first") or "first"))
        alone = asyncio.create_task(flights.run_alone(lambda: ran.append("alone") or "alone"))
        await asyncio.sleep(0)
        alone.cancel()  # before the worker's turn came to it
        await first
        assert (await flights.run_alone(lambda: ran.append("again") or "again")) == "again"
        return ran

    assert asyncio.run(scenario()) == ["first", "again"]


# --- the single flight, alone ---------------------------------------------------------------


def test_one_flight_per_key_and_owner_and_none_reused_once_done():
    order: list[str] = []

    def compute(tag: str):
        def run() -> str:
            order.append(tag)
            return tag

        return run

    async def scenario() -> list[tuple[str, bool]]:
        flights: SingleFlight[str] = SingleFlight()
        a, b = object(), object()
        flights.start("q0", a, compute("queued"))
        pending = [
            asyncio.create_task(flights.run("q1", a, compute("first"))),
            asyncio.create_task(flights.run("q1", a, compute("joined"))),
            asyncio.create_task(flights.run("q1", b, compute("other owner"))),
        ]
        out = list(await asyncio.gather(*pending))
        out.append(await flights.run("q1", b, compute("after")))  # a finished flight is not handed out again
        return out

    out = asyncio.run(scenario())
    assert out[0] == ("first", True) and out[1] == ("first", False) and out[2] == ("other owner", True)
    assert out[3] == ("after", True)
    # in order of arrival; nothing computed twice
    assert order == ["queued", "first", "other owner", "after"]


def test_pieces_run_in_order_and_leave_the_loop_its_turns_between_them():
    async def scenario() -> tuple[list[str], int]:
        flights: SingleFlight[str] = SingleFlight()
        owner, order, ticks = object(), [], 0

        def compute(tag: str):
            return lambda: order.append(tag) or tag

        for n in range(5):
            flights.start(f"q{n}", owner, compute(f"q{n}"))

        async def ticker() -> None:
            nonlocal ticks
            while len(order) < 5:
                ticks += 1
                await asyncio.sleep(0)

        tick = asyncio.create_task(ticker())
        assert await flights.run("q3", owner, compute("again")) == ("q3", False)
        await tick
        return order, ticks

    order, ticks = asyncio.run(scenario())
    assert order == ["q0", "q1", "q2", "q3", "q4"]
    assert ticks >= 4  # the loop ran other work between the pieces


def test_a_waiter_that_goes_away_leaves_the_computation_to_the_others():
    async def scenario() -> tuple[str, bool]:
        flights: SingleFlight[str] = SingleFlight()
        owner = object()
        leaver = asyncio.create_task(flights.run("q1", owner, lambda: "done"))
        stayer = asyncio.create_task(flights.run("q1", owner, lambda: "done"))
        await asyncio.sleep(0)
        leaver.cancel()
        return await stayer

    assert asyncio.run(scenario()) in (("done", False), ("done", True))


def test_an_exception_is_the_callers():
    async def scenario() -> None:
        flights: SingleFlight[str] = SingleFlight()

        def boom() -> str:
            raise RuntimeError("boom")

        flights.start("unawaited", object(), boom)  # nobody waits: dropped, not logged
        with pytest.raises(RuntimeError, match="boom"):
            await flights.run("q1", object(), boom)

    asyncio.run(scenario())
