"""How fast ``rag-contract serve`` starts and how much memory it holds before anyone asks.

Contract:
- ``measure_once(root)`` starts ``python -m rag_contract.cli --root ROOT serve`` on 127.0.0.1
  (a free port; its own process group, stopped in a ``finally``), polls ``GET /health`` every
  ``POLL_S`` and records the time from just before the process was spawned to the first 200,
  the server's ``VmRSS`` then and again after ``IDLE_S`` of no requests (what it holds before
  the first ``/ask``: nothing may load in the background meanwhile), then ``POST /ask``s until
  one is answered (the first finds the model loading: a 503 ``embedder_loading`` whose
  ``Retry-After`` is followed, as a client would, which also keeps the poll inside the rate
  limiter's burst), recording the replies seen, the time to the first answer and ``VmRSS``
  after it. It records the CPU time the server had used at its first 200 as well (user +
  system, from /proc): on a shared machine that figure moves far less than the wall clock.
  Nothing leaves loopback; every wait is bounded (``TIMEOUT_S``).
- ``run(root, runs)`` measures ``runs`` fresh starts, one after another; the report
  (``eval/results/startup.json``) holds machine-independent metadata, every run, the median
  of each figure, and each goal (first 200 within ``GOAL_READY_S``; RSS before the first
  ``/ask`` at most ``GOAL_RSS_MB``) with its value (the median over the runs) and whether it
  was met. Timings vary by machine and load: the tests hold the report's structure and that
  the committed figures meet the goals, not equality with a new run.
- ``render(report)`` is the README's markdown for such a report.
"""

from __future__ import annotations

import argparse
import compileall
import contextlib
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rag_contract.project import Paths, find_root
from tools.machine import load_average, machine

HOST = "127.0.0.1"  # loopback only, by construction
DEFAULT_RUNS = 5
POLL_S = 0.005
IDLE_S = 1.0
TIMEOUT_S = 60.0
GOAL_READY_S = 0.5
GOAL_RSS_MB = 120.0
QUESTION = "What is a URI?"
# Environment the server must not inherit: another port, store or root, or a key.
_SCRUBBED_ENV = ("REDIS_URL", "PORT", "WEB_CONCURRENCY", "RAG_CONTRACT_ROOT", "RAG_CONTRACT_WORKER_REDIS_URL")


class StartupError(RuntimeError):
    """The server did not start or answer within ``TIMEOUT_S``."""


def rss_mb(pid: int) -> float:
    """Resident memory of ``pid`` now (``VmRSS`` in /proc), in MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return round(int(line.split()[1]) / 1024, 1)
    raise StartupError(f"no VmRSS for pid {pid}")


def cpu_s(pid: int) -> float:
    """User + system CPU time ``pid`` has used so far (/proc/PID/stat), in seconds."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return round((int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK"), 2)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        return sock.getsockname()[1]


def server_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in _SCRUBBED_ENV and not k.endswith("_API_KEY")}
    package_parent = str(Path(__file__).resolve().parent.parent)  # this checkout's package
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package_parent, env.get("PYTHONPATH")) if p)
    return env


def _status(request: urllib.request.Request) -> tuple[int | None, str | None, bytes]:
    """(status, Retry-After, body); status None when nothing accepts the connection yet."""
    try:
        with urllib.request.urlopen(request, timeout=10) as resp:
            return resp.status, resp.headers.get("Retry-After"), resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers.get("Retry-After"), exc.read()
    except (urllib.error.URLError, ConnectionError):
        return None, None, b""


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)


def measure_once(root: Path) -> dict[str, Any]:
    """One fresh start of ``serve`` (see the module docstring)."""
    port = free_port()
    base = f"http://{HOST}:{port}"
    argv = [sys.executable, "-m", "rag_contract.cli", "--root", str(root), "serve", "--host", HOST, "--port", str(port)]
    began = time.monotonic()
    proc = subprocess.Popen(
        argv, env=server_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )
    try:
        while True:
            if proc.poll() is not None:
                raise StartupError(f"serve exited with {proc.returncode} before /health answered 200")
            if time.monotonic() - began > TIMEOUT_S:
                raise StartupError(f"no /health 200 within {TIMEOUT_S} s")
            status, _, _ = _status(urllib.request.Request(f"{base}/health"))
            if status == 200:
                ready_s = time.monotonic() - began
                ready_cpu_s = cpu_s(proc.pid)
                break
            time.sleep(POLL_S)
        rss_ready = rss_mb(proc.pid)
        time.sleep(IDLE_S)
        rss_before_ask = rss_mb(proc.pid)
        asked = time.monotonic()
        seen: list[dict[str, Any]] = []
        while True:
            if time.monotonic() - asked > TIMEOUT_S:
                raise StartupError(f"no /ask answered within {TIMEOUT_S} s")
            body = json.dumps({"question": QUESTION}).encode()
            req = urllib.request.Request(
                f"{base}/ask", data=body, headers={"Content-Type": "application/json"}, method="POST"
            )
            status, retry_after, raw = _status(req)
            error = json.loads(raw).get("error") if raw.startswith(b"{") else None
            row = {"status": status, "error": error, "retry_after": retry_after}
            if not seen or seen[-1] != row:
                seen.append(row)  # one row per kind of reply, in order
            # Asked again after Retry-After: the model still loading, or (on a busy host) a cold
            # first answer abandoned past its deadline, as tools/loadtest's ask_ready does.
            if status != 503 or error not in ("embedder_loading", "abandoned"):
                answered_s = time.monotonic() - asked
                break
            time.sleep(float(retry_after or 1))
        return {
            "first_health_200_s": round(ready_s, 3),
            "cpu_s_at_first_health": ready_cpu_s,
            "rss_at_first_health_mb": rss_ready,
            "rss_before_first_ask_mb": rss_before_ask,
            "first_answer_after_s": round(answered_s, 3),
            "rss_after_first_answer_mb": rss_mb(proc.pid),
            "ask_replies": seen,
        }
    finally:
        _stop(proc)


