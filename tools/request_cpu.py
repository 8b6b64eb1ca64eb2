"""CPU per request, in process: ``GET /answer/q11`` without a socket, a client or another process.

``python -m tools.request_cpu [--requests N] [--rounds R] [--profile CASE]`` builds the apps that
``make load`` and ``tools.observability_load`` serve and sends each of them N requests, one after
another on one event loop, every request its own client of the rate limiter (a fresh
``X-Forwarded-For``, as the wrk script sends). Cases:

- ``bare``: the load run's constant Starlette route (``tools.loadtest.bare_app``);
- ``full``: ``rag-contract serve``'s app from the load run's project copy, buckets in memory,
  nothing observed;
- ``revalidate``: ``full`` with the ``If-None-Match`` of a previous response (a 304);
- ``observed``: ``full`` with traces exported over OTLP/HTTP to a sink on loopback (in a process
  of its own) and metrics (one worker: in memory), as ``tools.observability_load`` turns them on.

Each case is measured at two layers: ``asgi``, the app's ASGI callable alone, and ``http``, the
request as bytes through uvicorn's HTTP/1.1 protocol (the one ``serve`` runs) over a transport in
memory, with uvicorn's access line formatted as a server with default logging does. The ``http``
ratios are the ones to set beside the wrk runs: what they leave out (the kernel's loopback, wrk
itself) costs every case alike, per response.

Printed per case and layer: the median over R rounds (interleaved) of the CPU microseconds a
request costs, on the event loop's thread plus, with traces on, the thread that hands batches of
records to the exporting process (it shares the interpreter with the loop); the exporting process
(spans, encoding, the send) and the sink run beside it and are not counted, as under ``serve``
they take another core's time, not the loop's. Thread CPU time, not wall time: other work on a
shared machine hardly enters it, so two runs agree within a few percent where wrk runs on a busy
machine do not.

``--profile CASE`` prints cProfile's top functions for one case at the ``http`` layer instead (the
loop's thread only).
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import io
import json
import logging
import os
import pstats
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import uvicorn
from uvicorn.logging import AccessFormatter
from uvicorn.server import ServerState

from rag_contract.observability.metrics import own_registry
from rag_contract.observability.settings import Settings
from rag_contract.project import Paths, find_root
from rag_contract.web.ratelimit import MemoryStore
from rag_contract.web.serving import build_served_app
from rag_contract.web.slow_clients import HeaderDeadlineH11Protocol
from tools import loadtest, observability_load
from tools.machine import load_average, machine

CASES = ("bare", "full", "revalidate", "observed")
LAYERS = ("asgi", "http")
DEFAULT_REQUESTS = 3000
DEFAULT_ROUNDS = 5
WARMUP_REQUESTS = 500
SETTLE_S = 0.3
PATH = f"/answer/{loadtest.DEFAULT_QUESTION_ID}"
TRACE_THREAD = "rag-contract-traces"
# uvicorn's default access format (uvicorn.config.LOGGING_CONFIG), without colours.
ACCESS_FORMAT = '%(levelprefix)s %(client_addr)s - "%(request_line)s" %(status_code)s'


@dataclass(frozen=True)
class Spent:
    """CPU microseconds per request: on the event loop's thread, and on the trace thread."""

    loop_us: float
    traces_us: float = 0.0

    @property
    def total_us(self) -> float:
        return self.loop_us + self.traces_us


def xff(n: int) -> bytes:
    """The n-th request's own client, as the wrk script writes it (10.a.b.c)."""
    return f"10.{(n >> 16) & 255}.{(n >> 8) & 255}.{n & 255}".encode()


def scope_for(n: int, extra: Sequence[tuple[bytes, bytes]]) -> dict[str, Any]:
    """The n-th request's HTTP/1.1 GET scope, as uvicorn builds it."""
    return {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.4"},
        "http_version": "1.1",
        "server": ("127.0.0.1", 8000),
        "client": ("127.0.0.1", 50000),
        "scheme": "http",
        "method": "GET",
        "root_path": "",
        "path": PATH,
        "raw_path": PATH.encode(),
        "query_string": b"",
        "headers": [(b"host", b"127.0.0.1:8000"), (b"x-forwarded-for", xff(n)), *extra],
        "state": {},
    }


