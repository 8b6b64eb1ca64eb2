"""English: how common a word is in English at large, from wordfreq's offline data.

A word the corpus never uses tells little by itself: "crawler" and "hpack" are both absent from
the RFCs, but one is an ordinary word an engineer uses to describe a situation and the other is
the name of something. The Zipf frequency (log10 of occurrences per billion words; "the" is
about 7.7, a name nobody outside a field uses is below 2) is what tells them apart. The data
ships inside the package: no network, the same figure on every machine.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache

from wordfreq import zipf_frequency

# A lower-cased word -> its Zipf frequency in English. The first call loads the word list
# (about 0.1 s): a request path makes that call before its first request.
Frequency = Callable[[str], float]


@lru_cache(maxsize=1 << 14)
def zipf(word: str) -> float:
    """The Zipf frequency of ``word`` (already lower-cased) in English; 0.0 when never seen."""
    return zipf_frequency(word, "en")
