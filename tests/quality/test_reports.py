"""Committed numbers cannot drift from the commands that produce them.

retrieval.json and answers.json are held by the gate (report/retrieval, report/answers);
this file holds the calibration, the abstention report and plot, and the README's generated tables.
"""

from __future__ import annotations

import json

import pytest

from rag_contract.quality.abstention import curve, svg
from rag_contract.quality.calibration import calibrate
from tools.readme import RENDERERS, render_readme


@pytest.fixture(scope="module")
def calibration(project, index):
    return calibrate(project, index)


def test_calibration_report_matches_what_the_command_produces(calibration, root):
    committed = json.loads((root / "eval" / "results" / "calibration.json").read_text())
    assert committed == json.loads(json.dumps(calibration)), (
        "rerun `rag-contract calibrate --write-thresholds` and commit eval/results/calibration.json"
    )


def test_the_committed_parameters_are_the_full_fit(calibration, project):
    """No hand-tuned number: every fitted value in eval/thresholds.yaml is what calibrate fits."""
    t = project.thresholds
    fitted = calibration["params"]
    assert dict(t.retrieval.fusion) == fitted["retrieval.fusion"]
    assert t.drafting.evidence_lexical_weight == fitted["drafting.evidence_lexical_weight"]
    assert dict(t.relevance.weights) == fitted["relevance.weights"]
    assert t.relevance.answer_at == fitted["relevance.answer_at"]
    assert t.relevance.refuse_below == fitted["relevance.refuse_below"]
    assert t.retrieval.serving_mode == "fused"


def test_out_of_fold_figures_come_from_parameters_fitted_without_the_question(calibration):
    # five fits on four fifths each, none identical to the full fit: held-out scoring is real
    assert len(calibration["fold_params"]) == 5
    assert all(p != calibration["params"] for p in calibration["fold_params"])
    folds = {q["fold"] for q in calibration["questions"]}
    assert folds == set(range(5))


def test_the_answers_report_is_the_in_sample_calibration(calibration, root):
    """eval-answers replays the committed drafts under the committed fit: the same states."""
    answers = json.loads((root / "eval" / "results" / "answers.json").read_text())
    states = {r["id"]: r["state"] for r in answers["questions"]}
    assert states == {q["id"]: q["in_sample_state"] for q in calibration["questions"]}


def test_abstention_report_and_plot_match_the_calibration(root):
    committed_calibration = json.loads((root / "eval" / "results" / "calibration.json").read_text())
    report = curve(committed_calibration)
    committed = json.loads((root / "eval" / "results" / "abstention.json").read_text())
    assert committed == report, "rerun `rag-contract calibrate` and commit eval/results/abstention.json"
    assert (root / "docs" / "abstention.svg").read_text() == svg(report)


def test_readme_tables_are_generated_from_the_committed_reports(root):
    text = (root / "README.md").read_text()
    for name in RENDERERS:
        assert f"<!-- generated:{name} -->" in text, name
    assert render_readme(root, text) == text, "run `python -m tools.readme` and commit README.md"
