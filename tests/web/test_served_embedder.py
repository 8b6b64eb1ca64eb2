"""Free text is embedded by the model the served index was built with, as the CLI does.

An index "built by" a 1536-dimension embedder is made from the committed one: every vector
is mapped through a fixed matrix with orthonormal rows (384 -> 1536), which keeps every
cosine, so answers over it must equal answers over the committed index when the query is
mapped the same way, and a 384-dimension query against it would be a shape error (the 500
this guards against).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from starlette.testclient import TestClient

from rag_contract.embedders import make_embedder
from rag_contract.embedders.base import Embedder, EmbedderError, EmbedderLoading
from rag_contract.embedders.local import LocalEmbedder
from rag_contract.embedders.openai_api import OpenAIEmbedder
from rag_contract.index.registry import Registry
from rag_contract.index.store import Index
from rag_contract.web.ratelimit import MemoryStore
from rag_contract.web.serving import assemble, embedder_for, loaded_on_demand
from tests.support.apps import FROZEN, fresh_status
from tests.support.stages import BATCHED_STAGES

WIDE = OpenAIEmbedder.name  # the name an index built by text-embedding-3-small carries
QUESTION = "How do I write an IPv6 address as the host of a URL?"


@dataclasses.dataclass(frozen=True, eq=False)
class Widened:
    """The local model's vectors times ``basis`` (orthonormal rows): the same cosines, 1536 wide."""

    inner: LocalEmbedder
    basis: np.ndarray
    calls: list[str] = dataclasses.field(default_factory=list)

    identity = "widened"
    dimensions = 1536

    def embed(self, texts: Sequence[str], progress: Callable[[int], None] | None = None) -> np.ndarray:
        self.calls.extend(texts)
        return (self.inner.embed(texts) @ self.basis).astype(np.float32)


@pytest.fixture(scope="module")
def basis() -> np.ndarray:
    q, _ = np.linalg.qr(np.random.default_rng(7).standard_normal((1536, 384)))
    return q.T.astype(np.float32)


@pytest.fixture(scope="module")
def wide_index(index: Index, basis: np.ndarray) -> Index:
    return dataclasses.replace(
        index,
        embedder_name=WIDE,
        vectors=index.vectors @ basis,
        sentence_vectors=index.sentence_vectors @ basis,
        question_vectors={q: v @ basis for q, v in index.question_vectors.items()},
    )


def served(project, index: Index | None, embedders=None) -> TestClient:
    """The served assembly (``serving.assemble``) over ``index``, as ``serve`` builds it."""
    app = assemble(
        project,
        Registry(index),
        clock=FROZEN,
        rate_clock=FROZEN,
        rate_store=MemoryStore(),
        status=fresh_status(index),
        embedders=embedders,
    )
    return TestClient(app)


def claims_of(response) -> list[tuple[str, str]]:
    return [(c["section_id"], c["text"]) for c in response.json()["claims"]]


def test_the_default_embedders_are_made_by_the_index_name_as_the_cli_makes_them():
    embedders = embedder_for()
    assert isinstance(embedders(WIDE), OpenAIEmbedder)
    assert isinstance(embedders(LocalEmbedder.name), LocalEmbedder)
    assert embedders(WIDE) is embedders(WIDE)  # made once, kept


def test_ask_over_an_index_of_another_embedder_embeds_with_that_embedder(project, index, wide_index, embedder, basis):
    widened = Widened(embedder, basis)

    def make(name: str) -> Embedder:
        return widened if name == WIDE else make_embedder(name)

    with served(project, wide_index, embedder_for(make)) as client:
        wide = client.post("/ask", json={"question": QUESTION})
    with served(project, index, embedder_for(lambda name: embedder)) as client:
        local = client.post("/ask", json={"question": QUESTION})
    assert wide.status_code == 200, wide.text
    assert QUESTION in widened.calls
    assert claims_of(wide) == claims_of(local) and claims_of(wide)
    assert wide.json()["state"] == local.json()["state"]


def test_an_embedder_that_cannot_embed_is_a_503_naming_it_not_a_500(project, wide_index):
    # The default factory, as served: the index names the OpenAI embedder and there is no key
    # (tests scrub it), so no call is made and the request is refused naming the embedder.
    with served(project, wide_index) as client:
        r = client.post("/ask", json={"question": QUESTION})
    assert r.status_code == 503, r.text
    assert r.json()["error"] == "embedder_unavailable"
    assert WIDE in r.json()["detail"]
    assert "x-index-version" not in r.headers


# --- the model loads on the first question, off the request path ---------------------------


@dataclasses.dataclass(frozen=True)
class BrokenModel(LocalEmbedder):
    def embed(self, texts: Sequence[str], progress: Callable[[int], None] | None = None) -> np.ndarray:
        raise EmbedderError("model file missing")


def test_a_local_model_is_loaded_once_in_the_background_and_asked_for_again_meanwhile():
    fresh = LocalEmbedder()
    jobs: list[Callable[[], None]] = []
    get = loaded_on_demand(lambda name: fresh, retry_after_s=3, start=jobs.append)
    for _ in range(2):
        with pytest.raises(EmbedderLoading) as caught:
            get(fresh.name)
        assert caught.value.retry_after_s == 3
    assert len(jobs) == 1 and not fresh.loaded  # one load started, nothing loaded on the caller's time
    jobs[0]()
    assert fresh.loaded and get(fresh.name) is fresh


