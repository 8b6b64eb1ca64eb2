"""REDbot (``tools/redbot_lint.py``), an HTTP linter written by the editor of RFC 9110 and 9111,
against every route of the app served as ``serve`` serves it: no note of level BAD or WARN that
an ADR does not justify by RFC section. The route list covers the app's routes, and the check
turns red on a note it must refuse."""

from __future__ import annotations

import dataclasses
import json
import time

import httpx
import pytest

from rag_contract.index.registry import Registry
from rag_contract.web.app import ROUTES
from rag_contract.web.ratelimit import MemoryStore
from rag_contract.web.serving import assemble
from rag_contract.web.slow_clients import HeaderDeadlineH11Protocol
from tests.support.apps import FROZEN, fresh_status, generous
from tools import redbot_lint

REDBOT = redbot_lint.find_redbot()


def test_every_route_of_the_app_is_linted():
    assert set(redbot_lint.TARGETS) == {route.path for route in ROUTES}
    assert all(redbot_lint.TARGETS.values())


def test_a_warning_or_bad_note_is_a_complaint_unless_an_adr_justifies_it():
    har = {
        "log": {
            "entries": [
                {
                    "_red_messages": [
                        {"note_id": "CL_CORRECT", "level": "GOOD", "summary": "ok"},
                        {"note_id": "FRESHNESS_NO_CACHE_NO_VALIDATOR", "level": "WARN", "summary": "no validator"},
                        {"note_id": "STORE_STORABLE", "level": "INFO", "summary": "storable"},
                    ]
                }
            ]
        }
    }
    results = {"/health": redbot_lint.notes_of(har)}
    assert redbot_lint.complaints(results) == ["/health: WARN FRESHNESS_NO_CACHE_NO_VALIDATOR (no validator)"]
    excused = {("/health", "FRESHNESS_NO_CACHE_NO_VALIDATOR"): "ADR 00xx, RFC 9111 section 5.2.2.4"}
    assert redbot_lint.complaints(results, excused) == []


def committed(root) -> dict:
    return json.loads((root / "eval" / "results" / redbot_lint.REPORT).read_text(encoding="utf-8"))


def test_the_committed_report_covers_every_target_and_complains_of_nothing(root):
    report = committed(root)
    urls = [t["url"] for t in report["targets"]]
    assert urls == [path for paths in redbot_lint.TARGETS.values() for path in paths]
    notes = {t["url"]: [redbot_lint.Note(**n) for n in t["notes"]] for t in report["targets"]}
    assert all(notes.values()) and report["complaints"] == redbot_lint.complaints(notes) == []
    text = redbot_lint.render(report)
    assert all(f"| `{url}` | " in text for url in urls) and "0 BAD or WARN notes" in text


@pytest.mark.slow
@pytest.mark.skipif(REDBOT is None, reason="no redbot command: make .venv-redbot/.installed (CI installs it)")
def test_redbot_finds_nothing_bad_and_warns_of_nothing_on_any_route(project, index, live_server, root):
    # REDbot's requests all come from one address, its follow-ups included: an allowance it cannot spend.
    served = dataclasses.replace(project, thresholds=generous(project.thresholds))
    app = assemble(
        served, Registry(index), clock=FROZEN, rate_clock=FROZEN, rate_store=MemoryStore(), status=fresh_status(index)
    )
    server = live_server(app, http=HeaderDeadlineH11Protocol)
    deadline = time.monotonic() + 60
    while httpx.get(f"{server.url}/health/ready", timeout=10).status_code != 200:  # the first starts the load
        assert time.monotonic() < deadline, "the model did not load"
        time.sleep(0.2)
    assert REDBOT is not None
    linted = redbot_lint.lint_targets(server.url, REDBOT)
    results = {url: notes for url, (_, notes) in linted.items()}
    assert len(results) == sum(len(paths) for paths in redbot_lint.TARGETS.values())
    assert all(results.values()), "a target REDbot wrote no note on"
    assert redbot_lint.complaints(results) == []
    # The committed report (python -m tools.redbot_lint) saw the same statuses.
    assert {url: status for url, (status, _) in linted.items()} == {
        t["url"]: t["status"] for t in committed(root)["targets"]
    }
