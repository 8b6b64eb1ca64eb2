"""Two report sets compared: which questions moved, by how much, and what the aggregates did.

Contract: a report set is what an ``eval/results/`` directory holds: ``retrieval.json`` (required)
and ``answers.json`` (optional). ``diff_reports(old, new)`` compares them in the serving mode:
every question whose rank or answer state changed (worst move first: the largest rank increase,
then a state change), the questions only in ``new`` (added) or only in ``old`` (removed), and the
aggregate figures side by side (answer states only when both sides have an answers report).
A rank of ``None`` (no expected section found at all) counts as worse than any rank.
``render_text`` and ``render_markdown`` present a diff, bounded to ``max_rows`` question rows.
Nothing here decides pass or fail: the gate does.

``measure_revision(repo, rev)`` checks ``rev`` out in a temporary ``git worktree`` and runs that
revision's own eval commands there (its code, its index, its question set), so the base of a
change is measured rather than trusted from what it committed; the worktree is removed after.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rag_contract.project import Paths

RETRIEVAL_FIGURES = ("recall@1", "recall@3", "recall@5", "recall@10", "mrr")
ANSWER_FIGURES = ("grounded_rate", "state_agreement", "answered_unanswerable")
MISS_RANK = 10_000  # where a question with no rank at all sorts: below every real rank


class RevisionError(Exception):
    """A revision could not be checked out or measured; the message names the command and its error."""


@dataclass(frozen=True)
class ReportSet:
    retrieval: Mapping[str, Any]
    answers: Mapping[str, Any] | None = None

    @property
    def index_version(self) -> str:
        return str(self.retrieval["index_version"])

    def ranks(self) -> dict[str, int | None]:
        mode = self.retrieval["modes"][self.retrieval["serving_mode"]]
        return {q["id"]: q["rank"] for q in mode["questions"]}

    def states(self) -> dict[str, str]:
        return {r["id"]: r["state"] for r in self.answers["questions"]} if self.answers else {}


def load_report_set(results: Path) -> ReportSet:
    """The report set in an ``eval/results/`` directory (``answers.json`` may be absent)."""
    results = Path(results)
    retrieval = json.loads((results / "retrieval.json").read_text(encoding="utf-8"))
    answers_path = results / "answers.json"
    answers = json.loads(answers_path.read_text(encoding="utf-8")) if answers_path.is_file() else None
    return ReportSet(retrieval, answers)


def save_report_set(reports: ReportSet, results: Path) -> None:
    """Write a report set as an ``eval/results/`` directory that ``load_report_set`` reads back."""
    results = Path(results)
    results.mkdir(parents=True, exist_ok=True)
    (results / "retrieval.json").write_text(json.dumps(reports.retrieval, indent=1) + "\n", encoding="utf-8")
    if reports.answers is not None:
        text = json.dumps(reports.answers, indent=1, ensure_ascii=False) + "\n"
        (results / "answers.json").write_text(text, encoding="utf-8")


@dataclass(frozen=True)
class QuestionMove:
    id: str
    old_rank: int | None
    new_rank: int | None
    old_state: str | None
    new_state: str | None

    @property
    def rank_delta(self) -> int:
        """Positive when the question ranks lower (worse) than before."""
        return (self.new_rank or MISS_RANK) - (self.old_rank or MISS_RANK)

    def rank_text(self) -> str:
        if self.old_rank == self.new_rank:
            return f"{_rank(self.new_rank)}"
        return f"{_rank(self.old_rank)} → {_rank(self.new_rank)} ({self.rank_delta:+d})"

    def state_text(self) -> str:
        if self.old_state == self.new_state:
            return self.new_state or ""
        return f"{self.old_state} → {self.new_state}"


@dataclass(frozen=True)
class Aggregate:
    name: str
    old: float | None
    new: float | None

    @property
    def delta(self) -> float | None:
        return None if self.old is None or self.new is None else round(self.new - self.old, 4)


@dataclass(frozen=True)
class ReportDiff:
    old_version: str
    new_version: str
    moves: tuple[QuestionMove, ...]  # worst first
    added: tuple[str, ...]
    removed: tuple[str, ...]
    aggregates: tuple[Aggregate, ...]
    unchanged: int

    @property
    def worse(self) -> tuple[QuestionMove, ...]:
        return tuple(m for m in self.moves if m.rank_delta > 0)

    @property
    def better(self) -> tuple[QuestionMove, ...]:
        return tuple(m for m in self.moves if m.rank_delta < 0)

    def move(self, qid: str) -> QuestionMove | None:
        return next((m for m in self.moves if m.id == qid), None)

    def headline(self) -> str:
        return (
            f"{len(self.moves)} question(s) moved ({len(self.worse)} ranked lower, {len(self.better)} higher), "
            f"{len(self.added)} added, {len(self.removed)} removed, {self.unchanged} unchanged"
        )


def _rank(rank: int | None) -> str:
    return "none" if rank is None else str(rank)


def diff_reports(old: ReportSet, new: ReportSet) -> ReportDiff:
    old_ranks, new_ranks = old.ranks(), new.ranks()
    # states are compared only when both sides measured answers; otherwise neither side has any
    with_states = old.answers is not None and new.answers is not None
    old_states, new_states = (old.states(), new.states()) if with_states else ({}, {})
    both = [q for q in new_ranks if q in old_ranks] + [q for q in new_states if q in old_states and q not in new_ranks]
    moves = [
        QuestionMove(q, old_ranks.get(q), new_ranks.get(q), old_states.get(q), new_states.get(q))
        for q in both
        if old_ranks.get(q) != new_ranks.get(q) or old_states.get(q) != new_states.get(q)
    ]
    moves.sort(key=lambda m: (-m.rank_delta, m.old_state == m.new_state, _order(m.id)))
    old_ids, new_ids = set(old_ranks) | set(old_states), set(new_ranks) | set(new_states)
    return ReportDiff(
        old_version=old.index_version,
        new_version=new.index_version,
        moves=tuple(moves),
        added=tuple(sorted(new_ids - old_ids, key=_order)),
        removed=tuple(sorted(old_ids - new_ids, key=_order)),
        aggregates=_aggregates(old, new),
        unchanged=len(both) - len(moves),
    )


def _aggregates(old: ReportSet, new: ReportSet) -> tuple[Aggregate, ...]:
    def serving(r: ReportSet) -> Mapping[str, Any]:
        return r.retrieval["modes"][r.retrieval["serving_mode"]]

    out = [Aggregate(f, serving(old).get(f), serving(new).get(f)) for f in RETRIEVAL_FIGURES]
    if old.answers is not None or new.answers is not None:
        out += [
            Aggregate(f, (old.answers or {}).get(f), (new.answers or {}).get(f))
            for f in ANSWER_FIGURES  # a side without an answers report shows None
        ]
    return tuple(out)


def _order(qid: str) -> tuple[str, int]:
    head = qid.rstrip("0123456789")
    return head, int(qid[len(head) :] or 0)


def _figure(x: float | None) -> str:
    if x is None:
        return "n/a"
    return str(x) if isinstance(x, int) else f"{x:.4f}"


def _delta(a: Aggregate) -> str:
    d = a.delta
    if d is None:
        return "n/a"
    if d == 0:
        return "0"
    return f"{d:+d}" if isinstance(d, int) else f"{d:+.4f}"


def render_text(diff: ReportDiff, max_rows: int = 50) -> str:
    lines = [f"index {diff.old_version} -> {diff.new_version}: {diff.headline()}"]
    if diff.moves:
        lines.append(f"{'question':<10} {'rank (base -> head)':<24} state (base -> head)")
        for m in diff.moves[:max_rows]:
            lines.append(f"{m.id:<10} {m.rank_text():<24} {m.state_text()}")
        if len(diff.moves) > max_rows:
            lines.append(f"... and {len(diff.moves) - max_rows} more")
    if diff.added:
        lines.append(f"added: {', '.join(diff.added)}")
    if diff.removed:
        lines.append(f"removed: {', '.join(diff.removed)}")
    lines.append(f"{'figure':<22} {'base':>8} {'head':>8} {'delta':>8}")
    for a in diff.aggregates:
        lines.append(f"{a.name:<22} {_figure(a.old):>8} {_figure(a.new):>8} {_delta(a):>8}")
    return "\n".join(lines) + "\n"


def render_markdown(diff: ReportDiff, max_rows: int = 50) -> str:
    """The rank-delta table, then added and removed questions, then the aggregates."""
    lines = [f"Index `{diff.old_version}` → `{diff.new_version}`: {diff.headline()}.", ""]
    if diff.moves:
        lines += ["| question | rank (base → head) | state (base → head) |", "|---|---|---|"]
        lines += [f"| {m.id} | {m.rank_text()} | {m.state_text()} |" for m in diff.moves[:max_rows]]
        if len(diff.moves) > max_rows:
            lines.append(f"| … | {len(diff.moves) - max_rows} more | |")
        lines.append("")
    if diff.added:
        lines += [f"Added: {', '.join(diff.added)}.", ""]
    if diff.removed:
        lines += [f"Removed: {', '.join(diff.removed)}.", ""]
    lines += ["| figure | base | head | Δ |", "|---|---|---|---|"]
    lines += [f"| {a.name} | {_figure(a.old)} | {_figure(a.new)} | {_delta(a)} |" for a in diff.aggregates]
    return "\n".join(lines) + "\n"


def measure_revision(repo: Path, rev: str, python: str = sys.executable) -> ReportSet:
    """Measure ``rev`` of the git repository at ``repo`` with that revision's own code.

    The revision is checked out in a temporary worktree; ``rag-contract eval`` and
    ``eval-answers`` run there with ``python`` (the worktree first on the import path), and the
    report set they write is returned. The worktree is removed whatever happens."""
    with tempfile.TemporaryDirectory(prefix="rag-contract-base-") as tmp:
        tree = Path(tmp) / "tree"
        _run(["git", "-C", str(repo), "worktree", "add", "--detach", "--quiet", str(tree), rev], cwd=Path(repo))
        try:
            env = {**os.environ, "PYTHONPATH": str(tree)}
            for command in (["eval", "--quiet"], ["eval-answers", "--quiet"]):
                _run([python, "-m", "rag_contract.cli", "--root", str(tree), *command], cwd=tree, env=env)
            return load_report_set(Paths(tree).results)
        finally:
            subprocess.run(
                ["git", "-C", str(repo), "worktree", "remove", "--force", str(tree)], capture_output=True, check=False
            )


def _run(cmd: list[str], cwd: Path, env: Mapping[str, str] | None = None) -> None:
    done = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
        raise RevisionError(f"`{' '.join(cmd[-3:])}` exited {done.returncode}: {' / '.join(tail)}")
