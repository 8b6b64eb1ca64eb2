"""Dynamic batching of question embeddings: a batched row equals the vector embedded alone,
questions that arrive while the embedder is busy share one call of at most ``max_batch``, none
waits past ``max_wait_ms`` for its call to begin, and the wait is a stage of its deadline."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from rag_contract.answering.batching import BatchedVectors, EmbeddingBatcher
from rag_contract.answering.drafting import ExtractiveDrafter
from rag_contract.answering.service import Abandoned, Answer, Service
from rag_contract.embedders import make_embedder
from rag_contract.embedders.base import EmbedderUnavailable
from rag_contract.embedders.local import LocalEmbedder
from rag_contract.index.registry import Registry
from tests.support.clocks import FakeClock
from tests.support.stages import BATCHED_STAGES

# --- the rows equal the vectors embedded one at a time --------------------------------------


def test_a_batched_row_equals_the_question_embedded_alone(project, embedder):
    texts = [q.question for q in project.questions.questions]
    alone = embedder.embed(texts)
    for size in (3, 32):
        for start in range(0, len(texts), size):
            together = embedder.embed_together(texts[start : start + size])
            assert np.array_equal(together, alone[start : start + size]), f"batch of {size} at {start}"


def test_a_text_longer_than_a_window_is_embedded_as_embed_does(embedder):
    texts = ["cache " * 400, "What does no-cache mean?", "x"]
    assert np.array_equal(embedder.embed_together(texts), embedder.embed(texts))
    assert embedder.embed_together([]).shape == (0, embedder.dimensions)


def test_embed_runs_windows_in_batches_by_length_and_gives_each_text_its_embed_one_vector(project, embedder):
    # section texts of every length, several longer than one window, beside questions and an empty text
    texts = [s.text for s in project.corpus.sections[:60]] + [q.question for q in project.questions.questions[:20]]
    texts += ["cache " * 700, "", "x"]
    assert max(len(embedder._pieces(t)) for t in texts) >= 3
    done: list[int] = []
    batched = embedder.embed(texts, done.append)
    assert np.array_equal(batched, np.stack([embedder.embed_one(t) for t in texts]))
    assert sum(done) == len(texts) and len(done) > 1


def test_the_build_embedder_does_not_spin_and_gives_the_served_vectors(embedder):
    built = make_embedder(embedder.name, building=True)
    assert isinstance(built, LocalEmbedder) and not built.spin and embedder.spin
    assert built.identity == embedder.identity
    texts = ["What does no-cache mean?", "cache " * 300]
    assert np.array_equal(built.embed(texts), embedder.embed(texts))


def test_padding_moves_no_bit_of_the_shortest_question_beside_the_longest(project, embedder):
    texts = sorted((q.question for q in project.questions.questions), key=len)
    pair = [texts[0], texts[-1]]
    assert np.array_equal(embedder.embed_together(pair), embedder.embed(pair))
    # the check can fail: a row pooled over the padding as well differs
    ids = embedder._pieces(texts[0])[0]
    padded = ids + [0] * (len(embedder._pieces(texts[-1])[0]) - len(ids))
    assert not np.allclose(embedder._embed_ids(padded), embedder._embed_ids(ids))


# --- the batcher ------------------------------------------------------------------------------


class SlowEmbed:
    """Records each call's texts; each call blocks until ``release`` is set (or returns at once)."""

    def __init__(self, gate: threading.Event | None = None, fail: Exception | None = None):
        self.calls: list[list[str]] = []
        self.threads: list[int] = []
        self.gate = gate
        self.fail = fail
        self.lock = threading.Lock()

    def __call__(self, texts):
        with self.lock:
            self.calls.append(list(texts))
            self.threads.append(threading.get_ident())
        if self.gate is not None:
            self.gate.wait(5)
        if self.fail is not None:
            raise self.fail
        return np.array([[float(len(t)), float(i)] for i, t in enumerate(texts)], dtype=np.float32)


def _wait_for(predicate, timeout_s: float = 5.0) -> None:
    end = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < end, "condition not reached"
        time.sleep(0.001)


def test_a_question_that_finds_the_embedder_idle_is_embedded_at_once_alone_by_its_caller():
    embed = SlowEmbed()
    batcher = EmbeddingBatcher(embed, max_batch=8, max_wait_ms=10_000)
    ticket = batcher.submit("abc")
    ticket.started()
    assert ticket.vector().tolist() == [3.0, 0.0]
    assert embed.calls == [["abc"]] and ticket.batch_size == 1
    assert embed.threads == [threading.get_ident()]  # no thread hop when nobody shares the call


def _run_first(ticket) -> threading.Thread:
    """The caller of a question that found the embedder idle, running its call."""
    caller = threading.Thread(target=ticket.vector)
    caller.start()
    return caller


def test_a_caller_that_gives_up_before_its_own_call_frees_the_embedder():
    embed = SlowEmbed()
    batcher = EmbeddingBatcher(embed, max_batch=8, max_wait_ms=10_000)
    gone = batcher.submit("gone")
    gone.forgo()
    nxt = batcher.submit("next")  # idle again: embedded at once, not after max_wait
    assert nxt.vector().tolist() == [4.0, 0.0] and embed.calls == [["next"]]
    nxt.forgo()  # after its vector: nothing to free
    assert batcher.submit("third").vector().tolist() == [5.0, 0.0]


