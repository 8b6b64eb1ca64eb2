"""A held-out question set, measured as a reader meets it: no weight, threshold or rule was fitted
on it, so its figures say what an unseen question gets.

Contract: ``held_out_report(service, questions, top_k, sha256, sealed, development)`` answers every question
through ``service``, the service free text is answered by (the extractive drafter, each question
embedded as ``POST /ask`` embeds it), on a frozen clock so the report holds states, never timings.
It reports, beside each question's row:

- answerable questions: retrieval in the serving mode (recall@1, @5, @``top_k``, MRR over the
  passages consulted), ``answered_citing_expected`` (grounded or partial, with a kept claim
  citing an expected section: what a reader gets an answer from) and
  ``grounded_citing_expected`` (the calibration's measure);
- unanswerable questions: ``answered_grounded`` (the corpus cannot answer them, yet the service
  did, in full), overall and by ``kind``, and the share landing in their annotated state;
- ``sha256`` of the file and ``sealed``: whether it is the file whose hash was committed before
  the rules it measures were written (``eval/sealed/SHA256SUMS``); ``development``: whether the
  relevance fit learns from it (``eval/calibration.yaml``), which makes its figures in sample.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from pathlib import Path

from rag_contract.answering.service import Abandoned, Answer, AnswerState
from rag_contract.config.questions import Question
from rag_contract.quality.accuracy import accurate, figures, outcomes

DIGITS = 4


def sha256_of(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def committed_hashes(sums: Path) -> Mapping[str, str]:
    """``sha256sum`` lines (``<hex>  <file name>``) -> {file name: hex}; none when absent."""
    if not sums.is_file():
        return {}
    out = {}
    for line in sums.read_text(encoding="utf-8").splitlines():
        if line.strip():
            digest, _, name = line.partition("  ")
            out[name.strip()] = digest.strip()
    return out


def _rate(n: int, d: int) -> float:
    return round(n / d, DIGITS) if d else 0.0


def _row(q: Question, a: Answer | Abandoned) -> dict:
    base: dict = {"id": q.id, "answerable": q.answerable}
    if not q.answerable:
        base |= {"expected_state": q.expected_state, "kind": q.kind}
    if isinstance(a, Abandoned):
        return base | {"state": "abandoned"}
    rank = next((p.rank for p in a.passages if p.section_id in q.expected), None)
    row = base | {"state": a.state.value}
    if q.answerable:
        row |= {
            "rank": rank,
            "cites_expected": any(v.claim.section_id in q.expected for v in a.kept),
            "accurate": accurate((v.claim.text for v in a.kept), q.evidence),
        }
    if a.relevance is not None:
        row |= {
            "answer_type": a.relevance.asked.answer_type.value if a.relevance.asked else None,
            "unknown": list(a.relevance.unknown),
            "reason": a.relevance.reason(),
        }
    return row


def held_out_report(
    service, questions: Sequence[Question], top_k: int, sha256: str, sealed: bool, development: bool = False
) -> dict:
    rows = [_row(q, service.answer(q.question, q.id)) for q in questions]
    ans = [r for r in rows if r["answerable"]]
    ref = [r for r in rows if not r["answerable"]]
    ranks = [r.get("rank") for r in ans]
    answered = {AnswerState.GROUNDED.value, AnswerState.PARTIAL.value}
    kinds = sorted({r["kind"] for r in ref if r["kind"]})

    def grounded(rs: Sequence[dict]) -> list[str]:
        return [r["id"] for r in rs if r["state"] == AnswerState.GROUNDED.value]

    return {
        "sha256": sha256,
        "sealed": sealed,
        "development": development,
        "index_version": getattr(service.registry.acquire(), "version", None),
        "drafter": service.drafter.name,
        "answerable": {
            "questions": len(ans),
            "recall@1": _rate(sum(1 for k in ranks if k is not None and k <= 1), len(ans)),
            "recall@5": _rate(sum(1 for k in ranks if k is not None and k <= 5), len(ans)),
            f"recall@{top_k}": _rate(sum(1 for k in ranks if k is not None), len(ans)),
            "mrr": round(sum(1 / k for k in ranks if k is not None) / len(ans), DIGITS) if ans else 0.0,
            "answered_citing_expected": _rate(
                sum(r["state"] in answered and r.get("cites_expected", False) for r in ans), len(ans)
            ),
            "grounded_citing_expected": _rate(
                sum(r["state"] == AnswerState.GROUNDED.value and r.get("cites_expected", False) for r in ans), len(ans)
            ),
        },
        "accuracy": figures(outcomes(rows)),
        "unanswerable": {
            "questions": len(ref),
            "answered_grounded": grounded(ref),
            "answered_grounded_rate": _rate(len(grounded(ref)), len(ref)),
            "state_agreement": _rate(sum(r["state"] == r["expected_state"] for r in ref), len(ref)),
            "by_kind": {
                k: {
                    "questions": sum(r["kind"] == k for r in ref),
                    "answered_grounded": grounded([r for r in ref if r["kind"] == k]),
                }
                for k in kinds
            },
        },
        "questions": rows,
    }
