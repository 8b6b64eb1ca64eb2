"""REDbot, an HTTP linter nobody here wrote, run against every route of a served instance.

Contract:
- ``TARGETS`` is every route of the app (``rag_contract.web.app.ROUTES``), each as one or more
  URLs on a served instance: the success and the failure a client meets (a 404, a 422, a 307).
  A test holds that no route is left out.
- ``find_redbot()`` is the ``redbot`` command: ``$REDBOT``, else ``.venv-redbot/bin/redbot`` in
  the checkout (``make .venv-redbot/.installed``), else one on ``PATH``; None when there is none.
  REDbot and its fifteen dependencies live in a venv of their own, outside the project's: they
  are not light (about 90 MB, with babel, cryptography and netaddr) and nothing the service
  runs needs them.
- ``lint(base_url, redbot)`` runs ``redbot -o har`` on each target (REDbot makes the request
  and its own follow-ups: conditional, ranged, compressed) and returns each target's notes
  (``Note``: id, level, summary); ``complaints(results, justified)`` lists the notes of level
  ``BAD`` or ``WARN`` that ``JUSTIFIED`` does not excuse. ``JUSTIFIED`` maps (target, note id)
  to the ADR section, citing the RFC, that allows it; it is empty: no note needs one.
- ``python -m tools.redbot_lint`` runs ``rag-contract serve`` on loopback from a copy of the
  project whose one change is a rate allowance of 100 a minute, burst 100 (REDbot's requests,
  its follow-ups included, all come from one address), asks ``/health/ready`` until the model
  is loaded, lints every target and writes ``eval/results/redbot.json`` (``report``: each
  target's status and notes, the complaints); ``render`` is the README's table of it. It exits
  1 on a complaint, 2 without a ``redbot`` command.
- ``tests/web/test_redbot.py`` serves the app as ``serve`` does (the served assembly, the
  h11 protocol with its checks) on loopback with a rate allowance REDbot cannot spend (all its
  requests come from one address), waits for ``/health/ready``, and holds ``complaints`` empty.

Loopback only: REDbot is given nothing but URLs on 127.0.0.1.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rag_contract.project import Paths, find_root
from tools import loadtest, probe
from tools.project_copy import copy_project, edit_thresholds

CHECKOUT = Path(__file__).resolve().parent.parent
LEVELS_REFUSED = ("BAD", "WARN")
REPORT = "redbot.json"
REDBOT_TIMEOUT_S = 60.0

# Route template -> the URLs that exercise it (paths and queries on the served instance).
TARGETS: dict[str, tuple[str, ...]] = {
    "/health": ("/health", "/health/"),  # the second: the relative 307 of a stray slash
    "/health/live": ("/health/live",),
    "/health/ready": ("/health/ready",),
    "/questions": ("/questions",),
    "/answer/{qid}": ("/answer/q11", "/answer/q9999"),
    "/ask": ("/ask", "/ask?q=What+is+a+URI%3F", "/ask?q="),
    "/section/{ref}": ("/section/rfc9110:9.2.1", "/section/rfc9110:999"),
    "/sections": ("/sections", "/sections?grep=cache"),
    "/": ("/",),
    "/q/{qid}": ("/q/q11", "/q/q9999"),
    "/static/site.css": ("/static/site.css",),
}
# (target, note id) -> the ADR section that allows the note, by RFC section. None needed today.
JUSTIFIED: dict[tuple[str, str], str] = {}


@dataclass(frozen=True)
class Note:
    note_id: str
    level: str
    summary: str

    def as_dict(self) -> dict[str, str]:
        return {"note_id": self.note_id, "level": self.level, "summary": self.summary}


def find_redbot() -> str | None:
    for candidate in (os.environ.get("REDBOT"), str(CHECKOUT / ".venv-redbot" / "bin" / "redbot")):
        if candidate and Path(candidate).is_file() and os.access(candidate, os.X_OK):
            return candidate
    return shutil.which("redbot")


def notes_of(har: Mapping) -> list[Note]:
    """Every note REDbot wrote into a HAR document (``-o har``), in its order."""
    return [
        Note(m["note_id"], m["level"], m["summary"])
        for entry in har["log"]["entries"]
        for m in entry.get("_red_messages", [])
    ]


def status_of(har: Mapping) -> int | None:
    """The status of the response REDbot checked (its first entry)."""
    entries = har["log"]["entries"]
    return entries[0]["response"]["status"] if entries else None


def lint_one(url: str, redbot: str) -> tuple[int | None, list[Note]]:
    out = subprocess.run(
        [redbot, "-o", "har", url], capture_output=True, text=True, timeout=REDBOT_TIMEOUT_S, check=True
    )
    har = json.loads(out.stdout)
    return status_of(har), notes_of(har)


def lint_targets(
    base_url: str, redbot: str, targets: Mapping[str, Sequence[str]] = TARGETS
) -> dict[str, tuple[int | None, list[Note]]]:
    """Each target's (status, notes)."""
    return {path: lint_one(base_url + path, redbot) for paths in targets.values() for path in paths}


