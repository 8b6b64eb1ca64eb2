"""Bad configuration is refused at load, naming the key (or question) and the rule."""

from __future__ import annotations

import copy

import pytest
import yaml

from rag_contract.config.questions import QuestionsError, parse_questions
from rag_contract.config.thresholds import ThresholdsError, load_thresholds, parse_thresholds
from rag_contract.config.yamlfile import parse_yaml_text
from rag_contract.corpus.chunking import ChunkingError, ChunkParams
from tests.support import ROOT

RAW = yaml.safe_load((ROOT / "eval" / "thresholds.yaml").read_text())


def edited(path: str, value, *, delete: bool = False) -> dict:
    raw = copy.deepcopy(RAW)
    *parents, leaf = path.split(".")
    node = raw
    for p in parents:
        node = node[p]
    if delete:
        del node[leaf]
    else:
        node[leaf] = value
    return raw


def test_committed_thresholds_load():
    t = load_thresholds(ROOT / "eval" / "thresholds.yaml")
    assert t.retrieval.floors["recall@10"] == 1.0 or t.retrieval.floors["recall@10"] <= 1.0
    assert t.budget.max_request_ms <= t.budget.request_deadline_ms / 2


@pytest.mark.parametrize(
    "path, value, message",
    [
        ("budget.max_request_ms", 80.0, r"budget.max_request_ms: the gate's latency bar must be at most half"),
        ("rate_limit.max_requests_per_minute", 400, r"rate_limit.max_requests_per_minute: 400/min .* quarter"),
        (
            "budget.daily_cap_usd",
            0.01,
            r"budget.daily_cap_usd: 0.01 is below budget.max_rebuild_usd"
            r"|budget.daily_cap_usd: 0.01 is below budget.max_rerecord_usd",
        ),
        ("budget.request_deadline_ms", "fast", r"budget.request_deadline_ms: must be a number, got 'fast'"),
        ("rate_limit.max_client_burst", 2.5, r"rate_limit.max_client_burst: must be an integer"),
        ("rate_limit.trusted_proxy_hops", True, r"rate_limit.trusted_proxy_hops: must be an integer, got True"),
        (
            "retrieval.serving_mode",
            "semantic",
            r"retrieval.serving_mode: must be one of \['dense', 'lexical', 'hybrid', 'fused'\]",
        ),
        ("retrieval.floors.recall@1", 1.5, r"retrieval.floors.recall@1: must be between 0.0 and 1.0"),
        ("retrieval.ceilings.q01", 0, r"retrieval.ceilings.q01: must be > 0"),
        ("grounding.coverage_floor", -0.1, r"grounding.coverage_floor: must be between"),
        ("index.chunk_overlap", 220, r"index.chunk_overlap: must be < index.chunk_words"),
        ("measured_on", "latest", r"measured_on: must be a 12-hex-digit index version"),
        ("budget.surprise", 1, r"budget.surprise: unknown key"),
        # Non-finite numbers: an infinite cap is no cap, and nan passes no comparison.
        ("budget.daily_cap_usd", float("inf"), r"budget.daily_cap_usd: must be a finite number, got inf"),
        ("budget.request_deadline_ms", float("nan"), r"budget.request_deadline_ms: must be a finite number"),
        ("retrieval.fusion.title", float("-inf"), r"retrieval.fusion.title: must be a finite number"),
        ("relevance.answer_at", float("nan"), r"relevance.answer_at: must be a finite number"),
        # Out of range: each number has a ceiling past which it bounds nothing.
        ("ask.max_question_chars", 10**9, r"ask.max_question_chars: must be > 0 and at most 4000, got 1000000000"),
        ("ask.max_question_chars", "1e9", r"ask.max_question_chars: must be an integer, got '1e9'"),
        ("budget.daily_cap_usd", 1e6, r"budget.daily_cap_usd: must be > 0 and at most 100.0"),
        ("budget.request_deadline_ms", 3.6e6, r"budget.request_deadline_ms: must be > 0 and at most 60000.0"),
        ("retrieval.top_k", 10**6, r"retrieval.top_k: must be > 0 and at most 100"),
        ("rate_limit.trusted_proxy_hops", 99, r"rate_limit.trusted_proxy_hops: must be between 0 and 8"),
        ("rate_limit.max_client_burst", 0, r"rate_limit.max_client_burst: must be > 0"),
        ("relevance.weights.bias", 1e9, r"relevance.weights.bias: must be between -1000.0 and 1000.0"),
        ("drafting.max_completion_tokens", 10**7, r"drafting.max_completion_tokens: must be > 0 and at most 128000"),
        ("extra_block", {}, r"extra_block: unknown key"),
        ("drafting.selector.focus_x_instance", "high", r"drafting.selector.focus_x_instance: must be a number"),
        ("drafting.selector.focus_x_focus", 1.0, r"drafting.selector.focus_x_focus: unknown key"),
    ],
)
def test_bad_thresholds_are_refused_naming_key_and_rule(path, value, message):
    with pytest.raises(ThresholdsError, match=message):
        parse_thresholds(edited(path, value))


