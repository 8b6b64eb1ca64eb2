"""Out-of-fold retrieval of the per-fold adapted models, for the folds a fold-legs file holds.

``rag-contract calibrate`` reports the out-of-fold figures once every fold has its model; this
reports any subset (an interrupted ``rag-contract adapt --folds`` keeps the folds it finished)
beside a baseline calibration report's out-of-fold ranks of the same questions, so a partial
run is still a like-for-like measurement:

    python -m tools.adapted_oof [--legs models/minilm-l6-adapted-folds.npz] [--baseline calibration.json]
        [--base-index DIR --mix 0.25,0.5,0.75]

The index is only read for its sections, chunks and lexical statistics; the vector legs come
from the file. ``--mix`` also ranks with each fold's legs mixed with the legs of another index's
vectors (the shipped model's, in ``--base-index``): w x adapted + (1 - w) x base, per section.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from rag_contract.index.store import Index, load_index
from rag_contract.project import load_project
from rag_contract.quality.adapted_folds import FOLDS_FILE, FoldLegs, fold_meta, load_fold_legs
from rag_contract.quality.calibration import _retrieval, adapted_oof_ranks, folds
from rag_contract.retrieval.ranking import vector_legs


def mixed(legs: FoldLegs, base: Index, weight: float) -> FoldLegs:
    """``legs`` with each question's legs mixed with its legs under ``base``'s vectors."""
    out = {}
    for fold, by_text in legs.legs.items():
        out[fold] = {}
        for text, (dense, sentence) in by_text.items():
            b_dense, b_sentence = vector_legs(base, base.question_vectors[text])
            out[fold][text] = (weight * dense + (1 - weight) * b_dense, weight * sentence + (1 - weight) * b_sentence)
    return FoldLegs(legs.meta, out)


def report(legs_path: Path, baseline: Path | None, base_index: Path | None = None, mix: tuple[float, ...] = ()) -> dict:
    project = load_project()
    questions = project.questions.questions
    assignment = folds(questions)
    legs = load_fold_legs(legs_path, fold_meta(project, assignment))
    index = load_index(project.paths.index)
    ranks = adapted_oof_ranks(index, questions, assignment, legs)
    held = [q for q in questions if q.id in ranks]
    k = project.thresholds.retrieval.top_k
    out = {"folds": sorted(legs.legs), "questions": len(held), "adapted": _retrieval(held, ranks, k)}
    if base_index and mix:
        base = load_index(base_index)
        for w in mix:
            out[f"mixed {w}"] = _retrieval(
                held, adapted_oof_ranks(index, questions, assignment, mixed(legs, base, w)), k
            )
    if baseline:
        base = {r["id"]: r["oof_rank"] for r in json.loads(baseline.read_text())["questions"] if "oof_rank" in r}
        out["baseline"] = _retrieval(held, base, k)
        out["per_question"] = {q.id: [base[q.id], ranks[q.id]] for q in held}
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--legs", type=Path, default=None, help=f"default models/{FOLDS_FILE}")
    ap.add_argument("--baseline", type=Path, help="a calibration report whose out-of-fold ranks to compare with")
    ap.add_argument("--base-index", type=Path, help="an index of the same corpus built with the shipped model")
    ap.add_argument("--mix", default="", help="adapted weights to mix with --base-index's legs, e.g. 0.5,0.75")
    args = ap.parse_args(argv)
    legs = args.legs or load_project().paths.models / FOLDS_FILE
    mix = tuple(float(w) for w in args.mix.split(",") if w)
    print(json.dumps(report(legs, args.baseline, args.base_index, mix), indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
