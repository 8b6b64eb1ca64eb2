"""What the cross-encoder trial (``tools.cross_encoder_trial``) trains on and scores, shared by the
trial (main environment) and its training (``tools.cross_encoder_training``, the train
environment), so neither imports the other's module and neither needs torch here.

A *row* is one question as the selector sees it out of fold: its id, project, set (``committed``
or the development file it comes from), calibration fold, answerability, the number of sections
its fold's drafter quotes from, and its candidates (``answering.selection.candidates`` over the
top ``max(calibration.SECTIONS)`` offered passages under that fold's fitted retrieval), best
first by that fold's selector, each with the claim the extractive drafter would quote for it, its
selector logit and its label: the claim carries the question's evidence (``quality.accuracy``).

Contract:

- ``training_pairs(rows, fold)``: (question, claim, label) from every row *not* in ``fold``:
  every labelled-1 candidate of an answerable question, and the ``NEGATIVES`` best-by-selector
  labelled-0 candidates of every question (an unanswerable question's are all 0), so the model
  learns what the selector confuses; ordered by row then selector order, so the same rows give
  the same pairs.
- ``scored_pairs(rows, fold)``: (row key, question, claim) for the ``RERANK`` best-by-selector
  candidates of every committed row *in* ``fold`` that the drafter may quote (passage rank below
  the row's ``sections``): what a re-ranker of the selector's top candidates reads. Development
  rows train the models and are not scored: the figures are the committed questions'.
- ``key(row)``: ``project:set:id``, unique across both projects and every set.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

NEGATIVES = 8  # best-by-selector non-answering candidates per question in training
RERANK = 10  # selector's best candidates the cross-encoder re-scores
PROJECTS = {"rfc": Path("."), "starlette": Path("examples/starlette-docs")}


def key(row: Mapping) -> str:
    return f"{row['project']}:{row['set']}:{row['id']}"


def quotable(row: Mapping) -> list[dict]:
    """The row's candidates the drafter may quote (from its fold's top ``sections``), best by selector first."""
    return [c for c in row["candidates"] if c["rank"] < row["sections"]]


def training_pairs(rows: Sequence[Mapping], fold: int) -> list[tuple[str, str, float]]:
    out: list[tuple[str, str, float]] = []
    for r in rows:
        if r["fold"] == fold:
            continue
        q = r["question"]
        if r["answerable"]:
            out += [(q, c["claim"], 1.0) for c in r["candidates"] if c["label"]]
        out += [(q, c["claim"], 0.0) for c in [c for c in r["candidates"] if not c["label"]][:NEGATIVES]]
    return out


def scored_pairs(rows: Sequence[Mapping], fold: int) -> Iterator[tuple[str, str, str]]:
    for r in rows:
        if r["fold"] == fold and r["set"] == "committed":
            for c in quotable(r)[:RERANK]:
                yield key(r), r["question"], c["claim"]
