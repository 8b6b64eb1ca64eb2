"""The index: a frozen, content-addressed build artefact, committed under ``index/``.

Contract:
- ``index_version(inputs) = sha256(corpus fingerprint + embedder identity + chunk parameters)[:12]``.
  Every input that changes a vector is in it; the question set is not (its vectors are
  stored beside the chunks with their own fingerprint, so a new question does not rename
  the index, and a stale question vector is still caught).
- ``Index`` holds everything a request needs (sections, chunks, vectors, lexical statistics,
  question vectors, grounding's passage terms) so acquiring one reference acquires all of
  it at once: an answer can never mix a query vector of one version with chunks of another.
- ``load_index(dir)`` verifies every file against the sha256 recorded in ``meta.json`` and
  refuses a missing, corrupt or mismatched file naming it (``IndexLoadError``).
"""

from __future__ import annotations

import hashlib
import io
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType

import numpy as np

from rag_contract.answering.grounding import PassageTerms, passage_terms
from rag_contract.config.questions import Question, question_fingerprint
from rag_contract.corpus.chunking import Chunk, ChunkParams, chunk_sections
from rag_contract.corpus.sources import Corpus, Section
from rag_contract.embedders.base import Embedder
from rag_contract.project import Project
from rag_contract.retrieval.lexical import TOKENIZER_IDENTITY, Lexical

FORMAT = 1
FILES = ("sections.jsonl", "chunks.jsonl", "vectors.npy", "questions.json", "question_vectors.npy")


class IndexLoadError(ValueError):
    pass


@dataclass(frozen=True)
class IndexInputs:
    corpus_fingerprint: str
    embedder_identity: str
    chunking: str

    @property
    def version(self) -> str:
        h = hashlib.sha256(f"{self.corpus_fingerprint}\n{self.embedder_identity}\n{self.chunking}".encode())
        return h.hexdigest()[:12]


def chunking_identity(params: ChunkParams) -> str:
    # The embedded text is "title: chunk", so the prefix is part of what chunking means.
    return f"{params.identity};embed=title-prefixed"


def embed_text(chunk: Chunk, sections: Mapping[str, Section]) -> str:
    return f"{sections[chunk.section_id].title}: {chunk.text}"


def rebuild_texts(project: Project) -> list[str]:
    """Every text a full rebuild embeds, in build order: chunk texts, then questions."""
    sections = {s.id: s for s in project.corpus.sections}
    chunks = chunk_sections(project.corpus.sections, project.chunk_params)
    return [embed_text(c, sections) for c in chunks] + [q.question for q in project.questions.questions]


@dataclass(frozen=True, eq=False)
class Index:
    version: str
    inputs: IndexInputs
    embedder_name: str
    sections: Mapping[str, Section]
    chunks: tuple[Chunk, ...]
    vectors: np.ndarray
    lexical: Lexical
    question_fingerprint: str
    question_vectors: Mapping[str, np.ndarray]  # keyed by question *text*: a reworded question has none
    passages: Mapping[str, PassageTerms] = field(repr=False)

    def section(self, section_id: str) -> Section:
        return self.sections[section_id]


def _readonly(a: np.ndarray) -> np.ndarray:
    a = np.ascontiguousarray(a, dtype=np.float32)
    a.setflags(write=False)
    return a


def assemble(
    version: str,
    inputs: IndexInputs,
    embedder_name: str,
    sections: Sequence[Section],
    chunks: Sequence[Chunk],
    vectors: np.ndarray,
    qfingerprint: str,
    qtexts: Sequence[str],
    qvectors: np.ndarray,
) -> Index:
    by_id = {s.id: s for s in sections}
    return Index(
        version=version,
        inputs=inputs,
        embedder_name=embedder_name,
        sections=MappingProxyType(by_id),
        chunks=tuple(chunks),
        vectors=_readonly(vectors),
        lexical=Lexical([c.text for c in chunks]),
        question_fingerprint=qfingerprint,
        question_vectors=MappingProxyType({q: _readonly(v) for q, v in zip(qtexts, qvectors, strict=True)}),
        passages=MappingProxyType({s.id: passage_terms(s.id, s.text, s.title) for s in sections}),
    )


def build_index(
    corpus: Corpus,
    params: ChunkParams,
    embedder: Embedder,
    embedder_name: str,
    questions: Sequence[Question],
    progress: Callable[[int], None] | None = None,
) -> Index:
    sections = {s.id: s for s in corpus.sections}
    chunks = chunk_sections(corpus.sections, params)
    inputs = IndexInputs(corpus.fingerprint, embedder.identity, chunking_identity(params))
    vectors = embedder.embed([embed_text(c, sections) for c in chunks], progress)
    qvectors = embedder.embed([q.question for q in questions], progress)
    return assemble(
        inputs.version,
        inputs,
        embedder_name,
        corpus.sections,
        chunks,
        vectors,
        question_fingerprint(questions),
        [q.question for q in questions],
        qvectors,
    )


def embed_questions(index: Index, embedder: Embedder, questions: Sequence[Question]) -> Index:
    """The same index with question vectors for ``questions`` (version unchanged)."""
    qvectors = embedder.embed([q.question for q in questions]) if questions else np.zeros((0, index.vectors.shape[1]))
    return assemble(
        index.version,
        index.inputs,
        index.embedder_name,
        list(index.sections.values()),
        index.chunks,
        index.vectors,
        question_fingerprint(questions),
        [q.question for q in questions],
        qvectors,
    )


