"""docs/own-documents.md, run: every command of the guide, in order, from an empty directory, in a
fresh virtual environment of the system's Python (no checkout on the path, no variable of the
checkout's venv): the install line as written, installing the wheel built from this checkout as
``make dist`` builds it, then init, index, three questions, bars, a passing gate, a broken
question whose item turns red, then ``serve``.

The guide's ``sh`` blocks are the script. ``RAG_CONTRACT`` (the checkout the guide's reader
built the wheel in) names a folder holding what the install line reads from a checkout:
``dist/`` as ``python -m build`` wrote it and ``requirements.lock``. One line is stood in for:
``rag-contract serve --port 8000`` runs on a free port in the background until ``/health``
answers and a page names the corpus.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

from tests.support import ROOT

GUIDE = ROOT / "docs" / "own-documents.md"
SERVE_LINE = "rag-contract serve --port 8000"


def guide_script() -> list[str]:
    """The guide's shell blocks, in order."""
    return re.findall(r"```sh\n(.*?)```", GUIDE.read_text(encoding="utf-8"), re.DOTALL)


def _distribution() -> tuple[str, str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    return project["name"], project["version"]


def _wheel_name() -> str:
    name, version = _distribution()
    return f"{name.replace('-', '_')}-{version}-py3-none-any.whl"


def test_the_guide_installs_the_wheel_of_this_version_and_names_the_line_it_stands_in_for():
    script = "".join(guide_script())
    name, _ = _distribution()
    assert f'pip install -c "$RAG_CONTRACT/requirements.lock" "$RAG_CONTRACT/dist/{_wheel_name()}" pytest\n' in script
    assert "pip install rag-contract " not in GUIDE.read_text(encoding="utf-8")  # the other project's name
    assert f"`pip install {name} pytest`" in GUIDE.read_text(encoding="utf-8")  # the line once released
    assert script.count(SERVE_LINE) == 1
    assert "python -m pytest -m gate\n" in script
    assert "retrieval/ceiling/q02" in script


@pytest.fixture(scope="session")
def checkout_dist(tmp_path_factory) -> Path:
    """A folder laid out as a checkout after ``make dist``: dist/ with the wheel and the sdist
    ``python -m build`` makes of this checkout's sources (copied, so the build writes nothing
    here), and requirements.lock."""
    tmp = tmp_path_factory.mktemp("checkout")
    src = tmp / "src"
    src.mkdir()
    for name in ("pyproject.toml", "MANIFEST.in"):
        shutil.copy(ROOT / name, src)
    for package in ("rag_contract", "pytest_ragcontract"):
        shutil.copytree(ROOT / package, src / package, ignore=shutil.ignore_patterns("__pycache__"))
    checkout = tmp / "rag-contract"
    checkout.mkdir()
    shutil.copy(ROOT / "requirements.lock", checkout)
    subprocess.run(
        [sys.executable, "-m", "build", "--outdir", str(checkout / "dist"), str(src)],
        check=True,
        capture_output=True,
        timeout=600,
    )
    return checkout


@pytest.mark.slow
def test_make_dist_builds_a_wheel_and_an_sdist_the_index_accepts(checkout_dist):
    name, version = _distribution()
    built = {p.name for p in (checkout_dist / "dist").iterdir()}
    assert built == {f"{name.replace('-', '_')}-{version}.tar.gz", _wheel_name()}
    check = subprocess.run(
        [sys.executable, "-m", "twine", "check", "--strict", *sorted((checkout_dist / "dist").iterdir())],
        capture_output=True,
        text=True,
    )
    assert check.returncode == 0, check.stdout + check.stderr
    with zipfile.ZipFile(checkout_dist / "dist" / _wheel_name()) as wheel:
        files = wheel.namelist()
    # the package data the commands read (the scaffold's files, the page templates, the word list) is in the wheel
    for data in ("rag_contract/scaffold/data/thresholds.yaml", "rag_contract/web/templates/site.css"):
        assert data in files
    assert f"{name.replace('-', '_')}-{version}.dist-info/entry_points.txt" in files
    assert not any(f.startswith(("tests/", "tools/")) for f in files)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


SERVE = """\
rag-contract serve --port {port} > serve.log 2>&1 &
serve_pid=$!
trap 'kill $serve_pid 2>/dev/null || true' EXIT  # a failed check below must not leave it running
python - <<'PY'
import time, urllib.request
for _ in range(600):
    try:
        health = urllib.request.urlopen("http://127.0.0.1:{port}/health", timeout=2).read()
        break
    except OSError:
        time.sleep(0.2)
else:
    raise SystemExit("serve never answered /health")
page = urllib.request.urlopen("http://127.0.0.1:{port}/", timeout=10).read().decode()
assert "answers over the platform team" in page, page[:500]
print("served:", health.decode()[:80])
PY
kill $serve_pid
"""


@pytest.mark.slow
def test_the_guide_runs_from_pip_install_to_a_red_item(tmp_path, checkout_dist):
    work = tmp_path / "work"
    work.mkdir()
    script = "".join(guide_script()).replace(SERVE_LINE, SERVE.format(port=_free_port()))
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["PATH"] = os.pathsep.join(p for p in env["PATH"].split(os.pathsep) if ".venv" not in p)
    env["RAG_CONTRACT"] = str(checkout_dist)
    done = subprocess.run(
        # no pipefail: the guide pipes the red gate into grep, as a reader's shell would
        ["bash", "-c", "set -eu\n" + script],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=1500,
    )
    out = done.stdout + done.stderr
    assert done.returncode == 0, out[-4000:]
    # the gate passed before the question was broken, and named the broken question's item after
    assert re.search(r"\d+ passed", out), out[-4000:]
    assert re.search(r"FAILED .*retrieval/ceiling/q02", out), out[-4000:]
    assert "served:" in out
    project = work / "my-project"
    assert (project / "corpus" / "manifest.yaml").is_file() and (project / "index" / "meta.json").is_file()
    # what ran was the built wheel, installed into the guide's venv: its files, not a link to a checkout
    name, version = _distribution()
    (site,) = (work / ".venv" / "lib").glob("python3*/site-packages")
    origin = json.loads((site / f"{name.replace('-', '_')}-{version}.dist-info" / "direct_url.json").read_text())
    assert origin["url"] == (checkout_dist / "dist" / _wheel_name()).as_uri() and "archive_info" in origin, origin
    assert (site / "rag_contract" / "cli.py").is_file()
