"""``tools/probe.py``: the hostile-input probe suite and its committed report.

Timings vary by machine and load, so the committed report is held to its structure, to the
arithmetic between its rows, totals and goals, and to the goals that are correctness (no 500,
no traceback, every case as expected but the shed latency); not to equality with a new run.
A subset of the cases runs here against an in-process server on loopback, and one refusal
against the real command, so the case logic cannot rot between runs of the whole suite.
"""

from __future__ import annotations

import contextlib
import json
import logging
from urllib.parse import quote_plus

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from rag_contract.index.registry import Registry
from rag_contract.web.slow_clients import HeaderDeadlineH11Protocol
from tests.support.apps import fresh_status, make_app
from tests.support.live_server import running
from tools import probe

STORM = {
    "clients": 64,
    "answered": 6,
    "shed": 58,
    "abandoned": 0,
    "other": 0,
    "shed_ms": {"p50": 30.5, "p99": 60.0, "max": 61.0},
    "server_shed_ms": {"p50": 1.2, "p99": 3.4, "max": 4.1},
    "server_queue_wait_ms": {"p50": 50.5, "p99": 52.0, "max": 52.0},
    "server_shed_lines": 58,
    "shed_with_retry_after": 58,
    "refusals_per_s": 0.0,
    "answered_ms_p50": 80.0,
}
MEMORY = {"identities": 100_000, "buckets": 50_000, "max_buckets": 50_000, "bytes": 16_800_000}
MEMORY |= {"ceiling_bytes": 50_000_000}
COLD = {"pages": 64, "slowest_page_s": 0.9, "health_asked": 12, "slowest_health_ms": 40.0}
IDS = {"ids": 224, "slowest_answer_s": 5.0, "health_asked": 200, "health_ms": {"p50": 20.0, "p99": 90.0, "max": 120.0}}
RETRY = {
    "path": "/answer/q11",
    "storm_replies": 2500,
    "storm_statuses": {"200": 900, "429": 1600},
    "storm_s": 7,
    "honest_ms": {"p50": 20.0, "p99": 140.0, "max": 300.0},
    "honest_other": 0,
    "answers_per_s": 90.0,
    "baseline_answers_per_s": 100.0,
    "answers_ratio": 0.9,
    "health_ms": {"p50": 10.0, "p99": 80.0, "max": 90.0},
    "baseline_health_ms": {"p50": 5.0, "p99": 20.0, "max": 30.0},
    "health_other": 0,
}
LIVE = RETRY | {"path": "/health/live"}


def rows(storm=STORM, growth=0, memory=MEMORY, cold=COLD, ids=IDS, retry=RETRY, live=LIVE) -> list[dict]:
    return [
        probe.Case("four parallel 128 MiB bodies", "413", "413", True, {"growth_mib": growth}).as_dict(),
        probe.Case("64 concurrent POST /ask", "none abandoned", "...", True, storm).as_dict(),
        probe.Case("100000 unique identities into the store", "bounded", "...", True, memory).as_dict(),
        probe.Case("cold GET / x 64 at once", "fast", "...", True, cold).as_dict(),
        probe.Case("cold GET /answer/{id} over 224 distinct ids", "fast", "...", True, ids).as_dict(),
        probe.Case("64 identities ignoring Retry-After, GET /answer/q11", "fast", "...", True, retry).as_dict(),
        probe.Case("64 identities ignoring Retry-After, GET /health/live", "fast", "...", True, live).as_dict(),
    ]


def totals(statuses=None, tracebacks=None, question_lines=0) -> dict:
    return probe.totals_of(statuses or {"200": 10, "404": 3}, tracebacks or {"00-main": 0}, question_lines)


