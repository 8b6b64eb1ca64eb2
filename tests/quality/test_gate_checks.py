"""Each gate check's rule on a context made by hand: the verdict just inside, at and just past
its bar, and the whole message it gives. ``test_gate_red.py`` turns every check red on a copy
of the project; this file holds each comparison's edge in milliseconds, so mutation testing
can run it against the checks (eval/mutation.yaml)."""

from __future__ import annotations

import json
import locale
from pathlib import Path
from types import MappingProxyType, SimpleNamespace
from typing import Any

import pytest

from rag_contract.config.questions import Question
from rag_contract.quality import gate
from rag_contract.quality.accuracy import MISS_LEVELS
from rag_contract.quality.gate import ANSWERED, Check, Outcome, checks, run_check

A1 = Question("a1", "What is a1?", expected=("rfc1#1", "rfc1#2"))
A2 = Question("a2", "What is a2?", expected=("rfc1#3",))
U1 = Question("u1", "Is u1 refused?", answerable=False, expected_state="unsupported", why="not in the corpus")
U2 = Question("u2", "Is u2 partial?", answerable=False, expected_state="partial", why="half in the corpus")
QUESTIONS = (A1, A2, U1, U2)


class Questions:
    def __init__(self, questions=QUESTIONS):
        self.questions = tuple(questions)
        self.answerable = tuple(q for q in self.questions if q.answerable)
        self.refusals = tuple(q for q in self.questions if not q.answerable)
        self.fingerprint = "qfp"

    def get(self, qid):
        return next((q for q in self.questions if q.id == qid), None)


def thresholds(**changes: Any) -> SimpleNamespace:
    t = SimpleNamespace(
        measured_on="v1",
        retrieval=SimpleNamespace(
            top_k=10, ceilings=MappingProxyType({"a1": 3, "a2": 1}), floors={"recall@1": 0.5, "mrr": 0.25}
        ),
        answers=SimpleNamespace(
            min_grounded_rate=0.5,
            max_answered_unanswerable=1,
            min_state_agreement=0.75,
            min_coverage=0.6,
            min_accuracy_when_answered=0.5,
            max_false_answer_rate=0.5,
            known_overanswered=MappingProxyType({}),
            known_misses=MappingProxyType({}),
        ),
        budget=SimpleNamespace(
            max_request_ms=50.0,
            request_deadline_ms=150.0,
            max_rebuild_usd=0.05,
            max_rerecord_usd=3.0,
            daily_cap_usd=4.0,
        ),
        drafting=SimpleNamespace(max_completion_tokens=400),
        rate_limit=SimpleNamespace(max_requests_per_minute=60, max_client_burst=10, trusted_proxy_hops=0),
    )
    for dotted, value in changes.items():
        *block, key = dotted.split("__")
        setattr(getattr(t, block[0]) if block else t, key, value)
    return t


def ctx(**attrs: Any) -> SimpleNamespace:
    base = {
        "thresholds": thresholds(),
        "project": SimpleNamespace(questions=Questions()),
        "index": SimpleNamespace(version="v1", question_vectors={q.question: 0 for q in QUESTIONS}),
    }
    return SimpleNamespace(**(base | attrs))


# --- thresholds ----------------------------------------------------------------------------


def test_thresholds_naming_exactly_the_answerable_questions_pass():
    assert gate._thresholds_valid(ctx()) == Outcome(True, "2 ceilings for 2 answerable questions; measured on v1")


def test_thresholds_name_every_problem_at_once():
    c = ctx(thresholds=thresholds(retrieval__ceilings={"a1": 3, "u1": 2, "zz": 1}, measured_on="v0"))
    assert gate._thresholds_valid(c) == Outcome(
        False,
        "eval/thresholds.yaml: answerable question(s) without a rank ceiling: a2; "
        "ceiling(s) for ids that are not answerable questions: u1, zz; "
        "measured_on is v0 but the index is v1: re-measure and record the version the numbers were taken on.",
        {"missing": 1, "extra": 2},
    )


@pytest.mark.parametrize(
    ("ceilings", "message", "figures"),
    [
        ({}, "answerable question(s) without a rank ceiling: a1, a2", {"missing": 2, "extra": 0}),
        (
            {"a1": 3, "a2": 1, "b": 1, "a": 1},
            "ceiling(s) for ids that are not answerable questions: a, b",
            {"missing": 0, "extra": 2},
        ),
    ],
)
def test_one_thresholds_problem_is_named_alone(ceilings, message, figures):
    out = gate._thresholds_valid(ctx(thresholds=thresholds(retrieval__ceilings=ceilings)))
    assert out == Outcome(False, f"eval/thresholds.yaml: {message}.", figures)


def test_a_stale_measured_on_alone_fails():
    out = gate._thresholds_valid(ctx(thresholds=thresholds(measured_on="v0")))
    assert out.passed is False and out.figures == {"missing": 0, "extra": 0}
    assert out.message.startswith("eval/thresholds.yaml: measured_on is v0 but the index is v1")


