"""A rebuild embeds only what the index it replaces does not hold: each vector is found again by
its text and the embedder's identity, and the index written is the one a full build writes, byte
for byte. A counting embedder (a vector per text from its sha256) shows what is sent to embed."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest

from rag_contract.config.questions import Question
from rag_contract.corpus.chunking import ChunkParams
from rag_contract.corpus.sections import Section
from rag_contract.corpus.sources import Corpus
from rag_contract.index.store import FILES, build_index, plan_build, previous_build, save_index
from rag_contract.index.vector_cache import VectorCache, vector_key

PARAMS = ChunkParams(words=12, overlap=2)
SECTIONS = (
    Section("doc.md", "Doc", "Start here. This page says how to install and configure the tool."),
    Section("doc.md#install", "Install", "Run the installer once per machine. It needs a network.", "doc.md"),
    Section("doc.md#configure", "Configure", "The settings file lives beside the program. Read at start.", "doc.md"),
)
QUESTIONS = (Question("q1", "How do I install it?", ("doc.md#install",)),)


@dataclass
class CountingEmbedder:
    identity: str = "counting-v1"
    dimensions: int = 8
    sent: list[str] = field(default_factory=list)

    def embed(self, texts, progress=None):
        self.sent.extend(texts)
        out = np.array(
            [np.frombuffer(hashlib.sha256(t.encode()).digest()[:8], dtype=np.uint8) for t in texts], dtype=np.float32
        ).reshape(len(texts), self.dimensions)
        out += 1.0
        for _ in texts:
            if progress:
                progress(1)
        return out / np.linalg.norm(out, axis=1, keepdims=True)


def build(directory: Path, sections=SECTIONS, questions=QUESTIONS, embedder=None, reuse=True) -> CountingEmbedder:
    """Build into ``directory`` (reusing the index there when ``reuse``); the embedder used."""
    embedder = embedder or CountingEmbedder()
    corpus = Corpus((), tuple(sections))
    previous, _ = previous_build(directory) if reuse else (None, None)
    plan = plan_build(corpus, PARAMS, embedder.identity, questions, previous)
    save_index(build_index(corpus, PARAMS, embedder, "counting", questions, None, plan), directory)
    return embedder


def files(directory: Path) -> dict[str, bytes]:
    return {name: (directory / name).read_bytes() for name in (*FILES, "meta.json")}


def test_a_first_build_embeds_every_text_once(tmp_path):
    embedder = build(tmp_path / "idx")
    corpus = Corpus((), SECTIONS)
    plan = plan_build(corpus, PARAMS, embedder.identity, QUESTIONS)
    everything = [*plan.chunk_texts, *plan.sentence_texts, *plan.question_texts]
    assert sorted(embedder.sent) == sorted(dict.fromkeys(everything))


def test_an_unchanged_rebuild_embeds_nothing_and_writes_the_same_bytes(tmp_path):
    build(tmp_path / "idx")
    before = files(tmp_path / "idx")
    again = build(tmp_path / "idx")
    assert again.sent == []
    assert files(tmp_path / "idx") == before


def test_a_new_question_is_the_only_text_embedded_and_the_index_is_a_full_builds(tmp_path):
    build(tmp_path / "idx")
    more = (*QUESTIONS, Question("q2", "Where does the settings file live?", ("doc.md#configure",)))
    rebuilt = build(tmp_path / "idx", questions=more)
    assert rebuilt.sent == ["Where does the settings file live?"]
    build(tmp_path / "fresh", questions=more, reuse=False)
    assert files(tmp_path / "idx") == files(tmp_path / "fresh")  # same version, same arrays, byte for byte


def test_an_edited_section_re_embeds_only_its_own_chunks_and_sentences(tmp_path):
    build(tmp_path / "idx")
    edited = (SECTIONS[0], SECTIONS[1], Section("doc.md#configure", "Configure", "Settings are read once.", "doc.md"))
    rebuilt = build(tmp_path / "idx", sections=edited)
    assert rebuilt.sent and all("Settings are read once" in t for t in rebuilt.sent)
    build(tmp_path / "fresh", sections=edited, reuse=False)
    assert files(tmp_path / "idx") == files(tmp_path / "fresh")


def test_another_embedder_reuses_no_vector(tmp_path):
    first = build(tmp_path / "idx")
    other = build(tmp_path / "idx", embedder=CountingEmbedder(identity="counting-v2"))
    assert sorted(other.sent) == sorted(first.sent)


def test_no_index_or_an_unreadable_one_is_a_full_build_saying_why(tmp_path):
    assert previous_build(tmp_path / "none") == (None, "no index there yet")
    build(tmp_path / "idx")
    (tmp_path / "idx" / "vectors.npy").write_bytes(b"not an array")
    previous, why = previous_build(tmp_path / "idx")
    assert previous is None and why is not None and why.startswith("the index there is not reusable: vectors.npy")
    assert len(build(tmp_path / "idx").sent) > 0


def test_the_cache_keys_on_text_and_identity_and_names_a_missing_text():
    cache = VectorCache.of("e1", ["a", "b"], np.eye(2, dtype=np.float32))
    assert vector_key("e1", "a") != vector_key("e2", "a") != vector_key("e1", "b")
    assert cache.missing("e1", ["a", "c", "c", "b", "d"]) == ("c", "d")
    assert cache.missing("e2", ["a"]) == ("a",)
    assert cache.stack("e1", ["b", "a"], 2).tolist() == [[0.0, 1.0], [1.0, 0.0]]
    with pytest.raises(KeyError, match="no vector for 'z'"):
        cache.stack("e1", ["z"], 2)
