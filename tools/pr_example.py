"""A pull request's change in miniature: one question regresses past its ceiling, another improves.

The change is to annotations only (``expected`` sections in eval/questions.yaml), so it moves
exactly two ranks and no vector: ``q23`` loses ``rfc9110#13.1.3`` (rank 1 -> 4, ceiling 3; its
evidence, which that section holds, goes with it) and ``q17`` gains ``rfc8259#1`` (rank 3 -> 1, so
its ceiling can tighten from 5 to 3). ``remeasure``
then writes the reports as ``rag-contract eval`` and ``eval-answers`` would, as an author commits
them.

``example_summary(root)`` applies it to a temporary copy of the project, runs every gate check
except the timed one (its figure is the machine's, not the change's), and renders the step summary
the plugin writes, against the committed reports: the README's "In a pull request" block. The
workflow test applies the same change in a temporary git repository.
"""

from __future__ import annotations

import json
import re
import tempfile
from pathlib import Path

from rag_contract.quality.ci_report import FailedItem, step_summary
from rag_contract.quality.gate import GateContext, checks, run_check
from rag_contract.quality.report_diff import ReportSet, diff_reports, load_report_set
from tools.project_copy import copy_project

REGRESSED, DROPPED = "q23", "rfc9110#13.1.3"
IMPROVED, ADDED = "q17", "rfc8259#1"
# (base rank, head rank, committed ceiling): what the tests of the workflow expect to see
REGRESSED_RANKS = (1, 4, 3)
IMPROVED_RANKS = (3, 1, 5)


def _edit_expected(text: str, qid: str, edit, drop_evidence: bool = False) -> str:
    block = re.search(rf"^  - id: {qid}\n(?:(?!  - id: ).*\n)*", text, re.M)
    if block is None:
        raise KeyError(f"no question {qid} in the question file")
    line = re.search(r"^    expected: \[(.*)\]$", block.group(0), re.M)
    if line is None:
        raise KeyError(f"{qid} has no one-line expected list")
    sections = [s.strip() for s in line.group(1).split(",")]
    new_block = block.group(0).replace(line.group(0), f"    expected: [{', '.join(edit(sections))}]")
    if drop_evidence:  # the evidence quoted the section dropped
        new_block = re.sub(r"^    evidence: .*\n", "", new_block, flags=re.M)
    return text[: block.start()] + new_block + text[block.end() :]


def regress_and_improve(root: Path, regress: bool = True, improve: bool = True) -> None:
    """Edit eval/questions.yaml under ``root``: the regression, the improvement, or both."""
    path = Path(root) / "eval" / "questions.yaml"
    text = path.read_text(encoding="utf-8")
    if regress:
        text = _edit_expected(text, REGRESSED, lambda s: [x for x in s if x != DROPPED], drop_evidence=True)
    if improve:
        text = _edit_expected(text, IMPROVED, lambda s: [*s, ADDED])
    path.write_text(text, encoding="utf-8")


def remeasure(ctx: GateContext) -> None:
    """Write eval/results/retrieval.json and answers.json as their commands would."""
    ctx.project.paths.result("retrieval.json").write_text(ctx.retrieval.to_json())
    ctx.project.paths.result("answers.json").write_text(json.dumps(ctx.answers, indent=1, ensure_ascii=False) + "\n")


def example_summary(root: Path) -> str:
    with tempfile.TemporaryDirectory() as tmp:
        copy = copy_project(Path(root), Path(tmp))
        regress_and_improve(copy)
        ctx = GateContext(copy)
        remeasure(ctx)
        failures, passed = [], 0
        for check in checks(ctx):
            if check.needs_measure:
                continue
            outcome = run_check(check, ctx)
            if outcome.passed:
                passed += 1
            else:
                failures.append(FailedItem(check.id, outcome.message, outcome.figures))
        diff = diff_reports(
            load_report_set(Path(root) / "eval" / "results"), ReportSet(ctx.retrieval.as_dict(), ctx.answers)
        )
    return step_summary(failures, passed, diff, "base", max_rows=10)
