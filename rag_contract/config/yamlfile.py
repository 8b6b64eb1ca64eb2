"""Reading a committed YAML file: a missing or malformed file is refused naming the file."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml


def read_yaml(path: Path, error: type[Exception], missing: str = "file missing") -> Any:
    """The parsed document at ``path``; ``error`` (naming the file) when it is absent or not YAML."""
    path = Path(path)
    try:
        return yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise error(f"{path.name}: {missing}") from None
    except yaml.YAMLError as exc:
        raise error(f"{path.name}: not valid YAML ({exc})") from None
