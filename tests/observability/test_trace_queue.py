"""The trace hand-off: what leaves is byte for byte what the OpenTelemetry SDK's encoder writes
for the same spans, and a full queue drops the trace, counts it, and leaves the request alone."""

from __future__ import annotations

import dataclasses
import json
import threading
from collections.abc import Sequence
from types import MappingProxyType

from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import SpanContext, SpanKind, Status, StatusCode, TraceFlags
from starlette.testclient import TestClient

from rag_contract.observability import redaction
from rag_contract.observability.export_process import ExportConfig, ExportProcess, ProcessTracer
from rag_contract.observability.otel import SCOPE, SERVICE_NAME, resource_attributes
from rag_contract.observability.otlp_wire import SPAN_KIND_SERVER, Attributes, WireEncoder, WireSpan
from rag_contract.observability.request import Observation, RequestFacts
from rag_contract.observability.settings import Settings
from rag_contract.observability.trace_queue import QUEUE_FULL
from rag_contract.observability.tracing import SharedLayers, span_plan
from tests.observability.apps import observed_app
from tests.observability.collector import collector

ROOT_ATTRIBUTES = {
    "http.request.method": "GET",
    "http.route": "/answer/{qid}",
    "http.response.status_code": 200,
    "rag.client.key": "0123456789abcdef",
    "rag.claims.kept": 3,
    "rag.claims.withdrawn": 0,
    "rag.withdrawn.rules": [],
    "rag.passages.ids": ["rfc9110#15.4.5", "rfc9111#4.3.2"],
    "rag.budget.deadline_ms": 150.0,
    "rag.budget.spent_ms": -0.0,
    "rag.question.text": "What does 304 mean? ünïcode",
    "rag.claims.text": ["a claim", "another"],
    "rag.private": "never listed",  # dropped by redaction
}


def sdk_span(s: WireSpan, include_text: bool) -> ReadableSpan:
    """The SDK's own span for ``s``, redacted by the same rule."""
    flags = TraceFlags(TraceFlags.SAMPLED)
    parent = SpanContext(s.trace_id, s.parent_id, False, flags) if s.parent_id else None
    return ReadableSpan(
        s.name,
        SpanContext(s.trace_id, s.span_id, False, flags),
        parent=parent,
        resource=Resource.create({"service.name": SERVICE_NAME}),
        attributes=redaction.redact(s.attributes, include_text),
        kind=SpanKind.SERVER if s.kind == SPAN_KIND_SERVER else SpanKind.INTERNAL,
        status=Status(StatusCode.ERROR if s.failed else StatusCode.UNSET),
        start_time=s.start_ns,
        end_time=s.end_ns,
        instrumentation_scope=InstrumentationScope(SCOPE),
    )


def test_the_encoded_request_is_what_the_sdk_encoder_writes():
    trace_id, root = (1 << 127) + 12345, (1 << 63) + 7
    spans = [
        WireSpan(trace_id, 99, root, "reused", 1, 10**18, 10**18 + 1500, {"rag.stage.ms": 0.0015}),
        WireSpan(trace_id, root, 0, "GET /answer/{qid}", SPAN_KIND_SERVER, 10**18, 10**18 + 9000, ROOT_ATTRIBUTES),
        WireSpan(trace_id + 1, 5, 0, "POST /ask", SPAN_KIND_SERVER, 1, 2, {"rag.state": "none"}, failed=True),
    ]
    for include_text in (False, True):
        encoder = WireEncoder(resource_attributes(), SCOPE, include_text)
        expected = encode_spans([sdk_span(s, include_text) for s in spans]).SerializeToString()
        assert encoder.request(spans) == expected
        assert encoder.request(spans) == expected  # and again, from what it remembered
        assert (b"304 mean" in expected) == include_text and b"never listed" not in expected


