"""Traces over OpenTelemetry's OTLP/HTTP exporter: each request is queued as a record, and a
background thread turns records into spans that leave through ``otlp_wire``, where they are
redacted. Imported only when a traces endpoint is configured (``observer``), so the SDK and its
HTTP client cost nothing to a service that exports nothing.

The pipeline is fixed (``otlp_tracer``): TraceQueue -> spans (``tracing.span_plan``) ->
``otlp_wire`` (redaction, encoding) -> CountingSender -> OTLP/HTTP exporter. Encoded bytes are
the only thing the sender accepts, and ``otlp_wire`` the only thing that makes them, so there
is no way to export a span that has not been redacted.

Exports run on the queue's thread, after the response has been sent: a collector that is down
or answers 500 costs the request nothing. Each failed export, and each trace dropped because
the queue was full (``QueueFull``), is counted under its type (``ExportFailures``) and logged
once per type with the running count.
"""

from __future__ import annotations

import logging
import random
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import requests
from opentelemetry.exporter.otlp.proto.http import Compression
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource

from rag_contract.observability.otlp_wire import SPAN_KIND_INTERNAL, SPAN_KIND_SERVER, WireEncoder, WireSpan
from rag_contract.observability.redaction import client_key
from rag_contract.observability.request import RequestFacts
from rag_contract.observability.trace_queue import TraceQueue, TraceRecord, nonzero_id
from rag_contract.observability.tracing import SharedLayers, span_plan

logger = logging.getLogger(__name__)
SERVICE_NAME = "rag-contract"
SCOPE = "rag_contract"  # the instrumentation scope every span is reported under


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


class OtlpBytesExporter(OTLPSpanExporter):
    """The SDK's OTLP/HTTP exporter (its session, headers, timeout, compression and retries),
    sending a request already encoded by ``otlp_wire``.

    ``_client`` is the exporter's own HTTP client, which its ``export`` sends through after
    encoding; the version is pinned (requirements.lock), and the wire tests fail if it moves.
    """

    def export_encoded(self, payload: bytes) -> bool:
        """Send ``payload``; True when the collector accepted it."""
        if self._shutdown:
            return False
        return bool(self._client.export(payload).success)


class CountingSender:
    """Sends encoded batches through ``exporter``; every failure (a raised exception or a
    refused request) is counted by type in ``failures``, never raised."""

    def __init__(self, exporter: OtlpBytesExporter, failures: ExportFailures, witness: WitnessSession | None = None):
        self._exporter = exporter
        self._failures = failures
        self._witness = witness

    def __call__(self, payload: bytes) -> bool:
        if self._witness is not None:
            self._witness.last_error = None
        try:
            ok = self._exporter.export_encoded(payload)
        except Exception as exc:  # noqa: BLE001 - an exporter's bug must not reach the exporting thread
            self._failures.add(type(exc).__name__, str(exc)[:200])
            return False
        if not ok:
            cause = self._witness.last_error if self._witness is not None else None
            self._failures.add(type(cause).__name__ if cause else "ExportFailed", str(cause or "export failed")[:200])
        return ok

    def close(self) -> None:
        self._exporter.shutdown()


def wire_spans(
    record: TraceRecord, salt: bytes, span_id: Callable[[], int], layers: SharedLayers | None = None
) -> list[WireSpan]:
    """The spans of one request: a child per stage, then the root (``tracing.span_plan``)."""
    facts = record.facts
    plan = span_plan(facts, client_key(facts.client, salt), layers)
    root = span_id()
    spans = [
        WireSpan(record.trace_id, span_id(), root, s.name, SPAN_KIND_INTERNAL, s.start_ns, s.end_ns, s.attributes)
        for s in plan.stages
    ]
    spans.append(
        WireSpan(
            record.trace_id,
            root,
            0,
            plan.name,
            SPAN_KIND_SERVER,
            plan.start_ns,
            plan.end_ns,
            plan.attributes,
            plan.failed,
        )  # fmt: skip
    )
    return spans


def new_span_id(bits: Callable[[int], int] = random.getrandbits) -> int:
    """A random non-zero 64-bit span id."""
    return nonzero_id(64, bits)


class OtelTracer:
    """Records requests for tracing; ``close`` exports what is queued and stops.

    On the request path only ``TraceQueue.record`` runs (an id and an append); on the queue's
    thread each batch becomes spans, is redacted and encoded (``otlp_wire``) and sent through
    ``send`` (``CountingSender``). That thread shares the interpreter with the event loop, so
    what it costs is kept small too: no SDK span objects, attributes that repeat encoded once.
    """

    def __init__(
        self,
        send: Callable[[bytes], bool],
        encoder: WireEncoder,
        salt: bytes,
        failures: ExportFailures,
        *,
        close_sender: Callable[[], None] | None = None,
        **queue: Any,
    ):
        self._send = send
        self._encoder = encoder
        self._salt = salt
        self._close_sender = close_sender
        self._layers = SharedLayers()  # used on the exporting thread only (exports never overlap)
        self.queue = TraceQueue(self._export, failures.add, **queue)  # max_queue, max_batch, delay_s

    def _export(self, batch: Sequence[TraceRecord]) -> None:
        spans = [s for r in batch for s in wire_spans(r, self._salt, new_span_id, self._layers)]
        self._send(self._encoder.request(spans))

    def record(self, facts: RequestFacts) -> str | None:
        """Queue ``facts``' trace; its trace id (32 hex digits) for the access log, None if dropped."""
        return self.queue.record(facts)

    def flush(self, timeout_s: float = 10.0) -> bool:
        return self.queue.flush(timeout_s)

    def close(self) -> None:
        self.queue.close()
        if self._close_sender is not None:
            self._close_sender()


def resource_attributes(extra: Mapping[str, str] | None = None) -> Mapping[str, Any]:
    """The SDK's resource for this service (its telemetry.sdk.* attributes and the service name)."""
    return Resource.create({"service.name": SERVICE_NAME, **(extra or {})}).attributes


def otlp_tracer(
    endpoint: str, include_text: bool, timeout_s: float, failures: ExportFailures, salt: bytes, **queue: Any
) -> OtelTracer:
    """Traces to an OTLP/HTTP collector at ``endpoint`` (protobuf, uncompressed); the pipeline is
    fixed: TraceQueue -> spans -> otlp_wire (redaction) -> CountingSender -> OtlpBytesExporter."""
    witness = WitnessSession()
    exporter = OtlpBytesExporter(
        endpoint=endpoint, timeout=timeout_s, compression=Compression.NoCompression, session=witness
    )
    encoder = WireEncoder(resource_attributes(), SCOPE, include_text)
    sender = CountingSender(exporter, failures, witness)
    return OtelTracer(sender, encoder, salt, failures, close_sender=sender.close, **queue)
