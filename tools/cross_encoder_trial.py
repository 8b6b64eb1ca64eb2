"""A cross-encoder answer-sentence scorer from MiniLM layers, measured out of fold beside the
selector it would re-rank (docs/adr/0011): the route the selector's confidence leaves open.

Three steps (the second needs the ``train`` extra; ``make cross-encoder-trial`` runs all three):

    python -m tools.cross_encoder_trial examples EXAMPLES.json
    .venv-train/bin/python -m tools.cross_encoder_training EXAMPLES.json SCORES.json [--layers 3 ...]
    python -m tools.cross_encoder_trial measure EXAMPLES.json SCORES.json [--out eval/results/cross_encoder_trial.json]

``examples``: every question of both projects (``cross_encoder_pairs.PROJECTS``): the committed
ones and every opened sealed set calibration fits the selector on (``eval/calibration.yaml``),
each with its calibration fold (``calibration.folds``) and its candidates as its fold's fitted
retrieval and selector see them (``fold_params`` of the committed ``eval/results/calibration.json``,
refused when it was made for another index or question set), labelled by ``quality.accuracy``.

The training step trains one cross-encoder per fold on both projects' other folds and scores the
fold's ``RERANK`` best-by-selector candidates, so every question is scored by a model that never
saw it; it exports one fold's model to int8 ONNX, checks it against torch and times it.

``measure`` compares, on each project's committed questions, out of fold:

- **best k**: the share of answerable questions with evidence whose best 1, 2, 3 quotable
  candidates carry it, by the selector and by the cross-encoder re-ranking the selector's best
  ``RERANK``;
- **the abstention curve** when the answer quotes the best three claims (as the extractive
  drafter does, a claim inside another dropped) and its confidence is the selector's best logit,
  the cross-encoder's best logit, or a class-balanced logistic regression of "the answer is
  accurate" on the cross-encoder's best logit, its margin over the second, and the selector's
  best logit and features, fitted on the other folds' questions of the project;
- **the operating point**: each fold answers at the cut that shows claims for at most
  ``MAX_FALSE`` of the other folds' unanswerable questions (the most answering such cut), so
  the cut is out of fold too; and the most accurate point at coverage >= ``COVERAGE_FLOOR``.

The results file records each committed question's outcome per method, from which every figure
is recomputed (``summarise``); tests hold the two together.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import numpy as np

from rag_contract.answering.asked import analyse
from rag_contract.answering.drafting import claim_text
from rag_contract.answering.evidence import Query
from rag_contract.answering.selection import candidates, ranked
from rag_contract.answering.service import offered
from rag_contract.config.calibration import load_calibration
from rag_contract.index.store import load_index
from rag_contract.project import load_project, read_development
from rag_contract.quality.accuracy import accurate
from rag_contract.quality.calibration import SECTIONS, fit_logistic, folds, with_params
from rag_contract.quality.evaluation import lazy_embed, vectors_for
from rag_contract.text.english import zipf
from tools.cross_encoder_pairs import PROJECTS, RERANK, key, quotable

CLAIMS = 3  # claims an answer quotes (drafting.extractive_max_claims)
MAX_FALSE = 0.10  # eval/calibration.yaml's max_false_answer_rate
COVERAGE_FLOOR, ACCURACY_FLOOR = 0.65, 0.80  # the floor
METHODS = ("selector", "cross_encoder", "combined")
DIGITS = 4


# --- examples: every question's candidates under its own fold's fit (main environment) --------


def project_rows(name: str, root: Path) -> list[dict]:
    project = load_project(root)
    index = load_index(project.paths.index)
    report = json.loads(project.paths.result("calibration.json").read_text())
    if report["index_version"] != index.version or report["question_fingerprint"] != project.questions.fingerprint:
        raise SystemExit(f"{name}: calibration.json was made for another index or question set; run calibrate first")
    development = read_development(project, load_calibration(project.paths.calibration, root).development)
    questions = list(project.questions.questions)
    extra = [q for _, qs in development for q in qs]
    sets = {q.id: "committed" for q in questions} | {q.id: path.stem for path, qs in development for q in qs}
    vectors = vectors_for(index, [*questions, *extra], lazy_embed(index, project.paths.models))

    def query_vector(_index: object, text: str) -> np.ndarray:
        return vectors[text]

    assignment = folds(questions) | folds(extra)
    rows = []
    for q in [*questions, *extra]:
        params = report["fold_params"][assignment[q.id]]
        selector = params["drafting.selector"]
        thresholds = with_params(
            project.thresholds,
            params["retrieval.fusion"],
            params["drafting.evidence_lexical_weight"],
            max(SECTIONS),
            selector,
        )
        texts = offered(index, thresholds, q.question, query_vector)[: max(SECTIONS)]
        by_id = {p.section_id: p for p in texts}
        asked = analyse(q.question, index.answering, zipf)
        query = Query(query_vector(index, q.question), index.weights, asked)
        cands = []
        for c, logit in ranked(candidates(q.question, query, texts, asked), selector):
            claim = claim_text(c.position, by_id[c.section_id])
            cands.append(
                {
                    "claim": claim,
                    "section": c.section_id,
                    "rank": c.rank,
                    "position": c.position,
                    "selector": logit,
                    "features": list(c.features),
                    "label": bool(q.answerable and accurate([claim], q.evidence)),
                }
            )
        rows.append(
            {
                "project": name,
                "set": sets[q.id],
                "id": q.id,
                "question": q.question,
                "answerable": q.answerable,
                "evidence": q.evidence is not None,
                "fold": assignment[q.id],
                "sections": params["drafting.extractive_sections"],
                "candidates": cands,
            }
        )
    return rows


# --- measuring (numpy only) ---------------------------------------------------------------------


def reranked(row: Mapping, scores: Sequence[float] | None) -> list[dict]:
    """The row's quotable candidates, best first: by the cross-encoder's ``scores`` over the
    selector's best ``RERANK`` (ties by selector order), the rest after in selector order; by
    the selector alone when ``scores`` is None."""
    q = quotable(row)
    if scores is None:
        return q
    top = q[:RERANK]
    if len(scores) != len(top):
        raise ValueError(f"{key(row)}: {len(scores)} scores for {len(top)} candidates")
    order = sorted(range(len(top)), key=lambda i: (-scores[i], i))
    return [top[i] for i in order] + q[RERANK:]


def answer(order: Sequence[Mapping], n: int = CLAIMS) -> list[Mapping]:
    """The first ``n`` claims, a claim inside a kept one (or holding it) dropped, as the drafter does."""
    kept: list[Mapping] = []
    for c in order:
        if all(c["claim"] not in k["claim"] and k["claim"] not in c["claim"] for k in kept):
            kept.append(c)
        if len(kept) == n:
            break
    return kept


def best_k(order: Sequence[Mapping], k: int) -> bool:
    return any(c["label"] for c in answer(order, k))


def outcome(row: Mapping, scores: Sequence[float] | None) -> dict:
    """One committed question under one ordering: whether its best 1/2/3 claims carry the
    evidence, and the confidence inputs (best cross-encoder logit and its margin, best selector
    logit and the features of the first claim)."""
    order = reranked(row, scores)
    top = sorted(scores or [], reverse=True)
    first = order[0] if order else None
    return {
        "hits": [best_k(order, k) for k in (1, 2, 3)],
        "selector": quotable(row)[0]["selector"] if order else -99.0,
        "ce": top[0] if top else -99.0,
        "ce_margin": (top[0] - top[1]) if len(top) > 1 else 0.0,
        "features": first["features"] if first else [0.0] * 7,
    }


def items(rows: Sequence[Mapping], scores: Mapping[str, Sequence[float]], scored: set[int]) -> list[dict]:
    """Each committed question's outcome by the selector and by the cross-encoder, for the
    questions of the ``scored`` folds (a run stopped early measures the folds it finished)."""
    out = []
    for r in rows:
        if r["set"] != "committed" or r["fold"] not in scored:
            continue
        sel = outcome(r, None)
        ce = outcome(r, scores.get(key(r), []))
        out.append(
            {
                "key": key(r),
                "project": r["project"],
                "fold": r["fold"],
                "answerable": r["answerable"],
                "evidence": r["evidence"],
                "selector_hits": sel["hits"],
                "ce_hits": ce["hits"],
                "selector_logit": round(sel["selector"], 6),
                "ce_logit": round(ce["ce"], 6),
                "ce_margin": round(ce["ce_margin"], 6),
                "features": [round(v, 6) for v in ce["features"]],
            }
        )
    return out


def _accurate(i: Mapping, method: str) -> bool:
    return bool(i["answerable"] and (i["selector_hits"] if method == "selector" else i["ce_hits"])[2])


def _combined_x(its: Sequence[Mapping]) -> np.ndarray:
    return np.array([[i["ce_logit"], i["ce_margin"], i["selector_logit"], *i["features"]] for i in its], dtype=float)


def confidences(its: Sequence[Mapping], method: str) -> list[float]:
    """Each item's answer confidence under ``method``; ``combined`` is fitted per fold on the
    project's other folds (``fit_logistic``, class-balanced, "the answer is accurate")."""
    if method == "selector":
        return [i["selector_logit"] for i in its]
    if method == "cross_encoder":
        return [i["ce_logit"] for i in its]
    out = [0.0] * len(its)
    for f in sorted({i["fold"] for i in its}):
        train = [i for i in its if i["fold"] != f]
        if not train:  # one fold scored: nothing to fit on without it
            continue
        w, b = fit_logistic(_combined_x(train), np.array([float(_accurate(i, method)) for i in train]))
        held = [n for n, i in enumerate(its) if i["fold"] == f]
        for n, v in zip(held, _combined_x([its[n] for n in held]) @ w + b, strict=True):
            out[n] = round(float(v), 6)
    return out


