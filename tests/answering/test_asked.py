"""What a question asks for and what it is about: each answer type on both sides of its rule,
instances of each type, the focus and the scenario, and unknown subjects, on a lexicon and an
English frequency made by hand. Runs in milliseconds, so mutation testing runs it against
asked.py (eval/mutation.yaml)."""

from __future__ import annotations

import pytest

from rag_contract.answering.asked import (
    RARE_ZIPF,
    AnswerType,
    Asked,
    analyse,
    classify,
    clauses,
    counted,
    counts,
    english,
    focus,
    has_instance,
    interrogatives,
    measured,
    mentions_focus,
    missing_types,
    numbers,
    options,
    quantities,
    sentences,
    units,
    unknown_subjects,
    unmentioned_focus,
)
from rag_contract.text.lexicon import Lexicon
from rag_contract.text.words import content_words

N, S, NAME, CH, YN, PROC, DEF, OTHER = (
    AnswerType.NUMBER,
    AnswerType.STATUS_CODE,
    AnswerType.NAME,
    AnswerType.CHOICE,
    AnswerType.YES_NO,
    AnswerType.PROCEDURE,
    AnswerType.DEFINITION,
    AnswerType.OTHER,
)

CORPUS = Lexicon.of(
    frozenset({"cache", "response", "tunnel", "keep-alive", "json", "pointer", "header", "field", "partitioned"}),
    "a cache stores a response. the keep-alive header field. json text. tls 1.2 is used. http/1.1 is a protocol. "
    "the private response directive. the `max-age` directive. a partitioned table. a 304 is sent.",
)
RARE = {"hpack": 0.0, "jwt": 2.0, "zorblax": 0.0, "keepalive": 1.0, "tunnelling": 2.2, "misbehaves": 1.9}
RARE |= {"misbehaved": 1.5, "misbehav": 0.0, "zzs": 0.0, "zz": 0.0, "misbehave": 2.5, "crawler": 2.8}


def frequency(word: str) -> float:
    """Zipf frequency made by hand: the words listed as given, every other word common (5.0)."""
    return RARE.get(word, 5.0)


# --- sentences and clauses ----------------------------------------------------------------------


def test_sentences_drop_the_words_that_only_lead_in():
    q = "  Our CDN caches pages.  So which header decides? And how long is it kept?  "
    assert sentences(q) == ["Our CDN caches pages.", "which header decides?", "how long is it kept?"]
    assert sentences("See e.g. example.com for it?") == ["See e.g. example.com for it?"]
    assert sentences("   ") == []


def test_interrogatives_are_the_sentences_that_ask():
    q = "Our CDN caches pages. It saw a 304. Which header decides? And how long is it kept?"
    assert interrogatives(q) == ["Which header decides?", "And how long is it kept?"]
    assert interrogatives("Our proxy strips the header. Tell me whether that is allowed") == [
        "Tell me whether that is allowed"
    ]  # none ends in '?': the last sentence asks
    assert interrogatives("See e.g. example.com for it?") == ["See e.g. example.com for it?"]


def test_clauses_split_a_sentence_that_asks_two_things():
    assert clauses("How long is it kept, and what status is sent?") == ["How long is it kept", "what status is sent?"]
    assert clauses("How long is it kept; which status is sent?") == ["How long is it kept", "which status is sent?"]
    # after a bare comma, "which" opens a relative clause, not a question
    assert clauses("What does a proxy do with a line, which starts with a tab?") == [
        "What does a proxy do with a line, which starts with a tab?"
    ]
    # a preamble that asks nothing is dropped; a condition before the comma is skipped
    assert clauses("With stale-if-error, how long may it serve?") == ["how long may it serve?"]
    assert clauses("If the origin fails, may the proxy serve it?") == ["may the proxy serve it?"]
    assert clauses("And so, is it kept?") == ["is it kept?"]


# --- answer types: each class, and the question just outside it --------------------------------


