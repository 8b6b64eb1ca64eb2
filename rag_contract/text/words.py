"""Words: how every reader of text in the project splits it into tokens, literals and content words.

Grounding's rules, retrieval's lexical features, relevance and the extractive drafter all read
text through these functions, so they agree on what a word is. Nothing here knows an index, a
question or a claim: this is the lowest layer, imported by corpus, retrieval and answering alike.

Tokenisation (shared by both sides, so they agree): a token is a run of word characters
joined by internal ``-``, ``.``, ``'``; everything else (whitespace, quotes, brackets,
``=``, ``:``, ``/``, ``,``) separates.  So "max-age=3600" is "max-age" + "3600" and
"HTTP/1.1" is "HTTP" + "1.1".  A hyphen that ends a line before a word character is an
RFC line wrap inside a hyphenated word ("case-\\ninsensitive") and is rejoined.

Literals: tokens containing a digit (3600, 1.1, 304, IPv6), tokens with an internal
hyphen or underscore (max-age, Set-Cookie, If-None-Match, freshness_lifetime), mixed-case
tokens with an internal capital (HttpOnly, ClientHello), and dotted names whose parts are
longer than one letter (example.com, but not "e.g.").  All-caps words (HTTP, URI, GET,
MUST) are deliberately not literals - a faithful paraphrase introduces them freely - and
neither are single capitalised header names (Expires, Vary), which cannot be told apart
from a sentence-initial word; both still count as content words for rule 3.

Content words: lower-cased tokens minus stopwords and single letters, with plural
stemming ("responses" -> "response", "entries" -> "entry") applied to purely alphabetic
tokens.  Passages additionally index the parts of hyphen/underscore compounds, so a
paraphrase's "age" is covered by "max-age" - but only rule 3 sees those parts; rule 2
matches whole tokens.

Cost.  Per-token work is cached (the corpus has ~12k distinct whitespace chunks), and
``passage_terms`` warms the caches when an index is built.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache
from itertools import chain
from typing import cast

# An RFC line break right after a hyphen splits one hyphenated word ("Max-\n   Age").
_WRAPPED_HYPHEN = re.compile(r"(?<=\w)-[ \t]*\n[ \t]*(?=\w)")


def unwrap_hyphens(text: str) -> str:
    """``text`` with hyphenated words a plain-text document wrapped across lines joined again ("Max-Age")."""
    return _WRAPPED_HYPHEN.sub("-", text)


@dataclass(frozen=True)
class PassageTerms:
    """A section's terms, computed once per index per section, never per claim."""

    section_id: str
    words: frozenset[str]  # every whole token, lower-cased: what rule 2 looks literals up in
    literals: frozenset[str]  # the passage's own literals, case as written (for callers; rules use `words`)
    content: frozenset[str]  # normalised content words incl. compound parts: rule 3's set


_TOKEN = re.compile(r"\w+(?:['.-]\w+)*")
COMPOUND_SPLIT = re.compile(r"[-_]")

# Section references.  The keyword is case-insensitive; section letters ("Appendix B",
# "Section A.1") must be capitals so "section a cache ..." is not eaten.  Only the plural
# forms take a list, so "Section 4.3 and 304 responses" keeps its status code.
_NUM = r"(?:\d+(?:\.\d+)*|[A-Z](?:\.\d+)*)(?!\w)"
_SEP = r"(?:\s*,\s*(?:and\s+|or\s+)?|\s+(?:and|or|through|to)\s+|\s*[-\u2013]\s*)"


def _keyword(word: str, tail: str) -> list[str]:
    # Every alternative starts with a bare literal character, so the regex engine can scan
    # ahead for those characters instead of trying each position (1.5x faster); the
    # lookbehind just after it is the word boundary.
    return [rf"{first}(?<!\w{first})(?i:{word[1:]}){tail}" for first in (word[0].upper(), word[0])]


