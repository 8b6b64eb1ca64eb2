"""Heading anchors as a documentation site gives them (Python-Markdown's ``toc`` extension,
which MkDocs uses), so a section id is the URL fragment a reader already sees.

Contract: ``slugify(title)`` is toc's default slugify: accents folded to ASCII, characters
other than word characters, spaces and hyphens dropped, lower-cased, runs of spaces and
hyphens made one ``-``. ``Anchors.unique(slug)`` is toc's collision rule within one page: a
slug already taken (or empty) gets ``_1``, then ``_2``, ...
"""

from __future__ import annotations

import re
import unicodedata

_COUNTED = re.compile(r"^(.*)_([0-9]+)$")


def slugify(title: str) -> str:
    value = unicodedata.normalize("NFKD", title).encode("ascii", "ignore").decode("ascii")
    value = re.sub(r"[^\w\s-]", "", value).strip().lower()
    return re.sub(r"[-\s]+", "-", value)


class Anchors:
    """The anchors one page has handed out so far."""

    def __init__(self) -> None:
        self._taken: set[str] = set()

    def unique(self, slug: str) -> str:
        while slug in self._taken or not slug:
            m = _COUNTED.match(slug)
            slug = f"{m.group(1)}_{int(m.group(2)) + 1}" if m else f"{slug}_1"
        self._taken.add(slug)
        return slug
