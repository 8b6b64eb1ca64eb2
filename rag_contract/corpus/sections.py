"""What every corpus format produces: ordered, nested sections with stable, readable ids.

Contract: a ``Section`` is one heading's text (the heading line itself excluded), its id is
``<document>#<anchor>`` (or the bare document name for a page's lead section), and ``parent``
is the id of the section it nests in (``None`` for a top-level one). Everything above the
corpus layer (chunking, sentences, retrieval, grounding, the gate) reads only these fields,
never a format's own structure.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Section:
    id: str  # "rfc9110#9.2.1", "middleware.md#corsmiddleware", "middleware.md"
    title: str
    text: str  # body text without the heading line
    parent: str | None = None  # the id of the section this one nests in

    @property
    def document(self) -> str:
        """The document this section belongs to: its id up to the ``#``."""
        return self.id.split("#", 1)[0]

    @property
    def words(self) -> int:
        return len(self.text.split())
