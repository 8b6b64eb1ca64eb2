"""eval/thresholds.yaml: every bar and every behaviour number, validated at load.

Contract: ``load_thresholds(path)`` returns a frozen ``Thresholds`` or raises
``ThresholdsError`` whose message names the key (``budget.max_request_ms``) and the rule it
broke. Unknown keys, missing keys and wrong types are refused, and so are combinations that
cannot both hold:

- a one-sided answer bar: ``min_grounded_rate`` without ``max_answered_unanswerable`` or the
  reverse (a refuse-everything service passes the one, an answer-everything service the other),
  and ``min_accuracy_when_answered`` without ``min_coverage`` and ``max_false_answer_rate``;
- a gate latency bar above half the request deadline (a bar at the deadline is the deadline);
- an allowance whose rate times the deadline exceeds a quarter of a process-minute (one
  client could then claim that much of the process);
- a daily cap below a run it must permit (the rebuild or re-record ceilings);
- a queue wait above half the request deadline (a request admitted that late would start
  its answer having already waited most of a deadline);
- an embedding batch larger than the answers admitted at once (only admitted answers are
  embedded, so such a batch never gathers), or a wait for one above half the request deadline
  (the wait is spent from the question's own deadline).

Every number must be finite (``.inf`` and ``.nan`` are YAML floats, and an infinite cap is no
cap), and every number has an upper bound past which it no longer limits anything or would
let one request hold the process (``ask.max_question_chars: 1000000000``). A mapping that
names a key twice is refused by the reader (``rag_contract.config.yamlfile``), naming the key.

Nothing here reads the environment: raising a bar is a diff to the committed file.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from types import MappingProxyType
from typing import Any

from rag_contract.config.yamlfile import read_yaml

MODES = ("dense", "lexical", "hybrid", "fused")
FUSION_FEATURES = (
    "dense",
    "sentence",
    "lexical",
    "title",
    "dense_gap",
    "sentence_gap",
    "ancestor_title",
    "coverage",
    "rank_fusion",
)
# The answer-sentence selector's features (``answering.selection`` computes them in this order).
SELECTOR_BASE = ("similarity", "coverage", "focus", "instance", "rank", "position", "length")
# and the product of every two of them, named "<a>_x_<b>": what one feature is worth depends on
# another (a number tied to the focus means more in a sentence that names the focus)
SELECTOR_PAIRS = tuple(f"{a}_x_{b}" for i, a in enumerate(SELECTOR_BASE) for b in SELECTOR_BASE[i + 1 :])
SELECTOR_FEATURES = ("bias", *SELECTOR_BASE, *SELECTOR_PAIRS)
# selector weights a thresholds file may leave out (then 0): written since the products
OPTIONAL_SELECTOR = frozenset(SELECTOR_PAIRS)
RELEVANCE_FEATURES = ("bias", "similarity", "coverage", "unseen", "section", "retrieval", "unmentioned", "selected")
# weights a thresholds file may leave out (then 0): written since the answer-sentence selector
OPTIONAL_RELEVANCE = frozenset({"selected"})
FLOOR_KEYS = ("recall@1", "recall@5", "recall@10", "mrr")
PROCESS_MINUTE_MS = 60_000.0
# A fitted weight past this is a fit that diverged, not a weight (the committed ones are < 20).
MAX_WEIGHT = 1000.0


class ThresholdsError(ValueError):
    pass


@dataclass(frozen=True)
class IndexConfig:
    embedder: str
    chunk_words: int
    chunk_overlap: int


@dataclass(frozen=True)
class RetrievalConfig:
    serving_mode: str
    top_k: int
    rrf_k: int
    fusion: Mapping[str, float]  # weight per FUSION_FEATURES entry (mode fused)
    floors: Mapping[str, float]
    ceilings: Mapping[str, int]


@dataclass(frozen=True)
class GroundingConfig:
    coverage_floor: float


@dataclass(frozen=True)
class DraftingConfig:
    extractive_max_claims: int
    extractive_sections: int  # the extractive drafter quotes from this many top-ranked sections (fitted)
    evidence_lexical_weight: float
    live_model: str
    max_completion_tokens: int
    # the answer-sentence selector's weights, one per answering.selection.SELECTOR_FEATURES entry
    # (fitted by calibrate); None: the extractive drafter scores by similarity and coverage
    selector: Mapping[str, float] | None = None


@dataclass(frozen=True)
class RelevanceConfig:
    weights: Mapping[str, float]  # logit = bias + sum(weight * feature), RELEVANCE_FEATURES
    answer_at: float  # logit at or above: the kept claims answer the question
    refuse_below: float  # logit below: they do not address it (withdrawn); between: partial


# The numeric answer bars, in the order the gate checks them.
ANSWER_BAR_KEYS = (
    "min_grounded_rate",
    "max_answered_unanswerable",
    "min_state_agreement",
    "min_coverage",
    "min_accuracy_when_answered",
    "max_false_answer_rate",
)


@dataclass(frozen=True)
class AnswerBars:
    min_grounded_rate: float | None
    max_answered_unanswerable: int | None
    min_state_agreement: float | None
    # Accuracy from the annotated evidence (``quality.accuracy``): coverage of answerable questions,
    # accuracy when answered, and the share of unanswerable ones answered at all.
    min_coverage: float | None = None
    min_accuracy_when_answered: float | None = None
    max_false_answer_rate: float | None = None
    # Refusals measured landing more answered than annotated, each held at that state: a named,
    # committed exception that may not get worse and that the ratchet removes once it improves.
    known_overanswered: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    # Answerable questions measured short of an accurate answer, each held at its level
    # (``quality.accuracy.MISS_LEVELS``): may not get worse; the ratchet removes one once it improves.
    known_misses: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))


@dataclass(frozen=True)
class BudgetConfig:
    request_deadline_ms: float
    max_request_ms: float
    daily_cap_usd: float
    max_rebuild_usd: float
    max_rerecord_usd: float


@dataclass(frozen=True)
class RateLimitConfig:
    max_requests_per_minute: float
    max_client_burst: int
    trusted_proxy_hops: int


@dataclass(frozen=True)
class AskConfig:
    max_question_chars: int


@dataclass(frozen=True)
class AdmissionConfig:
    """How many free-text answers run at once, how many wait, for how long (web/admission.py)."""

    max_in_flight: int
    max_queued: int
    max_queue_wait_ms: float
    retry_after_s: int
    refusals_per_s: float  # sheds sent per second at most, each held until its turn (web/refusal_pacing.py)


@dataclass(frozen=True)
class BatchingConfig:
    """How free-text questions share embedder calls (answering/batching.py): a question that
    arrives while the embedder is busy waits at most ``max_wait_ms`` and joins one call of at
    most ``max_batch`` questions; ``max_batch: 1`` embeds every question on its own."""

    max_batch: int
    max_wait_ms: float


@dataclass(frozen=True)
class Thresholds:
    measured_on: str
    index: IndexConfig
    retrieval: RetrievalConfig
    grounding: GroundingConfig
    drafting: DraftingConfig
    relevance: RelevanceConfig
    answers: AnswerBars
    budget: BudgetConfig
    rate_limit: RateLimitConfig
    ask: AskConfig
    admission: AdmissionConfig
    batching: BatchingConfig


# --- the schema: each leaf is (type, rule) ---------------------------------------------


def _between(lo: float, hi: float):
    def rule(v: float) -> str | None:
        return None if lo <= v <= hi else f"must be between {lo} and {hi}"

    return rule


def _up_to(hi: float):
    """Positive and at most ``hi``: a bar past ``hi`` no longer bounds anything."""

    def rule(v: float) -> str | None:
        return None if 0 < v <= hi else f"must be > 0 and at most {hi}"

    return rule


def _weight(v: float) -> str | None:
    return None if abs(v) <= MAX_WEIGHT else f"must be between {-MAX_WEIGHT} and {MAX_WEIGHT}"


def _positive(v: float) -> str | None:
    return None if v > 0 else "must be > 0"


def _non_negative(v: float) -> str | None:
    return None if v >= 0 else "must be >= 0"


def _one_of(*options: str):
    def rule(v: str) -> str | None:
        return None if v in options else f"must be one of {list(options)}"

    return rule


def _version(v: str) -> str | None:
    ok = len(v) == 12 and all(c in "0123456789abcdef" for c in v)
    return None if ok else "must be a 12-hex-digit index version"


_NUMBER = (int, float)
_OPTIONAL = object()


def _weights_schema(features: Sequence[str], optional: frozenset[str]) -> dict[str, tuple]:
    """One fitted weight per feature; those in ``optional`` a file may leave out."""
    return {f: (_NUMBER, _weight, _OPTIONAL) if f in optional else (_NUMBER, _weight) for f in features}


_SCHEMA: dict[str, Any] = {
    "measured_on": (str, _version),
    "index": {
        "embedder": (str, None),
        "chunk_words": (int, _up_to(5000)),
        "chunk_overlap": (int, _non_negative),
    },
    "retrieval": {
        "serving_mode": (str, _one_of(*MODES)),
        "top_k": (int, _up_to(100)),
        "rrf_k": (int, _up_to(10_000)),
        "fusion": {f: (_NUMBER, _weight) for f in FUSION_FEATURES},
        "floors": "floors",
        "ceilings": "ceilings",
    },
    "grounding": {"coverage_floor": (_NUMBER, _between(0.0, 1.0))},
    "drafting": {
        "extractive_max_claims": (int, _up_to(50)),
        "extractive_sections": (int, _up_to(100)),
        "evidence_lexical_weight": (_NUMBER, _between(0.0, MAX_WEIGHT)),
        "live_model": (str, None),
        "max_completion_tokens": (int, _up_to(128_000)),  # past a long-context window: no bar
        "selector": "selector",
    },
    "relevance": {
        "weights": _weights_schema(RELEVANCE_FEATURES, OPTIONAL_RELEVANCE),
        "answer_at": (_NUMBER, _weight),
        "refuse_below": (_NUMBER, _weight),
    },
    "answers": {
        "min_grounded_rate": (_NUMBER, _between(0.0, 1.0), _OPTIONAL),
        "max_answered_unanswerable": (int, _between(0, 10_000), _OPTIONAL),
        "min_state_agreement": (_NUMBER, _between(0.0, 1.0), _OPTIONAL),
        "min_coverage": (_NUMBER, _between(0.0, 1.0), _OPTIONAL),
        "min_accuracy_when_answered": (_NUMBER, _between(0.0, 1.0), _OPTIONAL),
        "max_false_answer_rate": (_NUMBER, _between(0.0, 1.0), _OPTIONAL),
        "known_overanswered": "overanswered",
        "known_misses": "misses",
    },
    "budget": {
        "request_deadline_ms": (_NUMBER, _up_to(60_000.0)),
        "max_request_ms": (_NUMBER, _positive),
        "daily_cap_usd": (_NUMBER, _up_to(100.0)),
        "max_rebuild_usd": (_NUMBER, _between(0.0, 100.0)),
        "max_rerecord_usd": (_NUMBER, _between(0.0, 100.0)),
    },
    "rate_limit": {
        "max_requests_per_minute": (_NUMBER, _positive),
        "max_client_burst": (int, _up_to(10_000)),
        "trusted_proxy_hops": (int, _between(0, 8)),
    },
    "ask": {"max_question_chars": (int, _up_to(4000))},
    "admission": {
        "max_in_flight": (int, _up_to(64)),
        "max_queued": (int, _between(0, 1024)),
        "max_queue_wait_ms": (_NUMBER, _positive),
        "retry_after_s": (int, _up_to(3600)),
        "refusals_per_s": (_NUMBER, _between(0.0, 100_000.0)),
    },
    "batching": {
        "max_batch": (int, _up_to(64)),
        "max_wait_ms": (_NUMBER, _non_negative),
    },
}


def _type_name(t: Any) -> str:
    if t is _NUMBER:
        return "a number"
    return {int: "an integer", str: "a string"}[t]


def _check_leaf(path: str, value: Any, spec: tuple) -> Any:
    typ, rule = spec[0], spec[1]
    # bool is an int in Python; a YAML `true` is never a valid number here.
    if isinstance(value, bool) or not isinstance(value, typ):
        raise ThresholdsError(f"{path}: must be {_type_name(typ)}, got {value!r}")
    # .inf and .nan are YAML floats; neither is a bar (every comparison with nan is false).
    if isinstance(value, float) and not math.isfinite(value):
        raise ThresholdsError(f"{path}: must be a finite number, got {value!r}")
    if rule is not None and (problem := rule(value)):
        raise ThresholdsError(f"{path}: {problem}, got {value!r}")
    return value


def _check_block(path: str, raw: Any, schema: dict[str, Any]) -> dict[str, Any]:
    if not isinstance(raw, dict):
        raise ThresholdsError(f"{path or 'thresholds'}: must be a mapping")
    for key in raw:
        if key not in schema:
            raise ThresholdsError(f"{path + '.' if path else ''}{key}: unknown key (known: {sorted(schema)})")
    out: dict[str, Any] = {}
    for key, spec in schema.items():
        full = f"{path}.{key}" if path else key
        if key not in raw:
            if isinstance(spec, tuple) and len(spec) == 3:
                out[key] = None
                continue
            if spec in ("overanswered", "misses"):
                out[key] = MappingProxyType({})
                continue
            if spec == "selector":
                out[key] = None
                continue
            raise ThresholdsError(f"{full}: required key missing")
        value = raw[key]
        if spec == "floors":
            out[key] = _check_floors(full, value)
        elif spec == "ceilings":
            out[key] = _check_ceilings(full, value)
        elif spec == "overanswered":
            out[key] = _check_overanswered(full, value)
        elif spec == "misses":
            out[key] = _check_misses(full, value)
        elif spec == "selector":
            out[key] = _check_selector(full, value)
        elif isinstance(spec, dict):
            out[key] = _check_block(full, value, spec)
        else:
            out[key] = _check_leaf(full, value, spec)
    return out


def _check_floors(path: str, raw: Any) -> Mapping[str, float]:
    block = _check_block(path, raw, {k: (_NUMBER, _between(0.0, 1.0)) for k in FLOOR_KEYS})
    return MappingProxyType({k: float(v) for k, v in block.items()})


def _check_selector(path: str, raw: Any) -> Mapping[str, float] | None:
    if raw is None:  # not fitted yet: the drafter scores by similarity and coverage
        return None
    block = _check_block(path, raw, _weights_schema(SELECTOR_FEATURES, OPTIONAL_SELECTOR))
    return MappingProxyType({k: float(v) if v is not None else 0.0 for k, v in block.items()})


def _check_ceilings(path: str, raw: Any) -> Mapping[str, int]:
    if not isinstance(raw, dict):
        raise ThresholdsError(f"{path}: must be a mapping of question id to rank")
    for qid, rank in raw.items():
        _check_leaf(f"{path}.{qid}", rank, (int, _up_to(100_000)))
    return MappingProxyType(dict(raw))


def _check_overanswered(path: str, raw: Any) -> Mapping[str, str]:
    if raw is None:
        return MappingProxyType({})
    if not isinstance(raw, dict):
        raise ThresholdsError(f"{path}: must be a mapping of refusal id to the state it is held at")
    for qid, state in raw.items():
        _check_leaf(f"{path}.{qid}", state, (str, _one_of("partial", "grounded")))
    return MappingProxyType(dict(raw))


# How far an answerable question's answer may fall short (``quality.accuracy.MISS_LEVELS``, less
# the level that is no miss).
MISS_LEVELS_HELD = ("unanswered", "inaccurate", "uncited")


def _check_misses(path: str, raw: Any) -> Mapping[str, str]:
    if raw is None:
        return MappingProxyType({})
    if not isinstance(raw, dict):
        raise ThresholdsError(f"{path}: must be a mapping of answerable question id to the level it is held at")
    for qid, level in raw.items():
        _check_leaf(f"{path}.{qid}", level, (str, _one_of(*MISS_LEVELS_HELD)))
    return MappingProxyType(dict(raw))


# --- cross-field rules -------------------------------------------------------------------


def check_rules(t: Thresholds) -> None:
    """The rules that relate two numbers; each names both keys."""
    a = t.answers
    if (a.min_grounded_rate is None) != (a.max_answered_unanswerable is None):
        raise ThresholdsError(
            "answers.min_grounded_rate / answers.max_answered_unanswerable: set both or neither "
            "(either alone is passed by a service that refuses, or answers, everything)"
        )
    if a.min_accuracy_when_answered is not None and (a.min_coverage is None or a.max_false_answer_rate is None):
        raise ThresholdsError(
            "answers.min_accuracy_when_answered needs answers.min_coverage and answers.max_false_answer_rate "
            "(accuracy alone is passed by a service that answers one question it is sure of)"
        )
    if t.index.chunk_overlap >= t.index.chunk_words:
        raise ThresholdsError(
            f"index.chunk_overlap: must be < index.chunk_words ({t.index.chunk_words}), got {t.index.chunk_overlap}"
        )
    b = t.budget
    if b.max_request_ms > b.request_deadline_ms / 2:
        raise ThresholdsError(
            f"budget.max_request_ms: the gate's latency bar must be at most half of "
            f"budget.request_deadline_ms ({b.request_deadline_ms} ms), got {b.max_request_ms} ms"
        )
    demand_ms = t.rate_limit.max_requests_per_minute * b.request_deadline_ms
    if demand_ms > PROCESS_MINUTE_MS / 4:
        raise ThresholdsError(
            f"rate_limit.max_requests_per_minute: {t.rate_limit.max_requests_per_minute}/min x "
            f"budget.request_deadline_ms {b.request_deadline_ms} ms lets one client claim "
            f"{demand_ms / 1000:.1f} s of each process-minute; the rule is at most a quarter (15.0 s)"
        )
    for key in ("max_rebuild_usd", "max_rerecord_usd"):
        if getattr(b, key) > b.daily_cap_usd:
            raise ThresholdsError(
                f"budget.daily_cap_usd: {b.daily_cap_usd} is below budget.{key} ({getattr(b, key)}), "
                f"a run the cap must permit"
            )
    if t.relevance.refuse_below > t.relevance.answer_at:
        raise ThresholdsError(
            f"relevance.refuse_below: must be at most relevance.answer_at ({t.relevance.answer_at}), "
            f"got {t.relevance.refuse_below}"
        )
    if t.drafting.extractive_sections > t.retrieval.top_k:
        raise ThresholdsError(
            f"drafting.extractive_sections: the drafter can quote only the retrieval.top_k "
            f"({t.retrieval.top_k}) sections it is offered, got {t.drafting.extractive_sections}"
        )
    if t.admission.max_queue_wait_ms > b.request_deadline_ms / 2:
        raise ThresholdsError(
            f"admission.max_queue_wait_ms: a queued request may wait at most half of "
            f"budget.request_deadline_ms ({b.request_deadline_ms} ms), got {t.admission.max_queue_wait_ms} ms"
        )
    g = t.batching
    if g.max_batch > t.admission.max_in_flight:
        raise ThresholdsError(
            f"batching.max_batch: only admitted answers are embedded, so a batch holds at most "
            f"admission.max_in_flight ({t.admission.max_in_flight}) questions, got {g.max_batch}"
        )
    if g.max_wait_ms > b.request_deadline_ms / 2:
        raise ThresholdsError(
            f"batching.max_wait_ms: a question may wait for its batch at most half of "
            f"budget.request_deadline_ms ({b.request_deadline_ms} ms), got {g.max_wait_ms} ms"
        )
    if t.rate_limit.max_client_burst > t.rate_limit.max_requests_per_minute:
        raise ThresholdsError("rate_limit.max_client_burst: must not exceed rate_limit.max_requests_per_minute")


def parse_thresholds(raw: Any) -> Thresholds:
    block = _check_block("", raw, _SCHEMA)
    r = block["retrieval"]
    t = Thresholds(
        measured_on=block["measured_on"],
        index=IndexConfig(**block["index"]),
        retrieval=RetrievalConfig(**{**r, "fusion": MappingProxyType({k: float(v) for k, v in r["fusion"].items()})}),
        grounding=GroundingConfig(coverage_floor=float(block["grounding"]["coverage_floor"])),
        drafting=DraftingConfig(**block["drafting"]),
        relevance=RelevanceConfig(
            weights=MappingProxyType({k: float(v) for k, v in block["relevance"]["weights"].items() if v is not None}),
            answer_at=float(block["relevance"]["answer_at"]),
            refuse_below=float(block["relevance"]["refuse_below"]),
        ),
        answers=AnswerBars(**block["answers"]),
        budget=BudgetConfig(**{k: float(v) for k, v in block["budget"].items()}),
        rate_limit=RateLimitConfig(**block["rate_limit"]),
        ask=AskConfig(**block["ask"]),
        admission=AdmissionConfig(
            **{
                **block["admission"],
                "max_queue_wait_ms": float(block["admission"]["max_queue_wait_ms"]),
                "refusals_per_s": float(block["admission"]["refusals_per_s"]),
            }
        ),
        batching=BatchingConfig(
            max_batch=block["batching"]["max_batch"], max_wait_ms=float(block["batching"]["max_wait_ms"])
        ),
    )
    check_rules(t)
    return t


def load_thresholds(path: Path) -> Thresholds:
    return parse_thresholds(read_yaml(path, ThresholdsError))


def to_plain(obj: Any) -> Any:
    """A Thresholds (or part of one) as plain dicts, for reports and rewriting the file."""
    if hasattr(obj, "__dataclass_fields__"):
        return {f.name: to_plain(getattr(obj, f.name)) for f in fields(obj)}
    if isinstance(obj, Mapping):
        return {k: to_plain(v) for k, v in obj.items()}
    return obj
