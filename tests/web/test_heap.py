"""``web/heap.py``: freed large blocks leave the process once ``release_freed_memory`` has run.

Each case runs in a fresh interpreter (the setting is process-wide): through the C library's own
malloc, it frees one 8 MiB block, which raises glibc's moving mmap threshold, then allocates 64
blocks of 1 MiB, each pinned in place by a small block kept after it, and frees them. Without
the setting they came from the heap and stay resident; with it each was mmapped and went back."""

from __future__ import annotations

import subprocess
import sys

import pytest

from rag_contract.web import heap

PROGRAM = """
import sys, ctypes
from rag_contract.web.heap import release_freed_memory
libc = ctypes.CDLL(None)
libc.malloc.restype = ctypes.c_void_p
libc.malloc.argtypes = [ctypes.c_size_t]
libc.free.argtypes = [ctypes.c_void_p]
def rss_mib():
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
if sys.argv[1] == "1":
    assert release_freed_memory()
before = rss_mib()
p = libc.malloc(8 << 20); ctypes.memset(p, 1, 8 << 20); libc.free(p)
blocks, kept = [], []
for _ in range(64):
    b = libc.malloc(1 << 20); ctypes.memset(b, 1, 1 << 20); blocks.append(b); kept.append(libc.malloc(600))
for b in blocks: libc.free(b)
print(rss_mib() - before)
"""

glibc = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc on Linux")


def _retained_mib(release: bool) -> float:
    out = subprocess.run(
        [sys.executable, "-c", PROGRAM, "1" if release else "0"], capture_output=True, text=True, check=True
    )
    return float(out.stdout)


@glibc
def test_freed_blocks_go_back_to_the_system_and_stay_without_it():
    assert _retained_mib(release=True) < 16
    assert _retained_mib(release=False) > 48  # the regression the setting prevents


@glibc
def test_the_setting_takes_on_glibc():
    assert heap.release_freed_memory() is True