# --- retrieval floors and ceilings -----------------------------------------------------------


def row(qid: str, rank: int | None, outranked_by=()) -> SimpleNamespace:
    return SimpleNamespace(id=qid, rank=rank, outranked_by=tuple(outranked_by))


def serving(value: float, rows=(), mode: str = "fused") -> SimpleNamespace:
    return SimpleNamespace(
        mode=mode,
        figure=lambda metric: {"recall@1": value, "mrr": value}[metric],
        questions=tuple(rows),
        result=lambda qid: next(r for r in rows if r.id == qid),
    )


def retrieval_ctx(value: float = 0.5, rows=(), **t: Any) -> SimpleNamespace:
    return ctx(retrieval=SimpleNamespace(serving=serving(value, rows)), thresholds=thresholds(**t))


@pytest.mark.parametrize("value", [0.5, 0.5001])
def test_a_floor_is_met_at_or_above_it(value):
    out = gate._floor("recall@1")(retrieval_ctx(value))
    assert out == Outcome(
        True, f"recall@1 {value:.4f} >= floor 0.5000 (fused)", {"measured": value, "floor": 0.5, "mode": "fused"}
    )


def test_a_floor_just_missed_names_the_five_worst_placed_questions():
    rows = [row("q1", 1), row("q2", 2), row("q3", None), row("q4", 7), row("q5", 3), row("q6", 98), row("q7", 4)]
    out = gate._floor("mrr")(retrieval_ctx(0.2499, rows))
    assert out == Outcome(
        False,
        "mrr is 0.2499 in fused mode, below its floor of 0.2500 in eval/thresholds.yaml. "
        "Worst-placed questions: q3 (rank miss), q6 (rank 98), q4 (rank 7), q7 (rank 4), q5 (rank 3).",
        {"measured": 0.2499, "floor": 0.25, "mode": "fused"},
    )


def test_a_question_at_rank_one_is_never_worst_placed():
    out = gate._floor("mrr")(retrieval_ctx(0.1, [row("q1", 1), row("q2", 2), row("q3", None)]))
    assert out.message.endswith("Worst-placed questions: q3 (rank miss), q2 (rank 2).")


def test_a_miss_is_placed_as_rank_99():
    out = gate._floor("mrr")(retrieval_ctx(0.1, [row("q1", 99), row("q2", None), row("q3", 100)]))
    assert out.message.endswith("Worst-placed questions: q3 (rank 100), q1 (rank 99), q2 (rank miss).")


def test_a_question_a_check_names_must_be_in_the_set():
    with pytest.raises(KeyError, match="no question 'zz' in the question set"):
        gate._question(ctx(), "zz")
    assert gate._question(ctx(), "u2") is U2


@pytest.mark.parametrize("rank", [1, 2, 3])
def test_a_rank_at_or_under_its_ceiling_passes(rank):
    out = gate._ceiling("a1")(retrieval_ctx(rows=[row("a1", rank)]))
    assert out == Outcome(True, f"a1 rank {rank} <= ceiling 3", {"rank": rank, "ceiling": 3})


def test_a_rank_just_over_its_ceiling_fails_naming_what_outranked_it():
    rows = [row("a1", 4, [("rfc1#9", "Nine"), ("rfc1#8", "Eight")])]
    out = gate._ceiling("a1")(retrieval_ctx(rows=rows))
    assert out == Outcome(
        False,
        'a1 "What is a1?" expects rfc1#1, rfc1#2; it is at rank 4, ceiling 3. '
        "Outranked by: rfc1#9 (Nine); rfc1#8 (Eight).",
        {"rank": 4, "ceiling": 3},
    )


def test_a_miss_fails_its_ceiling():
    out = gate._ceiling("a2")(retrieval_ctx(rows=[row("a2", None, [("rfc1#9", "Nine")])]))
    assert out == Outcome(
        False,
        'a2 "What is a2?" expects rfc1#3; it is at not in the top 10, ceiling 1. Outranked by: rfc1#9 (Nine).',
        {"rank": "miss", "ceiling": 1},
    )


@pytest.mark.parametrize(("rank", "where"), [(5, "ranks 5 now"), (None, "ranks outside the top 10 now")])
def test_a_question_without_a_ceiling_fails_saying_where_it_ranks(rank, where):
    c = retrieval_ctx(rows=[row("a1", rank)], retrieval__ceilings={"a2": 1})
    out = gate._ceiling("a1")(c)
    assert out == Outcome(
        False,
        f"a1 ('What is a1?') has no rank ceiling in eval/thresholds.yaml; it {where}. "
        "Add its ceiling in the same change as the question.",
        {"rank": rank if rank else "miss", "ceiling": "none"},
    )


# --- index freshness ---------------------------------------------------------------------------


