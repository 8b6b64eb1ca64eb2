"""The relevance check's rules on a two-section index made by hand, whose every cosine is known:
when a claim stands for a sentence (at the share, just under it), each feature's arithmetic, the
logit, the verdict at each line, the element-name rule, and the reason word for word. Runs in
milliseconds, so mutation testing runs it against relevance.py (eval/mutation.yaml)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from rag_contract.answering.asked import AnswerType, Asked
from rag_contract.answering.grounding import Claim, Verdict
from rag_contract.answering.relevance import (
    ANSWERS,
    FOCUS_COUNTED,
    MATCH_SHARE,
    NAMED_TERMS,
    OFF_TOPIC,
    STOPS_SHORT,
    Features,
    Relevance,
    addressed_terms,
    assess,
    claim_similarity,
    features,
    logit,
    unknown_elements,
    verdict_for,
)
from rag_contract.config.thresholds import RelevanceConfig
from rag_contract.corpus.chunking import Chunk
from rag_contract.corpus.sentences import Sentence
from rag_contract.corpus.sources import Section
from rag_contract.index.store import Index, IndexInputs, assemble
from rag_contract.text.words import content_words

SECURE = "The Secure attribute limits cookies to secure channels only."  # 5 content words
RANGE = "A server may ignore the Range header field."
SECTIONS = [
    Section("rfc1#1", "Cookie attributes", f"{SECURE} It is so. The Max-Age attribute sets a lifetime."),
    Section("rfc1#2", "Range requests", RANGE),
    Section("rfc1#3", "Prefixes", "A name may begin with __Host- or not."),
]
CHUNKS = [
    Chunk("rfc1#1/0", "rfc1#1", 0, SECURE),
    Chunk("rfc1#1/1", "rfc1#1", 1, "It is so."),
    Chunk("rfc1#2/0", "rfc1#2", 0, RANGE),
]
SENTENCES = [
    Sentence("rfc1#1", 0, SECURE),
    Sentence("rfc1#1", 1, "It is so."),  # no content words: stands for nothing
    Sentence("rfc1#1", 2, "The Max-Age attribute sets a lifetime."),
    Sentence("rfc1#2", 0, RANGE),
]
QUERY = np.array([1.0, 0.0])  # every cosine below is its vector's first coordinate
SENTENCE_VECTORS = np.array([[0.8, 0.6], [0.9, 0.1], [-0.3, 0.9], [-0.2, 0.9]])
CHUNK_VECTORS = np.array([[0.5, 0.5], [0.7, 0.1], [-0.25, 0.9]])
CONFIG = RelevanceConfig(
    {
        "bias": -1.0,
        "similarity": 2.0,
        "coverage": 3.0,
        "unseen": -5.0,
        "section": 7.0,
        "retrieval": 11.0,
        "unmentioned": -13.0,
    },
    0.5,
    -0.5,
)
SCORES = {"rfc1#1": 1.5, "rfc1#2": -0.75}  # retrieval scores of the retrieved sections


@pytest.fixture(scope="module")
def index() -> Index:
    inputs = IndexInputs("c", "e", "k")
    return assemble(
        inputs.version, inputs, "fake", SECTIONS, CHUNKS, CHUNK_VECTORS, SENTENCES, SENTENCE_VECTORS, "q", [],
        np.zeros((0, 2)),
    )  # fmt: skip


def kept(text: str, sid: str = "rfc1#1") -> Verdict:
    return Verdict(Claim(text, sid), True, None, None, 1.0, ())


def test_the_fixture_sentence_has_five_content_words():
    assert len(set(content_words(SECURE))) == 5 and MATCH_SHARE == 0.6


@pytest.mark.parametrize(
    ("claim", "similarity"),
    [
        ("secure attribute limits", 0.8),  # 3 of 5 words: at the share
        ("secure attribute limits cookies", 0.8),
        ("secure attribute", 0.0),  # 2 of 5: under it
        ("so it is", 0.0),  # the sentence without content words is never matched
        ("max-age attribute sets lifetime", 0.0),  # matched, but its cosine is negative: nothing is vouched for
    ],
)
def test_a_claim_stands_for_a_sentence_only_with_most_of_its_words(index, claim, similarity):
    assert claim_similarity(index, kept(claim), QUERY) == pytest.approx(similarity)


def test_the_best_matched_sentence_of_the_cited_section_counts(index):
    both = "secure attribute limits max-age sets lifetime"
    assert claim_similarity(index, kept(both), np.array([0.0, 1.0])) == pytest.approx(0.9)
    assert claim_similarity(index, kept(both), QUERY) == pytest.approx(0.8)
    assert claim_similarity(index, kept(SECURE, "rfc1#2"), QUERY) == 0.0  # another section's sentence


def test_without_a_query_vector_there_is_no_similarity(index):
    assert claim_similarity(index, kept(SECURE), None) == 0.0


def test_addressed_words_are_the_claims_and_their_sections_titles(index):
    said = addressed_terms([kept("secure channels"), kept("ignore it", "rfc1#2"), kept("lost", "rfc9#9")], index)
    assert said == {"secure", "channel", "cookie", "attribute", "ignore", "range", "request", "lost"}
    assert addressed_terms([], index) == set()


def test_each_feature(index):
    w = index.weights
    question = "Does the secure attribute limit zorblax?"
    terms = set(content_words(question))
    assert terms == {"secure", "attribute", "limit", "zorblax"}
    claims = [kept("secure attribute limits"), kept("range header", "rfc1#2")]
    said = addressed_terms(claims, index)
    f = features(question, QUERY, claims, index, said, SCORES)
    total = sum(w(t) for t in terms)
    assert f == Features(
        similarity=0.8,
        coverage=round((w("secure") + w("attribute") + w("limit")) / total, 6),
        unseen=round(w("zorblax") / total, 6),
        section=0.7,  # the best chunk of a cited section
        retrieval=1.5,  # the best retrieval score of a cited section
    )
    assert not w.known("zorblax") and w.known("secure")


def test_the_section_feature_is_the_best_chunk_even_when_negative(index):
    f = features("range", QUERY, [kept("range header", "rfc1#2")], index, set(), SCORES)
    assert f.section == pytest.approx(-0.25)


@pytest.mark.parametrize(("claims", "vector"), [([], QUERY), ([kept("x", "rfc1#3")], QUERY), ([kept("x")], None)])
def test_no_claim_chunk_or_vector_means_no_section_feature(index, claims, vector):
    f = features("secure", vector, claims, index, set(), SCORES)
    assert (f.section, f.similarity) == (0.0, 0.0)


def test_features_are_rounded_to_six_places(index):
    v = np.array([0.123456789, 0.0])
    f = features("secure", v, [kept("secure attribute limits")], index, set(), {"rfc1#1": 0.1234567})
    assert f.similarity == round(0.8 * 0.123456789, 6) and f.section == round(0.7 * 0.123456789, 6)
    assert f.retrieval == 0.123457
    # weights 1 : 2 (an unseen word weighs double)
    thirds = features("secure zorblax", v, [], index, {"secure"}, SCORES)
    assert (thirds.coverage, thirds.unseen) == (0.333333, 0.666667)


@pytest.mark.parametrize(
    ("claims", "retrieval"),
    [
        ([kept(SECURE), kept("range header", "rfc1#2")], 1.5),  # the best cited section
        ([kept("range header", "rfc1#2")], -0.75),  # negative when that is all there is
        ([kept("x", "rfc1#3")], 0.0),  # a cited section retrieval never offered counts for nothing
        ([], 0.0),
    ],
)
def test_the_retrieval_feature_is_the_best_score_of_a_cited_section(index, claims, retrieval):
    assert features("secure", QUERY, claims, index, set(), SCORES).retrieval == retrieval


def test_the_logit_weighs_each_feature_by_its_own_weight():
    f = Features(similarity=0.5, coverage=0.25, unseen=0.125, section=2.0, retrieval=-0.5, unmentioned=0.25)
    assert logit(f, CONFIG.weights) == (
        -1.0 + 2.0 * 0.5 + 3.0 * 0.25 - 5.0 * 0.125 + 7.0 * 2.0 + 11.0 * -0.5 - 13.0 * 0.25
    )


@pytest.mark.parametrize(
    ("words", "expected"),
    [((), 0.0), (("a",), 0.1), (tuple("abc"), 0.3), (tuple("abcdefghij"), 1.0), (tuple("abcdefghijkl"), 1.0)],
)
def test_the_unmentioned_feature_counts_focus_words_up_to_a_cap(index, words, expected):
    """Ten unmentioned focus words say as much as more: the count saturates at FOCUS_COUNTED."""
    assert FOCUS_COUNTED == 10
    f = features("secure", QUERY, [kept("secure attribute limits")], index, set(), SCORES, words)
    assert f.unmentioned == expected


def test_assess_counts_the_focus_words_no_kept_claim_or_cited_title_mentions(index):
    # focus: the asking sentence's content words less the words of asking
    r = assess(
        "Does the secure attribute limit zorblax quuxly?",
        QUERY,
        [kept("secure attribute limits")],
        index,
        CONFIG,
        SCORES,
    )
    assert r.asked is not None and {"zorblax", "quuxly"} <= set(r.asked.focus)
    unmentioned = [w for w in r.asked.focus if w not in {"secure", "attribute", "limit"}]
    assert r.features.unmentioned == round(len(unmentioned) / 10, 6) > 0
    said_all = assess(
        "Does the secure attribute limit?", QUERY, [kept("secure attribute limits")], index, CONFIG, SCORES
    )
    assert said_all.features.unmentioned == 0.0


def test_assess_holds_a_premise_to_the_words_the_kept_claims_say(index):
    q = "RFC 6265 requires the secure attribute to carry a zorblax. Does it limit the cookie?"
    r = assess(q, QUERY, [kept("secure attribute limits")], index, CONFIG, SCORES)
    assert r.premises == (("secure", "attribute", "carry", "zorblax"),)
    assert r.unsupported == ("carry", "zorblax") and r.ceiling == STOPS_SHORT  # two of four words said
    said = assess(q, QUERY, [kept("secure attribute limits carry")], index, CONFIG, SCORES)
    assert said.unsupported == () and said.premises == r.premises  # three of four: it stands


@pytest.mark.parametrize(
    ("score", "verdict"),
    [(0.5001, ANSWERS), (0.5, ANSWERS), (0.4999, STOPS_SHORT), (-0.5, STOPS_SHORT), (-0.5001, OFF_TOPIC)],
)
def test_the_verdict_at_each_line(score, verdict):
    assert verdict_for(score, CONFIG) == verdict
    assert verdict_for(score, CONFIG, OFF_TOPIC) == OFF_TOPIC  # an unknown subject, whatever the score
    # a missing answer type or an unmentioned focus: stops short at best, off topic still off topic
    assert verdict_for(score, CONFIG, STOPS_SHORT) == (OFF_TOPIC if verdict == OFF_TOPIC else STOPS_SHORT)


@pytest.mark.parametrize(
    ("question", "unknown"),
    [
        ("Is Clear-Site-Data sent?", ("Clear-Site-Data",)),
        ("What does SameSite do, and includeSubDomains?", ("SameSite", "includeSubDomains")),
        ("What is the __Host- prefix?", ()),  # the corpus has it; the trailing hyphen is not part of the name
        ("What is the __Secure- prefix?", ("__Secure-",)),
        ("What does Max-Age set?", ()),  # the corpus has it
        ("What is X-Request-Id, or X_Custom?", ()),  # custom fields are context
        ("Is Foo-Bar like foo-bar or Foo-Bar?", ("Foo-Bar",)),
        ("What does the Partitioned attribute do?", ("Partitioned",)),
        ("What does the Secure attribute do?", ()),  # the corpus spells it so
        ("What does the secure attribute do?", ()),
        ("Which Range header fields exist?", ()),
        ("Range header. Zebra header fields?", ()),  # a sentence's first word is not a name
        ("Is a Partitioned cookie Partitioned directive?", ("Partitioned",)),
        # a name set to a value is an element too
        ("Does range=1 work, or zz-top=2, or RANGE=3?", ("zz-top",)),
        ("Does Cache-Control: max-age=60, stale-if-error=86400 help?", ("Cache-Control", "stale-if-error")),
        ("Set-Cookie: sid=abc; Max-Age=5; Flavour=x", ("Set-Cookie", "Flavour")),  # the cookie's own name is not
        ("Is Cookie: a_b=1; c_d=2 sent?", ()),  # every pair of a Cookie header is a cookie's own name
        ("Is /p?utm_x=1&zz=2;v=3 or a%20b=4 normalised?", ()),  # a URI's query and parameters
        ("Is a==b true?", ()),  # a comparison sets nothing
        ('Alt-Svc: h3=":443"; ma=86400 means?', ("Alt-Svc", "h3", "ma")),
        ("Is SameSite=Lax sent?", ("SameSite",)),  # named once, by shape and by setting
    ],
)
def test_unknown_elements(index, question, unknown):
    assert unknown_elements(question, index) == unknown


def test_an_element_is_named_once_as_first_spelled(index):
    assert unknown_elements("Is SameSite the SameSite attribute, or Samesite-?", index) == ("SameSite",)


def test_assess_names_the_weightiest_unaddressed_words(index):
    question = "Does the range attribute secure lifetime zorblax quuxly?"  # the weightiest words come last
    r = assess(question, QUERY, [kept("secure attribute limits")], index, CONFIG, SCORES)
    w = index.weights
    order = sorted(dict.fromkeys(content_words(question)), key=lambda t: -w(t))
    said = addressed_terms([kept("secure attribute limits")], index)
    assert r.unaddressed == tuple(t for t in order if t not in said)[:NAMED_TERMS] == ("zorblax", "quuxly", "range")
    assert r.absent == ("zorblax", "quuxly")
    assert r.asked is not None
    missing = [t for t in r.asked.focus if t not in said]
    assert r.features == features(question, QUERY, [kept("secure attribute limits")], index, said, SCORES, missing)
    assert r.logit == logit(r.features, CONFIG.weights)
    # names English barely uses and no answering section contains, and an element named by its
    # kind that the corpus never names so ("the range attribute"): the question is about them
    assert r.unknown == ("zorblax", "quuxly", "range") and r.verdict == OFF_TOPIC


def test_assess_is_off_topic_for_an_unknown_element(index):
    r = assess("What does the Partitioned attribute do?", QUERY, [kept(SECURE)], index, CONFIG, SCORES)
    assert (r.verdict, r.unknown) == (OFF_TOPIC, ("Partitioned",))


F = Features(0.123456, 0.5, 0.0, 0.654321, 1.234567)


def test_an_answer_gives_one_reason():
    r = Relevance(ANSWERS, 1.23456, F, ("a",), ("a",), ("X",))
    assert r.reason() == "the kept claims address the question"


@pytest.mark.parametrize(
    ("verdict", "unknown", "unaddressed", "absent", "reason"),
    [
        (STOPS_SHORT, (), (), (), "the claims stop short of the question"),
        (OFF_TOPIC, (), (), (), "the claims are off topic"),
        (
            OFF_TOPIC,
            ("SameSite", "Foo-Bar"),
            ("samesite", "lax"),
            ("samesite", "lax"),
            "the claims are off topic: the question names 'SameSite', 'Foo-Bar', which the corpus never contains; "
            "no kept claim addresses 'samesite', 'lax'; the corpus never uses 'samesite', 'lax'",
        ),
        (STOPS_SHORT, (), ("range",), (), "the claims stop short of the question: no kept claim addresses 'range'"),
        (STOPS_SHORT, (), (), ("zz",), "the claims stop short of the question: the corpus never uses 'zz'"),
    ],
)
def test_the_reason_word_for_word(verdict, unknown, unaddressed, absent, reason):
    assert Relevance(verdict, 0.0, F, unaddressed, absent, unknown).reason() == reason


def test_as_dict_rounds_to_four_places_and_carries_the_reason():
    r = Relevance(STOPS_SHORT, 1.23456, F, ("a",), ("a",))
    assert r.as_dict() == {
        "verdict": STOPS_SHORT,
        "logit": 1.2346,
        "features": {
            "similarity": 0.1235,
            "coverage": 0.5,
            "unseen": 0.0,
            "section": 0.6543,
            "retrieval": 1.2346,
            "unmentioned": 0.0,
            "selected": 0.0,
        },
        "unaddressed": ["a"],
        "absent": ["a"],
        "unknown": [],
        "missing": [],
        "unmentioned": [],
        "premises": [],
        "unsupported": [],
        "ceiling": ANSWERS,
        "reason": "the claims stop short of the question: no kept claim addresses 'a'; the corpus never uses 'a'",
    }


# --- the rules that bound the verdict (answering.asked) ------------------------------------------

ASKED = Asked(
    (AnswerType.NUMBER, AnswerType.STATUS_CODE, AnswerType.YES_NO), ("lifetime", "cookie", "max-age", "x"), ()
)


@pytest.mark.parametrize(
    ("unknown", "missing", "focus_said", "ceiling"),
    [
        ((), (), True, ANSWERS),
        (("hpack",), (), True, OFF_TOPIC),
        (("hpack",), (AnswerType.NUMBER,), False, OFF_TOPIC),  # an unknown subject outranks the rest
        ((), (AnswerType.NUMBER,), True, STOPS_SHORT),
        ((), (), False, STOPS_SHORT),
    ],
)
def test_the_ceiling(unknown, missing, focus_said, ceiling):
    assert Relevance(ANSWERS, 0.0, F, (), (), unknown, ASKED, missing, focus_said).ceiling == ceiling


def test_the_reason_names_each_missing_type_and_the_unmentioned_focus():
    r = Relevance(STOPS_SHORT, 0.0, F, (), (), (), ASKED, (AnswerType.NUMBER, AnswerType.STATUS_CODE), False)
    assert r.reason() == (
        "the claims stop short of the question: no kept claim gives a number for 'lifetime cookie max-age'; "
        "no kept claim gives a status code for 'lifetime cookie max-age'; "
        "no kept claim mentions 'lifetime', 'cookie', 'max-age'"
    )
    assert (
        Relevance(STOPS_SHORT, 0.0, F, (), (), (), None, (), False).reason() == "the claims stop short of the question"
    )
    empty = Asked((AnswerType.NUMBER,), (), ())
    assert Relevance(STOPS_SHORT, 0.0, F, (), (), (), empty, (AnswerType.NUMBER,), True).reason() == (
        "the claims stop short of the question: no kept claim gives a number for ''"
    )


def test_a_premise_no_claim_says_caps_the_verdict_and_is_named():
    r = Relevance(ANSWERS, 0.0, F, (), (), (), ASKED, (), True, (), ("alphabetical", "order"))
    assert r.ceiling == STOPS_SHORT
    assert replace(r, verdict=STOPS_SHORT).reason() == (
        "the claims stop short of the question: no kept claim says what the question takes as given: "
        "'alphabetical', 'order'"
    )
    assert replace(r, unknown=("hpack",)).ceiling == OFF_TOPIC  # an unknown subject still outranks it
    assert replace(r, unsupported=()).ceiling == ANSWERS


def test_the_reason_counts_the_focus_words_left_unmentioned_when_some_are_said():
    r = Relevance(STOPS_SHORT, 0.0, F, (), (), (), ASKED, (), True, ("max-age", "cookie"))
    assert r.reason() == (
        "the claims stop short of the question: the claims leave 2 of the 4 words the question is about "
        "unmentioned: 'max-age', 'cookie'"
    )
    assert r.as_dict()["unmentioned"] == ["max-age", "cookie"]
    four = Relevance(OFF_TOPIC, 0.0, F, (), (), (), ASKED, (), True, ("a", "b", "c", "d"))
    assert four.reason().endswith("unmentioned: 'a', 'b', 'c'")  # named up to NAMED_TERMS, counted whole
    assert "leave 4 of the 4" in four.reason()
    # an answer that stands, or one that mentions no focus word at all, says nothing of the count
    assert "unmentioned" not in Relevance(ANSWERS, 0.0, F, (), (), (), ASKED, (), True, ("a",)).reason()
    none_said = Relevance(STOPS_SHORT, 0.0, F, (), (), (), ASKED, (), False, ASKED.focus)
    assert (
        none_said.reason()
        == "the claims stop short of the question: no kept claim mentions 'lifetime', 'cookie', 'max-age'"
    )
    assert "unmentioned" not in Relevance(STOPS_SHORT, 0.0, F, (), (), (), None, (), True, ("a",)).reason()


def test_the_reason_an_answer_stands():
    r = Relevance(ANSWERS, 0.0, F, (), (), (), ASKED, (), True)
    assert r.reason() == (
        "the kept claims address the question: they give a number and a status code "
        "and they mention the question's focus"
    )
    no_focus = Asked((AnswerType.YES_NO,), (), ())
    assert Relevance(ANSWERS, 0.0, F, (), (), (), no_focus, (), True).reason() == "the kept claims address the question"
    focus_only = Asked((AnswerType.YES_NO,), ("x",), ())
    assert Relevance(ANSWERS, 0.0, F, (), (), (), focus_only, (), True).reason() == (
        "the kept claims address the question: they mention the question's focus"
    )


def test_as_dict_carries_what_was_asked():
    r = Relevance(STOPS_SHORT, 0.0, F, (), (), (), ASKED, (AnswerType.NUMBER,), True)
    d = r.as_dict()
    assert (d["answer_type"], d["types"], d["focus"]) == (
        "number",
        ["number", "status_code", "yes_no"],
        list(ASKED.focus),
    )
    assert (d["missing"], d["ceiling"], d["unknown"]) == (["number"], STOPS_SHORT, [])


def test_assess_holds_the_answer_to_its_type_and_focus(index):
    # "how long" asks for a number; the claim about the Secure attribute gives none
    r = assess("How long is the lifetime the Max-Age attribute sets?", QUERY, [kept(SECURE)], index, CONFIG, SCORES)
    assert r.asked is not None and r.asked.answer_type is AnswerType.NUMBER
    assert r.missing == (AnswerType.NUMBER,) and r.focus_said and r.unknown == ()
    assert r.ceiling == STOPS_SHORT and r.verdict in (STOPS_SHORT, OFF_TOPIC)
    # a claim that gives a number and says the focus is held to nothing
    claim = kept("The Max-Age attribute sets a lifetime of 3600 seconds.")
    r = assess("How long is the lifetime the Max-Age attribute sets?", QUERY, [claim], index, CONFIG, SCORES)
    assert r.missing == () and r.focus_said and r.ceiling == ANSWERS
    # claims that never mention the focus
    r = assess("Is the lifetime ever negative?", QUERY, [kept(RANGE, "rfc1#2")], index, CONFIG, SCORES)
    assert not r.focus_said and r.ceiling == STOPS_SHORT
