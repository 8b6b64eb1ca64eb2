"""A rate with no denominator is shown as n/a, never as 0.0: in the CLI and the README's tables."""

from __future__ import annotations

import json
import shutil

from rag_contract.quality.rate_text import rate_text
from tools import readme


def test_a_rate_of_nothing_is_not_applicable():
    assert rate_text(0.0, 0, ".2f") == "n/a"
    assert rate_text(0.0, 3, ".2f") == "0.00"
    assert rate_text(0.5952, 42, ".3f") == "0.595"
    assert rate_text(0.25, 4) == "0.25"


def test_the_readme_tables_show_n_a_where_there_are_no_refusals(tmp_path, root):
    results = tmp_path / "eval" / "results"
    shutil.copytree(root / "eval" / "results", results)
    answers = json.loads((results / "answers.json").read_text())
    answers.update(refusals=0, state_agreement=0.0, answered_unanswerable=0)
    (results / "answers.json").write_text(json.dumps(answers))
    row = readme.answers_table(tmp_path).splitlines()[4]
    assert "| n/a of 0 |" in row
    calibration = json.loads((results / "calibration.json").read_text())
    document, block = next(iter(calibration["out_of_fold"]["by_rfc"].items()))
    block["answers"].update(refusals=0, state_agreement=0.0, answered_unanswerable=[])
    (results / "calibration.json").write_text(json.dumps(calibration))
    rows = [line for line in readme.calibration_table(tmp_path).splitlines() if f"out of fold, {document} |" in line]
    assert rows and rows[0].endswith("| 0 of 0 | n/a |")
