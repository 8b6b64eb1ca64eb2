"""Peak RSS of ``rag-contract serve`` under oversized ``POST /ask`` bodies (loopback only, bounded).

Contract:
- ``oversized_bodies(port, pid)`` reads the server's peak RSS (``VmHWM``), sends four parallel
  128 MiB bodies declared in ``Content-Length`` and four sent chunked, and reads the peak
  again. It returns, per body, how much the client got to send before the server stopped
  reading and the status line it answered, and the growth of the peak. At most about 1 GiB
  crosses loopback. ``forwarded(i)`` gives body ``i`` an ``X-Forwarded-For`` (a server
  trusting one proxy hop then sees eight clients, none near its burst).
- ``python -m tools.body_memory [PORT]`` starts the server on 127.0.0.1:PORT from this
  checkout, answers one question (the model loaded), runs ``oversized_bodies`` and prints it.
  ``python -m tools.probe`` runs the same measurement as one case of the probe suite.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
SIZE = 128 * 2**20
PARALLEL = 4
CHUNK = b"x" * 2**20


def peak_rss_mib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM"):
            return int(line.split()[1]) // 1024
    raise RuntimeError("no VmHWM in /proc status")


def send(port: int, declare: bool, results: list, forwarded: str | None = None) -> None:
    head = b"POST /ask HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
    if forwarded:
        head += f"X-Forwarded-For: {forwarded}\r\n".encode()
    head += f"Content-Length: {SIZE}\r\n\r\n".encode() if declare else b"Transfer-Encoding: chunked\r\n\r\n"
    sent = 0
    with socket.create_connection(("127.0.0.1", port)) as sock:
        try:
            sock.sendall(head)
            while sent < SIZE:
                sock.sendall(CHUNK if declare else b"%x\r\n" % len(CHUNK) + CHUNK + b"\r\n")
                sent += len(CHUNK)
        except OSError:
            pass  # the server answered and closed: what we measure
        try:
            sock.settimeout(10)
            status = sock.recv(200).split(b"\r\n", 1)[0].decode()
        except OSError:
            status = "(no reply)"
    results.append(("declared" if declare else "chunked", sent // 2**20, status))


def oversized_bodies(port: int, pid: int, forwarded: Callable[[int], str] | None = None) -> dict[str, Any]:
    """Four parallel declared bodies, then four chunked ones; the peak RSS before and after."""
    before = peak_rss_mib(pid)
    results: list = []
    for n, declare in enumerate((True, False)):
        threads = [
            threading.Thread(
                target=send,
                args=(port, declare, results, forwarded(n * PARALLEL + i) if forwarded else None),
            )
            for i in range(PARALLEL)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    after = peak_rss_mib(pid)
    return {
        "bodies": [{"kind": kind, "sent_mib": mib, "status": status} for kind, mib, status in results],
        "peak_rss_before_mib": before,
        "peak_rss_after_mib": after,
        "growth_mib": after - before,
    }


def main(port: int = 18731) -> None:
    argv = [sys.executable, "-m", "rag_contract.cli", "--root", str(ROOT), "serve", "--port", str(port)]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        url = f"http://127.0.0.1:{port}"
        for _ in range(600):
            try:
                if httpx.get(f"{url}/health", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.2)
        httpx.post(f"{url}/ask", json={"question": "What is a URI?"}, timeout=10)
        measured = oversized_bodies(port, proc.pid)
        for body in measured["bodies"]:
            print(f"{body['kind']}: {body['sent_mib']} MiB sent before the server stopped reading; {body['status']}")
        print(
            f"peak RSS {measured['peak_rss_before_mib']} MiB before, {measured['peak_rss_after_mib']} MiB after: "
            f"growth {measured['growth_mib']} MiB"
        )
    finally:
        proc.terminate()
        proc.wait(timeout=20)


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 18731)
