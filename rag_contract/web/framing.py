"""Request heads checked as RFC 9112 requires, before the app sees them (plain functions).

h11 parses HTTP/1.1 framing but leaves these to the server; ``refusal(request)`` says, for a
parsed ``h11.Request``, whether it must be refused, with what status and why:

- **Content-Length with Transfer-Encoding** (RFC 9112 section 6.1): the framing is ambiguous, the
  classic request-smuggling desync behind a proxy that trusts the other field. The server may
  reject it and MUST close the connection after responding: 400, and the connection closed, so
  nothing sent after the head (a second request hidden in the body) is ever read.
- **The protocol version** (RFC 9112 section 2.3, RFC 9110 section 15.6.6): an HTTP/1 request
  line naming another major version (``HTTP/2.0``) is 505.
- **Host** (RFC 9112 section 3.2): exactly one ``Host`` field whose value is ``uri-host [ ":"
  port ]`` (RFC 3986 section 3.2.2; a port of at most 65535, and a host when a port is given,
  RFC 9110 section 4.2.1); anything else is 400. h11 already refuses a missing or repeated one.

``origin_form(request)`` accepts an **absolute-form** target (RFC 9112 section 3.2.2: a server
MUST accept it): ``GET http://host:port/health?x`` becomes ``/health?x``, with ``Host`` replaced
by the target's authority (section 3.3: the target URI is the request-target itself). A scheme
other than http or https, or an authority that is not a valid host, is a refusal; so is
userinfo in the authority (RFC 9110 section 4.2.4: 400), and a scheme other than the
connection's (an ``https`` target on a plain connection) is 421 (section 7.4). The
asterisk-form (``*``) is accepted for ``OPTIONS`` only (section 3.2.4: 400 otherwise), and
``CONNECT`` (authority-form, section 3.2.3) is 501: an origin server opens no tunnel (RFC 9110
section 9.3.6). Empty lines before a request line are skipped (RFC 9112 section 2.2: a server
SHOULD ignore at least one; h11 refuses them).

``HeadLimits`` bound what h11 is given to parse, on the bytes received however they arrived
(``section_refusal``, ``chunk_refusal``): a request head or trailer section over 16 KiB or 100
fields is 431 (RFC 6585 section 5), a chunk-size line over 1 KiB is 400 (RFC 9112 section
7.1.1). h11 bounds only an event still incomplete, so a head sent in one write was parsed whole.

``CheckedConnection`` is ``h11.Connection`` with the limits checked before each event and both
checks above applied to every request it parses: a
refusal is raised as ``h11.RemoteProtocolError`` (what uvicorn answers with an error and a
closed connection), and is kept as ``refused`` so the protocol can send its status and reason.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass

import h11
from h11._readers import ChunkedReader
from h11._receivebuffer import ReceiveBuffer

# reg-name = *( unreserved / pct-encoded / sub-delims ), RFC 3986 section 3.2.2.
_REG_NAME = re.compile(rb"(?:[A-Za-z0-9\-._~!$&'()*+,;=]|%[0-9A-Fa-f]{2})*")
_IPV_FUTURE = re.compile(rb"v[0-9A-Fa-f]+\.[A-Za-z0-9\-._~!$&'()*+,;=:]+")
_PORT = re.compile(rb"[0-9]*")
_ABSOLUTE = re.compile(rb"(?P<scheme>[A-Za-z][A-Za-z0-9+.\-]*)://(?P<authority>[^/?#]*)(?P<rest>[^#]*)")
MAX_PORT = 65535


@dataclass(frozen=True)
class Refusal:
    """A request head refused before the app: its status and a one-line reason."""

    status: int
    reason: str


def _split_port(value: bytes) -> tuple[bytes, bytes | None]:
    if value.startswith(b"["):
        end = value.find(b"]")
        if end < 0:
            return value, None
        host, rest = value[: end + 1], value[end + 1 :]
        if rest.startswith(b":"):
            return host, rest[1:]
        return value, None  # "]" not at the end unless a port follows: not an IP-literal
    host, sep, port = value.rpartition(b":")
    return (host, port) if sep else (value, None)


def valid_host(value: bytes) -> bool:
    """``uri-host [ ":" port ]`` (RFC 9112 section 3.2, RFC 3986 section 3.2.2), with a host
    present when a port is and a port of at most 65535."""
    host, port = _split_port(value)
    if port is not None and (not host or not _PORT.fullmatch(port) or (port and int(port) > MAX_PORT)):
        return False
    if host.startswith(b"["):
        inner = host[1:-1] if host.endswith(b"]") else None
        if inner is None:
            return False
        if _IPV_FUTURE.fullmatch(inner):
            return True
        try:
            ipaddress.IPv6Address(inner.decode("ascii"))
        except ValueError:
            return False
        return True
    return _REG_NAME.fullmatch(host) is not None


def _fields(request: h11.Request, name: bytes) -> list[bytes]:
    return [value for key, value in request.headers if key == name]


def refusal(request: h11.Request) -> Refusal | None:
    """Why ``request``'s head must be refused, or None (see the module docstring)."""
    if not request.http_version.startswith(b"1."):
        return Refusal(505, f"HTTP/{request.http_version.decode('ascii', 'replace')} is not supported here")
    if _fields(request, b"transfer-encoding") and _fields(request, b"content-length"):
        return Refusal(400, "Content-Length and Transfer-Encoding together (RFC 9112 section 6.1)")
    hosts = _fields(request, b"host")
    if len(hosts) > 1 or (hosts and not valid_host(hosts[0])):
        return Refusal(400, "invalid Host (RFC 9112 section 3.2)")
    return None


