"""``rag-contract serve``: the project it serves is the one ``--root`` names (in every worker too),
and settings from the environment that cannot be used are one-line refusals naming them.

uvicorn is replaced by a recorder: the test sees the app ``serve`` would run, and nothing binds.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import uvicorn.importer
from starlette.testclient import TestClient

from rag_contract.cli import main
from rag_contract.web import serving
from rag_contract.web.slow_clients import HeaderDeadlineH11Protocol
from tools.project_copy import copy_project, edit_thresholds

MARK_CHARS = 123  # a max_question_chars only the copy has


@pytest.fixture(scope="module")
def other_root(tmp_path_factory, root) -> Path:
    dst = copy_project(root, tmp_path_factory.mktemp("other") / "project")
    edit_thresholds(dst, lambda raw: raw["ask"].update(max_question_chars=MARK_CHARS))
    return dst


@pytest.fixture
def uvicorn_runs(monkeypatch) -> list[tuple[object, dict]]:
    runs: list[tuple[object, dict]] = []
    monkeypatch.setattr(serving.uvicorn, "run", lambda app, **kw: runs.append((app, kw)))
    return runs


@pytest.fixture
def elsewhere(tmp_path, monkeypatch) -> Path:
    """The working directory: not a project, so only --root can say which one to serve."""
    monkeypatch.chdir(tmp_path)
    for key in ("PORT", "REDIS_URL"):
        monkeypatch.delenv(key, raising=False)
    return tmp_path


def test_serve_serves_the_project_root_names(other_root, uvicorn_runs, elsewhere, capsys):
    assert main(["--root", str(other_root), "serve", "--port", "0"]) == 0
    (app, kw) = uvicorn_runs[0]
    assert kw["port"] == 0 and kw["host"] == "127.0.0.1"
    assert app.state.web.max_question_chars == MARK_CHARS
    with TestClient(app) as client:
        r = client.post("/ask", json={"question": "x" * (MARK_CHARS + 1)})
    assert r.status_code == 413 and f"limit is {MARK_CHARS}" in r.json()["detail"]


def test_serve_runs_on_uvloop(root, uvicorn_runs):
    # asyncio's own loop let a flood of clients take the answers' share of the cores (ADR 0001)
    serving.serve(port=0, root=root)
    assert uvicorn_runs[0][1]["loop"] == "uvloop"


def test_serve_runs_uvicorn_with_the_header_deadline(root, uvicorn_runs):
    serving.serve(port=0, root=root)
    assert uvicorn_runs[0][1]["http"] is HeaderDeadlineH11Protocol


@pytest.mark.parametrize("env", [{}, {"RAG_CONTRACT_ACCESS_LOG": "1"}], ids=["default", "access-log-on"])
def test_serve_never_turns_on_uvicorns_access_line(monkeypatch, root, uvicorn_runs, env):
    # uvicorn's line prints the path with its query: GET /ask?q=<the question>.
    monkeypatch.delenv("RAG_CONTRACT_ACCESS_LOG", raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    serving.serve(port=0, root=root)
    assert uvicorn_runs[0][1]["access_log"] is False


def test_every_worker_builds_the_app_of_the_same_root(other_root, monkeypatch):
    assert uvicorn.importer.import_from_string(serving.WORKER_APP) is serving.served_app_from_env
    monkeypatch.setenv(serving.ROOT_ENV, str(other_root))
    monkeypatch.delenv(serving.REDIS_ENV, raising=False)
    assert serving.served_app_from_env().state.web.max_question_chars == MARK_CHARS


@pytest.mark.parametrize(
    ("env", "named"),
    [
        ({"PORT": "abc"}, "PORT: 'abc' is not a port number"),
        ({"PORT": "70000"}, "PORT: '70000' is not a port number"),
        ({"REDIS_URL": "notaurl"}, "REDIS_URL: not a redis URL (no scheme)"),
        ({"REDIS_URL": "http://localhost:6379"}, "REDIS_URL: not a redis URL (http://...)"),
    ],
)
def test_unusable_settings_are_one_line_refusals_naming_them(
    root, uvicorn_runs, elsewhere, monkeypatch, capsys, env, named
):
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    assert main(["--root", str(root), "serve"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and named in err, err
    assert "Traceback" not in err
    assert uvicorn_runs == []


def test_a_bad_redis_flag_is_named_as_the_flag(root, uvicorn_runs, elsewhere, capsys):
    assert main(["--root", str(root), "serve", "--redis", "localhost:6379"]) == 2
    assert "--redis: not a redis URL" in capsys.readouterr().err
