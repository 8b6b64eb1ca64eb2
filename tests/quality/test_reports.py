"""Committed numbers cannot drift from the commands that produce them.

retrieval.json and answers.json are held by the gate (report/retrieval, report/answers);
this file holds the abstention report and plot, and the README's generated tables.
"""

from __future__ import annotations

import json

from rag_contract.quality.abstention import curve, svg
from tools.readme import RENDERERS, render_readme


def test_abstention_report_and_plot_match_what_the_command_produces(project, index, root):
    report = curve(project, index)
    committed = json.loads((root / "eval" / "results" / "abstention.json").read_text())
    assert committed == report, "rerun `rag-contract abstention` and commit eval/results/abstention.json"
    assert (root / "docs" / "abstention.svg").read_text() == svg(report)


def test_the_committed_threshold_is_the_lowest_with_no_false_answers(project, root):
    """The README says why the threshold is where it is; this holds the README to the curve."""
    committed = json.loads((root / "eval" / "results" / "abstention.json").read_text())
    safe = [r["threshold"] for r in committed["rows"] if r["false_answers"] == 0]
    assert project.thresholds.drafting.extractive_min_confidence == min(safe)


def test_readme_tables_are_generated_from_the_committed_reports(root):
    text = (root / "README.md").read_text()
    for name in RENDERERS:
        assert f"<!-- generated:{name} -->" in text, name
    assert render_readme(root, text) == text, "run `python -m tools.readme` and commit README.md"