def test_a_selector_fitted_before_the_pair_features_loads_with_them_at_zero():
    raw = copy.deepcopy(RAW)
    raw["drafting"]["selector"] = {k: v for k, v in raw["drafting"]["selector"].items() if "_x_" not in k}
    selector = parse_thresholds(raw).drafting.selector
    assert selector is not None and selector["focus_x_instance"] == 0.0
    assert selector["similarity"] == RAW["drafting"]["selector"]["similarity"]
    with pytest.raises(ThresholdsError, match=r"drafting.selector.similarity: required key missing"):
        parse_thresholds(edited("drafting.selector.similarity", None, delete=True))


def test_missing_key_is_refused():
    with pytest.raises(ThresholdsError, match=r"budget.daily_cap_usd: required key missing"):
        parse_thresholds(edited("budget.daily_cap_usd", None, delete=True))


@pytest.mark.parametrize("drop", ["min_grounded_rate", "max_answered_unanswerable"])
def test_one_sided_answer_bar_is_refused(drop):
    with pytest.raises(ThresholdsError, match="set both or neither"):
        parse_thresholds(edited(f"answers.{drop}", None, delete=True))


def test_thresholds_ignore_the_environment(monkeypatch):
    monkeypatch.setenv("DAILY_SPEND_CAP_USD", "999")
    monkeypatch.setenv("REQUEST_DEADLINE_MS", "1")
    t = load_thresholds(ROOT / "eval" / "thresholds.yaml")
    assert t.budget.daily_cap_usd == RAW["budget"]["daily_cap_usd"]
    assert t.budget.request_deadline_ms == RAW["budget"]["request_deadline_ms"]


def test_malformed_yaml_is_refused(tmp_path):
    bad = tmp_path / "thresholds.yaml"
    bad.write_text("budget: [unclosed\n")
    with pytest.raises(ThresholdsError, match="thresholds.yaml: not valid YAML"):
        load_thresholds(bad)


@pytest.mark.parametrize(
    "text, message",
    [
        (
            "rate_limit:\n  max_client_burst: 10\n  trusted_proxy_hops: 0\n  max_client_burst: 50\n",
            r"thresholds.yaml: rate_limit.max_client_burst: duplicate key \(line 4\)",
        ),
        ("measured_on: a\nmeasured_on: b\n", r"thresholds.yaml: measured_on: duplicate key \(line 2\)"),
        ("x:\n  - {k: 1, k: 2}\n", r"thresholds.yaml: x\[0\].k: duplicate key"),
    ],
)
def test_duplicate_keys_are_refused_naming_the_key(tmp_path, text, message):
    # PyYAML keeps the last of two equal keys; a burst of 10 would silently become 50.
    bad = tmp_path / "thresholds.yaml"
    bad.write_text(text)
    with pytest.raises(ThresholdsError, match=message):
        load_thresholds(bad)


