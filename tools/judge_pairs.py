"""What the learned judge of ``tools.judge_trial`` reads: the projects, the pairs it trains on
and the served text it scores. Shared by the trial (main environment) and its training
(``tools.judge_training``, the train environment), so neither imports the other's module.

Contract: ``training_pairs(rows)`` turns the trial's question rows into (question, text, label)
pairs: an answerable question's evidence sentences and its claims citing an expected section
(1), the best sentences of retrieved sections it does not expect (0); an unanswerable
question's claims and best retrieved sentences (0). ``served_text(row)`` is what a served
answer says: its first three kept claims.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

NEGATIVES = 4  # best sentences of sections a question does not expect, per question
QUESTION_TOKENS, TEXT_TOKENS = 48, 112
PROJECTS = {"rfc": Path("."), "starlette": Path("examples/starlette-docs")}


def training_pairs(rows: Sequence[dict]) -> list[tuple[str, str, float]]:
    out: list[tuple[str, str, float]] = []
    for r in rows:
        q = r["question"]
        if r["answerable"]:
            if r["positives"]:
                out.append((q, " ".join(r["positives"][:2]), 1.0))
            good = [c for c, s in zip(r["claims"], r["claim_sections"], strict=True) if s in r["expected"]]
            if good:
                out.append((q, " ".join(good[:3]), 1.0))
            negatives = [c for c in r["candidates"] if c["section"] not in r["expected"]][:NEGATIVES]
        else:
            if r["claims"]:
                out.append((q, " ".join(r["claims"][:3]), 0.0))
            negatives = r["candidates"][:NEGATIVES]
        out += [(q, c["text"], 0.0) for c in negatives]
    return out


def served_text(row: Mapping) -> str:
    return " ".join(row["claims"][:3])
