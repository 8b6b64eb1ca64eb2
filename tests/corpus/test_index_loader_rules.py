"""The index's address and every loader check, on a two-section index written in microseconds:
each refusal with its whole message, and the edges that must still load (a question set with
no rows, sections whose rows are contiguous). Mutation testing runs this file against the
loader (eval/mutation.yaml), so it reads nothing from the committed index."""

from __future__ import annotations

import hashlib
import io
import json
from pathlib import Path

import numpy as np
import pytest

from rag_contract.corpus.chunking import Chunk
from rag_contract.corpus.sections import CODE, Section
from rag_contract.corpus.sentences import Sentence
from rag_contract.index.store import (
    DERIVED_IDENTITY,
    FILES,
    FORMAT,
    Index,
    IndexInputs,
    IndexLoadError,
    _inverted,
    assemble,
    derive,
    derived_files,
    load_index,
    read_meta,
    save_index,
    spellings,
    vocabulary,
)
from rag_contract.retrieval.lexical import Lexical
from rag_contract.retrieval.terms import TermWeights

INPUTS = IndexInputs("corpus-fp", "embedder-id", "chunking-id")
SECTIONS = [Section("rfc1#1", "One", "First text."), Section("rfc1#2", "Two", "Second text.")]
CHUNKS = [Chunk("rfc1#1/0", "rfc1#1", 0, "first"), Chunk("rfc1#2/0", "rfc1#2", 0, "second")]
SENTENCES = [Sentence("rfc1#1", 0, "First text."), Sentence("rfc1#2", 0, "app = Starlette(debug=True)", CODE)]


def small_index(questions: int = 1) -> Index:
    return assemble(
        INPUTS.version,
        INPUTS,
        "fake",
        SECTIONS,
        CHUNKS,
        np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]),
        SENTENCES,
        np.array([[0.5, 0.5, 0.0], [0.0, 0.5, 0.5]]),
        "qfp",
        ["What is one?"][:questions],
        np.array([[0.0, 0.0, 1.0]])[:questions],
    )


@pytest.fixture
def saved(tmp_path: Path) -> Path:
    d = tmp_path / "idx"
    save_index(small_index(), d)
    return d


def meta_of(d: Path) -> dict:
    return json.loads((d / "meta.json").read_text())


def write_meta(d: Path, meta: object) -> None:
    (d / "meta.json").write_text(json.dumps(meta))


def rehash(d: Path, name: str, data: bytes) -> None:
    """Replace ``name`` and make meta.json vouch for it, as a careless rebuild would."""
    (d / name).write_bytes(data)
    meta = meta_of(d)
    meta["files"][name] = hashlib.sha256(data).hexdigest()
    write_meta(d, meta)


def npy(a: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, np.asarray(a, dtype=np.float32), allow_pickle=False)
    return buf.getvalue()


def jsonl(rows: list[dict]) -> bytes:
    return "".join(json.dumps(r) + "\n" for r in rows).encode()


def refused(d: Path, message: str) -> None:
    with pytest.raises(IndexLoadError) as caught:
        load_index(d)
    assert str(caught.value) == message


def test_the_address_is_the_first_12_hex_of_the_inputs_hash():
    assert INPUTS.version == hashlib.sha256(b"corpus-fp\nembedder-id\nchunking-id").hexdigest()[:12]
    assert IndexInputs("a", "b", "c").version != IndexInputs("a", "b", "d").version


def test_a_saved_index_loads_as_itself(saved):
    index = load_index(saved)
    assert (index.version, index.inputs, index.embedder_name) == (INPUTS.version, INPUTS, "fake")
    assert list(index.sections.values()) == SECTIONS
    assert index.chunks == tuple(CHUNKS) and index.sentences == tuple(SENTENCES)
    assert index.vectors.tolist() == [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]
    assert index.sentence_vectors.tolist() == [[0.5, 0.5, 0.0], [0.0, 0.5, 0.5]]
    assert index.question_fingerprint == "qfp"
    assert {q: v.tolist() for q, v in index.question_vectors.items()} == {"What is one?": [0.0, 0.0, 1.0]}


