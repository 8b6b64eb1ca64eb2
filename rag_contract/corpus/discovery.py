"""Which files under a documents folder are documents, and why every other one is not.

Contract: ``discover(docs, selection)`` walks ``docs`` and its sub-folders (in name order) and
returns ``Found``: the ``pages`` a format reads, each named by its path relative to ``docs``
with ``/`` between folders (``advanced/clients.md``; that name is its corpus file and the
document part of its section ids, so two ``index.md`` in two folders stay two documents), and
every file not taken as ``skipped``, each with its reason:

- hidden (a name starting with ``.``; a hidden folder is one entry, not walked), as MkDocs
  does not publish them either;
- a symbolic link to a folder (not followed: it could lead out of ``docs`` or loop);
- not selected by the project's globs (``config.corpus_selection``);
- a ``#`` in its path (it separates a section id's document from its anchor);
- no format reads its suffix (the formats registry, ``corpus.formats``: a new format's
  suffixes are read with no change here);
- empty (no bytes, or only white space);
- its format cannot parse it (not UTF-8, ...): the format's own one-line reason.

``ignore`` names files (relative paths) that are accounted for elsewhere (kept beside the
documents, the site configuration) and are neither pages nor skipped; ``set_aside`` maps a
folder (relative path) to why none of it is pages (a site theme's templates): it is one
skipped entry, not walked.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from pathlib import Path

from rag_contract.config.corpus_selection import EVERYTHING, Selection
from rag_contract.config.unreadable import unreadable
from rag_contract.corpus.formats import FormatError, format_for


@dataclass(frozen=True)
class Page:
    path: Path  # where the file is
    file: str  # its name in the corpus: the path relative to the documents folder


@dataclass(frozen=True)
class Skipped:
    file: str  # relative to the documents folder; a folder ends with "/"
    reason: str


@dataclass(frozen=True)
class Found:
    pages: tuple[Page, ...]
    skipped: tuple[Skipped, ...]


def discover(
    docs: Path,
    selection: Selection = EVERYTHING,
    ignore: Collection[str] = (),
    set_aside: Mapping[str, str] | None = None,
) -> Found:
    docs = Path(docs)
    pages: list[Page] = []
    skipped: list[Skipped] = []
    for folder, dirs, files in os.walk(docs):
        here = Path(folder)
        prefix = here.relative_to(docs).as_posix()
        prefix = "" if prefix == "." else prefix + "/"
        walked = []
        for d in sorted(dirs):
            if d.startswith("."):
                skipped.append(Skipped(f"{prefix}{d}/", "hidden folder, not walked"))
            elif set_aside and prefix + d in set_aside:
                skipped.append(Skipped(f"{prefix}{d}/", f"{set_aside[prefix + d]}, not walked"))
            elif (here / d).is_symlink():
                skipped.append(Skipped(f"{prefix}{d}/", "symbolic link to a folder, not followed"))
            else:
                walked.append(d)
        dirs[:] = walked  # os.walk descends into what is left, in this order
        for name in sorted(files):
            file = prefix + name
            if file in ignore:
                continue
            reason = skip_reason(here / name, file, selection)
            if reason:
                skipped.append(Skipped(file, reason))
            else:
                pages.append(Page(here / name, file))
    return Found(tuple(pages), tuple(sorted(skipped, key=lambda s: s.file)))


def skip_reason(path: Path, file: str, selection: Selection = EVERYTHING) -> str | None:
    """Why the file at ``path`` (``file`` relative to the documents folder) is not a document,
    or None when it is one."""
    if path.name.startswith("."):
        return "hidden file"
    refused = selection.refusal(file)
    if refused:
        return refused
    if "#" in file:
        return "a '#' in its path would end its section ids' document part"
    try:
        fmt = format_for(file)
    except FormatError:
        return f"unsupported format: no format reads {path.suffix or 'a file without a suffix'}"
    try:
        data = path.read_bytes()
    except OSError as exc:
        return unreadable(path, exc).split(": ", 1)[1]
    if not data.strip():
        return "empty"
    try:
        fmt.parse(file, file, data)
    except ValueError as exc:
        return f"{fmt.name}: {exc}"
    return None
