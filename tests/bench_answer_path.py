"""Cost of one fixed answer through the served app, in process: ``GET /answer/q11``.

The request is driven straight through the ASGI app (the committed drafts, the committed
question vector, the rate limiter in front, a real clock), with no socket and no HTTP client,
so what is timed is the work the service does per request and nothing the client adds:

- ``answer_json``: a plain ``GET``, body and budget included;
- ``revalidation_304``: the same ``GET`` with the ``If-None-Match`` a client holds from a
  previous response (a 304, or a 200 where the route carries no validator);
- ``question_page``: ``GET /q/q11``, the same answer as a page.

Recorded, not budgeted: the gate's latency bar times ``Service.answer`` itself.
"""

from __future__ import annotations

import asyncio
import time

import pytest

from rag_contract.index.registry import Registry
from tests.support.apps import make_app

QID = "q11"


def _asgi_get(app, path: str, headers: list[tuple[bytes, bytes]]):
    """One GET through ``app``: (status, headers, body)."""
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "GET",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [(b"host", b"127.0.0.1"), *headers],
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 8000),
        "state": {},
    }
    sent: list[dict] = []

    async def receive() -> dict:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict) -> None:
        sent.append(message)

    async def run() -> None:
        await app(scope, receive, send)

    return run, sent


@pytest.fixture(scope="module")
def app(project, index, embedder):
    return make_app(
        project, Registry(index), drafts=project.paths.drafts, embedder=embedder, service_clock=time.perf_counter
    )


@pytest.fixture(scope="module")
def loop():
    loop = asyncio.new_event_loop()
    yield loop
    loop.close()


def _request(loop, app, path: str, headers: list[tuple[bytes, bytes]] | None = None):
    def call() -> tuple[int, dict]:
        run, sent = _asgi_get(app, path, headers or [])
        loop.run_until_complete(run())
        start = sent[0]
        return start["status"], {k.decode(): v.decode() for k, v in start["headers"]}

    return call


def test_answer_json(benchmark, loop, app):
    status, _ = benchmark(_request(loop, app, f"/answer/{QID}"))
    assert status == 200


def test_revalidation_304(benchmark, loop, app):
    _, headers = _request(loop, app, f"/answer/{QID}")()
    tag = headers.get("etag", 'W/"none"')
    status, _ = benchmark(_request(loop, app, f"/answer/{QID}", [(b"if-none-match", tag.encode())]))
    assert status in (200, 304)


def test_question_page(benchmark, loop, app):
    status, _ = benchmark(_request(loop, app, f"/q/{QID}"))
    assert status == 200
