"""The abstention curve: what the extractive confidence threshold trades, measured.

``curve(project, index)`` sweeps ``drafting.extractive_min_confidence`` from 0 to 1 and, at
each step, answers the whole question set with the extractive drafter under the real
grounding check: coverage of answerable questions, accuracy when answered (an answered
question citing an expected section), and the false-answer rate on questions the corpus
cannot answer. ``write_curve`` writes ``eval/results/abstention.json`` and the plot
``docs/abstention.svg`` (plain SVG written here: one small chart does not justify a
plotting library in the install). Deterministic: committed vectors, no timings.
"""

from __future__ import annotations

import json
from dataclasses import replace

from rag_contract.answering.drafting import ExtractiveDrafter
from rag_contract.answering.service import Service
from rag_contract.index.registry import Registry
from rag_contract.index.store import Index, load_index
from rag_contract.project import Paths
from rag_contract.quality.evaluation import abstention_curve

STEPS = tuple(round(i / 20, 2) for i in range(21))


def curve(project, index: Index) -> dict:
    registry = Registry(index)
    d = project.thresholds.drafting

    base = ExtractiveDrafter.for_index(index, d.extractive_min_confidence, d.extractive_max_claims)

    def make(t: float) -> Service:
        # Drafter.name is settable in the protocol, read-only in the drafters (answering.drafting)
        return Service(registry, project.thresholds, replace(base, min_confidence=t))  # type: ignore[arg-type]

    rows = abstention_curve(make, project.questions.questions, STEPS)
    return {
        "index_version": index.version,
        "committed_threshold": d.extractive_min_confidence,
        "max_claims": d.extractive_max_claims,
        "answerable": len(project.questions.answerable),
        "unanswerable": len(project.questions.refusals),
        "rows": rows,
    }


def svg(report: dict) -> str:
    w, h, left, right, top, bottom = 560, 340, 56, 150, 24, 48
    pw, ph = w - left - right, h - top - bottom

    def x(t: float) -> float:
        return left + t * pw

    def y(v: float) -> float:
        return top + (1 - v) * ph

    series = [
        ("coverage", "#1f6feb", "coverage (answerable answered)"),
        ("accuracy_when_answered", "#2da44e", "accuracy when answered"),
        ("false_answer_rate", "#cf222e", "false answers (unanswerable)"),
    ]
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" '
        'font-family="sans-serif" font-size="12">',
        f'<rect width="{w}" height="{h}" fill="#ffffff"/>',
    ]
    for i in range(6):
        v = i / 5
        parts.append(f'<line x1="{left}" x2="{left + pw}" y1="{y(v):.1f}" y2="{y(v):.1f}" stroke="#e5e5e5"/>')
        parts.append(f'<text x="{left - 8}" y="{y(v) + 4:.1f}" text-anchor="end">{v:.1f}</text>')
        parts.append(f'<text x="{x(v):.1f}" y="{top + ph + 18}" text-anchor="middle">{v:.1f}</text>')
    parts.append(f'<text x="{left + pw / 2}" y="{h - 8}" text-anchor="middle">extractive confidence threshold</text>')
    t0 = report["committed_threshold"]
    parts.append(
        f'<line x1="{x(t0):.1f}" x2="{x(t0):.1f}" y1="{top}" y2="{top + ph}" stroke="#57606a" stroke-dasharray="4 3"/>'
    )
    parts.append(f'<text x="{x(t0) + 4:.1f}" y="{top + 12}" fill="#57606a">committed {t0}</text>')
    for n, (key, colour, label) in enumerate(series):
        pts = [(r["threshold"], r[key]) for r in report["rows"] if r[key] is not None]
        path = " ".join(f"{x(t):.1f},{y(v):.1f}" for t, v in pts)
        parts.append(f'<polyline points="{path}" fill="none" stroke="{colour}" stroke-width="2"/>')
        for t, v in pts:
            parts.append(f'<circle cx="{x(t):.1f}" cy="{y(v):.1f}" r="2.5" fill="{colour}"/>')
        ly = top + 20 + n * 20
        parts.append(
            f'<line x1="{left + pw + 12}" x2="{left + pw + 28}" y1="{ly}" y2="{ly}" '
            f'stroke="{colour}" stroke-width="2"/>'
        )
        parts.append(f'<text x="{left + pw + 32}" y="{ly + 4}">{label.split(" (")[0]}</text>')
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


def write_curve(project) -> list[dict]:
    index = load_index(project.paths.index)
    report = curve(project, index)
    root = project.paths.root
    Paths(root).result("abstention.json").write_text(json.dumps(report, indent=1) + "\n")
    (root / "docs").mkdir(exist_ok=True)
    (root / "docs" / "abstention.svg").write_text(svg(report))
    return report["rows"]
