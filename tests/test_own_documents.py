"""docs/own-documents.md, run: every command of the guide, in order, in a fresh virtual
environment with this package installed from the checkout the way ``pip install`` installs
it (no checkout on the path), from an empty directory: init, index, three questions, bars, a
passing gate, then a broken question whose item turns red, then ``serve``.

The guide's ``sh`` blocks are the script. Two lines are stood in for: ``pip install
rag-contract pytest`` installs this checkout's package (with the lock as constraints) instead
of the published one, and ``rag-contract serve --port 8000`` runs on a free port in the
background until ``/health`` answers and a page names the corpus.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
from pathlib import Path

import pytest

from tests.support import ROOT

GUIDE = ROOT / "docs" / "own-documents.md"
PIP_LINE = "pip install rag-contract pytest"
SERVE_LINE = "rag-contract serve --port 8000"


def guide_script() -> list[str]:
    """The guide's shell blocks, in order."""
    return re.findall(r"```sh\n(.*?)```", GUIDE.read_text(encoding="utf-8"), re.DOTALL)


def test_the_guide_names_the_lines_this_test_stands_in_for():
    script = "".join(guide_script())
    assert script.count(PIP_LINE) == 1 and script.count(SERVE_LINE) == 1
    assert "python -m pytest -m gate\n" in script
    assert "retrieval/ceiling/q02" in script


def _package_source(tmp: Path) -> Path:
    """The files a wheel is built from, copied, so the build leaves the checkout untouched."""
    src = tmp / "src"
    src.mkdir()
    shutil.copy(ROOT / "pyproject.toml", src)
    for package in ("rag_contract", "pytest_ragcontract"):
        shutil.copytree(ROOT / package, src / package, ignore=shutil.ignore_patterns("__pycache__"))
    return src


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
def test_the_guide_runs_from_pip_install_to_a_red_item(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    install = f"pip install -q -c {ROOT / 'requirements.lock'} {_package_source(tmp_path)} pytest"
    script = "".join(guide_script())
    script = script.replace(PIP_LINE, install).replace(SERVE_LINE, SERVE.format(port=_free_port()))
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["PATH"] = os.pathsep.join(p for p in env["PATH"].split(os.pathsep) if ".venv" not in p)
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
