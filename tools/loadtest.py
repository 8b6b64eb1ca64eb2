"""A bounded load run on loopback: ``/answer/<id>`` throughput and latency under wrk.

Contract:
- ``run_load(root, ...)`` measures, for each concurrency level in ``clients``, one wrk run
  of ``duration_s`` seconds against each selected config, started as a subprocess on
  127.0.0.1 on a free port and stopped (its whole process group) before the next, except
  that the bare route runs beside the one worker and takes turns with it (and with its
  revalidation row) at each level, so that a ratio to the bare route compares the same
  minutes of a machine whose speed drifts:
  ``bare`` (a Starlette route returning a constant under uvicorn, served the way ``serve``
  serves: the framework's ceiling on this machine), ``one_worker`` (``rag-contract serve``,
  buckets in memory) and ``two_workers`` (``rag-contract serve --workers 2 --redis URL``,
  one bucket per client shared through redis; ``run_load`` starts its own throwaway
  redis-server unless ``redis_url`` is given). Nothing leaves loopback, and the run is
  bounded: a plan longer than ``time_limit_s`` is refused up front, every subprocess has a
  timeout, and every one is killed in a ``finally``.
- The served configs run from a temporary copy of the project tree (symlinks to corpus/,
  index/ and eval/*, no committed file touched) whose thresholds differ in one key:
  ``rate_limit.trusted_proxy_hops: 1``. The allowance itself cannot be raised for a load
  run (the thresholds loader refuses more than a quarter process-minute of demand), so
  instead wrk presents a distinct client per request: the Lua script (``WRK_SCRIPT``)
  writes a counter-derived ``X-Forwarded-For: 10.a.b.c`` on every request (a header value
  only; no traffic goes there), and with one trusted hop each value is its own bucket. The
  limiter still runs, and still takes a token, on every request; before measuring,
  ``limiter_check`` shows it still refuses one fixed client after its burst (and, with two
  workers, that the two processes share that client's one bucket).
- With ``one_worker``, the same server is measured for one more request (``ROWS``): the
  ``/answer`` request revalidated with the ``ETag`` it was served (``If-None-Match``: a 304
  is what is expected), a row of its own (``one_worker_revalidate``) and a ratio against the
  bare route.
- With ``one_worker``, ``POST /ask`` is measured too (``measure_ask``), at ``ask_clients``
  (1, 16, 64 and 256) closed-loop clients asking the question set's questions in turn
  (``tools/ask_load.py``: answers/s, p50 and p99 of the answered requests as the client sees
  them, shed share, abandoned count), on two one-worker servers started side by side once the
  model has loaded (``ask_ready``): ``batched`` (``batching.max_batch`` as committed, or, when
  that is 1, as large as admission lets a batch be: ``admission.max_in_flight``) and
  ``unbatched`` (``batching.max_batch: 1``), taking turns at each level. ``served`` names the
  row that runs the committed thresholds; the answers, collapse and p99 goals are read on it.
- The report (``eval/results/load.json``) holds machine-independent metadata only (cpu
  count, versions, date, duration, question id), per config and level: req/s, p50/p99 ms,
  completed requests, non-2xx responses, responses other than the expected status (2xx, or
  304 for the revalidation) and abandoned answers (503 with error "abandoned"); the ratios
  of each served row to the bare route and of two workers to one; and whether each goal was
  met. The goals are benchmarks, recorded, never asserted: one worker >= 0.7x the bare route
  and a revalidation >= 0.9x (best req/s of each), two workers >= 1.6x one worker at 64
  clients, no request abandoned at 16 clients; served ``POST /ask`` at 64 clients >= 60
  answers/s with a p99 within the request deadline and none abandoned, at 256 clients no
  fewer answers/s than at 64, and at one client a batched p50 at most 1 ms above unbatched.
  With two workers, ``redis_round_trips`` counts the rate limiter's EVALSHA calls beside the
  requests measured: decisions asked for in the same turn of a worker's loop share one.
- ``render(report)`` is the README's markdown for such a report.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from rag_contract.config.thresholds import load_thresholds
from rag_contract.project import Paths, find_root, load_project
from tools.ask_load import run_level
from tools.machine import load_average, machine

CONFIGS = ("bare", "one_worker", "two_workers")
DEFAULT_CLIENTS = (1, 4, 16, 64)
ASK_CLIENTS = (1, 16, 64, 256)
DEFAULT_DURATION_S = 8
DEFAULT_QUESTION_ID = "q11"  # a grounded answer: retrieval, drafting and grounding all run
TIME_LIMIT_S = 420.0
WRK_THREADS = 1  # one load thread: on 2 cores every cycle wrk spends is one the servers lose
WARMUP_S = 1
HOST = "127.0.0.1"  # loopback only, by construction

GOAL_ONE_VS_BARE = 0.7
GOAL_REVALIDATE_VS_BARE = 0.9
GOAL_TWO_VS_ONE = 1.6
SCALE_LEVEL = 64  # where connections spread over both workers: the two-worker goal's level
ABANDON_LEVEL = 16
ASK_QUESTION = "What does the no-cache directive of Cache-Control mean?"  # what waits out the model's load
GOAL_ASK_ANSWERS = 60.0  # answers/s, served, at ASK_SCALE_LEVEL clients
GOAL_ASK_P50_SLACK_MS = 1.0  # batched p50 at one client at most this above unbatched
ASK_SCALE_LEVEL = 64
ASK_TOP_LEVEL = 256
ASK_LABELS = {"batched": "batched", "unbatched": "unbatched (max_batch 1)"}
# The extra requests measured on the one-worker server, each a row of the report.
ROWS = {"one_worker_revalidate": "1 worker: 304 revalidation"}

RESULT_MARK = "RAGC_WRK_JSON "
_STARTED = "Application startup complete"
_STARTUP_TIMEOUT_S = 60.0
_LIMITER_XFF = "192.0.2.1"  # TEST-NET-1: outside the 10/8 range the wrk script uses
_PROBE_XFF = "192.0.2.2"  # the requests that prepare a row (an ETag, the model's load)
# Environment a server must not inherit: it would pick another port, store or root, or
# hold a key it has no business with on a loopback benchmark.
_SCRUBBED_ENV = ("REDIS_URL", "PORT", "WEB_CONCURRENCY", "RAG_CONTRACT_ROOT", "RAG_CONTRACT_WORKER_REDIS_URL")

# wrk script. setup() numbers the threads; request() gives every request its own
# X-Forwarded-For (run, thread and counter packed into 10.a.b.c: 2^20 addresses per thread
# per run, and successive runs use other blocks, so no address comes near its burst);
# response() counts statuses and abandoned answers; done() prints one JSON line with the
# exact numbers (latencies in microseconds) after wrk's own summary.
WRK_SCRIPT = r"""
local threads = {}
local next_id = 0

