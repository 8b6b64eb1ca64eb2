"""The gate plugin through pytest itself: one item per check with its paragraph and JUnit
properties, and a thresholds file the loader refuses as one red ``load`` item.

pytest runs in this process (``pytester``), on a copy of the project made in pytester's
directory, which is also the run's working directory.
"""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from tools.project_copy import copy_project, edit_thresholds


@pytest.fixture
def pytester_copy(pytester: pytest.Pytester, root) -> Path:
    """The copy made in pytester's directory, the working directory of an in-process run."""
    return copy_project(root, pytester.path)


@dataclass(frozen=True)
class GateRun:
    returncode: int
    stdout: str


def _pytest_gate(pytester: pytest.Pytester, root: Path, *extra: str, project: Path | None = None) -> GateRun:
    """``pytest -m gate`` on the copy at ``root`` (pytester's directory), in this process; on
    ``project``'s thresholds file instead of ``root``'s when given (a project below ``root``)."""
    assert Path.cwd() == root == pytester.path
    gated = root if project is None else project
    result = pytester.runpytest_inprocess(
        "-m",
        "gate",
        "-p",
        "no:cacheprovider",
        "-q",
        "--benchmark-disable",
        f"--rootdir={root}",
        "-c",
        str(root / "pyproject.toml"),
        str(gated / "eval" / "thresholds.yaml"),
        *extra,
    )
    return GateRun(int(result.ret), str(result.stdout))


def test_pytest_reports_one_item_per_check_with_a_paragraph_and_junit_properties(pytester, pytester_copy):
    edit_thresholds(pytester_copy, lambda t: t["retrieval"]["ceilings"].__setitem__("q01", 1))
    junit = pytester_copy / "gate.junit.xml"
    out = _pytest_gate(pytester, pytester_copy, f"--junitxml={junit}")
    assert out.returncode == 1, out.stdout[-3000:]
    assert re.search(r"1 failed, \d+ passed", out.stdout), out.stdout[-1500:]
    assert "[retrieval/ceiling/q01] q01 " in out.stdout and "Outranked by:" in out.stdout
    assert "Traceback" not in out.stdout
    cases = {c.get("name"): c for c in ET.parse(junit).getroot().iter("testcase")}
    props = {p.get("name"): p.get("value") for p in cases["retrieval/ceiling/q01"].iter("property")}
    report = json.loads((pytester_copy / "eval" / "results" / "retrieval.json").read_text())
    measured = next(q["rank"] for q in report["modes"][report["serving_mode"]]["questions"] if q["id"] == "q01")
    assert measured > 1 and props["ceiling"] == "1" and props["rank"] == str(measured)
    ids = set(cases)
    assert {
        "retrieval/floor/recall@1",
        "index/freshness",
        "report/retrieval",
        "ratelimit/probe",
        "budget/latency",
    } <= ids


def test_an_allowance_the_loader_must_refuse_fails_the_gate_at_load(pytester, pytester_copy):
    edit_thresholds(pytester_copy, lambda t: t["rate_limit"].__setitem__("max_requests_per_minute", 400))
    out = _pytest_gate(pytester, pytester_copy)
    assert out.returncode == 1
    assert "1 failed" in out.stdout
    assert "rate_limit.max_requests_per_minute: 400/min" in out.stdout and "quarter" in out.stdout


XSD = Path(__file__).with_name("junit-xunit1.xsd")


def test_on_github_a_failure_gives_a_summary_an_annotation_on_its_line_and_valid_xunit1(
    pytester, pytester_copy, monkeypatch
):
    from lxml import etree

    edit_thresholds(pytester_copy, lambda t: t["retrieval"]["ceilings"].__setitem__("q01", 1))
    summary, junit = pytester_copy / "summary.md", pytester_copy / "gate.junit.xml"
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    out = _pytest_gate(pytester, pytester_copy, "-k", "retrieval/ceiling or floor", f"--junitxml={junit}")
    assert out.returncode == 1
    lines = (pytester_copy / "eval" / "thresholds.yaml").read_text().splitlines()
    line = lines.index("    q01: 1") + 1
    errors = [ln for ln in out.stdout.splitlines() if ln.startswith("::error ")]
    assert errors == [errors[0]] and errors[0].startswith(
        f"::error file=eval/thresholds.yaml,line={line},title=gate%3A retrieval/ceiling/q01::q01 "
    )
    text = summary.read_text()
    assert text.startswith("### rag-contract gate failed: 1 failed")
    report = json.loads((pytester_copy / "eval" / "results" / "retrieval.json").read_text())
    rank = next(q["rank"] for q in report["modes"][report["serving_mode"]]["questions"] if q["id"] == "q01")
    assert rank > 1 and f"| `retrieval/ceiling/q01` | rank {rank}, ceiling 1 |" in text
    schema = etree.XMLSchema(etree.parse(str(XSD)))
    assert schema.validate(etree.parse(str(junit))), schema.error_log
    # the choice matters: the same report is not valid xunit2 (no <properties> in a testcase)
    xunit2 = etree.parse(str(XSD))
    seq = xunit2.find(".//{*}element[@name='testcase']/{*}complexType/{*}sequence")
    seq.remove(seq[0])
    assert not etree.XMLSchema(xunit2).validate(etree.parse(str(junit)))


