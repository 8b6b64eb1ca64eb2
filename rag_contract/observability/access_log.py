"""The access log: one JSON line per request, and never what was asked.

A line holds the time (UTC, ISO 8601, ms), method, route template (``/answer/{qid}``: never the
path, whose id or query string could carry a question), status, state, what refused the request
before any handler answered it (``RequestFacts.refused``, else null), latency in ms, index version
and trace id (null when tracing is off). Built from ``RequestFacts`` only, which the
line reads no text field of: there is no code path from the question to this log.

Each line is written straight to the stream and flushed (no ``logging`` record, handler or
formatter on the way): the parts that repeat (the second's timestamp, the method, route, status,
state and refusal, the index version) are kept encoded, so a request adds its milliseconds, its
latency and its trace id to them.
"""

from __future__ import annotations

import datetime
import json
import sys
from typing import TextIO

from rag_contract.observability.memo import BoundedMemo
from rag_contract.observability.request import RequestFacts

MEMO_LIMIT = 1024  # distinct (method, route, status, state, refused): bounded by the labels


class AccessLog:
    """Writes one JSON line per request to ``stream`` (stdout by default)."""

    def __init__(self, stream: TextIO | None = None):
        self._stream = stream or sys.stdout
        self._second = -1
        self._time_head = ""
        self._kinds: BoundedMemo[tuple[str, str, int, str, str | None], str] = BoundedMemo(MEMO_LIMIT)
        self._versions: BoundedMemo[str | None, str] = BoundedMemo(MEMO_LIMIT)

    def line(self, facts: RequestFacts, trace_id: str | None) -> str:
        """The line for ``facts`` (newline included): time (UTC, ms), method, route, status, state,
        refused, latency_ms, index_version, trace_id, in that order, as ``json.dumps`` writes them."""
        second, ms = divmod(facts.started_ns // 1_000_000, 1000)
        if second != self._second:
            started = datetime.datetime.fromtimestamp(second, tz=datetime.UTC)
            self._time_head = '{"time":"' + started.strftime("%Y-%m-%dT%H:%M:%S")
            self._second = second
        kind_key = (facts.method, facts.route, facts.status, facts.state, facts.refused)
        kind = self._kinds.get(kind_key)
        if kind is None:
            method, route, status, state, refused = kind_key
            kind = self._kinds.keep(
                kind_key,
                f',"method":{json.dumps(method)},"route":{json.dumps(route)},"status":{int(status)},'
                f'"state":{json.dumps(state)},"refused":{json.dumps(refused)},"latency_ms":',
            )
        version = self._versions.get(facts.index_version)
        if version is None:
            version = self._versions.keep(facts.index_version, json.dumps(facts.index_version))
        trace = "null" if trace_id is None else '"' + trace_id + '"'  # 32 hex digits: nothing to escape
        latency = repr(round(facts.latency_s * 1000.0, 3))
        return f'{self._time_head}.{ms:03d}Z"{kind}{latency},"index_version":{version},"trace_id":{trace}}}\n'

    def write(self, facts: RequestFacts, trace_id: str | None) -> None:
        self._stream.write(self.line(facts, trace_id))
        self._stream.flush()