function setup(thread)
  thread:set("tid", next_id)
  next_id = next_id + 1
  table.insert(threads, thread)
end

function init(args)
  run = tonumber(args[1] or "0") or 0
  method = args[2]
  etag = args[3]
  body = args[4]
  if method == "" then method = nil end
  if body == "" then body = nil end
  sent = 0
  statuses = {}
  abandoned = 0
  xff = {}
end

function request()
  local v = ((run % 4) * 4 + tid % 4) * 1048576 + sent % 1048576
  sent = sent + 1
  xff["X-Forwarded-For"] = string.format("10.%d.%d.%d",
    math.floor(v / 65536) % 256, math.floor(v / 256) % 256, v % 256)
  if etag and etag ~= "" then xff["If-None-Match"] = etag end
  if body then xff["Content-Type"] = "application/json" end
  return wrk.format(method, nil, xff, body)
end

function response(status, headers, body)
  statuses[status] = (statuses[status] or 0) + 1
  if status == 503 and body and string.find(body, '"error"%s*:%s*"abandoned"') then
    abandoned = abandoned + 1
  end
end

function done(summary, latency, requests)
  local merged, total_abandoned = {}, 0
  for _, t in ipairs(threads) do
    for code, n in pairs(t:get("statuses")) do
      merged[code] = (merged[code] or 0) + n
    end
    total_abandoned = total_abandoned + t:get("abandoned")
  end
  local parts = {}
  for code, n in pairs(merged) do
    parts[#parts + 1] = string.format('"%d":%d', code, n)
  end
  table.sort(parts)
  local e = summary.errors
  io.write(string.format(
    'RAGC_WRK_JSON {"requests":%d,"duration_us":%d,"p50_us":%.1f,"p99_us":%.1f,"max_us":%.1f,' ..
    '"statuses":{%s},"abandoned":%d,"errors":{"connect":%d,"read":%d,"write":%d,"status":%d,"timeout":%d}}\n',
    summary.requests, summary.duration, latency:percentile(50), latency:percentile(99), latency.max,
    table.concat(parts, ","), total_abandoned, e.connect, e.read, e.write, e.status, e.timeout))
end
"""


class LoadError(RuntimeError):
    """The load run could not be carried out (no wrk, a server that did not start, ...)."""


# --- values -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Level:
    """One wrk run at ``clients`` connections, as wrk's done() hook reported it."""

    clients: int
    requests: int  # completed responses
    duration_s: float
    p50_ms: float
    p99_ms: float
    statuses: Mapping[int, int] = field(default_factory=dict)  # status -> responses
    abandoned: int = 0  # 503 whose body says error "abandoned"
    socket_errors: int = 0  # connect/read/write errors and timeouts (no response at all)
    expect: int | None = None  # the status every response should have; None: any 2xx

    @property
    def rps(self) -> float:
        return self.requests / self.duration_s if self.duration_s > 0 else 0.0

    @property
    def non_2xx(self) -> int:
        return sum(n for code, n in self.statuses.items() if not 200 <= code < 300)

    @property
    def unexpected(self) -> int:
        if self.expect is None:
            return self.non_2xx
        return sum(n for code, n in self.statuses.items() if code != self.expect)

    def as_dict(self) -> dict[str, Any]:
        return {
            "rps": round(self.rps, 1),
            "p50_ms": round(self.p50_ms, 2),
            "p99_ms": round(self.p99_ms, 2),
            "requests": self.requests,
            "non_2xx": self.non_2xx,
            "unexpected": self.unexpected,
            "abandoned": self.abandoned,
            "socket_errors": self.socket_errors,
            "statuses": {str(code): self.statuses[code] for code in sorted(self.statuses)},
        }


@dataclass(frozen=True)
class LimiterCheck:
    """One fixed client (one X-Forwarded-For), ``sent`` requests each on a new connection.

    Passed when exactly ``burst`` were served and every later one was refused with 429:
    the limiter is active in the load setup. With several workers the connections are
    spread over the processes, so a per-process bucket would serve more than ``burst``;
    exactly ``burst`` is the evidence that they share one.
    """

    burst: int
    statuses: tuple[int, ...]

    @property
    def served(self) -> int:
        return sum(1 for s in self.statuses if s != 429)

    @property
    def passed(self) -> bool:
        return all(s != 429 for s in self.statuses[: self.burst]) and all(s == 429 for s in self.statuses[self.burst :])

    def as_dict(self) -> dict[str, Any]:
        return {
            "client": _LIMITER_XFF,
            "sent": len(self.statuses),
            "burst": self.burst,
            "served": self.served,
            "first_status": self.statuses[0] if self.statuses else None,
            "passed": self.passed,
        }


# --- parsing wrk ------------------------------------------------------------------------


def parse_wrk(stdout: str, clients: int, expect: int | None = None) -> Level:
    """The ``Level`` in wrk's output: the last line starting with ``RESULT_MARK``."""
    lines = [line for line in stdout.splitlines() if line.startswith(RESULT_MARK)]
    if not lines:
        raise LoadError(f"wrk printed no {RESULT_MARK.strip()} line (was the script loaded?):\n{stdout[-2000:]}")
    data = json.loads(lines[-1][len(RESULT_MARK) :])
    errors = data["errors"]
    return Level(
        clients=clients,
        requests=int(data["requests"]),
        duration_s=float(data["duration_us"]) / 1e6,
        p50_ms=float(data["p50_us"]) / 1000.0,
        p99_ms=float(data["p99_us"]) / 1000.0,
        statuses={int(code): int(n) for code, n in data["statuses"].items()},
        abandoned=int(data["abandoned"]),
        socket_errors=sum(int(errors[k]) for k in ("connect", "read", "write", "timeout")),
        expect=expect,
    )


def wrk_version(wrk: str = "wrk") -> str:
    """``wrk -v``'s version word, e.g. ``debian/4.1.0-3+b2`` (wrk exits non-zero for -v)."""
    out = subprocess.run([wrk, "-v"], capture_output=True, text=True, timeout=10)
    first = (out.stdout or out.stderr).splitlines()[0] if (out.stdout or out.stderr) else ""
    words = first.split()
    return words[1] if len(words) > 1 and words[0] == "wrk" else "unknown"


@dataclass(frozen=True)
class Probe:
    """What each request of a wrk run is: the method, an ``If-None-Match`` to send (empty:
    none), a JSON body (empty: none), and the status every response should have."""

    method: str = "GET"
    if_none_match: str = ""
    body: str = ""
    expect: int | None = None

    def args(self) -> list[str]:
        return [self.method, self.if_none_match, self.body]


GET = Probe()


def wrk_command(
    wrk: str, url: str, clients: int, duration_s: int, script: Path, run: int, probe: Probe = GET
) -> list[str]:
    # wrk needs at least one connection per thread; -d takes whole seconds.
    return [
        wrk, "-t", str(min(WRK_THREADS, clients)), "-c", str(clients), "-d", f"{int(duration_s)}s",
        "--timeout", "10s", "--latency", "-s", str(script), url, "--", str(run), *probe.args(),
    ]  # fmt: skip


def run_wrk(wrk: str, url: str, clients: int, duration_s: int, script: Path, run: int, probe: Probe = GET) -> Level:
    cmd = wrk_command(wrk, url, clients, duration_s, script, run, probe)
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=duration_s + 30)
    except subprocess.TimeoutExpired as exc:
        raise LoadError(f"wrk did not finish within {duration_s + 30} s") from exc
    if out.returncode != 0:
        raise LoadError(f"wrk exited {out.returncode}: {out.stderr[-2000:]}")
    return parse_wrk(out.stdout, clients, probe.expect)


