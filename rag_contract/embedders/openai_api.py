"""``text-embedding-3-small`` through the ``openai`` client, capped by the spend ledger.

Contract (the ``Embedder`` protocol, plus spend):

- ``identity`` is ``openai-text-embedding-3-small;dims=1536``; constructing the embedder
  needs no key and makes no call (``index-status`` reads the identity only).
- ``embed(texts, progress)`` sends batches of ``batch_size`` texts. BEFORE each call it
  asks ``ledger.authorise`` with ``price_embedding`` of that batch, so a refusal
  (``SpendRefused``) sends nothing more; AFTER each call it records the reported usage.
  Rows come back float32 and L2-normalised; a response of the wrong shape is refused.
- ``authorise_build(project, texts)`` prices the whole rebuild (``texts``: every chunk's embedded
  text and every question, ``index.store.rebuild_texts``) and raises ``SpendRefused`` before any call if
  it cannot fit today's cap. It holds nothing: each batch is still authorised.

Dependencies are injected (tests pass a client on a loopback fake, a ledger on a temporary
file and a fake clock). Left ``None``, they are made when first needed: from the project
given to ``authorise_build``, else from the project found at the current directory - the
ledger ``.spend-ledger.json`` in its root, capped at ``budget.daily_cap_usd``, priced from
``eval/prices.yaml``, the client from ``live.make_client``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from rag_contract.config.thresholds import load_thresholds
from rag_contract.embedders.base import EmbedderError
from rag_contract.openai_client import check_no_retries, make_client
from rag_contract.project import Paths, find_root
from rag_contract.spend import (
    EMBEDDING_MODEL,
    Prices,
    SpendLedger,
    cost_of_embedding,
    load_prices,
    open_ledger,
    price_embedding,
    priced_rebuild,
    prices_path,
)

DIMENSIONS = 1536  # text-embedding-3-small's native size; requested explicitly


class OpenAIEmbedder:
    name = "openai-text-embedding-3-small"
    model = EMBEDDING_MODEL

    def __init__(
        self,
        client: Any = None,
        ledger: SpendLedger | None = None,
        prices: Prices | None = None,
        batch_size: int = 100,
    ):
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        self._client = client
        self._ledger = ledger
        self._prices = prices
        self.batch_size = batch_size

    @property
    def identity(self) -> str:
        return f"{self.name};dims={DIMENSIONS}"

    @property
    def dimensions(self) -> int:
        return DIMENSIONS

    # dependencies, made on first use when not injected ---------------------------------------

    def _bind(self, root: Path, daily_cap_usd: float) -> None:
        if self._prices is None:
            self._prices = load_prices(prices_path(root))
        if self._ledger is None:
            self._ledger = open_ledger(root, daily_cap_usd, time.time)

    def _bind_found_project(self) -> None:
        root = find_root()
        self._bind(root, load_thresholds(Paths(root).thresholds).budget.daily_cap_usd)

    def _deps(self) -> tuple[Any, SpendLedger, Prices]:
        if self._ledger is None or self._prices is None:
            self._bind_found_project()
        if self._client is None:
            self._client = make_client(None, None)
        check_no_retries(self._client)
        assert self._ledger is not None and self._prices is not None
        return self._client, self._ledger, self._prices

    # spend -------------------------------------------------------------------------------

    def authorise_build(self, project: Any, texts: Sequence[str]) -> float:
        """Refuse (``SpendRefused``, before any call, nothing written) a rebuild that cannot
        fit today's cap; otherwise return its priced upper bound (USD)."""
        self._bind(project.paths.root, project.thresholds.budget.daily_cap_usd)
        assert self._ledger is not None and self._prices is not None
        bound = priced_rebuild(self._prices, texts, self.model)
        self._ledger.check(bound, f"build-index ({len(texts)} texts, {self.model})")
        return bound

    # the Embedder protocol -------------------------------------------------------------------

    def embed(self, texts: Sequence[str], progress: Callable[[int], None] | None = None) -> np.ndarray:
        out = np.zeros((len(texts), DIMENSIONS), dtype=np.float32)
        if not texts:
            return out
        client, ledger, prices = self._deps()
        prices.input(self.model)  # an unpriced model is refused before the first call
        n = -(-len(texts) // self.batch_size)
        for b, start in enumerate(range(0, len(texts), self.batch_size)):
            batch = list(texts[start : start + self.batch_size])
            what = f"embeddings {self.model} batch {b + 1}/{n} ({len(batch)} texts)"
            bound = price_embedding(prices, self.model, batch)
            ledger.authorise(bound, what)  # refusal: nothing sent
            response = client.embeddings.create(
                model=self.model, input=batch, dimensions=DIMENSIONS, encoding_format="float"
            )
            usage = getattr(response, "usage", None)
            if usage is None:  # billed, but unreported: record the most it can have cost
                ledger.record(bound, what, {"model": self.model, "reported": False})
            else:
                tokens = usage.prompt_tokens
                ledger.record(
                    cost_of_embedding(prices, self.model, tokens), what, {"model": self.model, "prompt_tokens": tokens}
                )
            out[start : start + len(batch)] = _unit_rows(response.data, len(batch), what)
            if progress:
                progress(len(batch))
        return out


def _unit_rows(data: Sequence[Any], expected: int, what: str) -> np.ndarray:
    rows = sorted(data, key=lambda d: d.index)  # the API tags each row with its input's index
    if [d.index for d in rows] != list(range(expected)):
        raise EmbedderError(f"{what}: response has rows {[d.index for d in rows]}, expected 0..{expected - 1}")
    arr = np.asarray([d.embedding for d in rows], dtype=np.float64)
    if arr.shape != (expected, DIMENSIONS):
        raise EmbedderError(f"{what}: response shape {arr.shape}, expected ({expected}, {DIMENSIONS})")
    norms = np.linalg.norm(arr, axis=1, keepdims=True)
    if not np.all(np.isfinite(norms)) or np.any(norms == 0):
        raise EmbedderError(f"{what}: response has a zero or non-finite vector")
    return (arr / norms).astype(np.float32)
