"""Bounds on how long a client may take to send a request or to read its response, so a slow
client cannot hold a connection (and the memory behind it) indefinitely, out of the rate
limiter's sight; and request heads checked before the app sees them (``framing.py``).

- Headers: ``HeaderDeadlineH11Protocol`` is uvicorn's h11 protocol with two timers more. The
  first is armed when a connection opens and again when a response completes (the connection
  is then waiting for the next request's headers); if the headers of a request have started
  but not all arrived ``header_timeout_s`` later, the client is sent ``408 Request Timeout``
  and the connection is closed. A connection on which nothing at all arrived in that time is
  closed without a reply: there is no request to answer, and an unsolicited 408 on a fresh
  connection is read by clients as the reply to a request they had not sent yet (RFC 9112
  section 9.5 lets either side close an idle connection at any time). uvicorn's own
  ``timeout_keep_alive`` does not cover this: it is cancelled by the first byte received, so a
  client sending one header byte a minute was held for ever. The size of the headers is
  bounded before h11 parses them (``framing.HeadLimits``: h11 bounds only a head still
  incomplete, so one sent in a single write was parsed whole, whatever its size).
- Reading responses: the second timer is armed when the transport's write buffer passes its
  high-water mark (the client has stopped reading: the kernel's buffers are full too) and
  cancelled when it drains. If nothing of it was sent in the ``write_timeout_s`` since (the
  client read nothing) the connection is aborted, its buffers dropped; a client that reads,
  however slowly, gets the next such period. Without it, a client that pipelines requests and reads nothing
  held its connection, and a handler blocked on the write, for as long as it liked.
- Heads: what h11 parses is bounded first, on the bytes however they arrived
  (``framing.HeadLimits``: a head or trailer section of 16 KiB and 100 fields, else 431; a
  chunk-size line of 1 KiB, else 400), and every request h11 parses goes through
  ``framing.CheckedConnection`` (absolute-form
  targets accepted; Content-Length with Transfer-Encoding, an invalid ``Host`` and a version
  other than HTTP/1.x refused with their status, and the connection closed). Every reply the
  protocol writes itself (those refusals, what h11 cannot parse, the 408) is ``protocol_reply``:
  ``Date``, ``nosniff`` and ``Content-Length``, as the app's replies carry.
- Upgrades: a request asking to ``Upgrade`` (a websocket) is served as plain HTTP without a
  log line (uvicorn wrote two WARNINGs per request, before the rate limiter).
- Body: ``read_bounded`` (``bounded_body.py``) takes a deadline for the whole body; ``POST
  /ask`` answers 408 and closes the connection when the body has not arrived within
  ``BODY_TIMEOUT_S`` of the handler starting to read it.

Idle keep-alive connections are closed by uvicorn after ``timeout_keep_alive`` (5 s).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import h11
from h11._connection import DEFAULT_MAX_INCOMPLETE_EVENT_SIZE
from uvicorn.protocols.http.h11_impl import STATUS_PHRASES, H11Protocol

from rag_contract.web.framing import CheckedConnection

HEADER_TIMEOUT_S = 10.0
BODY_TIMEOUT_S = 10.0
WRITE_TIMEOUT_S = 10.0

_PLAIN_TEXT = ((b"content-type", b"text/plain; charset=utf-8"), (b"x-content-type-options", b"nosniff"))


def protocol_reply(status: int, reason: str, fields: Sequence[tuple[bytes, bytes]] = ()) -> bytes:
    """A reply written by the protocol itself (no app behind it), then the connection closed:
    ``fields`` (the server's ``Date``), a plain-text ``reason`` with its length, ``nosniff``
    as on every reply of the app (RFC 9110 section 6.6.1: an origin server with a clock MUST
    send ``Date``; section 8.6: a message with a body says its length)."""
    body = reason.encode("ascii", "replace")
    lines = [b"HTTP/1.1 %d %s" % (status, STATUS_PHRASES[status])]
    own = (*_PLAIN_TEXT, (b"content-length", b"%d" % len(body)), (b"connection", b"close"))
    lines += [name + b": " + value for name, value in (*fields, *own)]
    return b"\r\n".join(lines) + b"\r\n\r\n" + body


class HeaderDeadlineH11Protocol(H11Protocol):
    """uvicorn's h11 protocol; a request whose headers are not complete within
    ``header_timeout_s`` of the connection opening (or of the previous response) gets 408
    and the connection is closed (closed silently when nothing arrived); a response the
    client has not read for ``write_timeout_s`` aborts the connection; every request head
    passes ``framing.CheckedConnection`` (module docstring)."""

    header_timeout_s = HEADER_TIMEOUT_S
    write_timeout_s = WRITE_TIMEOUT_S
    _header_deadline: asyncio.TimerHandle | None = None
    _write_deadline: asyncio.TimerHandle | None = None
    _heard = False  # a byte arrived since the header deadline was armed

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        size = self.config.h11_max_incomplete_event_size
        self.conn = CheckedConnection(h11.SERVER, size if size is not None else DEFAULT_MAX_INCOMPLETE_EVENT_SIZE)

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)  # type: ignore[arg-type]
        if isinstance(self.conn, CheckedConnection):
            self.conn.scheme = b"https" if self.scheme == "https" else b"http"  # absolute-form targets must match
        self._arm_header_deadline()

    def data_received(self, data: bytes) -> None:
        self._heard = self._heard or bool(data)
        super().data_received(data)

    def _unsupported_upgrade_warning(self) -> None:
        # uvicorn logs two WARNING lines per request asking to upgrade (one telling operators to
        # install a websocket library the service does not need), before the rate limiter sees it:
        # a log flood any client can send. The request is served as plain HTTP, as RFC 9110
        # section 7.8 allows (a server MAY ignore Upgrade): nothing to warn anyone about.
        self.logger.debug("ignored an Upgrade request (no protocol to upgrade to)")

    def send_400_response(self, msg: str) -> None:
        refused = self.conn.refused if isinstance(self.conn, CheckedConnection) else None
        # What h11 itself could not parse is uvicorn's 400 with its message; either way the
        # reply is written here, with Date, nosniff and its length (uvicorn's had none of them).
        status, reason = (refused.status, refused.reason) if refused is not None else (400, msg)
        if self.cycle is None or not self.cycle.response_started:  # a body refused after a reply began: close only
            self.transport.write(protocol_reply(status, reason, self.server_state.default_headers))
        self.transport.close()

    def pause_writing(self) -> None:
        super().pause_writing()
        if self._write_deadline is None:
            self._arm_write_deadline()

    def _arm_write_deadline(self) -> None:
        pending = self.transport.get_write_buffer_size()
        self._write_deadline = self.loop.call_later(self.write_timeout_s, self._write_overdue, pending)

    def resume_writing(self) -> None:
        super().resume_writing()
        self._disarm_write_deadline()

    def _disarm_write_deadline(self) -> None:
        if self._write_deadline is not None:
            self._write_deadline.cancel()
            self._write_deadline = None

    def _write_overdue(self, pending: int) -> None:
        self._write_deadline = None
        if self.transport.get_write_buffer_size() < pending:
            self._arm_write_deadline()  # the client is reading, if slowly: a deadline per stall
            return
        self.logger.info("closing a connection whose client read nothing for %g s", self.write_timeout_s)
        self.transport.abort()  # close() would wait for the buffer to drain: for ever

    def on_response_complete(self) -> None:
        finished = self.cycle
        super().on_response_complete()
        # A pipelined request already parsed has its headers: no deadline for those.
        if not self.transport.is_closing() and self.cycle is finished:
            self._arm_header_deadline()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm_header_deadline()
        self._disarm_write_deadline()
        super().connection_lost(exc)

    def _arm_header_deadline(self) -> None:
        self._disarm_header_deadline()
        # The cycle the timer was armed under: a new one means this request's headers arrived.
        armed_under = self.cycle
        self._heard = bool(self.conn.trailing_data[0])  # bytes of the next request already buffered
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
        if self._heard:
            reason = f"the request head did not arrive within {self.header_timeout_s:g} s"
            self.transport.write(protocol_reply(408, reason, self.server_state.default_headers))
        self.transport.close()