# --- the bare route -----------------------------------------------------------------------


def bare_app() -> Starlette:
    """uvicorn factory for the ceiling: the same path, a constant body, no middleware."""

    async def constant(request: Request) -> Response:
        return JSONResponse({"ok": True})

    return Starlette(routes=[Route("/answer/{qid}", constant)])


# --- processes ----------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        return sock.getsockname()[1]


def stop(proc: subprocess.Popen) -> None:
    """Stop a process started in a process group of its own (as ``_spawn`` starts one) and everything in that group."""
    if proc.poll() is None:
        proc.terminate()  # uvicorn's supervisor stops its workers on SIGTERM
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
    # Anything left in the group we created (a worker outliving its supervisor) goes too.
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)


def _spawn(argv: Sequence[str], cwd: Path, env: Mapping[str, str], log: Path) -> subprocess.Popen:
    # Own session: the server and its workers form one group that ``stop`` can end.
    with open(log, "ab") as out:
        return subprocess.Popen(
            list(argv), cwd=cwd, env=dict(env), stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )


def _tail(log: Path) -> str:
    return log.read_text(errors="replace")[-3000:] if log.is_file() else "(no log)"


def _wait_started(proc: subprocess.Popen, log: Path, port: int, workers: int) -> bool:
    """Until every worker logged startup complete and the port accepts. False: it exited."""
    deadline = time.monotonic() + _STARTUP_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            return False
        text = log.read_text(errors="replace") if log.is_file() else ""
        if text.count(_STARTED) >= workers:
            with contextlib.suppress(OSError), socket.create_connection((HOST, port), timeout=1):
                return True
        time.sleep(0.1)
    raise LoadError(f"server on port {port} did not start within {_STARTUP_TIMEOUT_S} s:\n{_tail(log)}")


@contextlib.contextmanager
def running_server(
    argv_for_port: Any, cwd: Path, env: Mapping[str, str], log: Path, workers: int
) -> Iterator[tuple[subprocess.Popen, int]]:
    """``argv_for_port(port)`` started on a free port (retried: a port can be taken
    between the probe and the bind), yielded once ready, stopped on exit."""
    for _ in range(3):
        port = free_port()
        proc = _spawn(argv_for_port(port), cwd, env, log)
        try:
            ready = _wait_started(proc, log, port, workers)
        except BaseException:
            stop(proc)
            raise
        if ready:
            break
        stop(proc)
    else:
        raise LoadError(f"server did not start after 3 attempts:\n{_tail(log)}")
    try:
        yield proc, port
    finally:
        stop(proc)


