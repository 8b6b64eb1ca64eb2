"""Sentence units carry no reStructuredText markup: what the index embeds and a claim quotes is
the text a reader sees, for the reST example project and for the RFC project alike (the
Markdown project's own markup is the Markdown format's to check)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from rag_contract.corpus.sentences import sentences, split_sections
from rag_contract.corpus.sources import load_corpus

ROOT = Path(__file__).resolve().parents[2]

# reST markup a sentence must not carry: roles, inline literals, hyperlink references,
# directives, labels and comments, substitutions, and a section title's underline.
RST_MARKUP = re.compile(
    r":[\w:.+-]+:`|``|`_|`__|(?:^|\n)\.\. |\|\w+\||(?:^|\n)([=\-~^\"'`#*+])\1{3,}(?:\n|$)", re.MULTILINE
)


@pytest.mark.parametrize(
    "markup",
    [":func:`url_for`", "``app.config``", "`Jinja`_", "`docs <https://x>`__", ".. note::", "x\n.. _label:", "|version|"]
    + ["Title\n=====", "-----"],
)
def test_the_check_catches_each_kind_of_markup(markup):
    assert RST_MARKUP.search(markup)


@pytest.mark.parametrize(
    "prose",
    ["Call url_for to build a URL.", "Default: timedelta(days=31) (2678400 seconds)", "def f(*args, **kwargs):"],
)
def test_the_check_passes_prose_and_code(prose):
    assert not RST_MARKUP.search(prose)


@pytest.mark.parametrize("project", [".", "examples/flask-docs"])
def test_no_sentence_unit_carries_rst_markup(project):
    corpus = load_corpus(ROOT / project / "corpus")
    marked = [(s.section_id, s.text) for s in split_sections(corpus.sections) if RST_MARKUP.search(s.text)]
    assert marked == []


def test_the_example_read_as_plain_text_would_fail_the_check():
    """The regression the check catches: a page split into sentences without its format."""
    raw = (ROOT / "examples" / "flask-docs" / "corpus" / "config.rst").read_text(encoding="utf-8")
    assert sum(1 for s in sentences(raw) if RST_MARKUP.search(s)) > 50
