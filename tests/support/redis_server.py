"""A throwaway redis-server for tests, on loopback, with nothing persisted.

``redis_server`` (session-scoped fixture) starts the ``redis-server`` binary from PATH on
127.0.0.1 on a free port in a temporary directory (``--save "" --appendonly no``), waits
until it answers PING, yields a ``RedisServer`` and stops it afterwards. Without the binary
it skips, except under CI (env var ``CI`` set and non-empty), where it fails: a CI job
that silently skips the redis tests would pass without testing anything.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import redis

_STARTUP_TIMEOUT_S = 10.0
_ATTEMPTS = 3  # a free port can be taken between our probe and redis binding it


@dataclass(frozen=True)
class RedisServer:
    host: str
    port: int

    @property
    def url(self) -> str:
        return f"redis://{self.host}:{self.port}/0"


def free_port() -> int:
    """A loopback port nobody listens on right now (also handy as a 'closed port')."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _start(binary: str, workdir: Path, port: int) -> subprocess.Popen[bytes] | None:
    logfile = workdir / f"redis-{port}.log"
    proc = subprocess.Popen(
        [
            binary,
            "--bind",
            "127.0.0.1",
            "--port",
            str(port),
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            str(workdir),
            "--daemonize",
            "no",
            "--logfile",
            str(logfile),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    client = redis.Redis(host="127.0.0.1", port=port, socket_connect_timeout=0.2, socket_timeout=0.5)
    deadline = time.monotonic() + _STARTUP_TIMEOUT_S
    try:
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                return None  # exited: most likely the port was taken meanwhile
            try:
                if client.ping():
                    return proc
            except redis.exceptions.RedisError:
                time.sleep(0.05)
    finally:
        client.close()
    _stop(proc)
    return None


def _stop(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=5)


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    binary = shutil.which("redis-server")
    if binary is None:
        message = (
            "redis-server binary not found on PATH; the redis rate-limit tests need it "
            "(Debian/Ubuntu: apt-get install redis-server)"
        )
        if os.environ.get("CI"):
            pytest.fail(message + " -- CI is set, so this is a failure, not a skip", pytrace=False)
        pytest.skip(message)
    workdir = tmp_path_factory.mktemp("redis")
    for _ in range(_ATTEMPTS):
        port = free_port()
        proc = _start(binary, workdir, port)
        if proc is not None:
            break
    else:
        logs = "\n".join(p.read_text(errors="replace")[-2000:] for p in workdir.glob("*.log"))
        pytest.fail(f"redis-server did not come up after {_ATTEMPTS} attempts; log tail:\n{logs}", pytrace=False)
    try:
        yield RedisServer("127.0.0.1", port)
    finally:
        _stop(proc)