def change(what: str, index_has: str = "old", disk_has: str = "new") -> SimpleNamespace:
    return SimpleNamespace(what=what, index_has=index_has, disk_has=disk_has)


def status(changes=(), error=None) -> SimpleNamespace:
    return SimpleNamespace(error=error, changes=tuple(changes), index_version="v1", rebuild_version="v2")


def test_freshness_that_cannot_be_checked_fails():
    out = gate._freshness(ctx(status=status(error="meta.json: missing")))
    assert out == Outcome(False, "index freshness could not be checked: meta.json: missing")


@pytest.mark.parametrize("changes", [(), (change("questions"),)])
def test_an_index_whose_corpus_side_is_unchanged_is_fresh(changes):
    out = gate._freshness(ctx(status=status(changes)))
    assert out == Outcome(True, "index v1 matches corpus, embedder and chunking", {"index_version": "v1"})


def test_a_corpus_side_change_names_each_input_and_the_rebuild():
    out = gate._freshness(ctx(status=status([change("corpus", "c1", "c2"), change("questions"), change("chunking")])))
    assert out == Outcome(
        False,
        "index v1 no longer describes what is on disk (corpus: index has c1, disk has c2; "
        "chunking: index has old, disk has new). Run `rag-contract build-index`; the rebuild will produce v2.",
        {"index_version": "v1", "rebuild_version": "v2"},
    )


def test_question_vectors_that_cannot_be_checked_fail():
    out = gate._question_vectors(ctx(status=status(error="boom")))
    assert out == Outcome(False, "question vectors could not be checked: boom")


def test_question_vectors_of_the_question_set_pass():
    out = gate._question_vectors(ctx(status=status([change("corpus")])))
    assert out == Outcome(True, "question vectors match question set qfp")


def test_stale_question_vectors_name_the_fingerprint_and_each_question_without_one():
    index = SimpleNamespace(version="v1", question_vectors={A1.question: 0, U1.question: 0})
    out = gate._question_vectors(ctx(status=status([change("questions", "f1", "f2")]), index=index))
    assert out == Outcome(
        False,
        "committed question vectors are stale (question set fingerprint: index has f1, disk has f2; "
        "no committed vector for a2, u2). Run `rag-contract build-index` to re-embed.",
        {"missing": 2},
    )


def test_a_changed_fingerprint_alone_is_stale():
    out = gate._question_vectors(ctx(status=status([change("questions", "f1", "f2")])))
    assert out == Outcome(
        False,
        "committed question vectors are stale (question set fingerprint: index has f1, disk has f2). "
        "Run `rag-contract build-index` to re-embed.",
        {"missing": 0},
    )


def test_a_missing_vector_alone_is_stale():
    index = SimpleNamespace(version="v1", question_vectors={q.question: 0 for q in (A1, A2, U2)})
    out = gate._question_vectors(ctx(status=status(), index=index))
    assert out == Outcome(
        False,
        "committed question vectors are stale (no committed vector for u1). "
        "Run `rag-contract build-index` to re-embed.",
        {"missing": 1},
    )


# --- committed reports ---------------------------------------------------------------------------


def report_ctx(tmp_path: Path, now: str) -> SimpleNamespace:
    paths = SimpleNamespace(result=lambda name: tmp_path / name)
    return ctx(project=SimpleNamespace(questions=Questions(), paths=paths), now=now)


def test_a_missing_report_fails_naming_the_command(tmp_path):
    out = gate._report_matches("r.json", lambda c: c.now, "make r")(report_ctx(tmp_path, "{}"))
    assert out == Outcome(
        False,
        "eval/results/r.json is missing; run `make r` and keep the result with the project "
        "(commit it if the project is under version control).",
    )


def test_a_report_equal_to_the_eval_passes_whatever_the_locale(tmp_path):
    (tmp_path / "r.json").write_text('{"a": "\u00e9"}\n', encoding="utf-8")
    before = locale.setlocale(locale.LC_CTYPE)
    locale.setlocale(locale.LC_CTYPE, "C")
    try:
        assert locale.getencoding() != "UTF-8"
        out = gate._report_matches("r.json", lambda c: c.now, "make r")(report_ctx(tmp_path, '{"a": "\u00e9"}\n'))
    finally:
        locale.setlocale(locale.LC_CTYPE, before)
    assert out == Outcome(True, "eval/results/r.json matches the eval")


def test_a_report_that_differs_names_the_first_five_differences(tmp_path):
    committed = {f"k{i}": i for i in range(7)}
    (tmp_path / "r.json").write_text(json.dumps(committed))
    now = json.dumps({k: v + 1 for k, v in committed.items()})
    out = gate._report_matches("r.json", lambda c: c.now, "make r")(report_ctx(tmp_path, now))
    diffs = "; ".join(f"k{i}: committed {i}, now {i + 1}" for i in range(5))
    assert out == Outcome(
        False,
        f"eval/results/r.json differs from what `make r` produces now ({diffs}). "
        "Rerun it and keep the result with the project (commit it if the project is under version control).",
        {"differences": 7},
    )


