"""Traces over OpenTelemetry: a ``SpanPlan`` becomes spans, and every span leaves through
``RedactingExporter``. Imported only when a traces endpoint is configured (``observer``), so
the SDK and its HTTP client cost nothing to a service that exports nothing.

The pipeline is fixed: BatchSpanProcessor -> RedactingExporter -> CountingExporter -> exporter.
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
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.trace import SpanKind, Status, StatusCode

from rag_contract.observability.redaction import redact
from rag_contract.observability.tracing import SpanPlan

logger = logging.getLogger(__name__)
SERVICE_NAME = "rag-contract"


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
    """Records ``SpanPlan`` values as spans of one provider; ``close`` flushes and stops it."""

    def __init__(self, provider: TracerProvider):
        self._provider = provider
        self._tracer = provider.get_tracer("rag_contract")

    def record(self, plan: SpanPlan) -> str:
        """The plan as spans; returns the trace id (32 hex digits) for the access log."""
        root = self._tracer.start_span(
            plan.name, kind=SpanKind.SERVER, attributes=plan.attributes, start_time=plan.start_ns
        )
        context = trace.set_span_in_context(root)
        for stage in plan.stages:
            child = self._tracer.start_span(
                stage.name, context=context, attributes=stage.attributes, start_time=stage.start_ns
            )
            child.end(end_time=stage.end_ns)
        if plan.failed:
            root.set_status(Status(StatusCode.ERROR))
        root.end(end_time=plan.end_ns)
        return format(root.get_span_context().trace_id, "032x")

    def flush(self, timeout_s: float = 10.0) -> bool:
        return self._provider.force_flush(int(timeout_s * 1000))

    def close(self) -> None:
        self._provider.shutdown()


def tracer_for(
    exporter: SpanExporter,
    include_text: bool,
    failures: ExportFailures,
    witness: WitnessSession | None = None,
    resource: Mapping[str, str] | None = None,
) -> OtelTracer:
    """The fixed pipeline around ``exporter`` (see the module docstring)."""
    provider = TracerProvider(resource=Resource.create({"service.name": SERVICE_NAME, **(resource or {})}))
    guarded = CountingExporter(exporter, failures, witness)
    provider.add_span_processor(BatchSpanProcessor(RedactingExporter(guarded, include_text)))
    return OtelTracer(provider)


def otlp_tracer(endpoint: str, include_text: bool, timeout_s: float, failures: ExportFailures) -> OtelTracer:
    """Traces to an OTLP/HTTP collector at ``endpoint`` (protobuf, uncompressed)."""
    witness = WitnessSession()
    exporter = OTLPSpanExporter(
        endpoint=endpoint, timeout=timeout_s, compression=Compression.NoCompression, session=witness
    )
    return tracer_for(exporter, include_text, failures, witness)
