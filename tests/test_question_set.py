"""The question set's own rules: tags, near-duplicates, stratification, and the double annotation."""

from __future__ import annotations

import json
from collections import Counter
from itertools import combinations
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rag_contract.config.questions import NEAR_DUPLICATE_JACCARD, QuestionsError, parse_questions, similarity
from rag_contract.project import load_project
from rag_contract.quality.agreement import (
    AnnotationsError,
    agreement_report,
    cohen_kappa,
    load_annotations,
)
from tests.support import ROOT

SECTIONS = {"rfc9110#9.2.2": "PUT, DELETE, and safe request methods are idempotent.", "rfc6265#5.3": "x"}


def parse(*items: dict):
    return parse_questions({"questions": list(items)}, set(SECTIONS), SECTIONS.__getitem__)


def q(qid: str, text: str, **kw) -> dict:
    return {"id": qid, "question": text, "expected": ["rfc9110#9.2.2"], **kw}


def test_style_type_and_rfc_are_checked_against_their_choices():
    qs = parse(q("a", "Which methods are idempotent?", style="plain", type="definition"))
    assert qs.questions[0].style == "plain" and qs.questions[0].rfcs == ("rfc9110",)
    with pytest.raises(QuestionsError, match=r"a: style 'casual' is not one of \['engineer', 'plain'\]"):
        parse(q("a", "Which methods are idempotent?", style="casual"))
    with pytest.raises(QuestionsError, match="a: type 'trivia'"):
        parse(q("a", "Which methods are idempotent?", type="trivia"))
    with pytest.raises(QuestionsError, match="u: rfc 'rfc7540'"):
        parse({"id": "u", "question": "HTTP/2?", "answerable": False, "expected_state": "unsupported", "why": "w",
               "rfc": "rfc7540"})  # fmt: skip


def test_a_reworded_copy_is_refused_naming_both_questions():
    original = "Which request methods can a client automatically resend after a dropped connection?"
    copy = "Which request methods may a client automatically resend after the connection dropped?"
    assert similarity(original, copy) >= NEAR_DUPLICATE_JACCARD
    with pytest.raises(QuestionsError, match=r"b: a near-duplicate of a \(content-word overlap"):
        parse(q("a", original), q("b", copy))


def test_two_questions_about_one_section_are_not_duplicates():
    parse(q("a", "Which request methods can a client resend after a dropped connection?"),
          q("b", "Is PUT idempotent, so that a retry after a timeout cannot apply the update twice?"))  # fmt: skip


def first_near_duplicate(texts: list[str]) -> tuple[int, int] | None:
    """Every pair compared, in load order: the reference the loader's shortcut must agree with."""
    for j, later in enumerate(texts):
        for i in range(j):
            if similarity(texts[i], later) >= NEAR_DUPLICATE_JACCARD:
                return i, j
    return None


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(st.sampled_from(["cache", "cookie", "path", "range", "the", "is", "etag"]), max_size=4),
                min_size=2, max_size=6))  # fmt: skip
def test_only_questions_that_share_a_word_are_compared_with_the_same_verdict(word_lists):
    texts = [" ".join(words) + " ?" for words in word_lists]
    expected = first_near_duplicate(texts)
    items = [q(f"q{n}", text) for n, text in enumerate(texts)]
    if expected is None:
        parse(*items)
    else:
        i, j = expected
        with pytest.raises(QuestionsError, match=rf"^questions: q{j}: a near-duplicate of q{i} "):
            parse(*items)


def test_two_questions_without_a_content_word_are_duplicates():
    with pytest.raises(QuestionsError, match=r"b: a near-duplicate of a \(content-word overlap 1.00"):
        parse(q("a", "Is it?"), q("b", "What is it?"))


def test_the_committed_set_sits_well_below_the_near_duplicate_bar(project):
    texts = [x.question for x in project.questions.questions]
    closest = max(similarity(a, b) for a, b in combinations(texts, 2))
    assert closest < NEAR_DUPLICATE_JACCARD / 2, closest


def test_the_committed_set_is_large_stratified_and_mostly_engineer_phrased(project):
    qs = project.questions
    assert len(qs.answerable) >= 160 and len(qs.refusals) >= 40
    per_rfc = Counter(x.rfcs[0] for x in qs.answerable)
    assert min(per_rfc.values()) >= 12 and len(per_rfc) == 6, per_rfc
    styles = Counter(x.style for x in qs.questions)
    assert styles["engineer"] >= 0.75 * len(qs.questions), styles
    states = Counter(x.expected_state for x in qs.refusals)
    assert states["partial"] >= 10 and states["unsupported"] >= 10, states
    assert all(x.rfc for x in qs.refusals)


def test_cohen_kappa_against_hand_computed_values():
    assert cohen_kappa(["a", "b", "a", "b"], ["a", "b", "a", "b"]) == 1.0
    # observed 0.5, chance 0.5: no agreement beyond chance
    assert cohen_kappa(["a", "a", "b", "b"], ["a", "b", "a", "b"]) == 0.0
    # 20 items: observed 0.7; chance 0.5*0.6 + 0.5*0.4 = 0.5 -> kappa 0.4
    a = ["x"] * 10 + ["y"] * 10
    b = ["x"] * 8 + ["y"] * 2 + ["x"] * 4 + ["y"] * 6
    assert cohen_kappa(a, b) == pytest.approx(0.4)


