"""The blind annotator's packet tells nothing but the questions, and the answers come back by id."""

from __future__ import annotations

import re
from dataclasses import replace

import pytest
import yaml

from rag_contract.cli import main
from rag_contract.config.questions import QuestionSet
from rag_contract.project import load_project
from rag_contract.quality.agreement import AnnotationsError, load_annotations
from rag_contract.quality.blind_packet import load_blind, merge_blind, opaque_id, packet, packet_yaml
from tests.support import ROOT
from tools.project_copy import copy_project

FLASK = ROOT / "examples" / "flask-docs"


@pytest.fixture(scope="module")
def flask():
    return load_project(FLASK)


def test_the_packet_carries_each_question_text_under_an_opaque_id_and_nothing_else(flask):
    qs = flask.questions
    raw = yaml.safe_load(packet_yaml(qs))
    assert list(raw) == ["questions"]
    items = raw["questions"]
    assert all(set(item) == {"id", "question"} for item in items)
    assert sorted(item["question"] for item in items) == sorted(q.question for q in qs.questions)
    ids = [item["id"] for item in items]
    assert len(set(ids)) == len(ids)
    assert all(re.fullmatch(r"t[0-9a-f]{8}", i) for i in ids)
    text = packet_yaml(qs)
    for q in qs.questions:
        # no writer id (q01, u07), no expected section, evidence or why appears anywhere in it
        assert not re.search(rf"\b{re.escape(q.id)}\b", text)
        for leaked in (*q.expected, q.evidence, q.why):
            assert not leaked or leaked not in text, f"{q.id}: {leaked!r} is in the packet"
    assert "expected_state" not in text and "unsupported\n" not in text.split("questions:\n", 1)[1]


def test_the_packet_order_owes_nothing_to_the_question_file(flask):
    qs = flask.questions
    shuffled = QuestionSet(tuple(reversed(qs.questions)))
    assert packet(shuffled) == packet(qs)
    written = [q.question for q in qs.questions]
    order = [written.index(item.question) for item in packet(qs)]
    assert order != sorted(order)
    # the refusals, written last, are spread over the packet rather than gathered at its end
    refusal_at = [i for i, item in enumerate(packet(qs)) if not qs.questions[written.index(item.question)].answerable]
    assert min(refusal_at) < len(order) // 4 and max(refusal_at) > 3 * len(order) // 4


def test_a_renamed_question_keeps_its_packet_id_and_two_equal_texts_are_refused(flask):
    first = flask.questions.questions[0]
    assert opaque_id(first.question) == opaque_id(replace(first, id="other").question)
    with pytest.raises(AnnotationsError, match="share the packet id"):
        packet(QuestionSet((first, replace(first, id="copy"))))


def _answers_from_annotations(flask) -> list[dict]:
    """The committed blind annotation, as the annotator's file would state it under packet ids."""
    raw = yaml.safe_load(flask.paths.annotations.read_text())
    by_text = {q.id: q.question for q in flask.questions.questions}
    return [{"id": opaque_id(by_text[r["id"]]), **r["B"]} for r in raw["questions"]]


def test_answers_come_back_under_their_question_ids_and_a_merge_of_the_same_answers_changes_nothing(flask, tmp_path):
    answers = tmp_path / "answers.yaml"
    answers.write_text(yaml.safe_dump({"answers": _answers_from_annotations(flask)}))
    sections = {s.id for s in flask.corpus.sections}
    blind = load_blind(answers, flask.questions, sections)
    assert list(blind) == [q.id for q in flask.questions.questions]
    records = {r.id: r for r in load_annotations(flask.paths.annotations)}
    assert all(blind[qid].annotation == records[qid].by["B"] for qid in blind)
    text = flask.paths.annotations.read_text()
    assert merge_blind(text, blind, "B") == (text, ())


def test_a_changed_answer_drops_the_stale_resolution_and_names_the_record(flask, tmp_path):
    rows = _answers_from_annotations(flask)
    q01 = flask.questions.get("q01")
    assert q01 is not None
    row = next(r for r in rows if r["id"] == opaque_id(q01.question))
    row.clear()
    row.update({"id": opaque_id(q01.question), "label": "unsupported"})
    answers = tmp_path / "answers.yaml"
    answers.write_text(yaml.safe_dump({"answers": rows}))
    blind = load_blind(answers, flask.questions, {s.id for s in flask.corpus.sections})
    text, unresolved = merge_blind(flask.paths.annotations.read_text(), blind, "B")
    assert unresolved == ("q01",)
    merged = tmp_path / "annotations.yaml"
    merged.write_text(text)
    with pytest.raises(AnnotationsError, match="q01: the annotations differ"):
        load_annotations(merged)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda rows: rows.pop(), "no answer for 1 packet ids"),
        (lambda rows: rows.append(dict(rows[0])), "answered twice"),
        (lambda rows: rows[0].update(id="t00000000"), "not an id of the packet"),
        (lambda rows: rows[0].update(label="answerable", expected=["nowhere.rst#x"]), "unknown section ids"),
        (lambda rows: rows[0].update(label="maybe"), "needs a label"),
    ],
)
def test_a_malformed_answer_file_is_refused_naming_the_record(flask, tmp_path, change, message):
    rows = _answers_from_annotations(flask)
    change(rows)
    answers = tmp_path / "answers.yaml"
    answers.write_text(yaml.safe_dump({"answers": rows}))
    with pytest.raises(AnnotationsError, match=message):
        load_blind(answers, flask.questions, {s.id for s in flask.corpus.sections})


def test_the_commands_write_the_packet_and_merge_the_answers_into_a_copy(flask, tmp_path, capsys):
    copy = copy_project(FLASK, tmp_path / "project")
    out = tmp_path / "packet.yaml"
    assert main(["--root", str(copy), "annotation-packet", "--out", str(out)]) == 0
    assert out.read_text() == packet_yaml(flask.questions)
    rows = _answers_from_annotations(flask)
    answers = tmp_path / "answers.yaml"
    answers.write_text(yaml.safe_dump({"answers": rows}))
    assert main(["--root", str(copy), "annotation-import", str(answers)]) == 0
    assert (copy / "eval" / "annotations.yaml").read_text() == flask.paths.annotations.read_text()
    rows[0] = {"id": rows[0]["id"], "label": "unsupported" if rows[0]["label"] != "unsupported" else "partial"}
    answers.write_text(yaml.safe_dump({"answers": rows}))
    capsys.readouterr()
    assert main(["--root", str(copy), "annotation-import", str(answers)]) == 1
    assert "1 records differ with no resolution" in capsys.readouterr().out
