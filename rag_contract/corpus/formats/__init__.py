"""Corpus formats: each turns one verified file into ordered, nested ``Section``s.

Contract: ``FORMATS`` maps a format's name to its ``Format``: the file suffixes it reads by
default, the parser, and its ``identity`` (the rules it applies, an input of the corpus
fingerprint and so of the index version). ``format_for(file, declared)`` is the format a
manifest entry is read with: the declared one, else the one whose suffix the file has; a file
no format reads is refused (``FormatError``) in one line naming the file and the formats known.
A parser receives the file's bytes only after they passed their manifest hash. A format whose
files name their own title (reStructuredText's document title) has ``title``: bytes -> that
title or None, which ``rag-contract init`` writes into the manifest.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType

from rag_contract.corpus.formats import html, markdown, rfc_text, rst
from rag_contract.corpus.sections import Section


class FormatError(ValueError):
    """A file no known format reads, or one its format cannot parse."""


@dataclass(frozen=True)
class Format:
    name: str
    suffixes: tuple[str, ...]
    # (file name, manifest title, bytes) -> sections; raises ValueError saying what is wrong
    parse: Callable[[str, str, bytes], list[Section]]
    # The parsing rules, fingerprinted with each file. None only for RFC text, whose rules
    # predate the field: its files keep the fingerprint (and index version) they had.
    identity: str | None
    document: Callable[[str], str]  # file name -> the document part of its section ids
    title: Callable[[bytes], str | None] | None = None  # the page's own title, if its files carry one


FORMATS: Mapping[str, Format] = MappingProxyType(
    {
        f.name: f
        for f in (
            Format("rfc-text", (".txt",), rfc_text.parse, None, rfc_text.document),
            Format("markdown", (".md", ".markdown"), markdown.parse, markdown.IDENTITY, markdown.document),
            Format("html", (".html", ".htm"), html.parse, html.IDENTITY, html.document),
            Format("rst", (".rst",), rst.parse, rst.IDENTITY, rst.document, rst.page_title),
        )
    }
)


def known() -> str:
    return ", ".join(f"{f.name} ({', '.join(f.suffixes)})" for f in FORMATS.values())


def format_for(file: str, declared: str | None = None) -> Format:
    if declared is not None:
        if declared not in FORMATS:
            raise FormatError(f"{file}: format {declared!r} is not known; formats known: {known()}")
        return FORMATS[declared]
    lower = file.lower()
    for f in FORMATS.values():
        if lower.endswith(f.suffixes):
            return f
    raise FormatError(f"{file}: no format reads this file; formats known: {known()}")


def readable_suffixes() -> tuple[str, ...]:
    return tuple(s for f in FORMATS.values() for s in f.suffixes)
