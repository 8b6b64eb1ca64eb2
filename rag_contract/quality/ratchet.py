"""The bars in eval/thresholds.yaml, recomputed from measurements by the committed rules.

Rules (the same ones the file's comments state):

- a rank ceiling per answerable question: its measured rank + ``CEILING_SLACK``; a question no
  longer in the set loses its ceiling, a new one gains one;
- retrieval floors sit ``FLOOR_SLACK_QUESTIONS`` questions below the measured figure, except
  ``recall@10`` (the eval window), which is pinned at the measured value;
- answer bars: ``min_grounded_rate`` and ``min_state_agreement`` sit ``FLOOR_SLACK_QUESTIONS``
  questions below the measured rate; ``max_answered_unanswerable`` is the measured count.

``ratchet(old, new, allow_loosen)`` keeps the tighter of the committed and the measured bar
unless loosening is allowed, and lists every change so the command can print it. A loosened
bar is only ever written with ``allow_loosen``.
"""

from __future__ import annotations

import io
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from ruamel.yaml import YAML

from rag_contract.config.thresholds import Thresholds, parse_thresholds

CEILING_SLACK = 2
FLOOR_SLACK_QUESTIONS = 2


@dataclass(frozen=True)
class Change:
    key: str
    old: float | int | None
    new: float | int | None
    loosened: bool

    def describe(self) -> str:
        mark = "  LOOSENED" if self.loosened else ""
        return f"{self.key}: {self.old} -> {self.new}{mark}"


def _floor_below(value: float, n: int) -> float:
    """``value`` less ``FLOOR_SLACK_QUESTIONS`` questions' worth, rounded down to 2 places."""
    return max(0.0, math.floor((value - FLOOR_SLACK_QUESTIONS / max(n, 1)) * 100 + 1e-9) / 100)


def measured_bars(retrieval: Mapping, answers: Mapping | None) -> dict[str, float | int]:
    """Every bar as the rules set it from a retrieval report (serving mode) and an answers report."""
    mode = retrieval["modes"][retrieval["serving_mode"]]
    n = retrieval["questions"]
    bars: dict[str, float | int] = {
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
    return bars


def _lower_is_tighter(key: str) -> bool:
    return key.startswith("retrieval.ceilings.") or key == "answers.max_answered_unanswerable"


def ratchet(
    old: Mapping[str, float | int], new: Mapping[str, float | int], allow_loosen: bool = False
) -> tuple[dict[str, float | int], list[Change]]:
    """The bars to commit, and what changed. Ceilings of questions absent from ``new`` go."""
    out: dict[str, float | int] = {}
    changes: list[Change] = []
    for key, value in new.items():
        before = old.get(key)
        if before is None:
            out[key] = value
            changes.append(Change(key, None, value, False))
            continue
        tighter = value < before if _lower_is_tighter(key) else value > before
        if value == before:
            out[key] = before
        elif tighter or allow_loosen:
            out[key] = value
            changes.append(Change(key, before, value, loosened=not tighter))
        else:
            out[key] = before
    for key, before in old.items():
        if key not in new and key.startswith("retrieval.ceilings."):
            changes.append(Change(key, before, None, False))
    return out, changes


def current_bars(t: Thresholds) -> dict[str, float | int]:
    """The committed bars, keyed as ``measured_bars`` keys them."""
    bars: dict[str, float | int] = {f"retrieval.floors.{k}": v for k, v in t.retrieval.floors.items()}
    bars.update({f"retrieval.ceilings.{q}": r for q, r in t.retrieval.ceilings.items()})
    for key in ("min_grounded_rate", "max_answered_unanswerable", "min_state_agreement"):
        value = getattr(t.answers, key)
        if value is not None:
            bars[f"answers.{key}"] = value
    return bars


def rewrite_thresholds(path: Path, bars: Mapping[str, float | int], measured_on: str) -> str:
    """Write ``bars`` and ``measured_on`` into the thresholds file, keeping its comments and
    order (ceilings sorted by question id); return the new text. The result is validated by
    the loader before anything is written."""
    yaml = YAML()
    yaml.preserve_quotes = True
    yaml.width = 4096
    doc = yaml.load(Path(path).read_text(encoding="utf-8"))
    doc["measured_on"] = measured_on
    floors = doc["retrieval"]["floors"]
    ceilings = doc["retrieval"]["ceilings"]
    for qid in [q for q in ceilings if f"retrieval.ceilings.{q}" not in bars]:
        del ceilings[qid]
    wanted = {k.split(".", 2)[2]: v for k, v in bars.items() if k.startswith("retrieval.ceilings.")}
    # The blank line or comment after the block hangs on its last key: keep it at the end.
    tail = ceilings.ca.items.pop(list(ceilings)[-1], None) if ceilings else None
    for qid in sorted(wanted, key=_question_order):
        if qid in ceilings:
            ceilings[qid] = wanted[qid]
        else:
            ceilings.insert(_position(list(ceilings), qid), qid, wanted[qid])
    if tail is not None and ceilings:
        ceilings.ca.items[list(ceilings)[-1]] = tail
    for key, value in bars.items():
        if key.startswith("retrieval.floors."):
            floors[key.split(".", 2)[2]] = value
        elif key.startswith("answers."):
            doc["answers"][key.split(".", 1)[1]] = value
    buf = io.StringIO()
    yaml.dump(doc, buf)
    text = buf.getvalue()
    parse_thresholds(YAML(typ="safe").load(text))  # refuse to write a file the loader refuses
    Path(path).write_text(text, encoding="utf-8")
    return text


def _question_order(qid: str) -> tuple[str, int]:
    head = qid.rstrip("0123456789")
    return head, int(qid[len(head) :] or 0)


def _position(existing: list[str], qid: str) -> int:
    return sum(1 for q in existing if _question_order(q) < _question_order(qid))
