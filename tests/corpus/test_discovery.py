"""Corpus discovery: the walk of a documents folder and every file it skips with its reason,
the project.yaml globs (matching and the refusal of a malformed one, naming the key and the
rule), the MkDocs navigation found where MkDocs keeps it, and corpus paths in the manifest."""

from __future__ import annotations

from pathlib import Path

import pytest

from rag_contract.config.corpus_selection import (
    Selection,
    SelectionError,
    load_selection,
    matches,
    parse_selection,
    selection_of,
)
from rag_contract.corpus.discovery import Skipped, discover
from rag_contract.corpus.site_navigation import find_navigation, nav_pages
from rag_contract.corpus.sources import CorpusError, read_manifest


def write(root: Path, files: dict[str, str | bytes]) -> Path:
    for name, content in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")
    return root


@pytest.mark.parametrize(
    ("glob", "path", "expected"),
    [
        ("drafts/**", "drafts/a/b.md", True),
        ("drafts/**", "guide/drafts.md", False),
        ("drafts", "drafts/wip.md", True),  # a folder matched: everything in it
        ("drafts/", "drafts/wip.md", True),
        ("_*.md", "guide/_partial.md", True),  # a bare name: in any folder
        ("*.md", "guide/clients.md", True),
        ("guide/*.md", "guide/clients.md", True),
        ("guide/*.md", "guide/deep/clients.md", False),  # * stays within a folder
        ("**/index.md", "index.md", True),  # ** may be no folder at all
        ("**/index.md", "a/b/index.md", True),
        ("guide/**/x.md", "guide/x.md", True),
        ("v?.md", "v1.md", True),
        ("v?.md", "v10.md", False),
        ("[!a]*.md", "b.md", True),
        ("[!a]*.md", "a.md", False),
        ("notes.md", "guide/notes.md.bak", False),
    ],
)
def test_globs_match_paths_relative_to_the_documents_folder(glob, path, expected):
    assert matches(glob, path) is expected


def test_exclude_wins_over_include_and_each_refusal_names_its_glob():
    selection = Selection(include=("guide/**",), exclude=("**/_*.md",))
    assert selection.refusal("guide/clients.md") is None
    assert selection.refusal("guide/_partial.md") == "excluded by '**/_*.md' (corpus.exclude)"
    assert selection.refusal("index.md") == "matches no corpus.include glob ('guide/**')"
    assert Selection().refusal("anything/at/all.md") is None


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("corpus: [drafts]\n", "project.yaml: corpus: must be a mapping with the keys ['include', 'exclude']"),
        (
            "corpus:\n  exclude: drafts/**\n",
            "project.yaml: corpus.exclude: must be a list of globs (as in ['drafts/**'])",
        ),
        ("corpus:\n  skip: [a]\n", "project.yaml: corpus.skip: unknown key (known: ['include', 'exclude'])"),
        ("corpus:\n  exclude: [a, 3]\n", "project.yaml: corpus.exclude[1]: 3 must be a non-empty glob (text)"),
        ("corpus:\n  include: ['']\n", "project.yaml: corpus.include[0]: '' must be a non-empty glob (text)"),
        (
            "corpus:\n  exclude: [/etc/x.md]\n",
            "project.yaml: corpus.exclude[0]: '/etc/x.md' must be relative to the documents folder (no leading /)",
        ),
        (
            "corpus:\n  exclude: ['../x.md']\n",
            "project.yaml: corpus.exclude[0]: '../x.md' must not have an empty, '.' or '..' folder",
        ),
        (
            "corpus:\n  exclude: ['a\\b.md']\n",
            "project.yaml: corpus.exclude[0]: 'a\\\\b.md' must use / between folders (a backslash is not allowed)",
        ),
        (
            "corpus:\n  include: ['docs**/x.md']\n",
            "project.yaml: corpus.include[0]: 'docs**/x.md' '**' must be a whole folder name (as in 'a/**/b.md')",
        ),
        (
            "corpus:\n  include: ['[ab.md']\n",
            "project.yaml: corpus.include[0]: '[ab.md' has an unclosed '[' (a character set)",
        ),
    ],
)
def test_a_malformed_glob_is_refused_at_load_naming_the_key_and_the_rule(tmp_path, text, message):
    (tmp_path / "project.yaml").write_text("name: x\ndescription: y\n" + text)
    with pytest.raises(SelectionError) as caught:
        load_selection(tmp_path / "project.yaml")
    assert str(caught.value) == message