def worker_processes(pid: int) -> int | None:
    """How many uvicorn worker processes ``pid`` spawned (1 when it serves itself);
    None where /proc cannot tell."""
    children: list[int] = []
    try:
        for task in Path(f"/proc/{pid}/task").iterdir():
            children += [int(c) for c in (task / "children").read_text().split()]
    except OSError:
        return None
    spawned = 0
    for child in children:
        with contextlib.suppress(OSError):
            if b"spawn_main" in Path(f"/proc/{child}/cmdline").read_bytes():
                spawned += 1
    return spawned or 1


@contextlib.contextmanager
def own_redis(workdir: Path) -> Iterator[str]:
    """A throwaway redis-server on loopback (nothing persisted); yields its URL."""
    import redis

    binary = shutil.which("redis-server")
    if binary is None:
        raise LoadError("redis-server not found on PATH (Debian: apt-get install redis-server)")
    log = workdir / "redis.log"
    for _ in range(3):
        port = free_port()
        argv = [binary, "--bind", HOST, "--port", str(port), "--save", "", "--appendonly", "no",
                "--dir", str(workdir), "--daemonize", "no"]  # fmt: skip
        proc = _spawn(argv, workdir, os.environ, log)
        client = redis.Redis(host=HOST, port=port, socket_connect_timeout=0.2, socket_timeout=0.5)
        try:
            deadline = time.monotonic() + 10
            while proc.poll() is None and time.monotonic() < deadline:
                with contextlib.suppress(redis.exceptions.RedisError):
                    if client.ping():
                        break
                time.sleep(0.05)
            else:
                stop(proc)
                continue
        finally:
            client.close()
        try:
            yield f"redis://{HOST}:{port}/0"
        finally:
            stop(proc)
        return
    raise LoadError(f"redis-server did not start after 3 attempts:\n{_tail(log)}")


def redis_round_trips(url: str) -> int:
    """EVALSHA calls so far: one per round trip of ``RedisStore``, each deciding every request
    that asked in the same turn of a worker's event loop."""
    import redis

    client = redis.Redis.from_url(url, socket_timeout=2)
    try:
        stats = client.info("commandstats")
    finally:
        client.close()
    return int(stats.get("cmdstat_evalsha", {}).get("calls", 0))


# --- the project copy ---------------------------------------------------------------------


def load_tree(root: Path, dest: Path, max_batch: int | None = None) -> Path:
    """``dest`` as a project served from ``root``'s files, thresholds aside: the one change
    is ``rate_limit.trusted_proxy_hops: 1`` (see the module docstring), and
    ``batching.max_batch`` when ``max_batch`` is given. Validated here."""

    root = Path(root).resolve()
    dest.mkdir(parents=True, exist_ok=True)
    for name in ("corpus", "index", "models"):  # models: the adapted embedder's, when there is one
        if (root / name).is_dir():
            (dest / name).symlink_to(root / name, target_is_directory=True)
    if (root / "project.yaml").is_file():
        (dest / "project.yaml").symlink_to(root / "project.yaml")
    (dest / "eval").mkdir()
    for entry in (root / "eval").iterdir():
        if entry.name != "thresholds.yaml":
            (dest / "eval" / entry.name).symlink_to(entry, target_is_directory=entry.is_dir())
    data = yaml.safe_load((root / "eval" / "thresholds.yaml").read_text(encoding="utf-8"))
    data["rate_limit"]["trusted_proxy_hops"] = 1
    if max_batch is not None:
        data["batching"]["max_batch"] = max_batch
    path = dest / "eval" / "thresholds.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    load_thresholds(path)  # the copy must be as valid as the original
    return dest


def server_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in _SCRUBBED_ENV and not k.endswith("_API_KEY")}
    # The servers run this checkout's package, whatever is installed.
    package_parent = str(Path(__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package_parent, env.get("PYTHONPATH")) if p)
    return env


def serve_argv(workers: int, redis_url: str | None) -> Any:
    """``rag-contract serve`` as the Makefile runs it (from the project directory)."""

    def argv(port: int) -> list[str]:
        cmd = [sys.executable, "-m", "rag_contract.cli", "serve", "--host", HOST, "--port", str(port)]
        cmd += ["--workers", str(workers)]
        return cmd + (["--redis", redis_url] if redis_url else [])

    return argv


def bare_argv(port: int) -> list[str]:
    # The same uvicorn settings ``serve`` passes: no proxy headers, no Server header,
    # default logging (access log included).
    return [
        sys.executable, "-m", "uvicorn", "--factory", "tools.loadtest:bare_app",
        "--host", HOST, "--port", str(port), "--no-proxy-headers", "--no-server-header",
    ]  # fmt: skip


def limiter_check(base_url: str, question_id: str, burst: int, sent: int) -> LimiterCheck:
    """``sent`` GETs as one client, each on a fresh connection (see ``LimiterCheck``)."""
    statuses = []
    for _ in range(sent):
        req = urllib.request.Request(f"{base_url}/answer/{question_id}", headers={"X-Forwarded-For": _LIMITER_XFF})
        try:
            with urllib.request.urlopen(req, timeout=10) as resp:
                statuses.append(resp.status)
        except urllib.error.HTTPError as exc:
            statuses.append(exc.code)
    return LimiterCheck(burst, tuple(statuses))


# --- the run ------------------------------------------------------------------------------


def _measure(
    wrk: str, url: str, clients: Sequence[int], duration_s: int, script: Path, warmup_s: int, probe: Probe = GET
) -> dict[int, Level]:
    if warmup_s > 0:  # first requests pay lazy imports and cold caches; not measured
        run_wrk(wrk, url, min(4, max(clients)), warmup_s, script, len(clients), probe)
    return {n: run_wrk(wrk, url, n, duration_s, script, i, probe) for i, n in enumerate(clients)}


