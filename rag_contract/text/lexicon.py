"""A lexicon: what a corpus's answering sections say, for looking a question's words up.

Built once per index from the sections that answer (``corpus.roles`` leaves out references,
acknowledgements and the like): their content words, the first ``STEM`` letters of each long
word (so "tunnelling" finds "tunnel", "serializer" finds "serialization"), and their text
lower-cased with white space collapsed, for names and phrases the tokeniser would split.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cached_property

from rag_contract.text.words import content_word

_RUN = re.compile(r"[\w-]+")
STEM = 6  # a corpus word sharing this many leading letters is the same word ("tunnelling", "tunnel")


def unsaid(words: Sequence[str], said: Iterable[str]) -> tuple[str, ...]:
    """The ``words`` that are neither among ``said`` nor share their first ``STEM`` letters with
    one of them ("compared", "compare"), in order."""
    said_set = set(said)
    stems = {w[:STEM] for w in said_set if len(w) >= STEM}
    return tuple(w for w in words if not (w in said_set or (len(w) >= STEM and w[:STEM] in stems)))


@dataclass(frozen=True)
class Lexicon:
    """What the answering sections of a corpus say: their content words and their text
    (lower-cased, white space collapsed). Sections that never answer are not in it."""

    words: frozenset[str]
    text: str
    stems: frozenset[str]

    @classmethod
    def of(cls, words: frozenset[str], text: str) -> Lexicon:
        """Compounds also count written solid ("keep-alive" is "keepalive")."""
        solid = frozenset(w.replace("-", "") for w in words if "-" in w)
        return cls(words | solid, text, frozenset(w[:STEM] for w in words if len(w) >= STEM and w.isalpha()))

    @cached_property
    def runs(self) -> frozenset[str]:
        """The text's maximal runs of word characters and hyphens: found on the first lookup that
        needs them (~20 ms over the RFC corpus), not when an index loads."""
        return frozenset(_RUN.findall(self.text))

    def knows(self, word: str) -> bool:
        """The corpus writes this word (any case, plural or not), or one sharing its stem."""
        low = word.lower()
        form = content_word(word)
        if low in self.words or (form is not None and form in self.words):
            return True
        if len(low) >= STEM and low[:STEM] in self.stems:
            return True
        if _RUN.fullmatch(low):
            # a run of word characters stands alone in the text exactly when it is one of its runs:
            # a set lookup instead of a scan of the whole text (~10 ms)
            return low in self.runs
        return re.search(rf"(?<![\w-]){re.escape(low)}(?![\w-])", self.text) is not None

    def says(self, phrase: str) -> bool:
        return " ".join(phrase.lower().split()) in self.text

    def names(self, name: str, kind: str) -> bool:
        """The text calls ``name`` a ``kind`` ("max-age directive"), with at most one word
        between ("private response directive")."""
        pattern = rf"(?<![\w-]){re.escape(name.lower())}(?![\w-])\W{{0,2}}(?:[\w-]+\s+)?{re.escape(kind.lower())}"
        return re.search(pattern, self.text) is not None
