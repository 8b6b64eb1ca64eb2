"""Memory a served process frees goes back to the system, so its RSS is what it holds.

glibc's malloc serves a large block from mmap at first, and each time such a block is freed it
raises its mmap threshold (up to 32 MiB): later large blocks then come from the heap, whose freed
space stays resident. Building the ONNX session (constant folding writes every weight out as
float32, through large temporaries) and loading the index free that much and more: measured,
about 110 MB of a warmed-up server's RSS was memory it had already freed (docs/operating.md, "Start-up").
``release_freed_memory`` fixes both thresholds at ``RELEASE_ABOVE_BYTES``, which also stops the
mmap threshold moving: any block that large is returned to the system when freed. Where the C
library is not glibc it does nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util

# mallopt parameters (glibc's malloc.h)
M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
RELEASE_ABOVE_BYTES = 128 * 1024  # glibc's initial mmap threshold: small blocks stay cheap to reuse


def release_freed_memory() -> bool:
    """Set glibc's trim and mmap thresholds to ``RELEASE_ABOVE_BYTES`` for this process; True
    when both took, False when there is no glibc (nothing changes then)."""
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name)
        mallopt = libc.mallopt
    except (OSError, AttributeError, TypeError):
        return False
    if not hasattr(libc, "gnu_get_libc_version"):
        return False  # another C library's mallopt takes other parameters
    return bool(mallopt(M_MMAP_THRESHOLD, RELEASE_ABOVE_BYTES)) and bool(mallopt(M_TRIM_THRESHOLD, RELEASE_ABOVE_BYTES))
