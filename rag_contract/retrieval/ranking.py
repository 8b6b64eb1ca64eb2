"""Ranking over one acquired Index: dense cosine, lexical BM25, and their RRF hybrid.

Contract: ``rank_sections(index, query_text, query_vector, mode, k, rrf_k)`` returns the top
``k`` *sections* (a section ranks where its best chunk ranks), each with its score and best
chunk. Everything reads the one ``index`` passed in; nothing here looks anything up
elsewhere. Ties break by chunk order in the index, so the ranking is a pure function of
(index, query). Cost: one (chunks x 384) matrix-vector product plus one BM25 pass, well under a
millisecond (see tests/bench_retrieval.py).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from rag_contract.index.store import Index

MODES = ("dense", "lexical", "hybrid")


@dataclass(frozen=True)
class Hit:
    section_id: str
    title: str
    score: float
    chunk_id: str


def _order(scores: np.ndarray) -> np.ndarray:
    # Descending score, then ascending chunk position: a deterministic total order.
    return np.lexsort((np.arange(len(scores)), -scores.astype(np.float64)))


def chunk_scores(index: Index, query_text: str, query_vector: np.ndarray | None, mode: str, rrf_k: int) -> np.ndarray:
    if mode == "dense":
        if query_vector is None:
            raise ValueError("dense retrieval needs a query vector")
        return index.vectors @ query_vector
    if mode == "lexical":
        return index.lexical.scores(query_text)
    if mode == "hybrid":
        n = len(index.chunks)
        fused = np.zeros(n, dtype=np.float64)
        for leg in ("dense", "lexical"):
            ranks = np.empty(n, dtype=np.int64)
            ranks[_order(chunk_scores(index, query_text, query_vector, leg, rrf_k))] = np.arange(1, n + 1)
            fused += 1.0 / (rrf_k + ranks)
        return fused
    raise ValueError(f"unknown retrieval mode {mode!r}; known: {list(MODES)}")


def rank_sections(
    index: Index, query_text: str, query_vector: np.ndarray | None, mode: str, k: int, rrf_k: int = 60
) -> tuple[Hit, ...]:
    scores = chunk_scores(index, query_text, query_vector, mode, rrf_k)
    hits: list[Hit] = []
    seen: set[str] = set()
    for i in _order(scores):
        chunk = index.chunks[i]
        if chunk.section_id in seen:
            continue
        seen.add(chunk.section_id)
        hits.append(Hit(chunk.section_id, index.sections[chunk.section_id].title, float(scores[i]), chunk.id))
        if len(hits) == k:
            break
    return tuple(hits)
