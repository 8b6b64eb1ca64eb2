"""What ``rag-contract build-index`` costs: a full build, then a rebuild after one page changes.

``python -m tools.build_time [ROOT] [--python EXE]`` copies the project at ROOT (default: this
one) with ``tools.project_copy``, then times, as child processes of its own (wall clock, and
user + system CPU from ``getrusage``):
- ``build-index --full`` on the copy, and whether the index it writes is the committed one
  byte for byte (every file of ``index/meta.json``'s ``files`` with the committed sha256, and
  the same index version);
- ``build-index`` again after one sentence is added to one corpus file (the manifest's first
  file, at the paragraph break nearest its middle; its manifest entry updated), reporting how
  many texts it embedded and reused.
It prints one JSON report with the 1-minute load average before and after each build: on a
shared machine the CPU seconds move far less than the wall clock. ``--python`` runs the builds
with another interpreter (another checkout's venv, for a before/after). Nothing in the project
is written. The figures in docs/adr/0001-local-embedder.md are this command's output on the day they name.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import yaml

from rag_contract.project import find_root
from tools.machine import load_average, machine
from tools.project_copy import copy_project

ADDED = "\n\nThis sentence was added to time a rebuild after a one-page change.\n"


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def timed_build(python: str, root: Path, *extra: str) -> dict:
    before, cpu0, t0 = load_average(), _children_cpu(), time.perf_counter()
    done = subprocess.run(
        [python, "-m", "rag_contract.cli", "--root", str(root), "build-index", "--no-progress", *extra],
        capture_output=True,
        text=True,
        check=True,
        cwd=root,  # not the checkout: `-m` would import its package before the interpreter's own
    )
    return {
        "wall_s": round(time.perf_counter() - t0, 2),
        "cpu_s": round(_children_cpu() - cpu0, 2),
        "load_before": before,
        "load_after": load_average(),
        "output": done.stdout.strip().splitlines()[-1],
    }


def index_files(index: Path) -> dict:
    meta = json.loads((index / "meta.json").read_text())
    return {"version": meta["version"], "files": meta["files"]}


def change_one_page(root: Path) -> str:
    """Add ``ADDED`` to the manifest's first file at the paragraph break nearest its middle."""
    manifest_path = root / "corpus" / "manifest.yaml"
    manifest = yaml.safe_load(manifest_path.read_text())
    entry = manifest["files"][0]
    path = root / "corpus" / entry["file"]
    text = path.read_text()
    at = text.find("\n\n", len(text) // 2)
    changed = (text[:at] + ADDED.rstrip("\n") + text[at:]).encode()
    path.write_bytes(changed)
    entry["bytes"], entry["sha256"] = len(changed), hashlib.sha256(changed).hexdigest()
    manifest_path.write_text(yaml.safe_dump(manifest, sort_keys=False, allow_unicode=True))
    return entry["file"]


def measure(root: Path, python: str) -> dict:
    committed = index_files(root / "index")
    with tempfile.TemporaryDirectory() as tmp:
        copy = copy_project(root, Path(tmp) / "project")
        full = timed_build(python, copy, "--full")
        built = index_files(copy / "index")
        changed = change_one_page(copy)
        rebuild = timed_build(python, copy)
    return {
        "meta": {**machine(), "python_exe": python},
        "full": full,
        "full_is_committed_index": built == committed,
        "index_version": built["version"],
        "changed_file": changed,
        "rebuild": rebuild,
    }


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tools.build_time", description=__doc__.split("\n")[0])
    p.add_argument("root", nargs="?", help="the project (default: this one)")
    p.add_argument("--python", default=sys.executable, help="the interpreter that runs the builds")
    args = p.parse_args(argv)
    root = Path(args.root).resolve() if args.root else find_root()
    print(json.dumps(measure(root, args.python), indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
