"""A draft grounding partly withdraws, for the tests of partial answers on the wire and on pages,
and the recorded drafts those tests serve with it."""

from __future__ import annotations

from pathlib import Path

from rag_contract.answering.drafting import Draft, ExtractiveDrafter, prompt_fingerprint, sentences
from rag_contract.answering.grounding import Claim, check_claim
from rag_contract.answering.service import consult, stored_vector
from rag_contract.quality.accuracy import accurate
from rag_contract.quality.recording import draft_all, write_drafts


def partial_qid(project, index) -> str:
    """An answerable question whose top passage holds its evidence."""

    def holds(q) -> bool:
        passages = consult(index, project.thresholds, q.question, stored_vector(index, q.question))
        return any(accurate([s], q.evidence) for s in sentences(index.section(passages[0].section_id).text))

    return next(q.id for q in project.questions.answerable if holds(q))


def partial_draft(index, thresholds, question) -> Draft:
    """One claim grounding keeps (a sentence of the top passage, verbatim: the one that carries the
    question's evidence, so the answer is confident enough to show) and three it withdraws, one
    per rule: a literal the passage lacks, an unrelated sentence (coverage), and a citation of a
    section that was not retrieved."""
    passages = consult(index, thresholds, question.question, stored_vector(index, question.question))
    top = passages[0].section_id
    terms = {top: index.passages[top]}
    kept = next(
        Claim(s, top)
        for s in sorted(sentences(index.section(top).text), key=lambda s: not accurate([s], question.evidence))
        if check_claim(Claim(s, top), terms, thresholds.grounding.coverage_floor).kept
    )
    claims = (
        kept,
        Claim("The origin answers with status 299 and the header X-Unheard-Of-Field.", top),
        Claim("Purple elephants dance quietly beneath moonlit orchards.", top),
        Claim(kept.text, "rfc9110#99.99"),
    )
    return Draft(
        question.id,
        question.question,
        "hand",
        prompt_fingerprint(question.question, []),
        index.version,
        "2026-01-01",
        claims,
    )


def drafts_with_a_partial(directory: Path, project, index, question_id: str) -> Path:
    """``directory`` holding the extractive draft of every question, ``question_id``'s replaced by
    its ``partial_draft``: the recorded drafts the app and page tests serve."""
    t = project.thresholds
    recorded = draft_all(index, t, ExtractiveDrafter.committed(t.drafting), project.questions.questions, "2026-01-01")
    write_drafts(recorded, directory)
    q = project.questions.get(question_id)
    (directory / f"{q.id}.json").write_text(partial_draft(index, t, q).to_json())
    return directory
