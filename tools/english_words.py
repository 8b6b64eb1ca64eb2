"""Writes rag_contract/text/data/english.tsv.gz: the English words wordfreq rates at a Zipf
frequency of ``FLOOR`` or more, one line per tenth of a Zipf point ("2.3<TAB>word word ...").

The service only asks whether a word is rare in English (``answering.asked.RARE_ZIPF``, above
the floor), so it needs this much of wordfreq's large English list and no more: about a tenth
of its memory, none of its imports at start-up, and no wordfreq in the serving image. wordfreq
stays a development dependency; a test re-derives the file and compares it byte for byte.

    python -m tools.english_words          # rewrite the file
"""

from __future__ import annotations

import gzip
import math
import sys
from collections import defaultdict
from pathlib import Path

from wordfreq import get_frequency_list, zipf_frequency

FLOOR = 2.0
OUT = Path(__file__).resolve().parent.parent / "rag_contract" / "text" / "data" / "english.tsv.gz"


def derive() -> bytes:
    bands: dict[float, list[str]] = defaultdict(list)
    for bucket in get_frequency_list("en", wordlist="large"):
        for word in bucket:
            z = zipf_frequency(word, "en", wordlist="large")
            if z >= FLOOR and word.isascii() and " " not in word and "\t" not in word:
                bands[math.floor(z * 10 + 1e-9) / 10].append(word)  # floored: a bar of one decimal compares alike
    lines = [f"{band:.1f}\t{' '.join(sorted(set(words)))}" for band, words in sorted(bands.items(), reverse=True)]
    # mtime 0 and no file name: the same words give the same bytes on every machine
    return gzip.compress(("\n".join(lines) + "\n").encode("utf-8"), compresslevel=9, mtime=0)


def main() -> int:
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_bytes(derive())
    print(f"{OUT.name}: {OUT.stat().st_size} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
