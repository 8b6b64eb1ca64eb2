"""Out-of-fold retrieval of the per-fold adapted models, for the folds a fold-legs file holds.

``rag-contract calibrate`` reports the out-of-fold figures once every fold has its model; this
reports any subset (an interrupted ``rag-contract adapt --folds`` keeps the folds it finished)
beside a baseline calibration report's out-of-fold ranks of the same questions, so a partial
run is still a like-for-like measurement:

    python -m tools.adapted_oof [--legs models/minilm-l6-adapted-folds.npz] [--baseline calibration.json]

The index is only read for its sections, chunks and lexical statistics; the vector legs come
from the file.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from rag_contract.index.store import load_index
from rag_contract.project import load_project
from rag_contract.quality.adapted_folds import FOLDS_FILE, fold_meta, load_fold_legs
from rag_contract.quality.calibration import _retrieval, adapted_oof_ranks, folds


def report(legs_path: Path, baseline: Path | None) -> dict:
    project = load_project()
    questions = project.questions.questions
    assignment = folds(questions)
    legs = load_fold_legs(legs_path, fold_meta(project, assignment))
    index = load_index(project.paths.index)
    ranks = adapted_oof_ranks(index, questions, assignment, legs)
    held = [q for q in questions if q.id in ranks]
    k = project.thresholds.retrieval.top_k
    out = {"folds": sorted(legs.legs), "questions": len(held), "adapted": _retrieval(held, ranks, k)}
    if baseline:
        base = {r["id"]: r["oof_rank"] for r in json.loads(baseline.read_text())["questions"] if "oof_rank" in r}
        out["baseline"] = _retrieval(held, base, k)
        out["per_question"] = {q.id: [base[q.id], ranks[q.id]] for q in held}
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--legs", type=Path, default=None, help=f"default models/{FOLDS_FILE}")
    ap.add_argument("--baseline", type=Path, help="a calibration report whose out-of-fold ranks to compare with")
    args = ap.parse_args(argv)
    legs = args.legs or load_project().paths.models / FOLDS_FILE
    print(json.dumps(report(legs, args.baseline), indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