def test_each_sentence_keeps_its_kind_through_save_and_load(saved):
    assert [s.kind for s in load_index(saved).sentences] == ["prose", "code"]
    assert [json.loads(line)["kind"] for line in (saved / "sentences.jsonl").read_text().splitlines()] == [
        "prose",
        "code",
    ]


def test_an_index_without_questions_loads(tmp_path):
    save_index(small_index(questions=0), tmp_path)
    assert dict(load_index(tmp_path).question_vectors) == {}


def test_a_missing_meta_is_named_with_its_directory(tmp_path):
    refused(tmp_path, f"meta.json: missing in index directory {tmp_path.name}/")


def test_an_unreadable_meta_is_named(saved):
    (saved / "meta.json").unlink()
    (saved / "meta.json").mkdir()
    refused(saved, "meta.json: cannot be read (Is a directory)")


@pytest.mark.parametrize("data", [b"{not json", b"\xff\xfe"])
def test_a_meta_that_is_not_json_is_refused(saved, data):
    (saved / "meta.json").write_bytes(data)
    with pytest.raises(IndexLoadError, match=r"^meta\.json: not valid JSON \(.+\)$"):
        read_meta(saved)


NEED = ["chunking", "corpus_fingerprint", "derived", "embedder", "embedder_identity", "files", "format", "version"]


@pytest.mark.parametrize("key", NEED)
def test_each_key_meta_must_hold_is_needed(saved, key):
    meta = meta_of(saved)
    del meta[key]
    write_meta(saved, meta)
    refused(saved, f"meta.json: must hold the keys {NEED}")


def test_a_meta_that_is_not_an_object_is_refused(saved):
    write_meta(saved, [NEED])
    refused(saved, f"meta.json: must hold the keys {NEED}")


def test_meta_files_must_be_a_mapping(saved):
    write_meta(saved, meta_of(saved) | {"files": list(FILES)})
    refused(saved, "meta.json: 'files' must map each index file to its sha256")


@pytest.mark.parametrize("fmt", [FORMAT - 1, FORMAT + 1, str(FORMAT)])
def test_another_format_is_refused(saved, fmt):
    write_meta(saved, meta_of(saved) | {"format": fmt})
    refused(saved, f"meta.json: format {fmt!r}, this code reads format {FORMAT}")


def test_meta_of_this_format_is_read(saved):
    assert read_meta(saved) == meta_of(saved)


@pytest.mark.parametrize("name", FILES)
def test_every_file_must_be_there(saved, name):
    (saved / name).unlink()
    refused(saved, f"{name}: missing in index directory")


def test_a_directory_is_not_a_file(saved):
    (saved / "vectors.npy").unlink()
    (saved / "vectors.npy").mkdir()
    refused(saved, "vectors.npy: missing in index directory")


def test_an_unreadable_file_is_named(saved, monkeypatch):
    real = Path.read_bytes

    def read_bytes(self: Path) -> bytes:
        if self.name == "chunks.jsonl":
            raise PermissionError(13, "Permission denied")
        return real(self)

    monkeypatch.setattr(Path, "read_bytes", read_bytes)
    refused(saved, "chunks.jsonl: cannot be read (Permission denied)")


@pytest.mark.parametrize("name", FILES)
def test_a_file_that_does_not_match_its_hash_is_refused(saved, name):
    data = (saved / name).read_bytes() + b"\n"
    (saved / name).write_bytes(data)
    want = meta_of(saved)["files"][name]
    refused(
        saved, f"{name}: sha256 {hashlib.sha256(data).hexdigest()[:16]}... does not match meta.json ({want[:16]}...)"
    )


def test_a_file_meta_does_not_vouch_for_is_refused(saved):
    meta = meta_of(saved)
    del meta["files"]["questions.json"]
    write_meta(saved, meta)
    got = hashlib.sha256((saved / "questions.json").read_bytes()).hexdigest()[:16]
    refused(saved, f"questions.json: sha256 {got}... does not match meta.json (None...)")