def _measure_in_turn(
    wrk: str,
    turns: Mapping[str, tuple[str, Probe]],
    clients: Sequence[int],
    duration_s: int,
    script: Path,
    warmup_s: int,
) -> dict[str, dict[int, Level]]:
    """``_measure`` for each named (url, probe), taking turns at each level rather than one
    after another: every name's run at a level falls within the same few seconds."""
    if warmup_s > 0:
        for url, probe in turns.values():
            run_wrk(wrk, url, min(4, max(clients)), warmup_s, script, len(clients), probe)
    out: dict[str, dict[int, Level]] = {name: {} for name in turns}
    for i, n in enumerate(clients):
        for name, (url, probe) in turns.items():
            out[name][n] = run_wrk(wrk, url, n, duration_s, script, i, probe)
    return out


def _fetch(url: str, client: str, body: bytes | None = None) -> tuple[int, Any, bytes]:
    headers = {"X-Forwarded-For": client} | ({"Content-Type": "application/json"} if body else {})
    req = urllib.request.Request(url, data=body, headers=headers, method="POST" if body else "GET")
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, resp.headers, resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers, exc.read()


def entity_tag_of(base_url: str, question_id: str) -> str:
    """The ``ETag`` ``/answer/{question_id}`` is served with (what the revalidation row sends)."""
    status, headers, _ = _fetch(f"{base_url}/answer/{question_id}", _PROBE_XFF)
    tag = headers.get("ETag")
    if status != 200 or not tag:
        raise LoadError(f"/answer/{question_id} answered {status} without an ETag")
    return tag


def ask_ready(base_url: str, body: bytes, timeout_s: float = 60.0) -> None:
    """``POST /ask`` until the model has loaded (its first questions are 503
    ``embedder_loading``, ``Retry-After`` followed) and an answer has come back, so the row
    measures answering. A first answer that pays the cold start (lazy imports, the English word
    list) on a busy host can be 503 ``abandoned``, past its deadline: it is asked again."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        status, headers, raw = _fetch(f"{base_url}/ask", _PROBE_XFF, body)
        if status != 503 or not (b"embedder_loading" in raw or b'"error":"abandoned"' in raw):
            if status != 200:
                raise LoadError(f"POST /ask answered {status}: {raw[:200]!r}")
            return
        time.sleep(float(headers.get("Retry-After") or 1))
    raise LoadError(f"the model did not load within {timeout_s} s")


def _ratio(a: float | None, b: float | None) -> float | None:
    return round(a / b, 3) if a is not None and b else None


def _best(levels: Mapping[str, Mapping[str, Any]] | None) -> float | None:
    return max((lv["rps"] for lv in levels.values()), default=None) if levels else None


def ratios(configs: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """Throughput ratios per level and of the best level of each config (None: not measured)."""

    def levels(name: str) -> Mapping[str, Mapping[str, Any]] | None:
        return configs[name]["levels"] if name in configs else None

    def pair(num: str, den: str) -> dict[str, Any]:
        a, b = levels(num), levels(den)
        per = {k: _ratio(a[k]["rps"], b[k]["rps"]) for k in a if k in b} if a and b else {}
        return {"per_clients": per, "best": _ratio(_best(a), _best(b))}

    return {
        "one_worker_vs_bare": pair("one_worker", "bare"),
        "revalidate_vs_bare": pair("one_worker_revalidate", "bare"),
        "two_workers_vs_one": pair("two_workers", "one_worker"),
    }


def _at_least(value: float | None, target: float | None) -> dict[str, Any]:
    met = None if value is None or target is None else value >= target
    return {"target": target, "value": value, "met": met}


def ask_goals(
    levels: Mapping[str, Mapping[str, Mapping[str, Any]]], deadline_ms: float, served: str = "batched"
) -> dict[str, Any]:
    """The ``POST /ask`` goals (None: not measured): answers, collapse and p99 on the ``served``
    row's levels; the p50 at one client of ``batched`` against ``unbatched``."""

    def at(name: str, n: int, key: str) -> Any:
        return levels.get(name, {}).get(str(n), {}).get(key)

    answers = at(served, ASK_SCALE_LEVEL, "answers_per_s")
    p99, abandoned = at(served, ASK_SCALE_LEVEL, "p99_ms"), at(served, ASK_SCALE_LEVEL, "abandoned")
    p50, p50_alone = at("batched", 1, "p50_ms"), at("unbatched", 1, "p50_ms")
    return {
        "answers_at_64": _at_least(answers, GOAL_ASK_ANSWERS),
        "no_collapse_at_256": _at_least(at(served, ASK_TOP_LEVEL, "answers_per_s"), answers),
        "p99_at_64": {
            "target": deadline_ms,
            "value": p99,
            "abandoned": abandoned,
            "met": None if p99 is None or abandoned is None else (p99 <= deadline_ms and abandoned == 0),
        },
        "p50_at_1": {
            "target": None if p50_alone is None else round(p50_alone + GOAL_ASK_P50_SLACK_MS, 2),
            "value": p50,
            "met": None if p50 is None or p50_alone is None else p50 <= p50_alone + GOAL_ASK_P50_SLACK_MS,
        },
    }


