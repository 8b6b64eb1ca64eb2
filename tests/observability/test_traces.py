"""Traces as they leave the process: the real OTLP/HTTP exporter posts to a collector on
loopback, which decodes the bytes with the official proto definitions.

No question, passage or claim text is anywhere in those bytes unless the operator sets the
text flag (and then it is); one trace per request, stage spans carrying the budget's times; a
collector that fails or is not there is counted and logged by exception type while every
answer is still 200.
"""

from __future__ import annotations

import hashlib
import logging
import socket

import pytest
from starlette.testclient import TestClient

from rag_contract.observability import redaction
from rag_contract.observability.settings import Settings
from tests.observability.apps import observed_app
from tests.observability.collector import attributes, collector

MARK = "zebracorn"  # a word no RFC and no attribute name contains
QUESTION = f"What does a 304 Not Modified response mean for a {MARK} cache?"


def ask_everything(client: TestClient) -> list[dict]:
    """Free text by POST and by the page, a fixed question by JSON and page; the JSON bodies."""
    asked = client.post("/ask", json={"question": QUESTION})
    fixed = client.get("/answer/q11")
    assert asked.status_code == 200 and fixed.status_code == 200
    assert client.get("/ask", params={"q": QUESTION}).status_code == 200
    assert client.get("/q/q11").status_code == 200
    return [asked.json(), fixed.json()]


def texts_of(bodies: list[dict]) -> tuple[list[str], list[str]]:
    """(the question and every claim text, every passage title) of the answers."""
    texts = [b["question"] for b in bodies]
    texts += [c["text"] for b in bodies for c in b["claims"] + b["withdrawn"]]
    titles = [p["title"] for b in bodies for p in b["passages"]]
    assert any(b["claims"] for b in bodies) and titles
    return texts, titles


def run(project, index, embedder, include_text: bool, status: int = 200):
    with collector(status) as c:
        settings = Settings(traces_endpoint=c.url, traces_include_text=include_text, traces_timeout_s=2.0)
        o = observed_app(project, index, embedder, settings)
        with TestClient(o.app) as client:
            bodies = ask_everything(client)
            assert o.observer.tracer is not None and o.observer.tracer.flush()
    return c, o, bodies


def test_no_question_passage_or_claim_text_leaves_by_default(project, index, embedder):
    c, _, bodies = run(project, index, embedder, include_text=False)
    texts, titles = texts_of(bodies)
    wire = c.wire
    assert wire and MARK.encode() not in wire
    for text in texts:
        assert text.encode("utf-8") not in wire, text
    values = [v for s in c.spans() for v in attributes(s).values()]
    flat = [x for v in values for x in (v if isinstance(v, list) else [v])]
    assert not set(titles) & {x for x in flat if isinstance(x, str)}
    assert not {k for s in c.spans() for k in attributes(s)} & redaction.TEXT


def test_with_the_text_flag_the_text_is_exported(project, index, embedder):
    c, _, bodies = run(project, index, embedder, include_text=True)
    texts, titles = texts_of(bodies)
    wire = c.wire
    for text in texts + titles:
        assert text.encode("utf-8") in wire, text


def test_one_trace_per_request_with_stage_spans_and_metadata(project, index, embedder):
    c, _, bodies = run(project, index, embedder, include_text=False)
    spans = c.spans()
    roots = [s for s in spans if not s.parent_span_id]
    assert len(roots) == 4 and len({s.trace_id for s in roots}) == 4
    asked = next(s for s in roots if s.name == "POST /ask")
    a = attributes(asked)
    answer = bodies[0]
    assert a["rag.question.sha256"] == hashlib.sha256(QUESTION.encode()).hexdigest()
    assert a["rag.index_version"] == index.version == answer["index_version"]
    assert a["rag.state"] == answer["state"] and a["rag.drafter"] == answer["drafter"]
    assert a["rag.claims.kept"] == len(answer["claims"]) and a["rag.claims.withdrawn"] == len(answer["withdrawn"])
    assert a["rag.withdrawn.rules"] == sorted({w["rule"] for w in answer["withdrawn"]})
    assert len(str(a["rag.client.key"])) == redaction.CLIENT_KEY_HEX and a["rag.client.key"] != "testclient"
    children = {s.name: s for s in spans if s.trace_id == asked.trace_id and s.parent_span_id == asked.span_id}
    assert {"retrieval", "drafting", "grounding"} <= set(children)
    for name, ms in answer["budget"]["stages"].items():
        assert attributes(children[name])["rag.stage.ms"] == pytest.approx(ms, abs=1e-3)
        span = children[name]
        assert span.end_time_unix_nano - span.start_time_unix_nano == pytest.approx(ms * 1e6, abs=1e3)
    fixed = next(s for s in roots if s.name == "GET /answer/{qid}")
    assert attributes(fixed)["rag.question.sha256"] == hashlib.sha256(bodies[1]["question"].encode()).hexdigest()


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


FAILURES = [("collector answers 500", "HTTPError"), ("nothing listens", "ConnectionError")]


@pytest.mark.parametrize(("failure", "expected"), FAILURES)
def test_a_failing_export_is_counted_and_logged_by_type_and_answers_are_unaffected(
    project, index, embedder, failure, expected, caplog
):
    caplog.set_level(logging.WARNING, logger="rag_contract.observability.export_process")
    with collector(status=500) as c:
        url = c.url if failure == "collector answers 500" else f"http://127.0.0.1:{closed_port()}/v1/traces"
        # metrics on too (no port is opened here): the failures are counted there as well
        o = observed_app(project, index, embedder, Settings(traces_endpoint=url, traces_timeout_s=0.5, metrics_port=9))
        with TestClient(o.app) as client:
            ask_everything(client)  # every answer 200, whatever the collector does
            assert o.observer.tracer is not None
            o.observer.tracer.flush()
    assert bool(c.bodies) == (failure == "collector answers 500")
    assert o.observer.export_failures is not None
    counts = o.observer.export_failures.counts()
    assert set(counts) == {expected} and counts[expected] >= 1
    assert o.metric("rag_contract_trace_export_failures_total", error_type=expected) == counts[expected]
    assert any(expected in r.getMessage() for r in caplog.records)
