"""The grounding check against real corpus sections: what it keeps, what it withdraws, and why."""

from __future__ import annotations

import os
import subprocess
import sys
import types
from dataclasses import dataclass
from pathlib import Path

import pytest

from rag_contract.answering import grounding
from rag_contract.answering.grounding import (
    RULE_CITATION,
    RULE_COVERAGE,
    RULE_LITERAL,
    Claim,
    check_claim,
    check_claims,
)
from rag_contract.corpus.sources import load_corpus
from rag_contract.text import words
from rag_contract.text.words import PassageTerms, content_words, literals, passage_terms

FLOOR = 2 / 3  # the configured floor

# The passages "the drafter saw" for every table row.  rfc9110#15.5.5 is deliberately absent.
RETRIEVED_IDS = (
    "rfc9111#3",
    "rfc9111#4.2.1",
    "rfc9111#4.3.4",
    "rfc9111#5.2",
    "rfc9110#4.2.1",
    "rfc9110#15.4.5",
    "rfc9110#15.4.7",
    "rfc6265#4.1.2.6",
)


@pytest.fixture(autouse=True)
def _cold_caches():
    """Each test tokenises for itself: an answer cached by an earlier test would hide a changed
    rule from the tests that pin it (and from mutation testing's map of which test runs what)."""
    for cached in (words._chunk_tokens, words.literal_of, words.content_word):
        cached.cache_clear()


@pytest.fixture(scope="module")
def corpus(root):
    return load_corpus(root / "corpus")


@pytest.fixture(scope="module")
def retrieved(corpus) -> dict[str, PassageTerms]:
    sections = corpus.by_id()
    return {sid: passage_terms(sid, sections[sid].text, sections[sid].title) for sid in RETRIEVED_IDS}


@dataclass(frozen=True)
class Row:
    text: str
    cites: str
    rule: str | None  # None: kept
    detail: str | None = None  # substring the detail must contain
    missing: tuple[str, ...] | None = None  # exact `missing` when given


ROWS = {
    # -- kept -------------------------------------------------------------------
    "near_quote_kept": Row(
        "A cache can calculate the freshness lifetime of a response by evaluating "
        "the following rules and using the first match.",
        "rfc9111#4.2.1",
        None,
    ),
    "paraphrase_above_floor_kept": Row(
        "When a response carries max-age, caches treat that directive's value as its freshness lifetime.",
        "rfc9111#4.2.1",
        None,
    ),
    "own_section_named_kept": Row(
        "Section 4.2.1 of RFC 9111 says that when the max-age response directive is present, a cache uses its value.",
        "rfc9111#4.2.1",
        None,
    ),
    "own_section_symbol_and_tag_kept": Row(
        "Per §4.2.1 and Sections 5.2.2.1 and 5.3 of [CACHING], the Expires value minus the Date value is used.",
        "rfc9111#4.2.1",
        None,
    ),
    "header_name_present_kept": Row(
        "A proxy MUST pass Cache-Control directives through in forwarded messages.",
        "rfc9111#5.2",
        None,
    ),
    "status_code_and_headers_present_kept": Row(
        "A server generating a 304 response MUST generate Content-Location, Date, ETag, and Vary "
        "if they would have been sent in a 200 response.",
        "rfc9110#15.4.5",
        None,
    ),
    "rfc_number_exempt_kept": Row(
        # rfc9110#4.2.1 cites RFC 3986 only as "[URI]"; "3986" must not count as a literal.
        "The host identifier of an http URI is defined by RFC 3986, Section 3.2.2.",
        "rfc9110#4.2.1",
        None,
    ),
    "internal_capital_present_kept": Row(
        "The HttpOnly attribute limits the scope of the cookie to HTTP requests.",
        "rfc6265#4.1.2.6",
        None,
    ),
    "line_wrapped_hyphen_matches_kept": Row(
        # the passage breaks "case-" / "insensitively" across lines
        "Cache directives are identified by a token and compared case-insensitively.",
        "rfc9111#5.2",
        None,
    ),
    "title_word_counts_kept": Row(
        # "unused" is only in the heading "306 (Unused)"
        "The 306 status code is unused and reserved.",
        "rfc9110#15.4.7",
        None,
    ),
    "negation_passes_lexical_not_entailment": Row(
        # the documented limit: a quoted-and-negated passage is lexically supported
        "A cache can never calculate the freshness lifetime of a response by evaluating the following rules.",
        "rfc9111#4.2.1",
        None,
    ),
    # -- withdrawn by citation ----------------------------------------------------
    "citation_outside_retrieved": Row(
        "A 404 response indicates that the origin server did not find the target resource.",
        "rfc9110#15.5.5",
        RULE_CITATION,
        "cites rfc9110#15.5.5, not among retrieved: ['rfc6265#4.1.2.6',",
        (),
    ),
    # -- withdrawn by literal -------------------------------------------------------
    "hyphenated_literal_written_as_two_words": Row(
        "A cache computes the freshness-lifetime of a response from the max-age directive.",
        "rfc9111#4.2.1",
        RULE_LITERAL,
        "literal 'freshness-lifetime' not in rfc9111#4.2.1",
        ("freshness-lifetime",),
    ),
    "invented_status_code": Row(
        "When a cache receives a 306 response, it updates the header fields of its stored responses.",
        "rfc9111#4.3.4",
        RULE_LITERAL,
        "literal '306' not in rfc9111#4.3.4",
        ("306",),
    ),
    "invented_header_name": Row(
        "The server generating a 304 response MUST generate the Cache-Status header field.",
        "rfc9110#15.4.5",
        RULE_LITERAL,
        "literal 'Cache-Status' not in rfc9110#15.4.5",
        ("Cache-Status",),
    ),
    "invented_number_in_directive": Row(
        "If the max-age=3600 directive is present, a cache uses its value as the freshness lifetime.",
        "rfc9111#4.2.1",
        RULE_LITERAL,
        "literal '3600' not in rfc9111#4.2.1",
        ("3600",),
    ),
    "invented_internal_capital_name": Row(
        "The SameSite attribute limits the scope of the cookie to HTTP requests.",
        "rfc6265#4.1.2.6",
        RULE_LITERAL,
        "literal 'SameSite' not in rfc6265#4.1.2.6",
        ("SameSite",),
    ),
    "several_missing_literals_all_named": Row(
        "A 306 response carries the Cache-Status header field.",
        "rfc9110#15.4.5",
        RULE_LITERAL,
        "literals '306', 'Cache-Status' not in rfc9110#15.4.5",
        ("306", "Cache-Status"),
    ),
    # -- withdrawn by coverage -------------------------------------------------------
    "paraphrase_under_floor": Row(
        "Caches decide how long a stored reply stays usable by consulting the origin clock and heuristics.",
        "rfc9111#4.2.1",
        RULE_COVERAGE,
        "< floor 0.67",
    ),
    "only_a_section_reference": Row(
        "See Section 4.2.1 of RFC 9111.",
        "rfc9111#4.2.1",
        RULE_COVERAGE,
        "coverage 0.00 < floor 0.67 (0/0",
        (),
    ),
}


