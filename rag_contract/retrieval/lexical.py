"""The lexical leg: BM25 (bm25s) over the same chunks the dense leg embeds.

The tokenizer matters more than the library, so it is ours and named in the index's
identity: lower-case, words and numbers, hyphenated and dotted forms kept whole *and* split
(``max-age`` -> ``max-age``, ``max``, ``age``), English stopwords dropped, a plural ``s``
folded. BM25 statistics are a pure function of the chunks: ``Lexical(texts)`` computes them
(~0.13 s for the committed index), ``Lexical.restored(state)`` takes them as ``state()`` gave
them, so the index stores them and a start does not recompute them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

import numpy as np

from rag_contract.text.words import FUNCTION_WORDS

TOKENIZER_IDENTITY = "lexical-v1;bm25s-lucene;k1=1.5;b=0.75"

_TOKEN = re.compile(r"[a-z0-9]+(?:[-_.][a-z0-9]+)*")
STOPWORDS = FUNCTION_WORDS


def fold(word: str) -> str:
    # Plural fold only: "caches" and "cache" should meet; anything cleverer is a stemmer.
    if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
        return word[:-1]
    return word


_PARTS = re.compile(r"[-_.]")  # compiled once: tokenising the index at start splits ~250k tokens


def tokenize(text: str) -> list[str]:
    out: list[str] = []
    for tok in _TOKEN.findall(text.lower()):
        parts = _PARTS.split(tok)
        if len(parts) > 1:
            out.append(tok)
        out.extend(fold(p) for p in parts if p and p not in STOPWORDS)
    return out


@dataclass(frozen=True, eq=False)
class Bm25State:
    """BM25 statistics as bm25s holds them: each token's column, and the (column x text)
    score matrix in compressed sparse column arrays, over ``num_docs`` texts."""

    vocab: Mapping[str, int]
    data: np.ndarray  # float32 score of each stored (token, text) pair
    indices: np.ndarray  # the text of each pair
    indptr: np.ndarray  # column i is data[indptr[i]:indptr[i + 1]]
    num_docs: int


class Lexical:
    """BM25 over a fixed list of texts; ``scores(query)`` is one float per text.

    ``Lexical(texts)`` computes the statistics with bm25s (the build); ``restored(state)``
    holds them as arrays and scores with bm25s's own arithmetic, written out here
    (``scores``), so a served process never imports bm25s (~11 MB and ~0.1 s of a start,
    tqdm with it)."""

    def __init__(self, texts: Sequence[str]):
        # Imported here: only a build computes statistics; serving restores them (class docstring).
        import bm25s  # noqa: PLC0415

        bm25 = bm25s.BM25(k1=1.5, b=0.75, method="lucene")
        bm25.index([tokenize(t) or [""] for t in texts], show_progress=False)
        # bm25s numbers tokens in set order, which changes from process to process: renumbered
        # in sorted order, so the same texts give the same arrays (``state``).
        self._state = _sorted_state(bm25.vocab_dict, bm25.scores)

    @classmethod
    def restored(cls, state: Bm25State) -> Lexical:
        """The ``Lexical`` whose ``state()`` is ``state``: scores equal, bit for bit, those of
        the ``Lexical`` that gave it."""
        lexical = cls.__new__(cls)
        lexical._state = state
        return lexical

    def state(self) -> Bm25State:
        """The statistics with tokens numbered in sorted order."""
        return self._state

    def scores(self, query: str) -> np.ndarray:
        """One float32 per text: bm25s's ``get_scores`` for the lucene method, step for step
        (each query token's stored scores added into zeros with ``np.add.at``, in query
        order; a token the texts lack adds nothing), so the sums are bit for bit its own."""
        s = self._state
        scores = np.zeros(s.num_docs, dtype=np.float32)
        columns = len(s.indptr) - 1
        for token in tokenize(query):
            column = s.vocab.get(token)
            if column is None or column >= columns:  # not in the texts (bm25s's empty token has no column)
                continue
            start, end = s.indptr[column], s.indptr[column + 1]
            np.add.at(scores, s.indices[start:end], s.data[start:end])
        return scores


def _sorted_state(vocab: Mapping[str, int], s: Mapping[str, Any]) -> Bm25State:
    """bm25s's statistics (``vocab_dict``, ``scores``) with tokens numbered in sorted order."""
    indptr = s["indptr"]
    columns = len(indptr) - 1
    tokens = sorted(t for t, i in vocab.items() if i < columns)
    old = np.array([vocab[t] for t in tokens], dtype=np.int64)
    starts, ends = indptr[old], indptr[old + 1]
    take = np.concatenate([np.arange(a, b) for a, b in zip(starts, ends, strict=True)] + [np.zeros(0, np.int64)])
    new_indptr = np.zeros(len(tokens) + 1, dtype=indptr.dtype)
    new_indptr[1:] = np.cumsum(ends - starts)
    renumbered = {t: i for i, t in enumerate(tokens)}
    # bm25s's empty token has no column; it keeps the last number, as bm25s gives it
    renumbered.update((t, len(renumbered)) for t, i in vocab.items() if i >= columns)
    return Bm25State(MappingProxyType(renumbered), s["data"][take], s["indices"][take], new_indptr, s["num_docs"])
