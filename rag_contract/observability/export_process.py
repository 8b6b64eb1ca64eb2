"""Traces leave from a process of their own: the serving process only queues records and hands
them over, so building, redacting, encoding and sending spans never holds its interpreter.

``ProcessTracer`` is what the observer records to: a ``TraceQueue`` (one append per request of
the record packed as plain tuples, ``Packer``: the record's values, with the question, claim and
passage text blanked unless the operator's text flag is on; the question's digest is taken first
and counts are kept) whose thread hands each batch to ``ExportProcess``. That starts
``export_child`` (``python -m rag_contract.observability.export_child``, a fresh interpreter) and
writes each batch to it over a pipe as one message. The child builds the spans, redacts them
(``otlp_wire``, the one point every export passes through) and posts them over OTLP/HTTP.

The child reports each failed export back by exception type; ``ExportFailures`` in this process
counts them (and the metrics with them) and logs them. A child that exits is noticed at once
(its end of the pipe closes), counted as ``ExporterDied`` (the traces it held are lost) and
started again for the next batch; a batch that cannot be handed to any child is dropped and
counted the same way. Serving never waits on the child: only the queue's thread writes to it.
``flush`` returns once the child has exported everything handed over before it; ``close`` lets
the child export what it holds and exit, and stops it if it does not within the timeout.
"""

from __future__ import annotations

import itertools
import logging
import os
import subprocess
import sys
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from types import MappingProxyType
from typing import Any

from rag_contract.observability.memo import BoundedMemo
from rag_contract.observability.redaction import question_digest
from rag_contract.observability.request import Observation, RequestFacts
from rag_contract.observability.trace_queue import TraceQueue, TraceRecord

logger = logging.getLogger(__name__)

CHILD_MODULE = "rag_contract.observability.export_child"
EXPORTER_DIED = "ExporterDied"
# Messages, as tuples whose first item is one of these tags.
CONFIG = "config"  # serving -> child, first: (CONFIG, ExportConfig)
BATCH = "batch"  # serving -> child: (BATCH, [packed record, ...])
FLUSH = "flush"  # serving -> child: (FLUSH, token); answered (FLUSHED, token) once all before it is exported
FLUSHED = "flushed"
FAILED = "failed"  # child -> serving: (FAILED, exception type, detail)
DIGEST_MEMO = 1024


class ExportFailures:
    """Failed exports by exception type; ``on_failure`` (e.g. a metrics counter) hears each."""

    def __init__(self, on_failure: Callable[[str], None] | None = None):
        self._counts: dict[str, int] = {}
        self._lock = threading.Lock()
        self._on_failure = on_failure

    def add(self, error_type: str, detail: str) -> None:
        with self._lock:
            n = self._counts[error_type] = self._counts.get(error_type, 0) + 1
        # A collector that stays down would log once per batch: the first of each type, then
        # every hundredth, each with the count so far.
        if n == 1 or n % 100 == 0:
            logger.warning("trace export failed: %s (%d so far): %s", error_type, n, detail)
        if self._on_failure is not None:
            self._on_failure(error_type)

    def counts(self) -> dict[str, int]:
        with self._lock:
            return dict(self._counts)


@dataclass(frozen=True)
class ExportConfig:
    """What the exporting process needs: where to send, whether text may leave, the timeout of one
    export and the key client identities are hashed with (sent over the pipe, never on a command line)."""

    endpoint: str
    include_text: bool
    timeout_s: float
    salt: bytes


class Packer:
    """Records as the plain tuples a batch message carries. Without the text flag the question,
    claim and passage-title texts are blanked (their number kept) and the question's digest is
    carried instead, so no text reaches the exporting process at all."""

    def __init__(self, include_text: bool):
        self._include_text = include_text
        self._digests: BoundedMemo[str, str] = BoundedMemo(DIGEST_MEMO)

    def _digest(self, question: str) -> str:
        digest = self._digests.get(question)
        if digest is None:
            digest = self._digests.keep(question, question_digest(question))
        return digest

    def pack(self, trace_id: int, f: RequestFacts) -> tuple:
        """The record of ``f`` under ``trace_id``, packed (a ``TraceQueue`` entry)."""
        o = f.observation
        packed_o: tuple | None = None
        digest = None
        if o is not None:
            question, kept, withdrawn, titles = o.question, o.kept, o.withdrawn, o.passage_titles
            if not self._include_text:
                digest = self._digest(question)
                question, kept, withdrawn, titles = "", _blank(kept), _blank(withdrawn), _blank(titles)
            packed_o = (o.state, o.index_version, question, o.drafter, tuple(o.stages_ms.items()), o.deadline_ms,
                        o.spent_ms, kept, withdrawn, o.withdrawn_rules, o.passage_ids, titles)  # fmt: skip
        return (trace_id, f.route, f.method, f.status, f.latency_s, f.started_ns, f.client, f.refused,
                packed_o, digest)  # fmt: skip


