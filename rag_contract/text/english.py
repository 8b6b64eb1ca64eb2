"""English: how common a word is in English at large.

A word the corpus never uses tells little by itself: "crawler" and "hpack" are both absent from
the RFCs, but one is an ordinary word an engineer uses to describe a situation and the other is
the name of something. The Zipf frequency (log10 of occurrences per billion words; "the" is about
7.7, a name nobody outside a field uses is below 2) tells them apart.

The figures are wordfreq's large English list, floored to a tenth and kept for the words at 2.0
or more (``data/english.tsv.gz``, written by ``python -m tools.english_words``; a test re-derives
it): the rules only ask whether a word is below a bar above that floor, so a word under it reads
0.0. Loading it takes about 60 ms and 1.5 MB (a sorted string, not a dict of 95,000 words: ~9 MB),
against wordfreq's 0.3 s and 37 MB.
"""

from __future__ import annotations

import gzip
import math
from array import array
from bisect import bisect_left
from collections.abc import Callable
from functools import cache
from importlib.resources import files
from itertools import accumulate

# A lower-cased word -> its Zipf frequency in English (0.0 below the list's floor). The first
# call loads the list: a request path makes that call before its first request.
Frequency = Callable[[str], float]


class _Sorted:
    """The list's words sorted, in one string with their offsets, and each one's band: the
    figures a dict would give, bit for bit, in ~1.2 MB where a dict of the 95,000 words held
    ~9 MB for the life of a served process. A lookup is a binary search (~17 steps, a few
    microseconds; an answer makes about 17)."""

    def __init__(self, words: list[str], bands: list[int], values: tuple[float, ...]):
        order = sorted(range(len(words)), key=words.__getitem__)
        self._text = "".join([words[i] for i in order])
        self._starts = array("I", accumulate([len(words[i]) for i in order], initial=0))
        self._band = array("B", [bands[i] for i in order])
        self._values = values
        self._n = len(words)

    def __len__(self) -> int:
        return self._n

    def __getitem__(self, i: int) -> str:
        return self._text[self._starts[i] : self._starts[i + 1]]

    def get(self, word: str, default: float) -> float:
        i = bisect_left(self, word)
        return self._values[self._band[i]] if i < self._n and self[i] == word else default


@cache
def _bands() -> _Sorted:
    raw = gzip.decompress(files("rag_contract.text").joinpath("data/english.tsv.gz").read_bytes())
    words: list[str] = []
    bands: list[int] = []
    values: list[float] = []
    for line in raw.decode("utf-8").splitlines():
        band, _, listed = line.partition("\t")
        values.append(float(band))
        some = listed.split()
        words += some
        bands += [len(values) - 1] * len(some)
    return _Sorted(words, bands, tuple(values))


def zipf(word: str) -> float:
    """The Zipf frequency of ``word`` (already lower-cased) in English, floored to a tenth; 0.0
    when it is below 2.0 or unknown. A hyphenated compound reads as wordfreq reads a phrase: its
    parts' frequencies combined harmonically ("back-to-back" is common, "stale-while-revalidate"
    is not), 0.0 when a part is."""
    bands = _bands()
    if "-" not in word:
        return bands.get(word, 0.0)
    parts = [bands.get(p, 0.0) for p in word.split("-") if p]
    if not parts or min(parts) == 0.0:
        return 0.0
    return math.floor(10 * -math.log10(sum(10**-z for z in parts)) + 1e-9) / 10