def point(its: Sequence[Mapping], conf: Sequence[float], method: str, answered: Callable[[int], bool]) -> dict:
    ans = [n for n, i in enumerate(its) if i["answerable"]]
    ref = [n for n, i in enumerate(its) if not i["answerable"]]
    shown = [n for n in ans if answered(n)]
    right = sum(_accurate(its[n], method) for n in shown)
    false = sum(answered(n) for n in ref)
    return {
        "coverage": round(len(shown) / len(ans), DIGITS) if ans else None,
        "accuracy_when_answered": round(right / len(shown), DIGITS) if shown else None,
        "false_answer_rate": round(false / len(ref), DIGITS) if ref else None,
        "answered": len(shown),
        "accurate": right,
        "false_answers": false,
    }


def cut_within(its: Sequence[Mapping], conf: Sequence[float], max_false: float) -> float:
    """The lowest cut (the most answering) at which at most ``max_false`` of ``its`` unanswerable
    questions are shown with claims; above every confidence nothing is shown."""
    refused = [c for c, i in zip(conf, its, strict=True) if not i["answerable"]]
    for t in sorted(set(conf)):
        if not refused or sum(c >= t for c in refused) / len(refused) <= max_false:
            return t
    return max(conf, default=0.0) + 1.0


def curve(its: Sequence[Mapping], conf: Sequence[float], method: str) -> list[dict]:
    """Coverage, accuracy when answered and false answers at every cut (answered: confidence >= cut)."""
    return [{"cut": t} | point(its, conf, method, lambda n, t=t: conf[n] >= t) for t in sorted(set(conf), reverse=True)]


