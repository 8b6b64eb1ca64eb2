"""The index: a frozen, content-addressed build artefact, committed under ``index/``.

Contract:
- ``index_version(inputs) = sha256(corpus fingerprint + embedder identity + chunk parameters)[:12]``.
  Every input that changes a vector is in it; the question set is not (its vectors are
  stored beside the chunks with their own fingerprint, so a new question does not rename
  the index, and a stale question vector is still caught).
- ``Index`` holds everything a request needs (sections, chunks and their vectors, sentences
  and their vectors, lexical statistics, term weights, question vectors, grounding's passage
  terms) so acquiring one reference acquires all of
  it at once: an answer can never mix a query vector of one version with chunks of another.
- What is derived from the sections and chunks alone and costs time to compute (``Derived``:
  the BM25 statistics, which sections hold each content word, the corpus vocabulary and
  spellings) is computed by ``derive`` at build and stored with the index (``derived.json``,
  ``derived.npz``), hashed in ``meta.json`` like every file, under ``DERIVED_IDENTITY`` (the
  rules that derive it): a load takes it as stored, and refuses an index derived by other
  rules. It is not an input: the version does not change. Grounding's passage terms are
  computed per section on first use (``Index.passages``).
- ``load_index(dir)`` verifies every file against the sha256 recorded in ``meta.json`` and
  refuses a missing, corrupt or mismatched file naming it, and refuses a structure that does
  not hold together (rows per chunk and per sentence, one dimension for every vector, every
  chunk and sentence in a known section) naming what is wrong (``IndexLoadError``).
"""

from __future__ import annotations

import hashlib
import io
import json
import math
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType

import numpy as np

from rag_contract.config.questions import Question, question_fingerprint
from rag_contract.config.unreadable import unreadable
from rag_contract.corpus.chunking import Chunk, ChunkParams, chunk_sections
from rag_contract.corpus.roles import never_answers
from rag_contract.corpus.sections import KINDS, Section
from rag_contract.corpus.sentences import SPLITTER_IDENTITY, Sentence, split_sections
from rag_contract.corpus.sentences import embed_text as sentence_text
from rag_contract.corpus.sources import Corpus
from rag_contract.embedders.base import Embedder
from rag_contract.index.vector_cache import VectorCache
from rag_contract.project import Project
from rag_contract.retrieval.lexical import TOKENIZER_IDENTITY, Bm25State, Lexical
from rag_contract.retrieval.terms import TermWeights
from rag_contract.retrieval.vectors import runs
from rag_contract.text.lexicon import Lexicon
from rag_contract.text.words import PassageTerms, content_words, passage_terms, unwrap_hyphens

FORMAT = 5  # 4: each section records its parent; 5: each sentence its kind (prose, code, item, row)
FILES = (
    "sections.jsonl",
    "chunks.jsonl",
    "vectors.npy",
    "sentences.jsonl",
    "sentence_vectors.npy",
    "questions.json",
    "question_vectors.npy",
    "derived.json",
    "derived.npz",
)
# The rules ``derive`` applies: the lexical tokenizer, grounding's content words (passage_terms)
# and the vocabulary rules below. Change one and this, then rebuild (``rag-contract build``).
DERIVED_IDENTITY = f"derived-v1;{TOKENIZER_IDENTITY};content-words-v1;vocabulary-v1"


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
    # The embedded text is "title: chunk", so the prefix is part of what chunking means; the
    # sentences embedded beside the chunks are cut by a splitter that is named here too.
    return f"{params.identity};embed=title-prefixed;{SPLITTER_IDENTITY}"


def embed_text(chunk: Chunk, sections: Mapping[str, Section]) -> str:
    return f"{sections[chunk.section_id].title}: {chunk.text}"


def rebuild_texts(project: Project) -> list[str]:
    """Every text a full rebuild embeds, in build order: chunks, sentences, then questions."""
    sections = {s.id: s for s in project.corpus.sections}
    chunks = chunk_sections(project.corpus.sections, project.chunk_params)
    return (
        [embed_text(c, sections) for c in chunks]
        + [sentence_text(s, sections[s.section_id].title) for s in split_sections(project.corpus.sections)]
        + [q.question for q in project.questions.questions]
    )


