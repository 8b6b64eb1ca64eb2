"""What a question takes as given (answering.premises): the requirements it states as the
specification's, and whether the kept claims say them."""

from __future__ import annotations

import pytest

from rag_contract.answering.premises import premises, unsupported_premise


@pytest.mark.parametrize(
    ("question", "found"),
    [
        (
            "RFC 8259 reserves member names starting with '$' for metadata, so we rename ours. Which prefix?",
            (("member", "name", "starting", "metadata"),),
        ),
        ("The HTTP spec caps redirects at five, right?", (("redirect", "five"),)),  # a premise asked back
        (
            "Given that Vary's field names have to be sorted, should our proxy re-sort them?",
            (("vary", "field", "name", "sorted"),),
        ),
        ("Since a 202 must carry a Location header, what URL goes in it?", (("202", "carry", "location", "header"),)),
        ("Does the URI syntax say whether a port is TCP or UDP?", ()),  # asking what it says states nothing
        ("Our client crashes on a 103, since we never asked for one. Is that allowed?", ()),  # the engineer's own
        ("How long may a cache keep a response?", ()),
    ],
)
def test_premises_are_what_the_question_says_the_spec_requires(question, found):
    assert premises(question) == found


def test_a_premise_stands_on_claims_that_say_two_thirds_of_its_words():
    stated = (("vary", "field", "name", "sorted"),)
    assert unsupported_premise(stated, {"vary", "field", "name"}) == ()  # three of four words: it stands
    assert unsupported_premise(stated, {"vary", "field"}) == ("name", "sorted")  # two of four: it does not
    alphabetical = (("alphabetical", "sorted", "header"),)
    assert unsupported_premise(alphabetical, {"alphabetically", "header"}) == ()  # two of three, one by its stem
    assert unsupported_premise(alphabetical, {"header"}) == ("alphabetical", "sorted")
    assert unsupported_premise(stated, {"vary"}) == ("field", "name", "sorted")
    assert unsupported_premise((), set()) == ()
    # the first premise that does not stand is the one named
    assert unsupported_premise((("vary",), ("alphabetical", "order")), {"vary"}) == ("alphabetical", "order")


def test_a_stem_of_six_letters_is_shared_either_way():
    assert unsupported_premise((("header", "sorted"),), {"headers", "sorted"}) == ()  # the premise's word is the stem
    assert unsupported_premise((("headers", "sorted"),), {"header", "sorted"}) == ()  # the claims' word is the stem


def test_a_sentence_that_states_a_rule_and_grants_another_keeps_their_order():
    q = "RFC 9110 requires a Location header, since a 202 must point at a monitor. Which URL?"
    assert premises(q) == (("location", "header"), ("202", "point", "monitor"))


def test_a_premise_stands_only_on_claims_that_say_its_numbers():
    capped = (("cookie", "name", "32", "character"),)
    assert unsupported_premise(capped, {"cookie", "name", "character"}) == ("32",)  # three of four, not the 32
    assert unsupported_premise(capped, {"cookie", "name", "32"}) == ()  # the number said: it stands
    assert unsupported_premise((("redirect", "five", "hop"),), {"redirect", "hop"}) == ("five",)  # in words
    assert unsupported_premise((("redirect", "five"),), {"redirect", "five"}) == ()
    assert unsupported_premise((("http", "1.1", "chunk", "size"),), {"chunk", "size", "http"}) == ()  # a version