def request_bytes(n: int, extra: Sequence[tuple[bytes, bytes]]) -> bytes:
    fields = b"".join(k + b": " + v + b"\r\n" for k, v in ((b"x-forwarded-for", xff(n)), *extra))
    return b"GET " + PATH.encode() + b" HTTP/1.1\r\nHost: 127.0.0.1:8000\r\n" + fields + b"\r\n"


class MemoryTransport(asyncio.Transport):
    """A connection's transport that keeps what is written (the last response only)."""

    def __init__(self) -> None:
        super().__init__()
        self.written: list[bytes] = []
        self.closing = False

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return {"peername": ("127.0.0.1", 50000), "sockname": ("127.0.0.1", 8000)}.get(name, default)

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self.written.append(bytes(data))

    def is_closing(self) -> bool:
        return self.closing

    def close(self) -> None:
        self.closing = True

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass


def quiet_access_log() -> None:
    """uvicorn's access logger as default logging sets it up, writing to /dev/null."""
    log = logging.getLogger("uvicorn.access")
    log.handlers.clear()
    handler = logging.StreamHandler(open(os.devnull, "w", encoding="utf-8"))  # noqa: SIM115 - lives as long as the logger
    handler.setFormatter(AccessFormatter(ACCESS_FORMAT, use_colors=False))
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    log.propagate = False


class Connection:
    """One keep-alive connection through ``serve``'s HTTP/1.1 protocol, in memory."""

    def __init__(self, app: Any, loop: asyncio.AbstractEventLoop):
        self.config = uvicorn.Config(app, proxy_headers=False, server_header=False, log_config=None)
        self.config.load()
        self.loop = loop
        self._open()

    def _open(self) -> None:
        state = ServerState()
        self.protocol = HeaderDeadlineH11Protocol(config=self.config, server_state=state, app_state={}, _loop=self.loop)
        self.transport = MemoryTransport()
        self.protocol.connection_made(self.transport)

    async def get(self, data: bytes) -> bytes:
        """Send one request, wait until its response is complete; the response's bytes. A
        connection the server closed while idle (keep-alive timeout) is opened again first."""
        if self.transport.closing:
            self.protocol.connection_lost(None)
            self._open()
        self.transport.written.clear()
        self.protocol.data_received(data)
        while self.protocol.cycle is not None and not self.protocol.cycle.response_complete:
            await asyncio.sleep(0)
        await asyncio.sleep(0)  # the protocol's own bookkeeping after the response
        return b"".join(self.transport.written)


def status_of(response: bytes) -> int:
    return int(response.split(b" ", 2)[1])


async def drive_asgi(app: Any, extra: Sequence[tuple[bytes, bytes]], count: int, first: int) -> list[int]:
    statuses: list[int] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            statuses.append(message["status"])

    for n in range(first, first + count):
        await app(scope_for(n, extra), receive, send)
    return statuses


async def drive_http(conn: Connection, extra: Sequence[tuple[bytes, bytes]], count: int, first: int) -> list[int]:
    return [status_of(await conn.get(request_bytes(n, extra))) for n in range(first, first + count)]


def thread_cpu_s(name: str) -> float:
    """CPU seconds of the live thread called ``name`` (0 when there is none)."""
    for t in threading.enumerate():
        if t.name == name and t.ident is not None:
            return time.clock_gettime(time.pthread_getcpuclockid(t.ident))
    return 0.0


@dataclass
class Case:
    """One app, the fields its request adds, the status expected, and what finishes the work
    its requests queued (the traces still waiting for export)."""

    app: Any
    extra: list[tuple[bytes, bytes]]
    expect: int
    flush: Callable[[], object]
    connection: Connection
    traced: bool = False  # only a traced case is charged the trace thread's time


