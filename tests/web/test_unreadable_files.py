"""Files that exist but cannot be read (a directory in their place, no permission) or are not
UTF-8: one line naming the file, never a traceback, a 500, or the checkout's absolute path in
an HTTP body."""

from __future__ import annotations

from pathlib import Path

import pytest
from starlette.testclient import TestClient

from rag_contract.cli import main
from rag_contract.config.thresholds import ThresholdsError, load_thresholds
from rag_contract.index.store import IndexLoadError, read_meta
from rag_contract.web.serving import build_served_app
from tools.project_copy import copy_project


@pytest.fixture
def copy(tmp_path, root) -> Path:
    return copy_project(root, tmp_path / "project")


def as_directory(path: Path) -> None:
    path.unlink()
    path.mkdir()


def assert_no_path(text: str, root: Path) -> None:
    assert str(root) not in text and "Errno" not in text and "Traceback" not in text, text


def test_a_directory_in_place_of_a_file_is_named_not_a_traceback(tmp_path):
    as_directory_path = tmp_path / "thresholds.yaml"
    as_directory_path.mkdir()
    with pytest.raises(ThresholdsError) as caught:
        load_thresholds(as_directory_path)
    assert str(caught.value) == "thresholds.yaml: cannot be read (Is a directory)"
    (tmp_path / "index").mkdir()
    (tmp_path / "index" / "meta.json").mkdir()
    with pytest.raises(IndexLoadError, match=r"^meta\.json: cannot be read \(Is a directory\)$"):
        read_meta(tmp_path / "index")


def test_permission_denied_is_named(tmp_path, monkeypatch):
    # Simulated: the tests may run as root, whom file modes do not stop.
    path = tmp_path / "thresholds.yaml"
    path.write_text("x: 1\n")

    def denied(self, *args, **kwargs):
        raise PermissionError(13, "Permission denied", str(self))

    monkeypatch.setattr(Path, "read_text", denied)
    with pytest.raises(ThresholdsError) as caught:
        load_thresholds(path)
    assert str(caught.value) == "thresholds.yaml: cannot be read (Permission denied)"


def test_non_utf8_yaml_is_named_with_the_byte(tmp_path):
    path = tmp_path / "thresholds.yaml"
    path.write_bytes(b"budget:\n  daily_cap_usd: 1 # caf\xe9\n")
    with pytest.raises(ThresholdsError) as caught:
        load_thresholds(path)
    assert str(caught.value) == "thresholds.yaml: not UTF-8 text (byte 32 is 0xe9)"


@pytest.mark.parametrize("name", ["thresholds.yaml", "questions.yaml"])
def test_the_cli_refuses_a_non_utf8_config_file_in_one_line(copy, capsys, name):
    (copy / "eval" / name).write_bytes(b"\xff\xfe not utf-8\n")
    assert main(["--root", str(copy), "answer", "q01"]) == 2
    err = capsys.readouterr().err
    assert f"{name}: not UTF-8 text (byte 0 is 0xff)" in err
    assert "Traceback" not in err and all(line.startswith("rag-contract: ") for line in err.splitlines())


def test_meta_json_a_directory_at_startup_is_a_503_naming_it(copy):
    as_directory(copy / "index" / "meta.json")
    client = TestClient(build_served_app(copy))
    health = client.get("/health")
    assert health.status_code == 503
    assert health.json()["load_error"] == "meta.json: cannot be read (Is a directory)"
    replies = [health, client.get("/answer/q01"), client.post("/ask", json={"question": "What is a URI?"})]
    for r in replies:
        assert r.status_code == 503, r.text
        assert_no_path(r.text, copy)


def test_thresholds_turned_into_a_directory_while_serving_is_reported_by_health(copy):
    client = TestClient(build_served_app(copy))
    assert client.get("/health").status_code == 200
    as_directory(copy / "eval" / "thresholds.yaml")
    r = client.get("/health")
    assert r.status_code == 200  # the installed index is still served
    assert r.json()["disk_error"] == "thresholds.yaml: cannot be read (Is a directory)"
    assert_no_path(r.text, copy)