def test_a_summary_that_cannot_be_written_is_one_line_and_the_verdict_stands(pytester, pytester_copy):
    out = _pytest_gate(pytester, pytester_copy, "-k", "floor", f"--ragcontract-summary={pytester_copy}")
    assert out.returncode == 0, out.stdout[-2000:]
    assert "rag-contract: CI summary not produced: IsADirectoryError" in out.stdout
    assert "Traceback" not in out.stdout


def test_unused_ceilings_count_what_was_collected_and_the_update_option_ratchets(pytester, pytester_copy):
    def loosen_and_orphan(t):
        t["retrieval"]["ceilings"]["q01"] = 9
        t["retrieval"]["ceilings"]["q999"] = 4

    committed = yaml.safe_load((pytester_copy / "eval" / "thresholds.yaml").read_text())["retrieval"]["ceilings"]
    edit_thresholds(pytester_copy, loosen_and_orphan)
    out = _pytest_gate(pytester, pytester_copy, "-k", "retrieval/ceiling/q01", "--ragcontract-update")
    # only q01's item ran; the 181 deselected ceilings were collected, so only q999 is unused
    assert "1 unused ceiling entry in eval/thresholds.yaml (no collected item holds them): q999" in out.stdout
    # the update puts q01 back at its measured rank + 2: the committed ceiling
    assert f"retrieval.ceilings.q01: 9 -> {committed['q01']}" in out.stdout
    assert "retrieval.ceilings.q999: 4 -> None" in out.stdout
    ceilings = yaml.safe_load((pytester_copy / "eval" / "thresholds.yaml").read_text())["retrieval"]["ceilings"]
    assert ceilings["q01"] == committed["q01"] and "q999" not in ceilings


def _first_below_the_top(project: Path) -> str:
    """A question the committed report ranks below first: a ceiling of 1 fails it."""
    report = json.loads((project / "eval" / "results" / "retrieval.json").read_text())
    return next(q["id"] for q in report["modes"][report["serving_mode"]]["questions"] if (q["rank"] or 99) > 1)


def test_a_further_project_is_gated_as_its_own_file_and_its_regression_is_its_own_red_item(
    pytester, pytester_copy, root
):
    second = copy_project(root / "examples" / "starlette-docs", pytester_copy / "second")
    qid = _first_below_the_top(second)
    edit_thresholds(second, lambda t: t["retrieval"]["ceilings"].__setitem__(qid, 1))
    out = _pytest_gate(
        pytester, pytester_copy, "-o", "ragcontract_projects=second", str(second / "eval" / "thresholds.yaml")
    )
    assert out.returncode == 1, out.stdout[-3000:]
    assert re.search(r"1 failed, \d+ passed", out.stdout), out.stdout[-1500:]
    assert f"FAILED second/eval/thresholds.yaml::retrieval/ceiling/{qid}" in out.stdout
    assert f"[retrieval/ceiling/{qid}] {qid} " in out.stdout


def test_the_project_root_option_gates_another_directory(pytester, pytester_copy, root):
    second = copy_project(root / "examples" / "starlette-docs", pytester_copy / "second")
    qid = _first_below_the_top(second)
    edit_thresholds(second, lambda t: t["retrieval"]["ceilings"].__setitem__(qid, 1))
    out = _pytest_gate(pytester, pytester_copy, "--ragcontract-root=second", project=second)
    assert out.returncode == 1 and re.search(r"1 failed, \d+ passed", out.stdout), out.stdout[-1500:]
    assert f"retrieval/ceiling/{qid}" in out.stdout