def measure_ask(
    root: Path,
    tmp: Path,
    env: Mapping[str, str],
    clients: Sequence[int],
    duration_s: int,
    warmup_s: int,
) -> dict[str, Any]:
    """``POST /ask`` on a batched and an unbatched one-worker server, in turn at each level."""
    project = load_project(Path(root))
    questions = [q.question for q in project.questions.questions]
    committed = project.thresholds.batching.max_batch
    served = "unbatched" if committed == 1 else "batched"
    batch = committed if committed > 1 else project.thresholds.admission.max_in_flight
    trees = {
        "batched": load_tree(root, tmp / "ask-batched", batch),
        "unbatched": load_tree(root, tmp / "ask-unbatched", 1),
    }
    levels: dict[str, dict[int, Any]] = {name: {} for name in trees}
    with contextlib.ExitStack() as stack:
        ports = {}
        for name, tree in trees.items():
            _, port = stack.enter_context(running_server(serve_argv(1, None), tree, env, tmp / f"ask-{name}.log", 1))
            ask_ready(f"http://{HOST}:{port}", json.dumps({"question": ASK_QUESTION}).encode())
            ports[name] = port
        if warmup_s > 0:  # first answers pay lazy imports and cold caches; not measured
            for port in ports.values():
                run_level(HOST, port, min(4, max(clients)), warmup_s, questions, len(clients))
        for i, n in enumerate(clients):
            for name, port in ports.items():
                levels[name][n] = run_level(HOST, port, n, duration_s, questions, i)
    configs = {
        name: {
            "batching": dataclasses.asdict(load_thresholds(tree / "eval" / "thresholds.yaml").batching),
            "levels": {str(n): lv.as_dict() for n, lv in levels[name].items()},
        }
        for name, tree in trees.items()
    }
    plain = {name: c["levels"] for name, c in configs.items()}
    return {
        "client": "a closed loop on one keep-alive connection each, Retry-After not honoured (tools/ask_load.py)",
        "questions": len(questions),
        "admission": dataclasses.asdict(project.thresholds.admission),
        "configs": configs,
        "served": served,
        "goals": ask_goals(plain, project.thresholds.budget.request_deadline_ms, served),
    }


def goals(configs: Mapping[str, Mapping[str, Any]], ratio: Mapping[str, Any]) -> dict[str, Any]:
    """Each goal's target, measured value and whether it was met (None: not measured)."""

    served = [name for name in ("one_worker", "two_workers") if name in configs]
    key = str(ABANDON_LEVEL)
    counts = {name: configs[name]["levels"][key]["abandoned"] for name in served if key in configs[name]["levels"]}
    return {
        "one_worker_vs_bare": _at_least(ratio["one_worker_vs_bare"]["best"], GOAL_ONE_VS_BARE),
        "revalidate_vs_bare": _at_least(ratio.get("revalidate_vs_bare", {}).get("best"), GOAL_REVALIDATE_VS_BARE),
        "two_workers_vs_one": _at_least(
            ratio["two_workers_vs_one"]["per_clients"].get(str(SCALE_LEVEL)), GOAL_TWO_VS_ONE
        ),
        "no_abandoned_at_16": {
            "target": 0,
            "value": counts or None,
            "met": (sum(counts.values()) == 0) if counts else None,
        },
    }


