"""Validators and conditional GET, as RFC 9110 and RFC 9111 define them (plain functions).

- ``entity_tag(parts, weak=...)``: an entity tag (RFC 9110 section 8.8.3) that is a digest of
  ``parts``, everything the representation depends on. A route passes **weak** when two
  responses under one tag may differ in bytes that do not change their meaning (an answer's
  budget timings, section 8.8.1), and **strong** only when the tag fixes every byte.
- ``not_modified(if_none_match, current)``: True when the ``If-None-Match`` field makes the
  condition false for ``current`` (section 13.1.2: the weak comparison function, and ``*``
  for any current representation), i.e. a GET or HEAD is answered 304 (section 13.2.2, step
  3). An absent or unparseable field is no condition at all.
- ``CACHE_CONTROL``: ``no-cache`` (RFC 9111 section 5.2.2.4): a cache may store the response
  but must revalidate it with the origin before every reuse. An answer is only as current
  as the index it came from, and a cutover rebinds that index at an instant no freshness
  lifetime could predict; with ``no-cache`` a reuse costs one conditional request, answered
  304 while the tag holds and 200 with the new representation from the first request after
  a cutover.

- ``precondition_failed(if_match, current)``: True when ``If-Match`` makes the condition false
  (section 13.1.1: the strong comparison function, so a weak tag never matches; ``*`` for any
  current representation), i.e. the request is answered 412 (section 13.2.2, step 1), before
  ``If-None-Match`` is looked at. A field that is not a list of tags cannot be true: 412.
- ``conditional_status(if_match, if_none_match, current)``: both, in that order: 412, 304 or
  None (serve the representation).

A field sent on several lines is one list (RFC 9110 section 5.3): callers pass the lines
joined with ", ".

Preconditions are evaluated only where the response without them would be 2xx (section
13.2.1): a 404 or 503 never carries a tag and ignores the field. A 304 carries the fields a
200 would have carried among ETag, Cache-Control and Vary (section 15.4.5).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable

CACHE_CONTROL = "no-cache"

# entity-tag = [ weak ] opaque-tag; opaque-tag = DQUOTE *etagc DQUOTE (RFC 9110 section 8.8.3).
# etagc excludes DQUOTE, so a tag ends at the next quote; commas inside one are part of it.
_TAG = re.compile(r'\s*(W/)?("[\x21\x23-\x7e\x80-\xff]*")\s*(?:,|$)')


def entity_tag(parts: Iterable[str | bytes], *, weak: bool) -> str:
    """``"<digest>"`` or ``W/"<digest>"``: 32 hex digits of sha256 over ``parts``, each
    length-prefixed so that no two different sequences of parts share a digest input."""
    h = hashlib.sha256()
    for part in parts:
        data = part.encode("utf-8") if isinstance(part, str) else part
        h.update(len(data).to_bytes(8, "big"))
        h.update(data)
    opaque = f'"{h.hexdigest()[:32]}"'
    return f"W/{opaque}" if weak else opaque


def opaque_tag(tag: str) -> str:
    """The tag without its weakness indicator: what the weak comparison compares."""
    return tag[2:] if tag.startswith("W/") else tag


def listed_tags(field: str) -> list[str] | None:
    """The entity tags of an ``If-None-Match`` list (``#entity-tag``), or None when the field
    is not one (a server then evaluates no condition rather than guess)."""
    tags: list[str] = []
    pos = 0
    text = field.strip()
    while pos < len(text):
        if text[pos] in ", \t":  # empty list elements are allowed (RFC 9110 section 5.6.1)
            pos += 1
            continue
        m = _TAG.match(text, pos)
        if m is None:
            return None
        tags.append((m.group(1) or "") + m.group(2))
        pos = m.end()
    return tags or None


def weak_match(a: str, b: str) -> bool:
    """RFC 9110 section 8.8.3.2: equal opaque tags, whether either or both are weak."""
    return opaque_tag(a) == opaque_tag(b)


def not_modified(if_none_match: str | None, current: str) -> bool:
    """True when ``If-None-Match`` evaluates false for the current tag (answer 304)."""
    if if_none_match is None:
        return False
    if if_none_match == current:
        return True  # the tag as it was sent, alone: what a revalidating client nearly always sends
    if if_none_match.strip() == "*":
        return True  # a current representation exists: the caller only asks with one
    tags = listed_tags(if_none_match)
    return tags is not None and any(weak_match(t, current) for t in tags)


def strong_match(a: str, b: str) -> bool:
    """RFC 9110 section 8.8.3.2: equal, and neither weak."""
    return a == b and not a.startswith("W/")


def precondition_failed(if_match: str | None, current: str) -> bool:
    """True when ``If-Match`` evaluates false for the current tag (answer 412)."""
    if if_match is None or if_match.strip() == "*":
        return False  # no condition, or any current representation: the caller only asks with one
    tags = listed_tags(if_match)
    return tags is None or not any(strong_match(t, current) for t in tags)


def conditional_status(if_match: str | None, if_none_match: str | None, current: str) -> int | None:
    """412, 304, or None: section 13.2.2's steps 1 and 3 for a GET or HEAD (this service has no
    Last-Modified, so steps 2 and 4 have nothing to compare)."""
    if precondition_failed(if_match, current):
        return 412
    if not_modified(if_none_match, current):
        return 304
    return None
