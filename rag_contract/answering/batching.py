"""Dynamic batching of question embeddings: questions that arrive while the embedder is busy
share one call of it.

Contract (``EmbeddingBatcher(embed, max_batch, max_wait_ms)``; ``thresholds.batching``):

- ``submit(text)`` queues a question and returns its ``Ticket`` at once;
  ``ticket.started()`` blocks until the call that embeds it has begun, ``ticket.vector()``
  until that call has ended (its row, or the call's exception, raised for every question of it);
- a call begins, holding the oldest waiting questions (at most ``max_batch``), as soon as
  any of these holds: no call is running (a question that finds the embedder idle waits for
  nothing), ``max_batch`` questions are waiting, or the oldest has waited ``max_wait_ms``. So
  no question waits longer than ``max_wait_ms`` for its call to be started, calls may overlap
  when one outlasts that wait, and questions keep their order;
- a question that finds the embedder idle (no call running, nobody waiting) is embedded by its
  own caller, in ``vector()``, with no thread hop: alone, one question costs what it did
  unbatched. Every other call runs on the batcher's own threads, so a caller that gives up
  (its deadline spent) strands no other question; one that gives up before running its own
  call says so with ``forgo()``, which frees the embedder for the next.

``BatchedVectors`` is the free-text query vector built on it: ``Service`` times
``started()`` as the budget's ``embedding_wait`` stage and ``vector()`` as ``embedding``, so
the wait is spent from the question's own deadline and shown apart. Rows equal those embedded
one at a time (``LocalEmbedder.embed_together``); the fixed questions keep their committed
vectors and never come here.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from rag_contract.index.store import Index

EmbedMany = Callable[[Sequence[str]], np.ndarray]
# Calls that may run at once: a call outlasting max_wait_ms lets the next one start beside it.
MAX_CALLS = 4


class Ticket:
    """One queued question: when its call began, and its vector once the call has ended."""

    def __init__(self, text: str, queued_at: float, batcher: EmbeddingBatcher):
        self.text = text
        self.queued_at = queued_at
        self._batcher = batcher
        self._inline = False  # this caller runs its own call, alone, in vector()
        self._started = threading.Event()
        self._done = threading.Event()
        self._vector: np.ndarray | None = None
        self._error: BaseException | None = None
        self.batch_size = 0

    def started(self) -> None:
        self._started.wait()

    def vector(self) -> np.ndarray:
        if self._inline:
            self._inline = False
            self._batcher._run([self])
        self._done.wait()
        if self._error is not None:
            raise self._error
        assert self._vector is not None
        return self._vector

    def forgo(self) -> None:
        """The caller will not ask for its vector: a call it was to run itself is dropped (it
        held only this question). Anything else is left to run; its row is not read."""
        if self._inline:
            self._inline = False
            self._batcher._dropped()

    def _begin(self, batch_size: int) -> None:
        self.batch_size = batch_size
        self._started.set()

    def _end(self, vector: np.ndarray | None, error: BaseException | None) -> None:
        self._vector, self._error = vector, error
        self._done.set()


class EmbeddingBatcher:
    def __init__(
        self,
        embed: EmbedMany,
        max_batch: int,
        max_wait_ms: float,
        clock: Callable[[], float] = time.perf_counter,
    ):
        if max_batch < 1 or not max_wait_ms >= 0:
            raise ValueError(f"max_batch must be >= 1 and max_wait_ms >= 0, got {max_batch}, {max_wait_ms}")
        self._embed = embed
        self.max_batch = max_batch
        self._max_wait_s = max_wait_ms / 1000.0
        self._clock = clock
        self._lock = threading.Condition()
        self._waiting: deque[Ticket] = deque()
        self._running = 0
        self._pool: ThreadPoolExecutor | None = None
        self._dispatcher: threading.Thread | None = None
        self.calls = 0  # calls begun, for measurement

    def submit(self, text: str) -> Ticket:
        ticket = Ticket(text, self._clock(), self)
        with self._lock:
            if self._running == 0 and not self._waiting:
                # Idle: the caller embeds its own question at once, on its own thread.
                self._running += 1
                self.calls += 1
                ticket._inline = True
                ticket._begin(1)
                return ticket
            self._waiting.append(ticket)
            self._launch_due()
            if self._waiting:
                # Someone waits on a busy embedder: the dispatcher starts its call at max_wait_ms.
                if self._dispatcher is None:
                    self._dispatcher = threading.Thread(target=self._dispatch, name="embedding-batcher", daemon=True)
                    self._dispatcher.start()
                self._lock.notify()
        return ticket

    def _dispatch(self) -> None:
        with self._lock:
            while True:
                self._launch_due()
                if self._waiting:
                    self._lock.wait(max(0.0, self._waiting[0].queued_at + self._max_wait_s - self._clock()))
                else:
                    self._lock.wait()

    def _due(self) -> bool:
        if not self._waiting:
            return False
        if self._running == 0 or len(self._waiting) >= self.max_batch:
            return True
        return self._clock() - self._waiting[0].queued_at >= self._max_wait_s

    def _launch_due(self) -> None:
        # Called with the lock held.
        while self._due():
            batch = [self._waiting.popleft() for _ in range(min(self.max_batch, len(self._waiting)))]
            self._running += 1
            self.calls += 1
            if self._pool is None:
                self._pool = ThreadPoolExecutor(MAX_CALLS, thread_name_prefix="embedding-batch")
            self._pool.submit(self._run, batch)

    def _dropped(self) -> None:
        with self._lock:
            self._running -= 1
            self._launch_due()

    def _run(self, batch: list[Ticket]) -> None:
        for ticket in batch:
            ticket._begin(len(batch))
        try:
            vectors = self._embed([t.text for t in batch])
        except BaseException as exc:  # noqa: BLE001 - every question of the call is told, the caller raises it
            for ticket in batch:
                ticket._end(None, exc)
        else:
            for ticket, vector in zip(batch, vectors, strict=True):
                ticket._end(vector, None)
        finally:
            with self._lock:
                self._running -= 1
                self._launch_due()


class BatchedVectors:
    """The free-text query vector through ``EmbeddingBatcher``: ``queue(index, text)`` submits
    the question to the batcher of the embedder the index was built with (``batcher_for``,
    which may raise before anything is queued, e.g. ``EmbedderLoading``); called as a plain
    ``QueryVector`` it waits for the vector."""

    def __init__(self, batcher_for: Callable[[str], EmbeddingBatcher]):
        self._batcher_for = batcher_for

    def queue(self, index: Index, text: str) -> Ticket:
        return self._batcher_for(index.embedder_name).submit(text)

    def __call__(self, index: Index, text: str) -> np.ndarray:
        return self.queue(index, text).vector()
