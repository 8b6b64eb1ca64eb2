"""Bounds on how long a client may take to send a request, so a slow client cannot hold a
connection (and the memory behind it) indefinitely, out of the rate limiter's sight.

- Headers: ``HeaderDeadlineH11Protocol`` is uvicorn's h11 protocol with one timer more. It is
  armed when a connection opens and again when a response completes (the connection is then
  waiting for the next request's headers); if the headers of a request have not all arrived
  ``header_timeout_s`` later, the client is sent ``408 Request Timeout`` and the connection
  is closed. uvicorn's own ``timeout_keep_alive`` does not cover this: it is cancelled by the
  first byte received, so a client sending one header byte a minute was held for ever. The
  size of the headers is bounded by h11 (``h11_max_incomplete_event_size``, 16 KiB).
- Body: ``read_bounded`` (``bounded_body.py``) takes a deadline for the whole body; ``POST
  /ask`` answers 408 and closes the connection when the body has not arrived within
  ``BODY_TIMEOUT_S`` of the handler starting to read it.

Idle keep-alive connections are closed by uvicorn after ``timeout_keep_alive`` (5 s).
"""

from __future__ import annotations

import asyncio

from uvicorn.protocols.http.h11_impl import H11Protocol

HEADER_TIMEOUT_S = 10.0
BODY_TIMEOUT_S = 10.0

_REQUEST_TIMEOUT = b"HTTP/1.1 408 Request Timeout\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"


class HeaderDeadlineH11Protocol(H11Protocol):
    """uvicorn's h11 protocol; a request whose headers are not complete within
    ``header_timeout_s`` of the connection opening (or of the previous response) gets 408
    and the connection is closed."""

    header_timeout_s = HEADER_TIMEOUT_S
    _header_deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)  # type: ignore[arg-type]
        self._arm_header_deadline()

    def on_response_complete(self) -> None:
        finished = self.cycle
        super().on_response_complete()
        # A pipelined request already parsed has its headers: no deadline for those.
        if not self.transport.is_closing() and self.cycle is finished:
            self._arm_header_deadline()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm_header_deadline()
        super().connection_lost(exc)

    def _arm_header_deadline(self) -> None:
        self._disarm_header_deadline()
        # The cycle the timer was armed under: a new one means this request's headers arrived.
        armed_under = self.cycle
        self._header_deadline = self.loop.call_later(self.header_timeout_s, self._headers_overdue, armed_under)

    def _disarm_header_deadline(self) -> None:
        timer = self._header_deadline
        if timer is not None:
            timer.cancel()
            self._header_deadline = None

    def _headers_overdue(self, armed_under: object) -> None:
        self._header_deadline = None
        if self.transport.is_closing():
            return
        if self.cycle is not None and self.cycle is not armed_under:
            return  # the headers arrived; the request is the app's now (bounded by its own rules)
        self.transport.write(_REQUEST_TIMEOUT)
        self.transport.close()