@pytest.mark.parametrize("field", ["corpus_fingerprint", "embedder_identity", "chunking"])
def test_a_version_that_is_not_the_address_of_its_inputs_is_refused(saved, field):
    meta = meta_of(saved)
    meta[field] += "-changed"
    write_meta(saved, meta)
    actual = IndexInputs(meta["corpus_fingerprint"], meta["embedder_identity"], meta["chunking"]).version
    refused(saved, f"meta.json: version {INPUTS.version} is not the address of its inputs ({actual})")


@pytest.mark.parametrize(
    ("name", "data"),
    [
        ("sections.jsonl", jsonl([{"id": "rfc1#1", "title": "One"}])),
        ("chunks.jsonl", b"not json\n"),
        ("sentences.jsonl", jsonl([{"section_id": "rfc1#1", "position": 0, "text": "x", "extra": 1}])),
        ("questions.json", b"[]"),
        ("questions.json", json.dumps({"fingerprint": "f", "questions": "What is one?"}).encode()),
        ("questions.json", json.dumps({"fingerprint": "f", "questions": [1]}).encode()),
        ("questions.json", json.dumps({"fingerprint": 1, "questions": ["What is one?"]}).encode()),
        ("questions.json", json.dumps({"questions": ["What is one?"]}).encode()),
    ],
)
def test_files_that_do_not_parse_are_refused_not_a_crash(saved, name, data):
    rehash(saved, name, data)
    with pytest.raises(IndexLoadError, match=r"^index files do not parse: "):
        load_index(saved)


def test_the_questions_rule_is_named(saved):
    rehash(saved, "questions.json", json.dumps({"fingerprint": 1, "questions": []}).encode())
    refused(
        saved,
        "index files do not parse: questions.json must hold a 'fingerprint' string and a 'questions' list of text",
    )


@pytest.mark.parametrize("name", ["vectors.npy", "sentence_vectors.npy", "question_vectors.npy"])
def test_an_array_that_is_not_npy_is_refused(saved, name):
    # IndexLoadError is a ValueError, so the parse step's handler prefixes it
    rehash(saved, name, b"not an array")
    with pytest.raises(IndexLoadError, match=rf"^index files do not parse: {name}: not a readable \.npy array \(.+\)$"):
        load_index(saved)


@pytest.mark.parametrize("name", ["vectors.npy", "sentence_vectors.npy", "question_vectors.npy"])
@pytest.mark.parametrize("shape", [(3,), (1, 2, 3)])
def test_an_array_must_be_two_dimensional(saved, name, shape):
    rehash(saved, name, npy(np.zeros(shape)))
    refused(saved, f"index files do not parse: {name}: expected a 2-d array, got shape {shape}")


@pytest.mark.parametrize(
    ("name", "rows", "message"),
    [
        ("vectors.npy", 1, "vectors.npy: 1 rows for 2 chunks"),
        ("vectors.npy", 3, "vectors.npy: 3 rows for 2 chunks"),
        ("sentence_vectors.npy", 1, "sentence_vectors.npy: 1 rows for 2 sentences"),
        ("sentence_vectors.npy", 3, "sentence_vectors.npy: 3 rows for 2 sentences"),
        ("question_vectors.npy", 0, "question_vectors.npy: 0 rows for 1 questions"),
        ("question_vectors.npy", 2, "question_vectors.npy: 2 rows for 1 questions"),
    ],
)
def test_each_array_has_a_row_per_item(saved, name, rows, message):
    rehash(saved, name, npy(np.zeros((rows, 3))))
    refused(saved, message)


@pytest.mark.parametrize("name", ["vectors.npy", "sentence_vectors.npy", "question_vectors.npy"])
@pytest.mark.parametrize("dims", [2, 4])
def test_each_array_has_the_dimensions_meta_names(saved, name, dims):
    rows = 1 if name == "question_vectors.npy" else 2
    rehash(saved, name, npy(np.zeros((rows, dims))))
    refused(saved, f"{name}: vectors of {dims} dimensions, meta.json says 3")


def test_an_empty_array_has_no_dimensions_to_check(tmp_path):
    save_index(small_index(questions=0), tmp_path)
    rehash(tmp_path, "question_vectors.npy", npy(np.zeros((0, 7))))
    assert dict(load_index(tmp_path).question_vectors) == {}