# --- persistence --------------------------------------------------------------------------


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _npy_bytes(a: np.ndarray) -> bytes:

    buf = io.BytesIO()
    np.save(buf, np.asarray(a, dtype=np.float32), allow_pickle=False)
    return buf.getvalue()


def save_index(index: Index, directory: Path) -> None:
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    blobs = {
        "sections.jsonl": "".join(
            json.dumps({"id": s.id, "title": s.title, "text": s.text}, ensure_ascii=False) + "\n"
            for s in index.sections.values()
        ).encode("utf-8"),
        "chunks.jsonl": "".join(
            json.dumps(
                {"id": c.id, "section_id": c.section_id, "ordinal": c.ordinal, "text": c.text}, ensure_ascii=False
            )
            + "\n"
            for c in index.chunks
        ).encode("utf-8"),
        "vectors.npy": _npy_bytes(index.vectors),
        "questions.json": (
            json.dumps(
                {"fingerprint": index.question_fingerprint, "questions": list(index.question_vectors)},
                indent=1,
                ensure_ascii=False,
            )
            + "\n"
        ).encode(),
        "question_vectors.npy": _npy_bytes(
            np.stack(list(index.question_vectors.values()))
            if index.question_vectors
            else np.zeros((0, index.vectors.shape[1]))
        ),
    }
    meta = {
        "format": FORMAT,
        "version": index.version,
        "corpus_fingerprint": index.inputs.corpus_fingerprint,
        "embedder": index.embedder_name,
        "embedder_identity": index.inputs.embedder_identity,
        "chunking": index.inputs.chunking,
        "lexical": TOKENIZER_IDENTITY,
        "sections": len(index.sections),
        "chunks": len(index.chunks),
        "dimensions": int(index.vectors.shape[1]),
        "question_fingerprint": index.question_fingerprint,
        "files": {name: _sha256(data) for name, data in blobs.items()},
    }
    # Data first, meta last: a half-written rebuild never carries a meta that vouches for it.
    for name, data in blobs.items():
        (directory / name).write_bytes(data)
    (directory / "meta.json").write_text(json.dumps(meta, indent=1) + "\n")


def read_meta(directory: Path) -> dict:
    path = Path(directory) / "meta.json"
    try:
        meta = json.loads(path.read_text())
    except FileNotFoundError:
        raise IndexLoadError(f"meta.json: missing in index directory {Path(directory).name}/") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise IndexLoadError(f"meta.json: not valid JSON ({exc})") from None
    need = {"format", "version", "corpus_fingerprint", "embedder", "embedder_identity", "chunking", "files"}
    if not isinstance(meta, dict) or not need <= set(meta):
        raise IndexLoadError(f"meta.json: must hold the keys {sorted(need)}")
    if not isinstance(meta["files"], dict):
        raise IndexLoadError("meta.json: 'files' must map each index file to its sha256")
    if meta["format"] != FORMAT:
        raise IndexLoadError(f"meta.json: format {meta['format']!r}, this code reads format {FORMAT}")
    return meta


def load_index(directory: Path) -> Index:
    directory = Path(directory)
    meta = read_meta(directory)
    data: dict[str, bytes] = {}
    for name in FILES:
        path = directory / name
        if not path.is_file():
            raise IndexLoadError(f"{name}: missing in index directory")
        raw = path.read_bytes()
        want = meta["files"].get(name)
        if _sha256(raw) != want:
            raise IndexLoadError(
                f"{name}: sha256 {_sha256(raw)[:16]}... does not match meta.json ({str(want)[:16]}...)"
            )
        data[name] = raw
    inputs = IndexInputs(meta["corpus_fingerprint"], meta["embedder_identity"], meta["chunking"])
    if inputs.version != meta["version"]:
        raise IndexLoadError(
            f"meta.json: version {meta['version']} is not the address of its inputs ({inputs.version})"
        )
    try:
        sections = [Section(**json.loads(ln)) for ln in data["sections.jsonl"].decode().splitlines()]
        chunks = [Chunk(**json.loads(ln)) for ln in data["chunks.jsonl"].decode().splitlines()]
        q = json.loads(data["questions.json"])
        vectors = _load_npy(data["vectors.npy"], "vectors.npy")
        qvectors = _load_npy(data["question_vectors.npy"], "question_vectors.npy")
    except (ValueError, TypeError, KeyError) as exc:
        raise IndexLoadError(f"index files do not parse: {exc}") from None
    if vectors.shape[0] != len(chunks):
        raise IndexLoadError(f"vectors.npy: {vectors.shape[0]} rows for {len(chunks)} chunks")
    if qvectors.shape[0] != len(q["questions"]):
        raise IndexLoadError(f"question_vectors.npy: {qvectors.shape[0]} rows for {len(q['questions'])} questions")
    return assemble(
        meta["version"], inputs, meta["embedder"], sections, chunks, vectors, q["fingerprint"], q["questions"], qvectors
    )


def _load_npy(raw: bytes, name: str) -> np.ndarray:

    try:
        a = np.load(io.BytesIO(raw), allow_pickle=False)
    except Exception as exc:  # numpy raises several types for a corrupt header
        raise IndexLoadError(f"{name}: not a readable .npy array ({exc})") from None
    if a.ndim != 2:
        raise IndexLoadError(f"{name}: expected a 2-d array, got shape {a.shape}")
    return a
