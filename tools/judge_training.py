"""Training the judge of ``tools.judge_trial`` (needs the ``train`` extra: torch).

Contract: ``train_folds(rows, layers, epochs, lr, progress)`` trains one cross-encoder per
calibration fold on the other folds' training pairs and scores the fold's served answers, then
one on every question, which scores the first sealed set; it returns
``{"settings", "oof": {"project:id": logit}, "sealed": {id: logit}}``. Seeded, deterministic
kernels, two threads: the same rows and settings give the same scores on one machine.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Mapping, Sequence

import torch
from torch import nn

from rag_contract.adaptation.training import HIDDEN, Encoder, Settings, base_model, seed_everything, warmup_then_decay
from tools.judge_pairs import PROJECTS, QUESTION_TOKENS, TEXT_TOKENS, served_text, training_pairs

BATCH = 16
SEED = 0
THREADS = 2


class Judge(nn.Module):
    def __init__(self, layers: int) -> None:
        super().__init__()
        encoder = base_model()
        encoder.layers = encoder.layers[:layers]
        self.encoder = encoder
        self.head = nn.Linear(HIDDEN, 1)

    def forward(self, ids: torch.Tensor, mask: torch.Tensor, types: torch.Tensor) -> torch.Tensor:
        hidden = self.encoder(ids, mask, types)
        m = mask.unsqueeze(-1).float()
        return self.head((hidden * m).sum(1) / m.sum(1)).squeeze(-1)


def encode(encoder: Encoder, pairs: Sequence[tuple]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``[CLS] question [SEP] text [SEP]``, the text's tokens (and its [SEP]) of type 1."""

    def ids(text: str, limit: int) -> list[int]:
        return encoder.tokenizer.encode(text, add_special_tokens=False).ids[:limit]

    return packed(encoder, [(ids(q, QUESTION_TOKENS), ids(text, TEXT_TOKENS)) for q, text, *_ in pairs])


def packed(
    encoder: Encoder, tokens: Sequence[tuple[Sequence[int], Sequence[int]]]
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``[CLS] a [SEP] b [SEP]`` for each pair of token-id lists, padded to the longest: ids,
    attention mask, and token types (b's tokens and its [SEP] of type 1)."""
    seqs = [([encoder.cls, *a, encoder.sep, *b, encoder.sep], len(a) + 2) for a, b in tokens]
    width = max(len(s) for s, _ in seqs)
    ids = torch.zeros((len(seqs), width), dtype=torch.long)
    mask, types = torch.zeros_like(ids), torch.zeros_like(ids)
    for i, (s, first) in enumerate(seqs):
        ids[i, : len(s)] = torch.tensor(s)
        mask[i, : len(s)] = 1
        types[i, first : len(s)] = 1
    return ids, mask, types


def train(pairs: Sequence[tuple[str, str, float]], layers: int, epochs: int, lr: float, progress: Callable) -> Judge:
    seed_everything(Settings(seed=SEED, threads=THREADS))
    model, encoder = Judge(layers), Encoder()
    model.train()
    optimiser = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)
    plan = []
    for epoch in range(epochs):
        order = list(range(len(pairs)))
        random.Random(SEED * 100 + epoch).shuffle(order)
        plan += [order[i : i + BATCH] for i in range(0, len(order), BATCH)]
    schedule = warmup_then_decay(optimiser, len(plan), max(1, len(plan) // 10))
    positives = sum(p[2] for p in pairs)
    weight = torch.tensor((len(pairs) - positives) / max(1.0, positives))  # classes weigh the same
    start = time.monotonic()
    for step, chosen in enumerate(plan):
        batch = [pairs[i] for i in chosen]
        loss = nn.functional.binary_cross_entropy_with_logits(
            model(*encode(encoder, batch)), torch.tensor([p[2] for p in batch]), pos_weight=weight
        )
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
        schedule.step()
        if step % 50 == 0:
            progress(f"  step {step}/{len(plan)} loss {loss.item():.3f} {time.monotonic() - start:.0f} s")
    model.eval()
    return model


@torch.no_grad()
def score(model: Judge, pairs: Sequence[tuple[str, str]]) -> list[float]:
    encoder, out = Encoder(), []
    for i in range(0, len(pairs), 32):
        out += [round(float(v), 6) for v in model(*encode(encoder, pairs[i : i + 32]))]
    return out


def train_folds(rows: Mapping[str, list[dict]], layers: int, epochs: int, lr: float, progress: Callable) -> dict:
    committed = [(name, r) for name in PROJECTS for r in rows[name]]
    oof: dict[str, float] = {}
    for fold in sorted({r["fold"] for _, r in committed}):
        pairs = training_pairs([r for _, r in committed if r["fold"] != fold])
        progress(f"fold {fold}: {len(pairs)} pairs")
        model = train(pairs, layers, epochs, lr, progress)
        held = [(name, r) for name, r in committed if r["fold"] == fold]
        for (name, r), v in zip(held, score(model, [(r["question"], served_text(r)) for _, r in held]), strict=True):
            oof[f"{name}:{r['id']}"] = v
    model = train(training_pairs([r for _, r in committed]), layers, epochs, lr, progress)
    sealed = dict(
        zip(
            [r["id"] for r in rows["sealed"]],
            score(model, [(r["question"], served_text(r)) for r in rows["sealed"]]),
            strict=True,
        )
    )
    settings = {"layers": layers, "epochs": epochs, "lr": lr, "batch": BATCH, "seed": SEED}
    return {"settings": settings, "oof": oof, "sealed": sealed}
