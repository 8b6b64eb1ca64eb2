"""The section ids a question can expect: every section's id, title and parent, in corpus order.

Contract: ``section_rows(sections, grep)`` lists each section as a ``SectionRow`` (id, title,
parent id or None), in the order given; with ``grep``, only the sections whose id or title
holds it, compared case-insensitively (a blank ``grep`` selects every section). The CLI
(``rag-contract sections``) and the served ``/sections`` page both present this list.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from rag_contract.corpus.sections import Section


@dataclass(frozen=True)
class SectionRow:
    id: str
    title: str
    parent: str | None

    def as_dict(self) -> dict[str, str | None]:
        return {"id": self.id, "title": self.title, "parent": self.parent}


def section_rows(sections: Iterable[Section], grep: str | None = None) -> tuple[SectionRow, ...]:
    """Every section as a row, or (``grep``) those whose id or title holds it, case-insensitively."""
    needle = (grep or "").strip().casefold()
    return tuple(
        SectionRow(s.id, s.title, s.parent)
        for s in sections
        if not needle or needle in s.id.casefold() or needle in s.title.casefold()
    )
