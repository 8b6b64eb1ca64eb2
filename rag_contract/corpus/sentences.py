"""Sections to sentences: the unit of evidence a claim quotes and the index embeds.

Contract: ``sentences(text)`` splits a section body into sentences of at least four words,
whitespace collapsed, line-wrapped hyphens rejoined; ``split_sections(sections)`` numbers them
per section in document order. The splitter is part of the index's identity
(``SPLITTER_IDENTITY``): changing it changes what is embedded, so it renames the index.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from rag_contract.corpus.sections import Section
from rag_contract.text.words import unwrap_hyphens

SPLITTER_IDENTITY = "sentences-v1"

# Sentence ends: ". " / "? " / "! " / ":" before a blank line. Abbreviations common in RFC
# prose ("e.g.", "i.e.", "etc.") are not ends; ABNF blocks become their own "sentences".
_SENT_END = re.compile(r"(?<!\be\.g)(?<!\bi\.e)(?<!\betc)(?<=[.?!])\s+(?=[A-Z\"(])|\n\s*\n")
MIN_WORDS = 4


@dataclass(frozen=True)
class Sentence:
    section_id: str
    position: int  # 0-based, within its section
    text: str


def sentences(text: str) -> list[str]:
    out = []
    # a line break inside a hyphenated name ("If-\n   Modified-Since") is not a space
    for part in _SENT_END.split(unwrap_hyphens(text)):
        s = re.sub(r"\s+", " ", part).strip()
        if len(s.split()) >= MIN_WORDS:
            out.append(s)
    return out


def split_sections(sections: Sequence[Section]) -> tuple[Sentence, ...]:
    return tuple(Sentence(s.id, i, t) for s in sections for i, t in enumerate(sentences(s.text)))


def embed_text(sentence: Sentence, title: str) -> str:
    """What is embedded for a sentence: its section title, then the sentence (as for chunks)."""
    return f"{title}: {sentence.text}"
