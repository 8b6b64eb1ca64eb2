"""How far two independent annotations of the question set agree, and that the resolved
annotation is the one the question set uses.

Contract: ``load_annotations(path)`` reads eval/annotations.yaml: every record carries the
writer's annotation and one or two blind annotators' (``A``, ``B``), the same annotators on every
record, and a resolution wherever they differ (an unknown label, a missing writer or blind
annotation, or a record whose annotators differ from the first record's is refused);
``agreement_report(records, questions)`` returns Cohen's kappa on the three labels (answerable /
partial / unsupported) for each pair of annotators present (blind pairs first, then the writer
against each), the overlap of expected sections where both called a question answerable, and the
number of resolutions; it raises ``AnnotationsError`` when a resolved annotation differs from
eval/questions.yaml, so the two files cannot drift apart.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import combinations
from pathlib import Path

from rag_contract.config.questions import QuestionSet
from rag_contract.config.yamlfile import read_yaml

LABELS = ("answerable", "partial", "unsupported")
WRITER = "writer"
BLIND = ("A", "B")
DIGITS = 3


class AnnotationsError(ValueError):
    pass


@dataclass(frozen=True)
class Annotation:
    label: str
    expected: tuple[str, ...] = ()


@dataclass(frozen=True)
class Record:
    id: str
    by: dict[str, Annotation]  # the writer, then each blind annotator present (A, B)
    resolved: Annotation
    resolution: str | None


def parse_annotation(raw: object, where: str) -> Annotation:
    if not isinstance(raw, dict) or raw.get("label") not in LABELS:
        raise AnnotationsError(f"{where}: needs a label, one of {list(LABELS)}")
    expected = raw.get("expected", [])
    if not isinstance(expected, list) or (raw["label"] == "answerable") != bool(expected):
        raise AnnotationsError(f"{where}: expected sections go with the label answerable, and only with it")
    return Annotation(raw["label"], tuple(sorted(expected)))


def load_annotations(path: Path) -> tuple[Record, ...]:
    raw = read_yaml(path, AnnotationsError)
    if not isinstance(raw, dict) or not isinstance(raw.get("questions"), list):
        raise AnnotationsError(f"{Path(path).name}: must be a mapping with a 'questions' list")
    out: list[Record] = []
    for i, item in enumerate(raw["questions"]):
        where = f"{Path(path).name}: questions[{i}]"
        if not isinstance(item, dict) or not isinstance(item.get("id"), str):
            raise AnnotationsError(f"{where}: needs an id")
        where = f"{Path(path).name}: {item['id']}"
        present = (WRITER, *(who for who in BLIND if who in item))
        if len(present) == 1:
            raise AnnotationsError(f"{where}: needs the writer's annotation and at least one of {list(BLIND)}")
        if out and present != tuple(out[0].by):
            raise AnnotationsError(f"{where}: annotated by {list(present)}, but {out[0].id} by {list(out[0].by)}")
        by = {who: parse_annotation(item.get(who), f"{where}.{who}") for who in present}
        resolved = parse_annotation(item.get("resolved"), f"{where}.resolved")
        resolution = item.get("resolution")
        if len(set(by.values()) | {resolved}) > 1 and not resolution:
            raise AnnotationsError(f"{where}: the annotations differ, so the record needs a 'resolution'")
        out.append(Record(item["id"], by, resolved, resolution))
    return tuple(out)


def cohen_kappa(a: Sequence[str], b: Sequence[str]) -> float:
    """Agreement beyond chance between two labellings of the same items."""
    if len(a) != len(b) or not a:
        raise ValueError("kappa needs two labellings of the same, non-empty list of items")
    n = len(a)
    observed = sum(x == y for x, y in zip(a, b, strict=True)) / n
    ca, cb = Counter(a), Counter(b)
    chance = sum(ca[k] * cb[k] for k in set(ca) | set(cb)) / (n * n)
    return 1.0 if chance == 1.0 else (observed - chance) / (1 - chance)


def _jaccard(x: tuple[str, ...], y: tuple[str, ...]) -> float:
    return len(set(x) & set(y)) / len(set(x) | set(y))


def check_against(records: Sequence[Record], questions: QuestionSet) -> None:
    for r in records:
        q = questions.get(r.id)
        if q is None:
            raise AnnotationsError(f"annotations: {r.id} is not in the question set")
        label = "answerable" if q.answerable else q.expected_state
        if label != r.resolved.label or (q.answerable and set(q.expected) != set(r.resolved.expected)):
            raise AnnotationsError(
                f"annotations: {r.id} is resolved as {r.resolved.label} {list(r.resolved.expected)}, "
                f"but the question set has {label} {list(q.expected)}"
            )


def agreement_report(records: Sequence[Record], questions: QuestionSet) -> dict:
    check_against(records, questions)
    blind = [who for who in BLIND if records and who in records[0].by]
    pairs = {}
    for x, y in [*combinations(blind, 2), *((WRITER, who) for who in blind)]:
        la = [r.by[x].label for r in records]
        lb = [r.by[y].label for r in records]
        both = [r for r in records if r.by[x].label == r.by[y].label == "answerable"]
        pairs[f"{x}-{y}"] = {
            "kappa": round(cohen_kappa(la, lb), DIGITS),
            "label_agreement": round(sum(p == q for p, q in zip(la, lb, strict=True)) / len(records), DIGITS),
            "both_answerable": len(both),
            "sections_identical": sum(set(r.by[x].expected) == set(r.by[y].expected) for r in both),
            "sections_overlap": sum(bool(set(r.by[x].expected) & set(r.by[y].expected)) for r in both),
            "sections_mean_jaccard": round(
                sum(_jaccard(r.by[x].expected, r.by[y].expected) for r in both) / (len(both) or 1), DIGITS
            ),
        }
    return {
        "questions": len(records),
        "labels_resolved": dict(Counter(r.resolved.label for r in records)),
        "pairs": pairs,
        "label_disagreements_resolved": sum(len({a.label for a in r.by.values()}) > 1 for r in records),
        "section_disagreements_resolved": sum(
            len({a.label for a in r.by.values()}) == 1 and len(set(r.by.values())) > 1 for r in records
        ),
    }