def test_a_json_diff_walks_objects_and_equal_length_lists_by_path():
    a = {"b": [1, {"c": 2}], "a": 1, "same": "x", 1: "int key"}
    b = {"b": [1, {"c": 3}], "d": None, "same": "x", 1: "int key!"}
    assert gate._json_diff(a, b) == [
        '1: committed "int key", now "int key!"',
        "a: committed 1, now null",
        "b[1].c: committed 2, now 3",
    ]


def test_a_value_that_changes_kind_is_one_difference():
    assert gate._json_diff({"a": {"b": 1}}, {}) == ['a: committed {"b": 1}, now null']
    assert gate._json_diff({"x": 1}, [1]) == [': committed {"x": 1}, now [1]']
    assert gate._json_diff([1], {"x": 1}) == [': committed [1], now {"x": 1}']


def test_every_differing_item_of_a_list_is_named():
    assert gate._json_diff({"l": [1, 2, 3]}, {"l": [0, 2, 4]}) == [
        "l[0]: committed 1, now 0",
        "l[2]: committed 3, now 4",
    ]


def test_lists_of_different_lengths_differ_whole_and_long_values_are_cut_to_60():
    long = "x" * 100
    assert gate._json_diff({"l": [1]}, {"l": [1, 2]}) == ["l: committed [1], now [1, 2]"]
    assert gate._json_diff([long], [long + "y"]) == [
        f"[0]: committed {json.dumps(long)[:60]}, now {json.dumps(long + 'y')[:60]}"
    ]
    assert gate._json_diff(1, 2) == [": committed 1, now 2"]
    assert gate._json_diff({"a": {"b": 1}}, {"a": {"b": 1}}) == []


def test_a_tolerance_forgives_numbers_within_it_at_any_depth_and_never_flags_or_text():
    a = {"n": {"x": [0.5, 2]}, "flag": True, "s": "a"}
    within = {"n": {"x": [0.5 + 1e-4, 3]}, "flag": True, "s": "a"}
    assert gate._json_diff(a, within, tolerance=1.0) == []
    # exactly the tolerance is within; past it, or with no tolerance, it is a difference
    assert gate._json_diff({"x": 1}, {"x": 1.25}, tolerance=0.25) == []
    assert gate._json_diff({"x": 1}, {"x": 1.5}, tolerance=0.25) == ["x: committed 1, now 1.5"]
    assert gate._json_diff([0.5], [0.5001]) == ["[0]: committed 0.5, now 0.5001"]
    # True == 1 in Python: a flag is never a number within a tolerance of another
    assert gate._json_diff({"f": True}, {"f": 1}, tolerance=1.0) == ["f: committed true, now 1"]
    assert gate._json_diff({"f": 0}, {"f": False}, tolerance=1.0) == ["f: committed 0, now false"]
    assert gate._json_diff({"s": "1"}, {"s": 1}, tolerance=1.0) == ['s: committed "1", now 1']


# --- answers ------------------------------------------------------------------------------------


def answers(**over: Any) -> dict:
    rows = [
        {"id": "a1", "answerable": True, "state": "grounded", "expected_state": None},
        {"id": "a2", "answerable": True, "state": "partial", "expected_state": None},
        {"id": "u1", "answerable": False, "state": "unsupported", "expected_state": "unsupported"},
        {
            "id": "u2",
            "answerable": False,
            "state": "grounded",
            "expected_state": "partial",
            "kept": 2,
            "withdrawn": [1],
        },
        {"id": "a3", "answerable": True, "state": "grounded", "expected_state": None},  # never named as not grounded
    ]
    base = {
        "grounded_rate": 0.5,
        "state_agreement": 0.75,
        "answered_unanswerable": 1,
        "answered_unanswerable_ids": ["u2", "u9"],
        "questions": rows,
    }
    return base | over


def answers_ctx(state: str, qid: str = "u2", held: dict | None = None, **over: Any) -> SimpleNamespace:
    a = answers(**over)
    rows = [r | {"state": state} if r["id"] == qid else r for r in a["questions"]]
    c = ctx(thresholds=thresholds(answers__known_overanswered=held or {}), answers=a | {"questions": rows})
    c.answer_row = lambda q: next(r for r in c.answers["questions"] if r["id"] == q)
    return c


def test_the_answered_scale():
    assert ANSWERED == {"no_context": 0, "abandoned": 0, "unsupported": 0, "partial": 1, "grounded": 2}


def test_a_refusal_in_its_annotated_state_passes():
    out = gate._refusal("u2")(answers_ctx("partial"))
    assert out == Outcome(True, "u2 landed in partial as annotated", {"state": "partial", "expected_state": "partial"})


