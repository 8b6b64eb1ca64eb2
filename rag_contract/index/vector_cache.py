"""Vectors already computed, found again by what they embed: a rebuild embeds only new text.

Contract: ``vector_key(identity, text)`` is the sha256 of the embedder identity and the exact
text embedded; an embedder gives one text the same vector whatever else it embeds (the local
one computes each row of a batch on its own, padding masked out), so a vector stored under its
key is the vector a fresh build would compute, byte for byte. ``VectorCache`` maps keys to
read-only float32 rows; it is made from the arrays of an index already built (no second copy
is kept on disk), and ``missing`` lists, once each and in first-seen order, the texts it holds
no vector for.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType

import numpy as np


def vector_key(identity: str, text: str) -> str:
    return hashlib.sha256(f"{identity}\n{text}".encode()).hexdigest()


@dataclass(frozen=True)
class VectorCache:
    rows: Mapping[str, np.ndarray] = field(default_factory=lambda: MappingProxyType({}))

    @staticmethod
    def of(identity: str, texts: Sequence[str], vectors: np.ndarray) -> VectorCache:
        """Row ``i`` of ``vectors`` as the vector of ``texts[i]`` under ``identity``."""
        if len(texts) != len(vectors):
            raise ValueError(f"{len(texts)} texts for {len(vectors)} vectors")
        rows = {}
        for text, vec in zip(texts, vectors, strict=True):
            row = np.array(vec, dtype=np.float32)
            row.setflags(write=False)
            rows[vector_key(identity, text)] = row
        return VectorCache(MappingProxyType(rows))

    def merged(self, other: VectorCache) -> VectorCache:
        return VectorCache(MappingProxyType({**self.rows, **other.rows}))

    def missing(self, identity: str, texts: Iterable[str]) -> tuple[str, ...]:
        """The texts with no vector under ``identity``, each once, in the order first met."""
        return tuple(t for t in dict.fromkeys(texts) if vector_key(identity, t) not in self.rows)

    def stack(self, identity: str, texts: Sequence[str], dimensions: int) -> np.ndarray:
        """The vectors of ``texts`` as one (len(texts), dimensions) float32 array; KeyError names
        the first text without one."""
        if not texts:
            return np.zeros((0, dimensions), dtype=np.float32)
        out = np.empty((len(texts), dimensions), dtype=np.float32)
        for i, text in enumerate(texts):
            row = self.rows.get(vector_key(identity, text))
            if row is None:
                raise KeyError(f"no vector for {text[:60]!r}")
            out[i] = row
        return out

    def __len__(self) -> int:
        return len(self.rows)