@pytest.mark.parametrize(
    ("question", "types"),
    [
        # a number, a duration or a size
        ("How many cookies must a browser keep?", (N,)),
        ("How long may a cache reuse it?", (N,)),
        ("What is the maximum size of a header?", (N,)),
        ("What byte limit should we set?", (N,)),
        ("Which one decides how long a cache may reuse it?", (OTHER,)),  # "how long" does not open it
        ("Is there a limit on how long a URI can be?", (N,)),  # whether there is a limit: the number
        ("Is there a default timeout for idle connections?", (N,)),
        ("Is there a reason to limit it?", (YN,)),  # an auxiliary opens it: yes or no
        ("What's the default timeout for idle connections?", (N,)),
        ("Which port does https use by default?", (N,)),
        ("Up to what size may a cookie grow?", (N,)),
        ("Which header sets the maximum age?", (NAME,)),  # a name asked for first
        # a status code
        ("Which status code should it send?", (S,)),
        ("What status should we return for a missing page?", (S,)),
        ("Why is the status line sent first?", (OTHER,)),  # asks why, names a status line
        ("How do I read the status code?", (PROC,)),
        # a name
        ("Which directive gives shared caches their own lifetime?", (NAME,)),
        ("Which request methods are safe?", (NAME,)),
        ("What media type does JSON use?", (NAME,)),
        ("What is an OPTIONS request for?", (DEF,)),  # "is an" between: not a question for a name
        # yes or no, and a choice between options
        ("Is a bare string a valid JSON text?", (YN,)),
        ("Can the client retry?", (YN,)),
        ("Should our API answer 401 or 403?", (CH,)),
        ("Which wins, the 412 or the redirect?", (CH,)),
        ("What should a server do with a space or tab?", (OTHER,)),  # "or" without a choice asked
        # a procedure, a definition
        ("How does a client resolve a relative reference?", (PROC,)),
        ("What are the steps to normalise a URI?", (PROC,)),
        ("What does no-cache mean?", (DEF,)),
        ("What's a weak validator?", (DEF,)),
        ("Where does the fragment go?", (OTHER,)),
        # two questions in one sentence, and two sentences
        ("How long a line must a server parse, and what status should it send?", (N, S)),
        ("How deep must a parser go? Is 512 acceptable?", (N, YN)),
    ],
)
def test_classify(question, types):
    assert classify(question) == types


@pytest.mark.parametrize(
    ("question", "types"),
    [
        ("What's the longest ETag a client must store?", (N,)),  # a superlative of size
        ("Which is the smallest chunk a parser accepts?", (N,)),
        ("What is the most common header?", (DEF,)),  # "most" bounds nothing
        ("For how many hours is the cookie kept?", (N,)),  # the count after a preposition
        ("Within how long must it answer?", (N,)),
        ("For what reason is it kept?", (OTHER,)),
    ],
)
def test_classify_superlatives_and_counts_after_a_preposition(question, types):
    assert classify(question) == types


@pytest.mark.parametrize(
    ("question", "types"),
    [
        ("What is the most cookies a browser sends at once?", (N,)),  # the most of a plural noun
        ("What's the most members an object may hold?", (N,)),
        ("What is the most obvious fix?", (DEF,)),  # an adjective after "most" bounds nothing
        ("At most how many interim responses may precede it?", (N,)),  # a bound before the asking words
        ("Roughly how long is a response fresh?", (N,)),  # a hedge before them
        ("Above how many ranges may a server refuse?", (N,)),
        ("Below what size is a body left uncompressed?", (N,)),
        ("Under what conditions is the connection kept?", (OTHER,)),  # a condition, not a bound
        ("At how many routes does matching slow down?", (N,)),
        ("What starting value should the client send?", (N,)),  # a starting or initial value is a number
        ("Is there a hard ceiling on the lifetime?", (N,)),
        ("What figure in kilobytes should we accept?", (N,)),
        ("What's the longest extension list accepted before answering with a 4xx?", (N,)),  # the scenario's status
        ("Which status code answers a body that is too large?", (S,)),
        ("After the session ends, for how many minutes are credentials reused?", (N,)),  # a preamble, then the bound
        ("Above what body size, in megabytes, should an API answer 413?", (N, YN)),
    ],
)
def test_classify_bounds_hedges_and_plural_extremes(question, types):
    assert classify(question) == types


