"""The hostile-input probe: every case of the threat model replayed against the real server.

Contract:
- ``run(root)`` starts ``rag-contract serve`` (this checkout's package) on 127.0.0.1 from the
  project at ``root`` and from temporary broken copies of it, and replays each case: hostile
  requests (oversized bodies declared and chunked, unknown and 70 KB ids, ``text/plain``, a
  question of invisible characters, a trailing slash under a foreign ``Host``, ``nosniff``,
  forged ``X-Forwarded-For`` entries, injection phrasings, slow clients), overload (64
  concurrent ``/ask`` clients; a flood of unique client identities), broken files (an index
  built by another embedder, hash-consistent but structurally broken index files, a directory
  in place of a file, non-UTF-8 YAML, a binary corpus file whose manifest hash matches) and
  bad settings (``PORT=abc``, ``REDIS_URL=notaurl``, ``--root`` naming another project), and
  traces one start for anything sent beyond loopback (when strace is installed).
- The main server runs from a copy of the project whose one change is
  ``rate_limit.trusted_proxy_hops: 1`` (``tools.loadtest.load_tree``), and every probe request
  carries its own ``X-Forwarded-For``: the limiter runs on every request, and no case is
  refused for the requests of another (the forged-entry case checks the limiter itself).
- Every reply is counted by status; every server's output is read for tracebacks. Each case is
  a row: what was expected, what was observed, whether they agree, and its figures. The report
  (``eval/results/probe.json``) holds machine-independent metadata, the rows, the totals and
  the issue's goals (no 500, no traceback, peak RSS growth under four parallel 128 MB bodies,
  no admitted request abandoned among 64 clients, shed replies sent in their turns with
  ``Retry-After`` (the slowest within 5 ms of the last turn its burst needs at
  ``admission.refusals_per_s``), memory bounded under 100 000 identities, ``/health`` p99 under
  a cold stampede over every fixed id, and two retry storms (64 identities ignoring
  ``Retry-After`` over 256 connections, one wrk run each, on ``/answer`` and on
  ``/health/live``: the honest clients' p99, ``/health`` p99 and answers/s against the same
  server with no storm)), each with its value and whether it was met. Timings vary by machine
  and load: tests hold the report's structure and its arithmetic, not equality with a new run.
- Loopback only; bounded in count (a fixed list of requests, ``STORM_CLIENTS`` at once, one
  ``IDENTITY_S`` wrk run) and in time (every wait has a timeout; a run longer than
  ``TIME_LIMIT_S`` stops with ``ProbeError``); every process started is stopped in a
  ``finally``.
- ``render(report)`` is the README's markdown for such a report.
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import hashlib
import io
import itertools
import json
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import tracemalloc
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote, quote_plus

import numpy as np
import yaml

from rag_contract.config.thresholds import AdmissionConfig, load_thresholds
from rag_contract.index.store import FILES
from rag_contract.project import Paths, find_root
from rag_contract.web.ratelimit import Allowance, MemoryStore
from rag_contract.web.ratelimit.identity import client_identity
from tools import body_memory, injection, loadtest
from tools.machine import load_average, machine
from tools.network_trace import STRACE, stray, traced
from tools.project_copy import copy_project

HOST = "127.0.0.1"  # loopback only, by construction
MAX_BUCKETS = MemoryStore.MAX_BUCKETS
REPORT = "probe.json"
TIME_LIMIT_S = 240.0
REQUEST_TIMEOUT_S = 20.0
TRACEBACK = "Traceback (most recent call last)"

GOAL_BODY_RSS_MB = 10.0
STORM_CLIENTS = 64
GOAL_SHED_MS = 5.0
IDENTITIES = 100_000
BYTES_PER_BUCKET_CEILING = 1_000  # measured ~300 (key, state, expiry, dict slot): a ceiling, not a fit
IDENTITY_S = 6  # the wrk run that sends one identity per request over HTTP
REFUSAL_S = 30.0  # a refusal comes before the model or the socket
SLOW_BOUND_S = 10.0  # the header and body read deadlines serve runs with
ECHO_MAX = 80  # ids a reply may echo
LONG_ID = 70_000
WIDE_EMBEDDER = "openai-text-embedding-3-small"
WIDE_DIMS = 1536
MARK_CHARS = 123  # a max_question_chars only the --root copy has
QUESTION = "What does the no-cache directive of Cache-Control mean?"
# Asked only of the cold server, by GET /ask?q= and POST /ask: no log line may hold it.
MARK_QUESTION = "Which status code answers a request target longer than the server will read?"
WRITE_BOUND_S = 10.0  # the write timeout serve runs with (slow_clients.WRITE_TIMEOUT_S)
PIPELINED = 64  # GET / requests a client that never reads sends on one connection
GOAL_COLD_PAGE_S = 2.0
GOAL_COLD_HEALTH_MS = 100.0
INVALID_HOSTS = ("evil.example/path", "exa mple.com", "[::1", ":99999")
# Environment no server may inherit (another port, store or root, or a key).
_SCRUBBED_ENV = (*loadtest._SCRUBBED_ENV, "OPENAI_API_KEY", "ANTHROPIC_API_KEY")


class ProbeError(RuntimeError):
    """The probe could not be carried out (a server that did not start, the time limit)."""


# --- values -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Reply:
    status: int | None  # None: the connection closed with no status line
    headers: Mapping[str, str]  # lower-cased names
    body: bytes
    seconds: float  # from the request's last byte sent to the reply's last byte

    def json(self) -> dict[str, Any]:
        try:
            data = json.loads(self.body)
        except ValueError:
            return {}
        return data if isinstance(data, dict) else {}

    @property
    def error(self) -> str | None:
        return self.json().get("error")

    def brief(self) -> str:
        if self.status is None:
            return "closed, no reply"
        detail = self.error or self.json().get("reason")
        return f"{self.status}" + (f" {detail}" if detail else "")


@dataclass(frozen=True)
class Case:
    """One row of the report: what the threat model says should happen, and what did."""

    name: str
    expected: str
    observed: str
    passed: bool
    figures: Mapping[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        row: dict[str, Any] = {
            "name": self.name,
            "expected": self.expected,
            "observed": self.observed,
            "passed": self.passed,
        }
        if self.figures:
            row["figures"] = dict(self.figures)
        return row


class Tally:
    """Every status any reply had, from every server (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.statuses: Counter[str] = Counter()

    def add(self, status: int | None, n: int = 1) -> None:
        with self._lock:
            self.statuses["none" if status is None else str(status)] += n


# --- HTTP over a plain socket -----------------------------------------------------------------


def parse_reply(raw: bytes, seconds: float) -> Reply:
    head, _, body = raw.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    words = lines[0].split()
    if len(words) < 2 or not words[1].isdigit():
        return Reply(None, {}, raw, seconds)
    headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
    if headers.get("transfer-encoding", "").lower() == "chunked":
        out, rest = b"", body
        while rest:
            size_line, _, rest = rest.partition(b"\r\n")
            size = int(size_line.split(b";")[0] or b"0", 16)
            if size == 0:
                break
            out, rest = out + rest[:size], rest[size + 2 :]
        body = out
    return Reply(int(words[1]), headers, body, seconds)


def exchange(
    port: int, data: bytes, timeout: float = REQUEST_TIMEOUT_S, ready: threading.Barrier | None = None
) -> Reply:
    """Send ``data`` (a whole request, ``Connection: close``) and read the reply to its end."""
    with socket.create_connection((HOST, port), timeout=timeout) as sock:
        if ready is not None:
            ready.wait(timeout=timeout)
        sock.sendall(data)
        started = time.perf_counter()
        raw = b""
        try:
            while chunk := sock.recv(65536):
                raw += chunk
        except (ConnectionResetError, TimeoutError):
            pass  # what arrived is the reply
        seconds = time.perf_counter() - started
    return parse_reply(raw, seconds)


def request_bytes(method: str, path: str, headers: Mapping[str, str] | None = None, body: bytes | None = None) -> bytes:
    fields = {"Host": "127.0.0.1", "Connection": "close", **(headers or {})}
    lines = [f"{method} {path} HTTP/1.1", *(f"{k}: {v}" for k, v in fields.items())]
    if body is not None:
        lines.append(f"Content-Length: {len(body)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + (body or b"")


@dataclass
class Client:
    """Requests to one server, each counted in ``tally`` and, unless told otherwise, from a
    client of its own (``X-Forwarded-For`` in 198.18.0.0/15, the benchmarking range)."""

    port: int
    tally: Tally
    _next: Iterator[int] = field(default_factory=itertools.count)

    def identity(self) -> str:
        i = next(self._next)
        return f"198.{18 + (i >> 16) % 2}.{(i >> 8) & 255}.{i & 255}"

    def prepared(
        self, method: str, path: str, headers: Mapping[str, str] | None = None, body: bytes | None = None
    ) -> bytes:
        return request_bytes(method, path, {"X-Forwarded-For": self.identity(), **(headers or {})}, body)

    def send(self, data: bytes, ready: threading.Barrier | None = None) -> Reply:
        reply = exchange(self.port, data, ready=ready)
        self.tally.add(reply.status)
        return reply

    def get(self, path: str, headers: Mapping[str, str] | None = None) -> Reply:
        return self.send(self.prepared("GET", path, headers))

    def post_json(self, path: str, payload: Any, content_type: str | None = "application/json") -> Reply:
        body = json.dumps(payload).encode()
        return self.send(self.prepared("POST", path, {"Content-Type": content_type} if content_type else {}, body))


# --- servers ------------------------------------------------------------------------------


def server_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in loadtest.server_env().items() if k not in _SCRUBBED_ENV and not k.endswith("_API_KEY")}
    return env | dict(extra or {})


def serve_argv(root: Path) -> Callable[[int], list[str]]:
    def argv(port: int) -> list[str]:
        return [
            sys.executable,
            "-m",
            "rag_contract.cli",
            "--root",
            str(root),
            "serve",
            "--host",
            HOST,
            "--port",
            str(port),
        ]

    return argv


@dataclass
class Logs:
    """Every server output file of the run, read at the end for tracebacks."""

    directory: Path
    files: list[Path] = field(default_factory=list)

    def new(self, name: str) -> Path:
        path = self.directory / f"{len(self.files):02d}-{name}.log"
        self.files.append(path)
        return path

    def tracebacks(self) -> dict[str, int]:
        out = {}
        for path in self.files:
            text = path.read_text(errors="replace") if path.is_file() else ""
            out[path.stem] = text.count(TRACEBACK)
        return out


@contextlib.contextmanager
def served(
    root: Path, logs: Logs, name: str, cwd: Path | None = None, env: Mapping[str, str] | None = None
) -> Iterator[tuple[subprocess.Popen, int]]:
    log = logs.new(name)
    with loadtest.running_server(serve_argv(root), cwd or root, server_env(env), log, 1) as (proc, port):
        yield proc, port


def access_lines(log: Path, offset: int) -> list[dict[str, Any]]:
    """The access log's JSON lines written to ``log`` past byte ``offset``."""
    with log.open("rb") as f:
        f.seek(offset)
        text = f.read().decode("utf-8", errors="replace")
    out = []
    for line in text.splitlines():
        if line.startswith("{"):
            with contextlib.suppress(json.JSONDecodeError):
                out.append(json.loads(line))
    return out


def _spread(ms: Sequence[float]) -> dict[str, float] | None:
    if not ms:
        return None
    return {"p50": round(percentile(ms, 0.5), 2), "p99": round(percentile(ms, 0.99), 2), "max": round(max(ms), 2)}


def until_loaded(client: Client, timeout_s: float = 60.0) -> Reply:
    """``POST /ask`` until the model has loaded (503 ``embedder_loading`` with ``Retry-After`` first)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        r = client.post_json("/ask", {"question": QUESTION})
        if not (r.status == 503 and r.error == "embedder_loading"):
            return r
        time.sleep(float(r.headers.get("retry-after", 1)))
    raise ProbeError(f"the model did not load within {timeout_s} s")


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return round(int(line.split()[1]) / 1024, 1)
    raise ProbeError(f"no VmRSS for pid {pid}")


def cpu_s(pid: int) -> float:
    """The process's user and system CPU time so far, in seconds (/proc/<pid>/stat)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


# --- cases on the main server -------------------------------------------------------------


def oversized_bodies(client: Client, pid: int) -> Case:
    m = body_memory.oversized_bodies(client.port, pid, lambda i: f"192.0.2.{100 + i}")
    statuses = Counter(b["status"].split(" ", 2)[1] if b["status"].startswith("HTTP/") else "none" for b in m["bodies"])
    for status, n in statuses.items():
        client.tally.add(int(status) if status.isdigit() else None, n)
    sent = {kind: max(b["sent_mib"] for b in m["bodies"] if b["kind"] == kind) for kind in ("declared", "chunked")}
    growth = m["growth_mib"]
    return Case(
        "four parallel 128 MiB bodies, declared then chunked",
        f"413 each; peak RSS grows by at most {GOAL_BODY_RSS_MB:g} MB",
        f"{dict(statuses)}; peak RSS +{growth} MiB; most sent before the refusal: "
        f"{sent['declared']} MiB declared, {sent['chunked']} MiB chunked",
        set(statuses) == {"413"} and growth <= GOAL_BODY_RSS_MB,
        {"growth_mib": growth, "peak_rss_before_mib": m["peak_rss_before_mib"], "max_sent_mib": sent},
    )


def unknown_ids(client: Client) -> Case:
    replies = [client.get(p) for p in ("/answer/q9999", "/q/q9999", "/section/rfc9999:1")]
    return Case(
        "unknown ids",
        "404 each",
        ", ".join(r.brief() for r in replies),
        all(r.status == 404 for r in replies),
    )


def long_id(client: Client) -> Case:
    replies = [client.get(f"{p}{'A' * LONG_ID}") for p in ("/answer/", "/q/", "/section/")]
    sizes = [len(r.body) for r in replies]
    echoed = any(b"A" * (ECHO_MAX + 1) in r.body for r in replies)
    return Case(
        f"a {LONG_ID // 1000} KB id",
        f"404 or refused at the edge (4xx); a body under 4 KB echoing at most {ECHO_MAX} characters",
        ", ".join(f"{r.status} ({n} bytes)" for r, n in zip(replies, sizes, strict=True))
        + ("; echoed" if echoed else "; not echoed"),
        all(r.status is not None and 400 <= r.status < 500 for r in replies) and max(sizes) < 4096 and not echoed,
        {"max_body_bytes": max(sizes)},
    )


def content_types(client: Client) -> Case:
    replies = [
        client.post_json("/ask", {"question": "What is a URI?"}, "text/plain"),
        client.post_json("/ask", {"question": "What is a URI?"}, None),
    ]
    return Case(
        "POST /ask as text/plain and with no content type",
        "415 each",
        ", ".join(r.brief() for r in replies),
        all(r.status == 415 for r in replies),
    )


def bidi_question(client: Client) -> Case:
    """A question holding U+202E (RIGHT-TO-LEFT OVERRIDE), posted and asked as a page: refused,
    and the control is in no reply (a display spoof otherwise)."""
    question = "What is a \u202eURI?"
    posted = client.post_json("/ask", {"question": question})
    page = client.get("/ask?q=" + quote_plus(question))
    echoed = [r for r in (posted, page) if "\u202e".encode() in r.body or b"\\u202e" in r.body.lower()]
    return Case(
        "a question holding U+202E, posted and as a page",
        "422 question_bidi_control each; the control in no reply",
        f"POST {posted.brief()}, page {page.status}; echoed in {len(echoed)}",
        posted.status == 422
        and posted.json().get("reason") == "question_bidi_control"
        and page.status == 422
        and not echoed,
    )


def content_coding(client: Client) -> Case:
    """RFC 9110 sections 8.4 and 15.5.16: a content-coded /ask body is not read."""
    plain = json.dumps({"question": "What is a URI?"}).encode()
    replies = [
        client.send(client.prepared("POST", "/ask", {"Content-Type": "application/json", "Content-Encoding": c}, b))
        for c, b in (("gzip", plain), ("gzip", gzip.compress(plain)))
    ]
    return Case(
        "POST /ask with Content-Encoding: gzip, the body plain and gzipped (RFC 9110 8.4)",
        "415 content_encoding_not_supported each, with Accept-Encoding: identity",
        ", ".join(
            f"{r.status} {r.json().get('reason')} Accept-Encoding {r.headers.get('accept-encoding')!r}" for r in replies
        ),
        all(r.status == 415 and r.headers.get("accept-encoding") == "identity" for r in replies),
    )


def invisible_question(client: Client) -> Case:
    r = client.post_json("/ask", {"question": "\u200b\u200d\ufeff\u2060\u00ad"})
    return Case(
        "a question of only invisible characters",
        "422 question_empty",
        f"{r.status} {r.json().get('reason')}",
        r.status == 422 and r.json().get("reason") == "question_empty",
    )


def relative_redirect(client: Client) -> Case:
    r = client.get("/health/", {"Host": "evil.example"})
    where = r.headers.get("location")
    return Case(
        "a trailing slash under a foreign Host header",
        "307 to the relative path /health",
        f"{r.status} Location {where!r}",
        r.status == 307 and where == "/health",
    )


def nosniff(client: Client) -> Case:
    replies = {p: client.get(p) for p in ("/health", "/answer/q11", "/answer/q9999")}
    replies["POST /ask"] = client.post_json("/ask", {"question": ""})
    missing = [p for p, r in replies.items() if r.headers.get("x-content-type-options") != "nosniff"]
    return Case(
        "JSON replies say nosniff",
        "X-Content-Type-Options: nosniff on every JSON reply (200, 404, 422)",
        "missing on " + ", ".join(missing) if missing else f"present on all {len(replies)}",
        not missing,
    )


def forged_forwarded_for(client: Client, burst: int) -> Case:
    # The proxy (one trusted hop) appends the peer it saw; whatever the client wrote before is forged.
    statuses = []
    for i in range(2 * burst):
        r = client.send(request_bytes("GET", "/answer/q11", {"X-Forwarded-For": f"203.0.113.{i}, 192.0.2.77"}))
        statuses.append(r)
    refused = [r for r in statuses if r.status == 429]
    served = sum(1 for r in statuses[:burst] if r.status == 200)
    with_retry = all("retry-after" in r.headers for r in refused)
    return Case(
        "forged X-Forwarded-For entries (a new one per request) before the proxy's",
        f"one bucket: the first {burst} served, the next {burst} 429 with Retry-After",
        f"{served} served, {len(refused)} refused" + ("" if with_retry else " (a 429 without Retry-After)"),
        served == burst and len(refused) == burst and all(r.status == 429 for r in statuses[burst:]) and with_retry,
    )


def injection_phrasings(client: Client, root: Path) -> Case:
    cases = injection.load_cases(root / injection.CASES)
    hostile = [client.post_json("/ask", {"question": c.text}) for c in cases.hostile]
    benign = [client.post_json("/ask", {"question": c.text}) for c in cases.benign]
    caught = sum(1 for r in hostile if r.status == 422 and r.json().get("reason") == "prompt_injection")
    refused = sum(1 for r in benign if r.json().get("reason") == "prompt_injection")
    other = Counter(str(r.status) for r in benign)
    rate = caught / len(hostile)
    return Case(
        "injection phrasings and benign look-alikes (eval/injection.yaml) over HTTP",
        f"catch rate at least {cases.min_catch_rate:g}; at most {cases.max_false_refusals} benign refused",
        f"{caught} of {len(hostile)} caught (422 prompt_injection); {refused} of {len(benign)} benign refused; "
        f"benign replies {dict(sorted(other.items()))}",
        rate >= cases.min_catch_rate and refused <= cases.max_false_refusals,
        {"catch_rate": round(rate, 3), "false_refusals": refused},
    )


def slow_headers(port: int) -> tuple[str, float]:
    """Headers started and never finished: what the server did and when."""
    started = time.monotonic()
    with socket.create_connection((HOST, port), timeout=SLOW_BOUND_S + 10) as sock:
        sock.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
        try:
            raw = sock.recv(200)
        except OSError:
            raw = b""
    return (raw.split(b"\r\n", 1)[0].decode("latin-1") or "closed"), time.monotonic() - started


def slow_body(port: int) -> tuple[str, float]:
    """A body declared and never sent."""
    started = time.monotonic()
    head = request_bytes("POST", "/ask", {"Content-Type": "application/json", "X-Forwarded-For": "192.0.2.90"})
    with socket.create_connection((HOST, port), timeout=SLOW_BOUND_S + 10) as sock:
        sock.sendall(head.replace(b"Connection: close", b"Content-Length: 100"))  # and not a byte of it
        try:
            raw = sock.recv(200)
        except OSError:
            raw = b""
    return (raw.split(b"\r\n", 1)[0].decode("latin-1") or "closed"), time.monotonic() - started


def slow_clients_case(results: Mapping[str, tuple[str, float]], tally: Tally) -> Case:
    for line, _ in results.values():
        words = line.split()
        tally.add(int(words[1]) if len(words) > 1 and words[1].isdigit() else None)
    ok = all(
        (line == "closed" or " 408 " in f"{line} ") and seconds <= SLOW_BOUND_S + 2
        for line, seconds in results.values()
    )
    return Case(
        "slow clients: headers never finished; a declared body never sent",
        f"408 or the connection closed within {SLOW_BOUND_S:g} s (+2 s slack)",
        "; ".join(f"{k}: {line} after {s:.1f} s" for k, (line, s) in results.items()),
        ok,
        {k: round(s, 2) for k, (_, s) in results.items()},
    )


def _raw(client: Client, head: str, body: bytes = b"") -> bytes:
    """A request head written as given (no Connection: close), with the client's own identity."""
    lines = head.split("\r\n")
    lines.insert(1, f"X-Forwarded-For: {client.identity()}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


def smuggling(client: Client) -> Case:
    """RFC 9112 section 6.1: Content-Length with Transfer-Encoding, a second request in the body."""
    hidden = b"0\r\n\r\nGET /answer/SMUGGLED HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
    head = f"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: {len(hidden)}\r\nTransfer-Encoding: chunked"
    r = client.send(_raw(client, head, hidden))
    replies = r.body.count(b"HTTP/1.1 ") + (r.status is not None)
    closed = r.seconds < REQUEST_TIMEOUT_S / 2  # the read ended on the server's close, not on the timeout
    return Case(
        "Content-Length with Transfer-Encoding, a second request hidden in the body (RFC 9112 6.1)",
        "400 and the connection closed; the hidden request never answered",
        f"{r.brief()}, {replies} reply, " + ("closed" if closed else "left open"),
        r.status == 400 and replies == 1 and closed and b"SMUGGLED" not in r.body,
    )


def request_targets(client: Client) -> Case:
    """RFC 9112 section 3: absolute-form accepted, invalid Host 400, another major version refused."""
    absolute = client.get(f"http://{HOST}:{client.port}/health")
    hosts = {h: client.get("/health", {"Host": h}) for h in INVALID_HOSTS}
    version = client.send(_raw(client, "GET /health HTTP/2.0\r\nHost: 127.0.0.1\r\nConnection: close"))
    ok = absolute.status == 200 and all(r.status == 400 for r in hosts.values()) and version.status in (400, 505)
    return Case(
        "absolute-form target, invalid Host values, HTTP/2.0 on an HTTP/1 line (RFC 9112 3.2, 3.2.2, 2.3)",
        "200 for the absolute form; 400 for each invalid Host; 505 (or 400) for the version",
        f"absolute {absolute.status}; hosts "
        + ", ".join(f"{h!r} {r.status}" for h, r in hosts.items())
        + f"; HTTP/2.0 {version.status}",
        ok,
    )


def methods_and_forms(client: Client) -> Case:
    """RFC 9110 sections 9.1 and 10.2.1, RFC 9112 sections 2.2, 3.2.4 and 3.2.3: what a method
    or a request-target form the server does not serve is told."""
    put = client.send(client.prepared("PUT", "/ask"))
    unknown = client.send(client.prepared("BREW", "/ask"))
    star = client.send(_raw(client, "GET * HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close"))
    blank = client.send(b"\r\n" + client.prepared("GET", "/health"))
    tunnel = client.send(_raw(client, "CONNECT 127.0.0.1:443 HTTP/1.1\r\nHost: 127.0.0.1:443"))
    allow = put.headers.get("allow")
    return Case(
        "methods and target forms (RFC 9110 9.1, 10.2.1; RFC 9112 2.2, 3.2.4, 3.2.3)",
        "PUT /ask 405 with Allow: GET, HEAD, POST; an unknown method 501; GET * 400; "
        "an empty line before the request line ignored (200); CONNECT 501",
        f"PUT {put.status} Allow {allow!r}; BREW {unknown.status}; GET * {star.status}; "
        f"empty line first {blank.status}; CONNECT {tunnel.status}",
        put.status == 405
        and allow == "GET, HEAD, POST"
        and unknown.status == 501
        and star.status == 400
        and blank.status == 200
        and tunnel.status == 501,
    )


def target_authority(client: Client) -> Case:
    """RFC 9110 sections 7.4 and 4.2.4: an https target on this plain connection, and userinfo in an
    absolute-form target."""
    https = client.get(f"https://{HOST}:{client.port}/health")
    userinfo = client.get(f"http://user:secret@{HOST}:{client.port}/health")
    return Case(
        "an https target on a plain connection, userinfo in the target (RFC 9110 7.4, 4.2.4)",
        "421 for the https target; 400 for the userinfo",
        f"https {https.status}; userinfo {userinfo.status}",
        https.status == 421 and userinfo.status == 400,
    )


def validator_edges(client: Client) -> Case:
    """RFC 9110 sections 13.1.1 and 15.1: the smaller edges of the conditional and error replies."""
    guarded = client.send(
        client.prepared(
            "POST", "/ask", {"Content-Type": "application/json", "If-Match": '"any"'}, b'{"question": "What is a URI?"}'
        )
    )
    not_utf8 = client.get("/ask?q=%ff")
    missing = client.get("/no/such/path")
    page_412 = client.get("/", {"If-Match": '"other"'})
    css = client.get("/static/site.css")
    css_tag = css.headers.get("etag", "")
    css_304 = client.get("/static/site.css", {"If-None-Match": css_tag})
    page_type = page_412.headers.get("content-type", "")
    return Case(
        "If-Match on POST /ask, a query not UTF-8, a 404's caching, a page's 412, the stylesheet's validator",
        "412; 400; Cache-Control: no-cache; 412 as text/html; an ETag and 304 on revalidation",
        f"POST /ask If-Match {guarded.status}; GET /ask?q=%ff {not_utf8.status}; 404 Cache-Control "
        f"{missing.headers.get('cache-control')!r}; page 412 {page_412.status} {page_type.split(';')[0]}; "
        f"stylesheet ETag {'yes' if css_tag else 'no'}, revalidated {css_304.status}",
        guarded.status == 412
        and not_utf8.status == 400
        and missing.headers.get("cache-control") == "no-cache"
        and page_412.status == 412
        and page_type.startswith("text/html")
        and bool(css_tag)
        and css_304.status == 304,
    )


HEAD_REFUSALS = 50  # 12 000-field heads sent to time the server's CPU per refusal
GOAL_REFUSAL_CPU_MS = 2.0  # what parsing such a head cost before it was refused: ~19-31 ms


def _send_in(client: Client, data: bytes, piece: int | None) -> Reply:
    """``data`` in one write or in ``piece``-byte writes (stopping when the server has closed)."""
    with socket.create_connection((HOST, client.port), timeout=REQUEST_TIMEOUT_S) as sock:
        started = time.perf_counter()
        with contextlib.suppress(OSError):
            for at in range(0, len(data), piece or len(data)):
                sock.sendall(data[at : at + (piece or len(data))])
        raw = b""
        with contextlib.suppress(OSError):
            while chunk := sock.recv(65536):
                raw += chunk
    reply = parse_reply(raw, time.perf_counter() - started)
    client.tally.add(reply.status)
    return reply


def head_limits(client: Client, pid: int | None = None) -> Case:
    """RFC 6585 section 5 and RFC 9112 section 7.1.1: heads and trailers bounded on their bytes,
    in one write or in pieces; with ``pid``, the server's CPU per refused 12 000-field head."""
    head = "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close"
    chunked = "POST /ask HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked"
    body = b'{"question": "What is a URI?"}'
    many = _raw(client, head + "\r\n" + "a:b\r\n" * 12_000)[:-2]  # 60 KB: one read of the server's
    cases = {
        "12 000 fields, one write": (many, None, 431),
        "12 000 fields, 4 KB pieces": (many, 4096, 431),
        "a 100 KB field": (_raw(client, head + "\r\nX-Big: " + "a" * 100_000), None, 431),
        "a 100 KB chunk extension": (
            _raw(client, chunked, b"%x;e=" % len(body) + b"e" * 100_000 + b"\r\n" + body + b"\r\n0\r\n\r\n"),
            None,
            400,
        ),
        "10 000 trailer fields": (
            _raw(client, chunked, b"%x\r\n" % len(body) + body + b"\r\n0\r\n" + b"a:b\r\n" * 10_000 + b"\r\n"),
            None,
            431,
        ),
    }
    replies = {name: _send_in(client, data, piece) for name, (data, piece, _) in cases.items()}
    ok = all(replies[name].status == status for name, (_, _, status) in cases.items())
    observed = "; ".join(f"{name} {r.status}" for name, r in replies.items())
    figures: dict[str, Any] = {}
    if pid is not None:
        before = cpu_s(pid)
        for _ in range(HEAD_REFUSALS):
            _send_in(client, _raw(client, head + "\r\n" + "a:b\r\n" * 12_000)[:-2], None)
        per_ms = (cpu_s(pid) - before) * 1000 / HEAD_REFUSALS
        figures = {"refusal_cpu_ms": round(per_ms, 2), "refusals": HEAD_REFUSALS}
        observed += f"; server CPU {per_ms:.2f} ms per refused 12 000-field head ({HEAD_REFUSALS} sent)"
        ok = ok and per_ms <= GOAL_REFUSAL_CPU_MS
    return Case(
        "heads and trailers over the limits, in one write and in pieces (RFC 6585 5, RFC 9112 7.1.1)",
        "431 for 12 000 fields (either way), a 100 KB field and 10 000 trailer fields; 400 for a 100 KB chunk "
        f"extension; a refusal costs the server at most {GOAL_REFUSAL_CPU_MS:g} ms of CPU",
        observed,
        ok,
        figures,
    )


def _well_formed(r: Reply) -> bool:
    return (
        bool(r.headers.get("date"))
        and r.headers.get("x-content-type-options") == "nosniff"
        and r.headers.get("content-length") == str(len(r.body))
    )


def protocol_replies(client: Client) -> Case:
    """RFC 9110 sections 6.6.1 and 8.6: the replies the protocol writes itself (a refused head,
    one h11 cannot parse) carry Date, nosniff and their length, as the app's do."""
    refused = client.send(_raw(client, "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nHost: 127.0.0.2"))
    unparsable = client.send(_raw(client, "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nbad header"))
    replies = {"refused": refused, "unparsable": unparsable}
    return Case(
        "the protocol's own 400s: Date, nosniff, Content-Length (RFC 9110 6.6.1, 8.6)",
        "400 each, with Date, X-Content-Type-Options: nosniff and a Content-Length equal to the body's",
        "; ".join(
            f"{k} {r.status} " + ("all three" if _well_formed(r) else f"fields {sorted(r.headers)}")
            for k, r in replies.items()
        ),
        all(r.status == 400 and _well_formed(r) for r in replies.values()),
    )


def conditionals(client: Client) -> Case:
    """RFC 9110 sections 13.1.1 (If-Match, strong comparison) and 5.3 (a field on two lines is one list)."""
    first = client.get("/questions")
    tag = first.headers.get("etag", "")
    failed = client.get("/questions", {"If-Match": '"not-the-tag"'})
    matched = client.get("/questions", {"If-Match": tag})
    two_lines = client.send(
        _raw(
            client,
            f'GET /questions HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nIf-None-Match: "other"'
            f"\r\nIf-None-Match: {tag}",
        )
    )
    return Case(
        "If-Match, and If-None-Match on two lines (RFC 9110 13.1.1, 5.3)",
        "412 for an If-Match naming another tag, 200 for the current one; 304 for the two-line list",
        f"If-Match other {failed.status}, current {matched.status}; two lines {two_lines.status}",
        bool(tag) and failed.status == 412 and matched.status == 200 and two_lines.status == 304,
    )


def page_edges(client: Client, max_chars: int) -> Case:
    page = client.get("/")
    css = client.get("/static/site.css")
    long_q = client.get("/ask?q=" + "x" * (max_chars + 1))
    return Case(
        "page headers and an over-long GET /ask?q=",
        "Referrer-Policy: no-referrer on pages; nosniff on the stylesheet; 414 for a question too long for the URL",
        f"Referrer-Policy {page.headers.get('referrer-policy')!r}; stylesheet nosniff "
        f"{css.headers.get('x-content-type-options')!r}; long question {long_q.status}",
        page.headers.get("referrer-policy") == "no-referrer"
        and css.headers.get("x-content-type-options") == "nosniff"
        and long_q.status == 414,
    )


def aborted_uploads(client: Client, log: Path) -> Case:
    """A body cut off by the client, and a malformed chunk: the server's output gains no traceback."""
    offset = log.stat().st_size
    head = "POST /ask HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json"
    for data in (
        _raw(client, head + "\r\nContent-Length: 100", b'{"quest'),
        _raw(client, head + "\r\nTransfer-Encoding: chunked", b'5\r\n{"que\r\nzz\r\n'),
    ):
        with socket.create_connection((HOST, client.port), timeout=REQUEST_TIMEOUT_S) as sock:
            sock.sendall(data)
            sock.shutdown(socket.SHUT_WR)
            with contextlib.suppress(OSError):
                while sock.recv(65536):
                    pass
    time.sleep(0.5)  # the handler meets the disconnect after the socket closes
    with log.open("rb") as f:
        f.seek(offset)
        text = f.read().decode("utf-8", errors="replace")
    found = text.count(TRACEBACK) + text.count("Exception in ASGI")
    return Case(
        "uploads aborted mid-body and by a malformed chunk",
        "no traceback and no 'Exception in ASGI' in the server's output",
        f"{found} found",
        found == 0,
    )


UPGRADES = 20  # websocket upgrade requests sent to count the log lines they cost


def upgrade_requests(client: Client, log: Path) -> Case:
    """``Upgrade: websocket`` requests: served as plain HTTP (RFC 9110 section 7.8), and the
    server's output gains no WARNING line for them (uvicorn wrote two per request)."""
    offset = log.stat().st_size
    head = "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: Upgrade, close\r\nUpgrade: websocket"
    replies = [client.send(_raw(client, head + "\r\nSec-WebSocket-Version: 13")) for _ in range(UPGRADES)]
    time.sleep(0.2)  # the server's output is flushed line by line
    with log.open("rb") as f:
        f.seek(offset)
        lines = f.read().decode("utf-8", errors="replace").splitlines()
    # uvicorn's lines: "WARNING:  Unsupported upgrade request." and its package advice
    warnings = sum(1 for line in lines if "WARNING" in line or "upgrade" in line.lower())
    statuses = Counter(str(r.status) for r in replies)
    return Case(
        f"{UPGRADES} requests with Upgrade: websocket",
        "each served as plain HTTP; no WARNING line in the server's output",
        f"statuses {dict(statuses)}; {warnings} WARNING lines",
        warnings == 0 and all(r.status is not None and r.status < 500 for r in replies),
    )


def idle_connection(port: int) -> tuple[bytes, float]:
    """A connection that sends nothing: what arrives before it closes, and when."""
    started = time.monotonic()
    with socket.create_connection((HOST, port), timeout=SLOW_BOUND_S + 10) as sock:
        try:
            raw = sock.recv(200)
        except OSError:
            raw = b""
    return raw, time.monotonic() - started


def idle_case(raw: bytes, seconds: float) -> Case:
    line = raw.split(b"\r\n", 1)[0].decode("latin-1")
    return Case(
        "a fresh connection that sends nothing",
        f"closed within {SLOW_BOUND_S:g} s (+2 s) without a reply (no unsolicited 408)",
        f"{line or 'closed, no reply'} after {seconds:.1f} s",
        raw == b"" and seconds <= SLOW_BOUND_S + 2,
        {"seconds": round(seconds, 2)},
    )


def never_reads(client: Client) -> tuple[int, int, str]:
    """``PIPELINED`` GET / on one connection whose client reads nothing for the write timeout and
    more: (bytes then readable, bytes all the replies hold, how the read ended)."""
    one = len(client.get("/").body)
    data = b"".join(_raw(client, "GET / HTTP/1.1\r\nHost: 127.0.0.1") for _ in range(PIPELINED))
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # the client's window stays small
        sock.settimeout(REQUEST_TIMEOUT_S)
        sock.connect((HOST, client.port))
        sock.sendall(data)
        time.sleep(WRITE_BOUND_S + 3)
        received, ended = 0, "closed"
        try:
            while chunk := sock.recv(1 << 20):
                received += len(chunk)
        except ConnectionResetError:
            ended = "reset"
        except TimeoutError:
            ended = "still open"
    return received, one * PIPELINED, ended


def never_reads_case(received: int, total: int, ended: str) -> Case:
    return Case(
        f"{PIPELINED} pipelined GET / from a client that never reads",
        f"the connection closed within the write timeout ({WRITE_BOUND_S:g} s): not every reply sent",
        f"{ended} after {WRITE_BOUND_S + 3:g} s; {received} of about {total} bytes readable",
        ended in ("closed", "reset") and received < total,
        {"received_bytes": received, "reply_bytes": total},
    )


def cold_stampede(client: Client) -> Case:
    """``STORM_CLIENTS`` GET / at once on a server that has built no list yet, each its own client,
    with ``/health`` asked every 50 ms meanwhile."""
    data = [client.prepared("GET", "/") for _ in range(STORM_CLIENTS)]
    barrier = threading.Barrier(STORM_CLIENTS + 1)
    health_ms: list[float] = []
    done = threading.Event()

    def poll_health() -> None:
        barrier.wait(timeout=REQUEST_TIMEOUT_S)
        while not done.is_set():
            health_ms.append(client.get("/health").seconds * 1000)
            time.sleep(0.05)

    with ThreadPoolExecutor(STORM_CLIENTS + 1) as pool:
        poller = pool.submit(poll_health)
        replies = list(pool.map(lambda d: client.send(d, barrier), data))
        done.set()
        poller.result(timeout=REQUEST_TIMEOUT_S)
    page_s = max(r.seconds for r in replies)
    worst_health = max(health_ms) if health_ms else None
    statuses = Counter(str(r.status) for r in replies)
    return Case(
        f"cold GET / x {STORM_CLIENTS} at once, /health asked meanwhile",
        f"every page 200; slowest page <= {GOAL_COLD_PAGE_S:g} s, slowest /health <= {GOAL_COLD_HEALTH_MS:g} ms",
        f"{dict(statuses)}; slowest page {page_s:.2f} s; /health x {len(health_ms)}, slowest "
        + (f"{worst_health:.1f} ms" if worst_health is not None else "none asked"),
        set(statuses) == {"200"}
        and page_s <= GOAL_COLD_PAGE_S
        and worst_health is not None
        and worst_health <= GOAL_COLD_HEALTH_MS,
        {
            "pages": len(replies),
            "slowest_page_s": round(page_s, 3),
            "health_asked": len(health_ms),
            "slowest_health_ms": round(worst_health, 1) if worst_health is not None else None,
        },
    )


def id_stampede(client: Client) -> Case:
    """Right after a start: every fixed question's ``GET /answer/{id}`` at once (distinct ids,
    none computed yet), each its own client, with ``/health`` asked every 20 ms meanwhile."""
    ids = [q["id"] for q in client.get("/questions").json().get("questions", [])]
    data = [client.prepared("GET", f"/answer/{qid}") for qid in ids]
    barrier = threading.Barrier(len(data) + 1)
    health: list[Reply] = []
    done = threading.Event()

    def poll_health() -> None:
        barrier.wait(timeout=REQUEST_TIMEOUT_S)
        while not done.is_set():
            health.append(client.get("/health"))
            time.sleep(0.02)

    with ThreadPoolExecutor(len(data) + 1) as pool:
        poller = pool.submit(poll_health)
        replies = list(pool.map(lambda d: client.send(d, barrier), data))
        done.set()
        poller.result(timeout=REQUEST_TIMEOUT_S)
    health_ms = [r.seconds * 1000 for r in health]
    spread = _spread(health_ms)
    statuses = Counter(str(r.status) for r in replies)
    # An answer past its deadline under the stampede is abandoned: 503 with Retry-After, as the threat model says.
    served = bool(ids) and all(
        r.status == 200 or (r.status == 503 and r.error == "abandoned" and "retry-after" in r.headers) for r in replies
    )
    health_ok = spread is not None and all(r.status == 200 for r in health) and spread["p99"] <= GOAL_COLD_HEALTH_MS
    return Case(
        f"cold GET /answer/{{id}} over {len(ids)} distinct ids at once, right after start, /health asked meanwhile",
        f"every id answered (200, or 503 abandoned with Retry-After); /health p99 <= {GOAL_COLD_HEALTH_MS:g} ms",
        f"{dict(sorted(statuses.items()))}; slowest answer {max((r.seconds for r in replies), default=0):.2f} s; "
        + (
            f"/health x {len(health_ms)}, p50 {spread['p50']} ms, p99 {spread['p99']} ms"
            if spread
            else "/health not asked"
        ),
        served and health_ok,
        {
            "ids": len(ids),
            "slowest_answer_s": round(max((r.seconds for r in replies), default=0.0), 3),
            "health_asked": len(health_ms),
            "health_ms": spread,
        },
    )


# --- retry storms: clients that ignore Retry-After ---------------------------------------------

STORM_IDENTITIES = 64
STORM_CONNECTIONS = 256
STORM_S = 7  # the wrk run; the honest client is measured inside it, after STORM_RAMP_S
STORM_RAMP_S = 1.0
HONEST_S = 4.0
HONEST_CLIENTS = 4
GOAL_HONEST_P99_MS = 150.0
GOAL_STORM_HEALTH_P99_MS = 100.0
GOAL_ANSWERS_RATIO = 0.8
# wrk: every request from one of STORM_IDENTITIES addresses (X-Forwarded-For, one trusted hop),
# Retry-After ignored (wrk asks again the moment a reply arrives); the statuses, merged, as JSON.
STORM_SCRIPT = r"""
local threads = {}

function setup(thread)
  table.insert(threads, thread)
end

function init(args)
  identities = tonumber(args[1])
  sent = 0
  statuses = {}
end

function request()
  sent = sent + 1
  return wrk.format(nil, nil, {["X-Forwarded-For"] = string.format("203.0.113.%d", sent % identities)})
end

function response(status, headers, body)
  statuses[status] = (statuses[status] or 0) + 1
end

function done(summary, latency, requests)
  local merged = {}
  for _, t in ipairs(threads) do
    for code, n in pairs(t:get("statuses")) do
      merged[code] = (merged[code] or 0) + n
    end
  end
  local parts = {}
  for code, n in pairs(merged) do
    parts[#parts + 1] = string.format('"%d":%d', code, n)
  end
  io.write('{"storm_statuses":{' .. table.concat(parts, ",") .. '}}\n')
end
"""


@dataclass(frozen=True)
class Honest:
    """What the honest clients saw over one window: each request its own client (within its
    allowance), ``GET /answer/q11`` in a closed loop; ``/health`` asked every 50 ms."""

    answers: int
    other: int
    seconds: float
    answer_ms: Mapping[str, float] | None
    health_ms: Mapping[str, float] | None
    health_other: int

    @property
    def answers_per_s(self) -> float:
        return self.answers / self.seconds if self.seconds else 0.0


def honest_window(client: Client, seconds: float = HONEST_S) -> Honest:
    until = time.monotonic() + seconds
    answer_ms: list[float] = []
    health_ms: list[float] = []
    other = Counter[str]()

    def ask() -> None:
        while time.monotonic() < until:
            r = client.get("/answer/q11")
            if r.status == 200:
                answer_ms.append(r.seconds * 1000)
            else:
                other["answer"] += 1

    def health() -> None:
        while time.monotonic() < until:
            r = client.get("/health")
            health_ms.append(r.seconds * 1000)
            other["health"] += r.status != 200
            time.sleep(0.05)

    began = time.monotonic()
    with ThreadPoolExecutor(HONEST_CLIENTS + 1) as pool:
        futures = [pool.submit(ask) for _ in range(HONEST_CLIENTS)] + [pool.submit(health)]
        for f in futures:
            f.result(timeout=seconds + REQUEST_TIMEOUT_S)
    return Honest(
        len(answer_ms),
        other["answer"],
        time.monotonic() - began,
        _spread(answer_ms),
        _spread(health_ms),
        other["health"],
    )


def storm_statuses(stdout: str) -> dict[str, int]:
    for line in stdout.splitlines():
        if line.startswith('{"storm_statuses"'):
            return dict(json.loads(line)["storm_statuses"])
    return {}


def retry_storm(client: Client, path: str, workdir: Path, baseline: Honest) -> Case:
    """``STORM_IDENTITIES`` identities over ``STORM_CONNECTIONS`` connections asking ``path`` and
    ignoring ``Retry-After`` (one wrk run), with the honest clients measured meanwhile against
    ``baseline`` (the same window with no storm)."""
    wrk = shutil.which("wrk")
    name = f"{STORM_IDENTITIES} identities ignoring Retry-After over {STORM_CONNECTIONS} connections, GET {path}"
    if wrk is None:
        return Case(name, "measured", "not run: wrk is not installed", True)
    script = workdir / "storm.lua"
    script.write_text(STORM_SCRIPT, encoding="utf-8")
    # The storm's generator at the lowest priority, one thread: on this one machine it takes the
    # server's CPU only when the server does not want it (a real storm comes from other machines).
    cmd = [
        "nice", "-n", "19", wrk, "-t", "1", "-c", str(STORM_CONNECTIONS), "-d", f"{STORM_S}s", "--timeout", "10s",
        "-s", str(script), f"http://{HOST}:{client.port}{path}", "--", str(STORM_IDENTITIES),
    ]  # fmt: skip
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as proc:
        try:
            time.sleep(STORM_RAMP_S)
            during = honest_window(client)
            stdout, _ = proc.communicate(timeout=STORM_S + 30)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
    statuses = storm_statuses(stdout)
    client.tally.add(429, statuses.get("429", 0))  # the storm's replies count with the others
    for code, n in statuses.items():
        if code != "429":
            client.tally.add(int(code), n)
    refused = statuses.get("429", 0)
    ratio = during.answers_per_s / baseline.answers_per_s if baseline.answers_per_s else 0.0
    ms, health = during.answer_ms or {}, during.health_ms or {}
    met = (
        refused > 0
        and during.other == 0
        and during.health_other == 0
        and ms.get("p99", float("inf")) <= GOAL_HONEST_P99_MS
        and health.get("p99", float("inf")) <= GOAL_STORM_HEALTH_P99_MS
        and ratio >= GOAL_ANSWERS_RATIO
    )
    return Case(
        name,
        f"the storm refused (429); honest client p99 <= {GOAL_HONEST_P99_MS:g} ms, /health p99 <= "
        f"{GOAL_STORM_HEALTH_P99_MS:g} ms, answers/s >= {GOAL_ANSWERS_RATIO:g} x the no-storm figure",
        f"storm {sum(statuses.values())} replies in {STORM_S} s {dict(sorted(statuses.items()))}; honest "
        f"p50 {ms.get('p50')} ms, p99 {ms.get('p99')} ms, {during.answers_per_s:.0f} answers/s "
        f"({ratio:.2f} x {baseline.answers_per_s:.0f} with no storm); /health p99 {health.get('p99')} ms "
        f"(no storm {(baseline.health_ms or {}).get('p99')} ms)",
        met,
        {
            "path": path,
            "storm_replies": sum(statuses.values()),
            "storm_statuses": statuses,
            "storm_s": STORM_S,
            "honest_ms": during.answer_ms,
            "honest_other": during.other,
            "answers_per_s": round(during.answers_per_s, 1),
            "baseline_answers_per_s": round(baseline.answers_per_s, 1),
            "answers_ratio": round(ratio, 3),
            "health_ms": during.health_ms,
            "baseline_health_ms": baseline.health_ms,
            "health_other": during.health_other,
        },
    )


def storm_cases(client: Client, workdir: Path) -> list[Case]:
    client.get("/answer/q11")  # kept before the baseline: both windows serve the kept answer
    baseline = honest_window(client)
    return [
        retry_storm(client, "/answer/q11", workdir, baseline),
        retry_storm(client, "/health/live", workdir, baseline),
    ]


REFRESH = re.compile(rb'<meta http-equiv="refresh" content="(\d+)">')


def page_recovers(client: Client) -> Case:
    """The question page asked before the model has loaded, then followed as a browser follows its
    refresh: the same URL again after the advertised seconds, until it answers."""
    path = "/ask?q=" + quote(MARK_QUESTION)
    pages = [client.get(path)]
    deadline = time.monotonic() + 60
    while pages[-1].status == 503 and (refresh := REFRESH.search(pages[-1].body)) and time.monotonic() < deadline:
        time.sleep(float(refresh[1]))
        pages.append(client.get(path))
    client.post_json("/ask", {"question": MARK_QUESTION})  # the same text in a body too, for the log check
    first, last = pages[0], pages[-1]
    return Case(
        "the question page asked while the model loads",
        "503 with Retry-After and a refresh; the page followed by itself answers 200",
        f"first {first.status} (Retry-After {first.headers.get('retry-after')}, "
        f"{'a refresh' if REFRESH.search(first.body) else 'no refresh'}); {len(pages)} pages, last {last.status}",
        first.status == 503 and REFRESH.search(first.body) is not None and last.status == 200,
        {"pages": len(pages)},
    )


def readiness(client: Client) -> Case:
    """Liveness apart from readiness, from the first request of a fresh server."""
    live = client.get("/health/live")
    ready = [client.get("/health/ready")]
    health = client.get("/health")
    deadline = time.monotonic() + 60
    while ready[-1].status == 503 and time.monotonic() < deadline:
        time.sleep(float(ready[-1].headers.get("retry-after", 1)))
        ready.append(client.get("/health/ready"))
    ask = client.post_json("/ask", {"question": QUESTION})
    first = ready[0]
    waiting = first.json().get("waiting_for")
    return Case(
        "liveness and readiness from the first request of a fresh start",
        "/health/live 200; /health/ready 503 waiting for the embedder (Retry-After) until it is loaded, "
        "then 200; POST /ask then answered",
        f"live {live.status}; /health {health.status}; ready {first.status} ({waiting}, Retry-After "
        f"{first.headers.get('retry-after')}) then {ready[-1].status} after {len(ready)} asks; POST /ask {ask.brief()}",
        live.status == 200
        and first.status == 503
        and waiting == "embedder"
        and "retry-after" in first.headers
        and ready[-1].status == 200
        and ask.status == 200,
        {"ready_asks": len(ready)},
    )


def question_lines(logs: Logs, texts: Sequence[str]) -> int:
    """Log lines, over every server's output, that hold any of ``texts``."""
    n = 0
    for path in logs.files:
        if path.is_file():
            lines = path.read_text(errors="replace").splitlines()
            n += sum(1 for line in lines if any(t in line or quote(t) in line or quote_plus(t) in line for t in texts))
    return n


def percentile(values: Sequence[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, max(0, round(q * (len(s) - 1))))]


def storm(client: Client, admission: AdmissionConfig, log: Path) -> Case:
    """``STORM_CLIENTS`` ``POST /ask`` released at once, each its own client. A shed reply's
    time is taken twice: by the client (from its send, so it includes waiting behind the other
    63 requests on the server's one event loop and this process's own threads), and by the
    server, from its access log (``log``: from the request reaching the app to its response),
    which is how long shedding took, its turn included (``refusal_pacing``: with
    ``admission.refusals_per_s`` R, the n-th of a burst waits up to (n - 1) / R). The goal holds
    the requests refused past the queue (``shed_queue_full``); a request that waited its bounded
    time in the queue first (``shed_queue_wait``) is timed apart."""
    retry_after_s = admission.retry_after_s
    offset = log.stat().st_size
    data = [
        client.prepared(
            "POST", "/ask", {"Content-Type": "application/json"}, json.dumps({"question": QUESTION}).encode()
        )
        for _ in range(STORM_CLIENTS)
    ]
    barrier = threading.Barrier(STORM_CLIENTS)
    with ThreadPoolExecutor(STORM_CLIENTS) as pool:
        replies = list(pool.map(lambda d: client.send(d, barrier), data))
    answered = [r for r in replies if r.status == 200]
    shed = [r for r in replies if r.status == 503 and r.error == "overloaded"]
    abandoned = [r for r in replies if r.status == 503 and r.error == "abandoned"]
    other = [r.brief() for r in replies if r not in answered and r not in shed and r not in abandoned]
    shed_ms = _spread([r.seconds * 1000 for r in shed])
    time.sleep(0.2)  # the access log is written as each response completes; let the last lines land
    lines = [line for line in access_lines(log, offset) if line.get("route") == "/ask"]
    server_ms = {
        reason: [float(line["latency_ms"]) for line in lines if line.get("refused") == f"shed_{reason}"]
        for reason in ("queue_full", "queue_wait")
    }
    with_retry = sum(1 for r in shed if r.headers.get("retry-after") == str(retry_after_s))
    figures = {
        "clients": STORM_CLIENTS,
        "answered": len(answered),
        "shed": len(shed),
        "abandoned": len(abandoned),
        "other": len(other),
        "shed_ms": shed_ms,
        "server_shed_ms": _spread(server_ms["queue_full"]),
        "server_queue_wait_ms": _spread(server_ms["queue_wait"]),
        "server_shed_lines": sum(len(v) for v in server_ms.values()),
        "shed_with_retry_after": with_retry,
        "refusals_per_s": admission.refusals_per_s,
        "answered_ms_p50": round(statistics.median(r.seconds * 1000 for r in answered), 1) if answered else None,
    }
    return Case(
        f"{STORM_CLIENTS} concurrent POST /ask",
        "each answered or shed (503 overloaded, Retry-After); none abandoned",
        f"{len(answered)} answered, {len(shed)} shed ({with_retry} with Retry-After), {len(abandoned)} abandoned"
        + (f", other: {other}" if other else ""),
        not abandoned and not other and with_retry == len(shed),
        figures,
    )


def identities_http(client: Client, pid: int, workdir: Path) -> Case:
    """One wrk run, every request its own ``X-Forwarded-For`` (``loadtest.WRK_SCRIPT``)."""
    wrk = shutil.which("wrk")
    if wrk is None:
        return Case("unique client identities over HTTP", "measured", "not run: wrk is not installed", True)
    script = workdir / "identities.lua"
    script.write_text(loadtest.WRK_SCRIPT, encoding="utf-8")
    before = rss_mb(pid)
    level = loadtest.run_wrk(wrk, f"http://{HOST}:{client.port}/answer/q11", 16, IDENTITY_S, script, 3)
    after = rss_mb(pid)
    for status, n in level.statuses.items():
        client.tally.add(status, n)
    return Case(
        "unique client identities over HTTP (one X-Forwarded-For per request, wrk)",
        f"every one served; the table holds at most {MAX_BUCKETS} buckets",
        f"{level.requests} identities in {IDENTITY_S} s, statuses {dict(level.statuses)}; RSS {before:.0f} -> "
        f"{after:.0f} MB",
        level.unexpected == 0 and level.socket_errors == 0,
        {"identities": level.requests, "rss_before_mb": before, "rss_after_mb": after},
    )


def identities_in_process() -> dict[str, Any]:
    """``IDENTITIES`` distinct clients (each its own IPv6 /64 behind a trusted proxy) into the
    served store at one instant: how many buckets it holds and the bytes it grew by."""
    allowance = Allowance(per_minute=60, burst=10, trusted_proxy_hops=2)
    keys = [
        client_identity("10.0.0.1", f"2001:db8:{i >> 16:x}:{i & 0xFFFF:x}::1, 10.0.0.2", 2) for i in range(IDENTITIES)
    ]
    store = MemoryStore()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for key in keys:
            store.take((key + " ")[:-1], 0.0, allowance)
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    return {
        "identities": len(set(keys)),
        "buckets": len(store),
        "max_buckets": MAX_BUCKETS,
        "bytes": grown,
        "ceiling_bytes": MAX_BUCKETS * BYTES_PER_BUCKET_CEILING,
    }


def identities_case(m: Mapping[str, Any]) -> Case:
    return Case(
        f"{IDENTITIES} unique identities into the served bucket store (in process)",
        f"at most {m['max_buckets']} buckets and {m['ceiling_bytes'] / 1e6:g} MB",
        f"{m['buckets']} buckets, {m['bytes'] / 1e6:.1f} MB",
        m["buckets"] <= m["max_buckets"] and m["bytes"] <= m["ceiling_bytes"],
        dict(m),
    )


# --- broken copies ------------------------------------------------------------------------


def npy(a: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, np.asarray(a, dtype=np.float32), allow_pickle=False)
    return buf.getvalue()


def rehash(index_dir: Path, name: str, data: bytes, **meta_changes: Any) -> None:
    """Write ``data`` as ``name`` and make meta.json vouch for it: the hash check passes."""
    (index_dir / name).write_bytes(data)
    meta = json.loads((index_dir / "meta.json").read_text())
    meta["files"][name] = hashlib.sha256(data).hexdigest()
    meta.update(meta_changes)
    (index_dir / "meta.json").write_text(json.dumps(meta, indent=1) + "\n")


def _vectors(index_dir: Path, name: str) -> np.ndarray:
    return np.load(index_dir / name, allow_pickle=False)


def _first_chunk_elsewhere(d: Path) -> None:
    lines = (d / "chunks.jsonl").read_text().splitlines()
    first = json.loads(lines[0]) | {"section_id": "rfc9999#1"}
    rehash(d, "chunks.jsonl", ("\n".join([json.dumps(first), *lines[1:]]) + "\n").encode())


def _as_directory(path: Path) -> None:
    path.unlink()
    path.mkdir()


BROKEN_INDEX: dict[str, Callable[[Path], None]] = {
    "sentence vectors cut to 10 dimensions": lambda d: rehash(
        d, "sentence_vectors.npy", npy(_vectors(d, "sentence_vectors.npy")[:, :10])
    ),
    "questions.json as []": lambda d: rehash(d, "questions.json", b"[]"),
    "questions.json without its fingerprint": lambda d: rehash(
        d,
        "questions.json",
        json.dumps({"questions": json.loads((d / "questions.json").read_text())["questions"]}).encode(),
    ),
    "a chunk naming an unknown section": _first_chunk_elsewhere,
    "index/meta.json a directory": lambda d: _as_directory(d / "meta.json"),
}


def widen(index_dir: Path) -> None:
    """The index as if built by a 1536-dimension embedder: every vector through a fixed matrix
    of orthonormal rows (cosines kept), meta.json naming that embedder and its dimensions."""
    q, _ = np.linalg.qr(np.random.default_rng(7).standard_normal((WIDE_DIMS, 384)))
    basis = q.T.astype(np.float32)
    for name in ("vectors.npy", "sentence_vectors.npy", "question_vectors.npy"):
        rehash(index_dir, name, npy(_vectors(index_dir, name) @ basis))
    meta = json.loads((index_dir / "meta.json").read_text())
    meta.update(embedder=WIDE_EMBEDDER, dimensions=WIDE_DIMS)
    (index_dir / "meta.json").write_text(json.dumps(meta, indent=1) + "\n")


def served_replies(client: Client) -> dict[str, Reply]:
    return {
        "/health": client.get("/health"),
        "/answer/q11": client.get("/answer/q11"),
        "/q/q11": client.get("/q/q11"),
        "POST /ask": client.post_json("/ask", {"question": QUESTION}),
    }


def leaks(replies: Mapping[str, Reply], root: Path) -> bool:
    return any(str(root).encode() in r.body or b"Errno" in r.body for r in replies.values())


def broken_index_case(name: str, copy: Path, logs: Logs, tally: Tally) -> Case:
    with served(copy, logs, "index") as (_, port):
        replies = served_replies(Client(port, tally))
    health = replies["/health"].json()
    named = str(health.get("load_error") or "")
    ok = (
        all(r.status == 503 for r in replies.values())
        and any(f"{file}:" in named or f"{file} " in named for file in (*FILES, "meta.json"))
        and not leaks(replies, copy)
    )
    return Case(
        f"index: {name} (hash-consistent)",
        "/health, /answer, /q and POST /ask all 503; the load error names the file, no path",
        ", ".join(f"{k} {r.status}" for k, r in replies.items()) + f"; load_error {named!r}",
        ok,
    )


def wide_index_case(copy: Path, logs: Logs, tally: Tally) -> Case:
    with served(copy, logs, "wide") as (_, port):
        client = Client(port, tally)
        replies = served_replies(client)
    ask = replies["POST /ask"]
    return Case(
        f"index built by {WIDE_EMBEDDER} ({WIDE_DIMS} dimensions), served with no key",
        "fixed answers served; POST /ask 503 naming that embedder (it cannot embed without its key), not a 500",
        ", ".join(f"{k} {r.brief()}" for k, r in replies.items()),
        replies["/answer/q11"].status == 200
        and ask.status == 503
        and "openai" in ask.body.decode(errors="replace").lower(),
    )


def other_root_case(copy: Path, elsewhere: Path, logs: Logs, tally: Tally) -> Case:
    with served(copy, logs, "root", cwd=elsewhere) as (_, port):
        r = Client(port, tally).post_json("/ask", {"question": "x" * (MARK_CHARS + 1)})
    detail = str(r.json().get("detail"))
    return Case(
        "--root naming another project, run from a directory that is none",
        f"the other project's limit: 413 'limit is {MARK_CHARS}'",
        f"{r.status}: {detail[:80]}",
        r.status == 413 and f"limit is {MARK_CHARS}" in detail,
    )


@dataclass(frozen=True)
class Refusal:
    """A start that must be refused in one line naming ``named``."""

    name: str
    named: str
    env: Mapping[str, str] = field(default_factory=dict)


def _binary_corpus(copy: Path) -> None:
    target = copy / "corpus" / "rfc8259.txt"
    old, new = target.read_bytes(), b"\x00\x01\xff binary" * 64
    target.write_bytes(new)
    manifest = copy / "corpus" / "manifest.yaml"
    manifest.write_text(
        manifest.read_text()
        .replace(hashlib.sha256(old).hexdigest(), hashlib.sha256(new).hexdigest())
        .replace(f"bytes: {len(old)}", f"bytes: {len(new)}")
    )


REFUSALS: dict[str, tuple[Refusal, Callable[[Path], None]]] = {
    "thresholds-dir": (
        Refusal("eval/thresholds.yaml a directory", "thresholds.yaml: cannot be read"),
        lambda c: _as_directory(c / "eval" / "thresholds.yaml"),
    ),
    "thresholds-utf8": (
        Refusal("eval/thresholds.yaml not UTF-8", "thresholds.yaml: not UTF-8"),
        lambda c: (c / "eval" / "thresholds.yaml").write_bytes(b"budget:\n  daily_cap_usd: 1 # caf\xe9\n"),
    ),
    "questions-utf8": (
        Refusal("eval/questions.yaml not UTF-8", "questions.yaml: not UTF-8"),
        lambda c: (c / "eval" / "questions.yaml").write_bytes(b"\xff\xfe not utf-8\n"),
    ),
    "corpus-binary": (
        Refusal("a binary corpus file whose manifest hash matches", "rfc8259.txt: not UTF-8"),
        _binary_corpus,
    ),
    "port": (Refusal("PORT=abc", "PORT: 'abc' is not a port number", {"PORT": "abc"}), lambda c: None),
    "redis": (Refusal("REDIS_URL=notaurl", "REDIS_URL: not a redis URL", {"REDIS_URL": "notaurl"}), lambda c: None),
}


def refusal_case(refusal: Refusal, root: Path, logs: Logs) -> Case:
    log = logs.new("refusal")
    argv = [sys.executable, "-m", "rag_contract.cli", "--root", str(root), "serve", "--host", HOST]
    if "PORT" not in refusal.env:
        argv += ["--port", "0"]  # should it start after all: a free port, never one in use
    try:
        out = subprocess.run(argv, env=server_env(refusal.env), capture_output=True, text=True, timeout=REFUSAL_S)
        code, err = out.returncode, out.stderr
        log.write_text(out.stdout + out.stderr)
    except subprocess.TimeoutExpired as exc:
        code, err = None, exc.stderr.decode(errors="replace") if isinstance(exc.stderr, bytes) else ""
        log.write_text(err)
    lines = err.strip().splitlines()
    ok = code == 2 and len(lines) == 1 and refusal.named in lines[0] and str(root) not in err
    if code is None:
        seen = f"still running after {REFUSAL_S:g} s (stopped)"
    else:
        seen = f"exit {code}: {lines[0] if len(lines) == 1 else f'{len(lines)} lines'}"
    return Case(
        refusal.name,
        f"serve refuses to start (exit 2) in one line naming {refusal.named.split(':')[0]}, no path",
        seen,
        ok,
    )


def network_case(root: Path, workdir: Path, logs: Logs, tally: Tally) -> Case:
    """One start under strace: the model loaded, each kind of request asked, then the trace read."""
    if STRACE is None:
        return Case("no outbound network", "nothing beyond loopback", "not run: strace is not installed", True)
    trace = workdir / "strace.log"
    env = server_env({"HOME": str(workdir / "home")})
    log = logs.new("strace")
    with loadtest.running_server(lambda port: traced(serve_argv(root)(port), trace), root, env, log, 1) as (_, port):
        client = Client(port, tally)
        until_loaded(client, timeout_s=120)
        replies = served_replies(client)
        time.sleep(1.0)  # room for anything the runtime sends in the background
    text = trace.read_text(errors="replace")
    found = stray(text)
    return Case(
        "no outbound network (serve under strace: connect/sendto/sendmsg and the telemetry store)",
        "no call beyond loopback, no DNS query, no telemetry store",
        f"{len(found)} stray calls; replies " + ", ".join(f"{k} {r.status}" for k, r in replies.items()),
        "openat(" in text and not found,
        {"stray_calls": len(found)},
    )


# --- the run ------------------------------------------------------------------------------


def _elapsed_check(started: float, limit_s: float, before: str) -> None:
    if time.monotonic() - started > limit_s:
        raise ProbeError(f"time limit {limit_s} s reached before {before}")


def main_server_cases(root: Path, tmp: Path, logs: Logs, tally: Tally) -> tuple[list[Case], dict[str, Any]]:
    thresholds = load_thresholds(root / "eval" / "thresholds.yaml")
    tree = loadtest.load_tree(root, tmp / "main")
    cases: list[Case] = []
    with served(tree, logs, "main", env={"RAG_CONTRACT_ACCESS_LOG": "1"}) as (proc, port):
        client = Client(port, tally)
        until_loaded(client)
        slow: dict[str, tuple[str, float]] = {}
        with ThreadPoolExecutor(2) as pool:
            waits = {"headers": pool.submit(slow_headers, port), "body": pool.submit(slow_body, port)}
            idle = pool.submit(idle_connection, port)
            stuck = pool.submit(never_reads, client)
            cases.append(oversized_bodies(client, proc.pid))
            cases.append(head_limits(client, proc.pid))
            cases += [
                unknown_ids(client),
                long_id(client),
                content_types(client),
                content_coding(client),
                bidi_question(client),
                invisible_question(client),
                relative_redirect(client),
                nosniff(client),
                forged_forwarded_for(client, thresholds.rate_limit.max_client_burst),
                injection_phrasings(client, root),
                smuggling(client),
                request_targets(client),
                methods_and_forms(client),
                target_authority(client),
                protocol_replies(client),
                conditionals(client),
                validator_edges(client),
                page_edges(client, thresholds.ask.max_question_chars),
                aborted_uploads(client, logs.files[-1]),
                upgrade_requests(client, logs.files[-1]),
            ]
            slow = {k: f.result(timeout=SLOW_BOUND_S + 30) for k, f in waits.items()}
            cases.append(idle_case(*idle.result(timeout=SLOW_BOUND_S + 30)))
            cases.append(never_reads_case(*stuck.result(timeout=WRITE_BOUND_S + 60)))
        cases.append(slow_clients_case(slow, tally))
        cases.append(storm(client, thresholds.admission, logs.files[-1]))
        cases.append(identities_http(client, proc.pid, tmp))
    return cases, {"max_client_burst": thresholds.rate_limit.max_client_burst}


def fresh_server_cases(root: Path, tmp: Path, logs: Logs, tally: Tally) -> list[Case]:
    """Fresh starts with default settings (uvicorn's and the project's access log as
    shipped): a cold list stampede then the question page during the model's load; readiness
    from the first request; a cold stampede over distinct ids; and the retry storms (429s,
    then liveness), each against the same server's honest figures with no storm."""
    tree = loadtest.load_tree(root, tmp / "fresh")
    with served(tree, logs, "cold") as (_, port):
        client = Client(port, tally)
        cases = [cold_stampede(client), page_recovers(client)]
    with served(tree, logs, "ready") as (_, port):
        cases.append(readiness(Client(port, tally)))
    with served(tree, logs, "ids") as (_, port):
        cases.append(id_stampede(Client(port, tally)))
    with served(tree, logs, "storms") as (_, port):
        cases += storm_cases(Client(port, tally), tmp)
    return cases


def run(root: Path, time_limit_s: float = TIME_LIMIT_S) -> dict[str, Any]:
    root = Path(root).resolve()
    started = time.monotonic()
    tally = Tally()
    cases: list[Case] = []
    with tempfile.TemporaryDirectory(prefix="ragc-probe-") as tmp_name:
        tmp = Path(tmp_name)
        logs = Logs(tmp / "logs")
        logs.directory.mkdir()
        main_cases, _ = main_server_cases(root, tmp, logs, tally)
        cases += main_cases
        _elapsed_check(started, time_limit_s, "the fresh starts")
        cases += fresh_server_cases(root, tmp, logs, tally)
        cases.append(identities_case(identities_in_process()))
        for n, (name, breaker) in enumerate(BROKEN_INDEX.items()):
            _elapsed_check(started, time_limit_s, name)
            copy = copy_project(root, tmp / f"index-{n}")
            breaker(copy / "index")
            cases.append(broken_index_case(name, copy, logs, tally))
        _elapsed_check(started, time_limit_s, "the wide index")
        wide = copy_project(root, tmp / "wide")
        widen(wide / "index")
        cases.append(wide_index_case(wide, logs, tally))
        other = copy_project(root, tmp / "other")
        data = yaml.safe_load((other / "eval" / "thresholds.yaml").read_text())
        data["ask"]["max_question_chars"] = MARK_CHARS
        (other / "eval" / "thresholds.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
        (tmp / "elsewhere").mkdir()
        cases.append(other_root_case(other, tmp / "elsewhere", logs, tally))
        for key, (refusal, breaker) in REFUSALS.items():
            _elapsed_check(started, time_limit_s, refusal.name)
            copy = copy_project(root, tmp / f"refuse-{key}")
            breaker(copy)
            cases.append(refusal_case(refusal, copy, logs))
        _elapsed_check(started, time_limit_s, "the network trace")
        cases.append(network_case(root, tmp, logs, tally))
        tracebacks = logs.tracebacks()
        asked = question_lines(logs, (QUESTION, MARK_QUESTION))
    return report(cases, tally, tracebacks, round(time.monotonic() - started, 1), asked)


def _figures(rows: Sequence[Mapping[str, Any]], prefix: str) -> Mapping[str, Any]:
    return next(r for r in rows if r["name"].startswith(prefix))["figures"]


def shed_bound_ms(shed: int, refusals_per_s: float) -> float:
    """The slowest a shed of a burst of ``shed`` may be in the server: ``GOAL_SHED_MS`` past the
    last turn the burst needs when refusals are paced at ``refusals_per_s`` (0: unpaced)."""
    turns_ms = 1000.0 * max(shed - 1, 0) / refusals_per_s if refusals_per_s > 0 else 0.0
    return round(turns_ms + GOAL_SHED_MS, 2)


def goals(rows: Sequence[Mapping[str, Any]], totals: Mapping[str, Any]) -> dict[str, Any]:
    """Each goal of the issue with its value and whether it was met, from the report's rows
    (``Case.as_dict``) and totals."""
    body = _figures(rows, "four parallel")["growth_mib"]
    st = _figures(rows, f"{STORM_CLIENTS} concurrent")
    memory = _figures(rows, f"{IDENTITIES} unique identities")
    cold = _figures(rows, f"cold GET / x {STORM_CLIENTS}")
    ids = _figures(rows, "cold GET /answer/{id} over")
    # The server's own time to shed (its access log), its turn included; the client's also
    # includes queueing before it.
    shed = st["server_shed_ms"]
    shed_bound = shed_bound_ms(st["shed"], st["refusals_per_s"])
    shed_ok = (
        bool(shed)
        and shed["max"] < shed_bound
        and st["server_shed_lines"] == st["shed"]
        and st["shed_with_retry_after"] == st["shed"]
    )
    return {
        "status_500": {"target": 0, "value": totals["status_500"], "met": totals["status_500"] == 0},
        "tracebacks": {"target": 0, "value": totals["tracebacks"], "met": totals["tracebacks"] == 0},
        "body_rss_growth_mb": {"target": GOAL_BODY_RSS_MB, "value": body, "met": body <= GOAL_BODY_RSS_MB},
        "abandoned_of_64": {"target": 0, "value": st["abandoned"], "met": st["abandoned"] == 0},
        "shed_ms_with_retry_after": {
            "target": shed_bound,
            "value": {
                "shed": st["shed"],
                "with_retry_after": st["shed_with_retry_after"],
                "ms": shed,
                "client_ms": st["shed_ms"],
                "queue_wait_ms": st["server_queue_wait_ms"],
                "refusals_per_s": st["refusals_per_s"],
            },
            "met": shed_ok,
        },
        "buckets_after_100k_identities": {
            "target": {"buckets": memory["max_buckets"], "bytes": memory["ceiling_bytes"]},
            "value": {"buckets": memory["buckets"], "bytes": memory["bytes"]},
            "met": memory["buckets"] <= memory["max_buckets"] and memory["bytes"] <= memory["ceiling_bytes"],
        },
        "cold_list_stampede": {
            "target": {"page_s": GOAL_COLD_PAGE_S, "health_ms": GOAL_COLD_HEALTH_MS},
            "value": {"page_s": cold["slowest_page_s"], "health_ms": cold["slowest_health_ms"]},
            "met": cold["slowest_page_s"] <= GOAL_COLD_PAGE_S
            and cold["slowest_health_ms"] is not None
            and cold["slowest_health_ms"] <= GOAL_COLD_HEALTH_MS,
        },
        "question_text_in_logs": {
            "target": 0,
            "value": totals["question_lines"],
            "met": totals["question_lines"] == 0,
        },
        "cold_id_stampede": {
            "target": {"health_p99_ms": GOAL_COLD_HEALTH_MS},
            "value": {"ids": ids["ids"], "health_p99_ms": (ids["health_ms"] or {}).get("p99")},
            "met": ids["ids"] > 0 and ids["health_ms"] is not None and ids["health_ms"]["p99"] <= GOAL_COLD_HEALTH_MS,
        },
        **{key: storm_goal(rows, path) for key, path in STORM_GOALS.items()},
    }


# The retry storms' goals, by the route the storm asks.
STORM_GOALS = {"storm_429": "/answer/q11", "storm_liveness": "/health/live"}


def storm_goal(rows: Sequence[Mapping[str, Any]], path: str) -> dict[str, Any]:
    """The issue's goal for the retry storm on ``path``: honest p99, ``/health`` p99 and the
    answers/s ratio to the no-storm figure, read from its row."""
    f = next(
        r["figures"]
        for r in rows
        if r["name"].startswith(f"{STORM_IDENTITIES} identities") and r.get("figures", {}).get("path") == path
    )
    honest_p99 = (f["honest_ms"] or {}).get("p99")
    health_p99 = (f["health_ms"] or {}).get("p99")
    return {
        "target": {
            "honest_p99_ms": GOAL_HONEST_P99_MS,
            "health_p99_ms": GOAL_STORM_HEALTH_P99_MS,
            "answers_ratio": GOAL_ANSWERS_RATIO,
        },
        "value": {
            "storm_replies": f["storm_replies"],
            "honest_p99_ms": honest_p99,
            "health_p99_ms": health_p99,
            "answers_per_s": f["answers_per_s"],
            "baseline_answers_per_s": f["baseline_answers_per_s"],
            "answers_ratio": f["answers_ratio"],
        },
        "met": f["storm_statuses"].get("429", 0) > 0
        and f["honest_other"] == 0
        and f["health_other"] == 0
        and honest_p99 is not None
        and honest_p99 <= GOAL_HONEST_P99_MS
        and health_p99 is not None
        and health_p99 <= GOAL_STORM_HEALTH_P99_MS
        and f["answers_ratio"] >= GOAL_ANSWERS_RATIO,
    }


def totals_of(statuses: Mapping[str, int], tracebacks: Mapping[str, int], question_lines: int = 0) -> dict[str, Any]:
    return {
        "responses": sum(statuses.values()),
        "statuses": dict(sorted(statuses.items())),
        "status_500": statuses.get("500", 0),
        "tracebacks": sum(tracebacks.values()),
        "servers": len(tracebacks),
        "question_lines": question_lines,
    }


def report(
    cases: Sequence[Case], tally: Tally, tracebacks: Mapping[str, int], wall_s: float, question_lines: int = 0
) -> dict[str, Any]:
    totals = totals_of(tally.statuses, tracebacks, question_lines)
    rows = [c.as_dict() for c in cases]
    return {
        "meta": {
            **machine(),
            "command": "python -m tools.probe",
            "wall_s": wall_s,
            "load_average_1m": load_average(),
            "identities_measured": "in process (the served MemoryStore), and over HTTP for one wrk run",
        },
        "cases": rows,
        "totals": totals,
        "goals": goals(rows, totals),
    }


# --- rendering ----------------------------------------------------------------------------


def _met(flag: bool) -> str:
    return "met" if flag else "missed"


def _storm_row(goal: Mapping[str, Any], path: str) -> str:
    v = goal["value"]
    return (
        f"| {STORM_IDENTITIES} identities ignoring `Retry-After` over {STORM_CONNECTIONS} connections, `GET {path}`: "
        f"honest client p99 <= {GOAL_HONEST_P99_MS:g} ms, `/health` p99 <= {GOAL_STORM_HEALTH_P99_MS:g} ms, "
        f"answers/s >= {GOAL_ANSWERS_RATIO:g} x no storm | {v['storm_replies']} storm replies; honest p99 "
        f"{v['honest_p99_ms']} ms, `/health` p99 {v['health_p99_ms']} ms, {v['answers_per_s']:g} answers/s "
        f"({v['answers_ratio']:g} x {v['baseline_answers_per_s']:g}) | {_met(goal['met'])} |"
    )


def render(report: Mapping[str, Any]) -> str:
    """The README block: the totals and goals, then one row per case."""
    meta, t, g = report["meta"], report["totals"], report["goals"]
    shed = g["shed_ms_with_retry_after"]["value"]
    ms = shed["ms"] or {"p50": None, "p99": None, "max": None}
    client = shed["client_ms"] or {"p50": None, "p99": None, "max": None}
    wait = shed["queue_wait_ms"] or {"p50": None, "p99": None, "max": None}
    st_pace = shed["refusals_per_s"]
    mem = g["buckets_after_100k_identities"]
    cold = g["cold_list_stampede"]
    ids = g["cold_id_stampede"]
    passed = sum(1 for c in report["cases"] if c["passed"])
    lines = [
        f"`{meta['command']}`: {meta['cpu_count']} CPUs, Python {meta['python']}, {meta['date']}, "
        f"{meta['wall_s']:.0f} s (1-minute load average {meta['load_average_1m']} as it ended); "
        f"{len(report['cases'])} cases, {passed} as expected; {t['responses']} replies from {t['servers']} "
        "server starts, loopback only.",
        "",
        "| goal | value | met |",
        "|---|---|---|",
        f"| no reply with status 500 | {t['status_500']} | {_met(g['status_500']['met'])} |",
        f"| no traceback in any server's output | {t['tracebacks']} | {_met(g['tracebacks']['met'])} |",
        f"| peak RSS growth under four parallel 128 MB `/ask` bodies <= {GOAL_BODY_RSS_MB:g} MB "
        f"| {g['body_rss_growth_mb']['value']} MB | {_met(g['body_rss_growth_mb']['met'])} |",
        f"| admitted answers abandoned, {STORM_CLIENTS} concurrent `/ask` clients | "
        f"{g['abandoned_of_64']['value']} | {_met(g['abandoned_of_64']['met'])} |",
        f"| shed replies past the queue sent in their turns, each with `Retry-After`: the slowest in the server "
        f"within {GOAL_SHED_MS:g} ms of the last turn, {g['shed_ms_with_retry_after']['target']:g} ms "
        f"at {st_pace:g} refusals/s "
        f"| {shed['shed']} shed, {shed['with_retry_after']} with `Retry-After`; past the queue, server (access log) "
        f"p50 {ms['p50']} ms, p99 {ms['p99']} ms, max {ms['max']} ms; "
        + (
            f"after waiting in the queue, max {wait['max']} ms; "
            if wait["max"] is not None
            else "none shed from the queue; "
        )
        + f"client, from its send, p50 {client['p50']} ms, max {client['max']} ms "
        f"| {_met(g['shed_ms_with_retry_after']['met'])} |",
        f"| bucket table after {IDENTITIES} unique identities (in process) | {mem['value']['buckets']} buckets, "
        f"{mem['value']['bytes'] / 1e6:.1f} MB (bound {mem['target']['buckets']}, "
        f"{mem['target']['bytes'] / 1e6:g} MB) | {_met(mem['met'])} |",
        f"| cold `GET /` x {STORM_CLIENTS} at once: slowest page <= {GOAL_COLD_PAGE_S:g} s, slowest `/health` "
        f"<= {GOAL_COLD_HEALTH_MS:g} ms | {cold['value']['page_s']} s, {cold['value']['health_ms']} ms "
        f"| {_met(cold['met'])} |",
        f"| log lines holding a question the probe asked (`GET /ask?q=`, `POST /ask`), every server "
        f"| {g['question_text_in_logs']['value']} | {_met(g['question_text_in_logs']['met'])} |",
        f"| cold `GET /answer/{{id}}` over {ids['value']['ids']} distinct ids at once, right after start: `/health` "
        f"p99 <= {GOAL_COLD_HEALTH_MS:g} ms | {ids['value']['health_p99_ms']} ms | {_met(ids['met'])} |",
        *(_storm_row(g[key], path) for key, path in STORM_GOALS.items()),
        "",
        "| case | expected | observed | as expected |",
        "|---|---|---|---|",
    ]
    for c in report["cases"]:
        observed = c["observed"].replace("|", "\\|")
        lines.append(f"| {c['name']} | {c['expected']} | {observed} | {'yes' if c['passed'] else 'NO'} |")
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tools.probe", description=__doc__.split("\n")[0])
    p.add_argument("--root", help="project directory (default: found from the current directory)")
    p.add_argument("--no-write", action="store_true", help="print only")
    args = p.parse_args(argv)
    root = Path(args.root) if args.root else find_root()
    try:
        result = run(root)
    except (ProbeError, loadtest.LoadError) as exc:
        print(f"probe: {exc}", file=sys.stderr)
        return 2
    if not args.no_write:
        Paths(root).result(REPORT).write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    print(render(result), end="")
    failed = [c["name"] for c in result["cases"] if not c["passed"]]
    if failed:
        print("not as expected: " + "; ".join(failed), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
