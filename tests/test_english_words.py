"""The package's English word list is what tools/english_words derives from wordfreq, byte for byte,
and reads as wordfreq does at every bar of one decimal above its floor."""

from __future__ import annotations

import gzip

import pytest
from wordfreq import zipf_frequency

from rag_contract.text.english import zipf
from tools.english_words import FLOOR, OUT, derive


def test_the_committed_list_is_what_the_command_derives():
    assert OUT.read_bytes() == derive(), "run `python -m tools.english_words` and commit the list"


@pytest.mark.parametrize("word", ["the", "cache", "crawler", "backend", "nginx", "regex", "jwt", "tunnelling"])
def test_a_word_reads_as_wordfreq_floored_to_a_tenth(word):
    exact = zipf_frequency(word, "en", wordlist="large")
    assert zipf(word) == (int(exact * 10 + 1e-9) / 10 if exact >= FLOOR else 0.0)
    for bar in (2.0, 2.2, 2.3, 2.5, 3.0):
        assert (zipf(word) < bar) == (exact < bar)  # every rule's comparison comes out alike


def test_a_word_below_the_floor_or_unknown_reads_zero():
    assert zipf("hpack") == 0.0 and zipf("zzqxv") == 0.0


@pytest.mark.parametrize(
    "compound", ["back-to-back", "keep-alive", "max-age", "multi-gigabyte", "percent-decoding", "link-local"]
)
def test_a_compound_reads_as_wordfreq_reads_the_phrase(compound):
    exact = zipf_frequency(compound, "en", wordlist="large")
    assert abs(zipf(compound) - exact) <= 0.2  # combined from parts floored to a tenth


def test_a_compound_with_a_rare_part_reads_zero():
    assert zipf("stale-while-revalidate") == 0.0 and zipf("zstd-compressed") == 0.0


def test_every_listed_word_and_every_near_miss_reads_its_band_as_a_dict_would():
    # the list is held sorted in one string, searched by bisection: each listed word reads the
    # band the file gives it, and a word one letter off reads what a dict lookup would (0.0 unless listed)
    listed: dict[str, float] = {}
    for line in gzip.decompress(OUT.read_bytes()).decode("utf-8").splitlines():
        band, _, words = line.partition("\t")
        listed.update(dict.fromkeys(words.split(), float(band)))
    assert all(zipf(w) == z for w, z in listed.items() if "-" not in w)
    near = [w + "s" for w in listed] + [w[:-1] for w in listed] + ["", "~", "zzzzzzzz", "é", "aardvarkz"]
    assert all(zipf(w) == listed.get(w, 0.0) for w in near if "-" not in w)