@dataclass(frozen=True, eq=False)
class Derived:
    """What ``assemble`` needs that is a function of the sections and chunks alone, and slow
    to compute (~0.35 s for the committed index): stored with the index by ``save_index``."""

    lexical: Bm25State  # BM25 over the chunks
    content_terms: tuple[str, ...]  # every content word of any section (passage_terms), sorted
    # the sections holding content_terms[i] are content_rows[content_offsets[i]:content_offsets[i + 1]]
    content_offsets: np.ndarray
    content_rows: np.ndarray
    vocabulary: frozenset[str]
    spellings: frozenset[str]


class PassageTermsOnDemand(Mapping[str, PassageTerms]):
    """Section id -> grounding's terms of that section, computed on first use and kept: a
    cache, not state (identical for every reader; dict writes are atomic). A request reads
    the few sections it retrieved, so a start computes none."""

    def __init__(self, sections: Mapping[str, Section]):
        self._sections = sections
        self._terms: dict[str, PassageTerms] = {}

    def __getitem__(self, section_id: str) -> PassageTerms:
        terms = self._terms.get(section_id)
        if terms is None:
            s = self._sections[section_id]
            terms = self._terms[section_id] = passage_terms(s.id, s.text, s.title)
        return terms

    def __iter__(self) -> Iterator[str]:
        return iter(self._sections)

    def __len__(self) -> int:
        return len(self._sections)


def derive(sections: Sequence[Section], chunks: Sequence[Chunk]) -> Derived:
    """``Derived`` computed from ``sections`` and ``chunks`` (what a build stores)."""
    holders: dict[str, list[int]] = {}
    for row, s in enumerate(sections):
        for t in passage_terms(s.id, s.text, s.title).content:
            holders.setdefault(t, []).append(row)
    terms = tuple(sorted(holders))
    offsets = np.zeros(len(terms) + 1, dtype=np.int64)
    offsets[1:] = np.cumsum([len(holders[t]) for t in terms])
    rows = np.array([r for t in terms for r in holders[t]], dtype=np.int64)
    return Derived(
        lexical=Lexical([c.text for c in chunks]).state(),
        content_terms=terms,
        content_offsets=offsets,
        content_rows=rows,
        vocabulary=vocabulary(sections),
        spellings=spellings(sections),
    )