@pytest.mark.parametrize("row", list(ROWS.values()), ids=list(ROWS))
def test_table(row: Row, retrieved):
    v = check_claim(Claim(row.text, row.cites), retrieved, FLOOR)
    assert v.claim == Claim(row.text, row.cites)
    assert v.rule == row.rule, v.detail
    assert v.kept is (row.rule is None)
    if row.rule is None:
        assert v.detail is None
        assert v.coverage is not None and v.coverage >= FLOOR
    else:
        assert row.detail is not None and row.detail in v.detail
    if row.missing is not None:
        assert v.missing == row.missing
    if row.rule == RULE_CITATION:
        assert v.coverage is None
    else:
        assert v.coverage is not None


def test_paraphrase_rows_are_really_paraphrases(retrieved):
    """The 'above floor' row is not a disguised full quote, and the 'under floor' figure is in detail."""
    above = check_claim(Claim(ROWS["paraphrase_above_floor_kept"].text, "rfc9111#4.2.1"), retrieved, FLOOR)
    assert FLOOR <= above.coverage < 1.0
    assert above.missing  # some paraphrase words are not in the passage
    under = check_claim(Claim(ROWS["paraphrase_under_floor"].text, "rfc9111#4.2.1"), retrieved, FLOOR)
    assert under.coverage < FLOOR
    assert under.detail.startswith(f"coverage {under.coverage:.2f} < floor 0.67")
    assert "reply" in under.missing


def test_literal_rule_runs_before_coverage(retrieved):
    # near-verbatim, so coverage alone would keep it: the literal rule withdraws it
    v = check_claim(
        Claim("A cache can calculate the freshness-lifetime of a response by evaluating the rules.", "rfc9111#4.2.1"),
        retrieved,
        FLOOR,
    )
    assert (v.rule, v.missing) == (RULE_LITERAL, ("freshness-lifetime",))
    assert v.coverage >= FLOOR