def test_the_committed_thresholds_with_one_key_repeated_are_refused(tmp_path):
    text = (ROOT / "eval" / "thresholds.yaml").read_text()
    assert "  max_client_burst: 10\n" in text
    bad = tmp_path / "thresholds.yaml"
    bad.write_text(text.replace("  max_client_burst: 10\n", "  max_client_burst: 10\n  max_client_burst: 50\n"))
    with pytest.raises(ThresholdsError, match=r"rate_limit.max_client_burst: duplicate key"):
        load_thresholds(bad)


def test_yaml_merge_keys_and_self_referencing_aliases_are_not_duplicates(tmp_path):

    assert parse_yaml_text("b: &b {x: 1}\nd:\n  <<: *b\n  y: 2\n")["d"] == {"x": 1, "y": 2}
    loop = parse_yaml_text("a: &x [1, *x]\n")
    assert loop["a"][1] is loop["a"]


@pytest.mark.parametrize("words, overlap", [(220, 220), (220, 300), (0, 0), (10, -1)])
def test_chunk_parameters_that_cannot_work_are_refused(words, overlap):
    with pytest.raises(ChunkingError, match=r"index.chunk_(words|overlap)"):
        ChunkParams(words, overlap)


# --- questions ---------------------------------------------------------------------------

SECTIONS = {
    "rfc9111#4.2.1": "The freshness lifetime is computed as freshness_lifetime = max-age.",
    "rfc9110#1.2": "HTTP/2 multiplexed",
}


def load(items):
    return parse_questions({"questions": items}, set(SECTIONS), SECTIONS.__getitem__, source="q.yaml")


GOOD = {
    "id": "q01",
    "question": "How is freshness computed?",
    "expected": ["rfc9111#4.2.1"],
    "evidence": "freshness_lifetime",
}
REFUSAL = {
    "id": "u01",
    "question": "How does HTTP/2 multiplex?",
    "answerable": False,
    "expected_state": "partial",
    "why": "1.2 names it",
}


def test_good_question_set_loads():
    qs = load([GOOD, REFUSAL])
    assert [q.id for q in qs.answerable] == ["q01"] and [q.id for q in qs.refusals] == ["u01"]


@pytest.mark.parametrize(
    "items, message",
    [
        ([GOOD, dict(GOOD)], r"q.yaml: q01: duplicate id"),
        ([dict(GOOD, expected=["rfc9111#9.9"])], r"q01: unknown section id 'rfc9111#9.9'"),
        ([dict(GOOD, evidence="stale-while-revalidate")], r"q01: evidence 'stale-while-revalidate' not found"),
        ([{k: v for k, v in REFUSAL.items() if k != "expected_state"}], r"u01: a refusal needs 'expected_state'"),
        ([dict(REFUSAL, expected_state="grounded")], r"u01: expected_state 'grounded' is not a refusal state"),
        ([dict(REFUSAL, expected=["rfc9110#1.2"])], r"u01: a refusal has no expected sections"),
        ([dict(GOOD, expected_state="partial")], r"q01: 'expected_state' is only for refusals"),
        ([dict(GOOD, expected=[])], r"q01: an answerable question needs at least one expected section"),
        ([dict(GOOD, colour="red")], r"q01: unknown key\(s\) \['colour'\]"),
    ],
)
def test_bad_questions_are_refused_naming_question_and_rule(items, message):
    with pytest.raises(QuestionsError, match=message):
        load(items)


def test_evidence_matches_across_line_breaks():
    sections = {"rfc9111#4.2.1": "the freshness\n   lifetime is"}
    qs = parse_questions(
        {"questions": [dict(GOOD, evidence="freshness lifetime")]}, set(sections), sections.__getitem__
    )
    assert qs.questions[0].evidence == "freshness lifetime"
