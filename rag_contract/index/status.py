"""Freshness: is the committed index still the index of what is on disk?

``index_status`` recomputes the index address from the corpus, the configured embedder and
chunk parameters, and fingerprints the question set, then compares with ``index/meta.json``.
It names what changed (corpus / embedder / chunking / questions) and the version a rebuild
will produce. It never loads a model: the embedder identity is a function of the shipped
model's recorded hash (an adapted model's: the sha256 of its file, ~0.05 s for 23 MB) and the
pipeline parameters. Cost: one sha256 pass over ~950 KB of
corpus plus parsing, ~0.1 s; ``StatusCache`` makes repeated calls free while no input file
changed (keyed on size and mtime), which is what lets ``/health`` call it. ``status_against``
is the same comparison over inputs already read (a server has just loaded them):
``StatusCache.seed`` then keeps the first ``/health`` from reading and hashing them again.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from rag_contract.config.questions import QuestionsError, QuestionSet, load_questions
from rag_contract.config.thresholds import Thresholds, ThresholdsError, load_thresholds
from rag_contract.corpus.chunking import ChunkParams
from rag_contract.corpus.sources import Corpus, CorpusError
from rag_contract.embedders import make_embedder
from rag_contract.index.store import IndexInputs, IndexLoadError, chunking_identity, read_meta
from rag_contract.project import Paths, read_corpus


@dataclass(frozen=True)
class Change:
    what: str  # corpus | embedder | chunking | questions
    index_has: str
    disk_has: str


@dataclass(frozen=True)
class IndexStatus:
    index_version: str | None
    rebuild_version: str | None
    changes: tuple[Change, ...]
    error: str | None = None

    @property
    def fresh(self) -> bool:
        return self.error is None and not self.changes

    def describe(self) -> str:
        if self.error:
            return f"cannot check the index against what is on disk: {self.error}"
        if self.fresh:
            return f"index {self.index_version} is fresh"
        lines = [f"index {self.index_version} is stale; a rebuild will produce {self.rebuild_version}"]
        lines += [f"  {c.what}: index has {c.index_has}, disk has {c.disk_has}" for c in self.changes]
        return "\n".join(lines)

    def as_dict(self) -> dict:
        return {
            "fresh": self.fresh,
            "index_version": self.index_version,
            "rebuild_version": self.rebuild_version,
            "changes": [c.__dict__ for c in self.changes],
            "error": self.error,
        }


def _short(x: str) -> str:
    return x[:12] if len(x) > 24 else x


Inputs = tuple[Thresholds, Corpus, QuestionSet]


def index_status(paths: Paths, questions_path: Path | None = None) -> IndexStatus:
    def read() -> Inputs:
        thresholds = load_thresholds(paths.thresholds)
        corpus = read_corpus(paths)
        by_id = corpus.by_id()
        qs = load_questions(questions_path or paths.questions, set(by_id), lambda s: by_id[s].text)
        return thresholds, corpus, qs

    return status_against(paths, read)


def status_against(paths: Paths, inputs: Callable[[], Inputs]) -> IndexStatus:
    """``index/meta.json`` compared with ``inputs()`` (thresholds, corpus, question set); a
    refusal to read them is the status's error, as in ``index_status``."""
    try:
        meta = read_meta(paths.index)
    except IndexLoadError as exc:
        return IndexStatus(None, None, (), error=str(exc))
    try:
        thresholds, corpus, qs = inputs()
        params = ChunkParams(thresholds.index.chunk_words, thresholds.index.chunk_overlap)
        embedder = make_embedder(thresholds.index.embedder, paths.models)
    except (CorpusError, ThresholdsError, QuestionsError, ValueError) as exc:
        return IndexStatus(meta["version"], None, (), error=str(exc))
    disk = IndexInputs(corpus.fingerprint, embedder.identity, chunking_identity(params))
    changes = []
    if disk.corpus_fingerprint != meta["corpus_fingerprint"]:
        changes.append(Change("corpus", _short(meta["corpus_fingerprint"]), _short(disk.corpus_fingerprint)))
    if disk.embedder_identity != meta["embedder_identity"]:
        changes.append(Change("embedder", meta["embedder_identity"], disk.embedder_identity))
    if disk.chunking != meta["chunking"]:
        changes.append(Change("chunking", meta["chunking"], disk.chunking))
    if qs.fingerprint != meta.get("question_fingerprint"):
        changes.append(Change("questions", str(meta.get("question_fingerprint")), qs.fingerprint))
    return IndexStatus(meta["version"], disk.version, tuple(changes))


class StatusCache:
    """index_status, recomputed only when an input file's size or mtime moved."""

    def __init__(self, paths: Paths, compute: Callable[[Paths], IndexStatus] = index_status):
        self._paths = paths
        self._compute = compute
        self._key: tuple | None = None
        self._value: IndexStatus | None = None

    def stamp(self) -> tuple:
        """What the inputs look like now (name, size, mtime of each): take it before reading
        them, so a change made while they are read shows as a change at the next ``get``."""
        # the models: an adapted embedder's identity is the hash of its file; the corpus's
        # sub-folders hold documents too, and project.yaml's globs say which files are read
        files = (
            sorted(self._paths.corpus.rglob("*"))
            + sorted(self._paths.models.glob("*.onnx"))
            + [
                self._paths.index / "meta.json",
                self._paths.questions,
                self._paths.thresholds,
                self._paths.about,
            ]
        )
        out: list[tuple[str, int | None, int | None]] = []
        for f in files:
            try:
                st = os.stat(f)
                out.append((str(f), st.st_size, st.st_mtime_ns))
            except OSError:  # missing or unreadable: index_status names it
                out.append((str(f), None, None))
        return tuple(out)

    def get(self) -> IndexStatus:
        key = self.stamp()
        if key != self._key or self._value is None:
            self._value = self._compute(self._paths)
            self._key = key
        return self._value

    def seed(self, stamp: tuple, value: IndexStatus) -> None:
        """``value`` as the status while the inputs still look as at ``stamp``."""
        self._key, self._value = stamp, value
