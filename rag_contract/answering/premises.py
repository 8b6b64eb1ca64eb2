"""What a question takes as given: the requirements it states as the specification's.

A question can carry a claim of its own: "RFC 8259 reserves member names starting with '$', so
which prefix ...?", "Given that the field names in a Vary header have to be listed in
alphabetical order, should ...?". Every word of such a premise can be the corpus's while the
statement is not, and an answer that takes it on stands on nothing. One rule, deterministic, no
model: a premise (``premises``) stands only if the kept claims say enough of its words, and
every number it states (``unsupported_premise``); otherwise the answer stops short, naming the
words no claim says.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from rag_contract.answering.asked import NUMBER_WORDS, sentences
from rag_contract.text.lexicon import unsaid
from rag_contract.text.words import content_words

# A statement of what the specification requires, made by the question rather than asked: "RFC
# 8259 reserves member names starting with '$'", "The HTTP spec caps redirects at five, right?",
# "Given that the field names ... have to be listed in alphabetical order, ...". Asking what a
# document says ("Does the URI syntax say ...?") states nothing, nor does the engineer's own
# situation ("since we never asked for one").
_SPEC = (
    r"(?:rfc\s*\d+|http(?:/[\d.]+)?(?:\s+caching)?|json|the\s+uri\s+syntax"
    r"|the\s+(?:spec|specification|standard|rfc|docs?|(?:json|cookie|uri|http|caching)\s+(?:rfc|spec|specification)))"
)
_ATTRIBUTED = re.compile(
    rf"^{_SPEC}\s+(?:[\w-]+\s+){{0,2}}?"
    r"(?:requires?|says?|mandates?|caps|limits|forbids|defines|reserves|must|only\s+allows?)\b[^?;]*",
    re.IGNORECASE,
)
_GRANTED = re.compile(
    r"\b(?:given\s+that|since|because)\s+(?!(?:we|our|i|my|you|your|they|their)\b)[^?.;,]*?"
    r"\b(?:must|requires?|required|has\s+to|have\s+to|mandates?|is\s+supposed\s+to)\b[^?.;,]*",
    re.IGNORECASE,
)
# Words of attribution and obligation: they say who requires, not what.
_OBLIGATION = frozenset(
    content_words(
        "rfc http spec specification standard docs doc require requires required say says mandate mandates must "
        "has have given since because cap caps limit limits forbid forbids define defines reserve reserves only "
        "allow allows supposed right json uri syntax caching cookie"
    )
)


def premises(question: str) -> tuple[tuple[str, ...], ...]:
    """The content words of each requirement the question states as the specification's, its
    words of attribution and obligation left out; a premise of no other word is none."""
    out: list[tuple[str, ...]] = []
    for s in sentences(question):
        spans = [m.group(0) for m in _GRANTED.finditer(s)]
        if (m := _ATTRIBUTED.match(s)) is not None:
            spans.insert(
                0,
                re.split(
                    r",\s*(?:right|so|and|but|which|what|how|should|do|does|is|can|since|because|given)\b", m.group(0)
                )[0],
            )
        for span in spans:
            words = tuple(w for w in dict.fromkeys(content_words(span)) if w not in _OBLIGATION)
            if words:
                out.append(words)
    return tuple(out)


# The share of a premise's words the kept claims must say for the premise to stand on them.
PREMISE_SUPPORT = 2 / 3


def _number(word: str) -> bool:
    """A count or a size written as digits or in words ("32", "five"); a version such as "1.1"
    is a name."""
    return word.isdigit() or word in NUMBER_WORDS


def unsupported_premise(stated: Sequence[tuple[str, ...]], said: Iterable[str]) -> tuple[str, ...]:
    """The words ``said`` (the kept claims' words and their cited titles') lacks, nor a word
    sharing its stem, of the first of the ``stated`` premises whose words it holds less than
    ``PREMISE_SUPPORT`` of, or one of whose numbers it lacks; none when every premise stands.
    A number is what a premise claims ("caps cookie names at 32 characters"): claims about
    cookie names and characters that never say 32 do not bear it out."""
    said = set(said)
    for words in stated:
        missing = unsaid(words, said)
        if len(words) - len(missing) < PREMISE_SUPPORT * len(words) or any(_number(w) for w in missing):
            return missing
    return ()
