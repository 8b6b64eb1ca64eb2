"""Base encoders side by side in one run: out-of-fold retrieval and what each costs to serve.

    .venv/bin/python -m tools.encoder_trial [--root PROJECT] [--embedders minilm-l6-adapted,mpnet-base-int8]
        [--corpus-every N] [--legs-out FILE | --legs-from FILE] [--sealed FILE,...] [--out FILE]
    .venv/bin/python -m tools.encoder_trial --latency [--embedders A,B] [--rounds N]

Each embedder is measured in its own process (so its resident memory is its own), one after the
other, on the same project and its committed index (sections, chunks, sentences, lexical
statistics):

- query embedding: every committed question embedded alone (``embed_one``, two intra-op
  threads, as a free-text question finding the embedder idle) after a warm-up; median and p90
  milliseconds of wall time, and process CPU per question;
- resident memory (ru_maxrss) once the model is loaded and the questions embedded, and at the end;
- corpus embedding: every ``--corpus-every``-th chunk and sentence embedded as ``build-index``
  does (``embed``, one text a run), timed and scaled to the whole corpus: the vector part of an
  index build, which is nearly all of it;
- out-of-fold fused retrieval over the answerable questions (calibration's folds; each fold's
  fusion fitted on its training questions, its held-out questions ranked): an unadapted model saw
  no question, so its legs are the same in every fold; an adapted one's come from its fold file
  (``rag-contract adapt --folds``), never from the serving model, which saw every question. An
  unadapted model's legs need every chunk and sentence embedded: with ``--corpus-every`` above 1
  they are taken from ``--legs-from`` (a file this command wrote with ``--corpus-every 1 --legs-out``);
- with ``--sealed``, each sealed question file's fused retrieval (``sealed_ranks``): the fusion
  fitted on every committed answerable question's legs under the embedder, as ``calibrate`` fits
  the served one, and the file's answerable questions ranked by it. It needs every chunk and
  sentence embedded (``--corpus-every 1``); the adapted model's legs are its served vectors (it saw
  the committed questions, never a sealed one);
- with two or more embedders, against the first: how many questions each moves up, down, to
  rank 1 and off it (``moved``), out of fold and on each sealed file.

``--latency`` times query embedding alone with the embedders in one process taking turns on
each question, so that the load of a shared machine falls on them alike (``latency``).

Nothing under ``index/`` or ``models/`` is written. The figures in docs/adr/0006-adapted-retriever.md
("all-mpnet-base-v2") are this command's output on the day they name.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np

from rag_contract.config.questions import Question
from rag_contract.corpus.sentences import embed_text as sentence_text
from rag_contract.embedders import make_embedder
from rag_contract.embedders.local import ADAPTED_NAME, LocalEmbedder
from rag_contract.index.store import Index, embed_text, load_index
from rag_contract.project import load_project, read_questions
from rag_contract.quality.adapted_folds import FOLDS_FILE, FoldLegs, fold_meta, load_fold_legs, save_fold_legs
from rag_contract.quality.calibration import (
    DIGITS,
    _retrieval,
    adapted_oof_ranks,
    folds,
    fusion_weights,
    rank_of_expected,
)
from rag_contract.retrieval.ranking import section_columns, vector_legs
from tools.machine import load_average


def _rss_mb() -> float:
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def _model_file(embedder: LocalEmbedder) -> Path | None:
    return getattr(embedder, "model_file", None)


Legs = tuple[np.ndarray, np.ndarray]  # per section: best chunk cosine, best sentence cosine


def sealed_ranks(
    index: Index, fitted: Sequence[Question], held: Sequence[Question], legs: Mapping[str, Legs]
) -> dict[str, int]:
    """Each answerable ``held`` question's expected rank under the fusion fitted on every answerable
    ``fitted`` question (as ``fit_fusion`` fits it, from ``legs`` by question text instead of the
    index's own vectors)."""

    def columns(index: Index, text: str, _vector: np.ndarray) -> np.ndarray:
        return section_columns(index, text, *legs[text])

    train = [q for q in fitted if q.answerable]
    weights = np.round(fusion_weights(index, train, {q.question: np.zeros(0) for q in train}, columns), DIGITS)
    return {
        q.id: rank_of_expected(index, q, np.einsum("ij,j->i", columns(index, q.question, np.zeros(0)), weights))
        for q in held
        if q.answerable
    }


def moved(before: Mapping[str, int], after: Mapping[str, int]) -> dict[str, int]:
    """Of the questions ranked both times, how many ``after`` ranks higher (up), lower (down), and
    how many it newly puts first (to_first) or moves off first place (off_first)."""
    both = sorted(set(before) & set(after))
    return {
        "questions": len(both),
        "up": sum(after[i] < before[i] for i in both),
        "down": sum(after[i] > before[i] for i in both),
        "to_first": sum(after[i] == 1 < before[i] for i in both),
        "off_first": sum(before[i] == 1 < after[i] for i in both),
    }


def measure_one(
    root: Path,
    name: str,
    corpus_every: int,
    legs_out: Path | None,
    legs_from: Path | None,
    sealed: Sequence[Path] = (),
) -> dict:
    project = load_project(root)
    index = load_index(project.paths.index)
    embedder = make_embedder(name, project.paths.models)
    assert isinstance(embedder, LocalEmbedder)
    questions = project.questions.questions
    answerable = [q for q in questions if q.answerable]
    started = time.perf_counter()
    embedder.embed_one("warm up the session")
    load_s = time.perf_counter() - started
    wall, cpu = [], []
    qvectors = {}
    for q in questions:
        w0, c0 = time.perf_counter(), time.process_time()
        qvectors[q.question] = embedder.embed_one(q.question)
        wall.append((time.perf_counter() - w0) * 1000)
        cpu.append((time.process_time() - c0) * 1000)
    rss_serving = _rss_mb()
    sections = index.sections
    chunk_texts = [embed_text(c, sections) for c in index.chunks]
    sentence_texts = [sentence_text(s, sections[s.section_id].title) for s in index.sentences]
    texts = chunk_texts[::corpus_every] + sentence_texts[::corpus_every]
    w0 = time.perf_counter()
    vectors = embedder.embed(texts)
    corpus_s = time.perf_counter() - w0
    out: dict = {
        "embedder": name,
        "identity": embedder.identity.split(";")[1],
        "model_mb": round(_model_file(embedder).stat().st_size / 1e6, 1) if _model_file(embedder) else None,
        "dimensions": embedder.dimensions,
        "load_s": round(load_s, 2),
        "questions_timed": len(questions),
        "query_ms_median": round(statistics.median(wall), 1),
        "query_ms_p90": round(float(np.percentile(wall, 90)), 1),
        "query_cpu_ms_median": round(statistics.median(cpu), 1),
        "rss_mb_serving": rss_serving,
        "corpus_texts_embedded": len(texts),
        "corpus_seconds_measured": round(corpus_s, 1),
        "corpus_seconds_whole_estimate": round(corpus_s * (len(chunk_texts) + len(sentence_texts)) / len(texts)),
        "load_average": load_average(),
    }
    assignment = folds(questions)
    meta = fold_meta(project, assignment)
    k = project.thresholds.retrieval.top_k
    if sealed:
        if corpus_every != 1:
            raise SystemExit("--sealed needs every chunk and sentence embedded: --corpus-every 1")
        n = len(chunk_texts)
        served = replace(index, vectors=vectors[:n], sentence_vectors=vectors[n:])
        committed = {q.question: vector_legs(served, qvectors[q.question]) for q in answerable}
        out["sealed"] = {}
        for path in sealed:
            held = [q for q in read_questions(path, project.corpus).questions if q.answerable]
            legs_by_text = committed | {q.question: vector_legs(served, embedder.embed_one(q.question)) for q in held}
            ranks = sealed_ranks(index, answerable, held, legs_by_text)
            out["sealed"][path.name] = _retrieval(held, ranks, k) | {"questions": len(ranks), "ranks": ranks}
    if name == ADAPTED_NAME:
        legs = load_fold_legs(project.paths.models / FOLDS_FILE, meta)
        out["legs"] = f"out of fold: {FOLDS_FILE}"
    elif corpus_every == 1:
        n = len(chunk_texts)
        full = replace(index, vectors=vectors[:n], sentence_vectors=vectors[n:])
        rows = [vector_legs(full, qvectors[q.question]) for q in answerable]
        by_fold = dict.fromkeys(range(int(meta["folds"])), rows)  # unadapted: no fold saw a question
        if legs_out:
            save_fold_legs(legs_out, meta | {"embedder": name}, [q.question for q in answerable], by_fold)
        legs = FoldLegs(
            meta, {f: dict(zip([q.question for q in answerable], r, strict=True)) for f, r in by_fold.items()}
        )
        out["legs"] = "unadapted: the same legs in every fold"
    elif legs_from:
        legs = load_fold_legs(legs_from, meta)
        out["legs"] = f"unadapted, from {legs_from.name}"
    else:
        out["rss_mb_peak"] = _rss_mb()
        return out
    ranks = adapted_oof_ranks(index, questions, assignment, legs)
    out["oof"] = _retrieval(answerable, ranks, k)
    out["oof_questions"] = len(ranks)
    out["oof_ranks"] = ranks
    out["rss_mb_peak"] = _rss_mb()
    return out


def latency(root: Path, names: list[str], rounds: int) -> dict:
    """Query embedding time with the embedders loaded side by side in one process and taking
    turns on each question (the order swapped every question), so a shared machine's load falls
    on all of them alike: per embedder the median wall and CPU milliseconds, and each one's
    ratio to the first named."""
    project = load_project(root)
    embedders = [make_embedder(n, project.paths.models) for n in names]
    texts = [q.question for q in project.questions.questions]
    for e in embedders:
        assert isinstance(e, LocalEmbedder)
        e.embed_one("warm up the session")
    wall: dict[str, list[float]] = {n: [] for n in names}
    cpu: dict[str, list[float]] = {n: [] for n in names}
    for r in range(rounds):
        for i, text in enumerate(texts):
            turn = list(zip(names, embedders, strict=True))
            for name, e in turn if (i + r) % 2 == 0 else turn[::-1]:
                w0, c0 = time.perf_counter(), time.process_time()
                e.embed_one(text)  # type: ignore[attr-defined]
                wall[name].append((time.perf_counter() - w0) * 1000)
                cpu[name].append((time.process_time() - c0) * 1000)
    med = {n: (statistics.median(wall[n]), statistics.median(cpu[n])) for n in names}
    first = names[0]
    return {
        "questions": len(texts),
        "rounds": rounds,
        "load_average": load_average(),
        "by_embedder": {
            n: {
                "wall_ms_median": round(w, 2),
                "cpu_ms_median": round(c, 2),
                "wall_ratio": round(w / med[first][0], 2),
                "cpu_ratio": round(c / med[first][1], 2),
            }
            for n, (w, c) in med.items()
        },
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", type=Path, default=Path("."))
    ap.add_argument("--embedders", default=f"{ADAPTED_NAME},mpnet-base-int8")
    ap.add_argument("--corpus-every", type=int, default=1)
    ap.add_argument("--legs-from", type=Path, help="legs an earlier --corpus-every 1 run saved (--legs-out)")
    ap.add_argument("--legs-out", type=Path)
    ap.add_argument("--latency", action="store_true", help="query embedding alone, the embedders taking turns")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--sealed", help="sealed question files, comma-separated: their fused retrieval too")
    ap.add_argument("--one", help=argparse.SUPPRESS)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args(argv)
    if args.latency:
        print(json.dumps(latency(args.root, args.embedders.split(","), args.rounds), indent=1))
        return 0
    sealed = [Path(p).resolve() for p in args.sealed.split(",")] if args.sealed else []
    if args.one:
        print(json.dumps(measure_one(args.root, args.one, args.corpus_every, args.legs_out, args.legs_from, sealed)))
        return 0
    results = []
    for name in args.embedders.split(","):
        cmd = [
            sys.executable,
            "-m",
            "tools.encoder_trial",
            "--root",
            str(args.root),
            "--one",
            name,
            "--corpus-every",
            str(args.corpus_every),
        ]
        if args.legs_out:
            cmd += ["--legs-out", str(args.legs_out.with_suffix(f".{name}.npz"))]
        if args.legs_from:
            cmd += ["--legs-from", str(args.legs_from.with_suffix(f".{name}.npz"))]
        if sealed:
            cmd += ["--sealed", ",".join(map(str, sealed))]
        done = subprocess.run(cmd, check=True, capture_output=True, text=True)
        results.append(json.loads(done.stdout.splitlines()[-1]))
        print(json.dumps(results[-1]), file=sys.stderr)
    report: dict = {"root": str(args.root), "results": results}
    if len(results) > 1:
        first = results[0]
        report["against_first"] = {
            r["embedder"]: {
                "oof": moved(first.get("oof_ranks", {}), r.get("oof_ranks", {})),
                **{
                    name: moved(first["sealed"][name]["ranks"], s["ranks"])
                    for name, s in r.get("sealed", {}).items()
                    if name in first.get("sealed", {})
                },
            }
            for r in results[1:]
        }
    text = json.dumps(report, indent=1)
    if args.out:
        args.out.write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