def test_spans_sharing_a_layer_encode_as_the_sdk_writes_each_of_them():
    """The shared layer is redacted and encoded once; every span still says what the SDK would."""
    varying = {"rag.client.key", "rag.budget.spent_ms"}
    shared = {k: v for k, v in ROOT_ATTRIBUTES.items() if k not in varying}
    spans = [
        WireSpan(1 << 100, i + 1, 0, "GET /answer/{qid}", SPAN_KIND_SERVER, 10**18, 10**18 + i, attrs)
        for i, attrs in enumerate(
            [
                Attributes(shared, {"rag.client.key": "aaaa", "rag.budget.spent_ms": 0.5}),
                Attributes(shared, {"rag.client.key": "bbbb", "rag.private": "never listed"}),
                Attributes({**shared, "rag.claims.kept": 4}, {"rag.client.key": "cccc"}),
            ]
        )
    ]
    assert dict(spans[0].attributes) == {**shared, "rag.client.key": "aaaa", "rag.budget.spent_ms": 0.5}
    for include_text in (False, True):
        encoder = WireEncoder(resource_attributes(), SCOPE, include_text)
        expected = encode_spans([sdk_span(s, include_text) for s in spans]).SerializeToString()
        assert encoder.request(spans) == expected
        assert encoder.request(spans) == expected
        assert (b"304 mean" in expected) == include_text and b"never listed" not in expected


class HeldProcess(ExportProcess):
    """An exporting process whose hand-over waits until ``gate`` opens."""

    gate = threading.Event()

    def send(self, batch: Sequence[tuple]) -> None:
        self.gate.wait(10)
        super().send(batch)


def test_a_full_queue_drops_the_trace_counts_it_and_the_request_is_unaffected(project, index, embedder):
    with collector() as c:
        settings = Settings(traces_endpoint=c.url, metrics_port=9, access_log=True)
        o = observed_app(project, index, embedder, settings)
        failures = o.observer.export_failures
        assert failures is not None and o.observer.tracer is not None
        o.observer.tracer.close()
        held = HeldProcess(ExportConfig(c.url, False, 2.0, b"salt"), failures)
        tracer = ProcessTracer(held, failures, max_queue=2, max_batch=1, delay_s=0.01)
        o.observer.tracer = tracer
        with TestClient(o.app) as client:
            statuses = [client.get("/answer/q11").status_code for _ in range(6)]
            held.gate.set()
            assert tracer.flush()
        tracer.close()
    assert statuses == [200] * 6
    dropped = failures.counts().get(QUEUE_FULL, 0)
    assert 1 <= dropped <= 4  # at most queue + one in the stuck export are kept
    assert o.metric("rag_contract_trace_export_failures_total", error_type=QUEUE_FULL) == dropped
    traced = [json.loads(line)["trace_id"] for line in o.access_lines()]
    assert traced.count(None) == dropped  # a dropped trace's id is not logged: no trace has it
    assert len([s for s in c.spans() if not s.parent_span_id]) == 6 - dropped


def test_requests_of_one_kind_share_one_layer_and_say_what_a_fresh_plan_says():
    o = Observation("grounded", "v1", "What is 304?", "fixture", MappingProxyType({"reused": 0.01}), 150.0, 0.01)
    one = RequestFacts("/answer/{qid}", "GET", 200, 0.001, 10**18, "10.0.0.1", o)
    two = dataclasses.replace(one, client="10.0.0.2", latency_s=0.002)
    failed = dataclasses.replace(one, status=503)
    layers = SharedLayers()
    plans = [span_plan(f, f.client, layers) for f in (one, two, failed)]
    shared = [p.attributes.shared for p in plans if isinstance(p.attributes, Attributes)]
    assert len(shared) == 3 and shared[0] is shared[1] and shared[2] is not shared[0]
    for f, plan in zip((one, two, failed), plans, strict=True):
        assert dict(plan.attributes) == dict(span_plan(f, f.client).attributes)
        assert plan.attributes["rag.client.key"] == f.client
