"""Slow clients are bounded: headers never finished, a body never sent, on a real server on
loopback. Each case gets ``408 Request Timeout`` and a closed connection within its bound,
and a slow *handler* (the server's own time) is never cut by the header deadline."""

from __future__ import annotations

import asyncio
import dataclasses
import socket
import time

import pytest
from starlette.applications import Starlette
from starlette.responses import PlainTextResponse
from starlette.routing import Route

from rag_contract.index.registry import Registry
from rag_contract.web.slow_clients import HeaderDeadlineH11Protocol
from tests.support.apps import make_app
from tests.support.wire import assert_protocol_reply

BOUND_S = 0.5
# How much later than the bound the 408 may arrive on a loaded machine; far below "held".
SLACK_S = 4.0
READ_LIMIT_S = BOUND_S + SLACK_S + 5.0


class FastDeadline(HeaderDeadlineH11Protocol):
    header_timeout_s = BOUND_S


def _read_until_closed(sock: socket.socket) -> bytes:
    sock.settimeout(READ_LIMIT_S)
    data = b""
    while chunk := sock.recv(65536):
        data += chunk
    return data


def _send_and_wait(port: int, *parts: bytes) -> tuple[bytes, float]:
    with socket.create_connection(("127.0.0.1", port), timeout=READ_LIMIT_S) as sock:
        started = time.perf_counter()
        for part in parts:
            sock.sendall(part)
        reply = _read_until_closed(sock)
        return reply, time.perf_counter() - started


async def _slow(request):
    await asyncio.sleep(BOUND_S * 3)
    return PlainTextResponse("done")


@pytest.fixture
def slow_server(live_server):
    app = Starlette(routes=[Route("/slow", _slow)])
    return live_server(app, http=FastDeadline, timeout_keep_alive=30)


@pytest.mark.parametrize(
    "parts",
    [
        (b"GET /slow HTTP/1.1\r\nHost: 127.0.0.1\r\n",),  # headers never finished
        (b"G",),
    ],
    ids=["headers-unfinished", "one-byte"],
)
def test_a_request_whose_headers_never_finish_gets_408_within_the_bound(slow_server, parts):
    reply, seconds = _send_and_wait(slow_server.port, *parts)
    assert reply.startswith(b"HTTP/1.1 408 "), reply[:80]
    assert BOUND_S * 0.9 <= seconds < BOUND_S + SLACK_S


def test_the_408_carries_date_nosniff_and_its_length(slow_server):
    # RFC 9110 section 6.6.1: an origin server with a clock MUST send Date; the protocol's own
    # replies say nosniff and their length, as every reply of the app does.
    reply, _ = _send_and_wait(slow_server.port, b"GET /slow HTTP/1.1\r\n")
    assert_protocol_reply(reply, 408)


def test_a_connection_that_sends_nothing_is_closed_within_the_bound_without_a_reply(slow_server):
    # No request began, so none is answered (RFC 9112 section 9.5: an idle connection may be closed).
    reply, seconds = _send_and_wait(slow_server.port)
    assert reply == b""
    assert BOUND_S * 0.9 <= seconds < BOUND_S + SLACK_S


def test_the_deadline_is_rearmed_for_the_next_request_on_a_kept_alive_connection(slow_server):
    first = b"GET /slow HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
    reply, seconds = _send_and_wait(slow_server.port, first, b"GET /slow HTTP/1.1\r\nHo")
    assert reply.startswith(b"HTTP/1.1 200 ") and b"done" in reply  # the slow handler was not cut
    assert b"HTTP/1.1 408 " in reply.split(b"done", 1)[1]
    assert seconds < BOUND_S * 3 + BOUND_S + SLACK_S


def test_a_body_that_never_arrives_gets_408_within_the_bound(project, index, tmp_path, embedder, live_server):
    app = make_app(project, Registry(index), drafts=tmp_path, embedder=embedder)
    app.state.web = dataclasses.replace(app.state.web, body_timeout_s=BOUND_S)
    server = live_server(app, http=FastDeadline)
    head = b"POST /ask HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 40\r\n\r\n"
    for parts in ((head,), (head, b'{"quest')):
        reply, seconds = _send_and_wait(server.port, *parts)
        assert reply.startswith(b"HTTP/1.1 408 "), reply[:80]
        assert b'"reason":"body_timeout"' in reply and b"connection: close" in reply.lower()
        assert BOUND_S * 0.9 <= seconds < BOUND_S + SLACK_S
