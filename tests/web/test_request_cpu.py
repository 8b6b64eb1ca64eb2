"""``tools.request_cpu``: every case answers as expected at both layers, and the table renders."""

from __future__ import annotations

import json

from tools import request_cpu


def test_every_case_and_layer_is_measured(root):
    results = request_cpu.run(root, count=20, rounds=1)  # measure() raises on any unexpected status
    assert set(results) == {(c, layer) for c in request_cpu.CASES for layer in request_cpu.LAYERS}
    assert all(len(v) == 1 and v[0].loop_us > 0 for v in results.values())
    assert all(s.traces_us == 0 for (case, _), v in results.items() if case != "observed" for s in v)
    rep = request_cpu.report(results, 20, 1)
    table = request_cpu.render(rep)
    assert table.count("| http |") == table.count("| asgi |") == len(request_cpu.CASES)
    assert set(rep["goals"]) == set(request_cpu.GOALS) and "observed vs full (http)" in table


def committed(root):
    return json.loads((root / "eval" / "results" / "request_cpu.json").read_text())


def test_the_committed_ratios_and_goals_follow_from_its_rows(root):
    rep = committed(root)
    us = {(r["case"], r["layer"]): r["us"] for r in rep["rows"]}
    for layer, ratios in rep["ratios"].items():
        assert ratios["full_vs_bare"] == round(us["bare", layer] / us["full", layer], 3)
        assert ratios["revalidate_vs_bare"] == round(us["bare", layer] / us["revalidate", layer], 3)
        assert ratios["observed_vs_full"] == round(us["full", layer] / us["observed", layer], 3)
    for k, g in rep["goals"].items():
        assert g["value"] == rep["ratios"]["http"][k] and g["met"] == (g["value"] >= g["target"])


def test_a_goal_turns_missed_when_its_ratio_falls():
    spent = {(c, layer): [request_cpu.Spent(100.0)] for c in request_cpu.CASES for layer in request_cpu.LAYERS}
    assert all(g["met"] for g in request_cpu.report(spent, 1, 1)["goals"].values())
    spent["observed", "http"] = [request_cpu.Spent(80.0, 40.0)]  # 120 us against full's 100: 0.83x
    goals = request_cpu.report(spent, 1, 1)["goals"]
    assert goals["observed_vs_full"] == {"target": 0.9, "value": 0.833, "met": False}
    assert goals["full_vs_bare"]["met"] and goals["revalidate_vs_bare"]["met"]


def test_a_request_is_the_bytes_a_client_sends():
    data = request_cpu.request_bytes(258, [(b"if-none-match", b'W/"x"')])
    assert data.startswith(b"GET /answer/q11 HTTP/1.1\r\n")
    assert b"x-forwarded-for: 10.0.1.2\r\n" in data and data.endswith(b'if-none-match: W/"x"\r\n\r\n')