@dataclass(frozen=True, eq=False)
class Index:
    version: str
    inputs: IndexInputs
    embedder_name: str
    sections: Mapping[str, Section]
    chunks: tuple[Chunk, ...]
    vectors: np.ndarray
    sentences: tuple[Sentence, ...]
    sentence_vectors: np.ndarray
    lexical: Lexical
    question_fingerprint: str
    question_vectors: Mapping[str, np.ndarray]  # keyed by question *text*: a reworded question has none
    passages: Mapping[str, PassageTerms] = field(repr=False)  # computed per section on first use
    weights: TermWeights = field(repr=False)  # IDF of content words over the sections
    sentence_rows: Mapping[str, range] = field(repr=False)  # section id -> its rows in ``sentences``
    chunk_rows: Mapping[str, range] = field(repr=False)  # section id -> its rows in ``chunks``
    # Section-level views computed once at load, so ranking a query allocates nothing per item:
    section_order: tuple[str, ...] = field(repr=False)  # the sections' order in ``sections``
    chunk_owner: np.ndarray = field(repr=False)  # row of each chunk's section in ``section_order``
    sentence_owner: np.ndarray = field(repr=False)  # likewise for each sentence
    chunk_runs: tuple[np.ndarray, np.ndarray] = field(repr=False)  # (first row, section) of each section's chunks
    sentence_runs: tuple[np.ndarray, np.ndarray] = field(repr=False)  # likewise for sentences
    title_terms: tuple[frozenset[str], ...] = field(repr=False)  # content words of each title
    title_index: Mapping[str, np.ndarray] = field(repr=False)  # content word -> sections whose title has it
    content_index: Mapping[str, np.ndarray] = field(repr=False)  # content word -> sections whose passage has it
    # (sections x depth) rows of each section's ancestors (parent, grandparent, ...), padded with len(sections)
    ancestors: np.ndarray = field(repr=False)
    vocabulary: frozenset[str] = field(repr=False)  # every token of the corpus, lower-cased, hyphens kept
    spellings: frozenset[str] = field(repr=False)  # every word of the corpus as written (case kept)
    derived: Derived = field(repr=False)  # what the fields above were made from, as saved
    # Sections that never answer (``corpus.roles``: references, acknowledgements, ...), and what
    # the others say: every content word of an answering section, and their text lower-cased with
    # whitespace collapsed (for phrases). Read from titles at load; no part of the index address.
    never_answers: frozenset[str] = field(default=frozenset(), repr=False)
    answering: Lexicon = field(default=Lexicon.of(frozenset(), ""), repr=False)
    # a cache, not state: filled on first use, identical for every reader (dict writes are atomic)
    _sentence_terms: dict[int, frozenset[str]] = field(default_factory=dict, repr=False, compare=False)

    def section(self, section_id: str) -> Section:
        return self.sections[section_id]

    def sentences_of(self, section_id: str) -> range:
        return self.sentence_rows.get(section_id, range(0))

    def chunks_of(self, section_id: str) -> range:
        return self.chunk_rows.get(section_id, range(0))

    def sentence_terms(self, row: int) -> frozenset[str]:
        """Content words of sentence ``row``, computed on first use and kept with this Index."""
        terms = self._sentence_terms.get(row)
        if terms is None:
            terms = self._sentence_terms[row] = frozenset(content_words(self.sentences[row].text))
        return terms


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
    sentences: Sequence[Sentence],
    sentence_vectors: np.ndarray,
    qfingerprint: str,
    qtexts: Sequence[str],
    qvectors: np.ndarray,
    derived: Derived | None = None,
) -> Index:
    """The Index over these parts; ``derived`` as loaded, else computed (``derive``)."""
    by_id = {s.id: s for s in sections}
    derived = derived or derive(sections, chunks)
    terms, offsets, rows = derived.content_terms, derived.content_offsets.tolist(), derived.content_rows
    rows.setflags(write=False)
    n = len(sections)
    return Index(
        version=version,
        inputs=inputs,
        embedder_name=embedder_name,
        sections=MappingProxyType(by_id),
        chunks=tuple(chunks),
        vectors=_readonly(vectors),
        sentences=tuple(sentences),
        sentence_vectors=_readonly(sentence_vectors),
        lexical=Lexical.restored(derived.lexical),
        question_fingerprint=qfingerprint,
        question_vectors=MappingProxyType({q: _readonly(v) for q, v in zip(qtexts, qvectors, strict=True)}),
        passages=PassageTermsOnDemand(MappingProxyType(by_id)),
        # TermWeights.of over the sections' content words, from how many sections hold each
        weights=TermWeights(
            MappingProxyType({t: math.log((n + 1) / (offsets[i + 1] - offsets[i] + 1)) for i, t in enumerate(terms)}),
            math.log(n + 1),
        ),
        sentence_rows=_rows([s.section_id for s in sentences]),
        chunk_rows=_rows([c.section_id for c in chunks]),
        section_order=tuple(by_id),
        chunk_owner=(chunk_owner := _owners(by_id, [c.section_id for c in chunks])),
        sentence_owner=(sentence_owner := _owners(by_id, [s.section_id for s in sentences])),
        chunk_runs=runs(chunk_owner),
        sentence_runs=runs(sentence_owner),
        title_terms=(titles := tuple(frozenset(content_words(s.title)) for s in by_id.values())),
        title_index=_inverted(titles),
        content_index=MappingProxyType({t: rows[offsets[i] : offsets[i + 1]] for i, t in enumerate(terms)}),
        ancestors=_ancestors(tuple(by_id.values())),
        vocabulary=derived.vocabulary,
        spellings=derived.spellings,
        derived=derived,
        never_answers=(apparatus := frozenset(s.id for s in sections if never_answers(s.title))),
        answering=Lexicon.of(
            _answering_words(terms, offsets, rows, [sid in apparatus for sid in by_id]),
            " ".join(" ".join(f"{s.title} {s.text}".lower().split()) for s in sections if s.id not in apparatus),
        ),
    )


def _answering_words(
    terms: Sequence[str], offsets: Sequence[int], rows: np.ndarray, apparatus: Sequence[bool]
) -> frozenset[str]:
    """The content words some answering section holds (``rows`` of each term, as in ``content_index``)."""
    answering = ~np.asarray(apparatus, dtype=bool)
    return frozenset(t for i, t in enumerate(terms) if answering[rows[offsets[i] : offsets[i + 1]]].any())


