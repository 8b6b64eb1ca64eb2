"""Traces over OpenTelemetry's OTLP/HTTP exporter, as the exporting process runs them
(``export_child``): batches of records become spans that leave through ``otlp_wire``, where they
are redacted. Imported only by that process, so the SDK and its HTTP client cost nothing to the
serving process, nor to a service that exports nothing.

The pipeline is fixed (``otlp_batches``): records -> spans (``tracing.span_plan``) -> ``otlp_wire``
(redaction, encoding) -> CountingSender -> OTLP/HTTP exporter. Encoded bytes are the only thing
the sender accepts, and ``otlp_wire`` the only thing that makes them, so there is no way to export
a span that has not been redacted.

Each failed export is reported by exception type to ``on_failure`` (the exporting process sends it
to the serving process, which counts and logs it: ``export_process.ExportFailures``).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import requests
from opentelemetry.exporter.otlp.proto.http import Compression
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource

from rag_contract.observability.otlp_wire import SPAN_KIND_INTERNAL, SPAN_KIND_SERVER, WireEncoder, WireSpan
from rag_contract.observability.redaction import client_key
from rag_contract.observability.trace_queue import TraceRecord, nonzero_id
from rag_contract.observability.tracing import SharedLayers, span_plan

SERVICE_NAME = "rag-contract"
SCOPE = "rag_contract"  # the instrumentation scope every span is reported under


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
    refused request) goes to ``on_failure`` as (exception type, detail), never raised."""

    def __init__(
        self,
        exporter: OtlpBytesExporter,
        on_failure: Callable[[str, str], None],
        witness: WitnessSession | None = None,
    ):
        self._exporter = exporter
        self._on_failure = on_failure
        self._witness = witness

    def __call__(self, payload: bytes) -> bool:
        if self._witness is not None:
            self._witness.last_error = None
        try:
            ok = self._exporter.export_encoded(payload)
        except Exception as exc:  # noqa: BLE001 - an exporter's bug must not reach the exporting thread
            self._on_failure(type(exc).__name__, str(exc)[:200])
            return False
        if not ok:
            cause = self._witness.last_error if self._witness is not None else None
            self._on_failure(type(cause).__name__ if cause else "ExportFailed", str(cause or "export failed")[:200])
        return ok

    def close(self) -> None:
        self._exporter.shutdown()


def wire_spans(
    record: TraceRecord, salt: bytes, span_id: Callable[[], int], layers: SharedLayers | None = None
) -> list[WireSpan]:
    """The spans of one request: a child per stage, then the root (``tracing.span_plan``)."""
    facts = record.facts
    plan = span_plan(facts, client_key(facts.client, salt), layers, record.question_sha256)
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


class BatchExport:
    """One batch of records at a time: spans, redacted and encoded (``otlp_wire``), sent through
    ``send`` (``CountingSender``). Used by one thread (the exporting process's), so attributes
    that repeat are built and encoded once: no SDK span objects."""

    def __init__(self, send: Callable[[bytes], bool], encoder: WireEncoder, salt: bytes, close: Callable[[], None]):
        self._send = send
        self._encoder = encoder
        self._salt = salt
        self._close = close
        self._layers = SharedLayers()

    def __call__(self, batch: Sequence[TraceRecord]) -> bool:
        """Export ``batch``; True when the collector accepted it (a failure is reported, not raised)."""
        spans = [s for r in batch for s in wire_spans(r, self._salt, new_span_id, self._layers)]
        return self._send(self._encoder.request(spans))

    def close(self) -> None:
        self._close()


def resource_attributes(extra: Mapping[str, str] | None = None) -> Mapping[str, Any]:
    """The SDK's resource for this service (its telemetry.sdk.* attributes and the service name)."""
    return Resource.create({"service.name": SERVICE_NAME, **(extra or {})}).attributes


def otlp_batches(
    endpoint: str, include_text: bool, timeout_s: float, on_failure: Callable[[str, str], None], salt: bytes
) -> BatchExport:
    """Batches to an OTLP/HTTP collector at ``endpoint`` (protobuf, uncompressed); the pipeline is
    fixed: records -> spans -> otlp_wire (redaction) -> CountingSender -> OtlpBytesExporter."""
    witness = WitnessSession()
    exporter = OtlpBytesExporter(
        endpoint=endpoint, timeout=timeout_s, compression=Compression.NoCompression, session=witness
    )
    encoder = WireEncoder(resource_attributes(), SCOPE, include_text)
    sender = CountingSender(exporter, on_failure, witness)
    return BatchExport(sender, encoder, salt, sender.close)
