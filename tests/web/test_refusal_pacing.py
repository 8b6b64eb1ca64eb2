"""Paced refusals: sheds leave in arrival order, at most ``per_s`` a second, none held past its
bound, and the served ``POST /ask`` sends its sheds in those turns (``per_s`` 0: all at once)."""

from __future__ import annotations

import asyncio
import dataclasses

import httpx
import pytest

from rag_contract.config.thresholds import ThresholdsError, parse_thresholds, to_plain
from rag_contract.index.registry import Registry
from rag_contract.web.refusal_pacing import RefusalPacing
from tests.support.apps import generous, make_app

# --- the rule, on a given clock -------------------------------------------------------


def test_refusals_arriving_together_leave_in_order_one_turn_apart():
    pacing = RefusalPacing(per_s=100.0, max_hold_s=1.0)
    assert [pacing.hold_s(5.0) for _ in range(4)] == pytest.approx([0.0, 0.01, 0.02, 0.03])


def test_a_refusal_after_the_last_turn_is_sent_at_once():
    pacing = RefusalPacing(per_s=100.0, max_hold_s=1.0)
    assert pacing.hold_s(5.0) == 0.0
    assert pacing.hold_s(5.004) == pytest.approx(0.006)  # the turn after 5.0 is 5.01
    assert pacing.hold_s(5.5) == 0.0  # long after 5.01: no turn is waiting


def test_a_turn_past_the_bound_is_not_held_and_takes_no_turn():
    pacing = RefusalPacing(per_s=10.0, max_hold_s=0.25)
    holds = [pacing.hold_s(0.0) for _ in range(5)]
    # turns at 0, 0.1, 0.2; the next would be 0.3, past the bound: sent at once, twice
    assert holds == pytest.approx([0.0, 0.1, 0.2, 0.0, 0.0])
    assert pacing.hold_s(0.15) == pytest.approx(0.15)  # the turns not taken are still free: 0.3


def test_a_turn_exactly_at_the_bound_is_held():
    pacing = RefusalPacing(per_s=4.0, max_hold_s=0.5)
    assert [pacing.hold_s(0.0) for _ in range(4)] == [0.0, 0.25, 0.5, 0.0]


def test_slow_paces_hold_for_whole_seconds():
    pacing = RefusalPacing(per_s=0.5, max_hold_s=5.0)
    assert [pacing.hold_s(0.0) for _ in range(4)] == [0.0, 2.0, 4.0, 0.0]


def test_unpaced_never_holds():
    pacing = RefusalPacing(per_s=0.0, max_hold_s=1.0)
    assert [pacing.hold_s(1.0) for _ in range(100)] == [0.0] * 100


def test_no_hold_allowed_means_none_is_held():
    pacing = RefusalPacing(per_s=10.0, max_hold_s=0.0)
    assert [pacing.hold_s(1.0) for _ in range(10)] == [0.0] * 10


@pytest.mark.parametrize("per_s, max_hold_s", [(-1.0, 1.0), (10.0, -0.5)])
def test_negative_settings_are_refused(per_s, max_hold_s):
    with pytest.raises(ValueError, match="must be >= 0"):
        RefusalPacing(per_s, max_hold_s)


def test_a_refusal_not_held_keeps_the_loops_turn():
    # sent at once means at once: no sleep(0) hands the loop to other requests first
    async def scenario() -> bool:
        others_ran = asyncio.Event()
        other = asyncio.get_running_loop().call_soon(others_ran.set)
        await RefusalPacing(per_s=0.0, max_hold_s=1.0).pace()
        ran = others_ran.is_set()
        other.cancel()
        return ran

    assert asyncio.run(scenario()) is False


def test_pace_waits_out_the_turns_on_the_loop():
    async def scenario() -> list[float]:
        pacing, loop = RefusalPacing(per_s=50.0, max_hold_s=1.0), asyncio.get_running_loop()
        began = loop.time()

        async def refused() -> float:
            await pacing.pace()
            return loop.time() - began

        return list(await asyncio.gather(*(refused() for _ in range(4))))

    sent = asyncio.run(scenario())
    # 20 ms apart, in order (the loop's timers may fire up to a clock tick early)
    assert sent == sorted(sent)
    assert sent[-1] >= 0.06 - 0.005


# --- the threshold ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "value, message",
    [
        (-1, r"admission.refusals_per_s: must be between 0.0 and 100000.0"),
        ("many", r"admission.refusals_per_s: must be a number"),
        (None, r"admission.refusals_per_s: required key missing"),
    ],
)
def test_refusals_per_s_is_checked_at_load(project, value, message):
    raw = to_plain(project.thresholds)
    if value is None:
        del raw["admission"]["refusals_per_s"]
    else:
        raw["admission"]["refusals_per_s"] = value
    with pytest.raises(ThresholdsError, match=message):
        parse_thresholds(raw)


# --- served: POST /ask's sheds in their turns -------------------------------------------


def _shed_times(project, index, tmp_path, embedder, per_s: float, asks: int) -> list[float]:
    """Seconds from the first request to each shed reply, ``asks`` sent at once while every
    answer slot is held."""
    t = generous(project.thresholds)
    admission = dataclasses.replace(t.admission, max_in_flight=1, max_queued=0, refusals_per_s=per_s)
    t = dataclasses.replace(t, admission=admission)
    app = make_app(project, Registry(index), drafts=tmp_path, embedder=embedder, thresholds=t)
    app.state.web.admission._in_flight = 1  # one answer already running; the queue holds none

    async def scenario() -> list[float]:
        loop = asyncio.get_running_loop()
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as client:
            began = loop.time()

            async def ask() -> float:
                r = await client.post("/ask", json={"question": "What is a URI?"})
                assert r.status_code == 503 and r.json()["error"] == "overloaded"
                assert r.headers["retry-after"] == str(admission.retry_after_s)
                return loop.time() - began

            return sorted(await asyncio.gather(*(ask() for _ in range(asks))))

    return asyncio.run(scenario())


def test_served_sheds_are_sent_in_their_turns(project, index, tmp_path, embedder):
    sent = _shed_times(project, index, tmp_path, embedder, per_s=10.0, asks=5)
    assert sent[-1] >= 0.4 - 0.005  # the fifth waited four turns of 100 ms


def test_unpaced_sheds_are_sent_at_once(project, index, tmp_path, embedder):
    # The check above turning red: with per_s 0 the five sheds are sent as they arrive.
    sent = _shed_times(project, index, tmp_path, embedder, per_s=0.0, asks=5)
    assert sent[-1] < 0.4 - 0.005