def test_the_type_shown_is_the_first_asked():
    assert Asked((S, N), (), ()).answer_type is S
    assert Asked((), (), ()).answer_type is OTHER


@pytest.mark.parametrize(
    ("answer_type", "text", "holds"),
    [
        (N, "A cache may reuse it for 3600 seconds.", True),
        (N, "A browser keeps at least fifty cookies.", True),
        (N, "It is sent twice.", True),
        (N, "It is defined by HTTP/1.1 over IPv6.", False),  # a version and a name hold no number
        (N, "Bump anyio to 3.6.2 and see version 2.0 (#2865).", False),  # versions and an issue's number
        (N, "It buffers 2.5 MB, or 64,000 bytes.", True),
        (N, "The lifetime is left to the implementation.", False),
        (N, "A cache MUST NOT do so (see Section 5.2.2 of RFC 9111).", False),  # references are no numbers
        (S, "As RFC 9110 says in Section 415.", False),
        (S, "The server responds with 414 (URI Too Long).", True),
        (S, "It sends 4000 bytes of 1.414 quality.", False),  # not a three-digit code on its own
        (S, "The server responds with an error.", False),
        (NAME, "A shared cache uses s-maxage instead.", True),
        (NAME, "It sends the HttpOnly flag.", True),
        (NAME, "A client can retry GET requests.", True),
        (NAME, "The field named 'realm' carries it.", True),
        (NAME, "Such a request is safe, and Host says where.", True),  # a capital after a comma
        (NAME, "shared caches keep their own lifetime.", False),
        (YN, "anything at all", True),
        (PROC, "anything at all", True),
        (DEF, "anything at all", True),
        (OTHER, "anything at all", True),
    ],
)
def test_has_instance(answer_type, text, holds):
    assert has_instance(answer_type, text) is holds


@pytest.mark.parametrize(
    ("text", "found"),
    [
        ("It holds one or more 1xx responses, then one final one.", ("one",)),  # the idiom, not the count
        ("Zero or more interim responses precede it.", ()),
        ("It is just one of name or locator.", ()),
        ("1. the apparent_age: response_time minus date_value", ()),  # a list item's marker
        ("It MUST respond with a 414 (URI Too Long) status code.", ()),  # a status code written as one
        ("A server sends a 416 response.", ()),
        ("It accepts request lines of 8000 octets.", ("8000",)),
        ("It keeps at most one stored response.", ("one",)),
        ('A "stale" response is one that is not fresh.', ()),  # "one" as a pronoun counts nothing
        ("The response that one sends is this one.", ()),
        ("A 100 byte body and 200 requests.", ("100", "200")),  # a count of something else is a number
    ],
)
def test_quantities_leave_out_idioms_list_markers_and_status_codes(text, found):
    assert quantities(text) == found


def test_a_number_the_question_gives_answers_nothing():
    assert numbers("Is 512 ok, or twice that (see Section 5.2)?") == ("512", "twice")
    assert not has_instance(N, "It returns 504 then.", given=("504",))
    assert has_instance(N, "It returns 504 then.")
    assert has_instance(N, "It waits 30 seconds, then returns 504.", given=("504",))
    assert not has_instance(S, "It sends 403.", given=("403",))
    assert has_instance(S, "It sends 403 or 404.", given=("403",))
    asked = analyse("How long before our gateway returns 504?", CORPUS, frequency)
    assert asked.given == ("504",)
    assert missing_types(asked, said("A gateway returns 504 when it times out.")) == (N,)
    assert missing_types(asked, said("A gateway returns 504 after 60 seconds.")) == ()


