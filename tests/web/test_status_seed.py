"""The served status is seeded from the project the server loaded (one read of the inputs per
start), equals what ``index_status`` reads from disk, and still follows an edit made later."""

from __future__ import annotations

from starlette.testclient import TestClient

from rag_contract.index.status import IndexStatus, StatusCache, index_status
from rag_contract.project import Paths
from rag_contract.web.serving import build_served_app
from tools.project_copy import copy_project, edit_thresholds


def _rechunk(raw: dict) -> None:
    raw["index"]["chunk_words"] += 1


def test_the_seeded_status_is_the_status_on_disk_and_an_edit_after_start_is_seen(root, tmp_path):
    checkout = copy_project(root, tmp_path / "project")
    with TestClient(build_served_app(checkout)) as client:
        first = client.get("/health").json()
        edit_thresholds(checkout, _rechunk)
        after = client.get("/health").json()
    assert first["fresh"] is True and first["changes"] == []
    assert after["fresh"] is False and [c["what"] for c in after["changes"]] == ["chunking"]
    assert after["changes"] == index_status(Paths(checkout)).as_dict()["changes"]


def test_a_seeded_cache_reads_nothing_until_an_input_moves(root, tmp_path):
    checkout = copy_project(root, tmp_path / "project")
    calls: list[Paths] = []

    def compute(paths: Paths) -> IndexStatus:
        calls.append(paths)
        return index_status(paths)

    cache = StatusCache(Paths(checkout), compute=compute)
    cache.seed(cache.stamp(), index_status(Paths(checkout)))
    assert cache.get().fresh and calls == []
    edit_thresholds(checkout, _rechunk)
    assert not cache.get().fresh and calls == [Paths(checkout)]