@contextmanager
def sink_process() -> Iterator[str]:
    """``tools.observability_load``'s trace sink, in a process of its own (as in the wrk runs: its
    threads would otherwise share this interpreter with the app); yields its URL."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "tools.request_cpu", "--sink"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=loadtest.server_env(),
    )
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().strip()
        if not url.startswith("http://"):
            raise RuntimeError("the trace sink did not start")
        yield url
    finally:
        if proc.stdin is not None:
            proc.stdin.close()  # the sink stops when its stdin closes
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def serve_sink() -> None:
    """Run the trace sink until stdin closes, its URL printed first."""
    with observability_load.trace_sink() as (url, _):
        print(url, flush=True)
        sys.stdin.read()


@contextmanager
def cases(root: Path, loop: asyncio.AbstractEventLoop) -> Iterator[dict[str, Case]]:
    """Every case's app, built as the load runs build theirs; torn down on exit."""
    quiet_access_log()
    with ExitStack() as stack:
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="ragc-cpu-")))
        tree = loadtest.load_tree(root, tmp / "project")
        url = stack.enter_context(sink_process())
        full = build_served_app(tree, rate_store=MemoryStore(), rate_clock=time.monotonic)
        settings = Settings(traces_endpoint=url, metrics_port=0)
        observed = build_served_app(  # one worker: metrics in its own registry, as ``serve`` keeps them
            tree,
            rate_store=MemoryStore(),
            rate_clock=time.monotonic,
            observability=settings,
            metrics_registry=own_registry(),
        )
        observer = observed.state.observer
        stack.callback(observer.close)
        bare = loadtest.bare_app()
        probe = Connection(full, loop)
        first = loop.run_until_complete(probe.get(request_bytes(1 << 24, [])))
        tag = next(line.split(b":", 1)[1].strip() for line in first.split(b"\r\n") if line.lower().startswith(b"etag:"))
        yield {
            "bare": Case(bare, [], 200, lambda: None, Connection(bare, loop)),
            "full": Case(full, [], 200, lambda: None, Connection(full, loop)),
            "revalidate": Case(full, [(b"if-none-match", tag)], 304, lambda: None, Connection(full, loop)),
            "observed": Case(observed, [], 200, observer.tracer.flush, Connection(observed, loop), traced=True),
        }


def measure(case: Case, layer: str, loop: asyncio.AbstractEventLoop, count: int, first: int) -> Spent:
    """CPU per request of ``count`` requests, the traces they queued exported."""
    loop_before, traces_before = time.thread_time(), thread_cpu_s(TRACE_THREAD)
    if layer == "asgi":
        statuses = loop.run_until_complete(drive_asgi(case.app, case.extra, count, first))
    else:
        statuses = loop.run_until_complete(drive_http(case.connection, case.extra, count, first))
    case.flush()
    loop_s, traces_s = time.thread_time() - loop_before, thread_cpu_s(TRACE_THREAD) - traces_before
    if set(statuses) != {case.expect}:
        raise RuntimeError(f"expected only {case.expect}, got {sorted(set(statuses))}")
    if case.traced:
        time.sleep(SETTLE_S)  # the exporter's tail runs now, not during the next case
    # An untraced case queues nothing: trace-thread time during it is a traced round's tail.
    return Spent(loop_s / count * 1e6, traces_s / count * 1e6 if case.traced else 0.0)


def run(root: Path, count: int, rounds: int) -> dict[tuple[str, str], list[Spent]]:
    """(case, layer) -> one ``Spent`` per round; rounds interleave every case and layer, so a
    busy moment on the machine falls on all of them alike."""
    loop = asyncio.new_event_loop()
    try:
        with cases(root, loop) as built:
            keys = [(name, layer) for layer in LAYERS for name in CASES]
            for name, layer in keys:  # warm what is kept: the answer, label children, the wire memo
                measure(built[name], layer, loop, WARMUP_REQUESTS, 1 << 25)
            results: dict[tuple[str, str], list[Spent]] = {k: [] for k in keys}
            for r in range(rounds):
                for name, layer in keys:
                    results[name, layer].append(measure(built[name], layer, loop, count, (r + 1) << 20))
            return results
    finally:
        loop.close()


def profile(root: Path, name: str, count: int, top: int = 45) -> str:
    loop = asyncio.new_event_loop()
    try:
        with cases(root, loop) as built:
            case = built[name]
            measure(case, "http", loop, WARMUP_REQUESTS, 1 << 25)
            prof = cProfile.Profile()
            prof.enable()
            loop.run_until_complete(drive_http(case.connection, case.extra, count, 0))
            prof.disable()
            case.flush()
    finally:
        loop.close()
    out = io.StringIO()
    pstats.Stats(prof, stream=out).sort_stats("tottime").print_stats(top)
    return out.getvalue()


GOALS = {  # at the http layer, where a request costs what it costs under ``serve``
    "full_vs_bare": 0.7,  # issue: one worker's /answer at >= 0.7x a bare route
    "revalidate_vs_bare": 0.9,  # a 304 revalidation at >= 0.9x
    "observed_vs_full": 0.9,  # traces and metrics on: within 10% of off
}


