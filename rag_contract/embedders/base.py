"""What every embedder promises: text in, unit vectors out, and an identity naming
everything that changes a vector (an input of the index version)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

import numpy as np


class EmbedderError(ValueError):
    pass


class EmbedderUnavailable(EmbedderError):
    """A query could not be embedded right now (a service error for that request, 503)."""


class EmbedderLoading(EmbedderUnavailable):
    """The embedder's model is being loaded off the request path: ask again in
    ``retry_after_s`` seconds (a 503 with ``Retry-After``, never a deadline spent loading)."""

    def __init__(self, name: str, retry_after_s: int):
        super().__init__(f"embedder {name!r} is loading its model; retry in {retry_after_s} s")
        self.retry_after_s = retry_after_s


class Embedder(Protocol):
    @property
    def identity(self) -> str: ...

    @property
    def dimensions(self) -> int: ...

    def embed(self, texts: Sequence[str], progress: Callable[[int], None] | None = None) -> np.ndarray:
        """float32 array (len(texts), dimensions), rows L2-normalised."""
        ...
