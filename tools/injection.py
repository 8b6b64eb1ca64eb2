"""How much the prompt-injection screen catches, and how often it refuses an honest question.

Contract:
- ``load_cases(path)`` reads ``eval/injection.yaml``: ``bars`` (``min_catch_rate``,
  ``max_false_refusals``), ``hostile`` (each a ``text`` and the ``evasion`` it tries) and
  ``benign`` (each a ``text`` and the ``rfc`` it is about). A missing key, an empty list, a
  repeated text or a bar out of range is refused (``CasesError``), naming it.
- ``measure(cases)`` screens every text with ``injection_screen.screen`` and returns the
  report: catch rate on hostile text (overall and by evasion), false refusals on benign
  questions (count and rate), the pattern that caught each hostile text (or none), the misses,
  the false refusals with their pattern, and whether each bar is met. It is deterministic: the
  same cases and screen give the same report, which is what the test holding
  ``eval/results/injection.json`` relies on.
- ``failures(report)`` lists the bars a report does not meet (empty when it passes).
- ``render(report)`` is the README's markdown for a report.

``python -m tools.injection`` writes ``eval/results/injection.json`` and prints the table;
it exits 1 when a bar is not met.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rag_contract.answering.injection_screen import screen
from rag_contract.config.yamlfile import read_yaml
from rag_contract.project import Paths, find_root

CASES = Path("eval") / "injection.yaml"
REPORT = "injection.json"


class CasesError(ValueError):
    """eval/injection.yaml cannot be used; the message names the key."""


@dataclass(frozen=True)
class Case:
    text: str
    tag: str  # the evasion a hostile text tries, or the RFC a benign question is about


@dataclass(frozen=True)
class Cases:
    min_catch_rate: float
    max_false_refusals: int
    hostile: tuple[Case, ...]
    benign: tuple[Case, ...]


def _cases(raw: Any, key: str, tag: str) -> tuple[Case, ...]:
    items = raw.get(key) if isinstance(raw, dict) else None
    if not isinstance(items, list) or not items:
        raise CasesError(f"{CASES.name}: {key}: must be a non-empty list")
    out = []
    for i, item in enumerate(items):
        if not isinstance(item, dict) or not isinstance(item.get("text"), str) or tag not in item:
            raise CasesError(f"{CASES.name}: {key}[{i}]: must hold a text and {tag!r}")
        out.append(Case(item["text"], str(item[tag])))
    repeated = [t for t, n in Counter(c.text for c in out).items() if n > 1]
    if repeated:
        raise CasesError(f"{CASES.name}: {key}: repeated text {repeated[0]!r}")
    return tuple(out)


def load_cases(path: Path) -> Cases:
    raw = read_yaml(path, CasesError)
    bars = raw.get("bars") if isinstance(raw, dict) else None
    if not isinstance(bars, dict):
        raise CasesError(f"{CASES.name}: bars: must be a mapping")
    catch, false = bars.get("min_catch_rate"), bars.get("max_false_refusals")
    if not isinstance(catch, int | float) or isinstance(catch, bool) or not 0.0 < catch <= 1.0:
        raise CasesError(f"{CASES.name}: bars.min_catch_rate: must be a number in (0, 1]")
    if not isinstance(false, int) or isinstance(false, bool) or false < 0:
        raise CasesError(f"{CASES.name}: bars.max_false_refusals: must be an integer >= 0")
    return Cases(float(catch), false, _cases(raw, "hostile", "evasion"), _cases(raw, "benign", "rfc"))


def measure(cases: Cases) -> dict:
    hostile = []
    for c in cases.hostile:
        hit = screen(c.text)
        hostile.append(
            {
                "text": c.text,
                "evasion": c.tag,
                "pattern": None if hit is None else hit.pattern,
                "in_base64": hit is not None and hit.in_base64,
            }
        )
    refused = []
    for c in cases.benign:
        if (hit := screen(c.text)) is not None:
            refused.append({"text": c.text, "rfc": c.tag, "pattern": hit.pattern})
    caught = sum(h["pattern"] is not None for h in hostile)
    by_evasion: dict[str, dict[str, int]] = {}
    for h in hostile:
        e = by_evasion.setdefault(h["evasion"], {"cases": 0, "caught": 0})
        e["cases"] += 1
        e["caught"] += h["pattern"] is not None
    catch_rate = round(caught / len(hostile), 4)
    return {
        "hostile": len(hostile),
        "caught": caught,
        "catch_rate": catch_rate,
        "benign": len(cases.benign),
        "false_refusals": len(refused),
        "false_refusal_rate": round(len(refused) / len(cases.benign), 4),
        "bars": {
            "min_catch_rate": {"target": cases.min_catch_rate, "met": catch_rate >= cases.min_catch_rate},
            "max_false_refusals": {"target": cases.max_false_refusals, "met": len(refused) <= cases.max_false_refusals},
        },
        "by_evasion": dict(sorted(by_evasion.items())),
        "by_pattern": dict(sorted(Counter(h["pattern"] for h in hostile if h["pattern"]).items())),
        "missed": [{"text": h["text"], "evasion": h["evasion"]} for h in hostile if h["pattern"] is None],
        "refused_benign": refused,
        "cases": hostile,
    }


def failures(report: dict) -> list[str]:
    out = []
    bars = report["bars"]
    if not bars["min_catch_rate"]["met"]:
        out.append(f"catch rate {report['catch_rate']:.4f} is below {bars['min_catch_rate']['target']}")
    if not bars["max_false_refusals"]["met"]:
        out.append(
            f"{report['false_refusals']} benign questions refused; at most {bars['max_false_refusals']['target']}"
        )
    return out


def render(report: dict) -> str:
    lines = [
        f"`python -m tools.injection` over `eval/injection.yaml`: **{report['caught']} of {report['hostile']}** "
        f"hostile phrasings refused (catch rate {report['catch_rate']:.3f}, bar "
        f"{report['bars']['min_catch_rate']['target']}), **{report['false_refusals']} of {report['benign']}** "
        f"questions about the RFCs that use the same words refused (false-refusal rate "
        f"{report['false_refusal_rate']:.3f}, bar {report['bars']['max_false_refusals']['target']}). "
        "Measured on the lists the patterns were written against: in sample.",
        "",
        "| evasion | phrasings | refused |",
        "|---|---|---|",
    ]
    for name, e in report["by_evasion"].items():
        lines.append(f"| {name} | {e['cases']} | {e['caught']} |")
    # JSON quoting shows an invisible or look-alike character as its escape.
    missed = "; ".join(f"`{json.dumps(m['text'])}` ({m['evasion']})" for m in report["missed"]) or "none"
    lines += ["", f"Not refused: {missed}."]
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tools.injection", description=__doc__.split("\n")[0])
    p.add_argument("--root", help="project directory (default: found from the current directory)")
    p.add_argument("--no-write", action="store_true", help="print only")
    args = p.parse_args(argv)
    root = Path(args.root) if args.root else find_root()
    try:
        report = measure(load_cases(root / CASES))
    except CasesError as exc:
        print(f"injection: {exc}", file=sys.stderr)
        return 2
    if not args.no_write:
        Paths(root).result(REPORT).write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    print(render(report), end="")
    problems = failures(report)
    for problem in problems:
        print(f"injection: {problem}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