_SECTION_REF = re.compile(
    "|".join(
        _keyword("sections", rf"\s*{_NUM}(?:{_SEP}{_NUM})*")
        + _keyword("appendices", rf"\s*{_NUM}(?:{_SEP}{_NUM})*")
        + _keyword("section", rf"\s*{_NUM}")
        + _keyword("appendix", rf"\s*{_NUM}")
        + _keyword("rfcs", rf"\s*\d{{3,5}}(?:{_SEP}(?i:rfc)?\s*\d{{3,5}})*(?!\w)")
        + _keyword("rfc", r"\s*\d{3,5}(?:#[A-Z0-9]+(?:\.\d+)*)?(?!\w)")  # also "rfc9111#4.2.1"
        + [
            rf"\u00a7\u00a7\s*{_NUM}(?:{_SEP}{_NUM})*",
            rf"\u00a7\s*{_NUM}",
            r"\[[A-Za-z][\w.-]*\]",  # citation tags: [HTTP], [RFC9110], [CACHING]
        ]
    )
)
# Substrings every section reference contains (lower-cased): a claim with none of them
# skips the reference scan, which costs as much as tokenising.
_REFERENCE_HINTS = ("section", "appendi", "rfc", "\u00a7", "[")

# English function words: the lexical index's stopwords (``retrieval.lexical``, part of its
# identity) and the core of the content-word filter below.
FUNCTION_WORDS = frozenset(
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
_STOPWORDS = (FUNCTION_WORDS - {"yours"}) | frozenset(
    [
        "also",
        "done",
        "either",
        "else",
        "etc",
        "however",
        "least",
        "less",
        "let",
        "like",
        "many",
        "may",
        "might",
        "much",
        "must",
        "neither",
        "now",
        "one",
        "ought",
        "per",
        "shall",
        "though",
        "thus",
        "upon",
        "us",
        "via",
        "whether",
        "whose",
        "within",
        "without",
        "yet",
        "e.g",
        "i.e",
        "cf",
        "vs",
        "dont",
        "doesnt",
        "isnt",
        "arent",
        "cant",
        "cannot",
        "wont",
        "shouldnt",
        "mustnt",
        "according",
        "say",
        "says",
        "said",
        "state",
        "states",
        "stated",
        "note",
        "notes",
        "noted",
        "explain",
        "explains",
        "describe",
        "describes",
        "specify",
        "specifies",
        "see",
        "section",
        "sections",
        "rfc",
        "document",
    ]
)
# The last line is attribution vocabulary ("Section 4.2.1 says ..."): words about the
# document rather than the protocol, which a faithful claim adds and no passage needs.


def normalise_text(text: str) -> str:
    # the membership tests keep the common case (a one-line ASCII claim) to a few scans
    if "\u2019" in text:
        text = text.replace("\u2019", "'")
    if "\u2010" in text or "\u2011" in text:
        text = text.replace("\u2010", "-").replace("\u2011", "-")
    if "\n" in text:
        text = unwrap_hyphens(text)  # RFC line wraps inside hyphenated words
    return text


# The corpus has ~12k distinct whitespace chunks and ~7.5k distinct tokens: these caches
# hold all of them with room for claim-only vocabulary, and bound memory against odd input.
_CACHE_SIZE = 1 << 16


@lru_cache(maxsize=_CACHE_SIZE)
def _chunk_tokens(chunk: str) -> tuple[str, ...]:
    return tuple(_TOKEN.findall(chunk))


def tokens(text: str) -> Iterator[str]:
    """The tokens of already-normalised text, in order.

    No token spans whitespace, so tokenising whitespace-separated chunks equals one
    findall over the text; chunks recur ("directive," "(Section"), so the per-chunk cache
    makes claims ~1.5x cheaper to tokenise, and passage_terms warms it.
    """
    return chain.from_iterable(map(_chunk_tokens, text.split()))


def without_references(text: str) -> str:
    """``text`` normalised, with its section references ("Section 4.2.1", "RFC 9111", "[HTTP]")
    blanked: a claim naming its source asserts nothing about the protocol by it."""
    text = normalise_text(text)
    low = text.lower()
    if any(hint in low for hint in _REFERENCE_HINTS):
        text = _SECTION_REF.sub(" ", text)
    return text


def claim_tokens(text: str) -> dict[str, None]:
    """Distinct tokens in first-occurrence order, section references dropped (rules 2 and 3 never see them)."""
    return dict.fromkeys(tokens(without_references(text)))


def _is_literal(token: str) -> bool:
    if token.isalpha():
        rest = token[1:]
        if not rest or rest.islower() or token.isupper():
            return False  # a plain word, or an all-caps acronym / BCP 14 keyword
        # an internal capital: HttpOnly, ClientHello - unless a plural acronym ("URIs", "IDs")
        return not (token[-1] == "s" and token[:-1].isupper())
    if token.isalnum():
        return True  # letters and digits, or only digits: 3600, 304, IPv6, sha256
    if "-" in token or "_" in token or any(ch.isdigit() for ch in token):
        return True  # max-age, Set-Cookie, freshness_lifetime, 1.1
    if "." in token:
        return any(len(part) > 1 for part in token.split("."))  # example.com, not "e.g"
    return False  # apostrophes: server's, don't


def _normalise_word(token: str) -> str | None:
    """The content-word form of a token, or None when it carries no content."""
    token = _strip_possessive(token)  # "URL's" is "URL": the plural-acronym rule below must not see "URL'"
    word = token.lower().replace("'", "")
    if word in _STOPWORDS or (len(word) < 2 and not word.isdigit()):
        return None
    if len(token) > 2 and token.endswith("s") and token[:-1].isupper():
        word = word[:-1]  # plural acronym: "URIs" -> "uri"
    elif word.isalpha():
        if word.endswith("ies") and len(word) > 4:
            word = word[:-3] + "y"
        elif word.endswith("s") and len(word) > 3 and not word.endswith(("ss", "us", "is")):
            word = word[:-1]
        if word in _STOPWORDS:
            return None
    return word


def _strip_possessive(token: str) -> str:
    return token[:-2] if token.endswith(("'s", "'S")) else token


# Per-token classification is a pure function of the token, so it is cached: a claim's
# vocabulary is the corpus vocabulary (passage_terms warms the caches at index build), and
# map() over a C-level cache keeps the per-claim loop out of the interpreter.
@lru_cache(maxsize=_CACHE_SIZE)
def literal_of(token: str) -> tuple[str, str] | None:
    """(literal as written, lower-cased) when the token is one, else None.  "HttpOnly's" is "HttpOnly"."""
    token = _strip_possessive(token)
    return (token, token.lower()) if _is_literal(token) else None


content_word = lru_cache(maxsize=_CACHE_SIZE)(_normalise_word)


def content_words(text: str) -> tuple[str, ...]:
    """Distinct normalised content words of ``text``, in first-occurrence order.

    Section references are excluded.  Hyphenated tokens stay whole ("max-age"), so this
    is also the term list the extractive drafter matches questions with.
    """
    words = dict.fromkeys(map(content_word, claim_tokens(text)))
    words.pop(None, None)
    return cast(tuple[str, ...], tuple(words))  # None popped above


def literals(text: str) -> tuple[str, ...]:
    """Distinct literals of a claim as written, in first-occurrence order, section references excluded."""
    return tuple(written for written, _ in filter(None, map(literal_of, claim_tokens(text))))


def passage_terms(section_id: str, text: str, title: str = "") -> PassageTerms:
    """Tokenise a section once.  The title is included: the reader sees the heading."""
    found = list(tokens(normalise_text(f"{title}\n{text}")))
    words: set[str] = set()
    literal_forms: set[str] = set()
    content: set[str | None] = set()
    for t in found:
        words.add(t.lower())
        if (literal := literal_of(t)) is not None:
            literal_forms.add(literal[0])
            words.add(literal[1])  # the possessive-free form a claim's literal is looked up by
        content.add(content_word(t))
        if "-" in t or "_" in t:
            # parts serve paraphrase coverage only; rule 2 matches whole tokens
            content.update(map(content_word, COMPOUND_SPLIT.split(t)))
    content.discard(None)
    return PassageTerms(
        section_id=section_id,
        words=frozenset(words),
        literals=frozenset(literal_forms),
        content=frozenset(cast(set[str], content)),  # None discarded above
    )
