"""RFC plain text: numbered sections and appendices, the table of contents and page furniture left out.

Contract: ``parse_sections(rfc, text)`` turns one RFC into ``Section(id, title, text, parent)``
for every numbered section and appendix (``rfc9110#9.2.1``, ``rfc9110#A``), in document order;
``parent`` is the nearest enclosing numbered section the document has (``rfc9110#9.2`` for
``9.2.1``). The table of contents is not mistaken for sections, page furniture (form feeds,
running headers, ``[Page N]`` footers) is removed so a section spanning a page break reads as
one text, and the BOM of the RFCXML-era files is dropped. A file's sections are named by its
name without ``.txt`` (``rfc9110``).
"""

from __future__ import annotations

import re

from rag_contract.corpus.formats.decoding import decode
from rag_contract.corpus.sections import Section


class RfcTextError(ValueError):
    """The text is not an RFC this parser can section."""


def document(file: str) -> str:
    return file.removesuffix(".txt")


def parse(file: str, title: str, data: bytes) -> list[Section]:
    return parse_sections(document(file), decode(data, "an RFC text file"))


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
        raise RfcTextError("no 'Table of Contents' line, so no sections can be found")
    body_start = next((i for i in range(toc + 1, len(lines)) if lines[i] and not lines[i][0].isspace()), None)
    if body_start is None:
        raise RfcTextError("nothing follows the table of contents")
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
    return with_parents(sections)


def with_parents(sections: list[Section]) -> list[Section]:
    """Each section with its nearest enclosing section present (``2.1``, else ``2``, for ``2.1.3``)."""
    present = {s.id for s in sections}
    out = []
    for s in sections:
        parts = s.id.partition("#")[2].split(".")
        enclosing = (f"{s.document}#{'.'.join(parts[:k])}" for k in range(len(parts) - 1, 0, -1))
        out.append(Section(s.id, s.title, s.text, next((a for a in enclosing if a in present), None)))
    return out


def _dedent(body: str) -> str:
    lines = body.split("\n")
    indents = [len(ln) - len(ln.lstrip(" ")) for ln in lines if ln.strip()]
    cut = min(indents) if indents else 0
    return "\n".join(ln[cut:] if ln.strip() else "" for ln in lines)
