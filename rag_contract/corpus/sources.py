"""The corpus: documents verified against their manifest, parsed into sections by their format.

Contract:
- ``load_corpus(dir, selection)`` reads ``manifest.yaml`` and refuses (``CorpusError``, naming
  the file) a listed file whose length or sha256 differs from the manifest, a listed file that
  is missing, a file no known format reads, a listed file the project's globs do not select
  (project.yaml ``corpus``), and a file on disk, in ``dir`` or a folder under it, that a format
  would read but the manifest neither lists nor names under ``kept`` (provenance, licence, site
  configuration kept beside the documents) nor the globs leave out. Nothing is parsed before
  every file has passed.
- A listed file is a path relative to ``dir`` with ``/`` between folders
  (``advanced/clients.md``): not absolute, no ``..``, ``.`` or empty folder, no backslash and
  no ``#`` (which ends a section id's document part).
- Each file is parsed by its format (``formats``: the entry's ``format``, else the one its
  suffix names) into ``Section``s, in file order (the order the index is built in);
  ``Corpus.reading_order`` is the manifest's own order (``init`` writes the site's nav order).
  Files on disk that are not read (left out by a glob, no format reads them) are
  ``Corpus.skipped``, each with its reason.
- ``corpus_fingerprint`` is the sha256 over one line per file: its name and sha256, and for a
  format with an identity, that identity and the file's manifest title (the title of a page's
  lead section). RFC text has no identity, so the RFC corpus keeps the fingerprint it had
  before formats existed. The fingerprint is an input of the index version.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rag_contract.config.corpus_selection import EVERYTHING, Selection
from rag_contract.config.unreadable import unreadable
from rag_contract.config.yamlfile import read_yaml
from rag_contract.corpus.formats import FormatError, format_for, readable_suffixes
from rag_contract.corpus.sections import Section

MANIFEST = "manifest.yaml"


class CorpusError(ValueError):
    """The corpus on disk is not the corpus the manifest describes."""


@dataclass(frozen=True)
class ManifestEntry:
    file: str
    title: str
    source: str
    retrieved: str
    bytes: int
    sha256: str
    format: str | None = None  # None: the format the file's suffix names
    licence: str | None = None

    @property
    def document(self) -> str:
        """The document part of this file's section ids (``rfc9110``, ``middleware.md``)."""
        return format_for(self.file, self.format).document(self.file)


@dataclass(frozen=True)
class NotRead:
    file: str  # relative to the corpus folder
    reason: str


@dataclass(frozen=True)
class Corpus:
    entries: tuple[ManifestEntry, ...]  # by file: the order sections and the index follow
    sections: tuple[Section, ...]
    kept: tuple[str, ...] = ()  # files kept beside the documents, not parsed
    listed: tuple[str, ...] = ()  # the manifest's order of its files; () for file order
    skipped: tuple[NotRead, ...] = ()  # files on disk that are not read, and why

    @property
    def reading_order(self) -> tuple[ManifestEntry, ...]:
        """The entries in the manifest's order (the site's navigation, when init found one)."""
        by_file = {e.file: e for e in self.entries}
        return tuple(by_file[f] for f in self.listed) if self.listed else self.entries

    @property
    def fingerprint(self) -> str:
        return corpus_fingerprint(self.entries)

    def section(self, section_id: str) -> Section:
        for s in self.sections:
            if s.id == section_id:
                return s
        raise KeyError(section_id)

    def by_id(self) -> dict[str, Section]:
        return {s.id: s for s in self.sections}


_MANIFEST_KEYS = {"file", "title", "source", "retrieved", "bytes", "sha256"}
_OPTIONAL_KEYS = {"format", "licence"}


def read_manifest(corpus_dir: Path) -> tuple[ManifestEntry, ...]:
    return read_manifest_file(corpus_dir)[0]


