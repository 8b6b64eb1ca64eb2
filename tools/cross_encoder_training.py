"""Training, export and timing of the cross-encoder of ``tools.cross_encoder_trial`` (needs the
``train`` extra: torch and onnx).

    .venv-train/bin/python -m tools.cross_encoder_training EXAMPLES.json SCORES.json
        [--layers 3] [--max-tokens 96] [--epochs 1] [--lr 5e-5] [--folds 0,1,2,3,4] [--model-out FILE]

The model: the first ``--layers`` layers of all-MiniLM-L6-v2 (the shipped fp32 weights,
``adaptation.training``) read ``[CLS] question [SEP] claim [SEP]`` (at most ``--max-tokens``,
the question at most ``QUESTION_SHARE`` of them); a linear head on the mean-pooled tokens gives
a logit (``tools.judge_training.Judge``). One model per calibration fold, trained on both
projects' rows of the other folds (``cross_encoder_pairs.training_pairs``, positives weighed as
much as negatives) and scoring its fold's rows (``scored_pairs``), so every question is scored by
a model that never saw it. Seeded, deterministic kernels, two threads.

The first trained fold's model is exported to int8 ONNX (``adaptation.export.quantize_weights``,
weight-only int8 as the served embedder) and checked against torch on that fold's scored pairs
(largest logit difference; how often the best of a question's candidates is the same); then
timed in onnxruntime on one thread: a question's ``RERANK`` pairs in one batch, after a
warm-up, median and p90 milliseconds over the fold's questions. ``SCORES.json`` holds
``{"settings", "training", "export", "latency", "oof": {row key: [logit per scored pair]}}``.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import onnxruntime as ort
import torch
from torch import nn

from rag_contract.adaptation.export import OPSET, quantize_weights
from rag_contract.adaptation.training import Encoder, Settings, seed_everything, warmup_then_decay
from tools.cross_encoder_pairs import scored_pairs, training_pairs
from tools.judge_training import Judge, packed

BATCH = 16
SEED = 0
THREADS = 2
QUESTION_SHARE = 0.35


def encode(
    encoder: Encoder, pairs: Sequence[tuple[str, str]], max_tokens: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``[CLS] question [SEP] claim [SEP]``, the claim's tokens (and its [SEP]) of type 1."""
    tokens = []
    q_limit = int(max_tokens * QUESTION_SHARE)
    for q, text in pairs:
        a = encoder.tokenizer.encode(q, add_special_tokens=False).ids[:q_limit]
        b = encoder.tokenizer.encode(text, add_special_tokens=False).ids[: max_tokens - 3 - len(a)]
        tokens.append((a, b))
    return packed(encoder, tokens)


