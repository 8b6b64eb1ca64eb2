"""Sections -> chunks: fixed word windows that never span a section.

Contract: ``chunk_sections(sections, words, overlap)`` returns every section's words in
windows of ``words`` with ``overlap`` words shared between neighbours, in corpus order. A
chunk carries the id of the one section it came from, so every retrieval hit resolves to
a section. A section with no prose of its own (a heading over subsections) yields no chunk.
The parameters come from committed configuration (``eval/thresholds.yaml``, ``index``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from rag_contract.corpus.sections import Section
from rag_contract.text.words import unwrap_hyphens


class ChunkingError(ValueError):
    pass


@dataclass(frozen=True)
class ChunkParams:
    words: int
    overlap: int

    def __post_init__(self) -> None:
        if self.words < 1:
            raise ChunkingError(f"index.chunk_words: must be >= 1, got {self.words}")
        if not 0 <= self.overlap < self.words:
            raise ChunkingError(
                f"index.chunk_overlap: must be >= 0 and < chunk_words ({self.words}), got {self.overlap}"
            )

    @property
    def identity(self) -> str:
        return f"words={self.words};overlap={self.overlap};wrapped-hyphens=joined"


@dataclass(frozen=True)
class Chunk:
    id: str  # "rfc9111#4.2.1/0"
    section_id: str
    ordinal: int
    text: str


def chunk_sections(sections: Iterable[Section], params: ChunkParams) -> tuple[Chunk, ...]:
    stride = params.words - params.overlap
    chunks: list[Chunk] = []
    for section in sections:
        # rejoined, or a chunk would read "Max- Age" to BM25 and to the embedder
        words = unwrap_hyphens(section.text).split()
        if not words:
            continue
        start, ordinal = 0, 0
        while True:
            window = words[start : start + params.words]
            chunks.append(Chunk(f"{section.id}/{ordinal}", section.id, ordinal, " ".join(window)))
            if start + params.words >= len(words):
                break
            start += stride
            ordinal += 1
    return tuple(chunks)