def test_globs_read_from_project_yaml_and_absent_ones_select_everything(tmp_path):
    assert load_selection(tmp_path / "project.yaml") == Selection()
    (tmp_path / "project.yaml").write_text("name: x\ndescription: y\ncorpus:\n  exclude: [drafts/]\n")
    assert load_selection(tmp_path / "project.yaml") == Selection(exclude=("drafts",))
    assert parse_selection(None) == Selection()
    assert selection_of(["a/**"], []) == Selection(include=("a/**",))


def test_the_walk_keeps_sub_folders_and_lists_every_skipped_file_with_its_reason(tmp_path):
    docs = write(
        tmp_path / "docs",
        {
            "index.md": "# Home\n\nWelcome.\n",
            "guide/index.md": "# Guide\n\nRead on.\n",
            "advanced/index.md": "# Advanced\n\nFor experts.\n",
            "advanced/clients.md": "# Clients\n\n## Timeouts\n\nFive seconds.\n",
            "drafts/wip.md": "# WIP\n\nNot yet.\n",
            "img/diagram.png": b"\x89PNG\r\n",
            "empty.md": "  \n",
            "latin1.md": "caf\xe9".encode("latin-1"),
            "odd#name.md": "# Odd\n",
            ".cache/page.md": "# Cached\n",
            ".notes.md": "# Hidden\n",
            "LICENSE.md": "Licensed.",
        },
    )
    found = discover(docs, Selection(exclude=("drafts/**",)), ignore={"LICENSE.md"})
    assert [p.file for p in found.pages] == ["index.md", "advanced/clients.md", "advanced/index.md", "guide/index.md"]
    assert found.skipped == (
        Skipped(".cache/", "hidden folder, not walked"),
        Skipped(".notes.md", "hidden file"),
        Skipped("drafts/wip.md", "excluded by 'drafts/**' (corpus.exclude)"),
        Skipped("empty.md", "empty"),
        Skipped("img/diagram.png", "unsupported format: no format reads .png"),
        Skipped("latin1.md", "markdown: not UTF-8 text (byte 3); a Markdown file is expected"),
        Skipped("odd#name.md", "a '#' in its path would end its section ids' document part"),
    )


MKDOCS = """\
site_name: Team
docs_dir: docs
markdown_extensions:
  - pymdownx.emoji:
      emoji_index: !!python/name:material.extensions.emoji.twemoji
nav:
  - Home: index.md
  - Guide:
      - Getting started: guide/index.md
      - guide/clients.md
  - Advanced:
      - Overview: ./advanced/index.md
      - Client timeouts: advanced/clients.md#top
  - Source: https://example.org/team
"""


def test_mkdocs_yml_one_level_up_gives_nested_nav_titles_and_order(tmp_path):
    write(tmp_path, {"mkdocs.yml": MKDOCS, "docs/index.md": "x"})
    nav = find_navigation(tmp_path / "docs")
    assert nav.config == (tmp_path / "mkdocs.yml").resolve()
    assert dict(nav.titles) == {
        "index.md": "Home",
        "guide/index.md": "Getting started",
        "advanced/index.md": "Overview",
        "advanced/clients.md": "Client timeouts",
    }
    assert nav.order == ("index.md", "guide/index.md", "guide/clients.md", "advanced/index.md", "advanced/clients.md")
    assert nav.note == "mkdocs.yml (above docs/): 4 page title(s) and the page order from its nav"


