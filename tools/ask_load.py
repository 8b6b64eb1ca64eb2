"""Closed-loop ``POST /ask`` clients on loopback: answers per second, the latency of the answered
requests as the client sees it, the shed share and the abandoned count.

Why not wrk: wrk's latency figures cover every response, and under overload most responses
are sheds (503 ``overloaded``, sent at once), so its p99 says how fast the service refuses, not
how long an answer takes; its script hooks cannot tie a response to its request to time it.
Here each client is one coroutine holding one keep-alive connection (a new one after a reply
that closes it), sending its next question as soon as the last reply has arrived; Retry-After
is not honoured (the harshest client). Every request asks a question of the question set
(each client starts at another one, so questions in flight differ) and carries its own
``X-Forwarded-For``, so the rate limiter (one trusted hop in the load tree) gives every request
its own bucket, as the wrk script does.

Beside the latency the client sees, each answered reply's own ``budget.spent_ms`` (the time the
service spent on the answer, from admission to the last stage) is kept: the difference between
the two is the time the request spent outside the service (read and screened, handed to a
thread and back, waiting for turns of the event loop).

``run_level(host, port, clients, duration_s, questions, run)`` is one measure; ``AskLevel``
holds it. Only replies that arrive before the end of the duration are counted.
"""

from __future__ import annotations

import asyncio
import json
import math
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

_CONNECT_RETRY_S = 0.01


@dataclass(frozen=True)
class AskLevel:
    """One closed-loop run at ``clients`` connections."""

    clients: int
    duration_s: float
    statuses: Mapping[int, int] = field(default_factory=dict)  # status -> replies
    answered_ms: Sequence[float] = ()  # client-side latency of every 200, in order of arrival
    spent_ms: Sequence[float] = ()  # the service's own budget.spent_ms of every 200
    shed: int = 0  # 503 "overloaded"
    abandoned: int = 0  # 503 "abandoned": admitted, then past its deadline
    socket_errors: int = 0  # connections refused or dropped before a whole reply

    @property
    def replies(self) -> int:
        return sum(self.statuses.values())

    @property
    def answered(self) -> int:
        return len(self.answered_ms)

    @property
    def answers_per_s(self) -> float:
        return self.answered / self.duration_s if self.duration_s > 0 else 0.0

    @property
    def shed_share(self) -> float:
        return self.shed / self.replies if self.replies else 0.0

    def percentile_ms(self, q: float) -> float | None:
        """Nearest-rank percentile of the answered latencies (None: nothing answered)."""
        return _nearest_rank(self.answered_ms, q)

    def spent_percentile_ms(self, q: float) -> float | None:
        """The same of the service's own time on each answer."""
        return _nearest_rank(self.spent_ms, q)

    def as_dict(self) -> dict[str, Any]:
        def ms(v: float | None) -> float | None:
            return None if v is None else round(v, 2)

        return {
            "answers_per_s": round(self.answers_per_s, 1),
            "p50_ms": ms(self.percentile_ms(50)),
            "p99_ms": ms(self.percentile_ms(99)),
            "service_p50_ms": ms(self.spent_percentile_ms(50)),
            "service_p99_ms": ms(self.spent_percentile_ms(99)),
            "answered": self.answered,
            "replies": self.replies,
            "shed": self.shed,
            "shed_share": round(self.shed_share, 3),
            "abandoned": self.abandoned,
            "socket_errors": self.socket_errors,
            "statuses": {str(code): self.statuses[code] for code in sorted(self.statuses)},
        }


def _nearest_rank(values: Sequence[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q / 100.0 * len(ordered)) - 1)]


def spent_of(payload: bytes) -> float | None:
    """``budget.spent_ms`` of an answer's JSON body, or None when it has none."""
    try:
        budget = json.loads(payload).get("budget")
    except (ValueError, AttributeError):
        return None
    spent = budget.get("spent_ms") if isinstance(budget, dict) else None
    return float(spent) if isinstance(spent, (int, float)) else None


