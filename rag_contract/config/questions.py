"""eval/questions.yaml: what "correct" means, loaded and validated.

Contract: ``load_questions(path, section_ids, section_text)`` returns the question set or
raises ``QuestionsError`` naming the question and the rule. Rules: ids unique; an answerable
question lists at least one expected section, every one of which exists in the parsed
corpus; its ``evidence`` literal (if given) occurs in one of its expected sections
(whitespace-collapsed); a refusal (``answerable: false``) carries ``expected_state`` of
``partial`` or ``unsupported`` and a ``why``, and no expected sections; ``style`` (if given) is
``engineer`` or ``plain``, ``type`` one of ``SECTION_TYPES``, ``rfc`` a document of the corpus
(the part of a section id before ``#``: ``rfc9110``, ``middleware.md``), ``kind`` (refusals
only) one of ``REFUSAL_KINDS``; no two
questions are near-duplicates (content-word Jaccard at or above ``NEAR_DUPLICATE_JACCARD``).
``fingerprint`` covers ids and question text only: it is what the committed question
vectors depend on, and it stays outside the index version.
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from rag_contract.config.yamlfile import read_yaml

REFUSAL_STATES = ("partial", "unsupported")
STYLES = ("engineer", "plain")
SECTION_TYPES = ("definition", "requirement", "algorithm", "abnf", "example", "security")
# Why a refusal is unanswerable (optional): a number the corpus never states, a neighbouring
# tool's or specification's feature, a later extension, a practice it does not settle, a premise
# it does not support.
REFUSAL_KINDS = ("open_number", "neighbouring_spec", "later_extension", "practice", "contradicted_premise")
# Two questions whose content words overlap this much ask the same thing in other words. The
# committed set's closest pair is far below it (see tests/test_config_loaders.py), so the bar
# refuses a re-worded copy without refusing two questions about one section.
NEAR_DUPLICATE_JACCARD = 0.6
_STOPWORDS = frozenset(
    [
        "a",
        "an",
        "the",
        "of",
        "to",
        "in",
        "on",
        "for",
        "and",
        "or",
        "is",
        "it",
        "be",
        "do",
        "does",
        "i",
        "my",
        "our",
        "we",
        "what",
        "which",
        "how",
        "if",
        "can",
        "should",
        "with",
        "as",
        "at",
        "by",
        "from",
        "that",
        "this",
        "are",
        "when",
        "not",
        "there",
        "any",
    ]
)


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
    style: str | None = None  # engineer | plain
    type: str | None = None  # what kind of section text answers it
    rfc: str | None = None  # the document a refusal is closest to (answerable: from its expected sections)
    kind: str | None = None  # why a refusal is unanswerable (REFUSAL_KINDS)

    @property
    def rfcs(self) -> tuple[str, ...]:
        """The RFCs this question is about: those of its expected sections, else its ``rfc``."""
        found = tuple(dict.fromkeys(s.split("#", 1)[0] for s in self.expected))
        return found or ((self.rfc,) if self.rfc else ())


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


_KEYS = {"id", "question", "expected", "evidence", "answerable", "expected_state", "why", "style", "type", "rfc"} | {
    "kind"
}


def _collapse(text: str) -> str:
    return re.sub(r"\s+", " ", text)


def content_words(text: str) -> frozenset[str]:
    return frozenset(re.findall(r"[a-z0-9]+", text.lower())) - _STOPWORDS


def similarity(a: str, b: str) -> float:
    """Jaccard overlap of the two questions' content words."""
    return jaccard(content_words(a), content_words(b))


def jaccard(x: frozenset[str], y: frozenset[str]) -> float:
    return len(x & y) / len(x | y) if x | y else 1.0


def _choice(item: dict, key: str, allowed: tuple[str, ...] | set[str], where: str) -> str | None:
    value = item.get(key)
    if value is not None and value not in allowed:
        raise QuestionsError(f"{where}: {key} {value!r} is not one of {sorted(allowed)}")
    return value


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
    rfcs = {sid.split("#", 1)[0] for sid in section_ids}
    seen_words: list[frozenset[str]] = []
    holders: dict[str, list[int]] = {}  # content word -> the earlier questions that use it
    wordless: list[int] = []  # earlier questions with no content word at all
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
            if item.get("kind") is not None:
                raise QuestionsError(f"{where}: 'kind' says why a refusal is unanswerable; this one is answerable")
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
        question = Question(
            id=qid,
            question=text.strip(),
            expected=tuple(expected),
            evidence=evidence,
            answerable=answerable,
            expected_state=state,
            why=item.get("why"),
            style=_choice(item, "style", STYLES, where),
            type=_choice(item, "type", SECTION_TYPES, where),
            rfc=_choice(item, "rfc", rfcs, where),
            kind=_choice(item, "kind", REFUSAL_KINDS, where),
        )
        words = content_words(question.question)  # once per question, not once per pair
        # Only a question sharing a word (or, with none, another without any) can overlap at all,
        # and the words shared are counted from the postings: the same first match, and the same
        # overlap, as intersecting every pair's sets.
        shared = Counter(n for w in words for n in holders.get(w, ()))
        for n in sorted(shared) if words else wordless:
            union = len(words) + len(seen_words[n]) - shared[n]
            score = shared[n] / union if union else 1.0
            if score >= NEAR_DUPLICATE_JACCARD:
                raise QuestionsError(
                    f"{where}: a near-duplicate of {out[n].id} (content-word overlap {score:.2f} >= "
                    f"{NEAR_DUPLICATE_JACCARD}); reword it or drop one"
                )
        for w in words:
            holders.setdefault(w, []).append(len(out))
        if not words:
            wordless.append(len(out))
        out.append(question)
        seen_words.append(words)
    return QuestionSet(tuple(out))


def load_questions(path: Path, section_ids: set[str], section_text: Callable[[str], str]) -> QuestionSet:
    return parse_questions(read_yaml(path, QuestionsError), section_ids, section_text, source=Path(path).name)