def origin_form(request: h11.Request, scheme: bytes = b"http") -> h11.Request | Refusal:
    """``request`` with an absolute-form target rewritten to origin form and ``Host`` set from
    it; any other request unchanged. ``scheme`` is the connection's (``http`` unless TLS)."""
    target = request.target
    if request.method == b"CONNECT":
        return Refusal(501, "CONNECT is not implemented: an origin server opens no tunnel (RFC 9110 section 9.3.6)")
    if target == b"*":
        if request.method == b"OPTIONS":
            return request
        return Refusal(400, "the asterisk-form target is for OPTIONS only (RFC 9112 section 3.2.4)")
    if target.startswith(b"/"):
        return request
    m = _ABSOLUTE.fullmatch(target)
    if m is None:
        return Refusal(400, "invalid request target (RFC 9112 section 3.2)")
    authority = m["authority"]
    if b"@" in authority:
        # A sender MUST NOT generate userinfo; a recipient SHOULD treat it as an error: it is
        # the classic disguise of where a link leads (http://trusted.example@evil.example/).
        return Refusal(400, "userinfo in the target URI (RFC 9110 section 4.2.4)")
    target_scheme = m["scheme"].lower()
    if target_scheme not in (b"http", b"https") or not authority or not valid_host(authority):
        return Refusal(400, "invalid absolute-form target (RFC 9112 section 3.2.2)")
    if target_scheme != scheme:
        # An https URI asked over a plain connection: this server is not authoritative for it.
        return Refusal(
            421, f"an {target_scheme.decode()} target on an {scheme.decode()} connection (RFC 9110 section 7.4)"
        )
    rest = m["rest"]
    path = rest if rest.startswith(b"/") else b"/" + rest
    headers = [(k, v) for k, v in request.headers if k != b"host"]
    return h11.Request(
        method=request.method,
        target=path,
        headers=[(b"host", authority), *headers],
        http_version=request.http_version,
    )


@dataclass(frozen=True)
class HeadLimits:
    """Bounds on what h11 is given to parse, applied to the bytes received however they arrived:
    a request head or trailer section of at most ``max_bytes`` and ``max_fields`` field lines
    (else 431, RFC 6585 section 5), a chunk-size line (its extensions) of at most
    ``max_chunk_line`` bytes (else 400, RFC 9112 section 7.1.1: a server ought to limit them)."""

    max_bytes: int = 16 * 1024  # h11's own bound on an incomplete event, which pieces meet
    max_fields: int = 100  # a browser sends about 20
    max_chunk_line: int = 1024  # hex digits and extensions; the service reads none of them


def _blank_line(data: bytearray, start: int, limit: int) -> int:
    """Where the field section beginning at ``start`` ends (the index past its empty line), looking
    no further than ``limit`` bytes; -1 when it does not end there (h11 ends one at LF [CR] LF)."""
    stop = start + limit + 3
    ends = [i for i in (data.find(b"\n\r\n", start, stop), data.find(b"\n\n", start, stop)) if i >= 0]
    if not ends:
        return -1
    i = min(ends)
    return i + (3 if data[i + 1 : i + 2] == b"\r" else 2)