def test_dimensions_are_checked_against_meta_not_against_each_other(saved):
    meta = meta_of(saved)
    meta["dimensions"] = 4
    write_meta(saved, meta)
    refused(saved, "vectors.npy: vectors of 3 dimensions, meta.json says 4")


CHUNK_ROWS = [
    {"id": "rfc1#1/0", "section_id": "rfc1#1", "ordinal": 0, "text": "a"},
    {"id": "rfc1#2/0", "section_id": "rfc1#2", "ordinal": 0, "text": "b"},
    {"id": "rfc1#1/1", "section_id": "rfc1#1", "ordinal": 1, "text": "c"},
]
SENTENCE_ROWS = [
    {"section_id": "rfc1#1", "position": 0, "text": "a", "kind": "prose"},
    {"section_id": "rfc1#2", "position": 0, "text": "b", "kind": "prose"},
    {"section_id": "rfc1#1", "position": 1, "text": "c", "kind": "code"},
]


@pytest.mark.parametrize(
    ("name", "vectors", "rows"),
    [("chunks.jsonl", "vectors.npy", CHUNK_ROWS), ("sentences.jsonl", "sentence_vectors.npy", SENTENCE_ROWS)],
)
def test_rows_naming_an_unknown_section_are_refused(saved, name, vectors, rows):
    stray = [rows[0], rows[1] | {"section_id": "rfc9#9"}, rows[1] | {"section_id": "rfc9#8"}]
    rehash(saved, name, jsonl(stray))
    rehash(saved, vectors, npy(np.zeros((3, 3))))
    refused(saved, f"{name}: names section(s) the index does not hold: ['rfc9#8', 'rfc9#9']")


@pytest.mark.parametrize(
    ("name", "vectors", "rows"),
    [("chunks.jsonl", "vectors.npy", CHUNK_ROWS), ("sentences.jsonl", "sentence_vectors.npy", SENTENCE_ROWS)],
)
def test_a_sections_rows_must_be_contiguous(saved, name, vectors, rows):
    rehash(saved, name, jsonl(rows))
    rehash(saved, vectors, npy(np.zeros((3, 3))))
    refused(saved, f"{name}: the rows of a section must be contiguous; split: ['rfc1#1']")


@pytest.mark.parametrize(
    ("name", "vectors", "rows"),
    [("chunks.jsonl", "vectors.npy", CHUNK_ROWS), ("sentences.jsonl", "sentence_vectors.npy", SENTENCE_ROWS)],
)
def test_contiguous_rows_of_one_section_load(saved, name, vectors, rows):
    rehash(saved, name, jsonl([rows[0], rows[2], rows[1]]))
    rehash(saved, vectors, npy(np.zeros((3, 3))))
    chunks = [Chunk(**r) for r in [CHUNK_ROWS[0], CHUNK_ROWS[2], CHUNK_ROWS[1]]] if name == "chunks.jsonl" else CHUNKS
    for derived_name, data in derived_files(derive(SECTIONS, chunks)).items():
        rehash(saved, derived_name, data)
    index = load_index(saved)
    assert len(index.chunks if name == "chunks.jsonl" else index.sentences) == 3


def test_a_section_back_after_two_others_is_named_once(saved):
    rows = [
        CHUNK_ROWS[0],
        CHUNK_ROWS[1],
        CHUNK_ROWS[2],
        CHUNK_ROWS[1] | {"id": "rfc1#2/1", "ordinal": 1},
    ]
    rehash(saved, "chunks.jsonl", jsonl(rows))
    rehash(saved, "vectors.npy", npy(np.zeros((4, 3))))
    refused(saved, "chunks.jsonl: the rows of a section must be contiguous; split: ['rfc1#1', 'rfc1#2']")


def test_a_meta_with_exactly_the_keys_it_must_hold_is_read(saved):
    meta = {k: v for k, v in meta_of(saved).items() if k in NEED}
    write_meta(saved, meta)
    assert read_meta(saved) == meta


