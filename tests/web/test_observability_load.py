"""The observability load report: its structure, and that the committed run's figures agree with
one another (timings vary by machine, so not equality with a new run)."""

from __future__ import annotations

import json
import statistics

from tools import observability_load as ol


def test_summary_takes_medians_and_the_goal_turns_red_below_it():
    met = ol.summarize({"off": [1000, 900, 1100], "on": [950, 920, 100]})
    assert met["median_rps"] == {"off": 1000, "on": 920} and met["ratio_on_off"] == 0.92 and met["goal"]["met"]
    missed = ol.summarize({"off": [1000], "on": [800]})
    assert missed["goal"] == {"target": ol.GOAL_RATIO, "value": 0.8, "met": False}


def test_on_means_traces_and_metrics_and_off_means_nothing(tmp_path):
    base = {"PATH": "/bin", "RAG_CONTRACT_ACCESS_LOG": "1"}
    assert ol.mode_env(base, "off", "http://127.0.0.1:1/v1/traces", tmp_path) == {"PATH": "/bin"}
    on = ol.mode_env(base, "on", "http://127.0.0.1:1/v1/traces", tmp_path)
    assert on["RAG_CONTRACT_TRACES_ENDPOINT"].startswith("http://127.0.0.1:") and on["RAG_CONTRACT_METRICS_PORT"]


def test_the_committed_report_is_consistent(root):
    r = json.loads((root / "eval" / "results" / "observability.json").read_text())
    runs = r["runs_rps"]
    assert set(runs) == set(ol.MODES) and all(len(runs[m]) == r["meta"]["rounds"] for m in ol.MODES)
    assert r["median_rps"] == {m: round(statistics.median(runs[m]), 1) for m in ol.MODES}
    assert {k: r[k] for k in ("median_rps", "ratio_on_off", "goal")} == ol.summarize(runs)
    assert r["sink_received"]["requests"] > 0 and r["sink_received"]["bytes"] > 0  # traces were exported
    assert "On / off" in ol.render(r)