def method_figures(its: Sequence[Mapping], method: str) -> dict:
    conf = confidences(its, method)
    cuts = {
        f: cut_within(
            [i for i in its if i["fold"] != f], [c for c, i in zip(conf, its, strict=True) if i["fold"] != f], MAX_FALSE
        )
        for f in sorted({i["fold"] for i in its})
    }
    points = curve(its, conf, method)
    floor = [p for p in points if p["coverage"] is not None and p["coverage"] >= COVERAGE_FLOOR]
    best = max(floor, key=lambda p: (p["accuracy_when_answered"] or 0.0, -p["coverage"])) if floor else None
    thinned = [points[n] for n in np.unique(np.linspace(0, len(points) - 1, 21).round().astype(int))]
    return {
        "all_answered": point(its, conf, method, lambda n: True),
        "operating_point": point(its, conf, method, lambda n: conf[n] >= cuts[its[n]["fold"]]),
        "best_at_coverage_floor": best,
        "reaches_floor": any(
            (p["accuracy_when_answered"] or 0.0) >= ACCURACY_FLOOR and (p["false_answer_rate"] or 0.0) <= MAX_FALSE
            for p in floor
        ),
        "curve": [{k: p[k] for k in ("coverage", "accuracy_when_answered", "false_answer_rate")} for p in thinned],
    }


