"""The package's English word list is what tools/english_words derives from wordfreq, byte for byte,
and reads as wordfreq does at every bar of one decimal above its floor."""

from __future__ import annotations

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
