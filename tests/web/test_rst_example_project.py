"""The reStructuredText project (examples/flask-docs) served as ``rag-contract serve --root
examples/flask-docs`` serves it: its pages name its corpus, a reST section is served by its
readable id with its text free of markup, and free text is answered citing a Flask page."""

from __future__ import annotations

import pytest
from starlette.testclient import TestClient

from rag_contract.index.registry import Registry
from rag_contract.index.store import load_index
from rag_contract.project import load_project
from tests.support import ROOT
from tests.support.apps import make_app

EXAMPLE = ROOT / "examples" / "flask-docs"


@pytest.fixture(scope="module")
def client(embedder):
    project = load_project(EXAMPLE)
    app = make_app(project, Registry(load_index(project.paths.index)), embedder=embedder, drafts=project.paths.drafts)
    return TestClient(app, base_url="http://testserver")


def test_pages_name_the_example_corpus(client):
    page = client.get("/")
    assert page.status_code == 200
    assert "answers over the Flask documentation (22 pages)" in page.text


def test_a_rst_section_is_served_by_its_readable_id_without_markup(client):
    section = client.get("/section/config.rst:instance-folders", headers={"accept": "application/json"})
    assert section.status_code == 200
    body = section.json()
    assert body["title"] == "Instance Folders"
    assert "Flask.instance_path" in body["text"] and ":attr:" not in body["text"] and "``" not in body["text"]
    lead = client.get("/section/config.rst", headers={"accept": "application/json"})
    assert lead.status_code == 200 and lead.json()["title"] == "Configuration Handling"


def test_free_text_is_answered_from_the_pages(client):
    free = client.post("/ask", json={"question": "How do I make flask run listen on a different port?"}).json()
    cited = {c["section_id"] for c in free.get("claims", [])}
    assert free["state"] in ("grounded", "partial") and cited, free
    assert all(s.split("#")[0].endswith(".rst") for s in cited)
