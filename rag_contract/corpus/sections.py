"""What every corpus format produces: ordered, nested sections with stable, readable ids.

Contract: a ``Section`` is one heading's text (the heading line itself excluded), its id is
``<document>#<anchor>`` (or the bare document name for a page's lead section), and ``parent``
is the id of the section it nests in (``None`` for a top-level one). Everything above the
corpus layer (chunking, sentences, retrieval, grounding, the gate) reads only these fields,
never a format's own structure.

A format that knows its blocks (Markdown) also gives ``blocks``: the body cut into typed
``Block``s (``KINDS``: prose, a code block, a list item, a table row) as a reader reads them
(``text`` stays the format's source text, which chunks and evidence read); the sentence
splitter never lets a unit cross a block, so a quoted sentence is prose or code, never both.
A format that gives none (RFC text, HTML) has all of its text read as prose. ``dropped``
names what the format left out that a reader of the rendered page would see (a mkdocstrings
``::: module.Name`` directive's target), so the inventory can count it. Neither field is part
of a section's equality, and neither is stored in the index: a section read back from an
index has none (its sentences are stored with their kinds).
"""

from __future__ import annotations

from dataclasses import dataclass, field

PROSE = "prose"
CODE = "code"  # a fenced or indented code block (a unit: one group of lines between blank lines)
ITEM = "item"  # a list item's text
ROW = "row"  # one table row, its cells joined by " | "
KINDS = (PROSE, CODE, ITEM, ROW)


@dataclass(frozen=True)
class Block:
    kind: str  # one of KINDS
    text: str  # code as written (lines kept); other kinds as read, markup left out

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"block kind {self.kind!r} is not one of {', '.join(KINDS)}")


@dataclass(frozen=True)
class Section:
    id: str  # "rfc9110#9.2.1", "middleware.md#corsmiddleware", "middleware.md"
    title: str
    text: str  # body text without the heading line
    parent: str | None = None  # the id of the section this one nests in
    blocks: tuple[Block, ...] = field(default=(), compare=False, repr=False)
    dropped: tuple[str, ...] = field(default=(), compare=False, repr=False)

    @property
    def document(self) -> str:
        """The document this section belongs to: its id up to the ``#``."""
        return self.id.split("#", 1)[0]

    @property
    def words(self) -> int:
        return len(self.text.split())
