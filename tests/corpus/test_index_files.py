"""The index loader checks structure as well as hashes: a file set that hashes right but does not
describe one index is refused at load, naming what is wrong."""

from __future__ import annotations

import hashlib
import io
import json
import shutil

import numpy as np
import pytest

from rag_contract.corpus.sentences import SPLITTER_IDENTITY, sentences, split_sections
from rag_contract.index.store import IndexLoadError, chunking_identity, derive, derived_files, load_index
from rag_contract.retrieval.terms import TermWeights
from rag_contract.text.words import passage_terms


@pytest.fixture
def index_copy(tmp_path, root):
    d = tmp_path / "index"
    shutil.copytree(root / "index", d)
    return d


def rehash(directory, name: str, data: bytes) -> None:
    """Write ``data`` as ``name`` and make meta.json vouch for it, as a careless rebuild would."""
    (directory / name).write_bytes(data)
    meta = json.loads((directory / "meta.json").read_text())
    meta["files"][name] = hashlib.sha256(data).hexdigest()
    (directory / "meta.json").write_text(json.dumps(meta, indent=1))


def npy(a: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, a.astype(np.float32), allow_pickle=False)
    return buf.getvalue()


def test_the_committed_index_holds_a_vector_for_every_sentence(index, project):
    assert len(index.sentences) == index.sentence_vectors.shape[0] > len(index.chunks)
    assert SPLITTER_IDENTITY in index.inputs.chunking
    for sid in ("rfc8259#7", "rfc9111#4.2.1"):
        rows = index.sentences_of(sid)
        assert [index.sentences[i].text for i in rows] == sentences(index.section(sid).text)
    # the stored units, kinds and all, are what the splitter cuts from the corpus now
    assert index.sentences == split_sections(project.corpus.sections)


def test_sentence_vectors_cut_to_fewer_dimensions_are_refused(index_copy, index):
    rehash(index_copy, "sentence_vectors.npy", npy(index.sentence_vectors[:, :10]))
    with pytest.raises(IndexLoadError, match=r"sentence_vectors.npy: vectors of 10 dimensions, meta.json says 384"):
        load_index(index_copy)


def test_a_missing_sentence_row_is_refused(index_copy, index):
    rehash(index_copy, "sentence_vectors.npy", npy(index.sentence_vectors[:-1]))
    with pytest.raises(IndexLoadError, match=r"sentence_vectors.npy: \d+ rows for \d+ sentences"):
        load_index(index_copy)


def test_a_sentence_naming_an_unknown_section_is_refused(index_copy):
    lines = (index_copy / "sentences.jsonl").read_text().splitlines()
    first = json.loads(lines[0]) | {"section_id": "rfc9999#1"}
    rehash(index_copy, "sentences.jsonl", ("\n".join([json.dumps(first), *lines[1:]]) + "\n").encode())
    with pytest.raises(
        IndexLoadError, match=r"sentences.jsonl: names section\(s\) the index does not hold: \['rfc9999#1'\]"
    ):
        load_index(index_copy)


def test_questions_json_of_the_wrong_shape_is_refused_not_a_crash(index_copy):
    rehash(index_copy, "questions.json", b"[]")
    with pytest.raises(IndexLoadError, match="index files do not parse"):
        load_index(index_copy)


def test_the_splitter_is_part_of_the_index_address(project):
    assert chunking_identity(project.chunk_params).endswith(SPLITTER_IDENTITY)
    assert len(split_sections(project.corpus.sections)) > 1000


def test_the_committed_derived_data_is_what_the_rules_derive_now(index):
    """The index stores what ``derive`` computes from its sections and chunks (BM25, content
    words, vocabulary): a change to those rules without a rebuild turns this red."""
    fresh = derive(list(index.sections.values()), index.chunks)
    assert derived_files(fresh) == derived_files(index.derived)
    contents = [passage_terms(s.id, s.text, s.title).content for s in index.sections.values()]
    assert index.weights == TermWeights.of(contents)
    assert [index.passages[sid].content for sid in index.sections] == contents
