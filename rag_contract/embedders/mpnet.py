"""all-mpnet-base-v2 as an int8 ONNX file in the project's ``models/``: measured beside the
served MiniLM (docs/adr/0006-adapted-retriever.md), never shipped by the default install.

Contract: ``MPNetEmbedder`` runs ``models/mpnet-base-int8.onnx`` with the model's own
``models/mpnet-base.tokenizer.json`` through the same pipeline as ``LocalEmbedder`` (windows of
the model's 384 word-pieces framed by ``<s>`` and ``</s>``, mean pooling over the mask, weighted
mean of windows, L2 norm), 768 dimensions. Both files are written by ``python -m tools.mpnet_base``
from the verified archive; the tokenizer must be the archive's (its sha256 is checked before
use) and the model's sha256 is in the identity, so an index built with another file is stale.
A project selects it by naming ``mpnet-base-int8`` as ``index.embedder``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from rag_contract.embedders.local import AdaptedEmbedder

MPNET_NAME = "mpnet-base-int8"
# tokenizer.json of all-mpnet-base-v2 as the archive carries it (tools/mpnet_base.py lists every file)
MPNET_TOKENIZER_SHA256 = "b8be2c30ba5dd723a6d5ee26d013da103d5408d92ddcb23747622f9e48f1d842"


def mpnet_model_file(models: Path) -> Path:
    return models / f"{MPNET_NAME}.onnx"


def mpnet_tokenizer_file(models: Path) -> Path:
    return models / "mpnet-base.tokenizer.json"


@dataclass(frozen=True)
class MPNetEmbedder(AdaptedEmbedder):
    """all-mpnet-base-v2, int8, from the project's ``models/``; a missing file is refused naming it."""

    model_file: Path = Path("models") / f"{MPNET_NAME}.onnx"
    tokenizer_file: Path = Path("models") / "mpnet-base.tokenizer.json"
    window_tokens: int = 384  # the model's max_seq_length (sentence_bert_config.json)

    name = MPNET_NAME
    remedy = "run `python -m tools.mpnet_base`"
    cls_token = "<s>"
    sep_token = "</s>"

    @property
    def dimensions(self) -> int:
        return 768

    @property
    def _tokenizer_path(self) -> Path:
        return self.tokenizer_file

    @property
    def _tokenizer_sha256(self) -> str:
        return MPNET_TOKENIZER_SHA256
