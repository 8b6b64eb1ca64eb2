"""Validators and conditional requests, held to the sections of RFC 9110 and RFC 9111 that
define them (both are in corpus/, so ``/section/rfc9110:13.2.2`` shows the text).

The validator rules are plain functions (``rag_contract/web/validators.py``) and tested as
such first; then every validated route over the app, with the committed recorded drafts, a
frozen rate clock and a generous allowance unless a test is about the limiter.
"""

from __future__ import annotations

import dataclasses
import math
from types import MappingProxyType

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from starlette.testclient import TestClient

from rag_contract.answering.deadline import BudgetReport
from rag_contract.answering.drafting import FixtureDrafter
from rag_contract.index.registry import Registry
from rag_contract.web.fixed_answers import REUSED, budget_json, encode
from rag_contract.web.validators import (
    CACHE_CONTROL,
    conditional_status,
    entity_tag,
    listed_tags,
    not_modified,
    precondition_failed,
    weak_match,
)
from tests.support.apps import generous, make_app
from tests.support.clocks import tick_clock

QID = "q11"
JSON = {"accept": "application/json"}


class CountingDrafter:
    """The recorded drafter, counting how often a request reaches it."""

    def __init__(self, directory) -> None:
        self.inner = FixtureDrafter(directory)
        self.name = self.inner.name
        self.calls = 0

    def draft(self, question_id, question, passages, query=None):
        self.calls += 1
        return self.inner.draft(question_id, question, passages, query)


def without_budget(body: dict) -> dict:
    return {k: v for k, v in body.items() if k != "budget"}


@pytest.fixture
def drafter(project):
    return CountingDrafter(project.paths.drafts)


@pytest.fixture
def registry(index):
    return Registry(index)


@pytest.fixture
def client(project, registry, drafter, embedder):
    return TestClient(make_app(project, registry, fixture_drafter=drafter, embedder=embedder))


# --- the rules, as functions ------------------------------------------------------------------


def test_entity_tag_is_quoted_weak_only_when_asked_and_digests_every_part_apart():
    """RFC 9110 section 8.8.3: entity-tag = [ weak ] opaque-tag, weak = %s"W/"."""
    strong, weak = entity_tag(["a"], weak=False), entity_tag(["a"], weak=True)
    assert strong.startswith('"') and strong.endswith('"') and weak == "W/" + strong
    assert entity_tag(["ab", "c"], weak=False) != entity_tag(["a", "bc"], weak=False)
    assert entity_tag(["a"], weak=False) == entity_tag([b"a"], weak=False)


@pytest.mark.parametrize(
    ("a", "b", "weakly_equal"),
    # The example table of RFC 9110 section 8.8.3.2, weak comparison column.
    [('W/"1"', 'W/"1"', True), ('W/"1"', 'W/"2"', False), ('W/"1"', '"1"', True), ('"1"', '"1"', True)],
)
def test_weak_comparison_is_the_table_of_rfc9110_8_8_3_2(a, b, weakly_equal):
    assert weak_match(a, b) is weakly_equal


@pytest.mark.parametrize(
    ("field", "tags"),
    [
        ('"xyzzy"', ['"xyzzy"']),
        ('"xyzzy", "r2d2xxxx", "c3piozzzz"', ['"xyzzy"', '"r2d2xxxx"', '"c3piozzzz"']),  # section 13.1.2 examples
        ('W/"xyzzy", W/"r2d2xxxx"', ['W/"xyzzy"', 'W/"r2d2xxxx"']),
        ('"a,b" , "c"', ['"a,b"', '"c"']),  # a comma is an etagc: part of the tag, not a separator
        (', "a",, "b" ,', ['"a"', '"b"']),  # empty list elements (section 5.6.1)
        ("xyzzy", None),  # unquoted: not an entity-tag
        ('"a" junk', None),
        ('"unterminated', None),
        ("", None),
    ],
)
def test_if_none_match_lists_parse_as_rfc9110_8_8_3_and_5_6_1_say(field, tags):
    assert listed_tags(field) == tags


def test_if_none_match_is_false_on_a_weak_match_or_star_and_absent_means_no_condition():
    """RFC 9110 section 13.1.2: weak comparison; "*" is false when a representation exists."""
    tag = entity_tag(["x"], weak=True)
    assert not_modified(tag, tag)
    assert not_modified(tag.removeprefix("W/"), tag)  # the weak comparison ignores W/
    assert not_modified(f'"other", {tag}', tag)
    assert not_modified("*", tag)
    assert not not_modified(None, tag)
    assert not not_modified('"other"', tag)
    assert not not_modified(tag.removeprefix("W/").rstrip('"'), tag)  # malformed: no condition


