"""Where a warmed-up server's memory goes, measured part by part in a process of its own.

Contract:
- ``python -m tools.memory_breakdown --root ROOT`` (what ``tools.startup.breakdown`` runs)
  builds what ``rag-contract serve`` holds, one part after another, in a fresh interpreter
  that first makes the heap setting ``serve`` makes (``rag_contract.web.heap``), and prints
  one JSON object: the RSS (``VmRSS``, MiB) the process grew by over each part, in order:
  ``imports`` (the served app's modules), ``index`` (``load_project`` and the index), ``onnx``
  (onnxruntime, the tokenizer, the session and a first vector: the embedder's model),
  ``warm_up`` (the fixed questions answered through the fixed-question service and the
  free-text questions through the free-text one, as ``tools.startup.warm_up`` asks them: the
  caches those answers fill). Beside them, what of ``index`` is numpy arrays (``nbytes``):
  ``index_arrays`` (chunk, sentence and question vectors and the section views) and ``bm25``
  (the lexical leg's sparse matrix and the content-word rows), the entries of each
  ``functools`` cache of the answering path, and the final RSS.
- A native library's RSS cannot be attributed to Python objects, so each part is its RSS
  delta; the arrays are exact. ``tools.startup`` sets them against a served process's RSS
  after the same warm-up: what the served process holds beyond them (uvicorn, the HTTP app
  and its kept answers) is its ``rest``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from rag_contract.web.heap import release_freed_memory


def rss_mib() -> float:
    """This process's ``VmRSS`` now, in MiB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS in /proc/self/status")


def _mib(nbytes: int) -> float:
    return round(nbytes / 2**20, 1)


def measure(root: Path, free_text: Sequence[str]) -> dict[str, Any]:
    release_freed_memory()  # as serve does, before anything large is allocated
    start = rss_mib()
    grew: dict[str, float] = {}
    last = [start]

    def part(name: str, step: Callable[[], Any]) -> Any:
        value = step()
        now = rss_mib()
        grew[name] = round(now - last[0], 1)
        last[0] = now
        return value

    # the imports the served app makes, and nothing of the model (loaded on the first question)
    modules = part("imports", lambda: _import_served())
    serving, project_mod, registry_mod, service_mod, drafting, embedders, text_words = modules
    project, registry = part(
        "index",
        lambda: (
            project := project_mod.load_project(root),
            registry_mod.Registry.at_startup(project.paths.index),
        ),
    )
    index = registry.acquire()
    embedder = embedders.make_embedder(index.embedder_name, models=project.paths.models)
    part("onnx", lambda: embedder.embed(["warm up"]))
    fixed = service_mod.Service(
        registry,
        project.thresholds,
        drafting.FixtureDrafter(project.paths.drafts),
        time.perf_counter,
        serving.committed_or_embedded(lambda name: embedder),
    )
    free = service_mod.Service(
        registry,
        project.thresholds,
        drafting.ExtractiveDrafter.committed(project.thresholds.drafting),
        time.perf_counter,
        serving.embedded_vector(embedder),
    )

    def warm() -> None:
        for q in project.questions.questions:
            fixed.answer(q.question, q.id)
        for text in free_text:
            free.answer(text)

    part("warm_up", warm)
    lexical = index.derived.lexical
    views = (index.chunk_owner, index.sentence_owner, index.ancestors, *index.chunk_runs, *index.sentence_runs)
    return {
        "rss_start_mb": round(start, 1),
        "grew_mb": grew,
        "index_arrays_mb": _mib(
            index.vectors.nbytes
            + index.sentence_vectors.nbytes
            + sum(v.nbytes for v in index.question_vectors.values())
            + sum(a.nbytes for a in views)
        ),
        "bm25_mb": _mib(
            lexical.data.nbytes
            + lexical.indices.nbytes
            + lexical.indptr.nbytes
            + index.derived.content_rows.nbytes
            + index.derived.content_offsets.nbytes
        ),
        "cache_entries": {
            name: fn.cache_info().currsize
            for name, fn in sorted(vars(text_words).items())
            if callable(getattr(fn, "cache_info", None))
        },
        "rss_end_mb": round(rss_mib(), 1),
    }


def _import_served() -> tuple[Any, ...]:
    # Imported here, after the heap setting and the first RSS reading: the imports are a part.
    from rag_contract import embedders, project  # noqa: PLC0415
    from rag_contract.answering import drafting, service  # noqa: PLC0415
    from rag_contract.index import registry  # noqa: PLC0415
    from rag_contract.text import words  # noqa: PLC0415
    from rag_contract.web import serving  # noqa: PLC0415

    return serving, project, registry, service, drafting, embedders, words


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tools.memory_breakdown", description=__doc__.split("\n")[0])
    p.add_argument("--root", required=True, help="project directory")
    p.add_argument("--free-text", required=True, help="a JSON file holding the free-text questions, a list")
    args = p.parse_args(argv)
    texts = json.loads(Path(args.free_text).read_text(encoding="utf-8"))
    print(json.dumps(measure(Path(args.root), texts)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
