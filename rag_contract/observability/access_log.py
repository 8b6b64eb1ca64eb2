"""The access log: one JSON line per request, and never what was asked.

A line holds the time (UTC, ISO 8601, ms), method, route template (``/answer/{qid}``: never the
path, whose id or query string could carry a question), status, state, what refused the request
before any handler answered it (``RequestFacts.refused``, else null), latency in ms, index version
and trace id (null when tracing is off). Built from ``RequestFacts`` only, which the
line reads no text field of: there is no code path from the question to this log.
"""

from __future__ import annotations

import datetime
import json
import logging
import sys
from typing import TextIO

from rag_contract.observability.request import RequestFacts

LOGGER = "rag_contract.access"


def access_line(facts: RequestFacts, trace_id: str | None) -> str:
    started = datetime.datetime.fromtimestamp(facts.started_ns / 1e9, tz=datetime.UTC)
    return json.dumps(
        {
            "time": started.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
            "method": facts.method,
            "route": facts.route,
            "status": facts.status,
            "state": facts.state,
            "refused": facts.refused,
            "latency_ms": round(facts.latency_s * 1000.0, 3),
            "index_version": facts.index_version,
            "trace_id": trace_id,
        },
        separators=(",", ":"),
    )


def access_logger(stream: TextIO | None = None) -> logging.Logger:
    """The ``rag_contract.access`` logger writing bare lines to ``stream`` (stdout by default),
    not propagated: its lines do not go through uvicorn's or anyone's formatting."""
    log = logging.getLogger(LOGGER)
    log.handlers.clear()
    handler = logging.StreamHandler(stream or sys.stdout)
    handler.setFormatter(logging.Formatter("%(message)s"))
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    log.propagate = False
    return log
