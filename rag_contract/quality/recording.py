"""Recording drafts: run a drafter over the question set and write one fixture per question.

Contract: ``draft_all`` drafts every question first and returns the drafts; ``write_drafts``
writes them only afterwards, so a run that fails or is refused midway (a model response
refused, a spend cap reached) writes nothing. Each fixture records its drafter, the prompt
fingerprint (question + passages offered, in order), the index version and the date given,
so re-recording with the extractive drafter on the same index and date reproduces the
committed files byte for byte.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from rag_contract.answering.drafting import Draft, Drafter, prompt_fingerprint
from rag_contract.answering.service import QueryVector, consult, passage_texts, request_query, stored_vector
from rag_contract.config.questions import Question
from rag_contract.config.thresholds import Thresholds
from rag_contract.index.store import Index
from rag_contract.text.english import Frequency, zipf


def draft_all(
    index: Index,
    thresholds: Thresholds,
    drafter: Drafter,
    questions: Sequence[Question],
    date: str,
    query_vector: QueryVector = stored_vector,
    frequency: Frequency = zipf,
) -> list[Draft]:
    """Each question drafted exactly as a served request drafts it: the same passages, the same
    question vector, term weights and analysis of what it asks (``Service.answer``)."""
    drafts = []
    lexical_only = thresholds.retrieval.serving_mode == "lexical"
    for q in questions:
        qvec = None if lexical_only else query_vector(index, q.question)
        texts = passage_texts(index, consult(index, thresholds, q.question, qvec))
        claims = drafter.draft(q.id, q.question, texts, request_query(index, q.question, qvec, frequency))
        drafts.append(
            Draft(q.id, q.question, drafter.name, prompt_fingerprint(q.question, texts), index.version, date, claims)
        )
    return drafts


def write_drafts(drafts: Sequence[Draft], directory: Path) -> list[Path]:
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    keep = {f"{d.question_id}.json" for d in drafts}
    for stale in directory.glob("*.json"):
        if stale.name not in keep:
            stale.unlink()
    paths = []
    for d in drafts:
        path = directory / f"{d.question_id}.json"
        path.write_text(d.to_json(), encoding="utf-8")
        paths.append(path)
    return paths
