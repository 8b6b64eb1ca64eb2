"""project.yaml ``corpus``: which files under the documents folder are documents, as globs.

Contract: ``parse_selection(value)`` turns the ``corpus`` mapping (keys ``include`` and
``exclude``, each a list of globs) into a ``Selection`` or raises ``SelectionError`` naming the
key (``corpus.exclude[1]``) and the rule. ``load_selection(path)`` reads it from project.yaml
(no file or no ``corpus`` key: everything selected). A glob is matched against a file's path
relative to the documents folder, with ``/`` between folders:

- ``*`` and ``?`` match within one folder name, ``[abc]`` / ``[!abc]`` one character of a set,
  and ``**`` (a whole path segment) any number of folders, none included;
- a glob without ``/`` matches a name in any folder (``_*.md``), as in ``.gitignore``;
- a glob that matches a folder matches every file under it (``drafts`` or ``drafts/``).

``Selection.refusal(path)`` is why a path is not selected (``excluded by 'drafts/**'``), or
None: with ``include`` given, a file must match one of them; ``exclude`` wins over ``include``.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rag_contract.config.yamlfile import read_yaml

KEY = "corpus"
_KINDS = ("include", "exclude")


class SelectionError(ValueError):
    pass


@dataclass(frozen=True)
class Selection:
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()

    def refusal(self, path: str) -> str | None:
        """Why ``path`` (relative, ``/``-separated) is not selected, or None when it is."""
        for glob in self.exclude:
            if matches(glob, path):
                return f"excluded by {glob!r} ({KEY}.exclude)"
        if self.include and not any(matches(glob, path) for glob in self.include):
            return f"matches no {KEY}.include glob ({', '.join(repr(g) for g in self.include)})"
        return None

    def as_yaml(self) -> dict[str, list[str]]:
        return {kind: list(getattr(self, kind)) for kind in _KINDS if getattr(self, kind)}


EVERYTHING = Selection()  # no globs: every file a format reads is a document


def glob_rule(glob: Any) -> str | None:
    """What is wrong with ``glob`` as a corpus glob, or None."""
    if not isinstance(glob, str) or not glob.strip():
        return "must be a non-empty glob (text)"
    if "\\" in glob:
        return "must use / between folders (a backslash is not allowed)"
    if glob.startswith("/"):
        return "must be relative to the documents folder (no leading /)"
    segments = glob.rstrip("/").split("/")
    if any(s in ("", ".", "..") for s in segments):
        return "must not have an empty, '.' or '..' folder"
    if any("**" in s and s != "**" for s in segments):
        return "'**' must be a whole folder name (as in 'a/**/b.md')"
    try:
        _compiled(glob)
    except re.error:
        return "has an unclosed '[' (a character set)"
    return None


def parse_selection(value: Any, where: str = KEY) -> Selection:
    if value is None:
        return Selection()
    if not isinstance(value, dict):
        raise SelectionError(f"{where}: must be a mapping with the keys {list(_KINDS)}")
    for key in value:
        if key not in _KINDS:
            raise SelectionError(f"{where}.{key}: unknown key (known: {list(_KINDS)})")
    found: dict[str, tuple[str, ...]] = {}
    for kind in _KINDS:
        globs = value.get(kind, [])
        if not isinstance(globs, list):
            raise SelectionError(f"{where}.{kind}: must be a list of globs (as in ['drafts/**'])")
        for i, glob in enumerate(globs):
            rule = glob_rule(glob)
            if rule:
                raise SelectionError(f"{where}.{kind}[{i}]: {glob!r} {rule}")
        found[kind] = tuple(g.rstrip("/") for g in globs)
    return Selection(**found)


def selection_of(include: Sequence[str] = (), exclude: Sequence[str] = ()) -> Selection:
    """A ``Selection`` from given globs, checked by the rules project.yaml's are."""
    return parse_selection({"include": list(include), "exclude": list(exclude)})


def load_selection(path: Path) -> Selection:
    path = Path(path)
    if not path.exists():
        return Selection()
    raw = read_yaml(path, SelectionError)
    if not isinstance(raw, dict):
        return Selection()  # the shape of project.yaml is config.about's to refuse
    try:
        return parse_selection(raw.get(KEY))
    except SelectionError as exc:
        raise SelectionError(f"{path.name}: {exc}") from None


def matches(glob: str, path: str) -> bool:
    """``path`` or one of the folders it is in matches ``glob``."""
    pattern = _compiled(glob)
    parts = path.split("/")
    return any(pattern.fullmatch("/".join(parts[:n])) for n in range(1, len(parts) + 1))


@functools.lru_cache(maxsize=256)
def _compiled(glob: str) -> re.Pattern[str]:
    segments = glob.rstrip("/").split("/")
    out = "" if len(segments) > 1 else "(?:.*/)?"  # a bare name matches in any folder
    for n, segment in enumerate(segments):
        last = n == len(segments) - 1
        if segment == "**":
            out += ".*" if last else "(?:[^/]+/)*"
            continue
        out += _segment(segment) + ("" if last else "/")
    return re.compile(out)


def _segment(segment: str) -> str:
    out, i = "", 0
    while i < len(segment):
        c = segment[i]
        if c == "*":
            out += "[^/]*"
        elif c == "?":
            out += "[^/]"
        elif c == "[":
            end = segment.find("]", i + 2 if segment[i + 1 : i + 2] in ("!", "]") else i + 1)
            if end < 0:
                raise re.error("unclosed character set")
            body = segment[i + 1 : end]
            body = "^/" + body[1:] if body.startswith("!") else body  # never across folders
            out += "[" + body.replace("\\", "\\\\") + "]"
            i = end
        else:
            out += re.escape(c)
        i += 1
    return out
