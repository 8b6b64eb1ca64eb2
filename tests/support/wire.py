"""Replies read off the wire, as bytes: what a reply the protocol writes itself must carry."""

from __future__ import annotations

from email.utils import parsedate_to_datetime


def head_fields(reply: bytes) -> tuple[int, dict[bytes, bytes], bytes]:
    """(status, lower-cased fields, body) of one raw HTTP/1.1 reply."""
    head, _, body = reply.partition(b"\r\n\r\n")
    status_line, *lines = head.split(b"\r\n")
    fields = {}
    for line in lines:
        name, _, value = line.partition(b":")
        fields[name.strip().lower()] = value.strip()
    return int(status_line.split()[1]), fields, body


def assert_protocol_reply(reply: bytes, status: int) -> None:
    """``reply`` has ``status``, a valid ``Date``, ``nosniff``, a ``Content-Length`` equal to its
    body's and ``Connection: close``."""
    got, fields, body = head_fields(reply)
    assert got == status, reply[:200]
    assert parsedate_to_datetime(fields[b"date"].decode()).tzinfo is not None, fields
    assert fields.get(b"x-content-type-options") == b"nosniff", fields
    assert fields.get(b"content-length") == str(len(body)).encode(), (fields, body)
    assert fields.get(b"connection") == b"close", fields
