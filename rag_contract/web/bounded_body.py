"""A request body read with a ceiling: no more than ``limit`` bytes (plus one chunk) are ever held.

Contract: ``read_bounded(request, limit)`` returns the whole body when it is at most ``limit``
bytes. Otherwise it raises ``BodyTooLarge`` without buffering the rest:

- on the declared ``Content-Length`` (``how="declares"``), before reading a byte;
- while streaming (``how="has at least"``, with the bytes received so far), as soon as the
  received bytes pass ``limit``: a chunked or under-declared body is cut off there.

The server itself buffers at most one flow-control window per connection (uvicorn pauses
reading past 64 KiB), so a refused body costs about ``limit`` plus that window, whatever its
size. A malformed ``Content-Length`` is left to the server (uvicorn refuses it); one that
reaches here unparsed is ignored and the streaming check still holds. With ``timeout_s``, a
body that has not all arrived in that time raises ``BodyTimeout`` (a client that sends its
headers and then nothing, or a byte a minute, holds the connection no longer than that).
A client that goes away before its body has all arrived (it disconnects, or its chunked framing
is malformed and the server closes the connection) raises ``BodyAborted``: an expected end of
a request, for the caller to answer without a traceback.
"""

from __future__ import annotations

import anyio
from starlette.requests import ClientDisconnect, Request


class BodyTooLarge(Exception):
    """The body passed the ceiling: ``size`` bytes, as ``how`` says ("declares", "has at least")."""

    def __init__(self, size: int, how: str):
        super().__init__(f"the body {how} {size} bytes")
        self.size = size
        self.how = how


def declared_length(request: Request) -> int | None:
    """The ``Content-Length`` header as a number, or None when absent or not a plain integer."""
    raw = request.headers.get("content-length")
    if raw is None or not raw.strip().isdigit():
        return None
    return int(raw)


class BodyTimeout(Exception):
    """The body did not arrive within ``timeout_s`` (``received`` bytes had)."""

    def __init__(self, timeout_s: float, received: int):
        super().__init__(f"the body did not arrive within {timeout_s:g} s ({received} bytes received)")
        self.timeout_s = timeout_s
        self.received = received


class BodyAborted(Exception):
    """The client went away before the whole body arrived (``received`` bytes had)."""

    def __init__(self, received: int):
        super().__init__(f"the client went away before its body arrived ({received} bytes received)")
        self.received = received


async def read_bounded(request: Request, limit: int, timeout_s: float | None = None) -> bytes:
    """The body, or ``BodyTooLarge`` once it is known to exceed ``limit`` bytes, or
    ``BodyTimeout`` when it has not all arrived within ``timeout_s`` (None: no deadline), or
    ``BodyAborted`` when the client went away first."""
    declared = declared_length(request)
    if declared is not None and declared > limit:
        raise BodyTooLarge(declared, "declares")
    body = bytearray()
    try:
        with anyio.fail_after(timeout_s):
            async for chunk in request.stream():
                body += chunk
                if len(body) > limit:
                    raise BodyTooLarge(len(body), "has at least")
    except TimeoutError:
        raise BodyTimeout(timeout_s or 0.0, len(body)) from None
    except ClientDisconnect:
        raise BodyAborted(len(body)) from None
    return bytes(body)