def test_the_goals_are_read_from_the_rows_and_each_turns_red():
    met = probe.goals(rows(), totals())
    assert all(g["met"] for g in met.values()), met
    assert probe.goals(rows(), totals({"500": 1}))["status_500"] == {"target": 0, "value": 1, "met": False}
    assert probe.goals(rows(), totals(tracebacks={"a": 0, "b": 2}))["tracebacks"]["met"] is False
    assert probe.goals(rows(growth=11), totals())["body_rss_growth_mb"]["met"] is False
    assert probe.goals(rows(STORM | {"abandoned": 1}), totals())["abandoned_of_64"]["met"] is False
    slow = STORM | {"server_shed_ms": {"p50": 1.0, "p99": 4.0, "max": 5.0}}
    assert probe.goals(rows(slow), totals())["shed_ms_with_retry_after"]["met"] is False
    # Paced: the 58th shed of a burst may wait 57 turns of 2.5 ms, and no more than 5 ms past them.
    paced = STORM | {"refusals_per_s": 400.0}
    in_turn = paced | {"server_shed_ms": {"p50": 70.0, "p99": 140.0, "max": 147.4}}
    assert probe.goals(rows(in_turn), totals())["shed_ms_with_retry_after"]["met"] is True
    late = paced | {"server_shed_ms": {"p50": 70.0, "p99": 140.0, "max": 147.5}}
    assert probe.goals(rows(late), totals())["shed_ms_with_retry_after"]["met"] is False
    unlogged = STORM | {"server_shed_lines": 57}  # a shed reply the server's log does not time
    assert probe.goals(rows(unlogged), totals())["shed_ms_with_retry_after"]["met"] is False
    bare = STORM | {"shed_with_retry_after": 57}
    assert probe.goals(rows(bare), totals())["shed_ms_with_retry_after"]["met"] is False
    none_shed = STORM | {"shed": 0, "shed_ms": None, "server_shed_ms": None, "server_queue_wait_ms": None}
    none_shed |= {"server_shed_lines": 0}
    none_shed |= {"shed_with_retry_after": 0}
    assert probe.goals(rows(none_shed), totals())["shed_ms_with_retry_after"]["met"] is False
    big = MEMORY | {"bytes": 50_000_001}
    assert probe.goals(rows(memory=big), totals())["buckets_after_100k_identities"]["met"] is False
    for slow_cold in ({"slowest_page_s": 2.5}, {"slowest_health_ms": 101.0}, {"slowest_health_ms": None}):
        assert probe.goals(rows(cold=COLD | slow_cold), totals())["cold_list_stampede"]["met"] is False
    assert probe.goals(rows(), totals(question_lines=1))["question_text_in_logs"]["met"] is False
    for slow_ids in ({"health_ms": {"p50": 20.0, "p99": 101.0, "max": 150.0}}, {"health_ms": None}, {"ids": 0}):
        assert probe.goals(rows(ids=IDS | slow_ids), totals())["cold_id_stampede"]["met"] is False
    for key, which in (("storm_429", "retry"), ("storm_liveness", "live")):
        base = RETRY if which == "retry" else LIVE
        for worse in (
            {"honest_ms": {"p50": 20.0, "p99": 151.0, "max": 300.0}},
            {"health_ms": {"p50": 10.0, "p99": 101.0, "max": 200.0}},
            {"answers_ratio": 0.79},
            {"honest_other": 1},
            {"health_other": 1},
            {"storm_statuses": {"200": 2500}},  # no storm was refused: nothing was measured
            {"honest_ms": None},
        ):
            goal = probe.goals(rows(**{which: base | worse}), totals())
            assert goal[key]["met"] is False, (key, worse)
            assert goal["storm_429" if key == "storm_liveness" else "storm_liveness"]["met"] is True


def test_totals_count_every_reply_and_every_server():
    t = totals({"200": 5, "500": 2, "none": 1}, {"00-main": 1, "01-index": 0})
    assert t == {
        "responses": 8,
        "statuses": {"200": 5, "500": 2, "none": 1},
        "status_500": 2,
        "tracebacks": 1,
        "servers": 2,
        "question_lines": 0,
    }


def test_a_reply_is_parsed_from_the_wire_chunked_or_not():
    r = probe.parse_reply(b'HTTP/1.1 404 Not Found\r\nContent-Type: application/json\r\n\r\n{"error": "x"}', 0.1)
    assert (r.status, r.headers["content-type"], r.error) == (404, "application/json", "x")
    chunked = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n"
    assert probe.parse_reply(chunked, 0.0).body == b"abcde"
    assert probe.parse_reply(b"", 0.0).status is None
    assert probe.parse_reply(b"garbage", 0.0).brief() == "closed, no reply"


def test_percentiles_are_of_the_sorted_values():
    values = [5.0, 1.0, 3.0, 2.0, 4.0]
    assert (probe.percentile(values, 0.5), probe.percentile(values, 0.99), probe.percentile(values, 0)) == (3, 5, 1)


