"""Ranking over one acquired Index: dense cosine, lexical BM25, their RRF hybrid, and a fused
section score that adds the sentence vectors.

Contract: ``rank_sections(index, query_text, query_vector, mode, k, rrf_k, fusion)`` returns the
top ``k`` *sections*, each with its score and best chunk. In ``dense``, ``lexical`` and
``hybrid`` a section ranks where its best chunk ranks. In ``fused`` a section's score is the
weighted sum of ``FUSION_FEATURES`` (weights committed in eval/thresholds.yaml, fitted by
``rag-contract calibrate`` with cross-validation): its best chunk's cosine, its best
sentence's cosine, its best chunk's BM25 relative to the query's best, the IDF-weighted share
of the question's words in its title, and the two cosines' gaps to the query's best.
Everything reads the one ``index`` passed in; nothing here looks anything up elsewhere. Ties
break by position in the index (chunk order, or section order in ``fused``), so the ranking is
a pure function of (index, query). Cost: matrix-vector products over the chunk and sentence
vectors plus one BM25 pass (see tests/bench_retrieval.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from rag_contract.config.thresholds import FUSION_FEATURES
from rag_contract.index.store import Index
from rag_contract.retrieval.vectors import best_per_group, similarities
from rag_contract.text.words import content_words

MODES = ("dense", "lexical", "hybrid", "fused")
RRF_K = 60  # the rank_fusion feature's constant (the usual one; not fitted)


@dataclass(frozen=True)
class Hit:
    section_id: str
    title: str
    score: float
    chunk_id: str | None  # the best chunk; None where a section is scored as a whole (fused)


def _order(scores: np.ndarray) -> np.ndarray:
    # Descending score, then ascending chunk position: a deterministic total order.
    return np.lexsort((np.arange(len(scores)), -scores.astype(np.float64)))


def chunk_scores(index: Index, query_text: str, query_vector: np.ndarray | None, mode: str, rrf_k: int) -> np.ndarray:
    if mode == "dense":
        if query_vector is None:
            raise ValueError("dense retrieval needs a query vector")
        return similarities(index.vectors, query_vector)
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


def _term_share(terms: set[str], inverted: Mapping[str, np.ndarray], n: int, index: Index) -> np.ndarray:
    """Per section: the IDF-weighted share of ``terms`` that ``inverted`` says the section has."""
    w = index.weights
    total = sum(w(t) for t in terms) or 1.0
    share = np.zeros(n, dtype=np.float64)
    for t in terms:
        rows = inverted.get(t)
        if rows is not None:
            share[rows] += w(t) / total
    return share


def _reciprocal_ranks(scores: np.ndarray, rrf_k: int) -> np.ndarray:
    ranks = np.empty(len(scores), dtype=np.float64)
    ranks[_order(scores)] = np.arange(1, len(scores) + 1)
    return 1.0 / (rrf_k + ranks)


def section_features(index: Index, query_text: str, query_vector: np.ndarray) -> np.ndarray:
    """(sections x FUSION_FEATURES), rows in ``index.section_order``.

    ``ancestor_title`` is the best title share among a section's ancestors (a question about a
    cookie's Path names the parent "Set-Cookie" too); ``coverage`` the share of the question's
    words anywhere in the passage; ``rank_fusion`` the reciprocal-rank fusion of the dense,
    sentence and lexical legs, scaled so one first place is about 1/3.
    """
    dense, sentence = vector_legs(index, query_vector)
    return section_columns(index, query_text, dense, sentence)


def vector_legs(index: Index, query_vector: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per section, in ``index.section_order``: the best chunk's and the best sentence's cosine."""
    n = len(index.section_order)
    return (
        best_per_group(similarities(index.vectors, query_vector), index.chunk_runs, n),
        best_per_group(similarities(index.sentence_vectors, query_vector), index.sentence_runs, n),
    )


def section_columns(index: Index, query_text: str, dense: np.ndarray, sentence: np.ndarray) -> np.ndarray:
    """``section_features`` with the two vector legs given (``vector_legs``, possibly of another
    embedder's vectors over the same sections); every other column from ``index``."""
    n = len(index.section_order)
    bm25 = best_per_group(index.lexical.scores(query_text), index.chunk_runs, n)
    lexical = np.maximum(bm25, 0.0) / bm25.max() if bm25.max() > 0 else np.zeros_like(bm25)
    terms = set(content_words(query_text))
    title = _term_share(terms, index.title_index, n, index)
    ancestor_title = np.append(title, 0.0)[index.ancestors].max(axis=1)
    coverage = _term_share(terms, index.content_index, n, index)
    fused = sum(_reciprocal_ranks(leg, RRF_K) for leg in (dense, sentence, lexical)) * (RRF_K + 1) / 3
    gaps = (dense - dense.max(), sentence - sentence.max())
    return np.stack([dense, sentence, lexical, title, *gaps, ancestor_title, coverage, fused], axis=1)


def fused_scores(index: Index, query_text: str, query_vector: np.ndarray, fusion: Mapping[str, float]) -> np.ndarray:
    weights = np.array([fusion[f] for f in FUSION_FEATURES])
    return np.einsum("ij,j->i", section_features(index, query_text, query_vector), weights)


def _rank_fused(
    index: Index, query_text: str, query_vector: np.ndarray | None, k: int, fusion: Mapping[str, float] | None
) -> tuple[Hit, ...]:
    if query_vector is None or fusion is None:
        raise ValueError("fused retrieval needs a query vector and the fusion weights")
    scores = fused_scores(index, query_text, query_vector, fusion)
    hits = []
    for i in _order(scores)[:k]:
        sid = index.section_order[i]
        hits.append(Hit(sid, index.sections[sid].title, float(scores[i]), None))
    return tuple(hits)


def rank_sections(
    index: Index,
    query_text: str,
    query_vector: np.ndarray | None,
    mode: str,
    k: int,
    rrf_k: int = 60,
    fusion: Mapping[str, float] | None = None,
) -> tuple[Hit, ...]:
    if mode == "fused":
        return _rank_fused(index, query_text, query_vector, k, fusion)
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
