"""The bars in eval/thresholds.yaml, recomputed from measurements by the committed rules.

Rules (the same ones the file's comments state):

- a rank ceiling per answerable question: its measured rank + ``CEILING_SLACK``; a question no
  longer in the set loses its ceiling, a new one gains one;
- retrieval floors sit ``FLOOR_SLACK_QUESTIONS`` questions below the measured figure, except
  ``recall@10`` (the eval window), which is pinned at the measured value;
- answer bars: ``min_grounded_rate``, ``min_state_agreement``, ``min_coverage`` and
  ``min_accuracy_when_answered`` sit ``FLOOR_SLACK_QUESTIONS`` questions below the measured rate;
  ``max_answered_unanswerable`` and ``max_false_answer_rate`` are the measured count and rate
  (none of the accuracy bars where a rate has no denominator);
- a refusal measured more answered than annotated is held at its measured state
  (``answers.known_overanswered.<uid>``); one that lands in or below its annotation has none;
- an answerable question measured short of an accurate answer is held at its level
  (``answers.known_misses.<qid>``, ``quality.accuracy.MISS_LEVELS``); an accurate one has none.

``ratchet(old, new, allow_loosen)`` keeps the tighter of the committed and the measured bar
unless loosening is allowed, and lists every change so the command can print it. A loosened
bar is only ever written with ``allow_loosen``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from rag_contract.config.thresholds import ANSWER_BAR_KEYS, Thresholds
from rag_contract.quality.accuracy import MISS_LEVELS, miss_level

CEILING_SLACK = 2
FLOOR_SLACK_QUESTIONS = 2


@dataclass(frozen=True)
class Change:
    key: str
    old: float | int | str | None
    new: float | int | str | None
    loosened: bool

    def describe(self) -> str:
        mark = "  LOOSENED" if self.loosened else ""
        return f"{self.key}: {self.old} -> {self.new}{mark}"


def _floor_below(value: float, n: int) -> float:
    """``value`` less ``FLOOR_SLACK_QUESTIONS`` questions' worth, rounded down to 2 places."""
    return max(0.0, math.floor((value - FLOOR_SLACK_QUESTIONS / max(n, 1)) * 100 + 1e-9) / 100)


def measured_bars(retrieval: Mapping, answers: Mapping | None) -> dict[str, float | int | str]:
    """Every bar as the rules set it from a retrieval report (serving mode) and an answers report."""
    mode = retrieval["modes"][retrieval["serving_mode"]]
    n = retrieval["questions"]
    bars: dict[str, float | int | str] = {
        "retrieval.floors.recall@1": _floor_below(mode["recall@1"], n),
        "retrieval.floors.recall@5": _floor_below(mode["recall@5"], n),
        "retrieval.floors.recall@10": mode["recall@10"],
        "retrieval.floors.mrr": _floor_below(mode["mrr"], n),
    }
    for q in mode["questions"]:
        rank = q["rank"] if q["rank"] is not None else 10_000
        bars[f"retrieval.ceilings.{q['id']}"] = rank + CEILING_SLACK
    if answers is not None:
        bars["answers.min_grounded_rate"] = _floor_below(answers["grounded_rate"], answers["answerable"])
        bars["answers.max_answered_unanswerable"] = answers["answered_unanswerable"]
        bars["answers.min_state_agreement"] = _floor_below(answers["state_agreement"], answers["refusals"])
        acc = answers["accuracy"]
        if acc["coverage"] is not None and acc["false_answer_rate"] is not None:
            bars["answers.min_coverage"] = _floor_below(acc["coverage"], answers["answerable"])
            bars["answers.max_false_answer_rate"] = acc["false_answer_rate"]
            if (right := acc["accuracy_when_answered"]) is not None:
                bars["answers.min_accuracy_when_answered"] = _floor_below(right, acc["answered"])
        for row in answers["questions"]:
            if row["answerable"]:
                level = miss_level(row["state"], bool(row.get("cites_expected")), bool(row.get("accurate")))
                if level != MISS_LEVELS[0]:
                    bars[f"answers.known_misses.{row['id']}"] = level
                continue
            state, expected = row["state"], row.get("expected_state")
            if not row["answerable"] and state in STATE_ORDER and STATE_ORDER[state] > STATE_ORDER[expected]:
                bars[f"answers.known_overanswered.{row['id']}"] = state
    return bars


STATE_ORDER = {"unsupported": 0, "partial": 1, "grounded": 2}


def _lower_is_tighter(key: str) -> bool:
    return key.startswith("retrieval.ceilings.") or key in (
        "answers.max_answered_unanswerable",
        "answers.max_false_answer_rate",
    )


def _tighter(key: str, value: float | int | str, before: float | int | str) -> bool:
    if key.startswith("answers.known_misses."):
        return MISS_LEVELS.index(str(value)) < MISS_LEVELS.index(str(before))
    if key.startswith("answers.known_overanswered."):
        return STATE_ORDER[str(value)] < STATE_ORDER[str(before)]
    return value < before if _lower_is_tighter(key) else value > before  # type: ignore[operator]


def ratchet(
    old: Mapping[str, float | int | str], new: Mapping[str, float | int | str], allow_loosen: bool = False
) -> tuple[dict[str, float | int | str], list[Change]]:
    """The bars to commit, and what changed. Ceilings of questions absent from ``new`` go."""
    out: dict[str, float | int | str] = {}
    changes: list[Change] = []
    for key, value in new.items():
        before = old.get(key)
        if before is None:
            # a new question gains its ceiling; a new exception is a loosening and needs consent
            exception = key.startswith(("answers.known_overanswered.", "answers.known_misses."))
            if exception and not allow_loosen:
                continue
            out[key] = value
            changes.append(Change(key, None, value, exception))
            continue
        tighter = _tighter(key, value, before)
        if value == before:
            out[key] = before
        elif tighter or allow_loosen:
            out[key] = value
            changes.append(Change(key, before, value, loosened=not tighter))
        else:
            out[key] = before
    for key, before in old.items():
        if key not in new and key.startswith(
            ("retrieval.ceilings.", "answers.known_overanswered.", "answers.known_misses.")
        ):
            changes.append(Change(key, before, None, False))
    return out, changes


def current_bars(t: Thresholds) -> dict[str, float | int | str]:
    """The committed bars, keyed as ``measured_bars`` keys them."""
    bars: dict[str, float | int | str] = {f"retrieval.floors.{k}": v for k, v in t.retrieval.floors.items()}
    bars.update({f"retrieval.ceilings.{q}": r for q, r in t.retrieval.ceilings.items()})
    for key in ANSWER_BAR_KEYS:
        value = getattr(t.answers, key)
        if value is not None:
            bars[f"answers.{key}"] = value
    bars.update({f"answers.known_overanswered.{q}": s for q, s in t.answers.known_overanswered.items()})
    bars.update({f"answers.known_misses.{q}": s for q, s in t.answers.known_misses.items()})
    return bars