def test_rfc_number_would_be_a_missing_literal_without_the_exemption(retrieved):
    assert "3986" not in retrieved["rfc9110#4.2.1"].words
    assert literals("defined by RFC 3986, Section 3.2.2") == ()
    assert literals("defined by 3986 3.2.2") == ("3986", "3.2.2")


def test_floor_is_inclusive_and_validated(retrieved):
    claim = Claim(ROWS["paraphrase_under_floor"].text, "rfc9111#4.2.1")
    cov = check_claim(claim, retrieved, FLOOR).coverage
    assert check_claim(claim, retrieved, cov).kept
    with pytest.raises(ValueError):
        check_claim(claim, retrieved, 1.5)


# --- check_claims: checkpoint and determinism -------------------------------------


def _answer() -> list[Claim]:
    return [Claim(r.text, r.cites) for r in ROWS.values()]


def test_check_claims_checkpoints_before_each_claim(retrieved, monkeypatch):
    events: list[str] = []
    real = grounding.check_claim

    def logged(claim, *args):
        events.append(f"check:{claim.text[:10]}")
        return real(claim, *args)

    monkeypatch.setattr(grounding, "check_claim", logged)
    claims = _answer()[:3]
    verdicts = check_claims(claims, retrieved, FLOOR, checkpoint=lambda: events.append("checkpoint"))
    assert events == [e for c in claims for e in ("checkpoint", f"check:{c.text[:10]}")]
    assert [v.claim for v in verdicts] == claims


class DeadlineExceeded(Exception):
    pass


def test_checkpoint_exception_propagates_without_partial_result(retrieved):
    calls = 0

    def checkpoint():
        nonlocal calls
        calls += 1
        if calls == 3:
            raise DeadlineExceeded("answer budget spent")

    result = "untouched"
    with pytest.raises(DeadlineExceeded):
        result = check_claims(_answer(), retrieved, FLOOR, checkpoint=checkpoint)
    assert result == "untouched"  # nothing was returned
    assert calls == 3  # abandoned at the third claim, the rest never checked


def test_check_claims_empty_answer(retrieved):
    assert check_claims([], retrieved, FLOOR, checkpoint=lambda: pytest.fail("no claims, no checkpoint")) == ()


def test_deterministic_in_process(corpus, retrieved):
    first = check_claims(_answer(), retrieved, FLOOR)
    sections = corpus.by_id()
    rebuilt = {sid: passage_terms(sid, sections[sid].text, sections[sid].title) for sid in reversed(RETRIEVED_IDS)}
    assert rebuilt == retrieved
    assert check_claims(_answer(), rebuilt, FLOOR) == first


def test_deterministic_across_hash_seeds(root):
    """Verdicts, details and missing-word order must not depend on set iteration order."""
    script = (
        "import sys; from pathlib import Path; sys.path.insert(0, sys.argv[1]);"
        "from rag_contract.corpus.sources import load_corpus; from rag_contract.answering.grounding import *;"
        "from rag_contract.text.words import passage_terms;"
        "c = load_corpus(Path(sys.argv[1]) / 'corpus').by_id();"
        "ids = ['rfc9111#4.2.1', 'rfc9111#5.2', 'rfc9110#15.4.5'];"
        "r = {i: passage_terms(i, c[i].text, c[i].title) for i in ids};"
        "cl = [Claim('Caches decide how long a stored reply stays usable by the origin clock.', ids[0]),"
        "      Claim('A 306 response carries the Cache-Status and X-Foo header fields.', ids[2]),"
        "      Claim('A cache stores a 404 response.', 'rfc9110#15.5.5')];"
        "print(repr(check_claims(cl, r, 2/3)))"
    )
    outputs = set()
    for seed in ("1", "2", "3"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        out = subprocess.run([sys.executable, "-c", script, str(root)], env=env, capture_output=True, text=True)
        assert out.returncode == 0, out.stderr
        outputs.add(out.stdout)
    assert len(outputs) == 1


# --- tokenizer units ------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, expected",
    [
        ("Cache-Control: max-age=3600", ("Cache-Control", "max-age", "3600")),
        ("over HTTP/1.1 and HTTP/2", ("1.1", "2")),
        ("a 304 (Not Modified) response", ("304",)),
        ("the If-None-Match and Content-Length fields", ("If-None-Match", "Content-Length")),
        ("HttpOnly and ClientHello and IPv6", ("HttpOnly", "ClientHello", "IPv6")),
        ("the freshness_lifetime value", ("freshness_lifetime",)),
        ('the "no-cache" directive', ("no-cache",)),
        ("cookies for example.com, e.g. here", ("example.com",)),
        ("HTTP URIs MUST use GET", ()),  # all-caps words and acronym plurals are not literals
        ("the Expires header field", ()),  # single capitalised header names are indistinguishable from prose
        ("304 then 304 again", ("304",)),  # distinct, first-occurrence order
        ("the HttpOnly's scope and the server's cache", ("HttpOnly",)),  # possessives
    ],
)
def test_literals(text, expected):
    assert literals(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "Section 4.2.1",
        "section 4.2.1",
        "Sections 4.2 and 4.3",
        "Sections 4.2, 4.3, and 5",
        "Section 4.2.1 of RFC 9111",
        "RFC 9111, Section 4.2.1",
        "RFC9111",
        "RFCs 7230 and 7234",
        "§4.2.1",
        "§ 5.2.2.1",
        "Appendix B",
        "Section A.1",
        "rfc9111#4.2.1",
        "[RFC9110]",
        "Section 4.2.1, Appendix B, RFC 9111, \u00a75 and [HTTP]",  # every kind of reference at once
    ],
)
def test_section_references_are_exempt(text):
    assert literals(text) == ()
    assert content_words(text) == ()