def request_bytes(host: str, body: bytes, client: str) -> bytes:
    head = (
        f"POST /ask HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
        f"X-Forwarded-For: {client}\r\nContent-Length: {len(body)}\r\n\r\n"
    )
    return head.encode("latin-1") + body


def parse_head(head: bytes) -> tuple[int, int, bool]:
    """(status, Content-Length, whether the server closes the connection) of a reply's head."""
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    length, close = 0, False
    for line in lines[1:]:
        name, _, value = line.partition(":")
        name = name.strip().lower()
        if name == "content-length":
            length = int(value.strip())
        elif name == "connection" and value.strip().lower() == "close":
            close = True
    return status, length, close


def client_address(run: int, client: int, sent: int) -> str:
    """A distinct 10.x.y.z per request: a block per run and client, a counter within it."""
    v = (((run % 8) * 256 + client % 256) * 4096 + sent % 4096) % (1 << 24)
    return f"10.{v >> 16 & 255}.{v >> 8 & 255}.{v & 255}"


async def _client(
    host: str, port: int, n: int, bodies: Sequence[bytes], run: int, stop_at: float, tally: dict[str, Any]
) -> None:
    reader: asyncio.StreamReader | None = None
    writer: asyncio.StreamWriter | None = None
    sent = 0
    try:
        while time.perf_counter() < stop_at:
            if writer is None:
                try:
                    reader, writer = await asyncio.open_connection(host, port)
                except OSError:
                    tally["socket_errors"] += 1
                    await asyncio.sleep(_CONNECT_RETRY_S)
                    continue
            assert reader is not None
            body = bodies[(n * 7 + sent) % len(bodies)]
            request = request_bytes(host, body, client_address(run, n, sent))
            sent += 1
            began = time.perf_counter()
            try:
                writer.write(request)
                head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), max(0.001, stop_at - began + 5))
                status, length, close = parse_head(head)
                payload = await reader.readexactly(length)
            except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError, ValueError):
                tally["socket_errors"] += 1
                writer.close()
                writer = None
                continue
            ended = time.perf_counter()
            if ended > stop_at:
                break
            tally["statuses"][status] += 1
            if status == 200:
                tally["answered_ms"].append((ended - began) * 1000.0)
                if (spent := spent_of(payload)) is not None:
                    tally["spent_ms"].append(spent)
            elif status == 503:
                error = json.loads(payload).get("error") if payload.startswith(b"{") else None
                if error == "overloaded":
                    tally["shed"] += 1
                elif error == "abandoned":
                    tally["abandoned"] += 1
            if close:
                writer.close()
                writer = None
    finally:
        if writer is not None:
            writer.close()


async def _level(host: str, port: int, clients: int, duration_s: float, bodies: Sequence[bytes], run: int) -> AskLevel:
    tally: dict[str, Any] = {
        "statuses": Counter(),
        "answered_ms": [],
        "spent_ms": [],
        "shed": 0,
        "abandoned": 0,
        "socket_errors": 0,
    }
    began = time.perf_counter()
    stop_at = began + duration_s
    await asyncio.gather(*(_client(host, port, n, bodies, run, stop_at, tally) for n in range(clients)))
    return AskLevel(
        clients=clients,
        duration_s=duration_s,
        statuses=dict(tally["statuses"]),
        answered_ms=tuple(tally["answered_ms"]),
        spent_ms=tuple(tally["spent_ms"]),
        shed=tally["shed"],
        abandoned=tally["abandoned"],
        socket_errors=tally["socket_errors"],
    )


def run_level(host: str, port: int, clients: int, duration_s: float, questions: Sequence[str], run: int) -> AskLevel:
    """``clients`` closed-loop clients asking ``questions`` in turn for ``duration_s`` seconds."""
    if clients < 1 or duration_s <= 0 or not questions:
        raise ValueError("run_level needs at least one client, a positive duration and a question")
    bodies = [json.dumps({"question": q}).encode() for q in questions]
    return asyncio.run(_level(host, port, clients, duration_s, bodies, run))