def test_an_array_of_pickled_objects_is_not_read(saved):
    buf = io.BytesIO()
    np.save(buf, np.array([[object(), object(), object()]] * 2, dtype=object), allow_pickle=True)
    rehash(saved, "vectors.npy", buf.getvalue())
    with pytest.raises(IndexLoadError, match=r"^index files do not parse: vectors\.npy: not a readable \.npy array"):
        load_index(saved)


def test_at_most_three_stray_sections_are_named(saved):
    rows = [CHUNK_ROWS[0]] + [CHUNK_ROWS[1] | {"id": f"x/{i}", "section_id": f"rfc9#{i}"} for i in range(4)]
    rehash(saved, "chunks.jsonl", jsonl(rows))
    rehash(saved, "vectors.npy", npy(np.zeros((5, 3))))
    refused(saved, "chunks.jsonl: names section(s) the index does not hold: ['rfc9#0', 'rfc9#1', 'rfc9#2']")


def test_at_most_three_split_sections_are_named(tmp_path):
    sections = [Section(f"rfc1#{i}", f"T{i}", "text") for i in range(4)]
    order = [0, 1, 2, 3, 0, 1, 2, 3]
    chunks = [Chunk(f"rfc1#{s}/{n}", f"rfc1#{s}", n, "c") for n, s in enumerate(order)]
    inputs = INPUTS
    index = assemble(
        inputs.version, inputs, "fake", sections, chunks, np.zeros((8, 3)), SENTENCES[:0], np.zeros((0, 3)), "q",
        [], np.zeros((0, 3)),
    )  # fmt: skip
    save_index(index, tmp_path)
    refused(tmp_path, "chunks.jsonl: the rows of a section must be contiguous; split: ['rfc1#0', 'rfc1#1', 'rfc1#2']")


# --- found by the loader fuzz (tests/corpus/test_index_fuzz.py): each once reached a request as a crash ---


def raw_npy(a: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, a, allow_pickle=False)
    return buf.getvalue()


PARSE = "index files do not parse: "
ROWS = {
    "sections.jsonl": [{"id": s.id, "title": s.title, "text": s.text, "parent": s.parent} for s in SECTIONS],
    "chunks.jsonl": [{"id": c.id, "section_id": c.section_id, "ordinal": c.ordinal, "text": c.text} for c in CHUNKS],
    "sentences.jsonl": [
        {"section_id": s.section_id, "position": s.position, "text": s.text, "kind": s.kind} for s in SENTENCES
    ],
}


@pytest.mark.parametrize(
    ("name", "key", "value", "rule"),
    [
        ("chunks.jsonl", "text", None, "'text' must be a string"),  # the fuzz's find: a 500 on every /ask
        ("chunks.jsonl", "ordinal", 1.0, "'ordinal' must be an integer"),
        ("chunks.jsonl", "id", 7, "'id' must be a string"),
        ("sections.jsonl", "title", ["One"], "'title' must be a string"),
        ("sections.jsonl", "text", 0, "'text' must be a string"),
        ("sections.jsonl", "parent", 1, "'parent' must be a string or null"),
        ("sentences.jsonl", "position", "0", "'position' must be an integer"),
        ("sentences.jsonl", "position", False, "'position' must be an integer"),
        ("sentences.jsonl", "section_id", None, "'section_id' must be a string"),
        ("sentences.jsonl", "kind", 1, "'kind' must be a string"),
        ("sentences.jsonl", "kind", "heading", "'kind' must be one of prose, code, item, row, got 'heading'"),
    ],
)
def test_a_field_of_the_wrong_type_is_refused_naming_file_line_and_key(saved, name, key, value, rule):
    rows = [dict(r) for r in ROWS[name]]
    rows[1][key] = value
    rehash(saved, name, jsonl(rows))
    refused(saved, f"{PARSE}{name}: line 2: {rule}")


