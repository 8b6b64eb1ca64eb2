"""tools/name_free: what the index's JSON API answers becomes free, taken (naming whose) or unknown,
against a fake index on loopback that answers as the real one does (no network)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from tools.name_free import lookup, main, normalize, project_name

# The answer the real index gives for the project that took ``rag-contract`` (trimmed to what is read).
TAKEN = {
    "info": {
        "name": "rag-contract",
        "summary": "Tiny CI tool for RAG retrieval regression testing.",
        "version": "0.1.0",
    },
    "releases": {"0.1.0": []},
}


class _Index(BaseHTTPRequestHandler):
    asked: list[str] = []

    def do_GET(self) -> None:  # noqa: N802 (the handler's name is http.server's)
        self.asked.append(self.path)
        if self.path == "/pypi/rag-contract/json":
            body, status = json.dumps(TAKEN).encode(), 200
        elif self.path == "/pypi/broken/json":
            body, status = b"upstream unavailable", 503
        else:
            body, status = b'{"message": "Not Found"}', 404
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def index() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Index)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    _Index.asked = []
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_a_name_the_index_does_not_know_is_free(index, capsys):
    assert lookup("rag-contract-gate", index) is None
    assert main(["rag-contract-gate", "--index", index]) == 0
    assert "rag-contract-gate: free" in capsys.readouterr().out


def test_a_taken_name_is_refused_naming_the_project_that_has_it(index, capsys):
    taken = lookup("rag-contract", index)
    assert taken is not None and taken.versions == ("0.1.0",) and "Tiny CI tool" in taken.summary
    assert main(["rag-contract", "--index", index]) == 1
    assert "TAKEN" in capsys.readouterr().out


def test_the_name_is_asked_as_the_index_spells_it(index):
    # Rag_Contract and rag.contract are the same project to the index as rag-contract
    assert lookup("Rag_Contract", index) is not None and lookup("rag..contract", index) is not None
    assert _Index.asked == ["/pypi/rag-contract/json", "/pypi/rag-contract/json"]
    assert normalize("A._-b__C") == "a-b-c"


def test_an_index_that_cannot_answer_is_never_read_as_free(index, capsys):
    assert main(["broken", "--index", index]) == 2
    assert main(["anything", "--index", "http://127.0.0.1:9"]) == 2  # nothing listens on the discard port
    assert "could not ask" in capsys.readouterr().err


def test_without_a_name_the_distribution_in_pyproject_is_asked(index):
    assert project_name() == "rag-contract-gate"
    assert main(["--index", index]) == 0
    assert _Index.asked == ["/pypi/rag-contract-gate/json"]
