"""The committed project on disk, loaded once: thresholds, corpus, question set, paths.

Every presenter (CLI, HTTP app, gate) starts from ``load_project(root)``; each loader
underneath refuses bad input naming the file or key and the rule, so a broken checkout fails
here, at load, rather than in the middle of a request.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from rag_contract.config.about import About, load_about
from rag_contract.config.corpus_selection import load_selection
from rag_contract.config.questions import Question, QuestionSet, load_questions
from rag_contract.config.thresholds import Thresholds, load_thresholds
from rag_contract.corpus.chunking import ChunkParams
from rag_contract.corpus.sources import Corpus, load_corpus


@dataclass(frozen=True)
class Paths:
    root: Path

    @property
    def corpus(self) -> Path:
        return self.root / "corpus"

    @property
    def index(self) -> Path:
        return self.root / "index"

    @property
    def about(self) -> Path:
        return self.root / "project.yaml"

    @property
    def models(self) -> Path:
        """Models tuned on this project's corpus (``rag-contract adapt``), committed."""
        return self.root / "models"

    @property
    def questions(self) -> Path:
        return self.root / "eval" / "questions.yaml"

    @property
    def calibration(self) -> Path:
        """What the relevance fit learns from besides the questions (``config.calibration``)."""
        return self.root / "eval" / "calibration.yaml"

    @property
    def thresholds(self) -> Path:
        return self.root / "eval" / "thresholds.yaml"

    @property
    def annotations(self) -> Path:
        return self.root / "eval" / "annotations.yaml"

    @property
    def prices(self) -> Path:
        return self.root / "eval" / "prices.yaml"

    @property
    def drafts(self) -> Path:
        """Recorded drafter output, one file per question."""
        return self.root / "eval" / "fixtures" / "drafts"

    @property
    def results(self) -> Path:
        """The committed reports the README quotes."""
        return self.root / "eval" / "results"

    def result(self, name: str) -> Path:
        return self.results / name


@dataclass(frozen=True)
class Project:
    paths: Paths
    thresholds: Thresholds
    corpus: Corpus
    questions: QuestionSet
    about: About

    @property
    def chunk_params(self) -> ChunkParams:
        return ChunkParams(self.thresholds.index.chunk_words, self.thresholds.index.chunk_overlap)

    def with_questions(self, path: Path) -> Project:
        return Project(self.paths, self.thresholds, self.corpus, read_questions(path, self.corpus), self.about)


def read_questions(path: Path, corpus: Corpus) -> QuestionSet:
    by_id = corpus.by_id()
    return load_questions(path, set(by_id), lambda s: by_id[s].text)


def read_development(project: Project, paths: Sequence[Path]) -> tuple[tuple[Path, tuple[Question, ...]], ...]:
    """Each development question file (relative to the project root), read with the question
    loader's rules; ids are prefixed with the file's stem (``rfc-sealed-2/k01``), so sets that
    reuse an id stay apart from each other and from the committed questions."""
    out = []
    for path in paths:
        qs = read_questions(project.paths.root / path, project.corpus).questions
        out.append((path, tuple(replace(q, id=f"{path.stem}/{q.id}") for q in qs)))
    return tuple(out)


def read_corpus(paths: Paths) -> Corpus:
    """The corpus, with the files project.yaml's ``corpus`` globs leave out left out."""
    return load_corpus(paths.corpus, load_selection(paths.about))


def find_root(start: Path | None = None) -> Path:
    """The nearest directory at or above ``start`` holding corpus/manifest.yaml."""
    here = (start or Path.cwd()).resolve()
    for d in (here, *here.parents):
        if (d / "corpus" / "manifest.yaml").is_file() and (d / "eval").is_dir():
            return d
    raise FileNotFoundError("no rag-contract project (corpus/manifest.yaml) at or above the current directory")


def load_project(root: Path | None = None, questions: Path | None = None, thresholds: Path | None = None) -> Project:
    paths = Paths(Path(root) if root else find_root())
    corpus = read_corpus(paths)
    return Project(
        paths=paths,
        thresholds=load_thresholds(thresholds or paths.thresholds),
        corpus=corpus,
        questions=read_questions(questions or paths.questions, corpus),
        about=load_about(paths.about),
    )
