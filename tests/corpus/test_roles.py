"""Which sections never answer: the apparatus titles, and titles just beside them."""

from __future__ import annotations

import pytest

from rag_contract.corpus.roles import never_answers


@pytest.mark.parametrize(
    "title",
    [
        "References",
        "Normative References",
        "Informative References",
        "Acknowledgements",
        "Acknowledgments",
        "Contributors",
        "Authors' Addresses",
        "Author's Address",
        "Copyright Notice",
        "Status of This Memo",
        "Table of Contents",
        "Index",
        "  references. ",
    ],
)
def test_apparatus_never_answers(title):
    assert never_answers(title)


@pytest.mark.parametrize(
    "title",
    [
        "Reference Resolution",  # RFC 3986's algorithm: content, not a bibliography
        "URI References",
        "Same-Document Reference",
        "IANA Considerations",
        "Security Considerations",
        "Changes from RFC 7234",
        "Requirements Notation",
        "Introduction",
        "Indexing",
        "Authors",
    ],
)
def test_content_answers(title):
    assert not never_answers(title)


def test_the_committed_corpus_apparatus(index):
    assert {index.section(s).title for s in index.never_answers} == {
        "Acknowledgements",
        "References",
        "Normative References",
        "Informative References",
    }
    assert len(index.never_answers) == 20
