"""How far the relevance features can tell a partial refusal from an unsupported one.

The annotation protocol (eval/annotations.yaml) labels an unanswerable question ``partial`` when
the corpus holds a true, relevant statement that stops short of the answer, and ``unsupported``
when it holds none. The service reaches those states from one relevance logit and the
unknown-subject rules (the "unknown" column: the rules put the answer off topic). This tool asks
whether *any* linear rule over what the service sees could
do better: for each feature set it fits a class-balanced logistic regression
(``calibration.fit_logistic``) on all committed refusals but one, predicts the one left out, and
reports the share predicted right (leave-one-out), beside the share of the larger class.

Contract: ``python -m tools.refusal_states`` answers the committed refusals with the committed
parameters (``calibration.answer_rows``, the rows calibration fits on), writes
``eval/results/refusal_states.json`` and prints it. Everything is deterministic (fixed-step
gradient descent, committed vectors), so a test recomputes the report and compares it whole.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from rag_contract.answering.relevance import OFF_TOPIC
from rag_contract.config.thresholds import RELEVANCE_FEATURES
from rag_contract.index.store import load_index
from rag_contract.project import Project, load_project
from rag_contract.quality.calibration import Row, answer_rows, fit_logistic, state_of
from rag_contract.quality.evaluation import lazy_embed, vectors_for

REPORT = Path("eval") / "results" / "refusal_states.json"
FEATURES = tuple(RELEVANCE_FEATURES[1:])  # the relevance features (the first entry is the bias)
FEATURE_SETS = {
    "unknown_rule": ("unknown",),
    "relevance_features": FEATURES,
    "relevance_features_and_unknown_rule": (*FEATURES, "unknown"),
}
DIGITS = 3


def _column(row: Row, name: str) -> float:
    if name == "unknown":
        return float(row.ceiling == OFF_TOPIC)
    assert row.features is not None
    return float(row.features.as_dict()[name])


def leave_one_out(rows: Sequence[Row], columns: Sequence[str]) -> float:
    """Share of ``rows`` whose label (``partial`` or not) a logistic fit on the others predicts."""
    x = np.array([[_column(r, c) for c in columns] for r in rows])
    y = np.array([float(r.expected_state == "partial") for r in rows])
    right = 0
    for i in range(len(rows)):
        keep = np.arange(len(rows)) != i
        w, b = fit_logistic(x[keep], y[keep])
        right += bool(float(np.einsum("j,j->", x[i], w)) + b >= 0) == bool(y[i])
    return round(right / len(rows), DIGITS)


def report(project: Project) -> dict:
    index = load_index(project.paths.index)
    refusals = [q for q in project.questions.questions if not q.answerable]
    vectors = vectors_for(index, refusals, lazy_embed(index, project.paths.models))
    rows = answer_rows(index, project.thresholds, refusals, lambda _index, text: vectors[text])
    scored = [r for r in rows if r.features is not None]
    partial = sum(r.expected_state == "partial" for r in scored)
    served = sum(state_of(r, project.thresholds.relevance) == r.expected_state for r in rows)
    return {
        "index_version": index.version,
        "question_fingerprint": project.questions.fingerprint,
        "refusals": len(rows),
        "with_kept_claims": len(scored),
        "labels": {"partial": partial, "unsupported": len(scored) - partial},
        "larger_class_share": round(max(partial, len(scored) - partial) / len(scored), DIGITS) if scored else 0.0,
        "served_state_agreement": round(served / len(rows), DIGITS) if rows else 0.0,
        "leave_one_out": {name: leave_one_out(scored, cols) for name, cols in FEATURE_SETS.items()},
    }


def main(argv: Sequence[str] | None = None) -> int:
    argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args(argv)
    project = load_project()
    out = report(project)
    path = project.paths.root / REPORT
    path.write_text(json.dumps(out, indent=1) + "\n")
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