def _annotations(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "annotations.yaml"
    path.write_text("questions:\n" + body)
    return path


REFUSED_ANNOTATIONS = [
    pytest.param(
        """\
  - id: q1
    writer: {label: answerable, expected: [rfc9110#9.2.2]}
    A: {label: answerable, expected: [rfc9110#9.2.2]}
    B: {label: partial}
    resolved: {label: answerable, expected: [rfc9110#9.2.2]}
""",
        "q1: the annotations differ, so the record needs a 'resolution'",
        id="a-disagreement-without-a-resolution",
    ),
    pytest.param(
        """\
  - id: q1
    writer: {label: partial, expected: [rfc9110#9.2.2]}
    A: {label: partial}
    B: {label: partial}
    resolved: {label: partial}
""",
        r"q1.writer: expected sections go with the label answerable",
        id="expected-sections-without-answerable",
    ),
    pytest.param(
        """\
  - id: q1
    writer: {label: partial}
    resolved: {label: partial}
""",
        r"q1: needs the writer's annotation and at least one of \['A', 'B'\]",
        id="no-blind-annotation",
    ),
    pytest.param(
        """\
  - id: q1
    writer: {label: partial}
    B: {label: partial}
    resolved: {label: partial}
  - id: q2
    writer: {label: partial}
    A: {label: partial}
    B: {label: partial}
    resolved: {label: partial}
""",
        r"q2: annotated by \['writer', 'A', 'B'\], but q1 by \['writer', 'B'\]",
        id="other-annotators-than-the-first",
    ),
    pytest.param(
        """\
  - id: q1
    A: {label: partial}
    B: {label: partial}
    resolved: {label: partial}
""",
        r"q1.writer: needs a label",
        id="no-writer-annotation",
    ),
]


@pytest.mark.parametrize(("body", "message"), REFUSED_ANNOTATIONS)
def test_an_annotations_file_that_breaks_a_rule_is_refused_naming_the_record(tmp_path, body, message):
    with pytest.raises(AnnotationsError, match=message):
        load_annotations(_annotations(tmp_path, body))


def test_the_resolution_must_match_the_question_set(tmp_path):
    qs = parse(q("q1", "Which methods are idempotent?"))
    path = _annotations(tmp_path, """\
  - id: q1
    writer: {label: answerable, expected: [rfc6265#5.3]}
    A: {label: answerable, expected: [rfc6265#5.3]}
    B: {label: answerable, expected: [rfc6265#5.3]}
    resolved: {label: answerable, expected: [rfc6265#5.3]}
""")  # fmt: skip
    with pytest.raises(AnnotationsError, match=r"q1 is resolved as answerable \['rfc6265#5.3'\], but the question set"):
        agreement_report(load_annotations(path), qs)


def test_a_writer_and_one_blind_annotator_give_one_pair(tmp_path):
    qs = parse(
        q("q1", "Which methods are idempotent?"),
        q("q2", "Is PUT idempotent?"),
        {"id": "u1", "question": "Is PATCH idempotent?", "answerable": False, "expected_state": "partial",
         "why": "w"},
    )  # fmt: skip
    path = _annotations(tmp_path, """\
  - id: q1
    writer: {label: answerable, expected: [rfc9110#9.2.2]}
    B: {label: answerable, expected: [rfc9110#9.2.2]}
    resolved: {label: answerable, expected: [rfc9110#9.2.2]}
  - id: q2
    writer: {label: answerable, expected: [rfc9110#9.2.2]}
    B: {label: answerable, expected: [rfc6265#5.3, rfc9110#9.2.2]}
    resolved: {label: answerable, expected: [rfc9110#9.2.2]}
    resolution: "rfc6265#5.3 does not answer it"
  - id: u1
    writer: {label: partial}
    B: {label: unsupported}
    resolved: {label: partial}
    resolution: "rfc9110#9.2.2 is a foothold"
""")  # fmt: skip
    report = agreement_report(load_annotations(path), qs)
    assert list(report["pairs"]) == ["writer-B"]
    pair = report["pairs"]["writer-B"]
    # labels agree on 2 of 3; chance (2*2 + 0*1 + 1*0) / 9 = 4/9 -> kappa (2/3 - 4/9) / (5/9) = 0.4
    assert pair["kappa"] == 0.4 and pair["label_agreement"] == 0.667
    assert (pair["both_answerable"], pair["sections_identical"], pair["sections_overlap"]) == (2, 1, 2)
    assert pair["sections_mean_jaccard"] == 0.75
    assert report["label_disagreements_resolved"] == 1 and report["section_disagreements_resolved"] == 1


def test_every_added_question_is_annotated_twice_and_the_report_is_current(project):
    records = load_annotations(project.paths.annotations)
    ids = {r.id for r in records}
    added = {x.id for x in project.questions.questions if x.id not in ids}
    # the 60 questions of the first set predate double annotation; every later one has it
    assert len(added) == 60 and len(records) == len(project.questions.questions) - 60
    report = agreement_report(records, project.questions)
    committed = json.loads(project.paths.result("agreement.json").read_text())
    assert committed == report, "run `rag-contract agreement` and commit eval/results/agreement.json"
    assert report["pairs"]["A-B"]["kappa"] >= 0.6


@pytest.mark.parametrize("name", ["starlette-docs", "flask-docs"])
def test_every_example_question_is_annotated_blind_once_and_the_report_is_current(name):
    example = load_project(ROOT / "examples" / name)
    records = load_annotations(example.paths.annotations)
    # the writer and one blind annotator, on every question of the set
    assert [r.id for r in records] == [x.id for x in example.questions.questions]
    assert all(list(r.by) == ["writer", "B"] for r in records)
    report = agreement_report(records, example.questions)
    committed = json.loads(example.paths.result("agreement.json").read_text())
    assert committed == report, (
        f"run `rag-contract agreement --root examples/{name}` and commit its eval/results/agreement.json"
    )
    assert report["pairs"]["writer-B"]["kappa"] >= 0.6