def test_the_committed_report_is_consistent_and_has_no_500_and_no_traceback(root):
    report = json.loads((root / "eval" / "results" / probe.REPORT).read_text())
    assert set(report) == {"meta", "cases", "totals", "goals"}
    assert {"date", "cpu_count", "python", "command", "wall_s", "load_average_1m"} <= set(report["meta"])
    names = [c["name"] for c in report["cases"]]
    assert len(names) == len(set(names)) >= 25
    for c in report["cases"]:
        assert {"name", "expected", "observed", "passed"} <= set(c) <= {*c, "figures"}
    t = report["totals"]
    assert t["responses"] == sum(t["statuses"].values()) and t["status_500"] == t["statuses"].get("500", 0)
    assert report["goals"] == probe.goals(report["cases"], t)
    assert set(report["goals"]) == {
        "status_500",
        "tracebacks",
        "body_rss_growth_mb",
        "abandoned_of_64",
        "shed_ms_with_retry_after",
        "buckets_after_100k_identities",
        "cold_list_stampede",
        "question_text_in_logs",
        "cold_id_stampede",
        "storm_429",
        "storm_liveness",
    }
    assert report["goals"]["status_500"]["met"] and report["goals"]["tracebacks"]["met"]
    assert report["goals"]["question_text_in_logs"]["met"]
    # every case as the threat model says, except what depends on the machine's speed
    timing = {"64 concurrent POST /ask", "cold GET / x 64 at once, /health asked meanwhile"}
    timing |= {c["name"] for c in report["cases"] if c["name"].startswith(("cold GET /answer/", "64 identities"))}
    assert [c["name"] for c in report["cases"] if not c["passed"] and c["name"] not in timing] == []


def test_render_shows_every_goal_and_case():
    report = {
        "meta": {"command": "python -m tools.probe", "cpu_count": 2, "python": "3.11.7", "date": "2026-01-01"}
        | {"wall_s": 80.0, "load_average_1m": 1.0},
        "cases": rows(),
        "totals": totals(),
    }
    report["goals"] = probe.goals(report["cases"], report["totals"])
    text = probe.render(report)
    assert "| no reply with status 500 | 0 | met |" in text
    shed_row = "p50 1.2 ms, p99 3.4 ms, max 4.1 ms; after waiting in the queue, max 52.0 ms; client, from its send"
    assert shed_row + ", p50 30.5 ms, max 61.0 ms | met |" in text
    assert "50000 buckets, 16.8 MB (bound 50000, 50 MB) | met |" in text
    assert "| 0.9 s, 40.0 ms | met |" in text
    assert "over 224 distinct ids at once, right after start: `/health` p99 <= 100 ms | 90.0 ms | met |" in text
    assert "honest p99 140.0 ms, `/health` p99 80.0 ms, 90 answers/s (0.9 x 100) | met |" in text
    assert "connections, `GET /health/live`" in text
    assert text.count("| yes |") == 7


# --- a subset of the cases, for real ----------------------------------------------------------


def _probe_client(project, index, embedder, tmp_path_factory, **server):
    """A probe client of the app over a fresh registry, served by ``running(app, **server)``."""
    app = make_app(
        project,
        Registry(index),
        drafts=tmp_path_factory.mktemp("drafts"),
        embedder=embedder,
        status=fresh_status(index),
    )
    with running(app, **server) as s:
        yield probe.Client(s.port, probe.Tally())


@pytest.fixture(scope="module")
def client(project, index, embedder, tmp_path_factory):
    yield from _probe_client(project, index, embedder, tmp_path_factory)


@pytest.mark.parametrize(
    "case",
    [
        probe.unknown_ids,
        probe.long_id,
        probe.content_types,
        probe.content_coding,
        probe.bidi_question,
        probe.validator_edges,
        probe.invisible_question,
        probe.relative_redirect,
        probe.nosniff,
    ],
)
def test_the_request_cases_pass_against_the_app(client, case):
    result = case(client)
    assert result.passed, result
    assert "500" not in client.tally.statuses


@pytest.fixture(scope="module")
def served_client(project, index, embedder, tmp_path_factory):
    """The app behind the protocol ``serve`` runs (``HeaderDeadlineH11Protocol``: its head checks)."""
    yield from _probe_client(project, index, embedder, tmp_path_factory, http=HeaderDeadlineH11Protocol)