_VOCABULARY_TOKEN = re.compile(r"[a-z0-9_]+(?:[-.][a-z0-9_]+)*")
_WORD = re.compile(r"[A-Za-z0-9_]+")
_COMPOUND = re.compile(r"[-.]")


def vocabulary(sections: Sequence[Section]) -> frozenset[str]:
    """Every token the corpus uses (titles included), lower-cased, compounds whole and split."""
    out: set[str] = set()
    for s in sections:
        for token in _VOCABULARY_TOKEN.findall(unwrap_hyphens(f"{s.title}\n{s.text}").lower()):
            out.add(token)
            out.update(_COMPOUND.split(token))
    return frozenset(out)


def spellings(sections: Sequence[Section]) -> frozenset[str]:
    """Every word of the corpus as written (case kept), titles included."""
    return frozenset(w for s in sections for w in _WORD.findall(unwrap_hyphens(f"{s.title}\n{s.text}")))


def _inverted(term_sets: Sequence[frozenset[str]]) -> Mapping[str, np.ndarray]:
    positions: dict[str, list[int]] = {}
    for i, terms in enumerate(term_sets):
        for t in terms:
            positions.setdefault(t, []).append(i)
    return MappingProxyType({t: np.array(v, dtype=np.int64) for t, v in positions.items()})


def _ancestors(sections: Sequence[Section]) -> np.ndarray:
    """Row of every ancestor of each section (its parent, the parent's parent, ...), padded
    with ``len(sections)`` so a caller can index a score array extended by one zero."""
    position = {s.id: i for i, s in enumerate(sections)}
    parent = {s.id: s.parent for s in sections}
    rows: list[list[int]] = []
    for s in sections:
        chain, up = [], s.parent
        while up is not None and up in position:
            chain.append(position[up])
            up = parent[up]
        rows.append(chain)
    depth = max((len(r) for r in rows), default=0) or 1
    a = np.full((len(rows), depth), len(rows), dtype=np.int64)
    for i, r in enumerate(rows):
        a[i, : len(r)] = r
    a.setflags(write=False)
    return a


def _rows(section_ids: Sequence[str]) -> Mapping[str, range]:
    """Section id -> the contiguous rows it owns (chunks and sentences are stored in section order)."""
    rows: dict[str, range] = {}
    for i, sid in enumerate(section_ids):
        start = rows[sid].start if sid in rows else i
        rows[sid] = range(start, i + 1)
    return MappingProxyType(rows)


def _owners(by_id: Mapping[str, Section], section_ids: Sequence[str]) -> np.ndarray:
    position = {sid: i for i, sid in enumerate(by_id)}
    a = np.array([position[sid] for sid in section_ids], dtype=np.int64)
    a.setflags(write=False)
    return a


@dataclass(frozen=True, eq=False)
class PreviousBuild:
    """What a rebuild can take from the index it replaces: every vector it holds, keyed by the
    text it embeds (``vector_key``), and its derived data, valid while the sections and chunks
    are the same."""

    vectors: VectorCache
    sections: tuple[Section, ...]
    chunks: tuple[Chunk, ...]
    derived: Derived


def previous_build(directory: Path) -> tuple[PreviousBuild | None, str | None]:
    """The index in ``directory`` as a ``PreviousBuild``, or None and why there is none to reuse
    (no index there, or one this code does not read: the rebuild is then a full one)."""
    if not (Path(directory) / "meta.json").is_file():
        return None, "no index there yet"
    try:
        stored = read_index(directory)
    except IndexLoadError as exc:
        return None, f"the index there is not reusable: {exc}"
    identity = stored.inputs.embedder_identity
    by_id = {s.id: s for s in stored.sections}
    chunk_texts = [embed_text(c, by_id) for c in stored.chunks]
    sentence_texts = [sentence_text(s, by_id[s.section_id].title) for s in stored.sentences]
    vectors = (
        VectorCache.of(identity, chunk_texts, stored.vectors)
        .merged(VectorCache.of(identity, sentence_texts, stored.svectors))
        .merged(VectorCache.of(identity, stored.qtexts, stored.qvectors))
    )
    return PreviousBuild(vectors, tuple(stored.sections), tuple(stored.chunks), stored.derived), None


