"""The second project (examples/starlette-docs) served as ``rag-contract serve --root
examples/starlette-docs`` serves it: its pages name its corpus, a Markdown section is served by
its readable id, a fixed question is answered from its recorded draft citing a Starlette page,
and free text is answered from the Markdown under the same grounding."""

from __future__ import annotations

import pytest
from starlette.testclient import TestClient

from rag_contract.index.registry import Registry
from rag_contract.index.store import load_index
from rag_contract.project import load_project
from tests.support import ROOT
from tests.support.apps import make_app

EXAMPLE = ROOT / "examples" / "starlette-docs"


@pytest.fixture(scope="module")
def client(embedder):
    project = load_project(EXAMPLE)
    app = make_app(project, Registry(load_index(project.paths.index)), embedder=embedder, drafts=project.paths.drafts)
    return TestClient(app, base_url="http://testserver")


def test_pages_name_the_example_corpus(client):
    page = client.get("/")
    assert page.status_code == 200
    assert "answers over the Starlette documentation (25 pages)" in page.text
    assert "IETF" not in page.text


def test_a_markdown_section_is_served_by_its_readable_id(client):
    section = client.get("/section/middleware.md:corsmiddleware", headers={"accept": "application/json"})
    assert section.status_code == 200
    assert section.json()["title"] == "CORSMiddleware"
    lead = client.get("/section/middleware.md", headers={"accept": "application/json"})
    assert lead.status_code == 200 and lead.json()["title"] == "Middleware"


def test_a_fixed_question_and_free_text_are_answered_from_the_pages(client):
    answer = client.get("/answer/q01").json()
    assert answer["index_version"] == load_index(EXAMPLE / "index").version
    free = client.post("/ask", json={"question": "How do I allow cross-origin requests from my frontend?"}).json()
    cited = {c["section_id"] for c in free.get("claims", [])}
    assert free["state"] in ("grounded", "partial") and cited, free
    assert all(s.split("#")[0].endswith(".md") for s in cited)
