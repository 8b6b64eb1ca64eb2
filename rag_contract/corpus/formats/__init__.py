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

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType, ModuleType

from rag_contract.corpus.sections import Section


class FormatError(ValueError):
    """A file no known format reads, or one its format cannot parse."""


@dataclass(frozen=True)
class Format:
    """A format's suffixes and, in its module, its rules: ``parse``, ``document``, ``IDENTITY``
    and, where its files carry one, ``page_title``. The module is imported the first time a
    file of the format is read, and its parsing library with it (lxml, markdown-it, docutils):
    a project whose corpus is RFC text never imports them (~12 MB and ~0.1 s of every start)."""

    name: str
    suffixes: tuple[str, ...]
    module: str

    @property
    def _rules(self) -> ModuleType:
        return importlib.import_module(self.module)  # cached by the import system after the first

    @property
    def parse(self) -> Callable[[str, str, bytes], list[Section]]:
        """(file name, manifest title, bytes) -> sections; raises ValueError saying what is wrong."""
        return self._rules.parse

    @property
    def identity(self) -> str | None:
        """The parsing rules, fingerprinted with each file. None only for RFC text, whose rules
        predate the field: its files keep the fingerprint (and index version) they had."""
        return getattr(self._rules, "IDENTITY", None)

    @property
    def document(self) -> Callable[[str], str]:
        """file name -> the document part of its section ids."""
        return self._rules.document

    @property
    def title(self) -> Callable[[bytes], str | None] | None:
        """The page's own title, if its files carry one."""
        return getattr(self._rules, "page_title", None)


FORMATS: Mapping[str, Format] = MappingProxyType(
    {
        f.name: f
        for f in (
            Format("rfc-text", (".txt",), f"{__name__}.rfc_text"),
            Format("markdown", (".md", ".markdown"), f"{__name__}.markdown"),
            Format("html", (".html", ".htm"), f"{__name__}.html"),
            Format("rst", (".rst",), f"{__name__}.rst"),
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