def test_singular_section_reference_does_not_swallow_a_following_number():
    assert literals("Section 4.3 and 304 responses") == ("304",)


def test_content_words_normalisation():
    assert content_words("The caches' responses and the server's entries") == ("cache", "response", "server", "entry")
    assert content_words("Caches MUST NOT store URIs") == ("cache", "store", "uri")
    assert content_words("the status of this process") == ("status", "process")  # -ss/-us not stemmed
    # a possessive acronym is the acronym, not a plural of something shorter
    assert content_words("a URL's host and the URI'S scheme") == ("url", "host", "uri", "scheme")
    assert content_words("max-age and Max-Age") == ("max-age",)  # lower-cased, compounds whole
    assert content_words("Cache cache CACHES") == ("cache",)


def test_typographic_apostrophes_and_hyphens_read_as_ascii():
    assert words.normalise_text("the server\u2019s max\u2010age and no\u2011cache") == (
        "the server's max-age and no-cache"
    )
    assert words.normalise_text("no\u2011cache") == "no-cache"
    assert words.normalise_text("max\u2010age") == "max-age"
    assert words.normalise_text("plain text") == "plain text"
    assert literals("the max\u2010age directive") == ("max-age",)
    assert content_words("the server\u2019s caches") == ("server", "cache")


def test_passage_terms_rejoins_wrapped_hyphens_and_indexes_compound_parts():
    t = passage_terms("x#1", "Cache-Control: max-\n   age directives are case-\ninsensitive.", title="Some Title")
    assert {"max-age", "case-insensitive", "cache-control"} <= t.words
    assert "age" not in t.words  # rule 2 sees whole tokens only
    assert {"max-age", "max", "age", "control", "directive", "title"} <= t.content  # parts for rule 3
    assert t.literals == {"Cache-Control", "max-age", "case-insensitive"}


def test_passage_terms_include_title(corpus):
    s = corpus.section("rfc9110#15.4.7")
    assert "unused" in passage_terms(s.id, s.text, s.title).content
    assert "unused" not in passage_terms(s.id, s.text).content


def test_two_words_do_not_make_a_hyphenated_literal(retrieved):
    t = retrieved["rfc9111#4.2.1"]
    assert {"freshness", "lifetime"} <= t.words
    assert "freshness-lifetime" not in t.words


def test_chunked_tokenising_equals_one_pass_over_every_section(corpus):
    """The per-chunk cache is an optimisation only: same tokens, same order, whole corpus."""
    for s in corpus.sections:
        text = words.normalise_text(f"{s.title}\n{s.text}")
        assert list(words.tokens(text)) == words._TOKEN.findall(text), s.id


# --- the coverage floor at its boundary -------------------------------------------------------

# A passage whose content words are exactly these; each claim below covers a known share of its
# own content words, just below, at and just above the configured floor of 2/3.
FRUIT = ("fruit#1", "apple banana cherry grape lemon mango")
BOUNDARY = [  # claim, content words covered, content words, kept
    ("apple banana cherry kiwi papaya", 3, 5, False),  # 0.6: below the floor, above floor - 0.2
    ("apple banana cherry grape lemon kiwi papaya quince", 5, 8, False),  # 0.625: just below
    ("apple banana kiwi", 2, 3, True),  # at the floor, kept (the comparison is strict)
    ("apple banana cherry grape kiwi papaya", 4, 6, True),  # at the floor, another way
    ("apple banana cherry grape lemon kiwi papaya", 5, 7, True),  # 0.714: just above
    ("apple banana cherry kiwi", 3, 4, True),  # 0.75: above the floor, below floor + 0.2
]