def test_if_match_uses_the_strong_comparison_and_is_evaluated_before_if_none_match():
    """RFC 9110 sections 13.1.1 (strong comparison, "*") and 13.2.2 (step 1 before step 3)."""
    strong, weak = entity_tag(["x"], weak=False), entity_tag(["x"], weak=True)
    assert not precondition_failed(strong, strong)
    assert not precondition_failed(f'"other", {strong}', strong)
    assert not precondition_failed("*", weak) and not precondition_failed(None, weak)
    assert precondition_failed(weak, weak)  # a weak tag never matches strongly
    assert precondition_failed('"other"', strong)
    assert precondition_failed("not a tag", strong)  # cannot be true
    assert conditional_status('"other"', strong, strong) == 412
    assert conditional_status(strong, strong, strong) == 304
    assert conditional_status(None, '"other"', strong) is None


# --- GET /answer/{id} ---------------------------------------------------------------------------

_MS = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.integers(-(10**20), 10**20))


@settings(max_examples=300, deadline=None)
@given(_MS, _MS, st.dictionaries(st.text(max_size=12), _MS, max_size=4))
def test_a_reused_answers_budget_is_the_json_the_body_always_had(deadline, spent, stages):
    """The budget member is written directly; its bytes are ``json.dumps``'s, or it refuses as that does."""
    budget = BudgetReport(deadline, spent, MappingProxyType(stages))
    numbers = [deadline, spent, *stages.values()]
    if all(isinstance(n, int) or math.isfinite(n) for n in numbers):
        assert budget_json(budget) == encode(budget.as_dict())
    else:
        with pytest.raises(ValueError):
            encode(budget.as_dict())
        with pytest.raises(ValueError):
            budget_json(budget)


def test_an_answer_and_its_304_carry_their_fields_in_the_order_every_json_route_writes_them(client):
    r = client.get(f"/answer/{QID}")
    names = [k.decode() for k, _ in r.headers.raw]
    assert names == [
        "x-content-type-options",
        "cache-control",
        "x-index-version",
        "etag",
        "content-length",
        "content-type",
    ]
    assert r.headers["content-type"] == "application/json" and int(r.headers["content-length"]) == len(r.content)
    r304 = client.get(f"/answer/{QID}", headers={"if-none-match": r.headers["etag"]})
    assert [k.decode() for k, _ in r304.headers.raw] == ["cache-control", "x-index-version", "etag"]


def test_an_answer_carries_a_weak_tag_no_cache_and_the_version(client, index):
    """RFC 9110 section 8.8.1: weak, because two responses differ in the budget alone;
    RFC 9111 section 5.2.2.4: no-cache, so a stored answer is revalidated before every reuse."""
    r = client.get(f"/answer/{QID}")
    assert r.status_code == 200
    assert r.headers["etag"].startswith('W/"')
    assert r.headers["cache-control"] == CACHE_CONTROL == "no-cache"
    assert r.headers["x-index-version"] == r.json()["index_version"] == index.version


def test_if_none_match_with_the_tag_is_304_with_the_200s_validator_fields_and_no_body(client, index):
    """RFC 9110 section 13.2.2 step 3 (GET -> 304) and section 15.4.5 (what a 304 carries)."""
    first = client.get(f"/answer/{QID}")
    tag = first.headers["etag"]
    for field in (tag, tag.removeprefix("W/"), f'"nope", {tag}', "*"):
        r = client.get(f"/answer/{QID}", headers={"if-none-match": field})
        assert r.status_code == 304, field
        assert r.content == b""
        assert r.headers["etag"] == tag
        assert r.headers["cache-control"] == "no-cache"
        assert r.headers["x-index-version"] == index.version
    assert client.head(f"/answer/{QID}", headers={"if-none-match": tag}).status_code == 304
    other = client.get(f"/answer/{QID}", headers={"if-none-match": '"nope"'})
    assert other.status_code == 200 and other.headers["etag"] == tag
    assert without_budget(other.json()) == without_budget(first.json())


def test_revalidation_and_reuse_do_no_work_and_the_budget_says_so(project, registry, drafter, embedder):
    """An answer is computed once per Index object; a reuse reports what it spent, as ``reused``."""
    app = make_app(project, registry, fixture_drafter=drafter, embedder=embedder, service_clock=tick_clock())
    client = TestClient(app)
    first = client.get(f"/answer/{QID}")
    assert drafter.calls == 1
    assert set(first.json()["budget"]["stages"]) == {"retrieval", "drafting", "grounding", "relevance"}
    again = client.get(f"/answer/{QID}")
    revalidated = client.get(f"/answer/{QID}", headers={"if-none-match": first.headers["etag"]})
    assert drafter.calls == 1 and revalidated.status_code == 304
    budget = again.json()["budget"]
    assert budget["stages"] == {REUSED: budget["spent_ms"]} and 0 < budget["spent_ms"] < 2  # two ticks of 1 ms
    assert again.headers["etag"] == first.headers["etag"]
    assert without_budget(again.json()) == without_budget(first.json())


