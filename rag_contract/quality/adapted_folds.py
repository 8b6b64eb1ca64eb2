"""What calibration needs from one adapted embedder per fold, stored so it runs without torch.

Contract: an adapted embedder is tuned on questions, so ranking a question with the model that
was tuned on it is in sample. ``rag-contract adapt --folds`` tunes one model per calibration
fold on the corpus pairs and that fold's training questions, and stores, for every answerable
question, that model's two vector legs (``retrieval.ranking.vector_legs``: each section's best
chunk and best sentence cosine). ``calibrate`` fits each fold's fusion on its training questions'
legs and ranks its held-out questions by theirs. The file names what it was made from (corpus,
chunking, question set, fold assignment, training settings); ``load_fold_legs`` refuses one
made from other inputs, naming the input, rather than report figures of another question set.
"""

from __future__ import annotations

import io
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from rag_contract.index.store import chunking_identity
from rag_contract.project import Project

FOLDS_FILE = "minilm-l6-adapted-folds.npz"


class FoldLegsError(ValueError):
    pass


@dataclass(frozen=True)
class FoldLegs:
    meta: Mapping
    legs: Mapping[int, Mapping[str, tuple[np.ndarray, np.ndarray]]]  # fold -> question text -> (dense, sentence)

    @property
    def missing(self) -> list[int]:
        """Folds the file has no model's legs for (a run stopped early writes the folds it finished)."""
        return [f for f in range(int(self.meta["folds"])) if f not in self.legs]

    def of(self, fold: int, question: str) -> tuple[np.ndarray, np.ndarray]:
        return self.legs[fold][question]


def save_fold_legs(
    path: Path, meta: Mapping, questions: Sequence[str], legs: Mapping[int, Sequence[tuple[np.ndarray, np.ndarray]]]
) -> None:
    """``legs[fold][i]``: the (dense, sentence) legs of ``questions[i]`` under that fold's model."""
    arrays: dict[str, np.ndarray] = {"meta": np.array(json.dumps({**meta, "questions": list(questions)}))}
    for fold, rows in legs.items():
        arrays[f"dense_{fold}"] = np.stack([d for d, _ in rows]).astype(np.float32)
        arrays[f"sentence_{fold}"] = np.stack([s for _, s in rows]).astype(np.float32)
    buf = io.BytesIO()
    np.savez_compressed(buf, allow_pickle=False, **arrays)  # fixed member dates: the same arrays give the same bytes
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(buf.getvalue())


def load_fold_legs(path: Path, expect: Mapping[str, object]) -> FoldLegs:
    """The legs in ``path``; refused naming the key where the file's meta differs from ``expect``."""
    try:
        npz = np.load(path, allow_pickle=False)
        arrays = {name: npz[name] for name in npz.files}
        meta = json.loads(str(arrays["meta"]))
    except FileNotFoundError:
        raise FoldLegsError(f"{path.name}: missing; run `rag-contract adapt --folds`") from None
    except Exception as exc:  # numpy and zipfile raise several types for a corrupt archive
        raise FoldLegsError(f"{path.name}: not a readable fold-legs archive ({exc})") from None
    for key, want in expect.items():
        if meta.get(key) != want:
            raise FoldLegsError(
                f"{path.name}: made for {key} {str(meta.get(key))[:40]!r}, this project has {str(want)[:40]!r}; "
                "run `rag-contract adapt --folds`"
            )
    questions = meta["questions"]
    legs: dict[int, dict[str, tuple[np.ndarray, np.ndarray]]] = {}
    for fold in range(int(meta["folds"])):
        if f"dense_{fold}" not in arrays:
            continue
        dense, sentence = arrays[f"dense_{fold}"], arrays[f"sentence_{fold}"]
        if dense.shape != sentence.shape or dense.shape[0] != len(questions):
            raise FoldLegsError(f"{path.name}: fold {fold} holds {dense.shape[0]} rows for {len(questions)} questions")
        legs[fold] = {q: (dense[i], sentence[i]) for i, q in enumerate(questions)}
    return FoldLegs(meta, legs)


def fold_meta(project: Project, assignment: Mapping[str, int]) -> dict:
    """What a fold-legs file must have been made from to be used."""
    return {
        "corpus_fingerprint": project.corpus.fingerprint,
        "chunking": chunking_identity(project.chunk_params),
        "question_fingerprint": project.questions.fingerprint,
        "folds": len(set(assignment.values())),
        "assignment": dict(sorted(assignment.items())),
    }
