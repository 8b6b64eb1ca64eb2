"""What the encoders written out in plain torch share (``training.MiniLM``, ``mpnet.MPNet``; needs
the ``train`` extra: torch): their post-norm transformer layer, and their checkpoint's tensors read
from a safetensors file and named as the modules name them.

Contract: ``Layer(hidden, heads, intermediate, eps)`` is one BERT-style post-norm layer (self-
attention plus an added bias, then a GELU feed-forward, each followed by dropout 0.1, a residual
and layer norm); its parameters are named ``query``, ``key``, ``value``, ``attn_out``,
``attn_norm``, ``inter``, ``out``, ``out_norm``. ``state_of`` maps a checkpoint's names onto a
module's and returns the names it did not place, for the caller to refuse or pass over.
"""

from __future__ import annotations

import json
import math
import struct
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import torch
from torch import nn

_DTYPES = {"F32": np.float32, "I64": np.int64}


class Layer(nn.Module):
    def __init__(self, hidden: int, heads: int, intermediate: int, eps: float) -> None:
        super().__init__()
        self.hidden, self.heads = hidden, heads
        self.query = nn.Linear(hidden, hidden)
        self.key = nn.Linear(hidden, hidden)
        self.value = nn.Linear(hidden, hidden)
        self.attn_out = nn.Linear(hidden, hidden)
        self.attn_norm = nn.LayerNorm(hidden, eps=eps)
        self.inter = nn.Linear(hidden, intermediate)
        self.out = nn.Linear(intermediate, hidden)
        self.out_norm = nn.LayerNorm(hidden, eps=eps)
        self.drop = nn.Dropout(0.1)

    def forward(self, x: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        b, t, _ = x.shape
        d = self.hidden // self.heads

        def heads(y: torch.Tensor) -> torch.Tensor:
            return y.view(b, t, self.heads, d).transpose(1, 2)

        q, k, v = heads(self.query(x)), heads(self.key(x)), heads(self.value(x))
        scores = q @ k.transpose(-1, -2) / math.sqrt(d) + bias
        ctx = (self.drop(scores.softmax(-1)) @ v).transpose(1, 2).reshape(b, t, self.hidden)
        x = self.attn_norm(x + self.drop(self.attn_out(ctx)))
        h = self.out(nn.functional.gelu(self.inter(x)))
        return self.out_norm(x + self.drop(h))


def read_safetensors(path: Path) -> dict[str, np.ndarray]:
    """A safetensors file as numpy arrays: an 8-byte header length, a JSON header, raw data."""
    raw = path.read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8 : 8 + n])
    data = raw[8 + n :]
    out = {}
    for name, spec in header.items():
        if name == "__metadata__":
            continue
        start, end = spec["data_offsets"]
        out[name] = np.frombuffer(data[start:end], dtype=_DTYPES[spec["dtype"]]).reshape(spec["shape"]).copy()
    return out


def state_of(
    weights: Mapping[str, np.ndarray], rename: Mapping[str, str], layer_rename: Mapping[str, str]
) -> tuple[dict[str, torch.Tensor], list[str]]:
    """``weights`` under the module's names: a name of ``rename`` as it maps, a tensor of
    ``encoder.layer.N.<part>.<leaf>`` as ``layers.N.<layer_rename[part]>.<leaf>``; and the names
    that are neither."""
    state, left = {}, []
    for name, array in weights.items():
        if name in rename:
            state[rename[name]] = torch.from_numpy(array)
        elif name.startswith("encoder.layer."):
            _, _, n, rest = name.split(".", 3)
            part, _, leaf = rest.rpartition(".")
            state[f"layers.{n}.{layer_rename[part]}.{leaf}"] = torch.from_numpy(array)
        else:
            left.append(name)
    return state, left