def run_load(
    root: Path,
    clients: Sequence[int] = DEFAULT_CLIENTS,
    duration_s: int = DEFAULT_DURATION_S,
    question_id: str = DEFAULT_QUESTION_ID,
    redis_url: str | None = None,
    configs: Sequence[str] = CONFIGS,
    warmup_s: int = WARMUP_S,
    time_limit_s: float = TIME_LIMIT_S,
    wrk: str = "wrk",
    ask_clients: Sequence[int] = ASK_CLIENTS,
) -> dict[str, Any]:
    """Measure ``configs`` at each of ``clients`` for ``duration_s`` seconds; the report.

    Raises ``LoadError`` when wrk (or, for two_workers without ``redis_url``,
    redis-server) is missing, a server does not start, the question id is unknown, or the
    plan cannot fit ``time_limit_s``; servers started so far are stopped either way.
    """

    unknown = [c for c in configs if c not in CONFIGS]
    if unknown or not configs:
        raise ValueError(f"configs must be a non-empty subset of {CONFIGS}, got {tuple(configs)}")
    if not clients or any(int(n) < 1 for n in clients) or int(duration_s) < 1:
        raise ValueError("clients must be positive counts and duration_s at least 1 s")
    per_run = len(clients) * int(duration_s) + warmup_s
    rows = len(ROWS) if "one_worker" in configs else 0
    asks = 2 * (len(ask_clients) * int(duration_s) + warmup_s) + 30 if "one_worker" in configs else 0
    planned = len(configs) * (per_run + 15) + rows * (per_run + 5) + asks  # 15: startup, checks; 5: a row's setup
    if planned > time_limit_s:
        raise ValueError(f"planned run of ~{planned} s exceeds time_limit_s={time_limit_s}")
    wrk_path = shutil.which(wrk)
    if wrk_path is None:
        raise LoadError("wrk not found on PATH (Debian: apt-get install wrk)")

    project = load_project(Path(root))
    if question_id not in {q.id for q in project.questions.questions}:
        raise LoadError(f"unknown question id {question_id!r}")
    rl = project.thresholds.rate_limit
    started = time.monotonic()
    results: dict[str, dict[str, Any]] = {}
    extra: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="ragc-load-") as tmp_name, contextlib.ExitStack() as stack:
        tmp = Path(tmp_name)
        script = tmp / "load.lua"
        script.write_text(WRK_SCRIPT, encoding="utf-8")
        tree = load_tree(Path(root), tmp / "project")
        env = server_env()
        if "two_workers" in configs and redis_url is None:
            redis_url = stack.enter_context(own_redis(tmp))
        # The bare route beside the one worker, measured in turn with it (see the module docstring).
        paired = "bare" in configs and "one_worker" in configs
        bare_url, bare_entry = "", {}
        if paired:
            bare_proc, bare_port = stack.enter_context(running_server(bare_argv, tree, env, tmp / "bare.log", 1))
            bare_url = f"http://{HOST}:{bare_port}/answer/{question_id}"
            bare_entry = {"workers": 1, "store": None, "worker_processes": worker_processes(bare_proc.pid)}
        plans = {
            "bare": (bare_argv, 1, None),
            "one_worker": (serve_argv(1, None), 1, None),
            "two_workers": (serve_argv(2, redis_url), 2, redis_url),
        }
        for name in configs:
            if paired and name == "bare":
                continue  # measured in turn with the one worker
            if time.monotonic() - started > time_limit_s:
                raise LoadError(f"time limit {time_limit_s} s reached before {name}")
            argv, workers, store_url = plans[name]
            with running_server(argv, tree, env, tmp / f"{name}.log", workers) as (proc, port):
                base = f"http://{HOST}:{port}"
                entry: dict[str, Any] = {
                    "workers": workers,
                    "store": None if name == "bare" else ("redis" if store_url else "memory"),
                    "worker_processes": worker_processes(proc.pid),
                }
                trips_before = redis_round_trips(store_url) if store_url else 0
                if name != "bare":
                    check = limiter_check(base, question_id, rl.max_client_burst, 2 * rl.max_client_burst)
                    if check.statuses and check.statuses[0] == 404:
                        raise LoadError(f"/answer/{question_id} is 404 on the served app")
                    entry["limiter_check"] = check.as_dict()
                answer_url = f"{base}/answer/{question_id}"
                revalidate = Probe("GET", entity_tag_of(base, question_id), "", 304) if name == "one_worker" else GET
                taken: dict[str, dict[int, Level]] = {}
                if paired and name == "one_worker":
                    turns = {"bare": (bare_url, GET), name: (answer_url, GET), "revalidate": (answer_url, revalidate)}
                    taken = _measure_in_turn(wrk_path, turns, clients, int(duration_s), script, warmup_s)
                    levels = taken[name]
                    bare_levels = {str(n): lv.as_dict() for n, lv in taken["bare"].items()}
                    results["bare"] = {**bare_entry, "levels": bare_levels}
                else:
                    levels = _measure(wrk_path, answer_url, clients, int(duration_s), script, warmup_s)
                entry["levels"] = {str(n): lv.as_dict() for n, lv in levels.items()}
                if name == "one_worker":
                    # The same process, measured for the other requests before it stops.
                    probes = {"one_worker_revalidate": (f"/answer/{question_id}", revalidate)}
                    for row, (path, probe) in probes.items():
                        got = (
                            taken["revalidate"]
                            if "revalidate" in taken
                            else _measure(wrk_path, base + path, clients, int(duration_s), script, warmup_s, probe)
                        )
                        method = f"{probe.method} {path}" + (" If-None-Match" if probe.if_none_match else "")
                        extra[row] = {**entry, "request": method, "expect": probe.expect}
                        extra[row]["levels"] = {str(n): lv.as_dict() for n, lv in got.items()}
                        extra[row].pop("limiter_check", None)
                if store_url:
                    # One EVALSHA per round trip, deciding every request of one loop turn (the
                    # warm-up, the limiter check and requests in flight when wrk stopped count too).
                    entry["redis_round_trips"] = redis_round_trips(store_url) - trips_before
                    entry["measured_requests"] = sum(lv.requests for lv in levels.values())
            results[name] = entry
            results.update(extra)
            extra.clear()
        ask = (
            measure_ask(Path(root), tmp, env, ask_clients, int(duration_s), warmup_s)
            if "one_worker" in configs
            else None
        )
    ratio = ratios(results)
    checks = [c["limiter_check"]["passed"] for c in results.values() if "limiter_check" in c]
    return {
        "meta": {
            **machine(),
            "wrk": wrk_version(wrk_path),
            "wrk_threads": WRK_THREADS,
            "duration_s": int(duration_s),
            "warmup_s": warmup_s,
            "clients": [int(n) for n in clients],
            "question_id": question_id,
            "path": f"/answer/{question_id}",
            "rate_limit": {
                "max_requests_per_minute": rl.max_requests_per_minute,
                "max_client_burst": rl.max_client_burst,
                "trusted_proxy_hops": 1,
                "clients": "one X-Forwarded-For per request (wrk script)",
            },
            "wall_s": round(time.monotonic() - started, 1),
            # Other work on a shared machine moves every figure: how much of it there was.
            "load_average_1m": load_average(),
        },
        "configs": results,
        **({"ask": ask} if ask is not None else {}),
        "ratios": ratio,
        "goals": goals(results, ratio),
        "rate_limiter_active": all(checks) if checks else None,  # None: only the bare route ran
    }


# --- rendering ----------------------------------------------------------------------------

_LABELS = {
    "bare": "bare Starlette route",
    "one_worker": "1 worker, memory store",
    "two_workers": "2 workers, shared redis",
    **ROWS,
}


def _fmt_ratio(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.2f}x"


def _met(flag: bool | None) -> str:
    return "not measured" if flag is None else ("met" if flag else "missed")


