"""Reading a committed YAML file: a missing, unreadable (a directory, no permission), non-UTF-8 or
malformed file is refused naming the file, never its absolute path."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from rag_contract.config.unreadable import not_utf8, unreadable

# libyaml's safe loader where PyYAML was built with it: the same documents to the same values,
# about ten times faster (the question set alone took ~0.3 s of every start in pure Python).
SAFE_LOADER: type = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def read_yaml(path: Path, error: type[Exception], missing: str = "file missing") -> Any:
    """The parsed document at ``path``; ``error`` (naming the file) when it is absent, cannot be
    read, is not UTF-8 or is not YAML."""
    path = Path(path)
    try:
        return yaml.load(path.read_text(encoding="utf-8"), Loader=SAFE_LOADER)
    except FileNotFoundError:
        raise error(f"{path.name}: {missing}") from None
    except OSError as exc:
        raise error(unreadable(path, exc)) from None
    except UnicodeDecodeError as exc:
        raise error(not_utf8(path, exc)) from None
    except yaml.YAMLError as exc:
        raise error(f"{path.name}: not valid YAML ({exc})") from None
