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
  Then it warms the server up (``warm_up``): ``GET /answer/<id>`` for every fixed question
  and ``POST /ask`` for ``WARM_UP_FREE_TEXT`` free-text questions (the first question texts
  of the committed sealed sets, ``eval/sealed/*.yaml`` in name order, that ``/ask`` accepts),
  each asked again after ``Retry-After`` when it is shed or abandoned (at most
  ``WARM_UP_TRIES`` times in all), and records the replies by status and ``VmRSS`` after them. The
  rate limiter is left as served: the warm-up's requests come from distinct loopback
  addresses (127.0.1.x), a few requests each, inside every address's burst.
  Nothing leaves loopback; every wait is bounded (``TIMEOUT_S``).
- ``breakdown(root, served_mb)`` runs ``tools.memory_breakdown`` in a process of its own over
  the same questions: the RSS each part adds (imports, index, the ONNX session, the warm-up's
  caches), the index's numpy arrays and BM25 arrays by ``nbytes``, and ``rest``: what the
  served process holds after its warm-up (``served_mb``, the median) beyond those parts.
- ``run(root, runs)`` measures ``runs`` fresh starts, one after another; the report
  (``eval/results/startup.json``) holds machine-independent metadata, every run, the median
  of each figure, and each goal (first 200 within ``GOAL_READY_S``; RSS before the first
  ``/ask`` at most ``GOAL_RSS_MB``; RSS after the warm-up at most ``GOAL_WARM_RSS_MB``) with
  its value (the median over the runs) and whether it was met, and the breakdown. Timings
  vary by machine and load: the tests hold the report's structure and that the committed
  figures meet the goals they are held to, not equality with a new run.
- ``render(report)`` is the README's markdown for such a report.
"""

from __future__ import annotations

import argparse
import compileall
import http.client
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from rag_contract.config.thresholds import load_thresholds
from rag_contract.project import Paths, find_root
from tools.loadtest import HOST, free_port, server_env, stop
from tools.machine import load_average, machine

DEFAULT_RUNS = 5
POLL_S = 0.005
IDLE_S = 1.0
TIMEOUT_S = 60.0
GOAL_READY_S = 0.5
GOAL_RSS_MB = 120.0
GOAL_WARM_RSS_MB = 160.0  # one worker, after the warm-up below
WARM_UP_FREE_TEXT = 100
WARM_UP_TRIES = 2
REQUESTS_PER_ADDRESS = 5  # well inside the limiter's burst for each loopback address
QUESTION = "What is a URI?"


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


def _status(request: urllib.request.Request) -> tuple[int | None, str | None, bytes]:
    """(status, Retry-After, body); status None when nothing accepts the connection yet."""
    try:
        with urllib.request.urlopen(request, timeout=10) as resp:
            return resp.status, resp.headers.get("Retry-After"), resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers.get("Retry-After"), exc.read()
    except (urllib.error.URLError, ConnectionError):
        return None, None, b""


def free_text_questions(root: Path, count: int = WARM_UP_FREE_TEXT) -> list[str]:
    """The first ``count`` question texts of ``eval/sealed/*.yaml`` (in name order) that
    ``/ask`` accepts by length."""
    limit = load_thresholds(Paths(root).thresholds).ask.max_question_chars
    texts: list[str] = []
    for path in sorted((Path(root) / "eval" / "sealed").glob("*.yaml")):
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
        texts += [q["question"] for q in data["questions"] if len(q["question"]) <= limit]
    if len(texts) < count:
        raise StartupError(f"eval/sealed holds {len(texts)} free-text questions, {count} wanted")
    return texts[:count]


class _Clients:
    """HTTP requests to one port from distinct loopback addresses, ``REQUESTS_PER_ADDRESS`` each."""

    def __init__(self, port: int):
        self.port, self.sent = port, 0

    def request(self, method: str, path: str, body: bytes | None = None) -> tuple[int | None, str | None, bytes]:
        n = self.sent // REQUESTS_PER_ADDRESS
        self.sent += 1
        source = f"127.0.{1 + n // 250}.{1 + n % 250}"
        conn = http.client.HTTPConnection(HOST, self.port, timeout=TIMEOUT_S, source_address=(source, 0))
        headers = {"Content-Type": "application/json"} if body is not None else {}
        try:
            conn.request(method, path, body=body, headers=headers)
            resp = conn.getresponse()
            return resp.status, resp.getheader("Retry-After"), resp.read()
        except OSError:
            return None, None, b""
        finally:
            conn.close()


def warm_up(port: int, free_text: Sequence[str]) -> dict[str, int]:
    """Every fixed answer, then each free-text question (see the module docstring); the final
    replies counted by route, status and error, e.g. ``{"answer 200": 223, "answer 503 no_context": 1}``
    (a free-text answer abandoned past its deadline on a busy machine has still done the work
    whose memory is measured: it is counted, not hidden)."""
    clients = _Clients(port)
    status, _, raw = clients.request("GET", "/questions")
    if status != 200:
        raise StartupError(f"GET /questions answered {status}")
    listed = json.loads(raw)
    ids = [q["id"] for q in (listed["questions"] if isinstance(listed, dict) else listed)]
    seen: Counter[str] = Counter()
    asks = [("GET", f"/answer/{qid}", None) for qid in ids]
    asks += [("POST", "/ask", json.dumps({"question": text}).encode()) for text in free_text]
    for method, path, body in asks:
        for _ in range(WARM_UP_TRIES):
            status, retry_after, raw = clients.request(method, path, body)
            error = json.loads(raw).get("error") if raw.startswith(b"{") else None
            if status != 503 or error not in ("overloaded", "abandoned") or retry_after is None:
                break
            time.sleep(float(retry_after))
        seen[" ".join(str(x) for x in (path.split("/")[1], status, error) if x is not None)] += 1
    return dict(sorted(seen.items()))


def measure_once(root: Path, free_text: Sequence[str] = ()) -> dict[str, Any]:
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
        rss_answered = rss_mb(proc.pid)
        replies = warm_up(port, free_text or free_text_questions(root))
        return {
            "first_health_200_s": round(ready_s, 3),
            "cpu_s_at_first_health": ready_cpu_s,
            "rss_at_first_health_mb": rss_ready,
            "rss_before_first_ask_mb": rss_before_ask,
            "first_answer_after_s": round(answered_s, 3),
            "rss_after_first_answer_mb": rss_answered,
            "ask_replies": seen,
            "rss_after_warm_up_mb": rss_mb(proc.pid),
            "warm_up_replies": replies,
        }
    finally:
        stop(proc)


def goals(summary: Mapping[str, float]) -> dict[str, Any]:
    ready, rss = summary["first_health_200_s"], summary["rss_before_first_ask_mb"]
    warm = summary["rss_after_warm_up_mb"]
    return {
        "first_health_200_s": {"target": GOAL_READY_S, "value": ready, "met": ready <= GOAL_READY_S},
        "rss_before_first_ask_mb": {"target": GOAL_RSS_MB, "value": rss, "met": rss <= GOAL_RSS_MB},
        "rss_after_warm_up_mb": {"target": GOAL_WARM_RSS_MB, "value": warm, "met": warm <= GOAL_WARM_RSS_MB},
    }


FIGURES = (
    "first_health_200_s",
    "cpu_s_at_first_health",
    "rss_at_first_health_mb",
    "rss_before_first_ask_mb",
    "first_answer_after_s",
    "rss_after_first_answer_mb",
    "rss_after_warm_up_mb",
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


def breakdown(root: Path, served_mb: float, free_text: Sequence[str]) -> dict[str, Any]:
    """``tools.memory_breakdown`` over ``free_text`` in a fresh process, and ``rest``: what a
    served process of ``served_mb`` after the warm-up holds beyond its parts."""
    with tempfile.NamedTemporaryFile("w", suffix=".json", encoding="utf-8") as f:
        json.dump(list(free_text), f)
        f.flush()
        argv = [sys.executable, "-m", "tools.memory_breakdown", "--root", str(root), "--free-text", f.name]
        out = subprocess.run(
            argv, env=server_env(), capture_output=True, text=True, timeout=10 * TIMEOUT_S, check=False
        )
    if out.returncode != 0:
        raise StartupError(f"tools.memory_breakdown exited with {out.returncode}: {out.stderr.strip()[-300:]}")
    parts = json.loads(out.stdout)
    return {**parts, "rest_mb": round(served_mb - parts["rss_end_mb"], 1)}


def run(root: Path, runs: int = DEFAULT_RUNS) -> dict[str, Any]:
    if runs < 1:
        raise ValueError("runs must be at least 1")
    root = Path(root).resolve()
    compile_package(root)
    free_text = free_text_questions(root)
    measured = [measure_once(root, free_text) for _ in range(runs)]
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
            "warm_up": f"every fixed question, then {len(free_text)} free-text questions of eval/sealed",
        },
        "runs": measured,
        "median": summary,
        "goals": goals(summary),
        "breakdown": breakdown(root, summary["rss_after_warm_up_mb"], free_text),
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
        "| first `/ask` answered after | RSS after it | `/ask` replies seen | RSS after the warm-up | its replies |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for i, r in enumerate(report["runs"], 1):
        replies = ", ".join(_reply(x) for x in r["ask_replies"])
        lines.append(
            f"| {i} | {r['first_health_200_s']:.2f} s | {r['cpu_s_at_first_health']:.2f} s | "
            f"{r['rss_at_first_health_mb']:.0f} MB | "
            f"{r['rss_before_first_ask_mb']:.0f} MB | {r['first_answer_after_s']:.2f} s | "
            f"{r['rss_after_first_answer_mb']:.0f} MB | {replies} | {r['rss_after_warm_up_mb']:.0f} MB | "
            + ", ".join(f"{k}: {v}" for k, v in r["warm_up_replies"].items())
            + " |"
        )
    ready, rss, warm = g["first_health_200_s"], g["rss_before_first_ask_mb"], g["rss_after_warm_up_mb"]
    lines += [
        "",
        f"Median first `/health` 200: {med['first_health_200_s']:.2f} s (goal <= {ready['target']} s: "
        f"{_met(ready['met'])}; server CPU by then {med['cpu_s_at_first_health']:.2f} s); "
        f"median RSS before the first `/ask`: {med['rss_before_first_ask_mb']:.0f} MB "
        f"(goal <= {rss['target']:.0f} MB: {_met(rss['met'])}); the model loads on the first question, "
        f"which then holds {med['rss_after_first_answer_mb']:.0f} MB. Warm-up ({meta['warm_up']}): "
        f"median RSS after it {med['rss_after_warm_up_mb']:.0f} MB (goal <= {warm['target']:.0f} MB, one worker: "
        f"{_met(warm['met'])}).",
        "",
        *render_breakdown(report["breakdown"], med["rss_after_warm_up_mb"]),
    ]
    return "\n".join(lines) + "\n"


def render_breakdown(b: Mapping[str, Any], served_mb: float) -> list[str]:
    """Where the warmed-up server's RSS goes, one row per part."""
    grew = b["grew_mb"]
    index_other = grew["index"] - b["index_arrays_mb"] - b["bm25_mb"]
    caches = ", ".join(f"{name} {n}" for name, n in b["cache_entries"].items())
    return [
        f"Where the {served_mb:.0f} MB go (`tools/memory_breakdown.py`: the same parts built one after "
        "another in a process of its own, RSS growth over each; arrays by `nbytes`):",
        "",
        "| part | MB |",
        "|---|---|",
        f"| interpreter before any import | {b['rss_start_mb']:.1f} |",
        f"| imports of the served app | {grew['imports']:.1f} |",
        f"| index: vector arrays (chunks, sentences, questions, section views) | {b['index_arrays_mb']:.1f} |",
        f"| index: BM25 and content-word arrays | {b['bm25_mb']:.1f} |",
        f"| project and index: the rest (corpus, sections, chunks, sentences, vocabularies) | {index_other:.1f} |",
        f"| ONNX Runtime, tokenizer and the model's session (first vector) | {grew['onnx']:.1f} |",
        f"| warm-up: caches the answers fill (word caches: {caches}) | {grew['warm_up']:.1f} |",
        f"| rest: uvicorn, the HTTP app and its kept answers (served RSS minus the parts) | {b['rest_mb']:.1f} |",
    ]


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
