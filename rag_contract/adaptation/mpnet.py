"""all-mpnet-base-v2 in plain torch, from its safetensors weights (needs the ``train`` extra: torch).

Contract: ``load(path)`` returns the encoder with the file's fp32 weights, refusing a file that
does not fill the module exactly; called as ``model(input_ids, attention_mask)`` it returns the
last hidden state, which the serving embedder mean-pools over the mask and L2-normalises
(sentence-transformers' Pooling + Normalize modules for this model). It matches MPNet as
published: embeddings (word + learned absolute position, positions counted from
``PAD + 1``), then twelve post-norm layers whose attention adds a relative position bias shared
by all layers (32 buckets, log-spaced beyond 8, capped at a distance of 128), layer-norm eps 1e-5.
No token types: the exported file takes ``input_ids`` and ``attention_mask`` only.

Written out here, as ``training.MiniLM`` is, so that exporting needs torch alone and the ONNX
graph has the serving embedder's inputs and output.
"""

from __future__ import annotations

import math
from pathlib import Path

import torch
from torch import nn

from rag_contract.adaptation.encoder import Layer, read_safetensors, state_of

HIDDEN = 768
HEADS = 12
LAYERS = 12
INTERMEDIATE = 3072
VOCAB = 30527
POSITIONS = 514
PAD = 1
BUCKETS = 32
MAX_DISTANCE = 128
EPS = 1e-5


def relative_buckets(length: int | torch.Tensor) -> torch.Tensor:
    """(length, length) bucket of key position minus query position, as MPNet computes it."""
    pos = torch.arange(length)
    n = pos[:, None] - pos[None, :]  # -(key - query)
    half = BUCKETS // 2
    ret = (n < 0).to(torch.long) * half
    n = n.abs()
    exact = half // 2
    # clamp(min=1) keeps log away from 0; those cells take the exact branch anyway
    large = exact + (torch.log(n.clamp(min=1).float() / exact) / math.log(MAX_DISTANCE / exact) * (half - exact)).to(
        torch.long
    )
    large = torch.minimum(large, torch.full_like(large, half - 1))
    return ret + torch.where(n < exact, n, large)


class MPNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.word = nn.Embedding(VOCAB, HIDDEN)
        self.position = nn.Embedding(POSITIONS, HIDDEN)
        self.norm = nn.LayerNorm(HIDDEN, eps=EPS)
        self.drop = nn.Dropout(0.1)
        self.relative = nn.Embedding(BUCKETS, HEADS)
        self.layers = nn.ModuleList(Layer(HIDDEN, HEADS, INTERMEDIATE, EPS) for _ in range(LAYERS))

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        t = input_ids.shape[1]
        # Right-padded rows: every attended token's position is its index + PAD + 1, as MPNet's
        # cumulative count over non-pad ids gives; padded cells are masked out.
        positions = torch.arange(t).unsqueeze(0) + PAD + 1
        x = self.drop(self.norm(self.word(input_ids) + self.position(positions)))
        relative = self.relative(relative_buckets(t)).permute(2, 0, 1).unsqueeze(0)  # (1, heads, t, t)
        mask = (1.0 - attention_mask[:, None, None, :].to(x.dtype)) * torch.finfo(x.dtype).min
        bias = relative + mask
        for layer in self.layers:
            x = layer(x, bias)
        return x  # last_hidden_state


_RENAME = {
    "embeddings.word_embeddings.weight": "word.weight",
    "embeddings.position_embeddings.weight": "position.weight",
    "embeddings.LayerNorm.weight": "norm.weight",
    "embeddings.LayerNorm.bias": "norm.bias",
    "encoder.relative_attention_bias.weight": "relative.weight",
}
_LAYER_RENAME = {
    "attention.attn.q": "query",
    "attention.attn.k": "key",
    "attention.attn.v": "value",
    "attention.attn.o": "attn_out",
    "attention.LayerNorm": "attn_norm",
    "intermediate.dense": "inter",
    "output.dense": "out",
    "output.LayerNorm": "out_norm",
}
_UNUSED = ("embeddings.position_ids", "pooler.")  # a buffer and the pooler: mean pooling uses neither


def load(path: Path) -> MPNet:
    """The encoder with ``path``'s weights; a missing, extra or misshapen tensor is refused."""
    state, left = state_of(read_safetensors(path), _RENAME, _LAYER_RENAME)
    for name in left:
        if not name.startswith(_UNUSED):
            raise ValueError(f"{path.name}: unexpected tensor {name}")
    model = MPNet()
    model.load_state_dict(state, strict=True)
    return model.eval()
