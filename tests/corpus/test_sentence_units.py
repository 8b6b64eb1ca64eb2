"""Every sentence unit of every committed project reads as a sentence, not as markup: no MkDocs
block markup (admonitions, collapsibles, tabs, mkdocstrings directives), no attribute list, no
raw ``[text](url)``; and no unit mixes prose with a code block. The projects are the root one
and every one pytest's ``ragcontract_projects`` names (``pyproject.toml``), so a project added
there is held to the same rule. The code oracle is independent of the Markdown format: a plain
scan for the lines between fence markers in each corpus file."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from rag_contract.corpus.sections import CODE, KINDS
from rag_contract.index.store import Index, load_index
from rag_contract.project import Paths
from tests.support import ROOT

# Markup a reader never sees, as it would survive into a prose unit (whitespace collapsed).
PROSE_MARKUP = {
    "admonition": re.compile(r"(?<![\w`])(?:!!!|\?\?\?\+?)\s+[a-z][\w-]*"),
    "mkdocstrings directive": re.compile(r"(?<![\w`]):::\s+[\w.]+"),
    "content tab": re.compile(r"(?<![\w`])===\+?\s+\""),
    "attribute list": re.compile(r"\{:|\{\s*[#.][\w-]+[^}]*\}"),
    "raw link": re.compile(r"!?\[[^\]]+\]\([^)]*\)"),
}
# The same markup as a line of a code unit would hold it (code keeps its lines).
CODE_MARKUP = re.compile(r"^\s*(?:(?:!!!|\?\?\?\+?)\s+[a-z]|:::\s+\w|===\+?\s+\")", re.MULTILINE)
_CODE_SPAN = re.compile(r"(`+)(?:(?!\1).)+\1")
_FENCE = re.compile(r"^\s*(`{3,}|~{3,})")
MIN_CODE_LINE = 12  # a shorter code line ("pass", "})") may well be a phrase of prose


def project_roots(config: pytest.Config) -> list[Path]:
    return [ROOT, *(ROOT / extra for extra in config.getini("ragcontract_projects"))]


def code_lines(corpus: Path) -> set[str]:
    """Every line between fence markers in any Markdown file of ``corpus``, stripped."""
    lines: set[str] = set()
    for path in sorted(corpus.glob("*.md")):
        fence: str | None = None
        for line in path.read_text(encoding="utf-8").splitlines():
            m = _FENCE.match(line)
            if fence is None:
                fence = m.group(1) if m else None
            elif m and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence) and not line.strip(" `~"):
                fence = None
            else:
                lines.add(line.strip())
    return lines


@pytest.fixture(scope="module")
def indexes(request) -> dict[str, tuple[Index, set[str]]]:
    return {
        str(r.relative_to(ROOT)): (load_index(Paths(r).index), code_lines(Paths(r).corpus))
        for r in project_roots(request.config)
    }


def test_both_committed_projects_are_checked(indexes):
    assert {".", "examples/starlette-docs"} <= set(indexes)


def test_no_unit_of_any_project_quotes_mkdocs_markup_or_a_raw_link(indexes):
    found = []
    for name, (index, _) in indexes.items():
        for s in index.sentences:
            if getattr(s, "kind", None) == CODE:
                if CODE_MARKUP.search(s.text):
                    found.append((name, s.section_id, s.position, "block markup in code", s.text[:80]))
                continue
            prose = _CODE_SPAN.sub("", s.text)
            found += [
                (name, s.section_id, s.position, what, s.text[:80])
                for what, rule in PROSE_MARKUP.items()
                if rule.search(prose)
            ]
    assert found == []


def test_every_unit_has_a_kind_and_none_mixes_prose_and_a_code_block(indexes):
    mixed = []
    for name, (index, code) in indexes.items():
        long_code = {line for line in code if len(line) >= MIN_CODE_LINE}
        for s in index.sentences:
            assert s.kind in KINDS, (name, s.section_id, s.position, s.kind)
            if s.kind == CODE:
                # a code unit is made of code lines only: no prose sentence rode along
                strays = [ln for ln in s.text.splitlines() if ln.strip() and ln.strip() not in code]
                if strays:
                    mixed.append((name, s.section_id, s.position, "prose in a code unit", strays[0][:80]))
            else:
                # a prose unit quotes no line of a code block (code spans aside: those are prose's own)
                prose = f" {' '.join(_CODE_SPAN.sub('', s.text).split())} "
                hits = [line for line in long_code if f" {' '.join(line.split())} " in prose]
                if hits:
                    mixed.append((name, s.section_id, s.position, "code in a prose unit", hits[0][:80]))
    assert mixed == []


def test_the_oracles_catch_what_they_guard_against():
    """Each rule above turns red on the unit it is there for."""
    assert PROSE_MARKUP["admonition"].search("!!! note The `status_code` parameter is not supported.")
    assert PROSE_MARKUP["admonition"].search('??? abstract "API Reference" ::: starlette.applications.Starlette')
    assert PROSE_MARKUP["mkdocstrings directive"].search("API Reference ::: starlette.testclient.TestClient options")
    assert PROSE_MARKUP["content tab"].search('=== "Do" Wrap the app like this.')
    assert PROSE_MARKUP["attribute list"].search("Wrap the app { #wrapping } like this.")
    assert PROSE_MARKUP["attribute list"].search("Wrap the app like this. {: .note }")
    assert PROSE_MARKUP["raw link"].search("You can learn more about it [here](lifespan.md#running).")
    assert not PROSE_MARKUP["content tab"].search(_CODE_SPAN.sub("", "`=== 1 failed, 435 passed ===` is shown."))
    assert CODE_MARKUP.search("app = Starlette()\n!!! note")
    assert not CODE_MARKUP.search("x = a != b")
