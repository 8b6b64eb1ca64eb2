"""Candidate fusion features and fit settings, each measured out of fold as calibration measures.

Fused retrieval (``retrieval.ranking.section_features``) scores a section by a logistic fit over
nine features. This tool asks whether more features, or other fit settings, would rank the
expected sections higher on questions the fit has not seen: for each trial it fits the fusion
weights on four folds (``calibration.folds``, the folds ``rag-contract calibrate`` uses), ranks
the fifth fold's answerable questions, and prints recall@1, MRR (ranks past 10 count 0) and
recall@10 over all of them. The ``committed`` trial is the committed procedure and reproduces
the calibration report's out-of-fold retrieval figures; ADR 0003 quotes the rest.

Contract: ``python -m tools.fusion_trials [TRIAL ...]`` prints a markdown table, one row per
trial (all of them by default); it writes nothing. Deterministic: committed question vectors,
fixed-step fits. The title trials embed the 600 section titles with the local embedder first.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache

import numpy as np

from rag_contract.config.questions import Question
from rag_contract.embedders.local import LocalEmbedder
from rag_contract.index.store import Index, load_index
from rag_contract.project import load_project
from rag_contract.quality.calibration import (
    CANDIDATES,
    FOLDS,
    ITERATIONS,
    L2,
    SectionColumns,
    folds,
    fusion_weights,
    rank_of_expected,
)
from rag_contract.quality.evaluation import lazy_embed, vectors_for
from rag_contract.retrieval.ranking import section_features

Extra = Callable[[Index, np.ndarray, np.ndarray], list[np.ndarray]]  # (index, features, query) -> columns


@dataclass(frozen=True)
class Trial:
    extra: Extra | None = None
    candidates: int = CANDIDATES
    iterations: int = ITERATIONS
    l2: float = L2


def _log_rank(x: np.ndarray) -> np.ndarray:
    order = np.argsort(-x, kind="stable")
    ranks = np.empty(len(x))
    ranks[order] = np.arange(1, len(x) + 1)
    return -np.log(ranks)


def _parents(index: Index) -> np.ndarray:
    """Row of each section's parent in ``section_order`` (2.1 for 2.1.3), or -1."""
    position = {sid: i for i, sid in enumerate(index.section_order)}
    out = np.full(len(position), -1)
    for i, sid in enumerate(index.section_order):
        rfc, number = sid.split("#")
        if "." in number:
            out[i] = position.get(f"{rfc}#{number.rsplit('.', 1)[0]}", -1)
    return out


def _title_path(index: Index, sid: str) -> str:
    rfc, number = sid.split("#")
    parts = number.split(".")
    prefixes = (f"{rfc}#{'.'.join(parts[: k + 1])}" for k in range(len(parts)))
    return " > ".join(index.sections[p].title for p in prefixes if p in index.sections)


@cache
def _title_vectors(index: Index, path: bool) -> np.ndarray:
    texts = [_title_path(index, sid) if path else index.sections[sid].title for sid in index.section_order]
    return LocalEmbedder().embed(texts)


def _family(index: Index, f: np.ndarray, _q: np.ndarray) -> list[np.ndarray]:
    parents, dense = _parents(index), f[:, 0]
    best_child = np.zeros(len(dense))
    np.maximum.at(best_child, parents[parents >= 0], dense[parents >= 0])
    return [np.where(parents >= 0, dense[np.maximum(parents, 0)], 0.0), best_child]


TRIALS: Mapping[str, Trial] = {
    "committed": Trial(),
    "title_vector": Trial(lambda index, f, q: [np.einsum("ij,j->i", _title_vectors(index, False), q)]),
    "title_path_vector": Trial(lambda index, f, q: [np.einsum("ij,j->i", _title_vectors(index, True), q)]),
    "parent_and_best_child": Trial(_family),
    "title_times_each": Trial(lambda index, f, q: [f[:, 3] * f[:, j] for j in range(f.shape[1]) if j != 3]),
    "squares": Trial(lambda index, f, q: [f[:, j] ** 2 for j in range(f.shape[1])]),
    "log_ranks": Trial(lambda index, f, q: [_log_rank(f[:, j]) for j in (0, 1, 2)]),
    "candidates_10": Trial(candidates=10),
    "candidates_20": Trial(candidates=20),
    "candidates_100": Trial(candidates=100),
    "steps_100": Trial(iterations=100),
    "steps_2000": Trial(iterations=2000),
    "l2_0": Trial(l2=0.0),
    "l2_0.1": Trial(l2=0.1),
    "l2_1": Trial(l2=1.0),
}


def features(trial: Trial) -> SectionColumns:
    """``section_features`` with the trial's columns after the committed nine."""

    def columns(index: Index, question: str, vector: np.ndarray) -> np.ndarray:
        f = section_features(index, question, vector)
        extra = trial.extra(index, f, vector) if trial.extra else []
        return np.column_stack([f, *extra]) if extra else f

    return columns


def out_of_fold(index: Index, trial: Trial, questions: Sequence[Question], vectors: Mapping[str, np.ndarray]) -> dict:
    assignment = folds(questions)
    answerable = [q for q in questions if q.answerable]
    columns = features(trial)
    ranks = []
    for f in range(FOLDS):
        train = [q for q in answerable if assignment[q.id] != f]
        w = fusion_weights(index, train, vectors, columns, trial.candidates, trial.iterations, trial.l2)
        ranks += [
            rank_of_expected(index, q, np.einsum("ij,j->i", columns(index, q.question, vectors[q.question]), w))
            for q in answerable
            if assignment[q.id] == f
        ]
    r = np.array(ranks)
    return {
        "recall@1": round(float((r == 1).mean()), 4),
        "mrr": round(float(np.where(r <= 10, 1.0 / r, 0.0).mean()), 4),
        "recall@10": round(float((r <= 10).mean()), 4),
    }


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("trials", nargs="*", metavar="TRIAL", help="any of: " + ", ".join(TRIALS))
    names = ap.parse_args(argv).trials or list(TRIALS)
    unknown = [n for n in names if n not in TRIALS]
    if unknown:
        ap.error(f"unknown trial(s) {', '.join(unknown)}; known: {', '.join(TRIALS)}")
    project = load_project()
    index = load_index(project.paths.index)
    questions = project.questions.questions
    vectors = vectors_for(index, questions, lazy_embed(index, project.paths.models))
    print("| trial | recall@1 | MRR | recall@10 |\n|---|---:|---:|---:|")
    for name in names:
        m = out_of_fold(index, TRIALS[name], questions, vectors)
        print(f"| {name} | {m['recall@1']:.3f} | {m['mrr']:.3f} | {m['recall@10']:.3f} |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
