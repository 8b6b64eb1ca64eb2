"""action.yml, the gate as a step of another repository's workflow: what actionlint does not check
(it reads action metadata only where a workflow uses it, and not the expressions inside), and the
action's commands run as written on the cases the pull-request run (tests/plugin/test_workflow.py)
does not reach: a push with no base, a project below the repository's root, the install line."""

from __future__ import annotations

import os
import re
import stat
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.support import ROOT

ACTION = yaml.safe_load((ROOT / "action.yml").read_text(encoding="utf-8"))
STEPS = {step.get("name", step.get("uses")): step for step in ACTION["runs"]["steps"]}


def test_every_expression_names_an_input_the_action_declares_and_no_command_holds_one():
    text = (ROOT / "action.yml").read_text(encoding="utf-8")
    named = set(re.findall(r"\binputs\.([A-Za-z0-9_-]+)", text))
    assert named == set(ACTION["inputs"]), named ^ set(ACTION["inputs"])
    for step in ACTION["runs"]["steps"]:
        if "run" in step:
            assert step["shell"] == "bash" and "${{" not in step["run"], step
    assert ACTION["runs"]["using"] == "composite"


def test_the_guide_and_the_workflow_give_the_action_only_inputs_it_declares():
    guide = (ROOT / "docs" / "own-documents.md").read_text(encoding="utf-8")
    (ci,) = [block for block in re.findall(r"```yaml\n(.*?)```", guide, re.DOTALL) if "jobs:" in block]
    workflow = yaml.safe_load((ROOT / ".github" / "workflows" / "gate.yml").read_text(encoding="utf-8"))
    uses = [
        step
        for steps in (yaml.safe_load(ci)["jobs"]["gate"]["steps"], workflow["jobs"]["gate"]["steps"])
        for step in steps
        if step.get("uses", "").startswith(("./", "OWNER/rag-contract@"))
    ]
    assert len(uses) == 2, uses
    for step in uses:
        assert set(step.get("with", {})) <= set(ACTION["inputs"]), step


def _run(step: dict, cwd: Path, tmp_path: Path, path: str = "", **env: str) -> subprocess.CompletedProcess[str]:
    github_env = tmp_path / "github-env"
    github_env.touch()
    runner_temp = tmp_path / "runner"
    runner_temp.mkdir(exist_ok=True)
    full = {**os.environ, "GITHUB_ENV": str(github_env), "RUNNER_TEMP": str(runner_temp), **env}
    if path:
        full["PATH"] = f"{path}{os.pathsep}{os.environ['PATH']}"
    return subprocess.run(
        ["bash", "-eo", "pipefail", "-c", step["run"]], cwd=cwd, env=full, capture_output=True, text=True, timeout=60
    )


def _git_repo(path: Path) -> Path:
    path.mkdir(parents=True)
    for args in (
        ["init", "-q"],
        ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty", "-m", "x"],
    ):
        subprocess.run(["git", "-C", str(path), *args], check=True)
    return path


def test_without_a_base_the_diff_step_reports_nothing_and_leaves_no_base_behind(tmp_path):
    repo = _git_repo(tmp_path / "repo")
    stale = tmp_path / "runner" / "rag-contract-base"
    stale.mkdir(parents=True)  # an earlier use of the action in the same job left one
    done = _run(STEPS["Quality diff against the merge-base"], repo, tmp_path, BASE_SHA="")
    assert done.returncode == 0, done.stderr
    assert "without a rank report" in done.stdout
    assert not stale.exists() and (tmp_path / "github-env").read_text() == ""


def test_a_project_below_the_repository_root_is_gated_without_a_rank_report(tmp_path):
    # rag-contract diff measures a base revision in a worktree of the repository's root
    repo = _git_repo(tmp_path / "repo")
    (repo / "docs-project").mkdir()
    head = subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    done = _run(STEPS["Quality diff against the merge-base"], repo / "docs-project", tmp_path, BASE_SHA=head)
    assert done.returncode == 0, done.stderr
    assert "::notice::The project is not at the repository's root" in done.stdout


@pytest.mark.parametrize(("extras", "package"), [("", "{path}"), ("dev", "{path}[dev]")])
def test_the_install_step_installs_the_action_checkout_with_the_lock(tmp_path, extras, package):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    python = bin_dir / "python"  # records what pip would be asked for
    python.write_text('#!/bin/sh\nprintf "%s\\n" "$@" > "$ARGS_OUT"\n')
    python.chmod(python.stat().st_mode | stat.S_IEXEC)
    out = tmp_path / "args"
    done = _run(
        STEPS["Install rag-contract"],
        tmp_path,
        tmp_path,
        str(bin_dir),
        ACTION_PATH=str(ROOT),
        EXTRAS=extras,
        ARGS_OUT=str(out),
    )
    assert done.returncode == 0, done.stderr
    args = out.read_text().splitlines()
    assert args == [
        "-m",
        "pip",
        "install",
        "--quiet",
        "-c",
        f"{ROOT}/requirements.lock",
        package.format(path=ROOT),
        "pytest",
    ]
