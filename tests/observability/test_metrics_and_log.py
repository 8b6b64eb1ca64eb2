"""Metrics and the access log, in process: what each request adds, and what neither ever holds.
Settings that cannot be used are refused before anything starts; with nothing configured there
is no observer and neither OpenTelemetry nor prometheus_client is imported."""

from __future__ import annotations

import dataclasses
import datetime
import io
import json
import socket
import subprocess
import sys
import time
import urllib.request

import pytest
from starlette.testclient import TestClient

from rag_contract.cli import main
from rag_contract.observability.access_log import AccessLog
from rag_contract.observability.request import Observation, RequestFacts
from rag_contract.observability.settings import ObservabilityConfigError, Settings, settings_from
from tests.observability.apps import observed_app
from tests.support.apps import generous
from tests.support.clocks import jump_clock

QUESTION = "Which status code means the zebracorn representation was not modified?"
ON = Settings(metrics_port=9, access_log=True)


def test_metrics_count_requests_by_route_status_and_state_and_time_the_stages(project, index, embedder):
    o = observed_app(project, index, embedder, ON)
    with TestClient(o.app) as client:
        answers = [client.get("/answer/q11").json() for _ in range(3)]
        client.get("/answer/nope")
        client.get("/no/such/path")
    state = answers[0]["state"]
    assert o.metric("rag_contract_requests_total", route="/answer/{qid}", status="200", state=state) == 3
    assert o.metric("rag_contract_requests_total", route="/answer/{qid}", status="404", state="none") == 1
    assert o.metric("rag_contract_requests_total", route="other", status="404", state="none") == 1
    assert o.metric("rag_contract_request_seconds_count", route="/answer/{qid}") == 4
    # computed once (retrieval, drafting, ...), then served from the kept answer twice
    assert o.metric("rag_contract_stage_seconds_count", stage="retrieval") == 1
    assert o.metric("rag_contract_stage_seconds_count", stage="reused") == 2
    assert o.metric("rag_contract_index_info", index_version=index.version) == 1


def test_limiter_refusals_and_abandoned_requests_are_counted(project, index, embedder):
    t = project.thresholds
    tight = dataclasses.replace(generous(t), rate_limit=dataclasses.replace(t.rate_limit, max_client_burst=2))
    o = observed_app(project, index, embedder, ON, thresholds=tight, service_clock=jump_clock())
    with TestClient(o.app) as client:
        statuses = [client.post("/ask", json={"question": QUESTION}).status_code for _ in range(3)]
    assert statuses == [503, 503, 429]  # the jumping clock spends every deadline
    assert o.metric("rag_contract_abandoned_total", route="/ask") == 2
    assert o.metric("rag_contract_requests_total", route="/ask", status="503", state="abandoned") == 2
    assert o.metric("rag_contract_refused_total", reason="rate_limited") == 1
    assert o.metric("rag_contract_requests_total", route="/ask", status="429", state="none") == 1


def test_one_access_line_per_request_and_never_the_question(project, index, embedder):
    o = observed_app(project, index, embedder, ON)
    with TestClient(o.app) as client:
        asked = client.post("/ask", json={"question": QUESTION}).json()
        client.get("/ask", params={"q": QUESTION})
        client.get("/answer/q11")
    lines = o.access_lines()
    assert len(lines) == 3
    rows = [json.loads(line) for line in lines]
    fields = {"time", "method", "route", "status", "state", "refused", "latency_ms", "index_version", "trace_id"}
    assert set(rows[0]) == fields and rows[0]["refused"] is None
    assert [r["route"] for r in rows] == ["/ask", "/ask", "/answer/{qid}"]
    assert rows[0]["state"] == asked["state"] and rows[0]["index_version"] == index.version
    assert rows[0]["trace_id"] is None  # tracing is off
    log = o.access.getvalue()
    assert "zebracorn" not in log and QUESTION not in log
    assert not any(c["text"] in log for c in asked["claims"])


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("RAG_CONTRACT_TRACES_ENDPOINT", "collector:4318"),
        ("RAG_CONTRACT_TRACES_ENDPOINT", "http://host:99999/v1/traces"),
        ("RAG_CONTRACT_TRACES_INCLUDE_TEXT", "maybe"),
        ("RAG_CONTRACT_TRACES_TIMEOUT_S", "0"),
        ("RAG_CONTRACT_METRICS_PORT", "metrics"),
        ("RAG_CONTRACT_ACCESS_LOG", "2"),
    ],
)
def test_a_setting_that_cannot_be_used_is_refused_naming_it(name, value, monkeypatch, capsys):
    with pytest.raises(ObservabilityConfigError, match=name):
        settings_from({name: value})
    monkeypatch.setenv(name, value)
    assert main(["serve", "--port", "0"]) == 2  # before anything binds
    assert name in capsys.readouterr().err


def test_metrics_are_never_served_on_the_public_port(monkeypatch, capsys):
    monkeypatch.setenv("RAG_CONTRACT_METRICS_PORT", "8123")
    assert main(["serve", "--port", "8123"]) == 2
    assert "public port" in capsys.readouterr().err


