"""The lexical leg: BM25 (bm25s) over the same chunks the dense leg embeds.

The tokenizer matters more than the library, so it is ours and named in the index's
identity: lower-case, words and numbers, hyphenated and dotted forms kept whole *and* split
(``max-age`` -> ``max-age``, ``max``, ``age``), English stopwords dropped, a plural ``s``
folded. BM25 statistics are a pure function of the chunks, rebuilt in ~0.1 s at load.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import bm25s
import numpy as np

TOKENIZER_IDENTITY = "lexical-v1;bm25s-lucene;k1=1.5;b=0.75"

_TOKEN = re.compile(r"[a-z0-9]+(?:[-_.][a-z0-9]+)*")
STOPWORDS = frozenset(
    [
        "a",
        "about",
        "above",
        "after",
        "again",
        "against",
        "all",
        "am",
        "an",
        "and",
        "any",
        "are",
        "as",
        "at",
        "be",
        "because",
        "been",
        "before",
        "being",
        "below",
        "between",
        "both",
        "but",
        "by",
        "can",
        "could",
        "did",
        "do",
        "does",
        "doing",
        "down",
        "during",
        "each",
        "few",
        "for",
        "from",
        "further",
        "had",
        "has",
        "have",
        "having",
        "he",
        "her",
        "here",
        "hers",
        "him",
        "his",
        "how",
        "i",
        "if",
        "in",
        "into",
        "is",
        "it",
        "its",
        "itself",
        "just",
        "me",
        "more",
        "most",
        "my",
        "no",
        "nor",
        "not",
        "of",
        "off",
        "on",
        "once",
        "only",
        "or",
        "other",
        "our",
        "ours",
        "out",
        "over",
        "own",
        "same",
        "she",
        "should",
        "so",
        "some",
        "such",
        "than",
        "that",
        "the",
        "their",
        "theirs",
        "them",
        "then",
        "there",
        "these",
        "they",
        "this",
        "those",
        "through",
        "to",
        "too",
        "under",
        "until",
        "up",
        "very",
        "was",
        "we",
        "were",
        "what",
        "when",
        "where",
        "which",
        "while",
        "who",
        "whom",
        "why",
        "will",
        "with",
        "would",
        "you",
        "your",
        "yours",
    ]
)


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


class Lexical:
    """BM25 over a fixed list of texts; ``scores(query)`` is one float per text."""

    def __init__(self, texts: Sequence[str]):
        self._bm25 = bm25s.BM25(k1=1.5, b=0.75, method="lucene")
        self._bm25.index([tokenize(t) or [""] for t in texts], show_progress=False)
        self._n = len(texts)

    def scores(self, query: str) -> np.ndarray:
        toks = tokenize(query)
        if not toks:
            return np.zeros(self._n, dtype=np.float32)
        return np.asarray(self._bm25.get_scores(toks), dtype=np.float32)
