"""The thresholds loader's rules at their bars, through ``parse_thresholds``: each cross-field
rule just inside, at and just outside its bar, each leaf rule at its edge, and every refusal
with its whole message. The base document is written here (not read from eval/thresholds.yaml)
so a recalibration does not move these tests; mutation testing runs this file against the
loader (eval/mutation.yaml)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from rag_contract.config.thresholds import Thresholds, ThresholdsError, parse_thresholds

FUSION = {
    "dense": -2.5,
    "sentence": 0.25,
    "lexical": 4,
    "title": 13.5,
    "dense_gap": 12,
    "sentence_gap": 6.5,
    "ancestor_title": 8.5,
    "coverage": 1,
    "rank_fusion": 2.75,
}
WEIGHTS = {
    "bias": -1.5,
    "similarity": 2,
    "coverage": 3.25,
    "unseen": -4,
    "section": 0.5,
    "retrieval": 1.75,
    "unmentioned": -2.5,
}
BASE: dict[str, Any] = {
    "measured_on": "9b3b9227ec29",
    "index": {"embedder": "minilm-l6-int8", "chunk_words": 220, "chunk_overlap": 40},
    "retrieval": {
        "serving_mode": "fused",
        "top_k": 10,
        "rrf_k": 60,
        "fusion": FUSION,
        "floors": {"recall@1": 0.57, "recall@5": 0.81, "recall@10": 1, "mrr": 0},
        "ceilings": {"q01": 5, "q02": 1},
    },
    "grounding": {"coverage_floor": 1},
    "drafting": {
        "extractive_max_claims": 3,
        "extractive_sections": 4,
        "evidence_lexical_weight": 0,
        "live_model": "gpt-4o-mini",
        "max_completion_tokens": 400,
    },
    "relevance": {"weights": WEIGHTS, "answer_at": 1, "refuse_below": -0.5},
    "answers": {
        "min_grounded_rate": 0.41,
        "max_answered_unanswerable": 3,
        "min_state_agreement": 0.54,
        "known_overanswered": {"u04": "grounded", "u11": "partial"},
    },
    "budget": {
        "request_deadline_ms": 150,
        "max_request_ms": 50.0,
        "daily_cap_usd": 4,
        "max_rebuild_usd": 0.05,
        "max_rerecord_usd": 3.0,
    },
    "rate_limit": {"max_requests_per_minute": 60, "max_client_burst": 10, "trusted_proxy_hops": 0},
    "ask": {"max_question_chars": 300},
    "admission": {
        "max_in_flight": 2,
        "max_queued": 4,
        "max_queue_wait_ms": 50.0,
        "retry_after_s": 1,
        "refusals_per_s": 0,
    },
    "batching": {"max_batch": 2, "max_wait_ms": 4},
}


def edited(**changes: Any) -> dict:
    """BASE with ``block__key=value`` changes (``...`` deletes the key)."""
    raw = copy.deepcopy(BASE)
    for dotted, value in changes.items():
        *parents, leaf = dotted.split("__")
        node = raw
        for p in parents:
            node = node[p]
        if value is ...:
            del node[leaf]
        else:
            node[leaf] = value
    return raw


def refusal(raw: Any) -> str:
    with pytest.raises(ThresholdsError) as caught:
        parse_thresholds(raw)
    return str(caught.value)


def test_the_base_document_parses_field_by_field():
    t = parse_thresholds(copy.deepcopy(BASE))
    assert isinstance(t, Thresholds)
    assert t.measured_on == "9b3b9227ec29"
    assert (t.index.embedder, t.index.chunk_words, t.index.chunk_overlap) == ("minilm-l6-int8", 220, 40)
    r = t.retrieval
    assert (r.serving_mode, r.top_k, r.rrf_k) == ("fused", 10, 60)
    assert dict(r.fusion) == FUSION and all(type(v) is float for v in r.fusion.values())
    assert dict(r.floors) == {"recall@1": 0.57, "recall@5": 0.81, "recall@10": 1.0, "mrr": 0.0}
    assert all(type(v) is float for v in r.floors.values())
    assert dict(r.ceilings) == {"q01": 5, "q02": 1}
    assert t.grounding.coverage_floor == 1.0 and type(t.grounding.coverage_floor) is float
    d = t.drafting
    assert (
        d.extractive_max_claims,
        d.extractive_sections,
        d.evidence_lexical_weight,
        d.live_model,
        d.max_completion_tokens,
    ) == (
        3,
        4,
        0,
        "gpt-4o-mini",
        400,
    )
    assert dict(t.relevance.weights) == WEIGHTS and all(type(v) is float for v in t.relevance.weights.values())
    assert (t.relevance.answer_at, t.relevance.refuse_below) == (1.0, -0.5)
    assert type(t.relevance.answer_at) is float and type(t.relevance.refuse_below) is float
    a = t.answers
    assert (a.min_grounded_rate, a.max_answered_unanswerable, a.min_state_agreement) == (0.41, 3, 0.54)
    assert dict(a.known_overanswered) == {"u04": "grounded", "u11": "partial"}
    b = t.budget
    assert (b.request_deadline_ms, b.max_request_ms, b.daily_cap_usd, b.max_rebuild_usd, b.max_rerecord_usd) == (
        150.0,
        50.0,
        4.0,
        0.05,
        3.0,
    )
    assert all(type(getattr(b, k)) is float for k in ("request_deadline_ms", "daily_cap_usd"))
    assert (t.rate_limit.max_requests_per_minute, t.rate_limit.max_client_burst, t.rate_limit.trusted_proxy_hops) == (
        60,
        10,
        0,
    )
    assert t.ask.max_question_chars == 300
    assert (t.batching.max_batch, t.batching.max_wait_ms) == (2, 4.0) and type(t.batching.max_wait_ms) is float


# --- the shape ---------------------------------------------------------------------------


@pytest.mark.parametrize("raw", [None, [], "thresholds"])
def test_the_document_must_be_a_mapping(raw):
    assert refusal(raw) == "thresholds: must be a mapping"


def test_a_block_must_be_a_mapping():
    assert refusal(edited(budget=[1, 2])) == "budget: must be a mapping"
    assert refusal(edited(retrieval__fusion=1.0)) == "retrieval.fusion: must be a mapping"


def test_an_unknown_key_is_named_with_the_known_ones():
    known = sorted(BASE)
    assert refusal(edited(extra={})) == f"extra: unknown key (known: {known})"
    budget = sorted(BASE["budget"])
    assert refusal(edited(budget__surprise=1)) == f"budget.surprise: unknown key (known: {budget})"


@pytest.mark.parametrize(
    ("key", "full"),
    [("ask", "ask"), ("budget__daily_cap_usd", "budget.daily_cap_usd"), ("retrieval__floors", "retrieval.floors")],
)
def test_a_missing_key_is_named(key, full):
    assert refusal(edited(**{key: ...})) == f"{full}: required key missing"


def test_a_missing_floor_is_named():
    assert refusal(edited(retrieval__floors__mrr=...)) == "retrieval.floors.mrr: required key missing"


def test_the_answer_bars_are_optional_together():
    t = parse_thresholds(
        edited(answers__min_grounded_rate=..., answers__max_answered_unanswerable=..., answers__min_state_agreement=...)
    )
    assert (t.answers.min_grounded_rate, t.answers.max_answered_unanswerable, t.answers.min_state_agreement) == (
        None,
        None,
        None,
    )


@pytest.mark.parametrize("value", [..., None])
def test_no_known_overanswered_is_none(value):
    assert dict(parse_thresholds(edited(answers__known_overanswered=value)).answers.known_overanswered) == {}


@pytest.mark.parametrize("drop", ["min_grounded_rate", "max_answered_unanswerable"])
def test_a_one_sided_answer_bar_is_refused(drop):
    assert refusal(edited(**{f"answers__{drop}": ...})) == (
        "answers.min_grounded_rate / answers.max_answered_unanswerable: set both or neither "
        "(either alone is passed by a service that refuses, or answers, everything)"
    )


# --- leaves ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("budget__request_deadline_ms", "fast", "budget.request_deadline_ms: must be a number, got 'fast'"),
        ("budget__request_deadline_ms", True, "budget.request_deadline_ms: must be a number, got True"),
        ("rate_limit__max_client_burst", 2.5, "rate_limit.max_client_burst: must be an integer, got 2.5"),
        ("rate_limit__trusted_proxy_hops", False, "rate_limit.trusted_proxy_hops: must be an integer, got False"),
        ("index__embedder", 7, "index.embedder: must be a string, got 7"),
        ("retrieval__fusion__title", "13", "retrieval.fusion.title: must be a number, got '13'"),
    ],
)
def test_a_wrong_type_is_named(key, value, message):
    assert refusal(edited(**{key: value})) == message


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("index__chunk_words", 0, "index.chunk_words: must be > 0 and at most 5000, got 0"),
        ("index__chunk_words", -1, "index.chunk_words: must be > 0 and at most 5000, got -1"),
        ("budget__daily_cap_usd", 0.0, "budget.daily_cap_usd: must be > 0 and at most 100.0, got 0.0"),
        ("index__chunk_overlap", -1, "index.chunk_overlap: must be >= 0, got -1"),
        ("budget__max_rebuild_usd", -0.01, "budget.max_rebuild_usd: must be between 0.0 and 100.0, got -0.01"),
        ("retrieval__floors__mrr", -0.01, "retrieval.floors.mrr: must be between 0.0 and 1.0, got -0.01"),
        ("retrieval__floors__recall@10", 1.01, "retrieval.floors.recall@10: must be between 0.0 and 1.0, got 1.01"),
        ("retrieval__ceilings__q02", 0, "retrieval.ceilings.q02: must be > 0 and at most 100000, got 0"),
        ("retrieval__ceilings__q02", True, "retrieval.ceilings.q02: must be an integer, got True"),
        ("retrieval__ceilings__q02", 2.0, "retrieval.ceilings.q02: must be an integer, got 2.0"),
        (
            "answers__known_overanswered__u04",
            "refused",
            "answers.known_overanswered.u04: must be one of ['partial', 'grounded'], got 'refused'",
        ),
        (
            "answers__known_overanswered__u04",
            1,
            "answers.known_overanswered.u04: must be a string, got 1",
        ),
        (
            "retrieval__serving_mode",
            "semantic",
            "retrieval.serving_mode: must be one of ['dense', 'lexical', 'hybrid', 'fused'], got 'semantic'",
        ),
        ("grounding__coverage_floor", 1.01, "grounding.coverage_floor: must be between 0.0 and 1.0, got 1.01"),
    ],
)
def test_a_value_outside_its_rule_is_named(key, value, message):
    assert refusal(edited(**{key: value})) == message


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("index__chunk_words", 41),
        ("index__chunk_overlap", 0),
        ("budget__max_rebuild_usd", 0),
        ("budget__daily_cap_usd", 3.0),
        ("retrieval__floors__mrr", 0.0),
        ("retrieval__floors__recall@1", 1.0),
        ("retrieval__ceilings__q02", 1),
        ("answers__known_overanswered__u04", "partial"),
        ("answers__known_overanswered__u11", "grounded"),
        ("retrieval__serving_mode", "dense"),
        ("grounding__coverage_floor", 0),
    ],
)
def test_a_value_at_the_edge_of_its_rule_is_kept(key, value):
    parse_thresholds(edited(**{key: value}))


@pytest.mark.parametrize(
    "version", ["9b3b9227ec2", "9b3b9227ec299", "9B3B9227EC29", "9b3b9227ec2g", "9b3b9227ec2X", "9b3b9227ec2 ", ""]
)
def test_measured_on_is_a_12_hex_digit_version(version):
    assert refusal(edited(measured_on=version)) == f"measured_on: must be a 12-hex-digit index version, got {version!r}"


@pytest.mark.parametrize("version", ["0123456789ab", "cdef01234567"])
def test_every_hex_digit_is_a_version_digit(version):
    assert parse_thresholds(edited(measured_on=version)).measured_on == version


@pytest.mark.parametrize(
    ("key", "message"),
    [
        ("retrieval__ceilings", "retrieval.ceilings: must be a mapping of question id to rank"),
        (
            "answers__known_overanswered",
            "answers.known_overanswered: must be a mapping of refusal id to the state it is held at",
        ),
    ],
)
def test_the_id_mappings_must_be_mappings(key, message):
    assert refusal(edited(**{key: ["q01"]})) == message


# --- the cross-field rules, each just inside, at and just outside its bar ------------------


@pytest.mark.parametrize(("overlap", "ok"), [(218, True), (219, True), (220, False), (221, False)])
def test_the_chunk_overlap_is_under_the_chunk(overlap, ok):
    raw = edited(index__chunk_overlap=overlap)
    if ok:
        assert parse_thresholds(raw).index.chunk_overlap == overlap
    else:
        assert refusal(raw) == f"index.chunk_overlap: must be < index.chunk_words (220), got {overlap}"


@pytest.mark.parametrize(("bar", "ok"), [(74.99, True), (75, True), (75.01, False)])
def test_the_latency_bar_is_at_most_half_the_deadline(bar, ok):
    raw = edited(budget__max_request_ms=bar)
    if ok:
        assert parse_thresholds(raw).budget.max_request_ms == bar
    else:
        assert refusal(raw) == (
            "budget.max_request_ms: the gate's latency bar must be at most half of "
            "budget.request_deadline_ms (150.0 ms), got 75.01 ms"
        )


@pytest.mark.parametrize(("rate", "ok"), [(99.9, True), (100, True), (100.1, False)])
def test_one_client_claims_at_most_a_quarter_of_a_process_minute(rate, ok):
    raw = edited(rate_limit__max_requests_per_minute=rate)
    if ok:
        assert parse_thresholds(raw).rate_limit.max_requests_per_minute == rate
    else:
        assert refusal(raw) == (
            "rate_limit.max_requests_per_minute: 100.1/min x budget.request_deadline_ms 150.0 ms lets one client "
            "claim 15.0 s of each process-minute; the rule is at most a quarter (15.0 s)"
        )


def test_the_claim_is_reported_in_seconds():
    raw = edited(budget__request_deadline_ms=251)  # 60/min x 251 ms = 15.06 s
    assert refusal(raw) == (
        "rate_limit.max_requests_per_minute: 60/min x budget.request_deadline_ms 251.0 ms lets one client "
        "claim 15.1 s of each process-minute; the rule is at most a quarter (15.0 s)"
    )


@pytest.mark.parametrize("key", ["max_rebuild_usd", "max_rerecord_usd"])
@pytest.mark.parametrize(("ceiling", "ok"), [(3.99, True), (4.0, True), (4.01, False)])
def test_the_daily_cap_permits_each_run_it_must(key, ceiling, ok):
    raw = edited(**{f"budget__{key}": ceiling})
    if ok:
        assert getattr(parse_thresholds(raw).budget, key) == ceiling
    else:
        assert refusal(raw) == (f"budget.daily_cap_usd: 4.0 is below budget.{key} (4.01), a run the cap must permit")


@pytest.mark.parametrize(("refuse_below", "ok"), [(0.99, True), (1.0, True), (1.01, False)])
def test_the_refusal_line_is_at_most_the_answer_line(refuse_below, ok):
    raw = edited(relevance__refuse_below=refuse_below)
    if ok:
        assert parse_thresholds(raw).relevance.refuse_below == refuse_below
    else:
        assert refusal(raw) == "relevance.refuse_below: must be at most relevance.answer_at (1.0), got 1.01"


@pytest.mark.parametrize(("sections", "ok"), [(9, True), (10, True), (11, False)])
def test_the_drafter_quotes_only_sections_it_is_offered(sections, ok):
    raw = edited(drafting__extractive_sections=sections)
    if ok:
        assert parse_thresholds(raw).drafting.extractive_sections == sections
    else:
        assert refusal(raw) == (
            "drafting.extractive_sections: the drafter can quote only the retrieval.top_k (10) sections "
            "it is offered, got 11"
        )


@pytest.mark.parametrize(("burst", "ok"), [(59, True), (60, True), (61, False)])
def test_a_burst_is_at_most_a_minutes_allowance(burst, ok):
    raw = edited(rate_limit__max_client_burst=burst)
    if ok:
        assert parse_thresholds(raw).rate_limit.max_client_burst == burst
    else:
        assert refusal(raw) == "rate_limit.max_client_burst: must not exceed rate_limit.max_requests_per_minute"


@pytest.mark.parametrize(
    ("dotted", "value", "ok"),
    [
        ("index__chunk_words", 5000, True),
        ("index__chunk_words", 5001, False),
        ("budget__daily_cap_usd", 100.0, True),
        ("budget__daily_cap_usd", 100.01, False),
        ("ask__max_question_chars", 4000, True),
        ("ask__max_question_chars", 4001, False),
        ("retrieval__fusion__title", 1000.0, True),
        ("retrieval__fusion__title", -1000.0, True),
        ("retrieval__fusion__title", 1000.5, False),
        ("retrieval__fusion__title", -1000.5, False),
    ],
)
def test_a_bar_past_its_ceiling_bounds_nothing_and_is_refused(dotted, value, ok):
    raw = edited(**{dotted: value})
    if ok:
        parse_thresholds(raw)
        return
    name = dotted.replace("__", ".")
    message = refusal(raw)
    assert message.startswith(f"{name}: must be ") and message.endswith(f", got {value}")
    if "fusion" in name:
        assert message == f"{name}: must be between -1000.0 and 1000.0, got {value}"
    else:
        assert " and at most " in message


@pytest.mark.parametrize(("wait_ms", "ok"), [(74.99, True), (75.0, True), (75.01, False)])
def test_a_queued_request_waits_at_most_half_the_deadline(wait_ms, ok):
    raw = edited(admission__max_queue_wait_ms=wait_ms)
    if ok:
        assert parse_thresholds(raw).admission.max_queue_wait_ms == wait_ms
        return
    assert refusal(raw) == (
        "admission.max_queue_wait_ms: a queued request may wait at most half of "
        f"budget.request_deadline_ms (150.0 ms), got {wait_ms} ms"
    )


@pytest.mark.parametrize(
    ("dotted", "value", "ok"),
    [
        ("budget__max_request_ms", 0.5, True),
        ("budget__max_request_ms", 0, False),
        ("budget__max_request_ms", -1.0, False),
        ("admission__max_queue_wait_ms", 0.25, True),
        ("admission__max_queue_wait_ms", 0.0, False),
    ],
)
def test_a_positive_bar_is_above_zero_and_may_be_below_one(dotted, value, ok):
    raw = edited(**{dotted: value})
    if ok:
        parse_thresholds(raw)
    else:
        assert refusal(raw) == f"{dotted.replace('__', '.')}: must be > 0, got {value}"


@pytest.mark.parametrize("value", [float("inf"), float("-inf"), float("nan")])
def test_a_number_that_is_not_finite_is_refused_naming_the_key(value):
    message = refusal(edited(budget__daily_cap_usd=value))
    assert message == f"budget.daily_cap_usd: must be a finite number, got {value!r}"


@pytest.mark.parametrize(("batch", "ok"), [(1, True), (2, True), (3, False)])
def test_a_batch_holds_at_most_the_answers_admitted_at_once(batch, ok):
    raw = edited(batching__max_batch=batch)
    if ok:
        assert parse_thresholds(raw).batching.max_batch == batch
        return
    assert refusal(raw) == (
        "batching.max_batch: only admitted answers are embedded, so a batch holds at most "
        "admission.max_in_flight (2) questions, got 3"
    )


@pytest.mark.parametrize(("wait_ms", "ok"), [(0, True), (74.99, True), (75.0, True), (75.01, False)])
def test_a_question_waits_for_its_batch_at_most_half_the_deadline(wait_ms, ok):
    raw = edited(batching__max_wait_ms=wait_ms)
    if ok:
        assert parse_thresholds(raw).batching.max_wait_ms == wait_ms
        return
    assert refusal(raw) == (
        "batching.max_wait_ms: a question may wait for its batch at most half of "
        f"budget.request_deadline_ms (150.0 ms), got {wait_ms} ms"
    )


@pytest.mark.parametrize(
    ("dotted", "value", "message"),
    [
        ("batching__max_batch", 0, "batching.max_batch: must be > 0 and at most 64, got 0"),
        ("batching__max_batch", 65, "batching.max_batch: must be > 0 and at most 64, got 65"),
        ("batching__max_batch", 2.0, "batching.max_batch: must be an integer, got 2.0"),
        ("batching__max_wait_ms", -0.5, "batching.max_wait_ms: must be >= 0, got -0.5"),
        ("batching__max_wait_ms", "2", "batching.max_wait_ms: must be a number, got '2'"),
        ("batching__max_batch", ..., "batching.max_batch: required key missing"),
        ("batching__max_wait_ms", ..., "batching.max_wait_ms: required key missing"),
        ("batching", ..., "batching: required key missing"),
    ],
)
def test_the_batching_keys_are_named_with_their_rule(dotted, value, message):
    assert refusal(edited(**{dotted: value})) == message