@pytest.mark.parametrize("state", ["unsupported", "no_context", "abandoned"])
def test_a_refusal_that_refuses_more_than_annotated_passes_named(state):
    out = gate._refusal("u2")(answers_ctx(state))
    assert out == Outcome(
        True,
        f"u2 landed in {state}, refusing more than its annotated partial",
        {"state": state, "expected_state": "partial"},
    )


@pytest.mark.parametrize("state", ["no_context", "abandoned"])
def test_a_refusal_that_answers_nothing_as_annotated_passes_named(state):
    out = gate._refusal("u1")(answers_ctx(state, qid="u1"))
    assert out == Outcome(
        True,
        f"u1 landed in {state}, refusing as much as its annotated unsupported",
        {"state": state, "expected_state": "unsupported"},
    )


def test_a_refusal_answered_more_than_annotated_fails():
    out = gate._refusal("u2")(answers_ctx("grounded"))
    assert out == Outcome(
        False,
        'u2 "Is u2 partial?" is annotated partial (half in the corpus) but landed in grounded: '
        "2 claim(s) kept and 1 withdrawn, so the service answered more than the corpus supports.",
        {"state": "grounded", "expected_state": "partial"},
    )


def test_a_failed_refusal_without_counts_says_zero():
    out = gate._refusal("u1")(answers_ctx("partial", qid="u1"))
    assert out.passed is False
    assert "0 claim(s) kept and 0 withdrawn" in out.message


@pytest.mark.parametrize(
    ("state", "held", "ok"),
    [
        ("partial", "partial", True),
        ("partial", "grounded", True),
        ("grounded", "partial", False),
        ("grounded", "grounded", True),
    ],
)
def test_a_known_overanswered_refusal_may_not_get_worse(state, held, ok):
    out = gate._refusal("u1")(answers_ctx(state, qid="u1", held={"u1": held}))
    assert out.passed is ok
    if ok:
        assert out == Outcome(
            True,
            f"u1 landed in {state}, more answered than its annotated unsupported: a known exception "
            f"held at {held} by answers.known_overanswered, which may not get worse",
            {"state": state, "expected_state": "unsupported", "held_at": held},
        )


def test_a_state_off_the_scale_fails_even_when_held():
    out = gate._refusal("u1")(answers_ctx("exploded", qid="u1", held={"u1": "grounded"}))
    assert out.passed is False and "landed in exploded" in out.message


@pytest.mark.parametrize(("value", "ok"), [(0.4999, False), (0.5, True), (0.5001, True)])
def test_the_grounded_rate_bar(value, ok):
    out = gate._answer_bar("min_grounded_rate")(answers_ctx("partial", qid="a1", grounded_rate=value))
    figures = {"measured": value, "bar": 0.5}
    if ok:
        assert out == Outcome(True, f"grounded_rate {value} >= 0.5", figures)
    else:
        assert out == Outcome(
            False, f"grounded rate {value} is below answers.min_grounded_rate 0.5; not grounded: a1, a2.", figures
        )


@pytest.mark.parametrize(("value", "ok"), [(0.7499, False), (0.75, True), (0.7501, True)])
def test_the_state_agreement_bar(value, ok):
    out = gate._answer_bar("min_state_agreement")(answers_ctx("grounded", qid="u1", state_agreement=value))
    figures = {"measured": value, "bar": 0.75}
    if ok:
        assert out == Outcome(True, f"state_agreement {value} >= 0.75", figures)
    else:
        assert out == Outcome(
            False, f"state agreement {value} is below answers.min_state_agreement 0.75; disagreeing: u1, u2.", figures
        )


@pytest.mark.parametrize(("value", "ok"), [(0, True), (1, True), (2, False)])
def test_the_answered_unanswerable_bar(value, ok):
    out = gate._answer_bar("max_answered_unanswerable")(answers_ctx("grounded", answered_unanswerable=value))
    figures = {"measured": value, "bar": 1}
    if ok:
        assert out == Outcome(True, f"answered_unanswerable {value} <= 1", figures)
    else:
        assert out == Outcome(
            False,
            "2 unanswerable question(s) were answered anyway (u2, u9); answers.max_answered_unanswerable allows 1.",
            figures,
        )


# --- budgets ------------------------------------------------------------------------------------


def budget_ctx(seconds: float = 0.0, rerecord: float = 0.0) -> SimpleNamespace:
    calls: list[tuple] = []
    svc = SimpleNamespace(answer=lambda question, qid: calls.append((question, qid)))
    c = ctx(fixture_service=svc, rerecord_usd=rerecord, prices="prices", calls=calls)
    c.measure = lambda fn: (fn(), seconds)[1]
    return c


