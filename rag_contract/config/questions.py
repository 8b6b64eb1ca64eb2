"""eval/questions.yaml: what "correct" means, loaded and validated.

Contract: ``load_questions(path, section_ids, section_text)`` returns the question set or
raises ``QuestionsError`` naming the question and the rule. Rules: ids unique; an answerable
question lists at least one expected section, every one of which exists in the parsed
corpus; its ``evidence`` literal (if given) occurs in one of its expected sections
(whitespace-collapsed); a refusal (``answerable: false``) carries ``expected_state`` of
``partial`` or ``unsupported`` and a ``why``, and no expected sections.
``fingerprint`` covers ids and question text only: it is what the committed question
vectors depend on, and it stays outside the index version.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from rag_contract.config.yamlfile import read_yaml

REFUSAL_STATES = ("partial", "unsupported")


class QuestionsError(ValueError):
    pass


@dataclass(frozen=True)
class Question:
    id: str
    question: str
    expected: tuple[str, ...] = ()
    evidence: str | None = None
    answerable: bool = True
    expected_state: str | None = None
    why: str | None = None


@dataclass(frozen=True)
class QuestionSet:
    questions: tuple[Question, ...]

    @property
    def answerable(self) -> tuple[Question, ...]:
        return tuple(q for q in self.questions if q.answerable)

    @property
    def refusals(self) -> tuple[Question, ...]:
        return tuple(q for q in self.questions if not q.answerable)

    @property
    def fingerprint(self) -> str:
        return question_fingerprint(self.questions)

    def get(self, qid: str) -> Question | None:
        return next((q for q in self.questions if q.id == qid), None)


def question_fingerprint(questions: Iterable[Question]) -> str:
    h = hashlib.sha256()
    for q in sorted(questions, key=lambda q: q.id):
        h.update(f"{q.id}\0{q.question}\n".encode())
    return h.hexdigest()[:16]


_KEYS = {"id", "question", "expected", "evidence", "answerable", "expected_state", "why"}


def _collapse(text: str) -> str:
    return re.sub(r"\s+", " ", text)


def parse_questions(
    raw: object,
    section_ids: set[str],
    section_text: Callable[[str], str],
    source: str = "questions",
) -> QuestionSet:
    if not isinstance(raw, dict) or not isinstance(raw.get("questions"), list):
        raise QuestionsError(f"{source}: must be a mapping with a 'questions' list")
    seen: set[str] = set()
    out: list[Question] = []
    for i, item in enumerate(raw["questions"]):
        where = f"{source}: questions[{i}]"
        if not isinstance(item, dict):
            raise QuestionsError(f"{where}: must be a mapping")
        qid = item.get("id")
        if not isinstance(qid, str) or not qid:
            raise QuestionsError(f"{where}: 'id' must be a non-empty string")
        where = f"{source}: {qid}"
        unknown = set(item) - _KEYS
        if unknown:
            raise QuestionsError(f"{where}: unknown key(s) {sorted(unknown)}")
        if qid in seen:
            raise QuestionsError(f"{where}: duplicate id")
        seen.add(qid)
        text = item.get("question")
        if not isinstance(text, str) or not text.strip():
            raise QuestionsError(f"{where}: 'question' must be non-empty text")
        answerable = item.get("answerable", True)
        if not isinstance(answerable, bool):
            raise QuestionsError(f"{where}: 'answerable' must be true or false")
        expected = item.get("expected", [])
        if not isinstance(expected, list) or not all(isinstance(s, str) for s in expected):
            raise QuestionsError(f"{where}: 'expected' must be a list of section ids")
        state = item.get("expected_state")
        evidence = item.get("evidence")
        if answerable:
            if state is not None:
                raise QuestionsError(f"{where}: 'expected_state' is only for refusals (answerable: false)")
            if not expected:
                raise QuestionsError(f"{where}: an answerable question needs at least one expected section")
            for sid in expected:
                if sid not in section_ids:
                    raise QuestionsError(f"{where}: unknown section id {sid!r}")
            if evidence is not None:
                if not isinstance(evidence, str) or not evidence.strip():
                    raise QuestionsError(f"{where}: 'evidence' must be non-empty text")
                needle = _collapse(evidence)
                if not any(needle in _collapse(section_text(sid)) for sid in expected):
                    raise QuestionsError(f"{where}: evidence {evidence!r} not found in {expected}")
        else:
            if state is None:
                raise QuestionsError(f"{where}: a refusal needs 'expected_state' ({' | '.join(REFUSAL_STATES)})")
            if state not in REFUSAL_STATES:
                raise QuestionsError(
                    f"{where}: expected_state {state!r} is not a refusal state ({' | '.join(REFUSAL_STATES)}); "
                    "a question the corpus answers is answerable: true"
                )
            if expected:
                raise QuestionsError(f"{where}: a refusal has no expected sections")
            if not isinstance(item.get("why"), str) or not item["why"].strip():
                raise QuestionsError(f"{where}: a refusal needs 'why'")
        out.append(
            Question(
                id=qid,
                question=text.strip(),
                expected=tuple(expected),
                evidence=evidence,
                answerable=answerable,
                expected_state=state,
                why=item.get("why"),
            )
        )
    return QuestionSet(tuple(out))


def load_questions(path: Path, section_ids: set[str], section_text: Callable[[str], str]) -> QuestionSet:
    return parse_questions(read_yaml(path, QuestionsError), section_ids, section_text, source=Path(path).name)
