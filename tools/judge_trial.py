"""A learned judge of "do these claims answer this question", trained here and measured out of fold
(ADR 0008): the route the answerability rules leave open.

The judge is a cross-encoder: the first ``--layers`` layers of all-MiniLM-L6-v2 (the shipped fp32
weights, ``adaptation.training``) read ``[CLS] question [SEP] text [SEP]``; a linear head on the
mean-pooled tokens gives a logit. It is trained on both committed projects' questions with the
calibration folds (``calibration.folds``), one model per fold, so every question is scored by a
model that never saw it; a model on every question scores the first sealed set.

Training pairs, per question of the training folds:
- answerable: its evidence sentences (the expected sections' sentences that hold the evidence)
  and the served answer's claims citing an expected section, label 1; the best sentences of the
  retrieved sections it does not expect (they touch the question without answering it), label 0;
- unanswerable: the served answer's claims and the retrieved sections' best sentences, label 0.

What is measured: a veto that turns a grounded answer into a partial one when the judge scores
its kept claims below a cut. The cut of each fold is the one that nets the most correct
grounded answers minus the calibration's false-answer cost x unanswerable grounded answers on
the other folds' out-of-fold scores (nested), so the figures are out of fold twice over.

Contract, three steps (the second needs the ``train`` extra, ``make .venv-train/.installed``):

    python -m tools.judge_trial rows ROWS.json              # every question answered as served
    .venv-train/bin/python -m tools.judge_trial train ROWS.json SCORES.json [--layers 3 ...]
    python -m tools.judge_trial measure ROWS.json SCORES.json

``measure`` prints the AUROC of the judge between correct and unanswerable grounded answers and
the veto's effect on each project's out-of-fold figures and on the first sealed set. Training is
seeded and runs on one fixed thread count; it writes nothing into the project.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import numpy as np

from rag_contract.cli import _services
from rag_contract.project import load_project, read_questions
from rag_contract.quality.calibration import folds
from rag_contract.quality.gate import frozen_clock
from tools.judge_pairs import PROJECTS

DIGITS = 4
SENTENCES = 3  # best sentences read from each retrieved section
SEALED = Path("eval/sealed/sealed.yaml")


# --- rows: each question answered as served (main environment) -----------------------------


def _collapse(s: str) -> str:
    return re.sub(r"\s+", " ", s).strip()


def evidence_sentences(texts: Sequence[str], evidence: str) -> list[str]:
    """The sentences that hold ``evidence`` or lie inside it (white space collapsed)."""
    ev = _collapse(evidence)
    return [t for t in texts if (c := _collapse(t)) and (c in ev or ev in c)]


def question_rows(root: Path, questions_file: Path | None, calibration: Path | None) -> list[dict]:
    project = load_project(root)
    qs = read_questions(questions_file, project.corpus).questions if questions_file else project.questions.questions
    _, service = _services(project)
    service.clock = frozen_clock  # states, never timings: no answer is abandoned on a busy machine
    index = service.registry.acquire()
    assignment = folds(qs)
    oof = {r["id"]: r for r in json.loads(calibration.read_text())["questions"]} if calibration else {}
    rows = []
    for q in qs:
        qvec = service.query_vector(index, q.question)
        d = service.deliberate(q.question, q.id)
        answer = service.answer(q.question, q.id)
        kept = [v for v in d.verdicts if v.kept] if d else []
        candidates = []
        for p in d.passages if d else ():
            span = index.sentences_of(p.section_id)
            if p.section_id in index.never_answers or not len(span):
                continue
            sims = index.sentence_vectors[span.start : span.stop] @ qvec
            for o in np.argsort(-sims, kind="stable")[:SENTENCES]:
                candidates.append({"section": p.section_id, "text": index.sentences[span.start + int(o)].text})
        positives: list[str] = []
        if q.answerable and q.evidence:
            for sid in q.expected:
                texts = [index.sentences[i].text for i in index.sentences_of(sid)]
                positives += evidence_sentences(texts, q.evidence)
            positives = positives or [q.evidence]
        row = oof.get(q.id, {})
        rows.append(
            {
                "id": q.id,
                "question": q.question,
                "answerable": q.answerable,
                "expected": list(q.expected),
                "kind": q.kind,
                "fold": assignment[q.id],
                "claims": [v.claim.text for v in kept],
                "claim_sections": [v.claim.section_id for v in kept],
                "served_state": answer.state.value,
                "served_cites": q.answerable and any(v.claim.section_id in q.expected for v in answer.kept),
                "oof_state": row.get("oof_state"),
                "oof_cites": bool(row.get("oof_cites_expected")),
                "candidates": candidates,
                "positives": positives,
            }
        )
    return rows


def all_rows() -> dict[str, list[dict]]:
    out = {
        name: question_rows(root, None, root / "eval" / "results" / "calibration.json")
        for name, root in PROJECTS.items()
    }
    out["sealed"] = question_rows(PROJECTS["rfc"], SEALED, None)
    return out


# --- measuring ---------------------------------------------------------------------------------


def auroc(positive: Sequence[float], negative: Sequence[float]) -> float:
    """P(a positive scores above a negative), ties counted half; nan when a side is empty."""
    p, n = np.asarray(positive, float), np.asarray(negative, float)
    if not len(p) or not len(n):
        return float("nan")
    wins = (p[:, None] > n[None, :]).sum() + 0.5 * (p[:, None] == n[None, :]).sum()
    return float(wins / (len(p) * len(n)))


def net(items: Sequence[Mapping], cut: float, cost: float) -> float:
    """Correct grounded answers minus ``cost`` x unanswerable grounded ones left standing at ``cut``."""
    kept = [i for i in items if i["state"] == "grounded" and i["score"] >= cut]
    return sum(i["answerable"] and i["cites"] for i in kept) - cost * sum(not i["answerable"] for i in kept)


def best_cut(items: Sequence[Mapping], cost: float) -> float:
    """The cut netting the most (``net``); ties go to the lowest cut, vetoing least."""
    cuts = [-np.inf, *sorted({i["score"] for i in items if i["state"] == "grounded"})]
    return max(cuts, key=lambda c: (net(items, c, cost), -c))


def veto(items: Sequence[Mapping], cut_of: Callable[[Mapping], float]) -> dict:
    answerable = [i for i in items if i["answerable"]]
    refusals = [i for i in items if not i["answerable"]]

    def grounded_citing(keep: Callable[[Mapping], bool]) -> float:
        right = sum(i["state"] == "grounded" and i["cites"] and keep(i) for i in answerable)
        return round(right / len(answerable), DIGITS) if answerable else 0.0

    def unanswerable(keep: Callable[[Mapping], bool]) -> int:
        return sum(i["state"] == "grounded" and keep(i) for i in refusals)

    def stands(i: Mapping) -> bool:
        return i["score"] >= cut_of(i)

    return {
        "answerable": len(answerable),
        "unanswerable": len(refusals),
        "grounded_citing": [grounded_citing(lambda i: True), grounded_citing(stands)],
        "unanswerable_grounded": [unanswerable(lambda i: True), unanswerable(stands)],
    }


def separation(items: Sequence[Mapping]) -> float:
    """AUROC of the judge among grounded answers: correct ones (answerable, citing an expected
    section) against invented ones (unanswerable)."""
    grounded = [i for i in items if i["state"] == "grounded"]
    return round(
        auroc(
            [i["score"] for i in grounded if i["answerable"] and i["cites"]],
            [i["score"] for i in grounded if not i["answerable"]],
        ),
        DIGITS,
    )


def measure(rows: Mapping[str, list[dict]], scores: Mapping, cost: float) -> dict:
    items = [
        {
            "project": name,
            "fold": r["fold"],
            "answerable": r["answerable"],
            "state": r["oof_state"],
            "cites": r["oof_cites"],
            "score": scores["oof"][f"{name}:{r['id']}"],
        }
        for name in PROJECTS
        for r in rows[name]
    ]
    cuts = {f: best_cut([i for i in items if i["fold"] != f], cost) for f in {i["fold"] for i in items}}
    cut = best_cut(items, cost)
    sealed = [
        {
            "answerable": r["answerable"],
            "state": r["served_state"],
            "cites": r["served_cites"],
            "score": scores["sealed"][r["id"]],
        }
        for r in rows["sealed"]
    ]
    return {
        "auroc_out_of_fold": separation(items),
        "out_of_fold": {
            name: veto([i for i in items if i["project"] == name], lambda i: cuts[i["fold"]]) for name in PROJECTS
        },
        "auroc_sealed": separation(sealed),
        "sealed": veto(sealed, lambda i: cut),
    }


def render(result: Mapping, settings: Mapping) -> str:
    lines = [
        f"judge: {settings}",
        f"AUROC, correct against unanswerable grounded answers: out of fold {result['auroc_out_of_fold']}, "
        f"first sealed set {result['auroc_sealed']}",
        "| set | grounded citing, rules -> with the judge | unanswerable grounded, rules -> with the judge |",
        "|---|---|---|",
    ]
    for name, v in [*result["out_of_fold"].items(), ("first sealed set", result["sealed"])]:
        g, u = v["grounded_citing"], v["unanswerable_grounded"]
        lines.append(f"| {name} | {g[0]} -> {g[1]} | {u[0]} -> {u[1]} of {v['unanswerable']} |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tools.judge_trial", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="step", required=True)
    s = sub.add_parser("rows")
    s.add_argument("out")
    s = sub.add_parser("train")
    s.add_argument("rows")
    s.add_argument("out")
    s.add_argument("--layers", type=int, default=3)
    s.add_argument("--epochs", type=int, default=2)
    s.add_argument("--lr", type=float, default=4e-5)
    s = sub.add_parser("measure")
    s.add_argument("rows")
    s.add_argument("scores")
    s.add_argument("--false-answer-cost", type=float, default=8.0)
    args = ap.parse_args(argv)
    if args.step == "rows":
        Path(args.out).write_text(json.dumps(all_rows()))
    elif args.step == "train":
        from tools.judge_training import train_folds  # noqa: PLC0415 - torch, only in the train environment

        rows = json.loads(Path(args.rows).read_text())
        Path(args.out).write_text(json.dumps(train_folds(rows, args.layers, args.epochs, args.lr, print)))
    else:
        scores = json.loads(Path(args.scores).read_text())
        result = measure(json.loads(Path(args.rows).read_text()), scores, args.false_answer_cost)
        print(render(result, scores["settings"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