@dataclass(frozen=True, eq=False)
class BuildPlan:
    """What a build of these inputs embeds: every text of the new index in build order (chunks,
    sentences, questions) and, of those, the ones no vector is cached for (``missing``, each
    once): only these are sent to the embedder. ``derived``: the previous build's, when its
    sections and chunks are these (else None: computed again)."""

    inputs: IndexInputs
    chunks: tuple[Chunk, ...]
    sentences: tuple[Sentence, ...]
    chunk_texts: tuple[str, ...]
    sentence_texts: tuple[str, ...]
    question_texts: tuple[str, ...]
    cache: VectorCache
    missing: tuple[str, ...]
    derived: Derived | None = None

    @property
    def reused(self) -> int:
        """Texts of the new index whose vector is taken from the cache (repeats counted once)."""
        return len(dict.fromkeys((*self.chunk_texts, *self.sentence_texts, *self.question_texts))) - len(self.missing)


def plan_build(
    corpus: Corpus,
    params: ChunkParams,
    embedder_identity: str,
    questions: Sequence[Question],
    previous: PreviousBuild | None = None,
) -> BuildPlan:
    sections = {s.id: s for s in corpus.sections}
    chunks = tuple(chunk_sections(corpus.sections, params))
    sentences = tuple(split_sections(corpus.sections))
    chunk_texts = tuple(embed_text(c, sections) for c in chunks)
    sentence_texts = tuple(sentence_text(s, sections[s.section_id].title) for s in sentences)
    question_texts = tuple(q.question for q in questions)
    cache = previous.vectors if previous else VectorCache()
    same_text = previous is not None and previous.sections == tuple(corpus.sections) and previous.chunks == chunks
    return BuildPlan(
        IndexInputs(corpus.fingerprint, embedder_identity, chunking_identity(params)),
        chunks,
        sentences,
        chunk_texts,
        sentence_texts,
        question_texts,
        cache,
        cache.missing(embedder_identity, (*chunk_texts, *sentence_texts, *question_texts)),
        previous.derived if previous is not None and same_text else None,
    )


def build_index(
    corpus: Corpus,
    params: ChunkParams,
    embedder: Embedder,
    embedder_name: str,
    questions: Sequence[Question],
    progress: Callable[[int], None] | None = None,
    plan: BuildPlan | None = None,
) -> Index:
    """The index of these inputs. ``plan`` (``plan_build`` over a ``previous_build``) makes it
    embed only ``plan.missing``; without one every text is embedded. ``progress`` is called
    with the count of texts embedded as they are."""
    plan = plan or plan_build(corpus, params, embedder.identity, questions)
    identity = plan.inputs.embedder_identity
    if identity != embedder.identity:
        raise ValueError(f"plan made for embedder {identity!r}, not {embedder.identity!r}")
    known = plan.cache
    if plan.missing:
        known = known.merged(VectorCache.of(identity, plan.missing, embedder.embed(list(plan.missing), progress)))
    dims = embedder.dimensions
    return assemble(
        plan.inputs.version,
        plan.inputs,
        embedder_name,
        corpus.sections,
        plan.chunks,
        known.stack(identity, plan.chunk_texts, dims),
        plan.sentences,
        known.stack(identity, plan.sentence_texts, dims),
        question_fingerprint(questions),
        list(plan.question_texts),
        known.stack(identity, plan.question_texts, dims),
        plan.derived,
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
        index.sentences,
        index.sentence_vectors,
        question_fingerprint(questions),
        [q.question for q in questions],
        qvectors,
        index.derived,
    )


# --- persistence --------------------------------------------------------------------------


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _npy_bytes(a: np.ndarray) -> bytes:

    buf = io.BytesIO()
    np.save(buf, np.asarray(a, dtype=np.float32), allow_pickle=False)
    return buf.getvalue()


