"""Term weights: how much a question word says, measured over the index's sections.

Contract: ``TermWeights.of(content_sets)`` is the inverse document frequency of each content
word over the given sections (``log((n + 1) / (df + 1))``); a word no section uses weighs the
most (``unseen``), so matching a question's generic words (``cookie``, ``attribute``) is never
worth as much as matching the word that names its subject (``SameSite``).
``coverage(terms, found, weights)`` is the weighted share of ``terms`` present in ``found``;
``covering(terms, weights)`` is the same share as a function of ``found``, for one question's
terms measured against many sentences (their total weight is summed once).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType


@dataclass(frozen=True)
class TermWeights:
    idf: Mapping[str, float]
    unseen: float

    def __call__(self, term: str) -> float:
        return self.idf.get(term, self.unseen)

    def known(self, term: str) -> bool:
        return term in self.idf

    @classmethod
    def of(cls, content_sets: Sequence[frozenset[str]]) -> TermWeights:
        n = len(content_sets)
        df = Counter(t for terms in content_sets for t in terms)
        idf = {t: math.log((n + 1) / (c + 1)) for t, c in df.items()}
        return cls(MappingProxyType(idf), math.log(n + 1))

    @classmethod
    def uniform(cls) -> TermWeights:
        return cls(MappingProxyType({}), 1.0)


def covering(terms: Iterable[str], weights: TermWeights) -> Callable[[set[str] | frozenset[str]], float]:
    asked = set(terms)
    weight = {t: weights(t) for t in asked}
    total = sum(weight[t] for t in asked)

    def share(found: set[str] | frozenset[str]) -> float:
        return sum(weight[t] for t in asked & found) / total if total > 0 else 0.0

    return share


def coverage(terms: Iterable[str], found: set[str] | frozenset[str], weights: TermWeights) -> float:
    return covering(terms, weights)(found)