@pytest.mark.parametrize(("seconds", "ok"), [(0.04999, True), (0.05, True), (0.0500101, False)])
def test_the_latency_bar_is_the_slowest_questions_median(monkeypatch, seconds, ok):
    asked = []
    monkeypatch.setattr(gate, "slowest_question", lambda c: asked.append(c) or "a2")
    c = budget_ctx(seconds)
    out = gate._latency(c)
    assert asked == [c]
    ms = seconds * 1000.0
    assert c.calls == [("What is a2?", "a2")]
    assert out.figures == {
        "question": "a2",
        "median_ms": round(ms, 3),
        "max_request_ms": 50.0,
        "request_deadline_ms": 150.0,
    }
    if ok:
        assert out.passed is True and out.message == f"a2 median {ms:.2f} ms <= 50.0 ms"
    else:
        assert out.passed is False
        assert out.message == (
            "Service.answer on a2 (the slowest question) has a median of 50.01 ms, above budget.max_request_ms 50.0 ms."
        )


@pytest.mark.parametrize(("cost", "ok"), [(0.0499, True), (0.049994, True), (0.05, True), (0.0501, False)])
def test_the_rebuild_is_priced_against_its_ceiling(monkeypatch, cost, ok):
    seen = {}
    monkeypatch.setattr(gate, "rebuild_texts", lambda project: seen.update(project=project) or ["t1", "t2"])
    monkeypatch.setattr(gate, "priced_rebuild", lambda prices, texts: seen.update(p=prices, t=texts) or cost)
    c = budget_ctx()
    out = gate._priced("rebuild")(c)
    assert seen == {"project": c.project, "p": "prices", "t": ["t1", "t2"]}
    what = "build-index --embedder openai-text-embedding-3-small"
    figures = {"priced_usd": round(cost, 4), "ceiling_usd": 0.05}
    if ok:
        assert out == Outcome(True, f"{what}: priced ${cost:.4f} <= budget.max_rebuild_usd $0.05", figures)
    else:
        assert out == Outcome(
            False,
            f"{what} is priced at $0.0501 (upper bound from committed text, drafting.max_completion_tokens 400), "
            "above budget.max_rebuild_usd $0.05: the cap would refuse the run it exists to permit.",
            figures,
        )


@pytest.mark.parametrize(
    ("kind", "key", "bar", "what"),
    [
        ("rerecord", "budget.max_rerecord_usd", 3.0, "record-drafts --drafter live"),
        ("cap", "budget.daily_cap_usd", 4.0, "the worst-case live drafting run"),
    ],
)
@pytest.mark.parametrize("step", [-0.0001, 0.0, 0.0001])
def test_a_live_drafting_run_is_priced_against_its_ceiling(kind, key, bar, what, step):
    cost = bar + step
    out = gate._priced(kind)(budget_ctx(rerecord=cost))
    figures = {"priced_usd": round(cost, 4), "ceiling_usd": bar}
    if step <= 0:
        assert out == Outcome(True, f"{what}: priced ${cost:.4f} <= {key} ${bar:.2f}", figures)
    else:
        assert out == Outcome(
            False,
            f"{what} is priced at ${cost:.4f} (upper bound from committed text, drafting.max_completion_tokens 400), "
            f"above {key} ${bar:.2f}: the cap would refuse the run it exists to permit.",
            figures,
        )


@pytest.mark.parametrize(("refused_at", "shown"), [(11, 11), (None, "never")])
def test_the_rate_limit_probe_runs_against_the_committed_allowance(monkeypatch, refused_at, shown):
    seen = {}

    def probe(make_app, allowance):
        seen["allowance"] = allowance
        seen["app"] = make_app("clock")
        return SimpleNamespace(passed=refused_at is not None, detail="detail", served=10, refused_at=refused_at)

    monkeypatch.setattr(gate, "probe", probe)
    monkeypatch.setattr(gate, "app_for_probe", lambda project, index, clock: (project, index, clock))
    c = ctx()
    out = gate._rate_limit(c)
    assert out == Outcome(refused_at is not None, "detail", {"burst": 10, "served": 10, "refused_at": shown})
    assert seen["app"] == (c.project, c.index, "clock")
    a = seen["allowance"]
    assert (a.per_minute, a.burst, a.trusted_proxy_hops) == (60, 10, 0)


# --- the list -------------------------------------------------------------------------------------