def _check_boundary(check) -> list[str]:
    """What ``check`` (a ``check_claim``) gets wrong at the floor: one line per wrong verdict."""
    wrong = []
    retrieved = {FRUIT[0]: passage_terms(*FRUIT)}
    for text, covered, total, kept in BOUNDARY:
        v = check(Claim(text, FRUIT[0]), retrieved, FLOOR)
        if v.coverage != covered / total or v.kept is not kept:
            wrong.append(f"{text!r}: coverage {v.coverage}, kept {v.kept}; expected {covered}/{total}, {kept}")
        detail = f"coverage {covered / total:.2f} < floor 0.67 ({covered}/{total} content words in {FRUIT[0]})"
        if not kept and (v.rule, v.detail) != (RULE_COVERAGE, detail):
            wrong.append(f"{text!r}: {v.rule} {v.detail}; expected {detail}")
    return wrong


def test_coverage_floor_boundary():
    assert _check_boundary(check_claim) == []


@pytest.mark.parametrize(
    "moved", ["coverage < coverage_floor - 0.2", "coverage < coverage_floor + 0.2", "coverage <= coverage_floor"]
)
def test_moving_the_coverage_comparison_fails_the_boundary_test(moved, monkeypatch):
    """The comparison moved by 0.2 either way (or made inclusive) is caught by the boundary test."""
    source = Path(grounding.__file__).read_text(encoding="utf-8")
    if "# mutmut generated" in source:
        pytest.skip("under `make mutate` the module is already a mutated copy; this test makes its own mutants")
    assert source.count("if coverage < coverage_floor:") == 1
    mutant = types.ModuleType("grounding_mutant")
    monkeypatch.setitem(sys.modules, "grounding_mutant", mutant)  # dataclasses look their module up
    exec(
        compile(source.replace("if coverage < coverage_floor:", f"if {moved}:"), "grounding_mutant", "exec"),
        mutant.__dict__,
    )
    assert _check_boundary(mutant.check_claim), f"`{moved}` passes the boundary test"


@pytest.mark.parametrize("floor", [0.0, 1.0])
def test_the_floor_may_be_zero_or_one(floor):
    v = check_claim(Claim("apple kiwi", FRUIT[0]), {FRUIT[0]: passage_terms(*FRUIT)}, floor)
    assert v.kept is (floor == 0.0)


@pytest.mark.parametrize("floor", [-0.01, 1.01])
def test_a_floor_outside_zero_to_one_is_refused(floor):
    with pytest.raises(ValueError, match=rf"^coverage_floor must be within \[0, 1\], got {floor}$"):
        check_claim(Claim("apple", FRUIT[0]), {FRUIT[0]: passage_terms(*FRUIT)}, floor)


# --- tokens, one rule at a time ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("token", "literal"),
    [
        ("eTag", True),  # an internal capital after one letter
        ("ETags", True),  # a plural of a mixed-case name is still a name
        ("DNSes", True),  # a lower-case letter before the s: not an acronym plural
        ("URIs", False),
        ("co.uk", True),  # dotted parts of two letters
        ("e.g", False),
        ("don't", False),  # an apostrophe alone makes no literal
        ("ETag'S", True),  # a possessive in capitals is still stripped
        ("under_score", True),
    ],
)
def test_what_makes_a_literal(token, literal):
    assert literals(f"the {token} here") == (((token[:-2] if token.endswith("'S") else token),) if literal else ())


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("the process's value", ("process", "value")),  # a possessive is not a plural
        ("they don't", ()),  # an apostrophe inside a stopword
        ("an IP id", ("ip", "id")),  # two letters carry content
        ("a b 2", ("2",)),  # one letter does not, one digit does
        ("IDs", ("id",)),
        ("3Ds", ("3d",)),  # an acronym plural whose only letter is the last
        ("Ks", ("ks",)),  # two letters are no acronym plural
        ("Entries", ("entry",)),
        ("Process", ("process",)),
        ("ties flies", ("tie", "fly")),
        ("ids hops", ("ids", "hop")),  # three letters are never stemmed
        ("analysis status", ("analysis", "status")),
    ],
)
def test_what_a_content_word_is(text, words):
    assert content_words(text) == words


def test_passage_terms_exactly():
    t = passage_terms("x#1", "HttpOnly's freshness_lifetime caches")
    assert t.section_id == "x#1"
    assert t.words == {"httponly's", "httponly", "freshness_lifetime", "caches"}
    assert t.literals == {"HttpOnly", "freshness_lifetime"}
    assert t.content == {"httponly", "freshness_lifetime", "freshness", "lifetime", "cache"}