def lint(base_url: str, redbot: str, targets: Mapping[str, Sequence[str]] = TARGETS) -> dict[str, list[Note]]:
    return {path: notes for path, (_, notes) in lint_targets(base_url, redbot, targets).items()}


def complaints(
    results: Mapping[str, Sequence[Note]], justified: Mapping[tuple[str, str], str] = JUSTIFIED
) -> list[str]:
    """``target: LEVEL NOTE_ID (summary)`` for each refused note no ADR justifies."""
    return [
        f"{target}: {n.level} {n.note_id} ({n.summary})"
        for target, notes in results.items()
        for n in notes
        if n.level in LEVELS_REFUSED and (target, n.note_id) not in justified
    ]


def report(results: Mapping[str, tuple[int | None, Sequence[Note]]], version: str) -> dict[str, Any]:
    """What ``eval/results/redbot.json`` holds: the REDbot version, each target's status and
    notes, and the complaints (``complaints``)."""
    notes = {target: list(found) for target, (_, found) in results.items()}
    return {
        "meta": {"command": "python -m tools.redbot_lint", "redbot": version, "date": time.strftime("%Y-%m-%d")},
        "targets": [
            {"url": target, "status": status, "notes": [n.as_dict() for n in found]}
            for target, (status, found) in results.items()
        ],
        "complaints": complaints(notes),
    }


def render(report: Mapping[str, Any]) -> str:
    """The README block: one row per target, its status, its notes by level, and BAD or WARN."""
    meta = report["meta"]
    lines = [
        f"`{meta['command']}` (REDbot {meta['redbot']}, {meta['date']}): {len(report['targets'])} URLs "
        f"covering every route, {len(report['complaints'])} BAD or WARN notes.",
        "",
        "| URL | status | GOOD | INFO | BAD or WARN |",
        "|---|---|---|---|---|",
    ]
    for t in report["targets"]:
        levels = Counter(n["level"] for n in t["notes"])
        refused = [f"{n['level']} {n['note_id']}" for n in t["notes"] if n["level"] in LEVELS_REFUSED]
        lines.append(
            f"| `{t['url']}` | {t['status']} | {levels['GOOD']} | {levels['INFO']} | {', '.join(refused) or 'none'} |"
        )
    return "\n".join(lines) + "\n"


def redbot_version(redbot: str) -> str:
    """The installed REDbot's version, from the venv its command runs in."""
    python = Path(redbot).parent / "python"
    code = "import importlib.metadata as m; print(m.version('redbot'))"
    out = subprocess.run([str(python), "-c", code], capture_output=True, text=True, timeout=30, check=False)
    return out.stdout.strip() or "unknown"


def wait_ready(base_url: str, timeout_s: float = 60.0) -> None:
    """``GET /health/ready`` until 200: the first one starts the model's load."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError), urllib.request.urlopen(base_url + "/health/ready", timeout=5) as reply:
            if reply.status == 200:
                return
        time.sleep(1.0)
    raise RuntimeError(f"{base_url} was not ready within {timeout_s} s")


def _allow_redbot(thresholds: dict) -> None:
    thresholds["rate_limit"].update(max_requests_per_minute=100, max_client_burst=100)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tools.redbot_lint", description=__doc__.split("\n")[0])
    p.add_argument("--root", help="project directory (default: found from the current directory)")
    p.add_argument("--no-write", action="store_true", help="print only")
    args = p.parse_args(argv)
    redbot = find_redbot()
    if redbot is None:
        print("redbot_lint: no redbot command (make .venv-redbot/.installed)", file=sys.stderr)
        return 2
    root = Path(args.root).resolve() if args.root else find_root()
    with tempfile.TemporaryDirectory(prefix="ragc-redbot-") as tmp:
        copy = copy_project(root, Path(tmp) / "project")
        edit_thresholds(copy, _allow_redbot)
        log = Path(tmp) / "serve.log"
        with loadtest.running_server(probe.serve_argv(copy), copy, probe.server_env(), log, 1) as (_, port):
            base = f"http://{probe.HOST}:{port}"
            wait_ready(base)
            result = report(lint_targets(base, redbot), redbot_version(redbot))
    if not args.no_write:
        Paths(root).result(REPORT).write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    print(render(result), end="")
    for line in result["complaints"]:
        print(line, file=sys.stderr)
    return 1 if result["complaints"] else 0


if __name__ == "__main__":
    sys.exit(main())
