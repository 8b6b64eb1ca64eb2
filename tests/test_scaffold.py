"""``rag-contract init`` on documents written in the test (no index, no model): what it copies
and writes, the project it leaves loading, the navigation titles, and each refusal in one line.
The whole flow in a fresh environment is tests/test_own_documents.py."""

from __future__ import annotations

import datetime

import pytest
import yaml

from rag_contract.cli import main
from rag_contract.config.about import About, AboutError, load_about
from rag_contract.config.corpus_selection import selection_of
from rag_contract.corpus.discovery import Skipped
from rag_contract.corpus.site_navigation import nav_titles
from rag_contract.corpus.sources import CorpusError
from rag_contract.project import load_project
from rag_contract.scaffold.project_init import InitError, init_project

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
    for step in ("build-index", "measure --allow-loosen", "measure --calibrate", "pytest -m gate", "serve"):
        assert step in out
    assert "calibrate --write-thresholds" not in out  # the README and the guide's step is measure --calibrate
    manifest = yaml.safe_load((target / "corpus" / "manifest.yaml").read_text())
    assert manifest["kept"] == ["LICENSE.md"]
    assert [(e["file"], e["title"], e["format"]) for e in manifest["files"]] == [  # the nav's order
        ("guide.md", "Home", "markdown"),
        ("api.html", "The API", "html"),
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
            "project.yaml: colour: unknown key (known: ['name', 'description', 'corpus'])",
        ),
        ("name: x\ndescription: " + "y" * 121 + "\n", "project.yaml: description: must be one line of at most 120"),
        ("- x\n", "project.yaml: must be a mapping with the keys ['name', 'description', 'corpus']"),
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


SITE_MKDOCS = """\
site_name: Team handbook
docs_dir: docs
nav:
  - Home: index.md
  - Guide:
      - Getting started: guide/index.md
      - Connecting clients: guide/clients.md
  - Advanced:
      - Advanced use: advanced/index.md
      - Client timeouts: advanced/clients.md
  - Source: https://example.org/handbook
"""

SITE_PAGES = {
    "index.md": "# Handbook\n\nHow the team runs its services.\n",
    "guide/index.md": "# Guide\n\nStart with the client library.\n",
    "guide/clients.md": "# Clients\n\nCreate one client per process.\n\n## Timeouts\n\nThe default is ten seconds.\n",
    "advanced/index.md": "# Advanced\n\nTuning for heavy traffic.\n",
    "advanced/clients.md": "# Clients\n\nPool connections.\n\n## Timeouts\n\nSet a read timeout of two seconds.\n",
    "advanced/retry-policy.md": "# Retries\n\nRetry idempotent calls three times.\n",
}


@pytest.fixture
def site(tmp_path):
    """An MkDocs site: mkdocs.yml one level above docs/, pages in two folders (same names in
    both), a draft to exclude, an image no format reads, an empty page and a Latin-1 page."""
    root = tmp_path / "handbook"
    (root / "docs").mkdir(parents=True)
    (root / "mkdocs.yml").write_text(SITE_MKDOCS)
    for name, text in SITE_PAGES.items():
        (root / "docs" / name).parent.mkdir(parents=True, exist_ok=True)
        (root / "docs" / name).write_text(text)
    (root / "docs" / "drafts").mkdir()
    (root / "docs" / "drafts" / "wip.md").write_text("# Not ready\n\nDo not ship this.\n")
    (root / "docs" / "guide" / "flow.png").write_bytes(b"\x89PNG\r\n\x1a\n")
    (root / "docs" / "empty.md").write_text("\n")
    (root / "docs" / "old.md").write_bytes("# Caf\xe9\n".encode("latin-1"))
    return root