def section_refusal(data: bytearray, start: int, limits: HeadLimits, *, lines_before_fields: int) -> Refusal | None:
    """The 431 for the head or trailer section beginning at ``start`` (``lines_before_fields``: 1
    for the request line, 0 for trailers), or None: within the limits, or not complete yet and
    still under ``max_bytes``. Costs one bounded search and count, whatever the section holds."""
    if data[start : start + 1] == b"\n" or data[start : start + 2] == b"\r\n":
        return None  # an empty section (no trailer fields): what follows is not part of it
    end = _blank_line(data, start, limits.max_bytes)
    if end < 0:
        if len(data) - start > limits.max_bytes:
            return Refusal(431, f"the request head or trailer section passes {limits.max_bytes} bytes")
        return None
    if end - start > limits.max_bytes:
        return Refusal(431, f"the request head or trailer section passes {limits.max_bytes} bytes")
    fields = data.count(b"\n", start, end) - 1 - lines_before_fields  # the empty line's LF is not a field
    if fields > limits.max_fields:
        return Refusal(431, f"more than {limits.max_fields} fields in the request head or trailer section")
    return None


def chunk_refusal(data: bytearray, start: int, limits: HeadLimits) -> Refusal | None:
    """The 400 for a chunk-size line (with its extensions) longer than ``max_chunk_line``
    beginning at ``start``; for the last chunk's, the 431 of the trailer section after it."""
    end = data.find(b"\n", start, start + limits.max_chunk_line + 1)
    if end < 0:
        if len(data) - start > limits.max_chunk_line:
            return Refusal(400, f"a chunk-size line passes {limits.max_chunk_line} bytes (RFC 9112 section 7.1.1)")
        return None
    size = bytes(data[start:end]).split(b";", 1)[0].strip()
    if size and size.strip(b"0") == b"":  # the last chunk: the trailer section follows
        return section_refusal(data, end + 1, limits, lines_before_fields=0)
    return None


def _skip_empty_lines(buffer: ReceiveBuffer) -> None:
    # RFC 9112 section 2.2: a server SHOULD ignore at least one empty line (CRLF) received
    # before the request line; h11 refuses it ("no request line received").
    data, skip = buffer._data, 0
    while True:
        if data[skip : skip + 2] == b"\r\n":
            skip += 2
        elif data[skip : skip + 1] == b"\n":
            skip += 1
        else:
            break  # a lone CR stays: its LF may be on its way, or h11 refuses what follows it
    if skip:
        buffer._extract(skip)


class CheckedConnection(h11.Connection):
    """``h11.Connection`` whose requests pass ``origin_form`` and ``refusal`` (module docstring)."""

    refused: Refusal | None = None
    scheme = b"http"  # the connection's, set by the protocol when it is TLS
    limits = HeadLimits()

    def next_event(self) -> h11.Event | type[h11.NEED_DATA] | type[h11.PAUSED]:
        if self.their_state is h11.IDLE:
            _skip_empty_lines(self._receive_buffer)
            if self._receive_buffer._data == b"\r" and not self._receive_buffer_closed:
                return h11.NEED_DATA  # h11 would refuse a lone CR that an LF may yet follow
        if (over := self._over_limits()) is not None:
            self.refused = over
            self._process_error(self.their_role)  # as h11 does on a refusal: their state is ERROR
            raise h11.RemoteProtocolError(over.reason, error_status_hint=over.status)
        event = super().next_event()
        if not isinstance(event, h11.Request):
            return event
        checked = origin_form(event, self.scheme)
        why = checked if isinstance(checked, Refusal) else refusal(checked)
        if why is None and isinstance(checked, h11.Request):
            return checked
        assert why is not None
        self.refused = why
        raise h11.RemoteProtocolError(why.reason, error_status_hint=why.status)

    def _over_limits(self) -> Refusal | None:
        """``HeadLimits`` on what h11 would parse next: a request head when idle; in a chunked
        body, at a chunk boundary, the next chunk-size line (and a trailer section after the
        last). h11 bounds only what is still incomplete, so a head sent in one write was parsed
        whole, 100 KB or 12 000 fields (~19 ms of CPU), before anything could refuse it."""
        data = self._receive_buffer._data
        if self.their_state is h11.IDLE:
            return section_refusal(data, 0, self.limits, lines_before_fields=1)
        reader = self._reader
        if self.their_state is not h11.SEND_BODY or not isinstance(reader, ChunkedReader):
            return None
        if reader._reading_trailer:
            return section_refusal(data, 0, self.limits, lines_before_fields=0)
        if reader._bytes_in_chunk:
            return None
        # The CRLF after a chunk's data comes first (h11 checks it); the size line follows.
        return chunk_refusal(data, len(reader._bytes_to_discard), self.limits)
