"""Retrieval quality, measured: recall@k, MRR, per-question rank and what outranked it.

Contract: ``retrieval_report(index, questions, ...)`` is a pure function of the index and the
question set (committed vectors, numpy arithmetic, rounded figures): the same inputs give the
same report, byte for byte once serialised, on any machine. It scores every answerable
question in all three modes side by side and names the committed serving mode. A question
is a hit at k when one of its expected sections is among the top k *sections*; its rank is
that of its first expected section among all sections (so a miss has a rank too), and
``outranked_by`` lists the sections above it, so a failure says what took its place.

Questions whose text has no committed vector are embedded with the local embedder on the fly
(``vectors_for``); the committed set never needs that.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from rag_contract.answering.drafting import DraftError
from rag_contract.answering.service import Abandoned
from rag_contract.config.questions import Question
from rag_contract.embedders import make_embedder
from rag_contract.index.store import Index, load_index
from rag_contract.quality.accuracy import accurate, figures, outcomes
from rag_contract.retrieval.ranking import MODES, rank_sections

KS = (1, 3, 5, 10)
DIGITS = 4


@dataclass(frozen=True)
class QuestionResult:
    id: str
    question: str
    expected: tuple[str, ...]
    rank: int | None
    outranked_by: tuple[tuple[str, str], ...]  # (section id, title) of every section above it


@dataclass(frozen=True)
class ModeReport:
    mode: str
    recall: dict[int, float]
    mrr: float
    misses: tuple[str, ...]
    questions: tuple[QuestionResult, ...]

    def result(self, qid: str) -> QuestionResult:
        return next(r for r in self.questions if r.id == qid)

    def figure(self, name: str) -> float:
        """'recall@5' or 'mrr'."""
        if name == "mrr":
            return self.mrr
        return self.recall[int(name.split("@")[1])]


@dataclass(frozen=True)
class RetrievalReport:
    index_version: str
    question_fingerprint: str
    serving_mode: str
    top_k: int
    modes: dict[str, ModeReport]
    groups: Mapping[str, Mapping[str, tuple[str, ...]]]  # by_rfc / by_style -> group -> question ids

    @property
    def serving(self) -> ModeReport:
        return self.modes[self.serving_mode]

    def as_dict(self) -> dict:
        return {
            "index_version": self.index_version,
            "question_fingerprint": self.question_fingerprint,
            "serving_mode": self.serving_mode,
            "top_k": self.top_k,
            "questions": len(self.serving.questions),
            "breakdown": {
                kind: {name: _subset(self.serving, ids, self.top_k) for name, ids in groups.items()}
                for kind, groups in self.groups.items()
            },
            "modes": {
                m: {
                    **{f"recall@{k}": r.recall[k] for k in KS},
                    "mrr": r.mrr,
                    "misses": list(r.misses),
                    "questions": [
                        {
                            "id": q.id,
                            "question": q.question,
                            "expected": list(q.expected),
                            "rank": q.rank,
                            "outranked_by": [{"section_id": s, "title": t} for s, t in q.outranked_by],
                        }
                        for q in r.questions
                    ],
                }
                for m, r in self.modes.items()
            },
        }

    def to_json(self) -> str:
        return json.dumps(self.as_dict(), indent=1, ensure_ascii=False) + "\n"

    def quiet(self) -> str:
        parts = []
        for m, r in self.modes.items():
            star = "*" if m == self.serving_mode else ""
            parts.append(
                f"{m}{star} r@1={r.recall[1]:.2f} r@5={r.recall[5]:.2f} r@10={r.recall[10]:.2f} "
                f"mrr={r.mrr:.3f} misses={len(r.misses)}"
            )
        return f"index {self.index_version} | " + " | ".join(parts)


def groups_of(questions: Sequence[Question]) -> dict[str, dict[str, tuple[str, ...]]]:
    """Question ids by the RFC a question is about (its first expected section's, else its tag)
    and by phrasing style: the splits every report breaks down by."""
    by_rfc: dict[str, list[str]] = {}
    by_style: dict[str, list[str]] = {}
    for q in questions:
        if q.rfcs:
            by_rfc.setdefault(q.rfcs[0], []).append(q.id)
        by_style.setdefault(q.style or "untagged", []).append(q.id)
    return {
        "by_rfc": {k: tuple(v) for k, v in sorted(by_rfc.items())},
        "by_style": {k: tuple(v) for k, v in sorted(by_style.items())},
    }


def _subset(mode: ModeReport, ids: Sequence[str], k: int) -> dict:
    wanted = set(ids)
    ranks = [r.rank for r in mode.questions if r.id in wanted]
    n = len(ranks) or 1
    return {
        "questions": len(ranks),
        **{f"recall@{kk}": round(sum(1 for r in ranks if r and r <= kk) / n, DIGITS) for kk in KS},
        "mrr": round(sum(1.0 / r for r in ranks if r and r <= k) / n, DIGITS),
    }


def vectors_for(
    index: Index, questions: Sequence[Question], embed: Callable[[list[str]], np.ndarray] | None
) -> dict[str, np.ndarray]:
    """Committed vector per question text; the missing ones embedded in one call."""
    out = {q.question: index.question_vectors[q.question] for q in questions if q.question in index.question_vectors}
    missing = sorted({q.question for q in questions} - set(out))
    if missing:
        if embed is None:
            raise LookupError(f"{len(missing)} question(s) have no committed vector and no embedder was given")
        for text, vec in zip(missing, embed(missing), strict=True):
            out[text] = vec
    return out


OUTRANKED_SHOWN = 10


def score_mode(
    index: Index,
    questions: Sequence[Question],
    vectors: dict[str, np.ndarray],
    mode: str,
    k: int,
    rrf_k: int,
    fusion: Mapping[str, float] | None = None,
) -> ModeReport:
    """Ranks are over every section, not just the window: a miss still has a rank (say 17),
    so its ceiling can hold it there and a slide from 17 to 90 is still caught. Recall@k
    and MRR count only ranks inside the window ``k``; ``outranked_by`` shows at most the
    top ten sections above the expected one."""
    results = []
    for q in questions:
        hits = rank_sections(index, q.question, vectors[q.question], mode, len(index.sections), rrf_k, fusion)
        ids = [h.section_id for h in hits]
        rank = next((i + 1 for i, sid in enumerate(ids) if sid in q.expected), None)
        above = hits[: min((rank - 1) if rank else len(hits), OUTRANKED_SHOWN)]
        results.append(
            QuestionResult(q.id, q.question, q.expected, rank, tuple((h.section_id, h.title) for h in above))
        )
    n = len(results) or 1
    recall = {kk: round(sum(1 for r in results if r.rank and r.rank <= kk) / n, DIGITS) for kk in KS}
    mrr = round(sum(1.0 / r.rank for r in results if r.rank and r.rank <= k) / n, DIGITS)
    misses = tuple(r.id for r in results if r.rank is None or r.rank > k)
    return ModeReport(mode, recall, mrr, misses, tuple(results))


def retrieval_report(
    index: Index,
    questions: Sequence[Question],
    serving_mode: str,
    k: int,
    rrf_k: int,
    question_fingerprint: str,
    embed: Callable[[list[str]], np.ndarray] | None = None,
    fusion: Mapping[str, float] | None = None,
) -> RetrievalReport:
    answerable = [q for q in questions if q.answerable]
    vectors = vectors_for(index, answerable, embed)
    modes = {m: score_mode(index, answerable, vectors, m, k, rrf_k, fusion) for m in MODES}
    return RetrievalReport(index.version, question_fingerprint, serving_mode, k, modes, groups_of(answerable))


def lazy_embed(index: Index, models: Path | None = None) -> Callable[[list[str]], np.ndarray]:
    """Embeds with the index's own embedder, made (and its model loaded) only on first call:
    a question set with every vector committed never loads a model. ``models``: the project's
    model directory (an adapted embedder's model lives there)."""
    embedder = None

    def embed(texts: list[str]) -> np.ndarray:
        nonlocal embedder
        embedder = embedder or make_embedder(index.embedder_name, models)
        return embedder.embed(texts)

    return embed


def evaluate_project(project, index: Index | None = None) -> RetrievalReport:
    """The committed eval: the project's question set against its committed index."""

    index = index or load_index(project.paths.index)
    r = project.thresholds.retrieval
    embed = lazy_embed(index, project.paths.models)

    return retrieval_report(
        index,
        project.questions.questions,
        r.serving_mode,
        r.top_k,
        r.rrf_k,
        project.questions.fingerprint,
        embed,
        r.fusion,
    )


# --- answers -------------------------------------------------------------------------------


def answers_report(service, questions: Sequence[Question], index_version: str) -> dict:
    """The failure behaviour, measured: what each question's answer came to under ``service``.

    Deterministic for a fixture or extractive drafter: it records states, claims and rules,
    never timings, and answers without a deadline (``Service.answer_unhurried``), so a loaded
    machine measures what a quiet one does. ``answered_unanswerable`` counts refusals that landed in ``grounded``:
    the corpus cannot answer them, yet every claim passed the check.
    """

    rows = []
    for q in questions:
        # Every row names what was expected, whatever became of the answer.
        base = {"id": q.id, "answerable": q.answerable} | ({} if q.answerable else {"expected_state": q.expected_state})
        try:
            a = service.answer_unhurried(q.question, q.id)
        except DraftError as exc:  # e.g. a question added without recording its draft
            rows.append(base | {"state": "missing_draft", "detail": str(exc)})
            continue
        if isinstance(a, Abandoned):
            rows.append(base | {"state": "abandoned", "detail": a.detail})
            continue
        row = base | {
            "state": a.state.value,
            "claims": len(a.kept) + len(a.withdrawn),
            "kept": len(a.kept),
            "withdrawn": [{"section_id": v.claim.section_id, "rule": v.rule, "detail": v.detail} for v in a.withdrawn],
        }
        if q.answerable:
            row["cites_expected"] = any(v.claim.section_id in q.expected for v in a.kept)
            row["accurate"] = accurate((v.claim.text for v in a.kept), q.evidence)
            row["cited"] = list(dict.fromkeys(v.claim.section_id for v in a.kept))
        rows.append(row)
    ans = [r for r in rows if r["answerable"]]
    ref = [r for r in rows if not r["answerable"]]

    def rate(n: int, d: int) -> float:
        return round(n / d, DIGITS) if d else 0.0

    return {
        "index_version": index_version,
        "drafter": service.drafter.name,
        "coverage_floor": service.thresholds.grounding.coverage_floor,
        "answerable": len(ans),
        "refusals": len(ref),
        "grounded_rate": rate(sum(r["state"] == "grounded" for r in ans), len(ans)),
        "expected_citation_rate": rate(sum(bool(r.get("cites_expected")) for r in ans), len(ans)),
        "grounded_citing_expected_rate": rate(
            sum(r["state"] == "grounded" and bool(r.get("cites_expected")) for r in ans), len(ans)
        ),
        "state_agreement": rate(sum(r["state"] == r["expected_state"] for r in ref), len(ref)),
        "accuracy": figures(outcomes(rows)),
        "answered_unanswerable": sum(r["state"] == "grounded" for r in ref),
        "answered_unanswerable_ids": [r["id"] for r in ref if r["state"] == "grounded"],
        "claims": sum(r.get("claims", 0) for r in rows),
        "claims_withdrawn": sum(len(r.get("withdrawn", [])) for r in rows),
        "states": {
            s: sum(r["state"] == s for r in rows)
            for s in ("grounded", "partial", "unsupported", "no_context", "abandoned", "missing_draft")
        },
        "breakdown": {
            kind: {name: _answers_subset(rows, ids) for name, ids in groups.items()}
            for kind, groups in groups_of(questions).items()
        },
        "questions": rows,
    }


def _answers_subset(rows: Sequence[dict], ids: Sequence[str]) -> dict:
    wanted = set(ids)
    ans = [r for r in rows if r["id"] in wanted and r["answerable"]]
    ref = [r for r in rows if r["id"] in wanted and not r["answerable"]]

    def rate(n: int, d: int) -> float:
        return round(n / d, DIGITS) if d else 0.0

    return {
        "answerable": len(ans),
        "refusals": len(ref),
        "grounded_citing_expected_rate": rate(
            sum(r["state"] == "grounded" and bool(r.get("cites_expected")) for r in ans), len(ans)
        ),
        "answered_unanswerable": sum(r["state"] == "grounded" for r in ref),
        "state_agreement": rate(sum(r["state"] == r.get("expected_state") for r in ref), len(ref)),
        "accuracy": figures(outcomes([r for r in rows if r["id"] in wanted])),
    }
