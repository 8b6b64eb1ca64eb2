"""What refusing each answered unanswerable question would cost in correct answers.

The relevance check answers when its logit reaches ``answer_at``. An unanswerable question the
committed parameters answer could be refused only by raising that threshold above its logit, and
every correct answer (grounded, citing an expected section) whose logit is no higher would be
refused with it. This tool reads the committed calibration report and, for each unanswerable
question served as ``grounded`` in sample (the full fit, the parameters that serve), reports its
logit and how many of the correct answers would go with it: the price, in answers, of a
threshold that refuses it.

Contract: ``python -m tools.refusal_cost`` reads ``eval/results/calibration.json`` (written by
``rag-contract calibrate``), writes ``eval/results/refusal_cost.json`` and prints it. It is a pure
function of that report, so a test recomputes it and compares it whole.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping, Sequence
from pathlib import Path

from rag_contract.project import load_project

CALIBRATION = Path("eval") / "results" / "calibration.json"
REPORT = Path("eval") / "results" / "refusal_cost.json"


def cost(calibration: Mapping) -> dict:
    """``calibration``: the report ``rag-contract calibrate`` writes."""
    rows: Sequence[Mapping] = calibration["questions"]
    unanswerable = set(calibration["in_sample"]["answers"]["answered_unanswerable"])
    correct = sorted(
        r["in_sample_logit"]
        for r in rows
        if r["id"] not in unanswerable
        and "in_sample_rank" in r  # answerable questions carry a rank
        and r["in_sample_state"] == "grounded"
        and r["in_sample_cites_expected"]
    )
    answered = sorted((r for r in rows if r["id"] in unanswerable), key=lambda r: (-r["in_sample_logit"], r["id"]))
    return {
        "index_version": calibration["index_version"],
        "question_fingerprint": calibration["question_fingerprint"],
        "answer_at": calibration["params"]["relevance.answer_at"],
        "correct_answers": len(correct),
        "answered_unanswerable": [
            {
                "id": r["id"],
                "logit": r["in_sample_logit"],
                "correct_answers_refused_with_it": sum(z <= r["in_sample_logit"] for z in correct),
            }
            for r in answered
        ],
    }


def main(argv: Sequence[str] | None = None) -> int:
    argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args(argv)
    root = load_project().paths.root
    out = cost(json.loads((root / CALIBRATION).read_text()))
    (root / REPORT).write_text(json.dumps(out, indent=1) + "\n")
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