def path_rule(file: str) -> str | None:
    """What is wrong with ``file`` as a corpus path, or None."""
    if not file or "\\" in file or file.startswith("/"):
        return "must be a path relative to the corpus folder, with / between folders"
    if any(part in ("", ".", "..") for part in file.split("/")):
        return "must not have an empty, '.' or '..' folder"
    if "#" in file:
        return "must not contain '#' (it ends a section id's document part)"
    return None


def read_manifest_file(corpus_dir: Path) -> tuple[tuple[ManifestEntry, ...], tuple[str, ...]]:
    """The manifest's entries, sorted by file, and its ``kept`` file names."""
    entries, kept, _ = read_manifest_listing(corpus_dir)
    return entries, kept


def read_manifest_listing(corpus_dir: Path) -> tuple[tuple[ManifestEntry, ...], tuple[str, ...], tuple[str, ...]]:
    """The manifest's entries sorted by file, its ``kept`` names, and its files in its own order."""
    path = Path(corpus_dir) / MANIFEST
    raw = read_yaml(path, CorpusError, "manifest missing")
    if not isinstance(raw, dict) or not isinstance(raw.get("files"), list):
        raise CorpusError(f"{path}: must be a mapping with a 'files' list")
    kept = raw.get("kept", [])
    if not isinstance(kept, list) or not all(isinstance(k, str) and k for k in kept):
        raise CorpusError(f"{path}: 'kept' must be a list of file names")
    entries = []
    for i, item in enumerate(raw["files"]):
        if not isinstance(item, dict) or not _MANIFEST_KEYS <= set(item) <= _MANIFEST_KEYS | _OPTIONAL_KEYS:
            raise CorpusError(
                f"{path}: files[{i}] must have exactly the keys {sorted(_MANIFEST_KEYS)}"
                f" (and optionally {sorted(_OPTIONAL_KEYS)})"
            )
        entry = ManifestEntry(
            file=str(item["file"]),
            title=str(item["title"]),
            source=str(item["source"]),
            retrieved=str(item["retrieved"]),
            bytes=int(item["bytes"]),
            sha256=str(item["sha256"]),
            format=None if item.get("format") is None else str(item["format"]),
            licence=None if item.get("licence") is None else str(item["licence"]),
        )
        rule = path_rule(entry.file)
        if rule:
            raise CorpusError(f"{path}: files[{i}]: {entry.file!r} {rule}")
        try:
            format_for(entry.file, entry.format)
        except FormatError as exc:
            raise CorpusError(str(exc)) from None
        entries.append(entry)
    names = [e.file for e in entries]
    if len(set(names)) != len(names):
        raise CorpusError(f"{path}: a file is listed twice")
    return tuple(sorted(entries, key=lambda e: e.file)), tuple(kept), tuple(names)


def on_disk(corpus_dir: Path) -> list[str]:
    """Every file under ``corpus_dir``, as a path relative to it, in path order."""
    corpus_dir = Path(corpus_dir)
    return sorted(p.relative_to(corpus_dir).as_posix() for p in corpus_dir.rglob("*") if p.is_file())


def unread_files(
    corpus_dir: Path, entries: tuple[ManifestEntry, ...], kept: tuple[str, ...] = (), selection: Selection = EVERYTHING
) -> tuple[NotRead, ...]:
    """The files on disk nothing reads: neither listed, kept nor the manifest; each with why.
    One a format would read and no glob leaves out is refused: it would be a document the
    manifest does not vouch for."""
    listed = {e.file for e in entries} | set(kept) | {MANIFEST}
    suffixes = readable_suffixes()
    out = []
    for file in on_disk(corpus_dir):
        if file in listed:
            continue
        refused = selection.refusal(file)
        if refused:
            out.append(NotRead(file, refused))
        elif not file.lower().endswith(suffixes):
            out.append(NotRead(file, "no format reads it"))
        else:
            raise CorpusError(f"{file}: on disk but not in {MANIFEST}")
    return tuple(out)