def test_a_cutover_changes_the_tag_at_once_and_the_answer_is_computed_on_the_new_index(
    client, registry, index, drafter
):
    """The memo is keyed on the acquired Index object: the first request after install()
    recomputes on the new index, and the old tag no longer matches (a 200, not a 304)."""
    tag = client.get(f"/answer/{QID}").headers["etag"]
    registry.install(dataclasses.replace(index, version="bbbbbbbbbbbb"))
    r = client.get(f"/answer/{QID}", headers={"if-none-match": tag})
    assert r.status_code == 200 and drafter.calls == 2
    assert r.json()["index_version"] == r.headers["x-index-version"] == "bbbbbbbbbbbb"
    assert r.headers["etag"] != tag
    # Same version, another object (a reload of the same build): recomputed, same tag.
    same = dataclasses.replace(index)
    registry.install(index)
    registry.install(same)
    assert client.get(f"/answer/{QID}").headers["etag"] == tag and drafter.calls == 3


def test_preconditions_are_ignored_where_the_response_would_not_be_2xx(project, drafter, embedder, client):
    """RFC 9110 section 13.2.1: a 404 or a 503 is answered as if no condition were sent."""
    empty = TestClient(make_app(project, Registry(None, "no index"), fixture_drafter=drafter, embedder=embedder))
    for c, path, status in (
        (client, "/answer/nope", 404),
        (client, "/q/nope", 404),
        (client, "/section/rfc9110:999.9", 404),
        (empty, f"/answer/{QID}", 503),
        (empty, f"/q/{QID}", 503),
        (empty, "/section/rfc9110:13.2.2", 503),
    ):
        r = c.get(path, headers={"if-none-match": "*", "if-match": '"no-such-tag"'})
        assert r.status_code == status, path
        assert "etag" not in r.headers, path
        assert r.headers["cache-control"] == "no-cache", path  # a 404 is heuristically cacheable (RFC 9111 4.2.2)


def test_the_rate_limiter_decides_before_any_precondition(project, registry, drafter, embedder):
    t = generous(project.thresholds)
    t = dataclasses.replace(t, rate_limit=dataclasses.replace(t.rate_limit, max_client_burst=1))
    client = TestClient(make_app(project, registry, fixture_drafter=drafter, embedder=embedder, thresholds=t))
    tag = client.get(f"/answer/{QID}").headers["etag"]
    refused = client.get(f"/answer/{QID}", headers={"if-none-match": tag})
    assert refused.status_code == 429 and "etag" not in refused.headers


ROUTES = (f"/answer/{QID}", f"/q/{QID}", "/questions", "/section/rfc9110:13.2.2", "/sections", "/")
PAGES = (f"/q/{QID}", "/section/rfc9110:13.2.2", "/sections", "/")


@pytest.mark.parametrize("path", ROUTES)
def test_if_match_naming_no_current_representation_is_412(client, path):
    # RFC 9110 section 13.1.1: the method is not performed; 15.5.13: 412.
    tag = client.get(path).headers["etag"]
    r = client.get(path, headers={"if-match": '"not-the-tag"'})
    assert r.status_code == 412, path
    if path in PAGES:  # a page's 412 is a page: a JSON body where HTML was asked is neither
        assert r.headers["content-type"].startswith("text/html") and "Precondition failed" in r.text, path
        assert r.headers["x-content-type-options"] == "nosniff"
    else:
        assert r.json()["error"] == "precondition_failed", path
    assert client.get(path, headers={"if-match": "*"}).status_code == 200
    matched = client.get(path, headers={"if-match": tag})
    assert matched.status_code == (412 if tag.startswith("W/") else 200), path  # strong comparison only


@pytest.mark.parametrize("path", ROUTES)
def test_if_none_match_on_two_lines_is_one_list(client, path):
    # RFC 9110 section 5.3: field lines of one name are combined into one list, in order.
    tag = client.get(path).headers["etag"]
    r = client.get(path, headers=[("if-none-match", '"other"'), ("if-none-match", tag)])
    assert r.status_code == 304, path


def test_a_json_section_keeps_a_json_412(client):
    r = client.get("/section/rfc9110:13.2.2", headers={"if-match": '"x"', "accept": "application/json"})
    assert r.status_code == 412 and r.json()["error"] == "precondition_failed"