@pytest.mark.parametrize(
    "case",
    [
        probe.smuggling,
        probe.request_targets,
        probe.methods_and_forms,
        probe.target_authority,
        probe.protocol_replies,
        probe.head_limits,
    ],
)
def test_the_rfc_9112_cases_pass_against_the_served_protocol_and_fail_without_it(served_client, client, case):
    assert case(served_client).passed
    assert not case(client).passed  # uvicorn's h11 protocol alone: smuggled, absolute form 404, ...


@pytest.mark.parametrize("case", [probe.conditionals, probe.page_edges])
def test_the_rfc_9110_cases_pass_against_the_app_and_fail_without_its_controls(client, project, case):
    limit = project.thresholds.ask.max_question_chars
    result = case(client, limit) if case is probe.page_edges else case(client)
    assert result.passed, result
    with running(echoing_app()) as server:
        bare = probe.Client(server.port, probe.Tally())
        assert not (case(bare, limit) if case is probe.page_edges else case(bare)).passed


def body_reading_app() -> Starlette:
    """An /ask that reads its body with no care for a client that goes away (ClientDisconnect)."""

    async def ask(request: Request) -> JSONResponse:
        return JSONResponse({"size": len(await request.body())})

    return Starlette(routes=[Route("/ask", ask, methods=["POST"])])


@contextlib.contextmanager
def errors_logged_to(log):
    """uvicorn's error log written to ``log`` too (added once the server runs: its start resets the logger)."""
    log.write_text("")
    to_file = logging.FileHandler(log)
    errors = logging.getLogger("uvicorn.error")
    errors.addHandler(to_file)
    try:
        yield
    finally:
        errors.removeHandler(to_file)
        to_file.close()


def test_aborted_uploads_leave_no_traceback_and_a_traceback_turns_the_case_red(served_client, tmp_path):
    log = tmp_path / "serve.log"
    with errors_logged_to(log):
        assert probe.aborted_uploads(served_client, log).passed
    with running(body_reading_app()) as server, errors_logged_to(log):
        assert not probe.aborted_uploads(probe.Client(server.port, probe.Tally()), log).passed


def test_upgrade_requests_log_nothing_and_uvicorns_warnings_turn_the_case_red(served_client, client, tmp_path):
    log = tmp_path / "serve.log"
    with errors_logged_to(log):
        assert probe.upgrade_requests(served_client, log).passed
    with errors_logged_to(log):
        assert not probe.upgrade_requests(client, log).passed  # uvicorn's own protocol: two per request


def test_question_lines_counts_a_question_however_the_url_encodes_it(tmp_path):
    log = tmp_path / "serve.log"
    log.write_text(f'"GET /ask?q={quote_plus(probe.QUESTION)} HTTP/1.1" 200\n{{"route": "/ask"}}\n')
    assert probe.question_lines(probe.Logs(tmp_path, [log]), [probe.QUESTION, probe.MARK_QUESTION]) == 1


def echoing_app() -> Starlette:
    """What the issue found: a 404 that echoes the whole id, JSON without nosniff, any content type read."""

    async def echo(request: Request) -> JSONResponse:
        return JSONResponse({"detail": f"no such id {request.path_params['rest']!r}"}, status_code=404)

    async def ask(request: Request) -> JSONResponse:
        return JSONResponse({"claims": []})

    return Starlette(routes=[Route("/ask", ask, methods=["POST"]), Route("/{rest:path}", echo)])


@pytest.mark.parametrize("case", [probe.long_id, probe.nosniff, probe.content_types, probe.relative_redirect])
def test_the_cases_turn_red_against_a_server_without_the_controls(case):
    with running(echoing_app()) as server:
        result = case(probe.Client(server.port, probe.Tally()))
    assert not result.passed, result


def test_a_refused_start_is_observed_from_the_real_command(root, tmp_path):
    logs = probe.Logs(tmp_path)
    refusal, _ = probe.REFUSALS["port"]
    row = probe.refusal_case(refusal, root, logs)
    assert row.passed, row
    assert row.observed.startswith("exit 2: rag-contract: PORT: 'abc'")
    assert logs.tracebacks() == {logs.files[0].stem: 0}