def verify_files(
    corpus_dir: Path, entries: tuple[ManifestEntry, ...], kept: tuple[str, ...] = (), selection: Selection = EVERYTHING
) -> dict[str, bytes]:
    """Every listed file selected and present with its recorded length and sha256, and no
    unlisted file a format would read (other than those ``kept`` or left out by a glob)."""
    unread_files(corpus_dir, entries, kept, selection)
    return _listed_bytes(Path(corpus_dir), entries, selection)


def _listed_bytes(corpus_dir: Path, entries: tuple[ManifestEntry, ...], selection: Selection) -> dict[str, bytes]:
    blobs = {}
    for e in entries:
        refused = selection.refusal(e.file)
        if refused:
            raise CorpusError(f"{e.file}: listed in {MANIFEST} but {refused} in project.yaml")
        path = corpus_dir / e.file
        if not path.is_file():
            raise CorpusError(f"{e.file}: listed in {MANIFEST} but missing")
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise CorpusError(unreadable(path, exc)) from None
        digest = hashlib.sha256(data).hexdigest()
        if digest != e.sha256:
            raise CorpusError(f"{e.file}: sha256 mismatch: manifest has {e.sha256}, file has {digest}")
        if len(data) != e.bytes:
            raise CorpusError(f"{e.file}: length mismatch: manifest has {e.bytes}, file has {len(data)}")
        blobs[e.file] = data
    return blobs


def corpus_fingerprint(entries: tuple[ManifestEntry, ...]) -> str:
    h = hashlib.sha256()
    for e in sorted(entries, key=lambda e: e.file):
        identity = format_for(e.file, e.format).identity
        if identity is None:
            h.update(f"{e.file}\0{e.sha256}\n".encode())
        else:
            h.update(f"{e.file}\0{e.sha256}\0{identity}\0{e.title}\n".encode())
    return h.hexdigest()


def load_corpus(corpus_dir: Path, selection: Selection = EVERYTHING) -> Corpus:
    entries, kept, listed = read_manifest_listing(corpus_dir)
    skipped = unread_files(corpus_dir, entries, kept, selection)  # an unlisted document is refused first
    blobs = _listed_bytes(Path(corpus_dir), entries, selection)
    sections: list[Section] = []
    for e in entries:
        # the manifest's hash says the bytes are the ones committed, not that they parse
        try:
            sections.extend(format_for(e.file, e.format).parse(e.file, e.title, blobs[e.file]))
        except ValueError as exc:
            raise CorpusError(f"{e.file}: {exc}") from None
    ids = [s.id for s in sections]
    if len(set(ids)) != len(ids):
        twice = next(i for i in ids if ids.count(i) > 1)
        raise CorpusError(f"{MANIFEST}: section id {twice!r} is given by two files")
    return Corpus(
        entries=entries,
        sections=tuple(sections),
        kept=kept,
        listed=() if listed == tuple(e.file for e in entries) else listed,
        skipped=skipped,
    )


def inventory(corpus: Corpus) -> dict:
    """Per document, in reading order: sections, sections with prose of their own, words, and the
    markup its format dropped that a reader of the rendered page would see (mkdocstrings
    directives, named in ``dropped_targets``) (``rag-contract sections``); and the files on disk
    that are not read, with why."""
    rows: list[dict[str, Any]] = []
    for e in corpus.reading_order:
        secs = [s for s in corpus.sections if s.document == e.document]
        rows.append(
            {
                "document": e.document,
                "title": e.title,
                "sections": len(secs),
                "with_prose": sum(1 for s in secs if s.words),
                "words": sum(s.words for s in secs),
                "dropped": sum(len(s.dropped) for s in secs),
                "dropped_targets": [d for s in secs for d in s.dropped],
            }
        )
    total = {k: sum(r[k] for r in rows) for k in ("sections", "with_prose", "words", "dropped")}
    skipped = [{"file": s.file, "reason": s.reason} for s in corpus.skipped]
    return {"documents": rows, "total": total, "skipped": skipped}