@pytest.mark.parametrize("if_match", ['"any-tag"', 'W/"weak"', '"a", "b"'])
def test_post_ask_with_an_if_match_that_cannot_hold_is_412_before_its_body_is_read(client, if_match):
    # RFC 9110 section 13.1.1: /ask's representation (the page) has no entity tag, so no listed
    # tag matches; the method is not performed (the question is not answered).
    r = client.post("/ask", json={"question": "What is a URI?"}, headers={"if-match": if_match})
    assert r.status_code == 412 and r.json()["error"] == "precondition_failed"
    assert client.post("/ask", json={"question": "What is a URI?"}, headers={"if-match": "*"}).status_code == 200


def test_the_stylesheet_has_a_strong_tag_and_revalidates(client):
    first = client.get("/static/site.css")
    tag = first.headers["etag"]
    assert tag.startswith('"') and first.headers["cache-control"] == "max-age=300"
    again = client.get("/static/site.css", headers={"if-none-match": tag})
    assert again.status_code == 304 and again.headers["etag"] == tag and again.content == b""
    assert client.get("/static/site.css", headers={"if-match": '"other"'}).status_code == 412


# --- the other routes -----------------------------------------------------------------------------


def test_questions_has_a_strong_tag_and_revalidates(client):
    """A strong tag (RFC 9110 section 8.8.1): the body is the same bytes for the life of the process."""
    r = client.get("/questions")
    tag = r.headers["etag"]
    assert not tag.startswith("W/") and r.headers["cache-control"] == "no-cache"
    assert client.get("/questions").content == r.content
    assert client.get("/questions", headers={"if-none-match": tag}).status_code == 304


def test_section_varies_on_accept_and_each_representation_has_its_own_strong_tag(client, registry, index):
    """RFC 9110 section 12.5.5: Vary: Accept on every /section response, since JSON or HTML
    is chosen by Accept; each representation its own tag (section 8.8.3)."""
    path = "/section/rfc9110:13.2.2"
    as_json, as_html = client.get(path, headers=JSON), client.get(path)
    for r in (as_json, as_html, client.get("/section/rfc9110:0.0"), client.get("/section/rfc9110:0.0", headers=JSON)):
        assert r.headers["vary"] == "Accept"
    assert as_json.headers["etag"] != as_html.headers["etag"]
    assert not as_json.headers["etag"].startswith("W/") and not as_html.headers["etag"].startswith("W/")
    assert client.get(path, headers={**JSON, "if-none-match": as_json.headers["etag"]}).status_code == 304
    not_mod = client.get(path, headers={"if-none-match": as_html.headers["etag"]})
    assert not_mod.status_code == 304 and not_mod.headers["vary"] == "Accept"
    assert client.get(path, headers={**JSON, "if-none-match": as_html.headers["etag"]}).status_code == 200
    registry.install(dataclasses.replace(index, version="bbbbbbbbbbbb"))
    after = client.get(path, headers={**JSON, "if-none-match": as_json.headers["etag"]})
    assert after.status_code == 200 and after.headers["etag"] != as_json.headers["etag"]


def test_pages_revalidate_and_a_question_page_has_its_own_weak_tag(client, registry, index):
    answer, page = client.get(f"/answer/{QID}"), client.get(f"/q/{QID}")
    assert page.headers["etag"].startswith('W/"') and page.headers["etag"] != answer.headers["etag"]
    assert page.headers["cache-control"] == "no-cache" and page.headers["x-index-version"] == index.version
    not_mod = client.get(f"/q/{QID}", headers={"if-none-match": page.headers["etag"]})
    assert not_mod.status_code == 304 and not_mod.headers["x-index-version"] == index.version
    listing = client.get("/")
    assert listing.status_code == 200 and not listing.headers["etag"].startswith("W/")
    assert client.get("/", headers={"if-none-match": listing.headers["etag"]}).status_code == 304
    registry.install(dataclasses.replace(index, version="bbbbbbbbbbbb"))
    assert client.get("/", headers={"if-none-match": listing.headers["etag"]}).status_code == 200
    assert client.get(f"/q/{QID}", headers={"if-none-match": page.headers["etag"]}).status_code == 200


def test_only_a_verdict_is_kept_so_a_failure_is_never_served_twice(project, index, embedder, tmp_path):
    drafter = CountingDrafter(tmp_path)
    client = TestClient(make_app(project, Registry(index), fixture_drafter=drafter, embedder=embedder))
    assert client.get(f"/answer/{QID}").status_code == 503  # no recorded draft yet: draft_unavailable
    (tmp_path / f"{QID}.json").write_bytes((project.paths.drafts / f"{QID}.json").read_bytes())
    r = client.get(f"/answer/{QID}")
    assert r.status_code == 200 and "etag" in r.headers and drafter.calls == 2
