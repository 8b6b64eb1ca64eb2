"""Reading a committed YAML file: a missing, unreadable (a directory, no permission), non-UTF-8 or
malformed file is refused naming the file, never its absolute path."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from rag_contract.config.unreadable import not_utf8, unreadable


def read_yaml(path: Path, error: type[Exception], missing: str = "file missing") -> Any:
    """The parsed document at ``path``; ``error`` (naming the file) when it is absent, cannot be
    read, is not UTF-8 or is not YAML."""
    path = Path(path)
    try:
        return yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise error(f"{path.name}: {missing}") from None
    except OSError as exc:
        raise error(unreadable(path, exc)) from None
    except UnicodeDecodeError as exc:
        raise error(not_utf8(path, exc)) from None
    except yaml.YAMLError as exc:
        raise error(f"{path.name}: not valid YAML ({exc})") from None