@pytest.mark.parametrize(
    ("question", "measures"),
    [
        ("How many milliseconds should it wait?", ("time",)),
        ("What is the largest chunk, in bytes?", ("size",)),
        ("How many characters long may it be?", ("size",)),
        ("How many hours, and how many octets?", ("time", "size")),
        ("How long may a cache keep it?", ()),  # no unit named
        ("Is 30 seconds enough?", ()),  # a unit, but no number asked for
        ("How many requests may be pipelined?", ()),
    ],
)
def test_units_a_number_is_asked_in(question, measures):
    assert units(question) == measures


@pytest.mark.parametrize(
    ("text", "holds"),
    [
        ("It waits 30 seconds.", True),
        ("A day has 86,400 of them: 86,400 seconds.", True),
        ("at least 4096 bytes per cookie", True),
        ("eight octets long", True),
        ("one second after the other", True),
        ("The 100 (Continue) response is sent.", False),  # a number, no unit
        ("max-age=3600", False),
        ("see Section 5 seconds", False),  # a reference is no number
    ],
)
def test_measured_is_a_number_in_a_unit(text, holds):
    assert measured(text, ("time", "size")) is holds


def test_a_number_asked_in_a_unit_wants_that_unit():
    asked = analyse("How many seconds may a cache wait?", CORPUS, frequency)
    assert asked.units == ("time",)
    assert missing_types(asked, said("A cache may wait for 2 responses.")) == (N,)
    assert missing_types(asked, said("A cache may wait 2 bytes.")) == (N,)  # another measure
    assert missing_types(asked, said("A cache may wait 2 seconds.")) == ()
    unitless = analyse("How long may a cache wait?", CORPUS, frequency)
    assert missing_types(unitless, said("A cache may wait for 2 responses.")) == ()


@pytest.mark.parametrize(
    ("question", "things"),
    [
        ("How many bits of randomness should a session id carry?", ("bits",)),  # bits: a count, not a size
        ("How many decimal places may a weight have?", ("decimal", "places")),
        ("How many 1xx interim responses may precede it?", ("1xx", "interim", "responses")),
        ("What is the maximum number of cookies per domain?", ("cookies",)),
        ("What is the maximum number of characters?", ()),  # a unit: ``units`` holds it to that
        ("How many seconds may it wait?", ()),
        ("How many times may it retry?", ()),  # "once" and "twice" count times
        ("How long may it wait?", ()),
        ("Our proxy saw how many ranges? Which status should it send?", ()),  # asks no number
    ],
)
def test_counted_is_what_how_many_counts(question, things):
    assert counted(question) == things


@pytest.mark.parametrize(
    ("text", "things", "holds"),
    [
        ("A sender MUST NOT generate more than three digits after the decimal point.", ("decimal", "places"), True),
        ("At least 4096 bytes per cookie.", ("bits",), False),  # a size counts no bits
        ("A 128-bit value.", ("bits",), True),  # inside a longer word
        ("request.form(max_files=1000)", ("files",), True),
        ("At least 50 cookies per domain.", ("cookies",), True),  # a plural's stem
        ("one or more interim responses", ("responses",), False),  # a quantifier counts nothing
        ("a 100 (Continue) interim response", ("responses",), False),  # a status code counts nothing
        # six words apart: the number is about something else
        ("Alternatives are listed in a long table for codes 200 and 406.", ("alternatives",), False),
        ("Alternatives are listed, at most five of them per page.", ("alternatives",), True),  # within five words
        ("It has ranges. See Section 14 for ranges.", ("ranges",), False),  # a reference is no number
    ],
)
def test_counts_is_a_quantity_beside_what_it_counts(text, things, holds):
    assert counts(text, things) is holds


def test_a_count_wants_a_number_beside_what_it_counts():
    asked = analyse("How many bits of randomness should a session cookie carry?", CORPUS, frequency)
    assert asked.counted == ("bits",)
    assert missing_types(asked, said("A session cookie holds at least 4096 bytes.")) == (N,)
    assert missing_types(asked, said("A session cookie carries 128 bits of randomness.")) == ()


