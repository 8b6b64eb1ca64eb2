"""Hostile input at the HTTP edge: bodies too large to hold, content types that need no preflight,
ids that would make a reply grow, and the headers every JSON reply carries.

The bound on memory is shown where it is decided: the app is called as ASGI with a body that
never ends, and the test counts the bytes the app pulled from it. A real server (uvicorn on
loopback) shows the same refusal arriving before the body is sent.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import itertools
import logging
import socket
import time
from collections.abc import Iterator

import pytest
from starlette.testclient import TestClient

from rag_contract.answering.free_text import max_body_bytes
from rag_contract.index.registry import Registry
from rag_contract.web.app import ECHO_MAX_CHARS
from rag_contract.web.slash_redirect import redirect_target
from tests.support.apps import fresh_status, make_app

CHUNK = 64 * 1024
BIG = 256  # chunks: 16 MiB, far past the limit, finite so a regression fails rather than hangs


@pytest.fixture(scope="module")
def drafts(tmp_path_factory):
    # No fixed question is answered here: an empty drafts directory is enough.
    return tmp_path_factory.mktemp("drafts")


@pytest.fixture
def app(project, index, drafts, embedder):
    return make_app(project, Registry(index), drafts=drafts, embedder=embedder, status=fresh_status(index))


def ask_scope(headers: list[tuple[bytes, bytes]]) -> dict:
    """The ASGI scope of a POST /ask from a loopback client, with these request headers."""
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/ask",
        "raw_path": b"/ask",
        "root_path": "",
        "query_string": b"",
        "headers": headers,
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 8000),
    }


def post_asgi(app, headers: list[tuple[bytes, bytes]], chunks: Iterator[bytes]) -> tuple[int, dict, int]:
    """POST /ask straight into the ASGI app, the body drawn from ``chunks``.

    Returns (status, response headers, bytes the app pulled from the body)."""
    pulled = 0
    sent: list[dict] = []

    async def receive() -> dict:
        nonlocal pulled
        chunk = next(chunks, None)
        if chunk is None:
            return {"type": "http.request", "body": b"", "more_body": False}
        pulled += len(chunk)
        return {"type": "http.request", "body": chunk, "more_body": True}

    async def send(message: dict) -> None:
        sent.append(message)

    scope = ask_scope(headers)
    asyncio.run(app(scope, receive, send))
    start = next(m for m in sent if m["type"] == "http.response.start")
    return start["status"], {k.decode().lower(): v.decode() for k, v in start["headers"]}, pulled


def test_an_oversized_body_is_refused_after_at_most_the_limit_and_one_chunk(app, project):
    limit = max_body_bytes(project.thresholds.ask.max_question_chars)
    big = itertools.repeat(b"x" * CHUNK, BIG)  # as if chunked: no Content-Length to refuse on
    status, headers, pulled = post_asgi(app, [(b"content-type", b"application/json")], big)
    assert status == 413
    assert pulled <= limit + CHUNK
    assert headers["connection"] == "close"


def test_an_under_declared_body_is_cut_off_while_streaming(app, project):
    limit = max_body_bytes(project.thresholds.ask.max_question_chars)
    headers = [(b"content-type", b"application/json"), (b"content-length", b"10")]
    status, _, pulled = post_asgi(app, headers, itertools.repeat(b"x" * CHUNK, BIG))
    assert status == 413 and pulled <= limit + CHUNK


def test_a_declared_length_over_the_limit_is_refused_before_reading_a_byte(app):
    headers = [(b"content-type", b"application/json"), (b"content-length", str(256 * 2**20).encode())]
    status, _, pulled = post_asgi(app, headers, itertools.repeat(b"x" * CHUNK, BIG))
    assert (status, pulled) == (413, 0)


def test_a_body_at_the_limit_is_read_whole(app, project):
    limit = max_body_bytes(project.thresholds.ask.max_question_chars)
    body = b'{"question": "What is a URI?"}'
    padded = body[:-1] + b" " * (limit - len(body)) + b"}"
    assert len(padded) == limit
    status, _, pulled = post_asgi(app, [(b"content-type", b"application/json")], iter([padded]))
    assert status == 200 and pulled == limit


def test_a_real_server_refuses_a_declared_256_mb_body_before_it_is_sent(app, live_server):
    server = live_server(app)
    with socket.create_connection((server.host, server.port), timeout=5) as sock:
        sock.sendall(
            b"POST /ask HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
            b"Content-Length: 268435456\r\n\r\n" + b'{"question": "'
        )
        reply = b""
        while b"\r\n\r\n" not in reply:
            data = sock.recv(4096)
            if not data:
                break
            reply += data
    head = reply.split(b"\r\n\r\n", 1)[0].decode().lower()
    assert head.startswith("http/1.1 413")
    assert "connection: close" in head


@pytest.mark.parametrize(
    "content_type", [None, "text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", "json"]
)
def test_ask_needs_application_json(app, content_type):
    # A cross-origin page can send these without a preflight; application/json it cannot.
    headers = {"content-type": content_type} if content_type else {}
    r = TestClient(app).post("/ask", content=b'{"question": "What is a URI?"}', headers=headers)
    assert r.status_code == 415, r.text
    assert r.json()["reason"] == "content_type_not_json"
    assert "x-index-version" not in r.headers


@pytest.mark.parametrize("coding", ["gzip", "br", "identity, gzip", "x-unknown"])
def test_a_content_coded_ask_body_is_415_whatever_it_holds(app, coding):
    # RFC 9110 section 8.4 (a coding the recipient does not decode) and 15.5.16 (415, with
    # Accept-Encoding naming what would have been read). The body is plain JSON: it was answered.
    r = TestClient(app).post(
        "/ask",
        content=b'{"question": "What is a URI?"}',
        headers={"content-type": "application/json", "content-encoding": coding},
    )
    assert r.status_code == 415, r.text
    assert r.json()["reason"] == "content_encoding_not_supported"
    assert r.headers["accept-encoding"] == "identity"


def test_an_identity_coded_ask_body_is_read(app):
    r = TestClient(app).post("/ask", json={"question": "What is a URI?"}, headers={"content-encoding": "identity"})
    assert r.status_code == 200, r.text


BIDI = ["\u202e", "\u202a", "\u2066", "\u2069", "\u200f", "\u061c"]


@pytest.mark.parametrize("control", BIDI)
def test_a_question_holding_a_bidi_control_is_refused_and_never_echoed(app, control):
    # U+202E shows "What is a URI?" reversed wherever it is echoed: the answer's JSON, the page.
    client = TestClient(app)
    question = f"What is a {control}URI?"
    posted = client.post("/ask", json={"question": question})
    assert posted.status_code == 422, posted.text
    assert posted.json()["reason"] == "question_bidi_control"
    page = client.get("/ask", params={"q": question})
    assert page.status_code == 422
    for r in (posted, page):
        assert control not in r.text


@pytest.mark.parametrize("path", ["/answer/q1\u202eexe.txt", "/q/q1\u202eexe.txt", "/section/rfc9110:\u202eexe.txt"])
def test_an_echoed_id_carries_no_bidi_control(app, path):
    r = TestClient(app).get(path, headers={"accept": "application/json"})
    assert r.status_code == 404
    assert "\u202e" not in r.text and "exe.txt" in r.text


def test_every_json_reply_says_nosniff(project, index, drafts, embedder):
    app = make_app(project, Registry(index), drafts=drafts, embedder=embedder, status=fresh_status(index))
    client = TestClient(app)
    replies = [
        client.get("/health"),
        client.get("/questions"),
        client.get("/answer/nope"),
        client.get("/no/such/path"),
        client.put("/ask"),
        client.post("/ask", json={"question": "What is a URI?"}),
        client.post("/ask", content=b"x", headers={"content-type": "text/plain"}),
        client.get("/section/rfc9110:9.2.1", headers={"accept": "application/json"}),
    ]
    for r in replies:
        assert r.headers["content-type"].startswith("application/json"), r.request.url
        assert r.headers.get("x-content-type-options") == "nosniff", (r.request.url, r.status_code)


def test_a_rate_limited_reply_says_nosniff_too(project, index, drafts, embedder):
    rl = dataclasses.replace(project.thresholds.rate_limit, max_client_burst=1, max_requests_per_minute=1)
    thresholds = dataclasses.replace(project.thresholds, rate_limit=rl)
    client = TestClient(make_app(project, Registry(index), drafts=drafts, embedder=embedder, thresholds=thresholds))
    client.get("/health")
    r = client.get("/health")
    assert r.status_code == 429 and r.headers.get("x-content-type-options") == "nosniff"


@pytest.mark.parametrize("path", ["/answer/{}", "/q/{}", "/section/{}"])
def test_a_404_never_echoes_more_than_a_bounded_id(app, path):
    long_id = "A" * 60_000  # httpx refuses URLs past 64 KiB
    client = TestClient(app)
    for accept in ("application/json", "text/html"):
        r = client.get(path.format(long_id), headers={"accept": accept})
        assert r.status_code == 404
        assert len(r.content) < 4096, (path, accept, len(r.content))
        assert "A" * (ECHO_MAX_CHARS + 1) not in r.text
        assert "60000 characters" in r.text


def test_a_short_id_is_echoed_whole(app):
    r = TestClient(app).get("/answer/q9999")
    assert r.status_code == 404 and "'q9999'" in r.json()["detail"]


# --- redirects -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "location"),
    [
        ("/health/", "/health"),
        ("/questions/", "/questions"),
        ("/answer/q01/", "/answer/q01"),
        ("/section/rfc9110:9.2.1/", "/section/rfc9110:9.2.1"),
        ("/q/q01/?x=1", "/q/q01?x=1"),
    ],
)
def test_a_trailing_slash_redirects_to_a_relative_location_whatever_the_host_header(app, path, location):
    client = TestClient(app, base_url="http://evil.example")
    r = client.get(path, headers={"Host": "evil.example"}, follow_redirects=False)
    assert r.status_code == 307
    assert r.headers["location"] == location
    assert "evil.example" not in r.headers["location"]


def test_a_redirect_keeps_the_configured_root_path(app):
    client = TestClient(app, root_path="/rfc")
    r = client.get("/rfc/health/", follow_redirects=False)
    assert r.status_code == 307 and r.headers["location"] == "/rfc/health"


def test_a_location_never_starts_with_two_slashes(app):
    # A raw path "//health/" (an HTTP client would read a host there) whose decoded path a
    # server normalised: the Location is still a path, never "//health" (a host named health).
    scope = {"type": "http", "method": "GET", "path": "/health/", "raw_path": b"//health/", "query_string": b""}
    assert redirect_target(scope, app.router) == "/health"


@pytest.mark.parametrize("path", ["/nowhere/", "/health//x/", "/static/", "/answer/q01%2F"])
def test_a_path_no_route_matches_is_a_404_not_a_redirect(app, path):
    r = TestClient(app).get(path, headers={"Host": "evil.example"}, follow_redirects=False)
    assert r.status_code == 404
    assert "location" not in r.headers


def test_a_client_that_goes_away_mid_body_is_an_expected_end_not_an_error(app):
    messages = iter([{"type": "http.request", "body": b'{"quest', "more_body": True}, {"type": "http.disconnect"}])
    sent: list[dict] = []

    async def receive() -> dict:
        return next(messages)

    async def send(message: dict) -> None:
        sent.append(message)

    scope = ask_scope([(b"content-type", b"application/json"), (b"content-length", b"100")])
    asyncio.run(app(scope, receive, send))  # raises nothing (it raised ClientDisconnect)
    assert sent[0]["status"] == 400 and b'"reason":"body_aborted"' in sent[1]["body"]


@pytest.mark.parametrize(
    "aborted",
    [
        b"Content-Length: 100\r\n\r\n" + b'{"quest',  # then the client closes
        b"Transfer-Encoding: chunked\r\n\r\n" + b'5\r\n{"que\r\nzz\r\n',  # a malformed chunk
    ],
    ids=["disconnect", "malformed-chunk"],
)
def test_an_aborted_upload_leaves_no_traceback_in_the_log(app, live_server, aborted):
    server = live_server(app)
    records: list[logging.LogRecord] = []
    handler = logging.Handler()
    handler.emit = records.append  # type: ignore[method-assign]
    errors = logging.getLogger("uvicorn.error")  # does not propagate to the root (caplog)
    errors.addHandler(handler)
    head = b"POST /ask HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
    try:
        with socket.create_connection((server.host, server.port), timeout=5) as sock:
            sock.sendall(head + aborted)
            sock.shutdown(socket.SHUT_WR)
            with contextlib.suppress(OSError):
                while sock.recv(4096):
                    pass
        time.sleep(0.5)  # the handler sees the disconnect after the socket closes
    finally:
        errors.removeHandler(handler)
    assert not [r.getMessage() for r in records if r.exc_info or "Exception in ASGI" in r.getMessage()]
