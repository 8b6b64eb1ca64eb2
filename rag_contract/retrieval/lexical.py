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

import bm25s
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


def _bm25() -> bm25s.BM25:
    return bm25s.BM25(k1=1.5, b=0.75, method="lucene")


class Lexical:
    """BM25 over a fixed list of texts; ``scores(query)`` is one float per text."""

    def __init__(self, texts: Sequence[str]):
        self._bm25 = _bm25()
        self._bm25.index([tokenize(t) or [""] for t in texts], show_progress=False)
        self._n = len(texts)

    @classmethod
    def restored(cls, state: Bm25State) -> Lexical:
        """The ``Lexical`` whose ``state()`` is ``state``: scores equal, bit for bit, those of
        the ``Lexical`` that gave it (what ``bm25s.BM25.load`` sets, from memory)."""
        bm25 = _bm25()
        bm25.vocab_dict = dict(state.vocab)
        bm25.unique_token_ids_set = set(bm25.vocab_dict.values())
        bm25.scores = {"data": state.data, "indices": state.indices, "indptr": state.indptr, "num_docs": state.num_docs}
        bm25.nonoccurrence_array = None  # lucene scores nothing for a token a text lacks
        lexical = cls.__new__(cls)
        lexical._bm25, lexical._n = bm25, state.num_docs
        return lexical

    def state(self) -> Bm25State:
        """The statistics with tokens numbered in sorted order (bm25s numbers them in set order,
        which changes from process to process), so the same texts give the same arrays."""
        s = self._bm25.scores
        vocab, indptr = self._bm25.vocab_dict, s["indptr"]
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

    def scores(self, query: str) -> np.ndarray:
        toks = tokenize(query)
        if not toks:
            return np.zeros(self._n, dtype=np.float32)
        return np.asarray(self._bm25.get_scores(toks), dtype=np.float32)
