"""The hand-off from the request path to the thread that ships traces out: bounded, and never
in the request's way.

``TraceQueue.record(facts)`` is all a request pays for its trace: a fresh trace id and one
append to a bounded deque of the entry ``entry(trace id, facts)`` makes of them (when serving, the
plain tuple the exporting process is sent, ``export_process.Packer``, made at once so that
the request's objects die with it: a queued entry of plain values is no work for the garbage
collector, where queued objects would be moved up its generations and make it walk the whole
heap far more often). One
background thread takes records in batches (``max_batch``, or whatever is there once
``delay_s`` has passed without a full batch) and hands each batch to ``export`` (when serving:
the hand-over to the exporting process, ``export_process``, where spans are built, redacted,
encoded and sent). When the queue
is full the record is dropped, counted with ``on_drop`` (the export failures, under
``QueueFull``) and the request goes on: its access line then carries no trace id, since no
trace with that id will exist.

``export`` must not raise (a raise is logged and the batch is lost, not retried); the thread
stops at ``close``, after exporting what was queued.
"""

from __future__ import annotations

import collections
import logging
import random
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

from rag_contract.observability.request import RequestFacts

logger = logging.getLogger(__name__)

Entry = TypeVar("Entry")
QUEUE_FULL = "QueueFull"
MAX_QUEUE = 4096  # records (one per request): a few seconds of a busy worker
MAX_BATCH = 512
DELAY_S = 1.0


@dataclass(frozen=True, slots=True)
class TraceRecord:
    """One request to be traced: its trace id and what the HTTP layer saw. ``question_sha256``:
    the question's digest, when it was taken before the question's text was withheld (None: the
    facts still hold the question)."""

    trace_id: int
    facts: RequestFacts
    question_sha256: str | None = None


def nonzero_id(width: int, bits: Callable[[int], int] = random.getrandbits) -> int:
    """A random non-zero id of ``width`` bits (zero is the invalid trace and span id)."""
    while True:
        value = bits(width)
        if value:
            return value


def new_trace_id(bits: Callable[[int], int] = random.getrandbits) -> int:
    """A random non-zero 128-bit trace id."""
    return nonzero_id(128, bits)


class TraceQueue(Generic[Entry]):
    """Bounded queue of entries (one per traced request) and the one thread that exports them."""

    def __init__(
        self,
        export: Callable[[Sequence[Entry]], None],
        on_drop: Callable[[str, str], None],
        entry: Callable[[int, RequestFacts], Entry],
        *,
        max_queue: int = MAX_QUEUE,
        max_batch: int = MAX_BATCH,
        delay_s: float = DELAY_S,
    ):
        if not 0 < max_batch <= max_queue:
            raise ValueError("need 0 < max_batch <= max_queue")
        self._export = export
        self._entry = entry
        self._on_drop = on_drop
        self._max_queue = max_queue
        self._max_batch = max_batch
        self._delay_s = delay_s
        self._queue: collections.deque[Entry] = collections.deque()
        self._wake = threading.Event()
        self._export_lock = threading.Lock()  # the worker and flush() never export at once
        self._closed = False
        self._thread = threading.Thread(target=self._run, name="rag-contract-traces", daemon=True)
        self._thread.start()

    def record(self, facts: RequestFacts) -> str | None:
        """Queue ``facts`` for export; its trace id (32 hex digits), or None when dropped."""
        if self._closed or len(self._queue) >= self._max_queue:
            self._on_drop(QUEUE_FULL, "the trace queue is full; trace dropped")
            return None
        trace_id = new_trace_id()
        self._queue.append(self._entry(trace_id, facts))  # deque.append is atomic
        if len(self._queue) >= self._max_batch:
            self._wake.set()
        return format(trace_id, "032x")

    def pending(self) -> int:
        return len(self._queue)

    def _drain(self, everything: bool) -> None:
        with self._export_lock:
            while self._queue and (everything or len(self._queue) >= self._max_batch):
                batch = [self._queue.popleft() for _ in range(min(self._max_batch, len(self._queue)))]
                try:
                    self._export(batch)
                except Exception:  # noqa: BLE001 - the exporting thread must outlive a bad batch
                    logger.exception("exporting %d traces failed", len(batch))

    def _run(self) -> None:
        while not self._closed:
            full = self._wake.wait(self._delay_s)
            self._wake.clear()
            # Woken by a full batch: whole batches only, the rest waits for the next one (or the
            # delay). Draining to empty under load would hand over a few records at a time, each
            # hand-over taking the interpreter from the requests.
            self._drain(everything=not full)
        self._drain(everything=True)

    def flush(self, timeout_s: float = 10.0) -> bool:
        """Export everything queued now, on the caller's thread; False once closed."""
        if self._closed:
            return False
        self._drain(everything=True)
        return True

    def close(self, timeout_s: float = 10.0) -> None:
        """Stop taking records, export what is queued and stop the thread (bounded by ``timeout_s``)."""
        if self._closed:
            return
        self._closed = True
        self._wake.set()
        self._thread.join(timeout_s)