def test_the_checks_are_listed_with_stable_ids_and_kinds():
    listed = checks(ctx())
    assert [(c.id, c.kind) for c in listed] == [
        ("thresholds", "thresholds"),
        ("retrieval/floor/recall@1", "floor"),
        ("retrieval/floor/recall@5", "floor"),
        ("retrieval/floor/recall@10", "floor"),
        ("retrieval/floor/mrr", "floor"),
        ("retrieval/ceiling/a1", "ceiling"),
        ("retrieval/ceiling/a2", "ceiling"),
        ("index/freshness", "freshness"),
        ("index/question-vectors", "freshness"),
        ("report/retrieval", "report"),
        ("answers/answer/a1", "answer"),
        ("answers/answer/a2", "answer"),
        ("answers/refusal/u1", "refusal"),
        ("answers/refusal/u2", "refusal"),
        ("answers/min_grounded_rate", "answers"),
        ("answers/max_answered_unanswerable", "answers"),
        ("answers/min_state_agreement", "answers"),
        ("answers/min_coverage", "answers"),
        ("answers/min_accuracy_when_answered", "answers"),
        ("answers/max_false_answer_rate", "answers"),
        ("report/answers", "report"),
        ("budget/latency", "latency"),
        ("budget/rebuild", "budget"),
        ("budget/rerecord", "budget"),
        ("budget/drafting-vs-cap", "budget"),
        ("ratelimit/probe", "ratelimit"),
    ]
    assert [c.id for c in listed if c.needs_measure] == ["budget/latency"]


def test_an_answer_bar_left_unset_has_no_check():
    c = ctx(
        thresholds=thresholds(
            answers__min_state_agreement=None,
            answers__min_grounded_rate=None,
            answers__min_coverage=None,
            answers__min_accuracy_when_answered=None,
        )
    )
    assert [x.id for x in checks(c) if x.kind == "answers"] == [
        "answers/max_answered_unanswerable",
        "answers/max_false_answer_rate",
    ]


def test_the_listed_checks_run_the_rules_above(tmp_path, monkeypatch):
    by_id = {c.id: c for c in checks(ctx())}
    c = retrieval_ctx(0.5, [row("a1", 3), row("a2", 2)])
    assert by_id["thresholds"].run(c).passed
    assert by_id["retrieval/floor/recall@1"].run(c).message == "recall@1 0.5000 >= floor 0.5000 (fused)"
    assert by_id["retrieval/ceiling/a1"].run(c).passed and not by_id["retrieval/ceiling/a2"].run(c).passed
    assert by_id["index/freshness"].run(ctx(status=status())).passed
    assert by_id["index/question-vectors"].run(ctx(status=status(error="e"))).message.endswith(": e")
    r = report_ctx(tmp_path, "")
    r.retrieval = SimpleNamespace(to_json=lambda: "{}")
    r.answers = {"x": "\u00e9"}
    (tmp_path / "retrieval.json").write_text("{}")
    (tmp_path / "answers.json").write_text('{\n "x": "\u00e9"\n}\n', encoding="utf-8")
    assert by_id["report/retrieval"].run(r) == Outcome(True, "eval/results/retrieval.json matches the eval")
    assert by_id["report/answers"].run(r) == Outcome(True, "eval/results/answers.json matches the eval")
    (tmp_path / "retrieval.json").unlink()
    (tmp_path / "answers.json").unlink()
    assert "run `rag-contract eval` and" in by_id["report/retrieval"].run(r).message
    assert "run `rag-contract eval-answers` and" in by_id["report/answers"].run(r).message
    a = answers_ctx("partial")
    assert by_id["answers/refusal/u2"].run(a).passed and by_id["answers/min_grounded_rate"].run(a).passed
    assert by_id["answers/max_answered_unanswerable"].run(a).passed
    assert by_id["answers/min_state_agreement"].run(a).passed
    b = budget_ctx(seconds=0.01, rerecord=3.5)
    assert by_id["budget/rerecord"].run(b).message.startswith("record-drafts --drafter live is priced")
    assert by_id["budget/drafting-vs-cap"].run(b).message.endswith("budget.daily_cap_usd $4.00")
    monkeypatch.setattr(gate, "rebuild_texts", lambda project: [])
    monkeypatch.setattr(gate, "priced_rebuild", lambda prices, texts: 0.01)
    assert by_id["budget/rebuild"].run(b).message == (
        "build-index --embedder openai-text-embedding-3-small: priced $0.0100 <= budget.max_rebuild_usd $0.05"
    )
    monkeypatch.setattr(gate, "slowest_question", lambda c: "a1")
    assert by_id["budget/latency"].run(b).message == "a1 median 10.00 ms <= 50.0 ms"
    monkeypatch.setattr(
        gate, "probe", lambda make_app, allowance: SimpleNamespace(passed=True, detail="ok", served=10, refused_at=11)
    )
    assert by_id["ratelimit/probe"].run(ctx()) == Outcome(True, "ok", {"burst": 10, "served": 10, "refused_at": 11})


def test_a_check_that_raises_fails_with_its_message():
    def boom(c):
        raise KeyError("no question 'zz' in the question set")

    out = run_check(Check("x/y", "k", boom), ctx())
    assert out == Outcome(False, "x/y could not run: KeyError: \"no question 'zz' in the question set\"")
    assert run_check(Check("t", "thresholds", gate._thresholds_valid), ctx()).passed


