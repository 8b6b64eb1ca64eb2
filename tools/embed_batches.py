"""What a batch of questions costs the local embedder, and whether batching moves a vector.

``python -m tools.embed_batches [--sizes 1 2 4 8 16] [--rounds 3]`` embeds every question of
the question set with ``LocalEmbedder.embed_together`` in consecutive batches of each size
(the batches free-text answering shares, ``answering/batching.py``), after a warm-up, and
prints per size: the wall and the process CPU milliseconds per question (median of the
rounds; the model runs two intra-op threads) and how many rows differ by any bit from the
question embedded alone (``embed``). Nothing is written: the figures in
docs/adr/0001-local-embedder.md are this command's output on the day they name.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Sequence

import numpy as np

from rag_contract.embedders.local import LocalEmbedder
from rag_contract.project import find_root, load_project
from tools.machine import load_average, machine


def measure(texts: Sequence[str], sizes: Sequence[int], rounds: int) -> list[dict]:
    embedder = LocalEmbedder()
    alone = embedder.embed(texts)  # also the warm-up
    rows = []
    for size in sizes:
        wall, cpu, differing = [], [], 0
        for r in range(rounds):
            began, began_cpu = time.perf_counter(), time.process_time()
            together = [embedder.embed_together(texts[i : i + size]) for i in range(0, len(texts), size)]
            wall.append((time.perf_counter() - began) * 1000 / len(texts))
            cpu.append((time.process_time() - began_cpu) * 1000 / len(texts))
            if r == 0:
                differing = int(np.sum(np.any(np.concatenate(together) != alone, axis=1)))
        rows.append(
            {
                "batch": size,
                "wall_ms_per_question": round(statistics.median(wall), 3),
                "cpu_ms_per_question": round(statistics.median(cpu), 3),
                "rows_differing": differing,
            }
        )
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tools.embed_batches", description=__doc__.split("\n")[0])
    p.add_argument("--sizes", type=int, nargs="+", default=[1, 2, 4, 8, 16])
    p.add_argument("--rounds", type=int, default=3)
    args = p.parse_args(argv)
    texts = [q.question for q in load_project(find_root()).questions.questions]
    rows = measure(texts, args.sizes, args.rounds)
    m = machine()
    print(
        f"{len(texts)} questions, {m['cpu_count']} CPUs, Python {m['python']}, {m['date']}, "
        f"median of {args.rounds} rounds (1-minute load average {load_average()} as it ended)"
    )
    print("| batch | wall ms per question | CPU ms per question | rows differing from alone |")
    print("|---|---|---|---|")
    for r in rows:
        print(f"| {r['batch']} | {r['wall_ms_per_question']} | {r['cpu_ms_per_question']} | {r['rows_differing']} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
