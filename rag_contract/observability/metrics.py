"""Prometheus metrics: what the service answered, how fast, and what it refused. Imported only
when a metrics port is configured (``observer``).

Labels are bounded: routes are templates (``/answer/{qid}``, never an id), states are the
answer states or error names, stages the budget's. One worker keeps its values in memory and
serves its own registry. With several workers every process writes its values under
``PROMETHEUS_MULTIPROC_DIR`` and ``serve_metrics`` (run by the process that owns the workers)
adds them up (prometheus_client's multiprocess mode); that directory must be set before this
module is imported, which ``serve`` does. Multiprocess values are files written on every
increment, several times the cost of an in-memory one: a single worker does not pay it.

The served index version is a gauge set to 1 under its version label (an Info metric has no
multiprocess form); it is 0 under a version the process no longer serves.
"""

from __future__ import annotations

import socket
import sys
import threading
from socketserver import ThreadingMixIn
from typing import Any
from wsgiref.simple_server import ServerHandler, WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, make_wsgi_app, multiprocess

from rag_contract.observability.request import ABANDONED, NO_STATE, RequestFacts

# Request latency: the deadline is 150 ms, so resolution sits below and around it.
LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.5, 1.0, 2.5)
STAGE_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.3)


class Metrics:
    """The service's metrics, registered in ``registry`` (None: not registered anywhere, the
    multiprocess collector reads them from their files)."""

    def __init__(self, registry: CollectorRegistry | None):
        r = registry
        self.requests = Counter(
            "rag_contract_requests",
            "Requests answered, by route, status and state",
            ["route", "status", "state"],
            registry=r,
        )
        self.latency = Histogram(
            "rag_contract_request_seconds",
            "Time to answer a request, by route",
            ["route"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.stages = Histogram(
            "rag_contract_stage_seconds",
            "Time per budget stage of an answer",
            ["stage"],
            buckets=STAGE_BUCKETS,
            registry=r,
        )
        self.refused = Counter(
            "rag_contract_refused", "Requests refused before any handler ran, by reason", ["reason"], registry=r
        )
        self.abandoned = Counter(
            "rag_contract_abandoned", "Requests that spent their deadline before a verdict", ["route"], registry=r
        )
        self.export_failures = Counter(
            "rag_contract_trace_export_failures", "Failed trace exports, by exception type", ["error_type"], registry=r
        )
        self.index = Gauge(
            "rag_contract_index_info",
            "1 under the index version served",
            ["index_version"],
            multiprocess_mode="max",
            registry=r,
        )
        self._version: str | None = None
        self._lock = threading.Lock()
        # ``labels()`` validates and looks up its arguments on every call, several times the cost
        # of the increment; the label sets are few (bounded, see above), so each request's kind
        # (route, status, state) is resolved once to the children it updates.
        self._kinds: dict[tuple[str, int, str, str | None], tuple[Any, Any, Any, Any]] = {}
        self._stages: dict[str, Any] = {}

    def _kind(self, route: str, status: int, state: str, refused: str | None) -> tuple[Any, Any, Any, Any]:
        """(requests, latency, refused or None, abandoned or None) children of one kind of request."""
        return (
            self.requests.labels(route, str(status), state),
            self.latency.labels(route),
            self.refused.labels(refused) if refused else None,
            self.abandoned.labels(route) if state == ABANDONED else None,
        )

    def record(self, facts: RequestFacts) -> None:
        o = facts.observation
        state = o.state if o is not None else NO_STATE
        key = (facts.route, facts.status, state, facts.refused)
        kind = self._kinds.get(key)
        if kind is None:
            kind = self._kinds[key] = self._kind(*key)
        requests, latency, refused, abandoned = kind
        requests.inc()
        latency.observe(facts.latency_s)
        if refused is not None:
            refused.inc()
        if o is not None:
            for stage, ms in o.stages_ms.items():
                child = self._stages.get(stage)
                if child is None:
                    child = self._stages[stage] = self.stages.labels(stage)
                child.observe(ms / 1000.0)
            if abandoned is not None:
                abandoned.inc()

    def served(self, version: str | None) -> None:
        """The index version this process serves now (None: none)."""
        if version == self._version:
            return
        with self._lock:
            if self._version is not None:
                self.index.labels(self._version).set(0)
            if version is not None:
                self.index.labels(version).set(1)
            self._version = version

    def export_failed(self, error_type: str) -> None:
        self.export_failures.labels(error_type).inc()


def own_registry() -> CollectorRegistry:
    """A registry for one process's metrics, kept in memory."""
    return CollectorRegistry()


# The metrics port is for a scraper, not the public: a connection gets this long to send its
# request and to read each part of the reply, and only so many are served at once.
METRICS_TIMEOUT_S = 5.0
METRICS_MAX_CONNECTIONS = 16


class _NamelessServerHandler(ServerHandler):
    server_software = ""  # falsy: wsgiref then writes no Server field


class _TimedHandler(WSGIRequestHandler):
    """wsgiref's handler with a timeout and no ``Server`` field: ``WSGIServer/0.2 CPython/3.11.7``
    told anyone who reached the port which interpreter, to the patch release, to aim at
    (RFC 9110 section 10.2.4: a server MAY omit it, and detail helps attackers)."""

    timeout = METRICS_TIMEOUT_S  # set on the socket: every read and write of the connection

    def handle(self) -> None:
        # WSGIRequestHandler.handle, with the nameless ServerHandler: the class is not a parameter.
        self.raw_requestline = self.rfile.readline(65537)
        if len(self.raw_requestline) > 65536:
            self.requestline, self.request_version, self.command = "", "", ""
            self.send_error(414)
            return
        if not self.parse_request():
            return
        # wfile is a socket writer (typeshed: BufferedIOBase), what wsgiref's own handle passes.
        handler = _NamelessServerHandler(
            self.rfile,
            self.wfile,  # type: ignore[arg-type]
            self.get_stderr(),
            self.get_environ(),
            multithread=False,
        )
        handler.request_handler = self  # type: ignore[attr-defined]  # wsgiref's back-pointer for its log line
        handler.run(self.server.get_app())  # type: ignore[attr-defined]

    def send_header(self, keyword: str, value: str) -> None:
        if keyword.lower() != "server":  # the error replies http.server writes itself
            super().send_header(keyword, value)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        """Nothing per request (a scrape every few seconds)."""


class _BoundedServer(ThreadingMixIn, WSGIServer):
    """A thread per connection, at most ``METRICS_MAX_CONNECTIONS`` at once (more are closed at
    once), each ended by ``METRICS_TIMEOUT_S`` of silence; a client's timeout or reset is its own
    end, not an error to print."""

    daemon_threads = True

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._slots = threading.BoundedSemaphore(METRICS_MAX_CONNECTIONS)

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self._slots.acquire(blocking=False):
            self.shutdown_request(request)
            return
        super().process_request(request, client_address)

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._slots.release()

    def handle_error(self, request: Any, client_address: Any) -> None:
        if not isinstance(sys.exc_info()[1], OSError):  # TimeoutError, ConnectionError
            super().handle_error(request, client_address)


def serve_metrics(
    host: str, port: int, registry: CollectorRegistry | None = None
) -> tuple[WSGIServer, threading.Thread]:
    """Serve ``registry`` (one process's own), or with None every process's metrics (the
    multiprocess directory), on ``host:port``, in a thread: prometheus_client's exposition,
    with a timeout on every connection and a bound on how many are served at once
    (``_BoundedServer``)."""
    if registry is None:
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)
    server_class = type(
        "_Server", (_BoundedServer,), {"address_family": socket.AF_INET6 if ":" in host else socket.AF_INET}
    )
    server: WSGIServer = make_server(host, port, make_wsgi_app(registry), server_class, handler_class=_TimedHandler)
    thread = threading.Thread(target=server.serve_forever, name="metrics", daemon=True)
    thread.start()
    return server, thread
