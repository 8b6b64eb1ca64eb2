"""A trace collector on loopback for the tests: it records every OTLP/HTTP body it is sent and
answers with the status it is told to, and ``spans`` decodes those bodies with the official
OpenTelemetry proto definitions (opentelemetry-proto)."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span


@dataclass
class Collector:
    url: str
    status: int = 200
    bodies: list[bytes] = field(default_factory=list)

    @property
    def wire(self) -> bytes:
        return b"".join(self.bodies)

    def requests(self) -> list[ExportTraceServiceRequest]:
        return [ExportTraceServiceRequest.FromString(b) for b in self.bodies]

    def spans(self) -> list[Span]:
        return [s for r in self.requests() for rs in r.resource_spans for ss in rs.scope_spans for s in ss.spans]


def value(v: AnyValue) -> object:
    kind = v.WhichOneof("value")
    if kind == "array_value":
        return [value(x) for x in v.array_value.values]
    return getattr(v, kind) if kind else None


def attributes(span: Span) -> dict[str, object]:
    return {kv.key: value(kv.value) for kv in span.attributes}


@contextlib.contextmanager
def collector(status: int = 200) -> Iterator[Collector]:
    """A collector at http://127.0.0.1:<free port>/v1/traces until the block ends."""
    state = Collector(url="", status=status)

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - the http.server hook name
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            state.bodies.append(body)
            self.send_response(state.status)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    state.url = f"http://127.0.0.1:{server.server_address[1]}/v1/traces"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()
