"""The corpus: six RFC texts verified against their manifest, parsed into sections.

Contract:
- ``load_corpus(dir)`` reads ``manifest.yaml`` and every ``*.txt`` beside it and refuses
  (``CorpusError``, naming the file) a file whose length or sha256 differs from the manifest,
  a listed file that is missing, and a ``.txt`` on disk that the manifest does not list.
  Nothing is parsed before every file has passed.
- ``parse_sections(rfc, text)`` turns one RFC into ``Section(id, title, text)`` for every
  numbered section and appendix (``rfc9110#9.2.1``, ``rfc9110#A``), in document order.
  The table of contents is not mistaken for sections, page furniture (form feeds, running
  headers, ``[Page N]`` footers) is removed so a section spanning a page break reads as one
  text, and the BOM of the RFCXML-era files is dropped.
- ``corpus_fingerprint`` is the sha256 over the manifest's (file, sha256) pairs: an input of
  the index version.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rag_contract.config.unreadable import unreadable
from rag_contract.config.yamlfile import read_yaml

MANIFEST = "manifest.yaml"


class CorpusError(ValueError):
    """The corpus on disk is not the corpus the manifest describes."""


@dataclass(frozen=True)
class Section:
    id: str  # "rfc9110#9.2.1"
    title: str
    text: str  # body text without the heading line, page furniture removed

    @property
    def rfc(self) -> str:
        return self.id.split("#", 1)[0]

    @property
    def number(self) -> str:
        return self.id.split("#", 1)[1]

    @property
    def words(self) -> int:
        return len(self.text.split())


@dataclass(frozen=True)
class ManifestEntry:
    file: str
    title: str
    source: str
    retrieved: str
    bytes: int
    sha256: str

    @property
    def rfc(self) -> str:
        return self.file.removesuffix(".txt")


@dataclass(frozen=True)
class Corpus:
    entries: tuple[ManifestEntry, ...]
    sections: tuple[Section, ...]

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


def read_manifest(corpus_dir: Path) -> tuple[ManifestEntry, ...]:
    path = Path(corpus_dir) / MANIFEST
    raw = read_yaml(path, CorpusError, "manifest missing")
    if not isinstance(raw, dict) or not isinstance(raw.get("files"), list):
        raise CorpusError(f"{path}: must be a mapping with a 'files' list")
    entries = []
    for i, item in enumerate(raw["files"]):
        if not isinstance(item, dict) or set(item) != _MANIFEST_KEYS:
            raise CorpusError(f"{path}: files[{i}] must have exactly the keys {sorted(_MANIFEST_KEYS)}")
        entries.append(
            ManifestEntry(
                file=str(item["file"]),
                title=str(item["title"]),
                source=str(item["source"]),
                retrieved=str(item["retrieved"]),
                bytes=int(item["bytes"]),
                sha256=str(item["sha256"]),
            )
        )
    names = [e.file for e in entries]
    if len(set(names)) != len(names):
        raise CorpusError(f"{path}: a file is listed twice")
    return tuple(sorted(entries, key=lambda e: e.file))


def verify_files(corpus_dir: Path, entries: tuple[ManifestEntry, ...]) -> dict[str, bytes]:
    """Every listed file present with its recorded length and sha256, and no unlisted .txt."""
    corpus_dir = Path(corpus_dir)
    listed = {e.file for e in entries}
    on_disk = {p.name for p in corpus_dir.glob("*.txt")}
    for extra in sorted(on_disk - listed):
        raise CorpusError(f"{extra}: on disk but not in {MANIFEST}")
    blobs = {}
    for e in entries:
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
        h.update(f"{e.file}\0{e.sha256}\n".encode())
    return h.hexdigest()


def load_corpus(corpus_dir: Path) -> Corpus:
    entries = read_manifest(corpus_dir)
    blobs = verify_files(corpus_dir, entries)
    sections: list[Section] = []
    for e in entries:
        # the manifest's hash says the bytes are the ones committed, not that they are an RFC
        try:
            text = blobs[e.file].decode("utf-8")
        except UnicodeDecodeError as exc:
            raise CorpusError(f"{e.file}: not UTF-8 text (byte {exc.start}); an RFC text file is expected") from None
        try:
            sections.extend(parse_sections(e.rfc, text))
        except CorpusError as exc:
            raise CorpusError(f"{e.file}: {exc}") from None
    return Corpus(entries=entries, sections=tuple(sections))


# --- parsing -----------------------------------------------------------------

_FOOTER = re.compile(r"^\S.*\[Page \d+\]\s*$")
_RUNNING_HEADER = re.compile(r"^RFC \d{4}\s{2,}.*\S\s{2,}\w+ \d{4}\s*$")
# A heading starts in column 0: "9.2.1.  Title", "Appendix B.  Title", "D.1.  Title".
_HEADING = re.compile(
    r"^(?:Appendix\s+(?P<app>[A-Z])\.?|(?P<num>\d+(?:\.\d+)*)\.?|(?P<sub>[A-Z](?:\.\d+)+)\.?)\s+(?P<title>\S.*?)\s*$"
)
_TOC_ENTRY = re.compile(
    r"^\s+(?:Appendix\s+(?P<app>[A-Z])\.?|(?P<num>\d+(?:\.\d+)*)\.?|(?P<sub>[A-Z](?:\.\d+)*)\.)\s+\S"
)


def strip_furniture(text: str) -> list[str]:
    """Lines of the document with BOM, form feeds, running headers and footers removed.

    The blank lines that pad a page break are dropped with it, so a paragraph broken
    across pages is one paragraph again.
    """
    text = text.lstrip("\ufeff")
    lines = text.split("\n")
    out: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if _FOOTER.match(line):
            while out and not out[-1].strip():
                out.pop()
            # A page that ends on a finished sentence most likely ends a paragraph: keep
            # one blank line there; otherwise the paragraph continues on the next page.
            ended = out and out[-1].rstrip().endswith((".", ":"))
            i += 1
            # skip the form feed, the next page's running header, and the blank lines after it
            while i < len(lines) and (
                not lines[i].strip() or lines[i].strip() == "\f" or _RUNNING_HEADER.match(lines[i].lstrip("\f"))
            ):
                i += 1
            if ended:
                out.append("")
            continue
        out.append(line.replace("\f", ""))
        i += 1
    return out


def _section_id(rfc: str, m: re.Match) -> str:
    return f"{rfc}#{m.group('app') or m.group('num') or m.group('sub')}"


def toc_ids(rfc: str, text: str) -> list[str]:
    """Section ids listed in the RFC's own table of contents (the parser's test oracle)."""
    lines = strip_furniture(text)
    start = next(i for i, ln in enumerate(lines) if ln.strip() == "Table of Contents")
    ids = []
    for line in lines[start + 1 :]:
        if line and not line[0].isspace():
            break  # first column-0 line after the TOC ends it
        m = _TOC_ENTRY.match(line)
        if m:
            ids.append(_section_id(rfc, m))
    return ids


def parse_sections(rfc: str, text: str) -> list[Section]:
    lines = strip_furniture(text)
    toc = next((i for i, ln in enumerate(lines) if ln.strip() == "Table of Contents"), None)
    if toc is None:
        raise CorpusError("no 'Table of Contents' line, so no sections can be found")
    body_start = next((i for i in range(toc + 1, len(lines)) if lines[i] and not lines[i][0].isspace()), None)
    if body_start is None:
        raise CorpusError("nothing follows the table of contents")
    sections: list[Section] = []
    current: tuple[str, str] | None = None
    buf: list[str] = []

    def flush() -> None:
        if current is not None:
            body = "\n".join(buf).strip("\n")
            sections.append(Section(id=current[0], title=current[1], text=_dedent(body)))

    for line in lines[body_start:]:
        if line and not line[0].isspace():
            # Every column-0 line is a heading; unnumbered ones (Acknowledgements, Index,
            # Authors' Addresses) end the previous section without starting a new one.
            flush()
            buf = []
            m = _HEADING.match(line)
            current = (_section_id(rfc, m), m.group("title")) if m else None
            continue
        if current is not None:
            buf.append(line)
    flush()
    return sections


def _dedent(body: str) -> str:
    lines = body.split("\n")
    indents = [len(ln) - len(ln.lstrip(" ")) for ln in lines if ln.strip()]
    cut = min(indents) if indents else 0
    return "\n".join(ln[cut:] if ln.strip() else "" for ln in lines)


def inventory(corpus: Corpus) -> dict:
    """Per RFC: sections, sections with prose of their own, words (``rag-contract sections``)."""
    rows: list[dict[str, Any]] = []
    for e in corpus.entries:
        secs = [s for s in corpus.sections if s.rfc == e.rfc]
        rows.append(
            {
                "rfc": e.rfc,
                "title": e.title,
                "sections": len(secs),
                "with_prose": sum(1 for s in secs if s.words),
                "words": sum(s.words for s in secs),
            }
        )
    total = {k: sum(r[k] for r in rows) for k in ("sections", "with_prose", "words")}
    return {"rfcs": rows, "total": total}