@pytest.mark.parametrize("line", [[], "rfc1#1", {"id": "rfc1#2", "title": "Two"}, None])
def test_a_line_that_is_not_an_object_of_exactly_the_keys_is_refused(saved, line):
    rehash(saved, "sections.jsonl", jsonl([ROWS["sections.jsonl"][0]]) + json.dumps(line).encode() + b"\n")
    refused(
        saved,
        f"{PARSE}sections.jsonl: line 2 must be an object with exactly the keys ['id', 'parent', 'text', 'title']",
    )


@pytest.mark.parametrize("parent", ["rfc1#9", "rfc1#2"])
def test_a_parent_that_is_not_a_section_before_it_is_refused(saved, parent):
    rows = [dict(r) for r in ROWS["sections.jsonl"]]
    rows[0]["parent"] = parent  # unknown, or after it (a cycle could follow)
    rehash(saved, "sections.jsonl", jsonl(rows))
    refused(saved, f"sections.jsonl: rfc1#1's parent {parent!r} is not a section before it")


def test_an_extra_key_is_refused(saved):
    rehash(saved, "sentences.jsonl", jsonl([ROWS["sentences.jsonl"][0] | {"extra": 1}, ROWS["sentences.jsonl"][1]]))
    refused(
        saved,
        f"{PARSE}sentences.jsonl: line 1 must be an object with exactly the keys "
        "['kind', 'position', 'section_id', 'text']",
    )


def test_a_line_that_is_not_json_is_named(saved):
    rehash(saved, "chunks.jsonl", jsonl([ROWS["chunks.jsonl"][0]]) + b"{not json\n")
    refused(
        saved,
        f"{PARSE}chunks.jsonl: line 2 is not JSON "
        "(Expecting property name enclosed in double quotes: line 1 column 2 (char 1))",
    )


@pytest.mark.parametrize("doc", [[], {}, {"questions": ["What is one?"]}, {"fingerprint": "qfp"}, "qfp"])
def test_questions_json_of_another_shape_names_its_rule(saved, doc):
    rehash(saved, "questions.json", json.dumps(doc).encode())
    refused(saved, f"{PARSE}questions.json must hold a 'fingerprint' string and a 'questions' list of text")


@pytest.mark.parametrize("dtype", ["int64", "bool", "complex64", "<U3"])
def test_vectors_that_are_not_floating_point_are_refused(saved, dtype):
    rehash(saved, "sentence_vectors.npy", raw_npy(np.ones((2, 3)).astype(dtype)))
    refused(saved, f"{PARSE}sentence_vectors.npy: values of type {np.dtype(dtype)}, floating point expected")


@pytest.mark.parametrize("value", [np.nan, np.inf, -np.inf])
def test_a_vector_value_that_is_not_finite_is_refused(saved, value):
    a = np.ones((2, 3))
    a[1, 2] = value
    rehash(saved, "vectors.npy", raw_npy(a))
    refused(saved, f"{PARSE}vectors.npy: holds a value that is not a finite number")


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
def test_any_floating_point_width_loads(saved, dtype):
    rehash(saved, "vectors.npy", raw_npy(np.eye(2, 3).astype(dtype)))
    assert load_index(saved).vectors.dtype == np.float32


def three_sentences(saved: Path, positions: tuple[int, int, int]) -> None:
    owners = ("rfc1#1", "rfc1#1", "rfc1#2")
    rows = [
        {"section_id": s, "position": p, "text": f"S{i}.", "kind": "prose"}
        for i, (s, p) in enumerate(zip(owners, positions, strict=True))
    ]
    rehash(saved, "sentences.jsonl", jsonl(rows))
    rehash(saved, "sentence_vectors.npy", npy(np.ones((3, 3))))


def test_sentences_numbered_from_zero_in_each_section_load(saved):
    three_sentences(saved, (0, 1, 0))
    assert [s.position for s in load_index(saved).sentences] == [0, 1, 0]


@pytest.mark.parametrize(
    ("positions", "message"),
    [
        ((1, 2, 0), "sentences.jsonl: rfc1#1 sentence at position 1, expected 0"),
        ((0, 2, 0), "sentences.jsonl: rfc1#1 sentence at position 2, expected 1"),
        ((0, 0, 0), "sentences.jsonl: rfc1#1 sentence at position 0, expected 1"),
        ((0, 1, 2), "sentences.jsonl: rfc1#2 sentence at position 2, expected 0"),
        ((0, 1, -1), "sentences.jsonl: rfc1#2 sentence at position -1, expected 0"),
    ],
)
def test_a_sentence_position_out_of_its_sections_order_is_refused(saved, positions, message):
    three_sentences(saved, positions)
    refused(saved, message)