def test_init_on_a_two_folder_mkdocs_tree_keeps_every_page_with_nav_titles_and_reports_skips(tmp_path, site, capsys):
    target = tmp_path / "project"
    code = main(["init", str(target), "--from", str(site / "docs"), "--exclude", "drafts/**"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "6 document(s) in corpus/" in out
    assert "navigation: mkdocs.yml (above docs/): 5 page title(s) and the page order from its nav" in out
    assert "skipped: 4 file(s)\n" in out
    for line in (
        "  drafts/wip.md: excluded by 'drafts/**' (corpus.exclude)",
        "  empty.md: empty",
        "  guide/flow.png: unsupported format: no format reads .png",
        "  old.md: markdown: not UTF-8 text (byte 5); a Markdown file is expected",
    ):
        assert line + "\n" in out
    manifest = yaml.safe_load((target / "corpus" / "manifest.yaml").read_text())
    assert [(e["file"], e["title"]) for e in manifest["files"]] == [  # nav order, then the rest
        ("index.md", "Home"),
        ("guide/index.md", "Getting started"),
        ("guide/clients.md", "Connecting clients"),
        ("advanced/index.md", "Advanced use"),
        ("advanced/clients.md", "Client timeouts"),
        ("advanced/retry-policy.md", "Retry policy"),
    ]
    for name, text in SITE_PAGES.items():
        assert (target / "corpus" / name).read_text() == text
    project = load_project(target)
    ids = {s.id: s for s in project.corpus.sections}
    assert ids["advanced/clients.md#timeouts"].text.strip() == "Set a read timeout of two seconds."
    assert ids["guide/clients.md#timeouts"].text.strip() == "The default is ten seconds."
    assert ids["advanced/clients.md"].title == "Client timeouts"  # the lead section: the nav title
    assert yaml.safe_load((target / "project.yaml").read_text())["corpus"] == {"exclude": ["drafts/**"]}

    # later loads leave out what init left out; any other unlisted page is still refused
    (target / "corpus" / "drafts").mkdir()
    (target / "corpus" / "drafts" / "next.md").write_text("# Next\n")
    assert main(["--root", str(target), "sections"]) == 0
    out = capsys.readouterr().out
    assert "advanced/clients.md" in out and "not read: 1 file(s)\n  drafts/next.md: excluded by 'drafts/**'" in out
    (target / "corpus" / "guide" / "new.md").write_text("# New\n")
    with pytest.raises(CorpusError, match="^guide/new.md: on disk but not in manifest.yaml$"):
        load_project(target)


def test_a_page_listed_but_excluded_is_refused_naming_the_glob(tmp_path, site):
    target = tmp_path / "project"
    init_project(target, [site / "docs"], selection=selection_of(exclude=["drafts"]))
    about = target / "project.yaml"
    about.write_text(about.read_text().replace("- drafts", "- guide/*.md"))
    with pytest.raises(CorpusError) as caught:
        load_project(target)
    assert str(caught.value) == (
        "guide/clients.md: listed in manifest.yaml but excluded by 'guide/*.md' (corpus.exclude) in project.yaml"
    )


def test_init_with_include_globs_takes_only_what_they_match(tmp_path, site):
    done = init_project(tmp_path / "p", [site / "docs"], selection=selection_of(include=["advanced/**"]))
    assert done.documents == ("advanced/index.md", "advanced/clients.md", "advanced/retry-policy.md")
    assert Skipped("index.md", "matches no corpus.include glob ('advanced/**')") in done.skipped


def test_init_refuses_a_malformed_glob_in_one_line(tmp_path, site, capsys):
    code = main(["init", str(tmp_path / "p"), "--from", str(site / "docs"), "--exclude", "../x"])
    err = capsys.readouterr().err
    assert code != 0 and "corpus.exclude[0]: '../x' must not have an empty, '.' or '..' folder" in err
    assert not (tmp_path / "p").exists()


def test_an_unreadable_mkdocs_yml_is_a_note_and_titles_come_from_file_names(tmp_path, site):
    (site / "mkdocs.yml").write_text("nav: [\n")
    done = init_project(tmp_path / "p", [site / "docs"], selection=selection_of(exclude=["drafts"]))
    assert done.notes[0].startswith("mkdocs.yml (above docs/): not valid YAML")
    titles = {e.file: e.title for e in load_project(tmp_path / "p").corpus.entries}
    assert titles["advanced/index.md"] == "Advanced" and titles["guide/clients.md"] == "Clients"


def test_a_file_named_on_the_command_line_is_held_to_the_globs_too(tmp_path, site):
    docs = site / "docs"
    done = init_project(
        tmp_path / "p", [docs / "index.md", docs / "drafts" / "wip.md"], selection=selection_of(exclude=["wip.md"])
    )
    assert done.documents == ("index.md",)
    assert done.skipped == (Skipped("wip.md", "excluded by 'wip.md' (corpus.exclude)"),)