_BLANKS = tuple(("",) * n for n in range(64))


def _blank(texts: tuple[str, ...]) -> tuple[str, ...]:
    return _BLANKS[len(texts)] if len(texts) < len(_BLANKS) else ("",) * len(texts)


def unpack(packed: tuple) -> TraceRecord:
    """The record ``Packer`` packed (with its texts blanked, when they were)."""
    trace_id, route, method, status, latency_s, started_ns, client, refused, o, digest = packed
    observation = None
    if o is not None:
        state, version, question, drafter, stages, deadline, spent, kept, withdrawn, rules, ids, titles = o
        observation = Observation(state, version, question, drafter, MappingProxyType(dict(stages)), deadline, spent,
                                  kept, withdrawn, rules, ids, titles)  # fmt: skip
    facts = RequestFacts(route, method, status, latency_s, started_ns, client, observation, refused)
    return TraceRecord(trace_id, facts, digest)


@dataclass(eq=False)
class _Child:
    """One exporting process and the two ends of its pipes this process holds."""

    process: subprocess.Popen
    batches: Connection  # written by this process
    replies: Connection  # read by this process's reply thread
    gone: bool = False  # exited, or its pipe broke: counted once
    closing: bool = False  # stopped by ``close``: its exit is no failure
    acks: dict[int, _Ack] = field(default_factory=dict)


@dataclass(eq=False)
class _Ack:
    done: threading.Event = field(default_factory=threading.Event)
    ok: bool = False


def child_argv(read_fd: int, write_fd: int) -> list[str]:
    return [sys.executable, "-m", CHILD_MODULE, str(read_fd), str(write_fd)]


