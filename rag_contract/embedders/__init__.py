"""Embedders by name: the factory sits above the backends so that neither backend imports it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from rag_contract.embedders.base import Embedder, EmbedderError
from rag_contract.embedders.local import ADAPTED_NAME, AdaptedEmbedder, LocalEmbedder, adapted_model_file
from rag_contract.embedders.mpnet import MPNET_NAME, MPNetEmbedder, mpnet_model_file, mpnet_tokenizer_file
from rag_contract.embedders.openai_api import OpenAIEmbedder

__all__ = ["EMBEDDERS", "Embedder", "EmbedderError", "make_embedder"]

EMBEDDERS: dict[str, Callable[[], Embedder]] = {
    LocalEmbedder.name: LocalEmbedder,
    OpenAIEmbedder.name: OpenAIEmbedder,
}


def make_embedder(name: str, models: Path | None = None, *, building: bool = False) -> Embedder:
    """The embedder named in configuration; an unknown name is refused with the known ones.
    ``models`` is the project's model directory, where the adapted and mpnet models live.
    ``building``: the embedder runs a build, whose local model's threads do not spin between
    runs (``LocalEmbedder.spin``); its vectors and identity are those of the served one.

    Constructing one loads no model and makes no call."""
    embedder = _named(name, models)
    return replace(embedder, spin=False) if building and isinstance(embedder, LocalEmbedder) else embedder


def _named(name: str, models: Path | None) -> Embedder:
    if name in (ADAPTED_NAME, MPNET_NAME):
        if models is None:
            raise EmbedderError(f"embedder {name}: needs the project's models directory")
        if name == MPNET_NAME:
            return MPNetEmbedder(model_file=mpnet_model_file(models), tokenizer_file=mpnet_tokenizer_file(models))
        return AdaptedEmbedder(model_file=adapted_model_file(models))
    try:
        return EMBEDDERS[name]()
    except KeyError:
        known = sorted([*EMBEDDERS, ADAPTED_NAME, MPNET_NAME])
    raise EmbedderError(f"index.embedder: unknown embedder {name!r}; known: {known}") from None
