"""``tools.request_cpu``: every case answers as expected at both layers, and the table renders."""

from __future__ import annotations

from tools import request_cpu


def test_every_case_and_layer_is_measured(root):
    results = request_cpu.run(root, count=20, rounds=1)  # measure() raises on any unexpected status
    assert set(results) == {(c, layer) for c in request_cpu.CASES for layer in request_cpu.LAYERS}
    assert all(len(v) == 1 and v[0].loop_us > 0 for v in results.values())
    assert all(s.traces_us == 0 for (case, _), v in results.items() if case != "observed" for s in v)
    table = request_cpu.render(results, 20, 1)
    assert table.count("| http |") == len(request_cpu.CASES) + 1
    assert "observed vs full" in table


def test_a_request_is_the_bytes_a_client_sends():
    data = request_cpu.request_bytes(258, [(b"if-none-match", b'W/"x"')])
    assert data.startswith(b"GET /answer/q11 HTTP/1.1\r\n")
    assert b"x-forwarded-for: 10.0.1.2\r\n" in data and data.endswith(b'if-none-match: W/"x"\r\n\r\n')
