"""Reading a committed YAML file: a missing, unreadable (a directory, no permission), non-UTF-8 or
malformed file is refused naming the file, never its absolute path.

A mapping that names the same key twice is refused too, naming the dotted key and its line:
PyYAML keeps the last value silently, so ``max_client_burst: 10`` followed further down by
``max_client_burst: 50`` would serve a burst of 50 while a reader of the file sees 10.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from rag_contract.config.unreadable import not_utf8, unreadable

# libyaml's safe loader where PyYAML was built with it: the same documents to the same values,
# about ten times faster (the question set alone took ~0.3 s of every start in pure Python).
SAFE_LOADER: type = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

_MERGE_TAG = "tag:yaml.org,2002:merge"


class DuplicateKey(yaml.YAMLError):
    """A mapping names ``key`` (dotted from the document root) twice; ``line`` is 1-based."""

    def __init__(self, key: str, line: int):
        super().__init__(f"{key}: duplicate key (line {line}); each key may appear once")
        self.key = key
        self.line = line


def _scalar_name(node: yaml.Node) -> str:
    return str(node.value) if isinstance(node, yaml.ScalarNode) else f"<{type(node).__name__}>"


def refuse_duplicate_keys(node: yaml.Node | None, path: str = "", seen_nodes: set[int] | None = None) -> None:
    """Raise ``DuplicateKey`` for the first mapping (depth first) that repeats a key. An anchored
    node is checked once, so a self-referencing alias cannot recurse forever."""
    seen_nodes = set() if seen_nodes is None else seen_nodes
    if id(node) in seen_nodes:
        return
    seen_nodes.add(id(node))
    if isinstance(node, yaml.MappingNode):
        seen: set[str] = set()
        for key_node, value_node in node.value:
            if key_node.tag == _MERGE_TAG:
                continue
            name = _scalar_name(key_node)
            full = f"{path}.{name}" if path else name
            if name in seen:
                raise DuplicateKey(full, key_node.start_mark.line + 1)
            seen.add(name)
            refuse_duplicate_keys(value_node, full, seen_nodes)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            refuse_duplicate_keys(item, f"{path}[{i}]", seen_nodes)


def parse_yaml_text(text: str) -> Any:
    """The document in ``text`` (safe types only); ``yaml.YAMLError`` when malformed or a mapping
    repeats a key."""
    loader = SAFE_LOADER(text)
    try:
        node = loader.get_single_node()
        refuse_duplicate_keys(node)
        return None if node is None else loader.construct_document(node)
    finally:
        loader.dispose()


def read_yaml(path: Path, error: type[Exception], missing: str = "file missing") -> Any:
    """The parsed document at ``path``; ``error`` (naming the file) when it is absent, cannot be
    read, is not UTF-8, is not YAML or repeats a key in a mapping."""
    path = Path(path)
    try:
        return parse_yaml_text(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise error(f"{path.name}: {missing}") from None
    except OSError as exc:
        raise error(unreadable(path, exc)) from None
    except UnicodeDecodeError as exc:
        raise error(not_utf8(path, exc)) from None
    except DuplicateKey as exc:
        raise error(f"{path.name}: {exc}") from None
    except yaml.YAMLError as exc:
        raise error(f"{path.name}: not valid YAML ({exc})") from None


def read_mapping(path: Path, error: type[Exception], keys: Sequence[str]) -> dict:
    """The document at ``path`` (``read_yaml``), which must be a mapping naming no key but
    ``keys``; ``error`` names the file and the rule otherwise."""
    raw = read_yaml(path, error)
    if not isinstance(raw, dict):
        raise error(f"{path.name}: must be a mapping with the keys {list(keys)}")
    for key in raw:
        if key not in keys:
            raise error(f"{path.name}: {key}: unknown key (known: {list(keys)})")
    return raw
