"""The image is built and runs hardened; the README's run line, compose.yaml and the report agree.

The tests marked ``container`` build the image from this checkout and run it with
``tools.container.HARDENING`` (the README's flags, on the host's network: the app binds
127.0.0.1 itself). Without a reachable Docker daemon they skip, except under CI (``CI`` set),
where they fail: ``.ci/run`` sets the daemon up with ``.ci/docker-image``, and a CI job that
skipped them would pass without testing the image. A build that fails always fails.

The committed report (``eval/results/container.json``) holds figures that vary by machine and
storage driver, so it is held by its structure and bounds (``structure_errors``), not by equality
with a new run.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess

import pytest
import yaml

from tools import container
from tools.container import Checks, ContainerError

GOOD = Checks(
    health_serving=True,
    answer_status=200,
    index_version_header="abc",
    index_version_committed="abc",
    ask_status=200,
    burst=10,
    first_429_after=7,
    uid=10001,
    user="app",
    cap_eff="0000000000000000",
    no_new_privs=True,
    root_write_refused=True,
    tmp_write_refused=True,
)


def docker_unavailable(ci: bool) -> str | None:
    """Why the container tests cannot run here, or None when a daemon answers."""
    if shutil.which("docker") is None:
        reason = "no docker CLI on PATH"
    else:
        proc = subprocess.run(["docker", "info"], capture_output=True, text=True, timeout=60)
        if proc.returncode == 0:
            return None
        reason = "no Docker daemon answers (`docker info` failed)"
    if ci:
        pytest.fail(f"{reason}; run .ci/docker-image first -- CI is set, so this is a failure, not a skip")
    return reason + " (.ci/docker-image sets one up, as root)"


@pytest.fixture(scope="module")
def hardened(root) -> container.Run:
    reason = docker_unavailable(bool(os.environ.get("CI")))
    if reason is not None:
        pytest.skip(reason)
    container.build(root)
    return container.run_hardened(root)


# --- the image, built and run ---------------------------------------------------------------


@pytest.mark.container
@pytest.mark.slow
def test_the_hardened_container_answers(hardened):
    c = hardened.checks
    assert c.health_serving
    assert c.answer_status == 200 and c.ask_status == 200
    assert c.index_version_header == c.index_version_committed
    assert c.first_429_after is not None and c.first_429_after <= c.burst + 1


@pytest.mark.container
@pytest.mark.slow
def test_the_hardened_container_has_no_privilege_and_no_writable_path(hardened):
    c = hardened.checks
    assert (c.uid, c.user) == (10001, "app")
    assert int(c.cap_eff, 16) == 0 and c.no_new_privs
    assert c.root_write_refused and c.tmp_write_refused
    assert c.failures() == []


@pytest.mark.container
@pytest.mark.slow
def test_the_run_is_reported_within_the_bounds(hardened, record_property):
    rep = container.report(hardened)
    for name in ("image_size_mb", "create_s", "start_to_health_s", "run_to_health_s"):
        record_property(name, rep[name])
    print(container.render(rep))
    assert container.structure_errors(rep) == []


# --- skip or fail ----------------------------------------------------------------------------


def test_a_missing_daemon_fails_under_ci(monkeypatch):
    monkeypatch.setenv("PATH", "")
    with pytest.raises(pytest.fail.Exception, match="CI is set"):
        docker_unavailable(ci=True)
    assert "no docker CLI" in (docker_unavailable(ci=False) or "")


def test_a_failed_docker_step_raises_with_its_message(monkeypatch, tmp_path, root):
    fake = tmp_path / "docker"
    fake.write_text("#!/bin/sh\necho 'pull access denied for python' >&2\nexit 1\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(ContainerError, match="docker build failed .1.: pull access denied"):
        container.build(root)


# --- the checks turn red ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("change", "named"),
    [
        ({"health_serving": False}, "/health"),
        ({"answer_status": 503}, "/answer/q11"),
        ({"index_version_header": None}, "X-Index-Version"),
        ({"ask_status": 429}, "POST /ask"),
        ({"first_429_after": None}, "no 429"),
        ({"uid": 0}, "root"),
        ({"cap_eff": "00000000a80425fb"}, "capabilities"),
        ({"no_new_privs": False}, "NoNewPrivs"),
        ({"root_write_refused": False}, "root filesystem"),
        ({"tmp_write_refused": False}, "/tmp"),
    ],
)
def test_each_broken_check_is_named(change, named):
    assert GOOD.failures() == []
    failures = dataclasses.replace(GOOD, **change).failures()
    assert len(failures) == 1 and named in failures[0]


def _report(checks: Checks = GOOD, **figures) -> dict:
    rep = {
        "meta": {"date": "2026-01-01", "cpu_count": 2, "docker": "20.10"},
        "image": "rag-contract",
        "image_size_mb": 466.0,
        "base_image": {"name": "python:3.11-slim", "size_mb": 188.0, "stand_in": True},
        "storage_driver": "vfs",
        "create_s": 30.0,
        "start_to_health_s": 4.0,
        "run_to_health_s": 34.0,
        "checks": dataclasses.asdict(checks),
        "failures": checks.failures(),
    }
    return rep | figures


@pytest.mark.parametrize(
    ("rep", "named"),
    [
        (_report(image_size_mb=5000.0), "image size"),
        (_report(start_to_health_s=0.0, run_to_health_s=30.0), "start_to_health_s"),
        (_report(run_to_health_s=40.0), "create_s + start_to_health_s"),
        (_report(dataclasses.replace(GOOD, uid=0)), "failed checks"),
        (_report(failures=[]) | {"checks": dataclasses.asdict(dataclasses.replace(GOOD, uid=0))}, "follow"),
        ({k: v for k, v in _report().items() if k != "meta"}, "keys"),
    ],
)
def test_a_report_out_of_shape_or_bounds_is_refused(rep, named):
    assert container.structure_errors(_report()) == []
    errors = container.structure_errors(rep)
    assert errors and any(named in e for e in errors), errors


# --- one set of flags: the README, compose.yaml, the test ------------------------------------


def test_the_committed_report_is_within_the_bounds(root):
    rep = json.loads((root / "eval" / "results" / "container.json").read_text())
    assert container.structure_errors(rep) == [], "rerun `make container` and commit eval/results/container.json"


def test_compose_says_what_the_run_line_says(root):
    service = yaml.safe_load((root / "compose.yaml").read_text())["services"]["rag-contract"]
    flags = container.HARDENING
    assert service["read_only"] is True and "--read-only" in flags
    assert service["cap_drop"] == [flags[flags.index("--cap-drop") + 1]]
    assert service["security_opt"] == [flags[flags.index("--security-opt") + 1]]
    assert service["ports"] == [container.PUBLISH[1]]
    assert "tmpfs" not in service and "volumes" not in service  # nothing writable
    assert service.get("user") is None  # the Dockerfile's USER stands
    assert container.PUBLISH[1].startswith("127.0.0.1:")


def test_the_documented_run_line_carries_every_hardening_flag(root):
    page = (root / "docs" / "operating.md").read_text()
    section = page[page.index("## Hardened container") : page.index("## Benchmarks")]
    line = container.run_line()
    assert line in section
    for flag in (*container.HARDENING, *container.PUBLISH):
        assert flag in line.split()


def test_the_dockerfile_runs_as_a_user_that_is_not_root(root):
    lines = [ln.strip() for ln in (root / "Dockerfile").read_text().splitlines()]
    users = [ln.split()[1] for ln in lines if ln.startswith("USER ")]
    assert users and users[-1] not in ("root", "0")
    assert any("--uid 10001" in ln for ln in lines if ln.startswith("RUN useradd"))
