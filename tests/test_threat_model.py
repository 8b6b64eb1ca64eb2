"""docs/threat-model.md names, for each threat, the tests that exercise its control. Each named
test must exist: a renamed or deleted test fails here, so the document cannot point at nothing."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from tests.support import ROOT

DOC = ROOT / "docs" / "threat-model.md"
NODE_ID = re.compile(r"`(tests/[\w/]+\.py)::(\w+)`")


def named_tests(text: str) -> list[tuple[str, str]]:
    return NODE_ID.findall(text)


def defined_tests(path: Path) -> set[str]:
    """Test functions a file defines, at module level or in a class (what pytest collects)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name.startswith("test_"):
            names.add(node.name)
    return names


def missing(text: str, root: Path) -> list[str]:
    gone = []
    for file, test in named_tests(text):
        path = root / file
        if not path.is_file() or test not in defined_tests(path):
            gone.append(f"{file}::{test}")
    return gone


def test_every_threat_names_a_test_and_a_residual_risk():
    rows = [line for line in DOC.read_text(encoding="utf-8").splitlines() if re.match(r"\| \d+ \|", line)]
    assert len(rows) >= 15
    for row in rows:
        cells = [c.strip() for c in row.strip("|").split("|")]
        assert len(cells) == 5, row
        assert named_tests(cells[3]), f"threat {cells[0]} names no test"
        assert cells[4], f"threat {cells[0]} states no residual risk"


def test_every_named_test_exists():
    assert missing(DOC.read_text(encoding="utf-8"), ROOT) == []


@pytest.mark.parametrize(
    "node",
    [
        "`tests/web/test_admission.py::test_a_test_that_was_renamed`",
        "`tests/web/test_no_such_file.py::test_anything`",
    ],
)
def test_a_name_that_no_longer_exists_is_reported(node):
    assert missing(f"| 1 | x | y | {node} | z |", ROOT) == [node.strip("`")]
