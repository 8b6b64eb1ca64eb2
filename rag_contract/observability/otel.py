"""Traces over OpenTelemetry: a ``SpanPlan`` becomes spans, and every span leaves through
``RedactingExporter``. Imported only when a traces endpoint is configured (``observer``), so
the SDK and its HTTP client cost nothing to a service that exports nothing.

The pipeline is fixed: OtelTracer -> BatchSpanProcessor -> RedactingExporter -> CountingExporter -> exporter.
``tracer_for`` builds it around whatever exporter it is given (the OTLP/HTTP one when serving),
so there is no way to attach an exporter that does not sit behind redaction.

Exports run on the processor's own thread, after the response has been sent: a collector that
is down or answers 500 costs the request nothing. Each failed export is counted under its
exception type (``ExportFailures``) and logged once per type with the running count.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping, Sequence

import requests
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http import Compression
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.id_generator import RandomIdGenerator
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import SpanContext, SpanKind, Status, StatusCode, TraceFlags

from rag_contract.observability.redaction import redact
from rag_contract.observability.tracing import SpanPlan

logger = logging.getLogger(__name__)
SERVICE_NAME = "rag-contract"
_SAMPLED = TraceFlags(TraceFlags.SAMPLED)


class ExportFailures:
    """Failed exports by exception type; ``on_failure`` (e.g. a metrics counter) hears each."""

    def __init__(self, on_failure: Callable[[str], None] | None = None):
        self._counts: dict[str, int] = {}
        self._lock = threading.Lock()
        self._on_failure = on_failure

    def add(self, error_type: str, detail: str) -> None:
        with self._lock:
            n = self._counts[error_type] = self._counts.get(error_type, 0) + 1
        # A collector that stays down would log once per batch: the first of each type, then
        # every hundredth, each with the count so far.
        if n == 1 or n % 100 == 0:
            logger.warning("trace export failed: %s (%d so far): %s", error_type, n, detail)
        if self._on_failure is not None:
            self._on_failure(error_type)

    def counts(self) -> dict[str, int]:
        with self._lock:
            return dict(self._counts)


class WitnessSession(requests.Session):
    """The OTLP exporter's HTTP session, remembering why its last request failed: the
    exporter itself reports only success or failure."""

    def __init__(self) -> None:
        super().__init__()
        self.last_error: Exception | None = None

    def request(self, method, url, *args, **kwargs):
        try:
            response = super().request(method, url, *args, **kwargs)
        except Exception as exc:
            self.last_error = exc
            raise
        if response.status_code >= 400:
            self.last_error = requests.HTTPError(f"HTTP {response.status_code} from the collector")
        return response


class CountingExporter(SpanExporter):
    """``inner``, with every failure (a raised exception or a FAILURE result) counted by type."""

    def __init__(self, inner: SpanExporter, failures: ExportFailures, witness: WitnessSession | None = None):
        self._inner = inner
        self._failures = failures
        self._witness = witness

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        if self._witness is not None:
            self._witness.last_error = None
        try:
            result = self._inner.export(spans)
        except Exception as exc:  # noqa: BLE001 - an exporter's bug must not reach the processor thread
            self._failures.add(type(exc).__name__, str(exc)[:200])
            return SpanExportResult.FAILURE
        if result is not SpanExportResult.SUCCESS:
            cause = self._witness.last_error if self._witness is not None else None
            self._failures.add(type(cause).__name__ if cause else "ExportFailed", str(cause or result)[:200])
        return result

    def shutdown(self) -> None:
        self._inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self._inner.force_flush(timeout_millis)


def redacted(span: ReadableSpan, include_text: bool) -> ReadableSpan:
    """``span`` with only the attributes ``redaction`` allows, no events, links' attributes
    or status description: the one place where a span's content is cut down for export."""
    status = Status(span.status.status_code)
    return ReadableSpan(
        name=span.name,
        context=span.context,
        parent=span.parent,
        resource=span.resource,
        attributes=redact(span.attributes, include_text),
        events=(),
        links=tuple(trace.Link(link.context) for link in span.links),
        kind=span.kind,
        status=status,
        start_time=span.start_time,
        end_time=span.end_time,
        instrumentation_scope=span.instrumentation_scope,
    )


class RedactingExporter(SpanExporter):
    """Every span handed to ``inner`` is ``redacted`` first."""

    def __init__(self, inner: SpanExporter, include_text: bool):
        self._inner = inner
        self.include_text = include_text

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        return self._inner.export([redacted(s, self.include_text) for s in spans])

    def shutdown(self) -> None:
        self._inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self._inner.force_flush(timeout_millis)


class OtelTracer:
    """Records ``SpanPlan`` values as finished spans; ``close`` exports what is queued and stops.

    A plan is already finished (its times come from the request's budget), so its spans are
    built as ``ReadableSpan`` values with fresh ids and handed to the processor, as the SDK's
    tracer would on ``end``; the tracer's per-span bookkeeping (context, sampling, attribute
    re-validation) would cost several times the request on the event loop for nothing.
    """

    def __init__(self, processor: SpanProcessor, resource: Resource):
        self._processor = processor
        self._resource = resource
        self._scope = InstrumentationScope("rag_contract")
        self._ids = RandomIdGenerator()

    def _context(self, trace_id: int) -> SpanContext:
        return SpanContext(trace_id, self._ids.generate_span_id(), is_remote=False, trace_flags=_SAMPLED)

    def record(self, plan: SpanPlan) -> str:
        """The plan as spans; returns the trace id (32 hex digits) for the access log."""
        trace_id = self._ids.generate_trace_id()
        root = self._context(trace_id)
        for stage in plan.stages:
            self._processor.on_end(
                ReadableSpan(
                    stage.name,
                    self._context(trace_id),
                    parent=root,
                    resource=self._resource,
                    attributes=stage.attributes,
                    start_time=stage.start_ns,
                    end_time=stage.end_ns,
                    instrumentation_scope=self._scope,
                )
            )
        self._processor.on_end(
            ReadableSpan(
                plan.name,
                root,
                resource=self._resource,
                attributes=plan.attributes,
                kind=SpanKind.SERVER,
                status=Status(StatusCode.ERROR if plan.failed else StatusCode.UNSET),
                start_time=plan.start_ns,
                end_time=plan.end_ns,
                instrumentation_scope=self._scope,
            )
        )
        return format(trace_id, "032x")

    def flush(self, timeout_s: float = 10.0) -> bool:
        return self._processor.force_flush(int(timeout_s * 1000))

    def close(self) -> None:
        self._processor.shutdown()


def tracer_for(
    exporter: SpanExporter,
    include_text: bool,
    failures: ExportFailures,
    witness: WitnessSession | None = None,
    resource: Mapping[str, str] | None = None,
) -> OtelTracer:
    """The fixed pipeline around ``exporter`` (see the module docstring)."""
    guarded = CountingExporter(exporter, failures, witness)
    processor = BatchSpanProcessor(RedactingExporter(guarded, include_text))
    return OtelTracer(processor, Resource.create({"service.name": SERVICE_NAME, **(resource or {})}))


def otlp_tracer(endpoint: str, include_text: bool, timeout_s: float, failures: ExportFailures) -> OtelTracer:
    """Traces to an OTLP/HTTP collector at ``endpoint`` (protobuf, uncompressed)."""
    witness = WitnessSession()
    exporter = OTLPSpanExporter(
        endpoint=endpoint, timeout=timeout_s, compression=Compression.NoCompression, session=witness
    )
    return tracer_for(exporter, include_text, failures, witness)