def train(
    pairs: Sequence[tuple[str, str, float]], args: argparse.Namespace, progress: Callable[[str], None]
) -> tuple[Judge, dict]:
    seed_everything(Settings(seed=SEED, threads=THREADS))
    model, encoder = Judge(args.layers), Encoder()
    model.train()
    optimiser = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)
    plan = []
    for epoch in range(args.epochs):
        order = list(range(len(pairs)))
        random.Random(SEED * 100 + epoch).shuffle(order)
        plan += [order[i : i + BATCH] for i in range(0, len(order), BATCH)]
    if args.max_steps:
        plan = plan[: args.max_steps]
    schedule = warmup_then_decay(optimiser, len(plan), max(1, len(plan) // 10))
    positives = sum(p[2] for p in pairs)
    weight = torch.tensor((len(pairs) - positives) / max(1.0, positives))  # the classes weigh the same
    start = time.monotonic()
    losses = []
    for step, chosen in enumerate(plan):
        batch = [pairs[i] for i in chosen]
        loss = nn.functional.binary_cross_entropy_with_logits(
            model(*encode(encoder, [(q, t) for q, t, _ in batch], args.max_tokens)),
            torch.tensor([p[2] for p in batch]),
            pos_weight=weight,
        )
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
        schedule.step()
        losses.append(loss.item())
        if step % 50 == 0:
            progress(f"  step {step}/{len(plan)} loss {np.mean(losses[-50:]):.3f} {time.monotonic() - start:.0f} s")
    model.eval()
    return model, {
        "pairs": len(pairs),
        "positives": int(positives),
        "steps": len(plan),
        "seconds": round(time.monotonic() - start, 1),
        "last_loss": round(float(np.mean(losses[-50:])), 4),
    }


@torch.no_grad()
def score(model: Judge, pairs: Sequence[tuple[str, str]], max_tokens: int) -> list[float]:
    encoder, out = Encoder(), []
    for i in range(0, len(pairs), 32):
        out += [round(float(v), 6) for v in model(*encode(encoder, pairs[i : i + 32], max_tokens))]
    return out


def export_and_time(model: Judge, path: Path, questions: dict[str, list[tuple[str, str]]], max_tokens: int) -> tuple:
    """``model`` to int8 ONNX at ``path``; its agreement with torch and its latency on ``questions``."""
    ids = torch.tensor([[101, 7592, 102, 2088, 102]])
    names = ("input_ids", "attention_mask", "token_type_ids")
    with tempfile.TemporaryDirectory() as tmp:
        fp32 = Path(tmp) / "fp32.onnx"
        torch.onnx.export(
            model,
            (ids, torch.ones_like(ids), torch.tensor([[0, 0, 0, 1, 1]])),
            str(fp32),
            input_names=list(names),
            output_names=["logit"],
            dynamic_axes={n: {0: "batch", 1: "sequence"} for n in names} | {"logit": {0: "batch"}},
            opset_version=OPSET,
            dynamo=False,
        )
        path.parent.mkdir(parents=True, exist_ok=True)
        quantize_weights(fp32, path)
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    encoder = Encoder()
    diffs, same_best, per_question, per_pair = [], 0, [], []
    torch_scores = {k: score(model, v, max_tokens) for k, v in questions.items()}
    for n, (k, pairs) in enumerate(questions.items()):
        feeds = dict(zip(names, (t.numpy() for t in encode(encoder, pairs, max_tokens)), strict=True))
        start = time.perf_counter()
        got = session.run(None, feeds)[0]
        took = (time.perf_counter() - start) * 1000
        if n >= 5:  # warm-up
            per_question.append(took)
            per_pair.append(took / len(pairs))
        diffs.append(float(np.abs(got - np.array(torch_scores[k])).max()))
        same_best += int(np.argmax(got)) == int(np.argmax(torch_scores[k]))
    export = {
        "file_bytes": path.stat().st_size,
        "questions": len(questions),
        "max_abs_logit_difference": round(max(diffs), 4),
        "mean_abs_logit_difference": round(float(np.mean(diffs)), 4),
        "same_best_candidate": round(same_best / len(questions), 4),
    }
    q = sorted(per_question)
    latency = {
        "threads": 1,
        "tokens_at_most": max_tokens,
        "pairs_per_question_median": statistics.median(len(v) for v in questions.values()),
        "ms_per_question_median": round(statistics.median(q), 2),
        "ms_per_question_p90": round(q[int(0.9 * (len(q) - 1))], 2),
        "ms_per_pair_median": round(statistics.median(per_pair), 3),
    }
    return export, latency


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tools.cross_encoder_training", description=__doc__.split("\n\n")[0])
    ap.add_argument("examples")
    ap.add_argument("out")
    ap.add_argument("--layers", type=int, default=3)
    ap.add_argument("--max-tokens", type=int, default=96)
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--lr", type=float, default=5e-5)
    ap.add_argument("--max-steps", type=int, default=0, help="stop each fold after this many steps (0: all)")
    ap.add_argument("--folds", default="0,1,2,3,4")
    ap.add_argument("--model-out", default="tmp/cross-encoder/fold0-int8.onnx")
    args = ap.parse_args(argv)
    rows = json.loads(Path(args.examples).read_text())
    out = Path(args.out)
    result: dict = json.loads(out.read_text()) if out.is_file() else {}
    settings = {k: getattr(args, k) for k in ("layers", "max_tokens", "epochs", "lr", "max_steps")} | {
        "batch": BATCH,
        "seed": SEED,
    }
    if result.get("settings") != settings:  # another configuration: start over
        result = {"settings": settings, "training": {}, "oof": {}}
    for fold in [int(f) for f in args.folds.split(",")]:
        if str(fold) in result["training"]:
            print(f"fold {fold}: already scored")
            continue
        pairs = training_pairs(rows, fold)
        print(f"fold {fold}: {len(pairs)} training pairs", flush=True)
        model, stats = train(pairs, args, lambda s: print(s, flush=True))
        held = list(scored_pairs(rows, fold))
        logits = score(model, [(q, t) for _, q, t in held], args.max_tokens)
        for (k, _, _), v in zip(held, logits, strict=True):
            result["oof"].setdefault(k, []).append(v)
        result["training"][str(fold)] = stats | {"scored_pairs": len(held)}
        if "export" not in result:
            questions: dict[str, list[tuple[str, str]]] = {}
            for k, q, t in held:
                if ":committed:" in k:
                    questions.setdefault(k, []).append((q, t))
            result["export"], result["latency"] = export_and_time(
                model, Path(args.model_out), questions, args.max_tokens
            )
            print(f"export {result['export']}\nlatency {result['latency']}", flush=True)
        out.write_text(json.dumps(result))  # after every fold: an interrupted run resumes
    return 0


if __name__ == "__main__":
    sys.exit(main())