def derived_files(derived: Derived) -> dict[str, bytes]:
    """``derived.json`` (the strings, in a fixed order) and ``derived.npz`` (the numbers)."""
    text = {
        "bm25_vocab": dict(derived.lexical.vocab),
        "bm25_num_docs": derived.lexical.num_docs,
        "content_terms": list(derived.content_terms),
        "vocabulary": sorted(derived.vocabulary),
        "spellings": sorted(derived.spellings),
    }
    buf = io.BytesIO()
    np.savez(  # the zip members carry a fixed date: the same arrays give the same bytes
        buf,
        bm25_data=derived.lexical.data,
        bm25_indices=derived.lexical.indices,
        bm25_indptr=derived.lexical.indptr,
        content_offsets=derived.content_offsets,
        content_rows=derived.content_rows,
    )
    return {
        "derived.json": (json.dumps(text, ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8"),
        "derived.npz": buf.getvalue(),
    }


def save_index(index: Index, directory: Path) -> None:
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    blobs = {
        "sections.jsonl": "".join(
            json.dumps({"id": s.id, "title": s.title, "text": s.text, "parent": s.parent}, ensure_ascii=False) + "\n"
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
        "sentences.jsonl": "".join(
            json.dumps(
                {"section_id": s.section_id, "position": s.position, "text": s.text, "kind": s.kind}, ensure_ascii=False
            )
            + "\n"
            for s in index.sentences
        ).encode("utf-8"),
        "sentence_vectors.npy": _npy_bytes(index.sentence_vectors),
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
        **derived_files(index.derived),
    }
    meta = {
        "format": FORMAT,
        "version": index.version,
        "corpus_fingerprint": index.inputs.corpus_fingerprint,
        "embedder": index.embedder_name,
        "embedder_identity": index.inputs.embedder_identity,
        "chunking": index.inputs.chunking,
        "lexical": TOKENIZER_IDENTITY,
        "derived": DERIVED_IDENTITY,
        "sections": len(index.sections),
        "chunks": len(index.chunks),
        "sentences": len(index.sentences),
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
    except OSError as exc:
        raise IndexLoadError(unreadable(path, exc)) from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise IndexLoadError(f"meta.json: not valid JSON ({exc})") from None
    need = {"format", "version", "corpus_fingerprint", "embedder", "embedder_identity", "chunking", "derived", "files"}
    if not isinstance(meta, dict) or not need <= set(meta):
        raise IndexLoadError(f"meta.json: must hold the keys {sorted(need)}")
    if not isinstance(meta["files"], dict):
        raise IndexLoadError("meta.json: 'files' must map each index file to its sha256")
    if meta["format"] != FORMAT:
        raise IndexLoadError(f"meta.json: format {meta['format']!r}, this code reads format {FORMAT}")
    if meta["derived"] != DERIVED_IDENTITY:
        raise IndexLoadError(
            f"meta.json: derived by {meta['derived']!r}, this code derives by {DERIVED_IDENTITY!r}: "
            "rebuild the index (rag-contract build)"
        )
    return meta


@dataclass(frozen=True, eq=False)
class StoredIndex:
    """The parts of an index directory, each file verified against ``meta.json`` and the whole
    checked to hold together (``check_structure``, ``check_derived``): what ``load_index``
    assembles, and what a rebuild reuses (``previous_build``) without assembling it."""

    meta: Mapping
    inputs: IndexInputs
    sections: list[Section]
    chunks: list[Chunk]
    sentences: list[Sentence]
    qfingerprint: str
    qtexts: list[str]
    vectors: np.ndarray
    svectors: np.ndarray
    qvectors: np.ndarray
    derived: Derived


def read_index(directory: Path) -> StoredIndex:
    directory = Path(directory)
    meta = read_meta(directory)
    data: dict[str, bytes] = {}
    for name in FILES:
        path = directory / name
        if not path.is_file():
            raise IndexLoadError(f"{name}: missing in index directory")
        try:
            raw = path.read_bytes()
        except OSError as exc:
            raise IndexLoadError(unreadable(path, exc)) from None
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
        sections = [Section(**r) for r in _records(data, "sections.jsonl", _SECTION_FIELDS)]
        chunks = [Chunk(**r) for r in _records(data, "chunks.jsonl", _CHUNK_FIELDS)]
        sentences = [_sentence(n, r) for n, r in enumerate(_records(data, "sentences.jsonl", _SENTENCE_FIELDS), 1)]
        q = json.loads(data["questions.json"])
        qtexts, qfingerprint = (q.get("questions"), q.get("fingerprint")) if isinstance(q, dict) else (None, None)
        if (
            not isinstance(qtexts, list)
            or not all(isinstance(t, str) for t in qtexts)
            or not isinstance(qfingerprint, str)
        ):
            raise ValueError("questions.json must hold a 'fingerprint' string and a 'questions' list of text")
        vectors = _load_npy(data["vectors.npy"], "vectors.npy")
        svectors = _load_npy(data["sentence_vectors.npy"], "sentence_vectors.npy")
        qvectors = _load_npy(data["question_vectors.npy"], "question_vectors.npy")
        derived = _read_derived(data["derived.json"], data["derived.npz"])
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        raise IndexLoadError(f"index files do not parse: {exc}") from None
    check_structure(meta, sections, chunks, sentences, len(qtexts), vectors, svectors, qvectors)
    check_derived(derived, len(sections), len(chunks))
    return StoredIndex(
        meta, inputs, sections, chunks, sentences, qfingerprint, qtexts, vectors, svectors, qvectors, derived
    )


def load_index(directory: Path) -> Index:
    stored = read_index(directory)
    return assemble(
        stored.meta["version"],
        stored.inputs,
        stored.meta["embedder"],
        stored.sections,
        stored.chunks,
        stored.vectors,
        stored.sentences,
        stored.svectors,
        stored.qfingerprint,
        stored.qtexts,
        stored.qvectors,
        stored.derived,
    )


# The fields of each JSON-lines file and their types: a line of another shape is refused by
# name here, not met later as an attribute error while a request is being answered.
_OPTIONAL_STR = (str, type(None))
_SECTION_FIELDS: Mapping[str, type | tuple[type, ...]] = MappingProxyType(
    {"id": str, "title": str, "text": str, "parent": _OPTIONAL_STR}
)
_CHUNK_FIELDS: Mapping[str, type | tuple[type, ...]] = MappingProxyType(
    {"id": str, "section_id": str, "ordinal": int, "text": str}
)
_SENTENCE_FIELDS: Mapping[str, type | tuple[type, ...]] = MappingProxyType(
    {"section_id": str, "position": int, "text": str, "kind": str}
)
_KIND = {str: "a string", int: "an integer", _OPTIONAL_STR: "a string or null"}


def _records(data: Mapping[str, bytes], name: str, fields: Mapping[str, type | tuple[type, ...]]) -> list[dict]:
    """Each line of ``data[name]`` as a JSON object holding exactly ``fields``, each of its type."""
    out = []
    for n, line in enumerate(data[name].decode().splitlines(), 1):
        try:
            item = json.loads(line)
        except ValueError as exc:
            raise ValueError(f"{name}: line {n} is not JSON ({exc})") from None
        if not isinstance(item, dict) or set(item) != set(fields):
            raise ValueError(f"{name}: line {n} must be an object with exactly the keys {sorted(fields)}")
        for key, kind in fields.items():
            if not isinstance(item[key], kind) or isinstance(item[key], bool):
                raise ValueError(f"{name}: line {n}: {key!r} must be {_KIND[kind]}")
        out.append(item)
    return out


def _sentence(line: int, record: dict) -> Sentence:
    if record["kind"] not in KINDS:
        kinds = ", ".join(KINDS)
        raise ValueError(f"sentences.jsonl: line {line}: 'kind' must be one of {kinds}, got {record['kind']!r}")
    return Sentence(**record)


def _read_derived(text: bytes, arrays: bytes) -> Derived:
    d = json.loads(text)
    try:
        npz = np.load(io.BytesIO(arrays), allow_pickle=False)
        a = {name: npz[name] for name in npz.files}
    except Exception as exc:  # numpy and zipfile raise several types for a corrupt archive
        raise ValueError(f"derived.npz: not a readable .npz archive ({exc})") from None
    return Derived(
        lexical=Bm25State(
            MappingProxyType(d["bm25_vocab"]), a["bm25_data"], a["bm25_indices"], a["bm25_indptr"], d["bm25_num_docs"]
        ),
        content_terms=tuple(d["content_terms"]),
        content_offsets=a["content_offsets"],
        content_rows=a["content_rows"],
        vocabulary=frozenset(d["vocabulary"]),
        spellings=frozenset(d["spellings"]),
    )


def check_derived(derived: Derived, sections: int, chunks: int) -> None:
    """The stored derived data indexes these sections and chunks, and no row outside them."""
    bm25 = derived.lexical
    if bm25.num_docs != chunks:
        raise IndexLoadError(f"derived.json: BM25 over {bm25.num_docs} texts for {chunks} chunks")
    if (
        len(bm25.data) != len(bm25.indices)
        or int(bm25.indptr[-1]) != len(bm25.data)
        or np.any(np.diff(bm25.indptr) < 0)
    ):
        raise IndexLoadError("derived.npz: the BM25 arrays do not describe one sparse matrix")
    if len(bm25.indices) and not 0 <= int(bm25.indices.min()) <= int(bm25.indices.max()) < chunks:
        raise IndexLoadError(f"derived.npz: BM25 names a text outside the {chunks} chunks")
    offsets, rows = derived.content_offsets, derived.content_rows
    if (
        len(offsets) != len(derived.content_terms) + 1
        or offsets[0] != 0
        or offsets[-1] != len(rows)
        or np.any(np.diff(offsets) < 0)
    ):
        raise IndexLoadError("derived.npz: content_offsets do not cut content_rows into one run per content term")
    if len(rows) and not 0 <= int(rows.min()) <= int(rows.max()) < sections:
        raise IndexLoadError(f"derived.npz: a content term names a section outside the {sections} sections")


def check_structure(
    meta: Mapping,
    sections: Sequence[Section],
    chunks: Sequence[Chunk],
    sentences: Sequence[Sentence],
    questions: int,
    vectors: np.ndarray,
    svectors: np.ndarray,
    qvectors: np.ndarray,
) -> None:
    """Hashes say the files are the ones written; this says they describe one index."""
    for name, rows, want, what in (
        ("vectors.npy", vectors.shape[0], len(chunks), "chunks"),
        ("sentence_vectors.npy", svectors.shape[0], len(sentences), "sentences"),
        ("question_vectors.npy", qvectors.shape[0], questions, "questions"),
    ):
        if rows != want:
            raise IndexLoadError(f"{name}: {rows} rows for {want} {what}")
    dims = meta.get("dimensions")
    for name, a in (("vectors.npy", vectors), ("sentence_vectors.npy", svectors), ("question_vectors.npy", qvectors)):
        if a.shape[0] and a.shape[1] != dims:
            raise IndexLoadError(f"{name}: vectors of {a.shape[1]} dimensions, meta.json says {dims}")
    known: set[str] = set()
    for s in sections:  # a parent precedes its children, so the ancestry has no cycle
        if s.parent is not None and s.parent not in known:
            raise IndexLoadError(f"sections.jsonl: {s.id}'s parent {s.parent!r} is not a section before it")
        known.add(s.id)
    for what, items in (("chunks.jsonl", chunks), ("sentences.jsonl", sentences)):
        stray = sorted({x.section_id for x in items} - known)
        if stray:
            raise IndexLoadError(f"{what}: names section(s) the index does not hold: {stray[:3]}")
        # ranking takes each section's best row from one contiguous run of rows
        ended: set[str] = set()
        split: list[str] = []
        for i, x in enumerate(items):
            if i and x.section_id != items[i - 1].section_id:
                ended.add(items[i - 1].section_id)
                if x.section_id in ended:
                    split.append(x.section_id)
        if split:
            raise IndexLoadError(f"{what}: the rows of a section must be contiguous; split: {split[:3]}")
    # drafting quotes a sentence by its position among its section's sentences
    for i, sentence in enumerate(sentences):
        first = i == 0 or sentences[i - 1].section_id != sentence.section_id
        want = 0 if first else sentences[i - 1].position + 1
        if sentence.position != want:
            raise IndexLoadError(
                f"sentences.jsonl: {sentence.section_id} sentence at position {sentence.position}, expected {want}"
            )


def _load_npy(raw: bytes, name: str) -> np.ndarray:

    try:
        a = np.load(io.BytesIO(raw), allow_pickle=False)
    except Exception as exc:  # numpy raises several types for a corrupt header
        raise IndexLoadError(f"{name}: not a readable .npy array ({exc})") from None
    if a.ndim != 2:
        raise IndexLoadError(f"{name}: expected a 2-d array, got shape {a.shape}")
    if a.dtype.kind != "f":
        raise IndexLoadError(f"{name}: values of type {a.dtype}, floating point expected")
    if not np.isfinite(a).all():
        raise IndexLoadError(f"{name}: holds a value that is not a finite number")
    return a
