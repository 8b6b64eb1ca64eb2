"""What tracing and metrics cost in throughput: ``GET /answer/q11`` under wrk with observability
off and on, alternately, in one run.

Contract:
- ``run(root, rounds, duration_s, clients)`` starts ``rag-contract serve`` (one worker, the
  project copy and wrk script of ``tools.loadtest``: every request its own client of the rate
  limiter) ``rounds`` times with observability off and ``rounds`` times on, alternating
  (off, on, off, on, ...), so that other work on a shared machine falls on both alike. "On" is
  traces exported over OTLP/HTTP to a sink on loopback inside this tool (which answers 200 and
  counts what it is sent) and metrics on a port of their own. Each server gets a ``WARMUP_S``
  warm-up, then one wrk run of ``duration_s`` seconds at ``clients`` connections. Nothing leaves
  loopback; every server is stopped before the next starts.
- The report (``eval/results/observability.json``) holds machine-independent metadata, each
  run's req/s, the median of each mode, the ratio of the medians (on / off) with the goal
  (``GOAL_RATIO``: within 10%) and whether it was met, and the bytes and requests the sink
  received (traces really were exported). Timings vary by machine and load: the tests hold the
  report's structure and that its figures agree with one another, not equality with a new run.
- ``render(report)`` is the README's markdown for such a report.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import shutil
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from rag_contract.project import Paths, find_root
from tools.loadtest import (
    HOST,
    WRK_SCRIPT,
    LoadError,
    free_port,
    load_tree,
    run_wrk,
    running_server,
    serve_argv,
    server_env,
    wrk_version,
)
from tools.machine import load_average, machine

MODES = ("off", "on")
DEFAULT_ROUNDS = 5
DEFAULT_DURATION_S = 6
DEFAULT_CLIENTS = 8
WARMUP_S = 1
QUESTION_ID = "q11"
GOAL_RATIO = 0.9  # on / off: throughput within 10%


@dataclass
class Sink:
    """What the loopback trace sink received."""

    requests: int = 0
    bytes: int = 0


@contextlib.contextmanager
def trace_sink() -> Iterator[tuple[str, Sink]]:
    """An OTLP/HTTP endpoint on loopback answering 200 to every POST; yields (url, counts)."""
    sink = Sink()
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - the http.server hook name
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            with lock:
                sink.requests += 1
                sink.bytes += len(body)
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer((HOST, 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://{HOST}:{server.server_address[1]}/v1/traces", sink
    finally:
        server.shutdown()
        server.server_close()


def mode_env(base: Mapping[str, str], mode: str, traces_url: str, tmp: Path) -> dict[str, str]:
    """The server's environment: nothing observed ("off"), or traces and metrics ("on")."""
    env = {k: v for k, v in base.items() if not k.startswith("RAG_CONTRACT_")}
    if mode == "on":
        env |= {
            "RAG_CONTRACT_TRACES_ENDPOINT": traces_url,
            "RAG_CONTRACT_METRICS_PORT": str(free_port()),
            "TMPDIR": str(tmp),
        }
    return env


def summarize(runs: Mapping[str, Sequence[float]]) -> dict[str, Any]:
    """Medians per mode, their ratio (on / off) and the goal."""
    medians = {m: round(statistics.median(runs[m]), 1) for m in MODES}
    ratio = round(medians["on"] / medians["off"], 3) if medians["off"] else None
    return {
        "median_rps": medians,
        "ratio_on_off": ratio,
        "goal": {"target": GOAL_RATIO, "value": ratio, "met": None if ratio is None else ratio >= GOAL_RATIO},
    }