def test_questions_that_arrive_while_it_is_busy_share_the_next_call_in_order():
    gate = threading.Event()
    embed = SlowEmbed(gate)
    batcher = EmbeddingBatcher(embed, max_batch=3, max_wait_ms=10_000)
    first = batcher.submit("q0")
    _run_first(first)
    _wait_for(lambda: len(embed.calls) == 1)
    waiting = [batcher.submit(f"q{i}") for i in range(1, 6)]
    # three waiting make a full batch, which starts beside the running call; two still wait
    _wait_for(lambda: len(embed.calls) == 2)
    assert embed.calls == [["q0"], ["q1", "q2", "q3"]]
    gate.set()
    assert [t.vector().tolist()[1] for t in [first, *waiting]] == [0.0, 0.0, 1.0, 2.0, 0.0, 1.0]
    assert embed.calls == [["q0"], ["q1", "q2", "q3"], ["q4", "q5"]]
    assert [t.batch_size for t in waiting] == [3, 3, 3, 2, 2]
    assert batcher.calls == 3


def test_no_question_waits_past_max_wait_for_its_call_to_begin():
    gate = threading.Event()
    embed = SlowEmbed(gate)
    batcher = EmbeddingBatcher(embed, max_batch=8, max_wait_ms=30)
    _run_first(batcher.submit("busy"))
    _wait_for(lambda: len(embed.calls) == 1)
    began = time.perf_counter()
    late = batcher.submit("late")
    late.started()  # the first call still runs: the wait alone started this one
    waited_ms = (time.perf_counter() - began) * 1000
    assert 30 <= waited_ms < 1000
    assert embed.calls == [["busy"], ["late"]]
    gate.set()
    assert late.vector().tolist() == [4.0, 0.0]


def test_a_failed_call_is_raised_for_every_question_of_it():
    gate = threading.Event()
    embed = SlowEmbed(gate, fail=EmbedderUnavailable("embedder 'x' could not embed the question"))
    batcher = EmbeddingBatcher(embed, max_batch=4, max_wait_ms=10_000)
    tickets = [batcher.submit(f"q{i}") for i in range(3)]
    gate.set()
    for t in tickets:
        with pytest.raises(EmbedderUnavailable, match="could not embed"):
            t.vector()


@pytest.mark.parametrize(("max_batch", "max_wait_ms"), [(0, 1.0), (1, -1.0), (1, float("nan"))])
def test_the_batcher_refuses_limits_that_bound_nothing(max_batch, max_wait_ms):
    with pytest.raises(ValueError, match="max_batch"):
        EmbeddingBatcher(SlowEmbed(), max_batch, max_wait_ms)


# --- the wait is a stage of the question's deadline ---------------------------------------------


def _free_service(project, index, embed, clock, max_batch=4, max_wait_ms=1.0):
    batcher = EmbeddingBatcher(embed, max_batch, max_wait_ms, clock=clock)
    vectors = BatchedVectors(lambda name: batcher)
    drafter = ExtractiveDrafter.committed(project.thresholds.drafting)
    return Service(Registry(index), project.thresholds, drafter, clock, vectors)


def test_a_batched_answer_shows_its_wait_and_its_call_as_stages(project, index, embedder):
    clock = FakeClock(100.0, step=0.001)
    question = "What does no-cache mean?"
    answer = _free_service(project, index, embedder.embed_together, clock).answer(question)
    assert isinstance(answer, Answer)
    assert list(answer.budget.stages) == list(BATCHED_STAGES)
    assert all(v > 0 for v in answer.budget.stages.values())
    # the same answer as with the question embedded on its own, budget aside
    drafter = ExtractiveDrafter.committed(project.thresholds.drafting)
    alone = Service(Registry(index), project.thresholds, drafter, clock, lambda ix, text: embedder.embed([text])[0])
    expected = alone.answer(question)
    assert list(expected.budget.stages) == ["retrieval", "drafting", "grounding", "relevance"]
    assert {**answer.as_dict(), "budget": None} == {**expected.as_dict(), "budget": None}


def test_a_wait_that_spends_the_deadline_abandons_naming_the_wait(project, index, embedder):
    clock = FakeClock(100.0)
    gate = threading.Event()
    calls: list[list[str]] = []

    def embed(texts):
        calls.append(list(texts))
        gate.wait(5)
        return embedder.embed_together(texts)

    service = _free_service(project, index, embed, clock)

    # The embedder is busy with another question; this one's wait outlasts its deadline.
    other = threading.Thread(target=service.answer, args=("What is a URI fragment?",))
    other.start()
    _wait_for(lambda: calls)
    deadline_s = project.thresholds.budget.request_deadline_ms / 1000.0

    def spend_while_waiting():
        time.sleep(0.05)
        clock.advance(deadline_s + 0.001)
        gate.set()

    threading.Thread(target=spend_while_waiting).start()
    answer = service.answer("What does no-cache mean?")
    other.join(5)
    assert isinstance(answer, Abandoned)
    assert "during embedding_wait" in answer.detail
    assert answer.budget.stages["embedding_wait"] > project.thresholds.budget.request_deadline_ms
