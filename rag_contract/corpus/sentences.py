"""Sections to sentences: the unit of evidence a claim quotes and the index embeds.

Contract: ``sentences(text)`` splits prose into sentences of at least four words, whitespace
collapsed, line-wrapped hyphens rejoined. ``split_sections(sections)`` numbers every section's
units in document order, each with its ``kind`` (``sections.KINDS``): a section with typed
blocks (Markdown) is split block by block, so no unit crosses a block: prose and list items
into sentences (kind ``prose`` / ``item``), a table row as one unit (``row``), a code block
into its groups of lines between blank lines (``code``, its lines and relative indentation kept,
so it can be shown as code); a section without blocks (RFC text, HTML) is split as prose. A unit of
fewer than four words is dropped whatever its kind. ``joinable(a, b)`` is the rule a drafter
follows before quoting two units as one claim: never prose with code.

The splitter is part of the index's identity (``SPLITTER_IDENTITY``): changing how text is cut
changes what is embedded, so it renames the index. Which blocks a format gives is the format's
identity (``formats.markdown.IDENTITY``).
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass

from rag_contract.corpus.sections import CODE, KINDS, PROSE, ROW, Block, Section
from rag_contract.text.words import unwrap_hyphens

SPLITTER_IDENTITY = "sentences-v1"

# Sentence ends: ". " / "? " / "! " / ":" before a blank line. Abbreviations common in RFC
# prose ("e.g.", "i.e.", "etc.") are not ends; ABNF blocks become their own "sentences".
_SENT_END = re.compile(r"(?<!\be\.g)(?<!\bi\.e)(?<!\betc)(?<=[.?!])\s+(?=[A-Z\"(])|\n\s*\n")
_BLANK_LINES = re.compile(r"\n[ \t]*\n")
MIN_WORDS = 4


@dataclass(frozen=True)
class Sentence:
    section_id: str
    position: int  # 0-based, within its section
    text: str
    kind: str = PROSE  # one of sections.KINDS; a code unit's text keeps its line breaks

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"sentence kind {self.kind!r} is not one of {', '.join(KINDS)}")


def sentences(text: str) -> list[str]:
    out = []
    # a line break inside a hyphenated name ("If-\n   Modified-Since") is not a space
    for part in _SENT_END.split(unwrap_hyphens(text)):
        s = re.sub(r"\s+", " ", part).strip()
        if len(s.split()) >= MIN_WORDS:
            out.append(s)
    return out


def code_units(code: str) -> list[str]:
    """A code block's units: its groups of lines between blank lines, each as written but for the
    indentation its lines share (a group inside a function body reads from column 0), trailing
    spaces and surrounding blank lines; those of fewer than four words are left out."""
    out = []
    for group in _BLANK_LINES.split(code):
        lines = [line.rstrip() for line in group.split("\n")]
        text = textwrap.dedent("\n".join(lines)).strip("\n")
        if len(text.split()) >= MIN_WORDS:
            out.append(text)
    return out


def units(block: Block) -> list[str]:
    """The texts ``block`` is quoted as, by its kind."""
    if block.kind == CODE:
        return code_units(block.text)
    if block.kind == ROW:
        row = " ".join(block.text.split())
        return [row] if len(row.split()) >= MIN_WORDS else []
    return sentences(block.text)


def section_units(section: Section) -> list[tuple[str, str]]:
    """``(kind, text)`` of each unit of ``section``, in order."""
    if not section.blocks:
        return [(PROSE, s) for s in sentences(section.text)]
    return [(b.kind, u) for b in section.blocks for u in units(b)]


def split_sections(sections: Sequence[Section]) -> tuple[Sentence, ...]:
    return tuple(Sentence(s.id, i, text, kind) for s in sections for i, (kind, text) in enumerate(section_units(s)))


def joinable(first: str, second: str) -> bool:
    """Whether units of kinds ``first`` and ``second`` may be quoted together as one claim: a
    code unit is quoted alone, so a claim is prose or code, never both."""
    return CODE not in (first, second)


def embed_text(sentence: Sentence, title: str) -> str:
    """What is embedded for a sentence: its section title, then the sentence (as for chunks)."""
    return f"{title}: {sentence.text}"
