"""A real uvicorn server for tests, in a thread of the test process, on 127.0.0.1.

``running(app)`` binds a socket on a free loopback port itself (so there is no window in
which another process can take the port), starts ``uvicorn.Server`` on it in a daemon
thread, waits until it accepts connections, yields its base URL, and stops it afterwards.
The ``live_server`` fixture hands out such servers and stops every one at teardown.

Because the server shares the test's process, a test can hold the objects the app was
built from (the registry, a blocking drafter) and act on them while a real HTTP request is
in flight. Proxy headers are off, as in ``serve``: the peer is the rate limiter's business.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
import uvicorn

from rag_contract.web.serving import EVENT_LOOP

_STARTUP_TIMEOUT_S = 20.0


@dataclass(frozen=True)
class LiveServer:
    host: str
    port: int

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"


@contextlib.contextmanager
def running(app, *, lifespan: str = "on", **config: Any) -> Iterator[LiveServer]:
    """Serve ``app`` on 127.0.0.1:<free port> until the block ends; ``config`` goes to
    ``uvicorn.Config`` as well (``http=`` a protocol class, ``timeout_keep_alive=``)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    uvicorn_config = uvicorn.Config(
        app,
        lifespan=lifespan,
        log_level="warning",
        proxy_headers=False,
        server_header=False,
        access_log=False,
        loop=EVENT_LOOP,  # as ``serve`` runs it
        **config,
    )
    server = uvicorn.Server(uvicorn_config)
    errors: list[BaseException] = []

    def run() -> None:
        try:
            server.run(sockets=[sock])
        except BaseException as exc:  # noqa: BLE001 - reported to the test below
            errors.append(exc)

    thread = threading.Thread(target=run, name=f"uvicorn-{port}", daemon=True)
    thread.start()
    deadline = time.monotonic() + _STARTUP_TIMEOUT_S
    while not server.started:
        if errors or not thread.is_alive():
            sock.close()
            raise RuntimeError(f"uvicorn did not start: {errors[0] if errors else 'thread ended'}")
        if time.monotonic() > deadline:
            server.should_exit = True
            sock.close()
            raise RuntimeError(f"uvicorn did not start within {_STARTUP_TIMEOUT_S} s")
        time.sleep(0.01)
    try:
        yield LiveServer("127.0.0.1", port)
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()


@pytest.fixture
def live_server() -> Iterator[Callable[..., LiveServer]]:
    """``start(app) -> LiveServer``; every server started is stopped at teardown."""
    with contextlib.ExitStack() as stack:
        yield lambda app, **kw: stack.enter_context(running(app, **kw))


def until_embedder_loaded(url: str, timeout_s: float = 60.0) -> None:
    """Ask at ``url`` until the served model has loaded (``loaded_on_demand``: the first
    questions are 503 ``embedder_loading`` with ``Retry-After``), as a client would."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        r = httpx.post(f"{url}/ask", json={"question": "What is a URI?"}, timeout=10)
        if not (r.status_code == 503 and r.json().get("error") == "embedder_loading"):
            return
        time.sleep(float(r.headers.get("retry-after", 1)))  # as asked: a faster poll meets the limiter
    raise AssertionError(f"the embedder did not load within {timeout_s} s")