def summarise(its: Sequence[Mapping]) -> dict:
    """Every figure of one project, from its committed questions' items."""
    with_evidence = [i for i in its if i["answerable"] and i["evidence"]]

    def share(field: str, k: int) -> float:
        return round(sum(i[field][k] for i in with_evidence) / len(with_evidence), DIGITS) if with_evidence else 0.0

    return {
        "questions": len(its),
        "answerable_with_evidence": len(with_evidence),
        "unanswerable": sum(not i["answerable"] for i in its),
        "best_k_carries_evidence": {
            "selector": [share("selector_hits", k) for k in range(3)],
            "cross_encoder": [share("ce_hits", k) for k in range(3)],
        },
        "methods": {m: method_figures(its, m) for m in METHODS},
    }


def ceiling(rows: Sequence[Mapping]) -> dict:
    """Per project: the share of committed answerable questions with evidence for which some
    quotable candidate, and some of the selector's best ``RERANK``, carries it."""
    out = {}
    for name in PROJECTS:
        rs = [r for r in rows if r["project"] == name and r["set"] == "committed" and r["answerable"] and r["evidence"]]
        n = len(rs) or 1
        out[name] = {
            "any_quotable": round(sum(any(c["label"] for c in quotable(r)) for r in rs) / n, DIGITS),
            "in_reranked": round(sum(any(c["label"] for c in quotable(r)[:RERANK]) for r in rs) / n, DIGITS),
        }
    return out


def measure(rows: Sequence[Mapping], scores: Mapping) -> dict:
    scored = {int(f) for f in scores["training"]}
    its = items(rows, scores["oof"], scored)
    served = {
        name: json.loads((root / "eval" / "results" / "calibration.json").read_text())["out_of_fold"]["answers"][
            "accuracy"
        ]
        for name, root in PROJECTS.items()
    }
    return {
        "settings": scores["settings"],
        "export": scores.get("export"),
        "latency": scores.get("latency"),
        "training": scores.get("training"),
        "folds_scored": sorted(scored),
        "served_out_of_fold": served,
        "ceiling": ceiling(rows),
        "projects": {name: summarise([i for i in its if i["project"] == name]) for name in PROJECTS},
        "items": its,
    }


def _f(v: float | None) -> str:
    return "n/a" if v is None else f"{v:.2f}"


def render(result: Mapping) -> str:
    lines = [f"cross-encoder: {result['settings']}"]
    for name, p in result["projects"].items():
        s, c = p["best_k_carries_evidence"]["selector"], p["best_k_carries_evidence"]["cross_encoder"]
        lines.append(
            f"{name}: best 1/2/3 carry the evidence, selector {s}, cross-encoder {c} "
            f"(ceiling {result['ceiling'][name]})"
        )
        for m, fig in p["methods"].items():
            a, o, b = fig["all_answered"], fig["operating_point"], fig["best_at_coverage_floor"] or {}
            lines.append(
                f"  {m:13} all answered acc {_f(a['accuracy_when_answered'])} | operating point cov "
                f"{_f(o['coverage'])} acc {_f(o['accuracy_when_answered'])} false {_f(o['false_answer_rate'])} | "
                f"best at cov>={COVERAGE_FLOOR}: acc {_f(b.get('accuracy_when_answered'))} false "
                f"{_f(b.get('false_answer_rate'))} | reaches floor {fig['reaches_floor']}"
            )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tools.cross_encoder_trial", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="step", required=True)
    s = sub.add_parser("examples")
    s.add_argument("out")
    s = sub.add_parser("measure")
    s.add_argument("examples")
    s.add_argument("scores")
    s.add_argument("--out")
    args = ap.parse_args(argv)
    if args.step == "examples":
        rows = [r for name, root in PROJECTS.items() for r in project_rows(name, root)]
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(rows))
        print(f"{len(rows)} questions, {sum(len(r['candidates']) for r in rows)} candidates -> {args.out}")
    else:
        result = measure(json.loads(Path(args.examples).read_text()), json.loads(Path(args.scores).read_text()))
        print(render(result))
        if args.out:
            Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
