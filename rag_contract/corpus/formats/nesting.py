"""Headings to nested sections, for the formats whose headings carry a level (Markdown, HTML).

Contract: ``Outline(document, lead_title)`` starts with the page's lead section (id: the bare
document name, titled from the manifest) and ``heading(level, title, anchor)`` opens a section
``document#anchor`` nested in the nearest open heading of a lower level, else in the lead
section; ``add(text)`` appends body text to the section open last, ``block(block)`` a typed
block of it (a format that types its blocks gives both), and ``drop(what)`` notes markup the
format left out. ``sections()`` returns them in document order, each body without trailing
spaces or surrounding blank lines, with its blocks and drops.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from rag_contract.corpus.formats.slugs import Anchors
from rag_contract.corpus.sections import Block, Section


@dataclass
class _Open:
    id: str
    title: str
    parent: str | None
    level: int
    body: list[str] = field(default_factory=list)
    blocks: list[Block] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)


class Outline:
    def __init__(self, document: str, lead_title: str) -> None:
        self._document = document
        self._anchors = Anchors()
        self._all = [_Open(document, lead_title, None, 0)]
        self._stack = [self._all[0]]

    def heading(self, level: int, title: str, anchor: str) -> None:
        while self._stack[-1].level >= level:
            self._stack.pop()
        section = _Open(f"{self._document}#{self._anchors.unique(anchor)}", title, self._stack[-1].id, level)
        self._all.append(section)
        self._stack.append(section)

    def add(self, text: str) -> None:
        self._all[-1].body.append(text)

    def block(self, block: Block) -> None:
        self._all[-1].blocks.append(block)

    def drop(self, what: str) -> None:
        self._all[-1].dropped.append(what)

    def at_line_start(self) -> bool:
        """Whether the text added last ended a line (or nothing was added since the heading)."""
        body = self._all[-1].body
        return not body or body[-1].endswith("\n")

    def sections(self) -> list[Section]:
        out = []
        for s in self._all:
            text = _tidy("".join(s.body))
            out.append(Section(s.id, s.title, text, s.parent, tuple(s.blocks), tuple(s.dropped)))
        return out


def _tidy(text: str) -> str:
    """Trailing spaces of each line and blank lines around the text removed."""
    return "\n".join(line.rstrip() for line in text.split("\n")).strip("\n")
