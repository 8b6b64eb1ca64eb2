"""Embedders by name: the factory sits above the backends so that neither backend imports it."""

from __future__ import annotations

from collections.abc import Callable

from rag_contract.embedders.base import Embedder, EmbedderError
from rag_contract.embedders.local import LocalEmbedder
from rag_contract.embedders.openai_api import OpenAIEmbedder

__all__ = ["EMBEDDERS", "Embedder", "EmbedderError", "make_embedder"]

EMBEDDERS: dict[str, Callable[[], Embedder]] = {
    LocalEmbedder.name: LocalEmbedder,
    OpenAIEmbedder.name: OpenAIEmbedder,
}


def make_embedder(name: str) -> Embedder:
    """The embedder named in configuration; an unknown name is refused with the known ones.

    Constructing one loads no model and makes no call."""
    try:
        return EMBEDDERS[name]()
    except KeyError:
        raise EmbedderError(f"index.embedder: unknown embedder {name!r}; known: {sorted(EMBEDDERS)}") from None