def test_settings_read_from_the_environment():
    s = settings_from(
        {
            "RAG_CONTRACT_TRACES_ENDPOINT": "https://collector.example:4318/v1/traces",
            "RAG_CONTRACT_TRACES_INCLUDE_TEXT": "yes",
            "RAG_CONTRACT_METRICS_PORT": "9100",
            "RAG_CONTRACT_ACCESS_LOG": "on",
        }
    )
    assert (s.tracing, s.traces_include_text, s.metrics_port, s.access_log) == (True, True, 9100, True)
    assert settings_from({}) == Settings() and not Settings().anything


# What tracing and metrics load. (redis-py imports opentelemetry's metrics API on its own when
# it is installed; the trace SDK, the exporter and prometheus_client stay ours to load.)
OPTIONAL = (
    "opentelemetry.sdk.trace",
    "opentelemetry.exporter",
    "prometheus_client",
    "rag_contract.observability.otel",
    "rag_contract.observability.export_process",
    "rag_contract.observability.metrics",
)


def test_with_nothing_configured_nothing_is_observed_or_imported():
    code = (
        "import sys\n"
        "from rag_contract.cli import main\n"
        "from rag_contract.index.registry import Registry\n"
        "from rag_contract.observability.settings import settings_from\n"
        "from rag_contract.web.serving import served_observer\n"
        "assert served_observer(settings_from({}), Registry(None)) is None\n"
        f"print(sorted(m for m in sys.modules if m.startswith({OPTIONAL!r})))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.strip() == "[]"


def reference_line(facts: RequestFacts, trace_id: str | None) -> str:
    """The access line as ``json.dumps`` writes its fields, in their order."""
    ms = facts.started_ns // 1_000_000
    started = datetime.datetime.fromtimestamp(ms // 1000, tz=datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S")
    fields = {
        "time": f"{started}.{ms % 1000:03d}Z",
        "method": facts.method,
        "route": facts.route,
        "status": facts.status,
        "state": facts.state,
        "refused": facts.refused,
        "latency_ms": round(facts.latency_s * 1000.0, 3),
        "index_version": facts.index_version,
        "trace_id": trace_id,
    }
    return json.dumps(fields, separators=(",", ":")) + "\n"


def test_an_access_line_is_the_json_of_its_fields_whatever_was_kept_encoded():
    answered = Observation("grounded", "v1", QUESTION)
    ask = RequestFacts("/ask", "POST", 200, 0.0123456, 1_796_032_633_999_600_000, "10.0.0.1", answered)
    variants = [
        ask,
        dataclasses.replace(ask, started_ns=ask.started_ns + 400_000, latency_s=2.5),  # the next second
        dataclasses.replace(ask, observation=None, status=429, refused="rate_limited", latency_s=1e-7),
        dataclasses.replace(ask, route="other", observation=Observation('quo"te\\', None, "")),
    ]
    log = AccessLog(io.StringIO())
    for facts in variants + variants:  # the second time from what was kept
        for trace_id in (None, "0123456789abcdef0123456789abcdef"):
            assert log.line(facts, trace_id) == reference_line(facts, trace_id)


def test_the_metrics_port_ends_unfinished_requests_and_bounds_the_connections_it_serves(monkeypatch):
    from prometheus_client import CollectorRegistry  # noqa: PLC0415 - as the served path imports it: lazily

    from rag_contract.observability import metrics  # noqa: PLC0415

    monkeypatch.setattr(metrics._TimedHandler, "timeout", 0.5)
    server, thread = metrics.serve_metrics("127.0.0.1", 0, CollectorRegistry())
    port = server.server_address[1]
    try:
        held = [
            socket.create_connection(("127.0.0.1", port), timeout=6) for _ in range(3 * metrics.METRICS_MAX_CONNECTIONS)
        ]
        started = time.monotonic()
        for sock in held:
            sock.sendall(b"GET /metr")  # and never the rest
        ended = [sock.recv(100) for sock in held]  # each closed: at once past the bound, else on the timeout
        assert ended == [b""] * len(held) and time.monotonic() - started < 5.0
        for sock in held:
            sock.close()
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as reply:
            assert reply.status == 200
    finally:
        server.shutdown()
        server.server_close()


def test_the_metrics_port_names_no_server_software():
    # RFC 9110 section 10.2.4: Server is optional; "WSGIServer/0.2 CPython/3.11.7" named the
    # interpreter to its patch release. Neither a reply nor an error reply carries it.
    from prometheus_client import CollectorRegistry  # noqa: PLC0415 - as the served path imports it: lazily

    from rag_contract.observability import metrics  # noqa: PLC0415

    server, _ = metrics.serve_metrics("127.0.0.1", 0, CollectorRegistry())
    port = server.server_address[1]
    try:
        for request in (
            b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
            b"GET / HTTP/1.1\r\nX: " + b"a" * 70_000 + b"\r\n\r\n",
        ):
            with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
                sock.sendall(request)
                reply = b""
                while chunk := sock.recv(65536):
                    reply += chunk
            head = reply.split(b"\r\n\r\n", 1)[0].lower()
            assert head.startswith(b"http/1."), reply[:80]
            assert b"\r\nserver:" not in head and b"python" not in head, head
    finally:
        server.shutdown()
        server.server_close()