def accuracy_ctx(**figures: Any) -> SimpleNamespace:
    rows = [
        {"id": "a1", "answerable": True, "state": "grounded", "accurate": True},
        {"id": "a2", "answerable": True, "state": "partial", "accurate": False},
        {"id": "a3", "answerable": True, "state": "unsupported", "accurate": False},
        {"id": "u1", "answerable": False, "state": "partial"},
        {"id": "u2", "answerable": False, "state": "unsupported"},
    ]
    acc = {"coverage": 0.6667, "accuracy_when_answered": 0.5, "false_answer_rate": 0.5} | figures
    return ctx(answers=answers(accuracy=acc, questions=rows))


@pytest.mark.parametrize(("value", "ok"), [(0.5999, False), (0.6, True), (0.6001, True)])
def test_the_coverage_bar(value, ok):
    out = gate._answer_bar("min_coverage")(accuracy_ctx(coverage=value))
    figures = {"measured": value, "bar": 0.6}
    if ok:
        assert out == Outcome(True, f"coverage {value} >= 0.6", figures)
    else:
        assert out == Outcome(False, f"coverage {value} is below answers.min_coverage 0.6; not answered: a3.", figures)


@pytest.mark.parametrize(("value", "ok"), [(0.4999, False), (0.5, True), (0.5001, True)])
def test_the_accuracy_when_answered_bar_names_the_answers_without_the_evidence(value, ok):
    out = gate._answer_bar("min_accuracy_when_answered")(accuracy_ctx(accuracy_when_answered=value))
    figures = {"measured": value, "bar": 0.5}
    if ok:
        assert out == Outcome(True, f"accuracy_when_answered {value} >= 0.5", figures)
    else:
        assert out == Outcome(
            False,
            f"accuracy when answered {value} is below answers.min_accuracy_when_answered 0.5; "
            "answered without the evidence: a2.",
            figures,
        )


def test_accuracy_with_nothing_answered_is_na_and_holds_no_bar():
    out = gate._answer_bar("min_accuracy_when_answered")(accuracy_ctx(accuracy_when_answered=None))
    assert out.passed is False and "accuracy when answered n/a" in out.message


@pytest.mark.parametrize(("value", "ok"), [(0.4999, True), (0.5, True), (0.5001, False)])
def test_the_false_answer_bar_names_the_unanswerable_questions_answered(value, ok):
    out = gate._answer_bar("max_false_answer_rate")(accuracy_ctx(false_answer_rate=value))
    figures = {"measured": value, "bar": 0.5}
    if ok:
        assert out == Outcome(True, f"false_answer_rate {value} <= 0.5", figures)
    else:
        assert out == Outcome(
            False,
            f"false-answer rate {value} is above answers.max_false_answer_rate 0.5; answered anyway: u1.",
            figures,
        )


def answer_ctx(state: str, cites: bool, accurate: bool, held: dict | None = None) -> SimpleNamespace:
    row = {"id": "a1", "answerable": True, "state": state, "cites_expected": cites, "accurate": accurate}
    row["cited"] = ["rfc1#1"] if cites else ["rfc9#9"]
    c = ctx(thresholds=thresholds(answers__known_misses=MappingProxyType(held or {})), answers=answers(questions=[row]))
    c.answer_row = lambda q: row
    return c


def test_the_miss_levels_best_first():
    assert MISS_LEVELS == ("accurate", "unanswered", "inaccurate", "uncited")


def test_an_accurate_answer_passes_its_answer_item():
    out = gate._answer("a1")(answer_ctx("grounded", True, True))
    assert out == Outcome(
        True,
        "a1 answered accurate (grounded citing rfc1#1)",
        {"state": "grounded", "level": "accurate", "held_at": "accurate"},
    )


@pytest.mark.parametrize(
    ("state", "cites", "accurate", "level"),
    [
        ("unsupported", False, False, "unanswered"),
        ("partial", True, False, "inaccurate"),
        ("grounded", False, False, "uncited"),
    ],
)
def test_an_answer_short_of_accurate_fails_unless_held_there(state, cites, accurate, level):
    out = gate._answer("a1")(answer_ctx(state, cites, accurate))
    assert out.passed is False and f"was answered {level}" in out.message and "worse than the accurate" in out.message
    held = gate._answer("a1")(answer_ctx(state, cites, accurate, {"a1": level}))
    assert held.passed and held.message.endswith(f"held at {level} by answers.known_misses")


def test_an_answer_falling_below_its_held_level_fails_naming_what_it_cited():
    out = gate._answer("a1")(answer_ctx("grounded", False, False, {"a1": "unanswered"}))
    assert out.passed is False
    assert "was answered uncited (grounded citing rfc9#9; expected rfc1#1, rfc1#2" in out.message
    assert out.message.endswith("worse than the unanswered it is held at by answers.known_misses.")
    better = gate._answer("a1")(answer_ctx("unsupported", False, False, {"a1": "uncited"}))
    assert (
        better.passed
        and better.message == "a1 answered unanswered (unsupported), held at uncited by answers.known_misses"
    )
