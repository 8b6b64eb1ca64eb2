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
- ``tests/web/test_redbot.py`` serves the app as ``serve`` does (the served assembly, the
  h11 protocol with its checks) on loopback with a rate allowance REDbot cannot spend (all its
  requests come from one address), waits for ``/health/ready``, and holds ``complaints`` empty.

Loopback only: REDbot is given nothing but URLs on 127.0.0.1.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

CHECKOUT = Path(__file__).resolve().parent.parent
LEVELS_REFUSED = ("BAD", "WARN")
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


def lint_one(url: str, redbot: str) -> list[Note]:
    out = subprocess.run(
        [redbot, "-o", "har", url], capture_output=True, text=True, timeout=REDBOT_TIMEOUT_S, check=True
    )
    return notes_of(json.loads(out.stdout))


def lint(base_url: str, redbot: str, targets: Mapping[str, Sequence[str]] = TARGETS) -> dict[str, list[Note]]:
    return {path: lint_one(base_url + path, redbot) for paths in targets.values() for path in paths}


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
