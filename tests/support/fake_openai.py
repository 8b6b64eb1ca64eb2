"""A fake OpenAI API on loopback, for the paid paths: a real HTTP server, the real client.

``fake_openai`` (fixture) yields a ``FakeOpenAI`` whose ``base_url`` is
``http://127.0.0.1:PORT/v1``; point ``openai.OpenAI(base_url=..., api_key="test-key",
max_retries=0)`` at it. The server (uvicorn + a small Starlette app, one per test session,
in a background thread) speaks the wire format of:

- ``POST /v1/chat/completions``: answers from a per-test queue filled by ``script(...)``
  with ``claims_reply``, ``truncated_reply`` or ``content_reply``; an unscripted call is
  answered 500, so a test never passes on a call it did not expect.
- ``POST /v1/embeddings``: deterministic vectors from the sha256 of each text (not unit
  length, so the client's normalisation is tested), ``dimensions`` (default 1536), in
  ``float`` or ``base64`` encoding.

Both report ``usage``; by default prompt tokens are ``ceil(bytes / 4)`` of what the model
reads, a realistic count for English. ``requests`` lists every request received, in
order, so a test can assert that a refused run sent nothing.
"""

from __future__ import annotations

import base64
import hashlib
import json
import socket
import threading
import time
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

_STARTUP_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class Received:
    path: str
    body: dict
    authorization: str | None


@dataclass(frozen=True)
class ChatReply:
    """One scripted chat completion: the content, why it stopped, and optional usage."""

    content: str | None
    finish_reason: str = "stop"
    prompt_tokens: int | None = None  # None: ceil(bytes / 4) of the messages
    completion_tokens: int | None = None  # None: ceil(bytes / 4) of the content
    refusal: str | None = None


def claims_reply(claims: list[tuple[str, str]], **usage: int) -> ChatReply:
    """A complete answer: ``[(text, section_id), ...]`` as the claims JSON."""
    body = {"claims": [{"text": t, "section_id": s} for t, s in claims]}
    return ChatReply(json.dumps(body), "stop", **usage)


def truncated_reply(**usage: int) -> ChatReply:
    """An answer cut off at max_completion_tokens: half a JSON document, finish_reason length."""
    return ChatReply('{"claims": [{"text": "A cache MUST NOT', "length", **usage)


def content_reply(content: str | None, finish_reason: str = "stop", **usage: int) -> ChatReply:
    return ChatReply(content, finish_reason, **usage)


def _approx_tokens(text: str) -> int:
    return max(1, -(-len(text.encode("utf-8")) // 4))


def fake_vector(text: str, dims: int) -> np.ndarray:
    """Deterministic, not unit length: seeded by the text's sha256."""
    seed = int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest()[:8], "little")
    return (np.random.default_rng(seed).standard_normal(dims) * 3.0).astype(np.float32)


@dataclass
class FakeOpenAI:
    base_url: str = ""
    requests: list[Received] = field(default_factory=list)
    _queue: deque = field(default_factory=deque)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def script(self, *replies: ChatReply) -> None:
        """Queue chat completion replies, answered in order."""
        with self._lock:
            self._queue.extend(replies)

    def reset(self) -> None:
        with self._lock:
            self._queue.clear()
            self.requests.clear()

    def paths(self) -> list[str]:
        return [r.path for r in self.requests]

    # handlers -------------------------------------------------------------------------------

    async def _chat(self, request: Request) -> JSONResponse:
        body = await request.json()
        with self._lock:
            self.requests.append(Received("/v1/chat/completions", body, request.headers.get("authorization")))
            reply = self._queue.popleft() if self._queue else None
        if reply is None:
            return JSONResponse(
                {"error": {"message": "fake_openai: no scripted reply", "type": "server_error", "code": None}},
                status_code=500,
            )
        read = "".join(m.get("content") or "" for m in body.get("messages", []))
        prompt = reply.prompt_tokens if reply.prompt_tokens is not None else _approx_tokens(read)
        completion = (
            reply.completion_tokens if reply.completion_tokens is not None else _approx_tokens(reply.content or "")
        )
        return JSONResponse(
            {
                "id": f"chatcmpl-fake{len(self.requests)}",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": body.get("model"),
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": reply.content, "refusal": reply.refusal},
                        "finish_reason": reply.finish_reason,
                        "logprobs": None,
                    }
                ],
                "usage": {
                    "prompt_tokens": prompt,
                    "completion_tokens": completion,
                    "total_tokens": prompt + completion,
                },
            }
        )

    async def _embeddings(self, request: Request) -> JSONResponse:
        body = await request.json()
        with self._lock:
            self.requests.append(Received("/v1/embeddings", body, request.headers.get("authorization")))
        inputs = body["input"] if isinstance(body["input"], list) else [body["input"]]
        dims = int(body.get("dimensions") or 1536)
        b64 = body.get("encoding_format") == "base64"
        data = []
        for i, text in enumerate(inputs):
            vec = fake_vector(text, dims)
            emb: Any = base64.b64encode(vec.astype("<f4").tobytes()).decode() if b64 else vec.tolist()
            data.append({"object": "embedding", "index": i, "embedding": emb})
        tokens = sum(_approx_tokens(t) for t in inputs)
        return JSONResponse(
            {
                "object": "list",
                "data": data,
                "model": body.get("model"),
                "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
            }
        )

    def app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/v1/chat/completions", self._chat, methods=["POST"]),
                Route("/v1/embeddings", self._embeddings, methods=["POST"]),
            ]
        )


@pytest.fixture(scope="session")
def fake_openai_server() -> Iterator[FakeOpenAI]:
    fake = FakeOpenAI()
    # Bind first, then hand the socket over: no window for another process to take the port.
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(fake.app(), log_level="warning", access_log=False, lifespan="off")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, name="fake-openai", daemon=True)
    thread.start()
    deadline = time.monotonic() + _STARTUP_TIMEOUT_S
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            sock.close()
            pytest.fail("fake OpenAI server did not start", pytrace=False)
        time.sleep(0.01)
    fake.base_url = f"http://127.0.0.1:{port}/v1"
    try:
        yield fake
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()


@pytest.fixture
def fake_openai(fake_openai_server: FakeOpenAI) -> Iterator[FakeOpenAI]:
    """The session's fake server with an empty script and no recorded requests."""
    fake_openai_server.reset()
    yield fake_openai_server
    fake_openai_server.reset()
