"""Span plans as OTLP/HTTP protobuf bytes (an ``ExportTraceServiceRequest``), redacted on the way:
the one place where a trace becomes bytes that leave the process.

Every span's attributes pass through ``redaction.redact`` here, and nothing else that could carry
text is written (no events, no links, no status description), so there is no path to the wire
that skips redaction. The bytes are, field for field and byte for byte, what the OpenTelemetry
SDK's own encoder writes for the same spans (a test holds them equal): one resource, one
instrumentation scope, spans in the order given, each with flags "has is_remote" and an
unset or error status.

Written by hand because the SDK's encoder builds a protobuf object per attribute value, which
cost several times the request itself; here each attribute that repeats across requests (route,
state, index version, passage ids: most of them) is encoded once and reused (``WireEncoder``,
its memo bounded), and a span whose attributes come as ``Attributes`` has its shared layer
redacted and encoded once for every span that shares it.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rag_contract.observability import redaction
from rag_contract.observability.memo import BoundedMemo, IdentityMemo

SPAN_KIND_INTERNAL = 1
SPAN_KIND_SERVER = 2
STATUS_ERROR = 2
FLAGS_HAS_IS_REMOTE = 0x100  # SpanFlags.SPAN_FLAGS_CONTEXT_HAS_IS_REMOTE_MASK: the parent is local
MEMO_LIMIT = 4096
# Attributes whose values differ on nearly every request: not worth remembering.
VARYING = frozenset({"rag.client.key", "rag.budget.spent_ms", "rag.stage.ms"})
_INT64 = (1 << 64) - 1
_D = struct.Struct("<d")
_Q = struct.Struct("<Q")
_I = struct.Struct("<I")


class Attributes(Mapping[str, Any]):
    """A span's attributes in two layers with no key in both: ``shared``, one mapping object that
    every span saying the same thing reuses (so the encoder may keep it encoded, by identity), and
    ``own``, what this span alone says. Iterated shared first, then own."""

    __slots__ = ("shared", "own")

    def __init__(self, shared: Mapping[str, Any], own: Mapping[str, Any]):
        self.shared = shared
        self.own = own

    def __getitem__(self, key: str) -> Any:
        return self.own[key] if key in self.own else self.shared[key]

    def __iter__(self) -> Iterator[str]:
        yield from self.shared
        yield from self.own

    def __len__(self) -> int:
        return len(self.shared) + len(self.own)


@dataclass(frozen=True, slots=True)
class WireSpan:
    """A finished span with its ids; ``parent_id`` 0 for a root."""

    trace_id: int
    span_id: int
    parent_id: int
    name: str
    kind: int
    start_ns: int
    end_ns: int
    attributes: Mapping[str, Any]
    failed: bool = False


_SMALL = tuple(bytes((i,)) for i in range(0x80))  # lengths and tags are nearly always one byte


def varint(n: int) -> bytes:
    if n < 0x80:
        return _SMALL[n]
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def field(tag: bytes, payload: bytes) -> bytes:
    """A length-delimited field: ``tag`` (already encoded), the length, ``payload``."""
    return tag + varint(len(payload)) + payload


def any_value(value: Any) -> bytes:
    """An ``AnyValue``: string 1, bool 2, int 3, double 4, array 5, bytes 7."""
    if value is None:
        return b""
    if isinstance(value, bool):
        return b"\x10\x01" if value else b"\x10\x00"
    if isinstance(value, str):
        return field(b"\x0a", value.encode("utf-8"))
    if isinstance(value, int):
        return b"\x18" + varint(value & _INT64)
    if isinstance(value, float):
        return b"\x21" + _D.pack(value)
    if isinstance(value, bytes):
        return field(b"\x3a", value)
    if isinstance(value, Sequence):
        return field(b"\x2a", b"".join(field(b"\x0a", any_value(v)) for v in value))
    raise TypeError(f"attribute value of type {type(value).__name__} is not exported")


def key_value(key: str, value: Any) -> bytes:
    return field(b"\x0a", key.encode("utf-8")) + field(b"\x12", any_value(value))


def _hashable(value: Any) -> Any:
    return tuple(value) if isinstance(value, list) else value


class WireEncoder:
    """Encodes batches of spans for one resource and scope; used by one thread at a time."""

    def __init__(self, resource: Mapping[str, Any], scope: str, include_text: bool):
        self.include_text = include_text
        resource_bytes = b"".join(field(b"\x0a", key_value(k, v)) for k, v in resource.items())
        self._resource = field(b"\x0a", resource_bytes)
        self._scope = field(b"\x0a", field(b"\x0a", scope.encode("utf-8")))
        self._memo: BoundedMemo[tuple[str, type, Any], bytes] = BoundedMemo(MEMO_LIMIT)
        # shared layer -> its attributes redacted and encoded
        self._blocks: IdentityMemo[bytes] = IdentityMemo(MEMO_LIMIT)

    def _attribute(self, key: str, value: Any) -> bytes:
        if key in VARYING:
            return field(b"\x4a", key_value(key, value))
        memo_key = (key, type(value), _hashable(value))
        hit = self._memo.get(memo_key)
        if hit is None:
            hit = self._memo.keep(memo_key, field(b"\x4a", key_value(key, value)))
        return hit

    def _attributes(self, attributes: Mapping[str, Any]) -> Iterable[bytes]:
        for key, value in redaction.redact(attributes, self.include_text).items():
            try:
                yield self._attribute(key, value)
            except (TypeError, UnicodeEncodeError):
                continue  # as the SDK does with a value it cannot encode: that attribute is left out

    def _encoded_attributes(self, attributes: Mapping[str, Any]) -> Iterable[bytes]:
        if not isinstance(attributes, Attributes):
            return self._attributes(attributes)
        shared = attributes.shared
        block = self._blocks.get(shared)
        if block is None:
            block = self._blocks.keep(shared, b"".join(self._attributes(shared)))
        return [block, *self._attributes(attributes.own)]

    def span(self, s: WireSpan) -> bytes:
        parts = [b"\x0a\x10", s.trace_id.to_bytes(16, "big"), b"\x12\x08", s.span_id.to_bytes(8, "big")]
        if s.parent_id:
            parts += [b"\x22\x08", s.parent_id.to_bytes(8, "big")]
        parts += [
            field(b"\x2a", s.name.encode("utf-8")),
            b"\x30" + varint(s.kind),
            b"\x39" + _Q.pack(s.start_ns),
            b"\x41" + _Q.pack(s.end_ns),
        ]
        parts += self._encoded_attributes(s.attributes)
        parts.append(b"\x7a\x02\x18" + varint(STATUS_ERROR) if s.failed else b"\x7a\x00")
        parts.append(b"\x85\x01" + _I.pack(FLAGS_HAS_IS_REMOTE))
        return b"".join(parts)

    def request(self, spans: Iterable[WireSpan]) -> bytes:
        """The ``ExportTraceServiceRequest`` holding ``spans``."""
        scope_spans = self._scope + b"".join(field(b"\x12", self.span(s)) for s in spans)
        return field(b"\x0a", self._resource + field(b"\x12", scope_spans))