def test_a_choice_is_answered_by_naming_an_option():
    assert options("Should our API answer 401 or 403?") == ("401", "403")
    assert has_instance(CH, "A server ought to respond with 403.", ("401", "403"))
    assert not has_instance(CH, "A server ought to respond.", ("401", "403"))
    assert has_instance(CH, "Anything.", ())  # no options read: nothing to hold it to


def said(*texts: str) -> list[tuple[str, set[str]]]:
    return [(t, set(content_words(t))) for t in texts]


def test_missing_types_names_each_kind_no_claim_holds():
    asked = Asked((N, S, YN, N), ("line",), ())
    assert missing_types(asked, said("The line is 8000 octets long.")) == (S,)
    assert missing_types(asked, said("The line is long.", "A status is sent for a line.")) == (N, S)
    assert missing_types(asked, said("A long line.", "A 414 is sent for the line.")) == ()  # a status code is a number
    assert missing_types(asked, said("8000 octets a line", "414 for a line")) == ()
    assert missing_types(asked, []) == (N, S)
    assert missing_types(Asked((YN, PROC), (), ()), []) == ()


def test_an_instance_counts_only_in_a_claim_about_the_focus():
    asked = Asked((N,), ("buffer",), ())
    assert missing_types(asked, said("The minimum size is 500 bytes.", "Responses are streamed.")) == (N,)
    assert missing_types(asked, said("The buffer holds 500 bytes.")) == ()
    # the cited section's title counts as what the claim says
    assert missing_types(asked, [("It holds 500 bytes.", {"buffer", "size"})]) == ()
    assert missing_types(Asked((N,), (), ()), said("It holds 500 bytes.")) == ()  # no focus: any claim


def test_wants_says_what_an_instance_is():
    assert [t.wants for t in (N, S, NAME, CH, YN)] == ["a number", "a status code", "a name", "one of the options", ""]


# --- focus ----------------------------------------------------------------------------------------


def test_focus_leaves_out_the_scenario_and_the_words_of_asking():
    q = "Our nginx crawler stores pages. Is it allowed to reuse a stored response?"
    assert focus(q) == ("reuse", "stored", "response")
    # a possessive's words, quoted text and a header's value are scenario
    assert focus("May my JSON serializer write 'NaN' here?") == ("write",)
    assert focus("If a response says Allow: GET, PROPFIND, should the cache store it?") == (
        "response",
        "cache",
        "store",
    )
    # a header's name is what the question is about: it stays, and a second header is not its value
    q = "If a response has Cache-Control: max-age=60 and CDN-Cache-Control: max-age=600, which wins?"
    assert focus(q) == ("response", "cache-control", "cdn-cache-control", "win")


def test_focus_adds_the_names_the_scenario_uses():
    q = "Our limiter answers 503 with a Retry-After header. Can the value be a date?"
    assert focus(q) == ("value", "date", "retry-after")


def test_mentions_focus_by_word_or_stem():
    asked = Asked((YN,), ("key", "compared"), ())
    assert mentions_focus(asked, {"compare", "string"})  # "compar" is the stem of both
    assert mentions_focus(asked, {"key"})
    assert not mentions_focus(asked, {"string", "equal"})
    assert mentions_focus(Asked((YN,), (), ()), set())  # nothing left to hold it to


def test_unmentioned_focus_is_each_focus_word_no_said_word_or_stem_covers():
    asked = Asked((YN,), ("compared", "key", "string"), ())
    assert unmentioned_focus(asked, {"compare"}) == ("key", "string")  # by stem
    assert unmentioned_focus(asked, {"key", "strings"}) == ("compared",)  # "string" is five letters: stem too short
    assert unmentioned_focus(asked, {"compared", "key", "string"}) == ()
    assert unmentioned_focus(asked, set()) == ("compared", "key", "string")
    assert unmentioned_focus(Asked((YN,), (), ()), set()) == ()


