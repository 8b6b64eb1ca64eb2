"""What a lexicon knows: words, plurals, stems, solid compounds and phrases of the answering text."""

from __future__ import annotations

from rag_contract.text.lexicon import STEM, Lexicon

LEX = Lexicon.of(frozenset({"cache", "serialization", "keep-alive", "uri"}), "a uri reference. the keep-alive field.")


def test_knows_a_word_in_any_case_and_number():
    assert LEX.knows("cache") and LEX.knows("Caches") and LEX.knows("URIs")
    assert not LEX.knows("cachet")


def test_knows_a_word_by_its_stem():
    assert STEM == 6
    assert LEX.knows("serializer")  # "serial" shared
    assert LEX.knows("serial")  # the stem itself
    assert not LEX.knows("seria")  # shorter than a stem: looked up whole
    assert not LEX.knows("serious")


def test_knows_a_compound_written_solid_and_a_word_of_the_text():
    assert LEX.knows("keepalive") and LEX.knows("keep-alive")
    assert LEX.knows("reference")  # in the text, not among the content words given
    assert not LEX.knows("refer")  # a whole word of the text, not a prefix of one


def test_says_a_phrase_with_white_space_collapsed():
    assert LEX.says("URI   Reference") and LEX.says("the keep-alive")
    assert not LEX.says("uri field")


def test_the_index_lexicon_leaves_out_sections_that_never_answer(index):
    # "HPACK" is named in a sentence of RFC 9110's body; only its bibliography names HPACK's author
    assert index.answering.knows("hpack")
    assert "ruellan" in index.vocabulary
    assert not index.answering.knows("ruellan")
