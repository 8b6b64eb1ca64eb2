"""Cutover: which Index is served.

``Registry`` holds one reference to a frozen Index. A request calls ``acquire()`` once and
uses only the object it got; ``install()`` rebinds the reference. Rebinding a name is atomic
in CPython, and the Index is frozen and self-contained (chunks, vectors, question vectors,
passages), so a request sees the whole old index or the whole new one and never a mixture:
no lock, no counter, no drain. ``reload()`` loads and validates before it swaps, so a
broken index never replaces a good one.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from rag_contract.config.unreadable import unreadable
from rag_contract.index.store import Index, IndexLoadError, load_index


class Registry:
    """One reference to the Index being served. acquire() once per request."""

    def __init__(self, index: Index | None = None, load_error: str | None = None):
        self._index = index
        self.load_error = load_error
        self.reload_error: str | None = None

    def acquire(self) -> Index | None:
        return self._index

    def install(self, index: Index) -> None:
        self._index = index
        self.load_error = None

    def reload(self, directory: Path, load: Callable[[Path], Index] = load_index) -> Index:
        """Load first, swap second: a broken index raises here and the good one stays.

        The failure is kept in ``reload_error`` so /health can say why a rebuild is not served.
        """
        try:
            index = load(directory)
        except Exception as exc:
            self.reload_error = f"{type(exc).__name__}: {exc}"
            raise
        self.install(index)
        self.reload_error = None
        return index

    @classmethod
    def at_startup(cls, directory: Path, load: Callable[[Path], Index] = load_index) -> Registry:
        """A missing or unloadable index does not kill the process; /health says why."""
        try:
            return cls(load(directory))
        except (IndexLoadError, ValueError) as exc:
            return cls(None, load_error=str(exc))
        except OSError as exc:  # the loader names what it reads; anything else by name, not path
            return cls(None, load_error=unreadable(exc.filename or directory, exc))