def goals(summary: Mapping[str, float]) -> dict[str, Any]:
    ready, rss = summary["first_health_200_s"], summary["rss_before_first_ask_mb"]
    return {
        "first_health_200_s": {"target": GOAL_READY_S, "value": ready, "met": ready <= GOAL_READY_S},
        "rss_before_first_ask_mb": {"target": GOAL_RSS_MB, "value": rss, "met": rss <= GOAL_RSS_MB},
    }


FIGURES = (
    "first_health_200_s",
    "cpu_s_at_first_health",
    "rss_at_first_health_mb",
    "rss_before_first_ask_mb",
    "first_answer_after_s",
    "rss_after_first_answer_mb",
)


def summarise(runs: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    """The median of each figure over ``runs``."""
    return {k: round(statistics.median(r[k] for r in runs), 3) for k in FIGURES}


def compile_package(root: Path) -> None:
    """The package's bytecode written before the runs, as any start after the first has it (and
    the image, whose ``pip install`` compiles): under ``PYTHONDONTWRITEBYTECODE`` every start
    would otherwise compile about 70 modules from source, which no deployed start does."""
    if not compileall.compile_dir(root / "rag_contract", quiet=1):
        raise RuntimeError("the package did not compile")


def run(root: Path, runs: int = DEFAULT_RUNS) -> dict[str, Any]:
    if runs < 1:
        raise ValueError("runs must be at least 1")
    compile_package(Path(root).resolve())
    measured = [measure_once(Path(root).resolve()) for _ in range(runs)]
    summary = summarise(measured)
    return {
        "meta": {
            **machine(),
            "runs": runs,
            "poll_s": POLL_S,
            "idle_s": IDLE_S,
            "load_average_1m": load_average(),
            "command": "rag-contract serve --host 127.0.0.1 --port <free>",
            "bytecode": "the package compiled before the runs",
        },
        "runs": measured,
        "median": summary,
        "goals": goals(summary),
    }


def _met(flag: bool) -> str:
    return "met" if flag else "missed"


def _reply(row: Mapping[str, Any]) -> str:
    text = f"{row['status']}" + (f" {row['error']}" if row["error"] else "")
    return text + (f" (Retry-After {row['retry_after']})" if row["retry_after"] else "")


def render(report: Mapping[str, Any]) -> str:
    """The README block: one row per run, then the medians against the goals."""
    meta, med, g = report["meta"], report["median"], report["goals"]
    lines = [
        f"{meta['cpu_count']} CPUs, Python {meta['python']}, {meta['date']}, {meta['runs']} fresh starts "
        f"(1-minute load average {meta['load_average_1m']} when they ended; {meta['bytecode']}): "
        f"`{meta['command']}`.",
        "",
        "| run | first `/health` 200 | server CPU by then | RSS then | RSS after 1 s idle (before any `/ask`) "
        "| first `/ask` answered after | RSS after it | `/ask` replies seen |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for i, r in enumerate(report["runs"], 1):
        replies = ", ".join(_reply(x) for x in r["ask_replies"])
        lines.append(
            f"| {i} | {r['first_health_200_s']:.2f} s | {r['cpu_s_at_first_health']:.2f} s | "
            f"{r['rss_at_first_health_mb']:.0f} MB | "
            f"{r['rss_before_first_ask_mb']:.0f} MB | {r['first_answer_after_s']:.2f} s | "
            f"{r['rss_after_first_answer_mb']:.0f} MB | {replies} |"
        )
    ready, rss = g["first_health_200_s"], g["rss_before_first_ask_mb"]
    lines += [
        "",
        f"Median first `/health` 200: {med['first_health_200_s']:.2f} s (goal <= {ready['target']} s: "
        f"{_met(ready['met'])}; server CPU by then {med['cpu_s_at_first_health']:.2f} s); "
        f"median RSS before the first `/ask`: {med['rss_before_first_ask_mb']:.0f} MB "
        f"(goal <= {rss['target']:.0f} MB: {_met(rss['met'])}); the model loads on the first question, "
        f"which then holds {med['rss_after_first_answer_mb']:.0f} MB.",
    ]
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tools.startup", description=__doc__.split("\n")[0])
    p.add_argument("--root", help="project directory (default: found from the current directory)")
    p.add_argument("--runs", type=int, default=DEFAULT_RUNS)
    p.add_argument("--no-write", action="store_true", help="print only")
    args = p.parse_args(argv)
    root = Path(args.root) if args.root else find_root()
    try:
        report = run(root, args.runs)
    except (StartupError, ValueError) as exc:
        print(f"startup: {exc}", file=sys.stderr)
        return 2
    if not args.no_write:
        Paths(root).result("startup.json").write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    print(render(report), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
