"""What a blind annotator is given, and how the annotation comes back to the question ids.

Contract: ``packet(questions)`` lists every question under an opaque id, ``opaque_id(text)``,
derived from the question's text alone (so neither the writer's id, whose prefix may carry the
split, nor anything else the writer recorded goes into it), in the order of those ids (so the
order carries nothing of the question file's order either); two questions with one text are
refused. ``packet_yaml(questions)`` is that list as the YAML file handed to the annotator, with
the annotation rules and the answer format in its header: it holds the question texts and
nothing else of eval/questions.yaml (no expected sections, evidence, state, kind or why).

``load_blind(path, questions, section_ids)`` reads the annotator's file (``answers``: one
record per packet id, each ``label`` one of the three labels, ``expected`` section ids for an
answerable question and only for it, ``evidence`` optional) and returns each annotation under
its question id; an unknown or repeated packet id, a packet id without an answer, an unknown
section or a malformed record is refused naming the record. ``merge_blind(text, blind, who)``
writes those annotations into eval/annotations.yaml's text as annotator ``who``, keeping its
header, the writer's and the resolved annotations; a record's ``resolution`` is kept only while
it still explains the same disagreement (the old and new annotations of ``who`` are equal), and
the ids whose annotations now differ with no resolution are returned, for a person to resolve.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import yaml

from rag_contract.config.questions import QuestionSet
from rag_contract.config.yamlfile import read_yaml
from rag_contract.quality.agreement import WRITER, Annotation, AnnotationsError, parse_annotation

# Eight hex digits give 4e9 ids: a collision among a few hundred questions is refused, not met.
ID_PREFIX = "t"
ID_DIGITS = 8

RULES = """\
# Annotation packet: one record per question, under an id that says nothing about it.
#
# Read the corpus (the project's corpus/ folder; `rag-contract sections` lists the section ids
# and titles, `rag-contract sections --json` with their parents). For each question decide:
# - `answerable` when some section's text, read alone, answers the question. `expected` lists
#   every section that alone answers it (a section that only points elsewhere, or gives part of
#   the answer, does not count); `evidence` is a short exact sentence or phrase of one of them
#   that carries the answer.
# - `partial` when the corpus holds a true, relevant statement that stops short of the answer;
#   `foothold` names the section that holds it.
# - `unsupported` when the corpus has no foothold at all.
# Work from the corpus alone: run no retrieval or answering command.
#
# Answer format (YAML), one record per id below, in any order:
#   answers:
#     - id: t0a1b2c3d
#       label: answerable
#       expected: [page.rst#section-anchor]
#       evidence: "the sentence that answers it"
#     - id: t4e5f6a7b
#       label: partial
#       foothold: page.rst#other-section
"""


@dataclass(frozen=True)
class PacketItem:
    id: str
    question: str


@dataclass(frozen=True)
class BlindAnnotation:
    annotation: Annotation
    evidence: str | None = None
    foothold: str | None = None


def opaque_id(text: str) -> str:
    return ID_PREFIX + hashlib.sha256(text.encode()).hexdigest()[:ID_DIGITS]


def _packet_ids(questions: QuestionSet) -> dict[str, str]:
    """packet id -> question id; refuses two questions whose texts share a packet id."""
    out: dict[str, str] = {}
    for q in questions.questions:
        pid = opaque_id(q.question)
        if pid in out:
            raise AnnotationsError(f"packet: {q.id} and {out[pid]} share the packet id {pid}; their texts must differ")
        out[pid] = q.id
    return out


def packet(questions: QuestionSet) -> tuple[PacketItem, ...]:
    ids = _packet_ids(questions)
    text = {q.id: q.question for q in questions.questions}
    return tuple(PacketItem(pid, text[ids[pid]]) for pid in sorted(ids))


def packet_yaml(questions: QuestionSet) -> str:
    body = yaml.safe_dump(
        {"questions": [{"id": item.id, "question": item.question} for item in packet(questions)]},
        sort_keys=False,
        allow_unicode=True,
        width=1000,
    )
    return RULES + body


def load_blind(path: Path, questions: QuestionSet, section_ids: set[str]) -> dict[str, BlindAnnotation]:
    """The annotator's file, keyed by question id, in the question set's order."""
    name = Path(path).name
    raw = read_yaml(path, AnnotationsError)
    if not isinstance(raw, dict) or not isinstance(raw.get("answers"), list):
        raise AnnotationsError(f"{name}: must be a mapping with an 'answers' list")
    ids = _packet_ids(questions)
    found: dict[str, BlindAnnotation] = {}
    for i, item in enumerate(raw["answers"]):
        if not isinstance(item, dict) or not isinstance(item.get("id"), str):
            raise AnnotationsError(f"{name}: answers[{i}] needs an id")
        pid, where = item["id"], f"{name}: {item['id']}"
        if pid not in ids:
            raise AnnotationsError(f"{where}: not an id of the packet")
        if ids[pid] in found:
            raise AnnotationsError(f"{where}: answered twice")
        annotation = parse_annotation(item, where)
        unknown = [
            s
            for s in (*annotation.expected, *([item["foothold"]] if item.get("foothold") else []))
            if s not in section_ids
        ]
        if unknown:
            raise AnnotationsError(f"{where}: unknown section ids {unknown}")
        for key in ("evidence", "foothold"):
            if item.get(key) is not None and not isinstance(item[key], str):
                raise AnnotationsError(f"{where}: {key} must be a string")
        found[ids[pid]] = BlindAnnotation(annotation, item.get("evidence"), item.get("foothold"))
    missing = sorted(pid for pid, qid in ids.items() if qid not in found)
    if missing:
        raise AnnotationsError(f"{name}: no answer for {len(missing)} packet ids, first {missing[:5]}")
    return {q.id: found[q.id] for q in questions.questions}


def _flow(raw: Mapping[str, object]) -> str:
    """One annotation as the file writes it: label, then expected sections or foothold."""
    parts = [f"label: {raw['label']}"]
    if raw.get("expected"):
        parts.append(f"expected: [{', '.join(sorted(raw['expected']))}]")  # type: ignore[call-overload]
    if raw.get("foothold"):
        parts.append(f"foothold: {raw['foothold']}")
    return "{" + ", ".join(parts) + "}"


def _raw(b: BlindAnnotation) -> dict[str, object]:
    return {"label": b.annotation.label, "expected": list(b.annotation.expected), "foothold": b.foothold}


def merge_blind(text: str, blind: Mapping[str, BlindAnnotation], who: str) -> tuple[str, tuple[str, ...]]:
    """(eval/annotations.yaml's new text, the ids that need a resolution written)."""
    if who == WRITER or who not in ("A", "B"):
        raise AnnotationsError(f"annotator must be A or B, not {who!r}")
    head, sep, _ = text.partition("\nquestions:\n")
    if not sep:
        raise AnnotationsError("annotations: no 'questions:' list to merge into")
    raw = yaml.safe_load(text)
    records: Sequence[dict] = raw["questions"]
    if {r["id"] for r in records} != set(blind):
        raise AnnotationsError("annotations: the blind annotation and the annotations file cover different questions")
    lines, unresolved = [head, "questions:"], []
    for r in records:
        qid = r["id"]
        new = blind[qid].annotation
        raws = {k: r[k] for k in (WRITER, "A", "B") if k in r} | {who: _raw(blind[qid])}
        by = {k: parse_annotation(v, f"{qid}.{k}") for k, v in raws.items()}
        old = parse_annotation(r[who], f"{qid}.{who}") if who in r else None
        resolved = parse_annotation(r["resolved"], f"{qid}.resolved")
        resolution = r.get("resolution") if old == new else None
        lines.append(f"  - id: {qid}")
        lines += [f"    {k}: {_flow(raws[k])}" for k in (WRITER, "A", "B") if k in raws]
        lines.append(f"    resolved: {_flow(r['resolved'])}")
        if len(set(by.values()) | {resolved}) > 1:
            if resolution:
                lines.append(f"    resolution: {json.dumps(resolution, ensure_ascii=False)}")
            else:
                unresolved.append(qid)
    return "\n".join(lines) + "\n", tuple(unresolved)
