"""Similarity of one query vector to many unit vectors, and the best of it per section.

Contract: ``similarities(matrix, vector)`` is each row's dot product with ``vector`` (rows are unit
vectors, so these are cosines), computed by numpy's own loop (``einsum``), never by BLAS: OpenBLAS
hands a product this size to several threads, whose partial sums make the last bits depend on the
thread count (and so a score at a threshold could land either side of it on another machine), and
on a busy two-core machine the threads cost more than they save (docs/adr/0003).

``best_per_group(values, groups, n)`` is the maximum of each contiguous run of rows, written at its
section's position (``-1`` for a section with no rows).
"""

from __future__ import annotations

import numpy as np


def similarities(matrix: np.ndarray, vector: np.ndarray) -> np.ndarray:
    return np.einsum("ij,j->i", matrix, vector)


def best_per_group(values: np.ndarray, groups: tuple[np.ndarray, np.ndarray], n: int) -> np.ndarray:
    """``groups`` is (start row of each run, its section's position)."""
    starts, owners = groups
    out = np.full(n, -1.0, dtype=np.float64)
    if len(starts):
        out[owners] = np.maximum.reduceat(values.astype(np.float64), starts)
    return out


def runs(owner: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The contiguous runs of ``owner`` as (start rows, owner of each run)."""
    if not len(owner):
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    starts = np.flatnonzero(np.r_[True, owner[1:] != owner[:-1]])
    return starts, owner[starts]
