"""Cutover with real threads: a request that acquired index A finishes on A while B lands.

B is A with another version string (``dataclasses.replace``), so the only thing that can
tell the two apart is the version an answer reports: exactly what a request that re-read
the registry would get wrong. Two windows are held open with ``threading.Event``:

1. after acquire, before the index is first used: inside ``query_vector``;
2. mid-draft: inside the drafter's ``draft``.

``assert_completes_on_old_version`` is the check; it is shown to FAIL for a Service variant
that reads the version from the registry at the end, so the check is not vacuous. The same
holds over HTTP against a real uvicorn server, for body and ``X-Index-Version`` alike.
Also here: a broken reload keeps the old index, and a missing index at startup is
no_context plus a /health error, not a dead process.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import threading
from collections.abc import Callable
from functools import partial
from pathlib import Path

import httpx
import pytest
from starlette.testclient import TestClient

from rag_contract.answering.drafting import ExtractiveDrafter
from rag_contract.answering.service import Answer, Service, stored_vector
from rag_contract.index.registry import Registry
from rag_contract.index.store import IndexLoadError
from rag_contract.web.serving import build_served_app, embedded_vector
from tests.support.apps import FROZEN, make_app

B_VERSION = "bbbbbbbbbbbb"
WAIT_S = 20.0
# Every service clock here is FROZEN (make_app's default too): blocking a stage must not spend the deadline.


@pytest.fixture(scope="module")
def index_a(index):
    return index  # the committed index (conftest.py), served as A


@pytest.fixture(scope="module")
def index_b(index_a):
    b = dataclasses.replace(index_a, version=B_VERSION)
    assert b.version != index_a.version and b.sections is index_a.sections
    return b


@pytest.fixture(scope="module")
def question(project):
    return project.questions.answerable[0]


class Gate:
    """Holds a thread inside a function until the test releases it (first call only)."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()
        self._lock = threading.Lock()
        self._used = False

    def hold(self) -> None:
        with self._lock:
            first, self._used = not self._used, True
        if first:
            self.entered.set()
            if not self.release.wait(WAIT_S):
                raise TimeoutError("the test never released the gate")


def blocking_vector(gate: Gate, inner=stored_vector):
    def query_vector(index, text):
        gate.hold()
        return inner(index, text)

    return query_vector


class BlockingDrafter:
    def __init__(self, inner, gate: Gate) -> None:
        self.inner = inner
        self.gate = gate
        self.name = inner.name

    def draft(self, question_id, question, passages, query=None):
        self.gate.hold()
        return self.inner.draft(question_id, question, passages)


ServiceFactory = Callable[..., Service]  # (registry, thresholds, drafter, clock, query_vector)


def _answer_into(out: dict, service: Service, question) -> None:
    out.update(result=service.answer(question.question, question.id))


def assert_completes_on_old_version(service_factory: ServiceFactory, index_a, index_b, thresholds, question) -> None:
    """In both windows: the answer reports A although B was installed while it ran."""
    drafter = ExtractiveDrafter.committed(thresholds.drafting)
    for window in ("after acquire, inside query_vector", "mid-draft, inside draft()"):
        gate = Gate()
        registry = Registry(index_a)
        if window.startswith("after acquire"):
            service = service_factory(registry, thresholds, drafter, FROZEN, blocking_vector(gate))
        else:
            service = service_factory(registry, thresholds, BlockingDrafter(drafter, gate), FROZEN, stored_vector)
        out: dict = {}
        worker = threading.Thread(target=_answer_into, args=(out, service, question))
        worker.start()
        assert gate.entered.wait(WAIT_S), f"{window}: the request never reached the window"
        registry.install(index_b)
        gate.release.set()
        worker.join(WAIT_S)
        assert not worker.is_alive(), f"{window}: the request did not finish"
        result = out["result"]
        assert isinstance(result, Answer), f"{window}: {result!r}"
        assert registry.acquire() is index_b, f"{window}: the swap did not land"
        assert result.index_version == index_a.version, (
            f"{window}: answered on {result.index_version}, acquired {index_a.version}"
        )
        # Same content, so the same answer: only the version could have moved.
        assert result.passages and result.state.value in ("grounded", "partial", "unsupported")


class VersionFromRegistryAtEnd(Service):
    """Deliberately broken: reports whatever the registry holds when the answer is done."""

    def answer(self, question, question_id=None):
        result = super().answer(question, question_id)
        current = self.registry.acquire()
        return dataclasses.replace(result, index_version=current.version if current else None)


def test_a_request_completes_on_the_index_it_acquired(project, index_a, index_b, question):
    assert_completes_on_old_version(Service, index_a, index_b, project.thresholds, question)


def test_the_check_fails_for_a_service_that_reads_the_registry_at_the_end(project, index_a, index_b, question):
    with pytest.raises(AssertionError, match="answered on bbbbbbbbbbbb"):
        assert_completes_on_old_version(VersionFromRegistryAtEnd, index_a, index_b, project.thresholds, question)


# --- the same over HTTP ----------------------------------------------------------------------------


