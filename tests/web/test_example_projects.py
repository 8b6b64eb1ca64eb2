"""The example projects, each served as ``rag-contract serve --root examples/<name>`` serves it:
its pages name its corpus, a section is served by its readable id, a fixed question is answered
from its recorded draft, and free text is answered from its own pages under the same grounding.
Starlette's pages are Markdown; Flask's are reStructuredText, whose sections are served free of
markup."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from rag_contract.index.registry import Registry
from rag_contract.index.store import load_index
from rag_contract.project import load_project
from tests.support import ROOT
from tests.support.apps import make_app


@dataclass(frozen=True)
class Example:
    name: str  # its folder under examples/
    corpus: str  # how its pages name the corpus
    section: str  # a section's readable id, and its title
    title: str
    page: str  # the section's page, whose id serves the page's lead section, and that section's title
    page_title: str
    question: str  # free text its pages answer
    suffix: str  # what every page it cites is named with

    @property
    def root(self) -> Path:
        return ROOT / "examples" / self.name


STARLETTE = Example(
    "starlette-docs",
    "the Starlette documentation (25 pages)",
    "middleware.md:corsmiddleware",
    "CORSMiddleware",
    "middleware.md",
    "Middleware",
    "How do I allow cross-origin requests from my frontend?",
    ".md",
)
FLASK = Example(
    "flask-docs",
    "the Flask documentation (22 pages)",
    "config.rst:instance-folders",
    "Instance Folders",
    "config.rst",
    "Configuration Handling",
    "How do I make flask run listen on a different port?",
    ".rst",
)
each_example = pytest.mark.parametrize("example", [STARLETTE, FLASK], ids=lambda e: e.name)


@pytest.fixture(scope="module")
def client(embedder) -> Callable[[Example], TestClient]:
    """The app serving an example, made once per example."""
    made: dict[str, TestClient] = {}

    def serving(example: Example) -> TestClient:
        if example.name not in made:
            project = load_project(example.root)
            app = make_app(
                project, Registry(load_index(project.paths.index)), embedder=embedder, drafts=project.paths.drafts
            )
            made[example.name] = TestClient(app, base_url="http://testserver")
        return made[example.name]

    return serving


@each_example
def test_pages_name_the_example_corpus(client, example):
    page = client(example).get("/")
    assert page.status_code == 200
    assert f"answers over {example.corpus}" in page.text
    assert "IETF" not in page.text


@each_example
def test_a_section_is_served_by_its_readable_id(client, example):
    section = client(example).get(f"/section/{example.section}", headers={"accept": "application/json"})
    assert section.status_code == 200
    assert section.json()["title"] == example.title
    lead = client(example).get(f"/section/{example.page}", headers={"accept": "application/json"})
    assert lead.status_code == 200 and lead.json()["title"] == example.page_title


def test_a_rst_section_is_served_without_markup(client):
    body = client(FLASK).get(f"/section/{FLASK.section}", headers={"accept": "application/json"}).json()
    assert "Flask.instance_path" in body["text"] and ":attr:" not in body["text"] and "``" not in body["text"]


@each_example
def test_a_fixed_question_is_answered_from_its_recorded_draft(client, example):
    answer = client(example).get("/answer/q01").json()
    assert answer["index_version"] == load_index(example.root / "index").version


@each_example
def test_free_text_is_answered_from_the_pages(client, example):
    free = client(example).post("/ask", json={"question": example.question}).json()
    cited = {c["section_id"] for c in free.get("claims", [])}
    assert free["state"] in ("grounded", "partial") and cited, free
    assert all(s.split("#")[0].endswith(example.suffix) for s in cited)
