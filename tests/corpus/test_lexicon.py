"""What a lexicon knows: words, plurals, stems, solid compounds and phrases of the answering text."""

from __future__ import annotations

import re

from rag_contract.text.lexicon import STEM, Lexicon, unsaid

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


def test_a_word_of_the_text_is_found_as_a_whole_run_of_word_characters_and_hyphens():
    lex = Lexicon.of(frozenset(), "max-age=0 or the no-cache x.y value; über-cache")
    assert lex.knows("max-age") and lex.knows("x") and lex.knows("über-cache")
    assert not lex.knows("max") and not lex.knows("age")  # inside a hyphenated run: not a word of its own
    assert lex.knows("x.y") and not lex.knows("y.value")  # not a run: found by scanning the text


def test_the_run_lookup_agrees_with_scanning_the_text(index):
    lex = index.answering
    probes = ["hpack", "ruellan", "max-age", "utf-8", "ipv6", "no-store", "stale-while-revalidate", "q=0.5", "a", ""]
    probes += sorted(index.vocabulary)[::50]
    for word in probes:
        low = word.lower()
        scanned = re.search(rf"(?<![\w-]){re.escape(low)}(?![\w-])", lex.text) is not None
        if scanned != (low in lex.runs) and re.fullmatch(r"[\w-]+", low):
            raise AssertionError(f"{word!r}: scanned {scanned}, runs {low in lex.runs}")


def test_unsaid_is_each_word_neither_said_nor_sharing_a_stem_with_a_said_one():
    assert unsaid(("compare", "compared", "cache", "fresh"), ["compare", "caches"]) == ("cache", "fresh")
    assert unsaid(("header", "sorted"), {"headers", "sorted"}) == ()  # the word is the stem of a said one
    assert unsaid(("headers", "sorted"), {"header"}) == ("sorted",)  # a said word is the stem
    assert unsaid(("tunnel", "age"), iter(["tunnelling", "ages"])) == ("age",)  # short words only as written
    assert unsaid((), {"cache"}) == ()
