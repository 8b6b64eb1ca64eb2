"""``tools/startup.py``: the start-up measurement and its committed report.

Timings vary by machine and load, so the committed report is held to its structure, to the
arithmetic between its runs, medians and goals, to the lazy model (every run saw a 503
``embedder_loading`` with ``Retry-After`` before its first answer) and to the memory goal;
not to equality with a new run. One real start runs under the ``slow`` mark."""

from __future__ import annotations

import json

import pytest

from tools import startup

RUN = {
    "first_health_200_s": 0.42,
    "cpu_s_at_first_health": 0.4,
    "rss_at_first_health_mb": 100.0,
    "rss_before_first_ask_mb": 101.0,
    "first_answer_after_s": 1.05,
    "rss_after_first_answer_mb": 290.0,
    "ask_replies": [
        {"status": 503, "error": "embedder_loading", "retry_after": "1"},
        {"status": 200, "error": None, "retry_after": None},
    ],
    "rss_after_warm_up_mb": 150.0,
    "warm_up_replies": {"answer 200": 224, "ask 200": 99, "ask 503 abandoned": 1},
}
BREAKDOWN = {
    "rss_start_mb": 12.0,
    "grew_mb": {"imports": 50.0, "index": 25.0, "onnx": 40.0, "warm_up": 10.0},
    "index_arrays_mb": 9.0,
    "bm25_mb": 0.8,
    "cache_entries": {"content_word": 7000},
    "rss_end_mb": 137.0,
    "rest_mb": 13.0,
}


def report_of(runs: list[dict]) -> dict:
    summary = startup.summarise(runs)
    meta = {"date": "2026-01-01", "cpu_count": 2, "python": "3.11.7", "runs": len(runs), "poll_s": 0.005}
    meta |= {"idle_s": 1.0, "load_average_1m": 0.5, "command": "rag-contract serve", "bytecode": "compiled"}
    meta["warm_up"] = "every fixed question, then 100 free-text questions of eval/sealed"
    return {"meta": meta, "runs": runs, "median": summary, "goals": startup.goals(summary), "breakdown": BREAKDOWN}


def test_the_median_decides_the_goals_and_each_goal_turns_red():
    slow = {**RUN, "first_health_200_s": 0.9, "rss_before_first_ask_mb": 130.0}
    fine = report_of([RUN, RUN, slow])
    assert fine["median"]["first_health_200_s"] == 0.42
    assert all(g["met"] for g in fine["goals"].values())
    bad = report_of([slow, slow, RUN])
    assert bad["goals"]["first_health_200_s"] == {"target": 0.5, "value": 0.9, "met": False}
    assert bad["goals"]["rss_before_first_ask_mb"]["met"] is False
    heavy = report_of([{**RUN, "rss_after_warm_up_mb": 161.0}])
    assert heavy["goals"]["rss_after_warm_up_mb"] == {"target": 160.0, "value": 161.0, "met": False}


def test_render_has_a_row_per_run_the_replies_seen_and_the_goals():
    text = startup.render(report_of([RUN, RUN]))
    assert text.count("| 0.42 s | 0.40 s | 100 MB | 101 MB | 1.05 s | 290 MB |") == 2
    assert (
        "503 embedder_loading (Retry-After 1), 200 | 150 MB | answer 200: 224, ask 200: 99, ask 503 abandoned: 1 |"
        in text
    )
    assert "goal <= 0.5 s: met" in text and "goal <= 120 MB: met" in text
    assert "goal <= 160 MB, one worker: met" in text
    assert "| project and index: the rest (corpus, sections, chunks, sentences, vocabularies) | 15.2 |" in text
    assert "| rest: uvicorn, the HTTP app and its kept answers (served RSS minus the parts) | 13.0 |" in text
    assert "goal <= 0.5 s: missed" in startup.render(report_of([{**RUN, "first_health_200_s": 2.0}]))


def test_the_committed_report_is_consistent_and_meets_the_memory_goal(root, project):
    report = json.loads((root / "eval" / "results" / "startup.json").read_text())
    runs = report["runs"]
    assert len(runs) == report["meta"]["runs"] >= 3
    assert report["median"] == startup.summarise(runs)
    assert report["goals"] == startup.goals(report["median"])
    for run in runs:
        assert set(run) == set(RUN)
        first, last = run["ask_replies"][0], run["ask_replies"][-1]
        assert first == {"status": 503, "error": "embedder_loading", "retry_after": "1"}  # nothing loaded early
        assert last["status"] == 200
        assert run["rss_at_first_health_mb"] <= run["rss_before_first_ask_mb"] < run["rss_after_first_answer_mb"]
        # the warm-up asked every fixed question and every free-text one, and was answered
        replies = run["warm_up_replies"]
        assert sum(replies.values()) == len(project.questions.questions) + startup.WARM_UP_FREE_TEXT
        assert replies.get("answer 200", 0) > 0 and replies.get("ask 200", 0) > 0
    assert report["goals"]["rss_before_first_ask_mb"]["met"] is True
    b = report["breakdown"]
    assert set(b) == set(BREAKDOWN) and set(b["grew_mb"]) == set(BREAKDOWN["grew_mb"])
    assert b["rest_mb"] == round(report["median"]["rss_after_warm_up_mb"] - b["rss_end_mb"], 1)
    assert b["index_arrays_mb"] + b["bm25_mb"] <= b["grew_mb"]["index"]


@pytest.mark.slow
def test_one_real_start_on_loopback(root):
    run = startup.measure_once(root)
    assert set(run) == set(RUN)
    assert run["first_health_200_s"] > 0 and run["cpu_s_at_first_health"] > 0
    assert run["ask_replies"][0]["error"] == "embedder_loading" and run["ask_replies"][-1]["status"] == 200
    assert run["rss_before_first_ask_mb"] <= startup.GOAL_RSS_MB < run["rss_after_first_answer_mb"]