# --- unknown subjects -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("question", "unknown"),
    [
        ("How do hpack tables work?", ("hpack",)),  # lower case, absent, rare in English
        ("What does a JWT carry?", ("JWT",)),  # an acronym
        ("Do Safari and Chrome block it?", ("Safari", "Chrome")),  # capitalised, absent: names, not words
        ("Which JSON Pointer escapes a slash?", ("JSON Pointer",)),  # a name of two words
        ("Is TLS 1.3 required here?", ("TLS 1.3",)),  # a name with a version
        ("What does HTTP/3 change?", ("HTTP/3",)),
        ("Is TLS 1.2 required here?", ()),  # the corpus says it
        ("Does HTTP/1.1 define it?", ()),
        ("How does a crawler cache a response?", ()),  # absent but common in English: a situation
        ("Can the cache tunnel it, tunnelling twice?", ()),  # a word sharing a corpus word's stem
        ("Is keepalive the same as a pointer?", ()),  # a corpus compound written solid
        ("Does the partitioned cache misbehaves often?", ()),  # inflected form of a common word
        ("Our hpack encoder broke. Can a cache store it?", ()),  # only the asking sentence counts
        ("Can our hpack encoder store it?", ()),  # a possessive's words are the engineer's own
        ("Can a shared cache like Varnish or Squid store it?", ()),  # examples are the situation
        ("Can a shared cache (Varnish, say) store it?", ()),
        ("Can Varnish store it?", ("Varnish",)),  # the subject itself
        ("Is 'hpack' stored, or example.com, or v2?", ()),  # quoted, a host, a token with a digit
        ("What does the immutable directive do?", ("immutable",)),  # named by its kind, never so in the corpus
        ("Is the partitioned attribute sent?", ("partitioned",)),  # a corpus word, never an attribute
        ("What does the private directive do?", ()),  # "private response directive": one word between
        ("What does the max-age directive do?", ()),
        # a status code named as one that the corpus never writes
        ("Should our logs count 499s as client errors?", ("499",)),
        ("Does a proxy send a 420 response?", ("420",)),
        ("Why does it return 420 here?", ("420",)),
        ("Is status 304 cached?", ()),  # the corpus writes it
        ("Can the cache store 500 bytes?", ()),  # a number that is no code
        ("Is 499 enough?", ()),
        # the scenario names an element by its kind and the asking sentence refers back to it
        ("We announce it in a Sunset response header. What date format does that header use?", ("Sunset",)),
        ("A client sends a Zorp attribute. Which ports does that attribute restrict?", ("Zorp",)),
        ("We send a Keep-Alive header field. How long does that header keep it?", ()),  # the corpus names it so
        ("We send a Sunset response header. How long may a cache keep it?", ()),  # nothing refers back
        ("We send a Sunset header. Which directive does that attribute take?", ()),  # another kind
        ("We send a private response directive. What does that directive do?", ()),
    ],
)
def test_unknown_subjects(question, unknown):
    assert unknown_subjects(question, CORPUS, frequency) == unknown


def test_rare_is_below_the_bar():
    assert english("crawler", frequency) >= RARE_ZIPF
    common = {"zorb": RARE_ZIPF}.get
    assert unknown_subjects("Is zorb used?", CORPUS, lambda w: common(w, 0.0)) == ()
    just_under = {"zorb": RARE_ZIPF - 0.01}.get
    assert unknown_subjects("Is zorb used?", CORPUS, lambda w: just_under(w, 0.0)) == ("zorb",)


def test_english_reads_an_inflected_word_by_its_bare_form():
    assert english("misbehaves", frequency) == 2.5
    assert english("misbehaved", frequency) == 2.5
    assert english("zzs", frequency) == 0.0  # too short a bare form to look up


def test_analyse_gathers_all_three():
    a = analyse("Our crawler saw it. How long does an hpack cache keep it?", CORPUS, frequency)
    assert a == Asked((N,), ("long", "hpack", "cache", "keep"), ("hpack",), ())
    assert a.as_dict() == {
        "answer_type": "number",
        "types": ["number"],
        "focus": ["long", "hpack", "cache", "keep"],
        "unknown": ["hpack"],
    }