def render(report: Mapping[str, Any]) -> str:
    """The README block: one row per config and client count, then ratios and goals."""
    meta = report["meta"]
    lines = [
        f"wrk {meta['wrk']}, {meta['cpu_count']} CPUs, Python {meta['python']}, {meta['date']}"
        + (f" (1-minute load average {meta['load_average_1m']} as it ended)" if "load_average_1m" in meta else "")
        + ": "
        f"`GET {meta['path']}` (and, on one worker, its revalidation) for "
        f"{meta['duration_s']} s per level, loopback, every request a distinct client of the rate limiter. "
        f"Unexpected status: any but 2xx (304 for the revalidation).",
        "",
        "| config | clients | req/s | p50 ms | p99 ms | unexpected status | abandoned |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, entry in report["configs"].items():
        for n, lv in entry["levels"].items():
            lines.append(
                f"| {_LABELS.get(name, name)} | {n} | {lv['rps']:.0f} | {lv['p50_ms']:.1f} | "
                f"{lv['p99_ms']:.1f} | {lv['unexpected']} | {lv['abandoned']} |"
            )
    g = report["goals"]
    abandoned = g["no_abandoned_at_16"]["value"]
    abandoned_text = "n/a" if not abandoned else ", ".join(f"{k} {v}" for k, v in abandoned.items())
    active = report.get("rate_limiter_active")
    lines += [
        "",
        f"One worker / bare route: {_fmt_ratio(g['one_worker_vs_bare']['value'])} "
        f"(goal >= {GOAL_ONE_VS_BARE}x: {_met(g['one_worker_vs_bare']['met'])}); "
        f"304 revalidation / bare route: {_fmt_ratio(g['revalidate_vs_bare']['value'])} "
        f"(goal >= {GOAL_REVALIDATE_VS_BARE}x: {_met(g['revalidate_vs_bare']['met'])}); "
        f"two workers / one worker at {SCALE_LEVEL} clients: {_fmt_ratio(g['two_workers_vs_one']['value'])} "
        f"(goal >= {GOAL_TWO_VS_ONE}x: {_met(g['two_workers_vs_one']['met'])}); "
        f"abandoned at {ABANDON_LEVEL} clients: {abandoned_text} "
        f"(goal none: {_met(g['no_abandoned_at_16']['met'])}). "
        f"Rate limiter active during the run: {'n/a' if active is None else ('yes' if active else 'NO')}."
        + _round_trips(report["configs"].get("two_workers", {})),
    ]
    if "ask" in report:
        lines += ["", *render_ask(report["ask"])]
    return "\n".join(lines) + "\n"


def _round_trips(entry: Mapping[str, Any]) -> str:
    if "redis_round_trips" not in entry:
        return ""
    return (
        f" Two workers: {entry['redis_round_trips']} round trips to redis for {entry['measured_requests']} "
        "requests measured (decisions asked for in one turn of a worker's event loop share one)."
    )


def _ms(v: float | None) -> str:
    return "n/a" if v is None else f"{v:.1f}"


def render_ask(ask: Mapping[str, Any]) -> list[str]:
    """The ``POST /ask`` table and its goals (lines of the README block)."""
    lines = [
        f"`POST /ask`, one worker, the {ask['questions']} questions of the question set asked in turn by "
        f"each of N clients: {ask['client']}. Batched and unbatched servers measured in turn at each level; "
        "p50 and p99 of the answered requests only, as the client sees them, and of the service's own "
        "time on each (`budget.spent_ms`); the rest is spent outside it: reading and screening the request, "
        "the hand-over to a thread and back, and waiting for turns of the event loop.",
        "",
        "| POST /ask | clients | answers/s | p50 ms | p99 ms | service p50 ms | service p99 ms "
        "| shed share | abandoned |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    served = ask.get("served", "batched")  # reports from before the key was written served batched
    for name, entry in ask["configs"].items():
        batch = entry.get("batching", {}).get("max_batch")
        label = ASK_LABELS.get(name, name) if batch is None else f"{name} (max_batch {batch})"
        label += " (served)" if name == served else ""
        for n, lv in entry["levels"].items():
            lines.append(
                f"| {label} | {n} | {lv['answers_per_s']:.1f} | {_ms(lv['p50_ms'])} | {_ms(lv['p99_ms'])} | "
                f"{_ms(lv.get('service_p50_ms'))} | {_ms(lv.get('service_p99_ms'))} | "
                f"{lv['shed_share']:.0%} | {lv['abandoned']} |"
            )
    g = ask["goals"]
    p99, p50 = g["p99_at_64"], g["p50_at_1"]
    lines += [
        "",
        f"Served ({served}) at {ASK_SCALE_LEVEL} clients: {_ms(g['answers_at_64']['value'])} answers/s "
        f"(goal >= {GOAL_ASK_ANSWERS:g}: {_met(g['answers_at_64']['met'])}); at {ASK_TOP_LEVEL}: "
        f"{_ms(g['no_collapse_at_256']['value'])} (goal >= the {ASK_SCALE_LEVEL}-client figure: "
        f"{_met(g['no_collapse_at_256']['met'])}); p99 at {ASK_SCALE_LEVEL} clients {_ms(p99['value'])} ms with "
        f"{p99['abandoned'] if p99['abandoned'] is not None else 'n/a'} abandoned (goal <= {p99['target']:g} ms "
        f"and none: {_met(p99['met'])}); batched p50 at one client {_ms(p50['value'])} ms (goal <= unbatched + "
        f"{GOAL_ASK_P50_SLACK_MS:g} ms = {_ms(p50['target'])}: {_met(p50['met'])}).",
    ]
    return lines


def main(argv: Sequence[str] | None = None) -> int:

    p = argparse.ArgumentParser(prog="python -m tools.loadtest", description=__doc__.split("\n")[0])
    p.add_argument("--root", help="project directory (default: found from the current directory)")
    p.add_argument("--duration", type=int, default=DEFAULT_DURATION_S, help="seconds per level")
    p.add_argument("--clients", type=int, nargs="+", default=list(DEFAULT_CLIENTS))
    p.add_argument("--configs", nargs="+", choices=CONFIGS, default=list(CONFIGS))
    p.add_argument("--question", default=DEFAULT_QUESTION_ID)
    p.add_argument("--redis", help="use this redis for two_workers instead of a throwaway one")
    p.add_argument("--no-write", action="store_true", help="print only")
    args = p.parse_args(argv)
    root = Path(args.root) if args.root else find_root()
    try:
        report = run_load(
            root, clients=tuple(args.clients), duration_s=args.duration, question_id=args.question,
            redis_url=args.redis, configs=tuple(args.configs),
        )  # fmt: skip
    except (LoadError, ValueError) as exc:
        print(f"loadtest: {exc}", file=sys.stderr)
        return 2
    if not args.no_write:
        out = Paths(root).result("load.json")
        out.write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    print(render(report), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
