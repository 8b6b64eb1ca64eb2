"""The gate's verdict where a reviewer looks: a bounded step summary and error annotations.

Contract:

- ``bar_path(check_id)`` names the key in eval/thresholds.yaml whose bar a check holds the build
  to (``retrieval/ceiling/q08`` -> ``retrieval.ceilings.q08``); ``bar_line(text, path)`` is that
  key's 1-based line in the file, falling back to its nearest existing parent, then line 1.
- ``worst_first(failures)`` orders failed items: a project that does not load, then checks that
  invalidate every number (thresholds, freshness, committed reports), then aggregate floors and
  answer bars, then rank ceilings by how far past their ceiling, then the rest.
- ``error_annotations(...)`` gives GitHub ``::error`` workflow commands for at most ``limit`` (10, what a
  step shows) of the worst failures, each on the line of the bar that failed. Data is escaped
  (``%``, CR, LF) and properties too (also ``:`` and ``,``), so a message cannot end the command.
- ``step_summary(...)`` renders Markdown: failed items first (a ceiling's row names the base rank
  and the rank now when a diff is given), then the rank-delta table; never more than
  ``max_bytes`` (GitHub caps a step summary at 1 MiB; this stays far below).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from rag_contract.quality.report_diff import ReportDiff, render_markdown

ANNOTATION_LIMIT = 10
SUMMARY_MAX_BYTES = 64 * 1024
MESSAGE_CHARS = 400

_BUDGET_KEYS = {
    "latency": "max_request_ms",
    "rebuild": "max_rebuild_usd",
    "rerecord": "max_rerecord_usd",
    "drafting-vs-cap": "daily_cap_usd",
}


@dataclass(frozen=True)
class FailedItem:
    check_id: str
    message: str
    figures: Mapping[str, Any] = field(default_factory=dict)


def bar_path(check_id: str) -> tuple[str, ...]:
    """The thresholds key a check holds the build to (a parent key when no single bar is one)."""
    head, _, rest = check_id.partition("/")
    if head == "retrieval" and rest.startswith("ceiling/"):
        return ("retrieval", "ceilings", rest.split("/", 1)[1])
    if head == "retrieval" and rest.startswith("floor/"):
        return ("retrieval", "floors", rest.split("/", 1)[1])
    if head == "answers" and rest.startswith("refusal/"):
        return ("answers", "known_overanswered", rest.split("/", 1)[1])
    if head == "answers" and rest.startswith("answer/"):
        return ("answers", "known_misses", rest.split("/", 1)[1])
    if head == "answers":
        return ("answers", rest)
    if head == "budget":
        return ("budget", _BUDGET_KEYS.get(rest, rest))
    if head == "ratelimit":
        return ("rate_limit",)
    if head in ("thresholds", "index"):
        return ("measured_on",)
    return ()  # report/*, load: the file as a whole


def bar_line(thresholds_text: str, path: Sequence[str]) -> int:
    """1-based line of ``path`` in the thresholds text; its nearest existing parent; else 1."""
    from ruamel.yaml import YAML  # noqa: PLC0415 - line numbers only when a report is annotated

    try:
        node = YAML().load(thresholds_text)
    except Exception:  # a file the loader refuses still gets its annotation, on line 1
        return 1
    line = 0
    for key in path:
        if not hasattr(node, "lc") or key not in node:
            break
        line = node.lc.key(key)[0]
        node = node[key]
    return line + 1


def _overshoot(item: FailedItem) -> float:
    rank, ceiling = item.figures.get("rank"), item.figures.get("ceiling")
    try:
        return float(rank) - float(ceiling)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return float("inf")  # a miss, or no ceiling at all


_KIND_ORDER = {"load": 0, "thresholds": 1, "index": 1, "report": 1, "retrieval/floor": 2, "answers": 3}


def _kind_rank(check_id: str) -> int:
    if check_id.startswith("retrieval/ceiling/"):
        return 4
    if check_id.startswith(("answers/refusal/", "answers/answer/")):
        return 5  # one question's answer, after the rank that explains it
    for prefix, rank in _KIND_ORDER.items():
        if check_id == prefix or check_id.startswith(prefix + "/"):
            return rank
    return 6


def worst_first(failures: Iterable[FailedItem]) -> list[FailedItem]:
    return sorted(failures, key=lambda f: (_kind_rank(f.check_id), -_overshoot(f), f.check_id))


def escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def annotation(file: str, line: int, title: str, message: str) -> str:
    return f"::error file={escape_property(file)},line={line},title={escape_property(title)}::{escape_data(message)}"


def error_annotations(
    failures: Iterable[FailedItem], thresholds_text: str, file: str, limit: int = ANNOTATION_LIMIT
) -> list[str]:
    """``::error`` commands for the ``limit`` worst failures, each on its bar's line of ``file``."""
    return [
        annotation(file, bar_line(thresholds_text, bar_path(f.check_id)), f"gate: {f.check_id}", f.message)
        for f in worst_first(failures)[:limit]
    ]


def _cell(text: str, limit: int = MESSAGE_CHARS) -> str:
    flat = re.sub(r"\s+", " ", text).strip().replace("|", "\\|")
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _figures(item: FailedItem, diff: ReportDiff | None) -> str:
    f = item.figures
    if item.check_id.startswith("retrieval/ceiling/"):
        qid = item.check_id.rsplit("/", 1)[1]
        move = diff.move(qid) if diff else None
        now = f.get("rank", "?")
        rank = f"rank {move.old_rank} → {now}" if move and move.old_rank != move.new_rank else f"rank {now}"
        return f"{rank}, ceiling {f.get('ceiling', '?')}"
    return ", ".join(f"{k} {v}" for k, v in f.items())


def step_summary(
    failures: Sequence[FailedItem],
    passed: int,
    diff: ReportDiff | None,
    base_label: str = "base",
    max_bytes: int = SUMMARY_MAX_BYTES,
    max_rows: int = 50,
) -> str:
    """Markdown for a CI page: the failed items, worst first, then the rank-delta table."""
    ordered = worst_first(failures)
    verdict = "failed" if ordered else "passed"
    lines = [f"### rag-contract gate {verdict}: {len(ordered)} failed, {passed} passed", ""]
    if ordered:
        lines += ["| item | figures | why |", "|---|---|---|"]
        lines += [f"| `{f.check_id}` | {_cell(_figures(f, diff))} | {_cell(f.message)} |" for f in ordered[:max_rows]]
        if len(ordered) > max_rows:
            lines.append(f"| … | {len(ordered) - max_rows} more failed items | |")
        lines.append("")
    if diff is not None:
        lines += [f"#### Retrieval and answers against the {base_label}", "", render_markdown(diff, max_rows)]
    return _bounded("\n".join(lines).rstrip("\n") + "\n", max_bytes)


def _bounded(text: str, max_bytes: int) -> str:
    if len(text.encode("utf-8")) <= max_bytes:
        return text
    note = "\n… (truncated: the full report is in the job log)\n"
    budget = max_bytes - len(note.encode("utf-8"))
    kept: list[str] = []
    size = 0
    for line in text.splitlines(keepends=True):
        size += len(line.encode("utf-8"))
        if size > budget:
            break
        kept.append(line)
    return "".join(kept) + note
