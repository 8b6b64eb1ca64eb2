"""Sections that never answer: a document's apparatus rather than its content.

A bibliography entry names a specification without saying anything it specifies; an
acknowledgement or an author's address says nothing about the subject at all. Such sections stay
in the index (a reader may look a reference up, and retrieval is measured over every section),
but no answer quotes one: a drafter is never offered them, and a claim that cites one is
withdrawn. Which sections they are is read from the document's own structure, by title, the same
way for every format: the titles below are the ones RFCs, books and documentation sites give
this apparatus.
"""

from __future__ import annotations

import re

# A whole title, case-insensitive, with an optional leading "Appendix X." already stripped by
# the parser: "References", "Normative References", "Acknowledgments", "Authors' Addresses".
_APPARATUS = re.compile(
    r"(?:(?:normative|informative|other)\s+)?references|bibliography|works\s+cited"
    r"|acknowledge?ments?|contributors|credits"
    r"|authors?(?:['\u2019]s?)?\s+(?:address(?:es)?|information)"
    r"|copyright(?:\s+notice)?|full\s+copyright\s+statement|intellectual\s+property"
    r"|status\s+of\s+this\s+memo|table\s+of\s+contents|index",
    re.IGNORECASE,
)


def never_answers(title: str) -> bool:
    """True when a section titled ``title`` is apparatus: references, acknowledgements,
    authors' addresses, copyright and the like. Such a section is never quoted as an answer."""
    return _APPARATUS.fullmatch(title.strip().rstrip(".:")) is not None