def test_a_theme_custom_dir_under_the_pages_is_set_aside_as_one_skipped_folder(tmp_path):
    write(
        tmp_path,
        {
            "mkdocs.yml": "theme:\n  name: material\n  custom_dir: docs/overrides\nnav: [{Home: index.md}]\n",
            "docs/index.md": "# Home\n\nWelcome.\n",
            "docs/overrides/partials/nav.html": "<nav><a href='/'>Home</a></nav>",
        },
    )
    nav = find_navigation(tmp_path / "docs")
    assert nav.theme_dir == "overrides"
    found = discover(tmp_path / "docs", set_aside={nav.theme_dir: "theme templates"})
    assert [p.file for p in found.pages] == ["index.md"]
    assert found.skipped == (Skipped("overrides/", "theme templates, not walked"),)
    assert [p.file for p in discover(tmp_path / "docs").pages] == ["index.md", "overrides/partials/nav.html"]


def test_a_site_configuration_beside_the_pages_is_read_too(tmp_path):
    write(tmp_path, {"docs/mkdocs.yml": "nav:\n  - Start: a.md\n"})
    nav = find_navigation(tmp_path / "docs")
    assert dict(nav.titles) == {"a.md": "Start"} and nav.note.startswith("docs/mkdocs.yml: 1 page title(s)")


@pytest.mark.parametrize(
    ("files", "note"),
    [
        ({}, "no mkdocs.yml in docs/ or the folder above it: titles from file names"),
        (
            {"mkdocs.yml": "docs_dir: site-src\nnav: [{A: a.md}]\n"},
            "mkdocs.yml (above docs/): its docs_dir is 'site-src', not 'docs'; titles from file names",
        ),
        ({"mkdocs.yml": "nav: [\n"}, "mkdocs.yml (above docs/): not valid YAML"),
        ({"mkdocs.yml": b"nav: \xff\n"}, "mkdocs.yml (above docs/): not UTF-8 text (byte 5 is 0xff)"),
        ({"docs/mkdocs.yml": "site_name: x\n"}, "docs/mkdocs.yml: no nav; titles from file names"),
        ({"docs/mkdocs.yml": "- a\n"}, "docs/mkdocs.yml: not a site configuration (a mapping)"),
    ],
)
def test_an_absent_unreadable_or_foreign_site_configuration_is_a_note_not_silence(tmp_path, files, note):
    write(tmp_path, {"docs/a.md": "# A\n", **files})
    nav = find_navigation(tmp_path / "docs")
    assert nav.titles == {} and nav.order == ()
    assert nav.note.startswith(note)


def test_nav_pages_skip_links_and_keep_the_first_title_of_a_page():
    titles, order = nav_pages([{"A": "a.md"}, {"Again": "a.md"}, "b.md", {"Mail": "mailto:x@y"}, {"Abs": "/x"}])
    assert titles == {"a.md": "A"} and order == ("a.md", "b.md")


@pytest.mark.parametrize(
    ("file", "rule"),
    [
        ("../outside.md", "must not have an empty, '.' or '..' folder"),
        ("a//b.md", "must not have an empty, '.' or '..' folder"),
        ("/etc/passwd.txt", "must be a path relative to the corpus folder, with / between folders"),
        ("a\\b.md", "must be a path relative to the corpus folder, with / between folders"),
        ("a#b.md", "must not contain '#' (it ends a section id's document part)"),
    ],
)
def test_a_manifest_path_outside_the_corpus_or_breaking_ids_is_refused(tmp_path, file, rule):
    (tmp_path / "manifest.yaml").write_text(
        "files:\n  - {file: ok.md, title: t, source: s, retrieved: r, bytes: 1, sha256: x}\n"
        f"  - {{file: '{file}', title: t, source: s, retrieved: r, bytes: 1, sha256: x}}\n"
    )
    with pytest.raises(CorpusError) as caught:
        read_manifest(tmp_path)
    assert str(caught.value) == f"{tmp_path / 'manifest.yaml'}: files[1]: {file!r} {rule}"
