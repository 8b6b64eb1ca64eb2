"""``rag-contract init`` on documents written in the test (no index, no model): what it copies
and writes, the project it leaves loading, the navigation titles, and each refusal in one line.
The whole flow in a fresh environment is tests/test_own_documents.py."""

from __future__ import annotations

import datetime

import pytest
import yaml

from rag_contract.cli import main
from rag_contract.config.about import About, AboutError, load_about
from rag_contract.project import load_project
from rag_contract.scaffold.project_init import InitError, init_project, nav_titles

PAGES = {
    "guide.md": "Start here.\n\n## Install\n\nRun the installer once per machine.\n",
    "api.html": "<html><body><h1 id='top'>API</h1><p>Every call returns JSON.</p></body></html>",
}
MKDOCS = "site_name: X\nnav:\n  - Home: guide.md\n  - Reference:\n      - The API: api.html\nx: !!python/name:a.b\n"


@pytest.fixture
def docs(tmp_path):
    d = tmp_path / "docs"
    d.mkdir()
    for name, text in PAGES.items():
        (d / name).write_text(text)
    (d / "mkdocs.yml").write_text(MKDOCS)
    (d / "LICENSE.md").write_text("Licensed to all.")
    return d


def test_init_copies_writes_and_leaves_a_project_that_loads(tmp_path, docs, capsys):
    target = tmp_path / "project"
    code = main(["init", str(target), "--from", str(docs), "--keep", str(docs / "LICENSE.md"), "--name", "our docs"])
    out = capsys.readouterr().out
    assert code == 0
    assert "2 document(s) and 1 kept file(s)" in out
    for step in ("rag-contract build-index", "rag-contract calibrate", "thresholds update", "pytest -m gate", "serve"):
        assert step in out
    manifest = yaml.safe_load((target / "corpus" / "manifest.yaml").read_text())
    assert manifest["kept"] == ["LICENSE.md"]
    assert [(e["file"], e["title"], e["format"]) for e in manifest["files"]] == [
        ("api.html", "The API", "html"),
        ("guide.md", "Home", "markdown"),
    ]
    for name, text in PAGES.items():
        assert (target / "corpus" / name).read_text() == text
    project = load_project(target)
    assert project.about == About("our docs", "our docs")
    assert [s.id for s in project.corpus.sections] == ["api.html", "api.html#top", "guide.md", "guide.md#install"]
    assert project.questions.questions[0].expected == ("api.html#top",)  # the example: the first prose
    t = project.thresholds
    assert t.retrieval.ceilings == {} and set(t.retrieval.floors.values()) == {0.0}
    assert t.answers.min_grounded_rate is None and t.budget.max_request_ms > 0
    assert "# Each entry:" in (target / "eval" / "questions.yaml").read_text()


def test_init_refuses_an_existing_project_an_unreadable_format_and_two_files_of_one_name(tmp_path, docs):
    init_project(tmp_path / "p", [docs], today=datetime.date(2026, 1, 1))
    with pytest.raises(InitError, match="already there"):
        init_project(tmp_path / "p", [docs])
    (tmp_path / "notes.pdf").write_bytes(b"%PDF")
    with pytest.raises(InitError) as caught:
        init_project(tmp_path / "q", [tmp_path / "notes.pdf"])
    assert str(caught.value) == (
        "notes.pdf: no format reads this file; formats known: rfc-text (.txt), markdown (.md, .markdown), "
        "html (.html, .htm), rst (.rst)"
    )
    other = tmp_path / "other"
    other.mkdir()
    (other / "guide.md").write_text("# Again\n")
    with pytest.raises(InitError, match="^guide.md: two documents of this name"):
        init_project(tmp_path / "r", [docs, other])


def test_nav_titles_read_nested_navigation_and_ignore_python_tags(docs):
    assert nav_titles(docs / "mkdocs.yml") == {"guide.md": "Home", "api.html": "The API"}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("name: x\n", "project.yaml: description: required, one line of text"),
        (
            "name: x\ndescription: y\ncolour: red\n",
            "project.yaml: colour: unknown key (known: ['name', 'description'])",
        ),
        ("name: x\ndescription: " + "y" * 121 + "\n", "project.yaml: description: must be one line of at most 120"),
        ("- x\n", "project.yaml: must be a mapping with the keys ['name', 'description']"),
    ],
)
def test_project_yaml_is_refused_naming_the_key(tmp_path, text, message):
    (tmp_path / "project.yaml").write_text(text)
    with pytest.raises(AboutError) as caught:
        load_about(tmp_path / "project.yaml")
    assert str(caught.value).startswith(message)


def test_a_project_without_project_yaml_is_named_after_its_directory(tmp_path):
    (tmp_path / "runbooks").mkdir()
    assert load_about(tmp_path / "runbooks" / "project.yaml") == About(
        "the runbooks documents", "the runbooks documents"
    )
