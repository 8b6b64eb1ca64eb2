"""``rag-contract serve`` with a metrics port, with two workers and with one: the real command on loopback. Every
request is counted once whichever worker served it, both workers write their share, and the
metrics are on their own port, not the public one (where the limiter sits)."""

from __future__ import annotations

import json
import sys
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tools.loadtest import HOST, free_port, running_server, server_env
from tools.probe import serve_argv

pytestmark = pytest.mark.slow
SENT = 40


def get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def samples(text: str, name: str) -> dict[str, float]:
    """{label text: value} of metric ``name`` in the exposition ``text``."""
    out = {}
    for line in text.splitlines():
        if line.startswith(name + "{"):
            labels, _, value = line[len(name) :].rpartition(" ")
            out[labels] = float(value)
    return out


def scrape_when_counted(url: str, answers: int, refused: int, timeout_s: float = 5.0) -> tuple[int, str]:
    """The metrics at ``url`` once ``answers`` requests to ``/answer/{qid}`` and ``refused``
    rate-limited ones are counted: a request is counted just after its response is sent, so the
    last one can land after the client has read its reply."""
    deadline = time.monotonic() + timeout_s
    while True:
        status, text = get(url)
        counted = samples(text, "rag_contract_requests_total")
        seen = sum(v for k, v in counted.items() if 'route="/answer/{qid}"' in k)
        limited = samples(text, "rag_contract_refused_total").get('{reason="rate_limited"}', 0.0)
        if (seen >= answers and limited >= refused) or time.monotonic() > deadline:
            return status, text
        time.sleep(0.05)


def test_two_workers_count_every_request_once_on_a_port_of_their_own(root, tmp_path):
    metrics_port = free_port()
    env = {**server_env(), "RAG_CONTRACT_METRICS_PORT": str(metrics_port), "TMPDIR": str(tmp_path)}

    def argv(port: int) -> list[str]:
        cli = [sys.executable, "-m", "rag_contract.cli", "--root", str(root)]
        return [*cli, "serve", "--host", HOST, "--port", str(port), "--workers", "2"]

    with running_server(argv, tmp_path, env, tmp_path / "serve.log", 2) as (_, port):
        base = f"http://{HOST}:{port}"
        with ThreadPoolExecutor(4) as pool:  # concurrent: both workers accept connections
            replies = list(pool.map(lambda _: get(f"{base}/answer/q11"), range(SENT)))
        statuses = [status for status, _ in replies]
        # a 503 is a request's own answer abandoned past its deadline (a loaded machine, a cold
        # first answer), which the contract allows; it is counted like any other reply. One that
        # joined another's abandoned computation is not handed that 503: it computes once more under
        # a deadline of its own (tests/web/test_storms.py), so every 503 spent a deadline itself.
        abandoned = [json.loads(body) for status, body in replies if status == 503]
        assert all(a["error"] == "abandoned" for a in abandoned)
        assert all(a["budget"]["spent_ms"] > a["budget"]["deadline_ms"] for a in abandoned)
        assert set(statuses) <= {200, 429, 503} and 200 in statuses
        public = get(f"{base}/metrics")  # not on the public port: a 404 (or the limiter's 429)
        assert public[0] in (404, 429) and "rag_contract_requests_total" not in public[1]
        limited = statuses.count(429) + (public[0] == 429)
        status, text = scrape_when_counted(f"http://{HOST}:{metrics_port}/metrics", SENT, limited)
        assert status == 200
        counted = samples(text, "rag_contract_requests_total")
        on_route = {k: v for k, v in counted.items() if 'route="/answer/{qid}"' in k}
        assert sum(on_route.values()) == SENT
        assert sum(v for k, v in on_route.items() if 'status="429"' in k) == statuses.count(429)
        refused = samples(text, "rag_contract_refused_total").get('{reason="rate_limited"}', 0.0)
        assert refused == statuses.count(429) + (public[0] == 429)
        assert 1.0 in samples(text, "rag_contract_index_info").values()
        (directory,) = Path(tmp_path).glob("rag-contract-metrics-*")
        writers = {p.stem.rsplit("_", 1)[1] for p in directory.glob("counter_*.db")}
        assert len(writers) == 2, writers
    assert not list(Path(tmp_path).glob("rag-contract-metrics-*"))  # removed at exit


def test_one_worker_counts_in_memory_and_writes_no_multiprocess_files(root, tmp_path):
    metrics_port = free_port()
    env = {**server_env(), "RAG_CONTRACT_METRICS_PORT": str(metrics_port), "TMPDIR": str(tmp_path)}

    with running_server(serve_argv(root), tmp_path, env, tmp_path / "serve.log", 1) as (_, port):
        statuses = [get(f"http://{HOST}:{port}/answer/q11")[0] for _ in range(SENT)]
        status, text = scrape_when_counted(f"http://{HOST}:{metrics_port}/metrics", SENT, statuses.count(429))
        assert status == 200
        on_route = {k: v for k, v in samples(text, "rag_contract_requests_total").items() if "/answer/{qid}" in k}
        assert sum(on_route.values()) == SENT and 200 in statuses
        refused = samples(text, "rag_contract_refused_total").get('{reason="rate_limited"}', 0.0)
        assert refused == statuses.count(429)
        assert 1.0 in samples(text, "rag_contract_index_info").values()
        assert not list(Path(tmp_path).glob("rag-contract-metrics-*"))  # nothing written per increment