def _swapped_in_flight(request: Callable[[], httpx.Response], gate: Gate, registry: Registry, index) -> httpx.Response:
    """``request``'s response, sent from another thread, when ``index`` is installed while the
    request waits at ``gate``."""
    out: dict = {}
    worker = threading.Thread(target=lambda: out.update(response=request()))
    worker.start()
    assert gate.entered.wait(WAIT_S)
    registry.install(index)
    gate.release.set()
    worker.join(WAIT_S)
    return out["response"]


def test_over_http_a_request_in_flight_during_the_swap_reports_the_old_version(
    project, index_a, index_b, question, embedder, live_server
):
    draft_gate, vector_gate = Gate(), Gate()
    drafter = BlockingDrafter(ExtractiveDrafter.committed(project.thresholds.drafting), draft_gate)
    registry = Registry(index_a)
    app = make_app(
        project,
        registry,
        thresholds=project.thresholds,
        fixture_drafter=drafter,
        fixture_vector=stored_vector,
        ask_vector=blocking_vector(vector_gate, embedded_vector(embedder)),
    )
    server = live_server(app)

    # Window 2 on GET /answer/{id}: mid-draft.
    answer = partial(httpx.get, f"{server.url}/answer/{question.id}", timeout=WAIT_S)
    r = _swapped_in_flight(answer, draft_gate, registry, index_b)
    assert r.status_code == 200
    assert r.json()["index_version"] == index_a.version
    assert r.headers["x-index-version"] == index_a.version
    after = httpx.get(f"{server.url}/answer/{question.id}", timeout=WAIT_S)
    assert after.json()["index_version"] == after.headers["x-index-version"] == B_VERSION

    # Window 1 on POST /ask: after acquire, inside query_vector; this time B -> A.
    ask = partial(httpx.post, f"{server.url}/ask", json={"question": question.question}, timeout=WAIT_S)
    r = _swapped_in_flight(ask, vector_gate, registry, index_a)
    assert r.status_code == 200
    assert r.json()["index_version"] == r.headers["x-index-version"] == B_VERSION


# --- reload and startup ----------------------------------------------------------------------------


def _copy_index(root: Path, tmp_path: Path) -> Path:
    target = tmp_path / "index"
    shutil.copytree(root / "index", target)
    return target


def test_reload_with_a_broken_index_raises_and_keeps_the_old_one(tmp_path, index_a, root):
    registry = Registry(index_a)
    broken = _copy_index(root, tmp_path)
    vectors = broken / "vectors.npy"
    vectors.write_bytes(vectors.read_bytes()[:-16])
    with pytest.raises(IndexLoadError, match="vectors.npy"):
        registry.reload(broken)
    assert registry.acquire() is index_a and registry.load_error is None
    with pytest.raises(IndexLoadError, match="meta.json"):
        registry.reload(tmp_path / "nowhere")
    assert registry.acquire() is index_a


def test_reload_with_a_good_index_swaps(tmp_path, index_a, root):
    registry = Registry(index_a)
    fresh = registry.reload(_copy_index(root, tmp_path))
    assert registry.acquire() is fresh and fresh is not index_a
    assert fresh.version == index_a.version


def _root_without_index(root: Path, tmp_path: Path) -> Path:
    checkout = tmp_path / "project"
    checkout.mkdir()
    for name in ("corpus", "eval", "models", "project.yaml"):  # models: the embedder the index was built with
        if (root / name).exists():
            os.symlink(root / name, checkout / name)
    return checkout


def test_startup_without_an_index_serves_no_context_and_health_says_why(tmp_path, root):
    app = build_served_app(_root_without_index(root, tmp_path))
    with TestClient(app) as client:  # runs the lifespan, as uvicorn would
        health = client.get("/health")
        assert health.status_code == 503
        assert health.json()["serving"] is False
        assert "meta.json" in health.json()["load_error"]
        assert health.json()["disk_error"]
        for r in (client.get("/answer/q01"), client.post("/ask", json={"question": "What is a URI?"})):
            assert r.status_code == 503
            assert r.json()["state"] == "no_context"
            assert r.json()["index_version"] is None
            assert "x-index-version" not in r.headers
        page = client.get("/")
        assert page.status_code == 503 and "no index is being served" in page.text


def test_startup_with_a_corrupt_index_names_the_file(tmp_path, root):
    checkout = _root_without_index(root, tmp_path)
    index = _copy_index(root, checkout)
    (index / "chunks.jsonl").write_text("tampered\n")
    with TestClient(build_served_app(checkout)) as client:
        health = client.get("/health")
        assert health.status_code == 503
        assert "chunks.jsonl" in health.json()["load_error"]


def test_startup_with_the_committed_index_serves_it(project, index_a, root):
    with TestClient(build_served_app(root)) as client:
        health = client.get("/health")
        assert health.status_code == 200
        assert health.json()["index_version"] == index_a.version
        r = client.get(f"/answer/{project.questions.questions[0].id}")
        assert r.headers["x-index-version"] == r.json()["index_version"] == index_a.version
