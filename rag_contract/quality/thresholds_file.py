"""Rewriting eval/thresholds.yaml by command, keeping what people wrote in it.

Contract: ``rewrite_thresholds(path, bars, measured_on)`` and ``write_fitted(path, params)`` edit
the file in place through a round-trip YAML reader, so comments, key order and quoting survive
and the diff shows only the numbers that moved. The new text is validated by the thresholds
loader before anything is written: a command cannot commit a file the loader would refuse.
``update_thresholds`` is the ratchet end to end (rules from ``ratchet``, then this rewrite), the
one core both the command line and the pytest option call.
"""

from __future__ import annotations

import difflib
import io
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rag_contract.config.thresholds import Thresholds, parse_thresholds
from rag_contract.quality.ratchet import Change, current_bars, measured_bars, ratchet


def _yaml(**kwargs: Any) -> Any:
    """A ruamel ``YAML``: imported here, as only these commands edit the file (off serve's start)."""
    from ruamel.yaml import YAML  # noqa: PLC0415 - the round-trip editor only where a file is edited

    return YAML(**kwargs)


def _load(path: Path) -> tuple[Any, Any]:
    yaml = _yaml()
    yaml.preserve_quotes = True
    yaml.width = 4096
    return yaml, yaml.load(Path(path).read_text(encoding="utf-8"))


def _save(path: Path, yaml: Any, doc: Any, write: bool = True) -> str:
    buf = io.StringIO()
    yaml.dump(doc, buf)
    text = buf.getvalue()
    parse_thresholds(_yaml(typ="safe").load(text))  # refuse to write a file the loader refuses
    if write:
        Path(path).write_text(text, encoding="utf-8")
    return text


def write_fitted(path: Path, params: Mapping[str, Any]) -> str:
    """Set each dotted key (``relevance.answer_at``; a mapping value replaces that block's
    entries one by one) and return the new text."""
    yaml, doc = _load(path)
    for dotted, value in params.items():
        node = doc
        *parents, leaf = dotted.split(".")
        for key in parents:
            node = node[key]
        if isinstance(value, Mapping):
            if leaf not in node:  # a block the fit adds (drafting.selector)
                node[leaf] = {}
            for k, v in value.items():
                node[leaf][k] = v
        else:
            node[leaf] = value
    return _save(path, yaml, doc)


def rewrite_thresholds(path: Path, bars: Mapping[str, float | int | str], measured_on: str, write: bool = True) -> str:
    """Write ``bars`` and ``measured_on`` into the thresholds file, keeping its comments and
    order (ceilings sorted by question id); return the new text. The result is validated by
    the loader before anything is written; ``write=False`` only returns it."""
    yaml, doc = _load(path)
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
    held = {k.split(".", 2)[2]: v for k, v in bars.items() if k.startswith("answers.known_overanswered.")}
    if held:
        doc["answers"]["known_overanswered"] = {q: held[q] for q in sorted(held, key=_question_order)}
    elif "known_overanswered" in doc["answers"]:
        del doc["answers"]["known_overanswered"]
    misses = {k.split(".", 2)[2]: v for k, v in bars.items() if k.startswith("answers.known_misses.")}
    if misses:
        doc["answers"]["known_misses"] = {q: misses[q] for q in sorted(misses, key=_question_order)}
    elif "known_misses" in doc["answers"]:
        del doc["answers"]["known_misses"]
    for key, value in bars.items():
        if key.startswith(("answers.known_overanswered.", "answers.known_misses.")):
            continue
        if key.startswith("retrieval.floors."):
            floors[key.split(".", 2)[2]] = value
        elif key.startswith("answers."):
            doc["answers"][key.split(".", 1)[1]] = value
    return _save(path, yaml, doc, write)


@dataclass(frozen=True)
class ThresholdsUpdate:
    changes: tuple[Change, ...]
    kept: tuple[str, ...]  # bars the measurement would loosen, kept because loosening was not allowed
    diff: str  # unified diff of the file, empty when nothing moved
    written: bool


def update_thresholds(
    path: Path,
    committed: Thresholds,
    retrieval: Mapping[str, Any],
    answers: Mapping[str, Any] | None,
    measured_on: str,
    allow_loosen: bool = False,
    dry_run: bool = False,
) -> ThresholdsUpdate:
    """The ratchet, applied: bars from the measurement by the committed rules, tighten-only unless
    ``allow_loosen``, written into ``path`` (unless ``dry_run``) with comments and order kept.
    ``rag-contract thresholds update`` and ``pytest --ragcontract-update`` both call this."""
    measured = measured_bars(retrieval, answers)
    bars, changes = ratchet(current_bars(committed), measured, allow_loosen)
    before = Path(path).read_text(encoding="utf-8")
    after = rewrite_thresholds(path, bars, measured_on, write=not dry_run)
    name = Path(path).name
    diff = "".join(
        difflib.unified_diff(
            before.splitlines(keepends=True), after.splitlines(keepends=True), f"a/{name}", f"b/{name}"
        )
    )
    kept = tuple(k for k, v in measured.items() if bars.get(k) != v)
    return ThresholdsUpdate(tuple(changes), kept, diff, written=not dry_run and after != before)


def _question_order(qid: str) -> tuple[str, int]:
    head = qid.rstrip("0123456789")
    return head, int(qid[len(head) :] or 0)


def _position(existing: list[str], qid: str) -> int:
    return sum(1 for q in existing if _question_order(q) < _question_order(qid))