def report(results: dict[tuple[str, str], list[Spent]], count: int, rounds: int) -> dict[str, Any]:
    """What ``--write`` commits (``eval/results/request_cpu.json``): every case's median, range and
    trace share per layer, the ratios ("bare / case": throughput at equal CPU), and the goals."""
    rows = []
    medians: dict[tuple[str, str], float] = {}
    for layer in LAYERS:
        for name in CASES:
            spent = results[name, layer]
            medians[name, layer] = round(statistics.median(s.total_us for s in spent), 1)  # as the row shows it
            rows.append(
                {
                    "layer": layer,
                    "case": name,
                    "us": round(medians[name, layer], 1),
                    "traces_us": round(statistics.median(s.traces_us for s in spent), 1),
                    "min_us": round(min(s.total_us for s in spent), 1),
                    "max_us": round(max(s.total_us for s in spent), 1),
                }
            )
    ratios = {
        layer: {
            "full_vs_bare": round(medians["bare", layer] / medians["full", layer], 3),
            "revalidate_vs_bare": round(medians["bare", layer] / medians["revalidate", layer], 3),
            "observed_vs_full": round(medians["full", layer] / medians["observed", layer], 3),
        }
        for layer in LAYERS
    }
    return {
        "meta": {
            **machine(),
            "path": PATH,
            "requests": count,
            "rounds": rounds,
            "load_average_1m": load_average(),
        },
        "rows": rows,
        "ratios": ratios,
        "goals": {
            k: {"target": target, "value": ratios["http"][k], "met": ratios["http"][k] >= target}
            for k, target in GOALS.items()
        },
    }


def render(rep: Mapping[str, Any]) -> str:
    """The table ``main`` prints and the README shows."""
    meta = rep["meta"]
    lines = [
        f"CPU microseconds per `GET {meta['path']}` on {meta['cpu_count']} CPUs, Python {meta['python']}, "
        f"{meta['date']} (1-minute load average {meta['load_average_1m']}): median of {meta['rounds']} rounds of "
        f"{meta['requests']} requests, the event loop's thread plus the trace thread; bare / case is throughput at "
        "equal CPU.",
        "",
        "| layer | case | µs/request | of which traces | rounds (min-max) | bare / case |",
        "|---|---|---|---|---|---|",
    ]
    us = {(r["case"], r["layer"]): r["us"] for r in rep["rows"]}
    for r in rep["rows"]:
        ratio = us["bare", r["layer"]] / r["us"]
        lines.append(
            f"| {r['layer']} | {r['case']} | {r['us']:.1f} | {r['traces_us']:.1f} | "
            f"{r['min_us']:.1f}-{r['max_us']:.1f} | {ratio:.2f}x |"
        )
    lines.append("")
    for k, g in rep["goals"].items():
        lines.append(f"- {k.replace('_', ' ')} (http): **{g['value']:.2f}x** (goal >= {g['target']}x: "
                     f"{'met' if g['met'] else 'missed'})")  # fmt: skip
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tools.request_cpu", description=__doc__.split("\n")[0])
    p.add_argument("--root", help="project directory (default: found from the current directory)")
    p.add_argument("--requests", type=int, default=DEFAULT_REQUESTS, help="requests per round, case and layer")
    p.add_argument("--rounds", type=int, default=DEFAULT_ROUNDS)
    p.add_argument("--profile", choices=CASES, help="print cProfile's top functions for one case instead")
    p.add_argument("--write", action="store_true", help="commit the figures to eval/results/request_cpu.json")
    p.add_argument("--sink", action="store_true", help=argparse.SUPPRESS)  # the trace sink's own process
    args = p.parse_args(argv)
    if args.sink:
        serve_sink()
        return 0
    if args.requests < 1 or args.rounds < 1:
        p.error("--requests and --rounds must be positive")
    root = Path(args.root) if args.root else find_root()
    if args.profile:
        print(profile(root, args.profile, args.requests), end="")
        return 0
    rep = report(run(root, args.requests, args.rounds), args.requests, args.rounds)
    if args.write:
        Paths(root).result("request_cpu.json").write_text(json.dumps(rep, indent=2) + "\n")
    print(render(rep), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
