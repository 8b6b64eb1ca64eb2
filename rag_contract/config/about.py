"""project.yaml: what the corpus is, in words, for the pages and the drafter's prompt.

Contract: ``load_about(path)`` returns ``About(name, description)`` or raises ``AboutError``
naming the file and the key. ``name`` is what the corpus is ("IETF RFCs", "the Starlette
documentation"): the live drafter is told it answers questions about it. ``description``
completes "answers over ..." in every page's header. Both are one line of at most
``MAX_CHARS`` characters; the only other key allowed is ``corpus``, the globs that say which
files are documents (``config.corpus_selection`` reads and checks it). A project without the
file is described by its directory's name (``About.default``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from rag_contract.config.yamlfile import read_mapping

MAX_CHARS = 120
_KEYS = ("name", "description")
_OTHER_KEYS = ("corpus",)  # read by config.corpus_selection


class AboutError(ValueError):
    pass


@dataclass(frozen=True)
class About:
    name: str
    description: str

    @staticmethod
    def default(root: Path) -> About:
        return About(name=f"the {root.resolve().name} documents", description=f"the {root.resolve().name} documents")


def load_about(path: Path) -> About:
    path = Path(path)
    if not path.exists():
        return About.default(path.parent)
    raw = read_mapping(path, AboutError, _KEYS + _OTHER_KEYS)
    values = {}
    for key in _KEYS:
        value = raw.get(key)
        if not isinstance(value, str) or not value.strip():
            raise AboutError(f"{path.name}: {key}: required, one line of text")
        if "\n" in value.strip() or len(value.strip()) > MAX_CHARS:
            raise AboutError(f"{path.name}: {key}: must be one line of at most {MAX_CHARS} characters")
        values[key] = value.strip()
    return About(**values)
