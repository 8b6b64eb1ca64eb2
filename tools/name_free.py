"""Is the distribution name still free on the package index? Asks the index's JSON API
(``GET <index>/pypi/<name>/json``): 404 means nobody has published under the name, 200 means
someone has, and this prints whose project it is.

``rag-contract`` itself was taken by an unrelated project before this one was published, so the
distribution is named ``rag-contract-gate`` (the command stays ``rag-contract``, the import package
``rag_contract``). Run this before a release; it needs the network, so it is not part of the gate.

    python -m tools.name_free                     # the name in pyproject.toml; exit 0 free, 1 taken, 2 unknown
    python -m tools.name_free some-name --index https://pypi.org
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tomllib
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path

PYPROJECT = Path(__file__).resolve().parent.parent / "pyproject.toml"
INDEX = "https://pypi.org"


@dataclass(frozen=True)
class Taken:
    """Someone else's project under the name: what the index says it is."""

    name: str
    summary: str
    versions: tuple[str, ...]


def normalize(name: str) -> str:
    """The index's name for a project (PEP 503): runs of ``-``, ``_`` and ``.`` are one ``-``, lower case."""
    return re.sub(r"[-_.]+", "-", name).lower()


def project_name(pyproject: Path = PYPROJECT) -> str:
    return str(tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]["name"])


def lookup(name: str, index: str = INDEX, timeout: float = 20.0) -> Taken | None:
    """None when the index has no project of that name; the project when it has one.

    Any answer but 200 or 404, and any network failure, raises: "could not ask" is never "free".
    """
    url = f"{index.rstrip('/')}/pypi/{urllib.parse.quote(normalize(name))}/json"
    request = urllib.request.Request(url, headers={"Accept": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            body = json.load(response)
    except urllib.error.HTTPError as e:
        if e.code == 404:
            return None
        raise
    info = body["info"]
    return Taken(str(info["name"]), str(info.get("summary") or ""), tuple(sorted(body.get("releases", {}))))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.name_free", description=__doc__.split("\n\n")[0])
    parser.add_argument("name", nargs="?", help="the distribution name (default: pyproject.toml's)")
    parser.add_argument("--index", default=INDEX, help=f"the index's base URL (default {INDEX})")
    args = parser.parse_args(argv)
    name = args.name or project_name()
    try:
        taken = lookup(name, args.index)
    except (OSError, ValueError, KeyError) as e:
        print(f"{name}: could not ask {args.index}: {e}", file=sys.stderr)
        return 2
    if taken is None:
        print(f"{name}: free on {args.index}")
        return 0
    releases = ", ".join(taken.versions) or "no releases"
    print(f"{name}: TAKEN on {args.index} by {taken.name!r} ({releases}): {taken.summary}")
    return 1


if __name__ == "__main__":
    sys.exit(main())
