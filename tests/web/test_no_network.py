"""``rag-contract serve`` makes no outbound network calls: the real command, under strace,
started, warmed (the embedder's model loaded) and asked every kind of request over loopback.

Before the fix onnxruntime's telemetry opened its event store at import (and, where it could,
looked up and called its collector host); ``stray`` reads the log for both.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from rag_contract.embedders.local import TELEMETRY_ENV
from tests.support.live_server import until_embedder_loaded
from tools.network_trace import STRACE, TELEMETRY_STORE, stray, traced

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(STRACE is None, reason="strace is not installed (.ci/run installs it)"),
]
STARTUP_TIMEOUT_S = 90.0  # strace slows the interpreter's start several times over


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_until_serving(proc: subprocess.Popen, url: str, log: Path) -> None:
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"serve exited with {proc.returncode}:\n{log.read_text(errors='replace')[-2000:]}")
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                return
        time.sleep(0.2)
    raise AssertionError(f"serve did not start within {STARTUP_TIMEOUT_S} s")


def test_serve_reaches_nothing_beyond_loopback(root, tmp_path):
    port = free_port()
    trace, out = tmp_path / "strace.log", tmp_path / "serve.log"
    # A home of its own: whatever the runtime would write there is seen here, not in the user's.
    env = {k: v for k, v in os.environ.items() if k not in (TELEMETRY_ENV, "PORT", "REDIS_URL")}
    env["HOME"] = str(tmp_path / "home")
    argv = [sys.executable, "-m", "rag_contract.cli", "--root", str(root), "serve", "--port", str(port)]
    with open(out, "wb") as log:
        proc = subprocess.Popen(
            traced(argv, trace), env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
    try:
        url = f"http://127.0.0.1:{port}"
        wait_until_serving(proc, url, out)
        until_embedder_loaded(url)
        replies = [
            httpx.get(f"{url}/answer/q11", timeout=10),
            httpx.post(f"{url}/ask", json={"question": "Which characters are structural in JSON?"}, timeout=10),
            httpx.get(f"{url}/ask", params={"q": "What is a URI?"}, timeout=10),
            httpx.get(f"{url}/section/rfc9110:9.2.1", timeout=10),
        ]
        assert all(r.status_code < 500 for r in replies), [r.status_code for r in replies]
        time.sleep(1.0)  # room for anything the runtime sends in the background
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
    text = trace.read_text(errors="replace")
    assert "openat(" in text, "strace recorded nothing: the trace is not working"
    assert stray(text) == [], "\n".join(stray(text)[:20])
    assert not (tmp_path / "home" / ".cache" / "Microsoft").exists()


# --- the reader itself turns red on what it guards against ------------------------------------

LOOPBACK = [
    '123 connect(7, {sa_family=AF_INET, sin_port=htons(6379), sin_addr=inet_addr("127.0.0.1")}, 16) = 0',
    "123 connect(7, {sa_family=AF_INET6, sin6_port=htons(8000), sin6_flowinfo=htonl(0), "
    'inet_pton(AF_INET6, "::1", &sin6_addr), sin6_scope_id=0}, 28) = 0',
    '123 sendto(9, "x", 1, 0, NULL, 0) = 1',
    '123 connect(3, {sa_family=AF_UNIX, sun_path="/run/redis.sock"}, 110) = 0',
    '123 openat(AT_FDCWD, "/app/index/meta.json", O_RDONLY|O_CLOEXEC) = 3',
]
STRAY = [
    '123 connect(7, {sa_family=AF_INET, sin_port=htons(443), sin_addr=inet_addr("20.42.65.85")}, 16) = 0',
    '123 sendto(7, "\\x12", 30, 0, {sa_family=AF_INET, sin_port=htons(53), sin_addr=inet_addr("127.0.0.53")}, 16)',
    "123 connect(7, {sa_family=AF_INET6, sin6_port=htons(443), sin6_flowinfo=htonl(0), "
    'inet_pton(AF_INET6, "2603:1030::5", &sin6_addr), sin6_scope_id=0}, 28) = -1 ENETUNREACH',
    '123 connect(5, {sa_family=AF_UNIX, sun_path="/var/run/nscd/socket"}, 110) = -1 ENOENT',
    f'123 openat(AT_FDCWD, "/root/.cache/Microsoft/{TELEMETRY_STORE}/onnxruntime.db", O_RDWR|O_CREAT) = 3',
]


def test_stray_passes_loopback_and_flags_everything_else():
    assert stray("\n".join(LOOPBACK)) == []
    assert stray("\n".join(STRAY)) == STRAY