def run(
    root: Path,
    rounds: int = DEFAULT_ROUNDS,
    duration_s: int = DEFAULT_DURATION_S,
    clients: int = DEFAULT_CLIENTS,
    wrk: str = "wrk",
) -> dict[str, Any]:
    if rounds < 1 or duration_s < 1 or clients < 1:
        raise ValueError("rounds, duration_s and clients must be positive")
    wrk_path = shutil.which(wrk)
    if wrk_path is None:
        raise LoadError("wrk not found on PATH (Debian: apt-get install wrk)")
    started = time.monotonic()
    runs: dict[str, list[float]] = {m: [] for m in MODES}
    with tempfile.TemporaryDirectory(prefix="ragc-obs-") as tmp_name, trace_sink() as (url, sink):
        tmp = Path(tmp_name)
        script = tmp / "load.lua"
        script.write_text(WRK_SCRIPT, encoding="utf-8")
        tree = load_tree(Path(root), tmp / "project")
        base = server_env()
        for i in range(rounds):
            for mode in MODES:
                env = mode_env(base, mode, url, tmp)
                with running_server(serve_argv(1, None), tree, env, tmp / f"{mode}-{i}.log", 1) as (_, port):
                    target = f"http://{HOST}:{port}/answer/{QUESTION_ID}"
                    run_wrk(wrk_path, target, min(4, clients), WARMUP_S, script, 2 * rounds + 2 * i)
                    level = run_wrk(wrk_path, target, clients, duration_s, script, 2 * i + MODES.index(mode))
                if level.unexpected or level.socket_errors:
                    bad = f"{level.unexpected} unexpected statuses, {level.socket_errors} socket errors"
                    raise LoadError(f"{mode} run {i}: {bad}")
                runs[mode].append(round(level.rps, 1))
        received = {"requests": sink.requests, "bytes": sink.bytes}
    return {
        "meta": {
            **machine(),
            "wrk": wrk_version(wrk_path),
            "path": f"/answer/{QUESTION_ID}",
            "workers": 1,
            "clients": clients,
            "duration_s": duration_s,
            "warmup_s": WARMUP_S,
            "rounds": rounds,
            "order": "off, on alternately",
            "on": "traces (OTLP/HTTP to a loopback sink) and metrics (own port)",
            "wall_s": round(time.monotonic() - started, 1),
            "load_average_1m": load_average(),
        },
        "runs_rps": runs,
        **summarize(runs),
        "sink_received": received,
    }


def render(report: Mapping[str, Any]) -> str:
    meta = report["meta"]
    med = report["median_rps"]
    goal = report["goal"]
    met = "not measured" if goal["met"] is None else ("met" if goal["met"] else "missed")
    runs = report["runs_rps"]
    return (
        f"wrk {meta['wrk']}, {meta['cpu_count']} CPUs, Python {meta['python']}, {meta['date']} "
        f"(1-minute load average {meta['load_average_1m']} as it ended): `GET {meta['path']}`, one worker, "
        f"{meta['clients']} connections, {meta['rounds']} rounds of {meta['duration_s']} s with observability "
        f"off and on alternately (on: {meta['on']}).\n\n"
        "| observability | req/s per run | median req/s |\n|---|---|---|\n"
        f"| off | {', '.join(f'{x:.0f}' for x in runs['off'])} | {med['off']:.0f} |\n"
        f"| on | {', '.join(f'{x:.0f}' for x in runs['on'])} | {med['on']:.0f} |\n\n"
        f"On / off: **{report['ratio_on_off']:.2f}x** (goal >= {goal['target']}x: {met}); the sink received "
        f"{report['sink_received']['requests']} export requests, {report['sink_received']['bytes']} bytes.\n"
    )


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tools.observability_load", description=__doc__.split("\n")[0])
    p.add_argument("--root", help="project directory (default: found from the current directory)")
    p.add_argument("--rounds", type=int, default=DEFAULT_ROUNDS)
    p.add_argument("--duration", type=int, default=DEFAULT_DURATION_S, help="seconds per wrk run")
    p.add_argument("--clients", type=int, default=DEFAULT_CLIENTS)
    p.add_argument("--no-write", action="store_true", help="print only")
    args = p.parse_args(argv)
    root = Path(args.root) if args.root else find_root()
    try:
        report = run(root, args.rounds, args.duration, args.clients)
    except (LoadError, ValueError) as exc:
        print(f"observability_load: {exc}", file=sys.stderr)
        return 2
    if not args.no_write:
        Paths(root).result("observability.json").write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    print(render(report), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
