"""A copy of what the gate reads (corpus, index, eval, project.yaml, pyproject.toml), to break on purpose."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import yaml


def copy_project(root: Path, dst: Path) -> Path:
    """What the gate reads, copied from ``root`` into ``dst``."""
    dst.mkdir(parents=True, exist_ok=True)
    for name in ("corpus", "index", "eval"):
        shutil.copytree(root / name, dst / name)
    if (root / "models").is_dir():  # the adapted embedder's model, when the project has one
        shutil.copytree(root / "models", dst / "models")
    for name in ("pyproject.toml", "project.yaml"):
        if (root / name).is_file():  # an example project has no pyproject.toml of its own
            shutil.copy(root / name, dst / name)
    return dst


def edit_thresholds(root: Path, fn: Callable[[dict], object]) -> None:
    """Apply ``fn`` to the parsed eval/thresholds.yaml under ``root`` and write it back."""
    path = root / "eval" / "thresholds.yaml"
    raw = yaml.safe_load(path.read_text())
    fn(raw)
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
