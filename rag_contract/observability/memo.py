"""Bounded memos: what observing a request computes once and reuses, without growing for ever.

``BoundedMemo(limit)`` is a dict read as usual (``memo.get(key)``) and written through
``keep(key, value)``, which empties it first when it already holds ``limit`` entries: values
that repeat (a route's encoded label, a question's digest) are made once, and a stream of
distinct keys costs a rebuild now and then, never unbounded memory.

``IdentityMemo(limit)`` is the same keyed by an object's identity, for objects that are not
hashable by value or are costly to hash (a kept ``Answer``, a shared attribute layer): each entry
holds its object, so the object's id cannot be reused while it is remembered.
"""

from __future__ import annotations

from typing import Generic, TypeVar

K = TypeVar("K")
V = TypeVar("V")


class BoundedMemo(dict[K, V]):
    """A dict emptied by ``keep`` once it holds ``limit`` entries."""

    def __init__(self, limit: int):
        super().__init__()
        if limit < 1:
            raise ValueError(f"limit must be >= 1, got {limit!r}")
        self.limit = limit

    def keep(self, key: K, value: V) -> V:
        """Remember ``value`` under ``key`` (emptying the memo first when full); returns ``value``."""
        if len(self) >= self.limit:
            self.clear()
        self[key] = value
        return value


class IdentityMemo(Generic[V]):
    """A ``BoundedMemo`` keyed by the identity of an object it holds on to."""

    def __init__(self, limit: int):
        self._memo: BoundedMemo[int, tuple[object, V]] = BoundedMemo(limit)

    def get(self, obj: object) -> V | None:
        hit = self._memo.get(id(obj))
        return hit[1] if hit is not None and hit[0] is obj else None

    def keep(self, obj: object, value: V) -> V:
        self._memo.keep(id(obj), (obj, value))
        return value