class ExportProcess:
    """The exporting process, seen from the serving one: ``send`` a batch, ``flush``, ``close``.

    ``send`` and ``flush`` may be called from different threads (the queue's, and whoever
    flushes); a lock keeps their messages whole and in order."""

    def __init__(
        self, config: ExportConfig, failures: ExportFailures, argv: Callable[[int, int], list[str]] = child_argv
    ):
        self._config = config
        self._failures = failures
        self._argv = argv
        self._pack = Packer(config.include_text)
        self._lock = threading.Lock()
        self._tokens = itertools.count()
        self._closed = False
        self._child: _Child | None = None
        self.started = 0  # processes started so far
        with self._lock:
            self._child = self._start()

    @property
    def pid(self) -> int | None:
        child = self._child
        return child.process.pid if child is not None and not child.gone else None

    def _start(self) -> _Child | None:
        """A new child, its configuration sent; None (counted) when it cannot be started."""
        ends: list[int] = []
        try:
            child_in, to_child = os.pipe()
            ends += (child_in, to_child)
            from_child, child_out = os.pipe()
            ends += (from_child, child_out)
            process = subprocess.Popen(
                self._argv(child_in, child_out), pass_fds=(child_in, child_out), stdin=subprocess.DEVNULL
            )
            os.close(child_in)
            os.close(child_out)
            ends = []  # the two left are the connections' now
            child = _Child(process, Connection(to_child, readable=False), Connection(from_child, writable=False))
            child.batches.send((CONFIG, self._config))
        except OSError as exc:
            for fd in ends:
                os.close(fd)
            self._failures.add(EXPORTER_DIED, f"the trace exporter process could not start: {exc}"[:200])
            return None
        self.started += 1
        thread = threading.Thread(target=self._replies, args=(child,), name="rag-contract-trace-replies", daemon=True)
        thread.start()
        return child

    def _replies(self, child: _Child) -> None:
        """Runs on a thread of its own per child, blocked on the pipe: failures and flush answers."""
        while True:
            try:
                message = child.replies.recv()
            except (EOFError, OSError):
                break
            if message[0] == FAILED:
                self._failures.add(message[1], message[2])
            elif message[0] == FLUSHED:
                ack = child.acks.pop(message[1], None)
                if ack is not None:
                    ack.ok = True
                    ack.done.set()
        child.replies.close()
        code = child.process.wait()
        self._gone(child, f"the trace exporter process exited with code {code}; the traces it held are lost")

    def _gone(self, child: _Child, detail: str) -> None:
        with self._lock:
            counted = not child.gone and not child.closing
            child.gone = True
            for ack in child.acks.values():
                ack.done.set()  # ok stays False
            child.acks.clear()
        if counted:
            self._failures.add(EXPORTER_DIED, detail)

    def _live(self) -> _Child | None:
        """The child to write to, started again if it has gone (under ``_lock``)."""
        child = self._child
        if (child is None or child.gone) and not self._closed:
            child = self._child = self._start()
        return child if child is not None and not child.gone else None

    def entry(self, trace_id: int, facts: RequestFacts) -> tuple:
        """What ``send`` takes: the record of ``facts`` under ``trace_id``, packed for the child."""
        return self._pack.pack(trace_id, facts)

    def send(self, batch: Sequence[tuple]) -> None:
        """Hand ``batch`` (entries made by ``entry``) to the child (one message); never raises. A
        child found gone is counted and replaced, and the batch goes to the new one."""
        message = (BATCH, list(batch))
        broken: _Child | None = None
        for _ in range(2):
            with self._lock:
                child = self._live()
                if child is None:
                    break
                try:
                    child.batches.send(message)
                    return
                except OSError:
                    broken = child
            self._gone(broken, "the trace exporter process stopped reading; the traces it held are lost")
        self._failures.add(EXPORTER_DIED, f"no trace exporter process; {len(batch)} traces dropped")

    def flush(self, timeout_s: float = 10.0) -> bool:
        """True once the child has exported everything sent before this call (within ``timeout_s``)."""
        ack = _Ack()
        with self._lock:
            child = self._child
            if child is None or child.gone or self._closed:
                return False
            token = next(self._tokens)
            child.acks[token] = ack
            try:
                child.batches.send((FLUSH, token))
            except OSError:
                return False
        return ack.done.wait(timeout_s) and ack.ok

    def close(self, timeout_s: float = 10.0) -> None:
        """The child exports what it holds and exits (stopped after ``timeout_s`` if it does not)."""
        with self._lock:
            self._closed = True
            child, self._child = self._child, None
            if child is None:
                return
            child.closing = True
            child.batches.close()  # end of input: the child finishes and exits
        try:
            child.process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            child.process.kill()
            child.process.wait()


class ProcessTracer:
    """Records requests for tracing (``TraceQueue``) and hands them to an ``ExportProcess``."""

    def __init__(self, process: ExportProcess, failures: ExportFailures, **queue: Any):
        self.process = process
        self.queue = TraceQueue(process.send, failures.add, process.entry, **queue)  # max_queue, max_batch, delay_s

    def record(self, facts: RequestFacts) -> str | None:
        """Queue ``facts``' trace; its trace id (32 hex digits) for the access log, None if dropped."""
        return self.queue.record(facts)

    def flush(self, timeout_s: float = 10.0) -> bool:
        """Everything recorded so far exported (or its failure counted); False once closed or if
        the exporting process did not confirm within ``timeout_s``."""
        return self.queue.flush(timeout_s) and self.process.flush(timeout_s)

    def close(self) -> None:
        self.queue.close()
        self.process.close()


def process_tracer(
    endpoint: str, include_text: bool, timeout_s: float, failures: ExportFailures, salt: bytes, **queue: Any
) -> ProcessTracer:
    """Traces to an OTLP/HTTP collector at ``endpoint``, exported by a process of their own."""
    process = ExportProcess(ExportConfig(endpoint, include_text, timeout_s, salt), failures)
    return ProcessTracer(process, failures, **queue)
