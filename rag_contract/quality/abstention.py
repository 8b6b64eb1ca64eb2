"""The abstention curve: what the relevance threshold trades, in sample and out of fold.

``curve(calibration)`` sweeps ``relevance.answer_at`` across the range of the relevance logits
the calibration report holds and, at each step, counts what an answer standing at that
threshold would mean: coverage of answerable questions (answered), accuracy when answered (a
kept claim carries the question's evidence: ``quality.accuracy``), and the false-answer rate on
questions the corpus cannot answer. It does so twice: with each question's out-of-fold logit
(scored by parameters fitted without it) and with the in-sample logit of the full fit, so the
gap between the two is on the chart. ``write_curve`` writes ``eval/results/abstention.json`` and ``docs/abstention.svg``
(plain SVG written here: one small chart does not justify a plotting library in the install).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

from rag_contract.project import Paths

STEPS = 21
DIGITS = 4


def _rows(questions: Sequence[Mapping], key: str, right: str, thresholds: Sequence[float]) -> list[dict]:
    ans = [q for q in questions if "oof_rank" in q]
    ref = [q for q in questions if "oof_rank" not in q]
    rows = []
    for t in thresholds:
        answered = [q for q in ans if q[key] is not None and q[key] >= t]
        accurate = sum(1 for q in answered if q[right])
        false = sum(1 for q in ref if q[key] is not None and q[key] >= t)
        rows.append(
            {
                "threshold": t,
                "coverage": round(len(answered) / len(ans), DIGITS) if ans else 0.0,
                "accuracy_when_answered": round(accurate / len(answered), DIGITS) if answered else None,
                "false_answer_rate": round(false / len(ref), DIGITS) if ref else 0.0,
                "answered": len(answered),
                "accurate": accurate,
                "false_answers": false,
            }
        )
    return rows


def curve(calibration: Mapping) -> dict:
    qs = calibration["questions"]
    logits = [q[k] for q in qs for k in ("oof_logit", "in_sample_logit") if q[k] is not None]
    lo, hi = (min(logits), max(logits)) if logits else (0.0, 1.0)
    thresholds = [round(lo + (hi - lo) * i / (STEPS - 1), DIGITS) for i in range(STEPS)]
    committed = calibration["params"]["relevance.answer_at"]
    return {
        "index_version": calibration["index_version"],
        "committed_threshold": committed,
        "answerable": sum(1 for q in qs if "oof_rank" in q),
        "unanswerable": sum(1 for q in qs if "oof_rank" not in q),
        "out_of_fold": _rows(qs, "oof_logit", "oof_accurate", [*thresholds, committed]),
        "in_sample": _rows(qs, "in_sample_logit", "in_sample_accurate", [*thresholds, committed]),
    }


def svg(report: dict) -> str:
    """Solid lines: out of fold; dashed: in sample. The x axis is the relevance logit."""
    w, h, left, right, top, bottom = 600, 360, 56, 190, 24, 48
    pw, ph = w - left - right, h - top - bottom
    ts = [r["threshold"] for r in report["out_of_fold"]]
    lo, hi = min(ts), max(ts)
    span = (hi - lo) or 1.0

    def x(t: float) -> float:
        return left + (t - lo) / span * pw

    def y(v: float) -> float:
        return top + (1 - v) * ph

    series = [
        ("coverage", "#1f6feb", "coverage"),
        ("accuracy_when_answered", "#2da44e", "accuracy when answered"),
        ("false_answer_rate", "#cf222e", "false answers"),
    ]
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" '
        'font-family="sans-serif" font-size="12">',
        f'<rect width="{w}" height="{h}" fill="#ffffff"/>',
    ]
    for i in range(6):
        v = i / 5
        t = lo + span * i / 5
        parts.append(f'<line x1="{left}" x2="{left + pw}" y1="{y(v):.1f}" y2="{y(v):.1f}" stroke="#e5e5e5"/>')
        parts.append(f'<text x="{left - 8}" y="{y(v) + 4:.1f}" text-anchor="end">{v:.1f}</text>')
        parts.append(f'<text x="{x(t):.1f}" y="{top + ph + 18}" text-anchor="middle">{t:.1f}</text>')
    parts.append(f'<text x="{left + pw / 2}" y="{h - 8}" text-anchor="middle">relevance threshold (logit)</text>')
    t0 = report["committed_threshold"]
    parts.append(
        f'<line x1="{x(t0):.1f}" x2="{x(t0):.1f}" y1="{top}" y2="{top + ph}" stroke="#57606a" stroke-dasharray="4 3"/>'
    )
    parts.append(f'<text x="{x(t0) + 4:.1f}" y="{top + 12}" fill="#57606a">committed {t0}</text>')
    n = 0
    for which, dash in (("out_of_fold", ""), ("in_sample", ' stroke-dasharray="5 4"')):
        for key, colour, label in series:
            rows = sorted(report[which], key=lambda r: r["threshold"])
            pts = [(r["threshold"], r[key]) for r in rows if r[key] is not None]
            path = " ".join(f"{x(t):.1f},{y(v):.1f}" for t, v in pts)
            parts.append(f'<polyline points="{path}" fill="none" stroke="{colour}" stroke-width="2"{dash}/>')
            ly = top + 20 + n * 20
            n += 1
            parts.append(
                f'<line x1="{left + pw + 12}" x2="{left + pw + 28}" y1="{ly}" y2="{ly}" '
                f'stroke="{colour}" stroke-width="2"{dash}/>'
            )
            parts.append(f'<text x="{left + pw + 32}" y="{ly + 4}">{label} ({which.replace("_", " ")})</text>')
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


def write_curve(root, calibration: Mapping) -> dict:
    report = curve(calibration)
    Paths(root).result("abstention.json").write_text(json.dumps(report, indent=1) + "\n")
    (root / "docs").mkdir(exist_ok=True)
    (root / "docs" / "abstention.svg").write_text(svg(report))
    return report
