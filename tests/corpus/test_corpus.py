"""The corpus: verified against its manifest, parsed into the sections its own TOC lists."""

from __future__ import annotations

import hashlib
import shutil

import pytest

from rag_contract.corpus.formats.rfc_text import parse_sections, strip_furniture, toc_ids
from rag_contract.corpus.sources import CorpusError, load_corpus

SHARED_RFCS = ("rfc3986", "rfc6265", "rfc8259", "rfc9110", "rfc9111", "rfc9112")


@pytest.fixture(scope="module")
def corpus(root):
    return load_corpus(root / "corpus")


@pytest.fixture
def corpus_copy(tmp_path, root):
    dst = tmp_path / "corpus"
    shutil.copytree(root / "corpus", dst)
    return dst


def test_manifest_lists_the_six_rfcs_with_provenance(corpus, root):
    assert [e.document for e in corpus.entries] == list(SHARED_RFCS)
    for e in corpus.entries:
        assert e.source == f"https://www.rfc-editor.org/rfc/{e.document}.txt"
        data = (root / "corpus" / e.file).read_bytes()
        assert len(data) == e.bytes and hashlib.sha256(data).hexdigest() == e.sha256


@pytest.mark.parametrize("rfc", SHARED_RFCS)
def test_sections_match_the_rfcs_own_table_of_contents(corpus, rfc, root):
    text = (root / "corpus" / f"{rfc}.txt").read_text(encoding="utf-8")
    toc = toc_ids(rfc, text)
    parsed = [s.id for s in corpus.sections if s.document == rfc]
    assert len(parsed) == len(set(parsed)), "duplicate section ids"
    # RFC 3986 and 6265 list three heading levels in their TOC and number a fourth in the
    # body (3986 6.2.2.1-3, 6265 4.1.2.1-6). Those are real sections: every parsed section
    # at a depth the TOC lists is in it, and every deeper one sits under a TOC entry.
    depth = max(t.split("#")[1].count(".") for t in toc)
    shallow = {p for p in parsed if p.split("#")[1].count(".") <= depth}
    assert shallow == set(toc)
    for deep in set(parsed) - shallow:
        assert deep.rsplit(".", 1)[0] in toc, deep


def test_the_corpus_parses_into_600_sections_564_with_prose(corpus):
    assert len(corpus.sections) == 600
    assert sum(1 for s in corpus.sections if s.words) == 564


def test_no_page_furniture_or_bom_survives(corpus):
    for s in corpus.sections:
        assert "[Page " not in s.text, s.id
        assert "\f" not in s.text and "\ufeff" not in s.text, s.id
        assert not any(
            line.startswith("RFC ") and line.rstrip().endswith(("2005", "2011", "2017")) for line in s.text.splitlines()
        ), s.id


def test_a_section_spanning_a_page_break_reads_as_one_text(corpus):
    # RFC 8259 Section 4 breaks from page 6 to page 7 in the middle of a sentence.
    text = corpus.section("rfc8259#4").text
    assert "Other implementations report an error or fail to parse the\nobject, and some implementations" in text


def test_toc_is_not_mistaken_for_sections(corpus):
    intro = corpus.section("rfc9110#1")
    assert "Table of Contents" not in intro.text
    titles = [s.title for s in corpus.sections if s.id == "rfc9110#1"]
    assert titles == ["Introduction"]


def test_appendix_ids(corpus):
    assert corpus.section("rfc9110#A").title == "Collected ABNF"
    assert corpus.section("rfc3986#D.1").title == "Additions"
    assert corpus.section("rfc9112#C.2.1").title == "Multihomed Web Servers"


def test_strip_furniture_removes_headers_and_footers():
    text = (
        "   one two\n\n"
        "Bray   Standards Track   [Page 7]\n"
        "\fRFC 8259                          JSON                     December 2017\n\n"
        "   three four\n"
    )
    assert strip_furniture(text) == ["   one two", "   three four", ""]


def test_one_byte_edit_is_refused_naming_the_file(corpus_copy):
    with open(corpus_copy / "rfc8259.txt", "ab") as f:
        f.write(b"x")
    with pytest.raises(CorpusError) as exc:
        load_corpus(corpus_copy)
    msg = str(exc.value)
    assert msg.startswith("rfc8259.txt: sha256 mismatch")
    assert "61a5378f4255c720beb2a4b4a63b29540147c140f36988bf086291989b4cd2d7" in msg


def test_unlisted_file_is_refused(corpus_copy):
    (corpus_copy / "rfc7540.txt").write_text("HTTP/2\n")
    with pytest.raises(CorpusError, match=r"rfc7540.txt: on disk but not in manifest.yaml"):
        load_corpus(corpus_copy)


def test_missing_file_is_refused(corpus_copy):
    (corpus_copy / "rfc6265.txt").unlink()
    with pytest.raises(CorpusError, match=r"rfc6265.txt: listed in manifest.yaml but missing"):
        load_corpus(corpus_copy)


def test_malformed_manifest_is_refused(corpus_copy):
    (corpus_copy / "manifest.yaml").write_text("files:\n  - file: rfc3986.txt\n")
    with pytest.raises(CorpusError, match=r"files\[0\] must have exactly the keys"):
        load_corpus(corpus_copy)


def test_parse_sections_is_deterministic(corpus, root):
    text = (root / "corpus" / "rfc9111.txt").read_text(encoding="utf-8")
    assert parse_sections("rfc9111", text) == [s for s in corpus.sections if s.document == "rfc9111"]