def test_a_model_that_fails_to_load_is_left_to_the_requests_to_report():
    broken = BrokenModel()
    jobs: list[Callable[[], None]] = []
    get = loaded_on_demand(lambda name: broken, start=jobs.append)
    with pytest.raises(EmbedderLoading):
        get(broken.name)
    jobs[0]()
    assert get(broken.name) is broken and len(jobs) == 1  # not reloaded forever


def test_remote_and_loaded_embedders_pass_straight_through(embedder):
    jobs: list[Callable[[], None]] = []
    assert loaded_on_demand(embedder_for(), start=jobs.append)(WIDE).name == WIDE
    assert loaded_on_demand(lambda name: embedder, start=jobs.append)(embedder.name) is embedder
    assert jobs == []


def test_an_ask_before_the_model_has_loaded_is_a_503_with_retry_after_then_answered(project, index):
    fresh = LocalEmbedder()
    with served(project, index, embedder_for(lambda name: fresh)) as client:
        first = client.post("/ask", json={"question": QUESTION})
        page = client.get("/ask", params={"q": QUESTION})
        deadline = time.monotonic() + 60
        while not fresh.loaded:  # waited on the object, not by asking: the limiter's clock is frozen
            assert time.monotonic() < deadline, "the model did not load in the background"
            time.sleep(0.05)
        later = client.post("/ask", json={"question": QUESTION})
    assert first.status_code == 503 and first.json()["error"] == "embedder_loading", first.text
    assert first.headers["retry-after"] == "1"  # RFC 9110 section 10.2.3: delay-seconds
    assert "x-index-version" not in first.headers
    assert page.status_code in (200, 503) and (page.status_code == 200 or page.headers["retry-after"] == "1")
    assert later.status_code == 200 and later.json()["state"] != "abandoned"


# --- free text is embedded in shared calls; the fixed answers are not --------------------------

ASKED = (
    QUESTION,
    "What does the no-cache directive of Cache-Control mean?",
    "Which characters are structural in JSON?",
    "When may a cache serve a stale response?",
)


def test_free_text_shows_its_batch_wait_as_a_stage_and_answers_as_when_asked_alone(project, index, embedder):
    with served(project, index, embedder_for(lambda name: embedder)) as client:
        alone = [client.post("/ask", json={"question": q}).json() for q in ASKED]
        with ThreadPoolExecutor(project.thresholds.admission.max_in_flight) as pool:
            together = list(pool.map(lambda q: client.post("/ask", json={"question": q}).json(), ASKED))
        fixed = client.get("/answer/q11").json()
    for a, b in zip(alone, together, strict=True):
        assert list(a["budget"]["stages"]) == list(b["budget"]["stages"]) == list(BATCHED_STAGES)
        assert {**a, "budget": None} == {**b, "budget": None}
    assert list(fixed["budget"]["stages"]) == ["retrieval", "drafting", "grounding", "relevance"]


def test_liveness_is_not_readiness_and_the_readiness_probe_starts_the_load(project, index):
    # /health says the index is served from the start; /health/ready says whether /ask would
    # be answered, and asking it is what starts the model loading (a warm-up before traffic).
    fresh = LocalEmbedder()
    with served(project, index, embedder_for(lambda name: fresh)) as client:
        live = client.get("/health/live")
        waiting = client.get("/health/ready")
        health = client.get("/health")
        deadline = time.monotonic() + 60
        while not fresh.loaded:
            assert time.monotonic() < deadline, "the readiness probe did not start the load"
            time.sleep(0.05)
        ready = client.get("/health/ready")
        answered = client.post("/ask", json={"question": QUESTION})
    assert live.status_code == 200 and live.json() == {"live": True}
    assert health.status_code == 200 and health.json()["serving"] is True
    assert waiting.status_code == 503 and waiting.json()["waiting_for"] == "embedder"
    assert waiting.headers["retry-after"] == "1"  # RFC 9110 section 10.2.3
    assert ready.status_code == 200 and ready.json() == {"ready": True, "index_version": index.version}
    assert answered.status_code == 200


def test_readiness_waits_for_an_index_and_not_for_an_embedder_that_cannot_load(project, index, wide_index):
    with served(project, None) as client:
        r = client.get("/health/ready")
        assert r.status_code == 503 and r.json()["waiting_for"] == "index" and "retry-after" not in r.headers
        assert client.get("/health/live").status_code == 200
    with served(project, wide_index) as client:  # the OpenAI embedder without a key: /ask names it
        assert client.get("/health/ready").status_code == 200


def test_the_question_page_asks_again_by_itself_while_the_model_loads(project, index):
    fresh = LocalEmbedder()
    with served(project, index, embedder_for(lambda name: fresh)) as client:
        page = client.get("/ask", params={"q": QUESTION})
        deadline = time.monotonic() + 60
        while not fresh.loaded:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        again = client.get("/ask", params={"q": QUESTION})  # what the refresh requests: the same URL
    assert page.status_code == 503 and page.headers["retry-after"] == "1"
    # A refresh needs no script, which the pages' CSP (default-src 'none') would block.
    assert '<meta http-equiv="refresh" content="1">' in page.text and "asks again by itself" in page.text
    assert again.status_code == 200 and 'http-equiv="refresh"' not in again.text