# --- derived data: stored with the index, checked at load -------------------------------------


def npz(**arrays: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    return buf.getvalue()


def derived_arrays(d: Path) -> dict[str, np.ndarray]:
    with np.load(d / "derived.npz") as z:
        return {k: z[k] for k in z.files}


def test_derived_data_loads_as_what_the_build_computed(saved):
    index = load_index(saved)
    assert index.derived.vocabulary == vocabulary(SECTIONS) and index.vocabulary == index.derived.vocabulary
    assert index.spellings == spellings(SECTIONS) == frozenset({"One", "First", "text", "Two", "Second"})
    fresh = Lexical([c.text for c in CHUNKS])
    for query in ("first", "second text", "first second", "nothing", ""):
        assert index.lexical.scores(query).tolist() == fresh.scores(query).tolist()
    contents = [index.passages[s.id].content for s in SECTIONS]
    assert index.weights == TermWeights.of(contents)
    assert {t: a.tolist() for t, a in index.content_index.items()} == {
        t: a.tolist() for t, a in _inverted(contents).items()
    }
    assert index.derived.content_terms == tuple(sorted(index.content_index))


def test_passage_terms_are_computed_per_section_on_first_use(saved):
    index = load_index(saved)
    assert len(index.passages) == 2 and list(index.passages) == ["rfc1#1", "rfc1#2"]
    first = index.passages["rfc1#1"]
    assert first.section_id == "rfc1#1" and first.content == {"first", "text"}  # "one" is a stopword
    assert index.passages["rfc1#1"] is first  # kept, not recomputed
    with pytest.raises(KeyError):
        index.passages["rfc9#9"]


def test_derived_bytes_are_the_same_for_the_same_sections_and_chunks():
    assert derived_files(derive(SECTIONS, CHUNKS)) == derived_files(derive(list(SECTIONS), list(CHUNKS)))
    # tokens are numbered in sorted order, whatever order bm25s gave them
    assert list(derive(SECTIONS, CHUNKS).lexical.vocab) == ["first", "second", ""]


@pytest.mark.parametrize("identity", [DERIVED_IDENTITY + "-changed", None])
def test_data_derived_by_other_rules_is_refused(saved, identity):
    write_meta(saved, meta_of(saved) | {"derived": identity})
    refused(
        saved,
        f"meta.json: derived by {identity!r}, this code derives by {DERIVED_IDENTITY!r}: "
        "rebuild the index (rag-contract build)",
    )


@pytest.mark.parametrize(
    ("name", "data"),
    [
        ("derived.json", b"not json"),
        ("derived.json", b"{}"),
        ("derived.npz", b"not an archive"),
        ("derived.npz", npz(bm25_data=np.zeros(2))),
    ],
)
def test_derived_files_that_do_not_parse_are_refused_not_a_crash(saved, name, data):
    rehash(saved, name, data)
    with pytest.raises(IndexLoadError, match=r"^index files do not parse: "):
        load_index(saved)


def test_an_unreadable_derived_archive_is_named(saved):
    rehash(saved, "derived.npz", b"not an archive")
    with pytest.raises(
        IndexLoadError, match=r"^index files do not parse: derived\.npz: not a readable \.npz archive \(.+\)$"
    ):
        load_index(saved)


def test_bm25_over_another_number_of_texts_is_refused(saved):
    text = json.loads((saved / "derived.json").read_text())
    rehash(saved, "derived.json", json.dumps(text | {"bm25_num_docs": 3}).encode())
    refused(saved, "derived.json: BM25 over 3 texts for 2 chunks")


def _with(saved: Path, **changed: np.ndarray) -> None:
    rehash(saved, "derived.npz", npz(**(derived_arrays(saved) | changed)))


@pytest.mark.parametrize(
    "change",
    [
        lambda a: {"bm25_data": a["bm25_data"][:-1]},
        lambda a: {"bm25_indices": a["bm25_indices"][:-1]},
        lambda a: {"bm25_indptr": np.append(a["bm25_indptr"][:-1], a["bm25_indptr"][-1] + 1)},
        lambda a: {"bm25_indptr": np.array([0, 2, 1, 2])},
    ],
    ids=["data-short", "indices-short", "indptr-past-the-end", "indptr-backwards"],
)
def test_bm25_arrays_that_are_not_one_sparse_matrix_are_refused(saved, change):
    a = derived_arrays(saved)
    assert a["bm25_indptr"].tolist() == [0, 1, 2]  # "first", "second"; the empty token has no column
    _with(saved, **change(a))
    refused(saved, "derived.npz: the BM25 arrays do not describe one sparse matrix")


@pytest.mark.parametrize("row", [-1, 2])
def test_bm25_naming_a_text_outside_the_chunks_is_refused(saved, row):
    _with(saved, bm25_indices=np.array([0, row], dtype=np.int32))
    refused(saved, "derived.npz: BM25 names a text outside the 2 chunks")


def test_bm25_naming_the_last_text_loads(saved):
    _with(saved, bm25_indices=np.array([1, 1], dtype=np.int32))
    assert load_index(saved).lexical.scores("first").tolist()[0] == 0.0


@pytest.mark.parametrize(
    "offsets",
    [
        lambda o: o[:-1],
        lambda o: np.append(o, o[-1]),
        lambda o: o + 1,
        lambda o: np.append(o[:-1], o[-1] - 1),
        lambda o: np.array([0, 2, 1, 4, 5]),
    ],
    ids=["one-short", "one-more", "not-from-0", "not-to-the-end", "backwards"],
)
def test_content_offsets_that_do_not_cut_the_rows_are_refused(saved, offsets):
    o = derived_arrays(saved)["content_offsets"]
    assert o.tolist() == [0, 1, 2, 4, 5]  # first, second, text (both sections), two
    _with(saved, content_offsets=offsets(o))
    refused(saved, "derived.npz: content_offsets do not cut content_rows into one run per content term")


@pytest.mark.parametrize("row", [-1, 2])
def test_a_content_term_naming_a_section_outside_the_index_is_refused(saved, row):
    rows = derived_arrays(saved)["content_rows"]
    _with(saved, content_rows=np.append(rows[:-1], row))
    refused(saved, "derived.npz: a content term names a section outside the 2 sections")


def test_a_content_term_naming_the_last_section_loads(saved):
    rows = derived_arrays(saved)["content_rows"]
    _with(saved, content_rows=np.append(rows[:-1], 1))
    assert load_index(saved).content_index["text"].tolist() == [0, 1]


def test_a_pickled_derived_array_is_not_read(saved):
    buf = io.BytesIO()
    arrays = derived_arrays(saved) | {"content_rows": np.array([object()] * 5, dtype=object)}
    np.savez(buf, allow_pickle=True, **arrays)
    rehash(saved, "derived.npz", buf.getvalue())
    with pytest.raises(IndexLoadError, match=r"^index files do not parse: derived\.npz: not a readable \.npz archive"):
        load_index(saved)


def test_a_bm25_column_with_no_texts_loads(saved):
    # one token's column emptied, its entry moved to the next: a valid matrix, if a sparse one
    _with(saved, bm25_indptr=np.array([0, 0, 2]), bm25_indices=np.array([0, 1], dtype=np.int32))
    assert load_index(saved).lexical.scores("first").tolist() == [0.0, 0.0]


def test_a_content_term_held_by_no_section_loads(saved):
    _with(saved, content_offsets=np.array([0, 1, 1, 4, 5]), content_rows=np.array([0, 0, 1, 1, 1]))
    assert load_index(saved).content_index["second"].tolist() == []


def test_content_rows_all_naming_one_section_load(saved):
    _with(saved, content_rows=np.zeros(5, dtype=np.int64))
    assert load_index(saved).content_index["text"].tolist() == [0, 0]
