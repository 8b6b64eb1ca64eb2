"""Benchmarks (pytest-benchmark): retrieval per query in each mode, and a served answer.

Goals live here, not in timed unit tests: ``make bench-compare`` holds these medians to the
committed baseline in eval/benchmarks/ the way a pull request would.
"""

from __future__ import annotations

import pytest

from rag_contract.answering.drafting import FixtureDrafter
from rag_contract.answering.service import Service, committed_vector
from rag_contract.embedders import make_embedder
from rag_contract.index.registry import Registry
from rag_contract.retrieval.ranking import MODES, rank_sections


@pytest.fixture(scope="module")
def question(project):
    return project.questions.answerable[0]


@pytest.mark.parametrize("mode", MODES)
def test_retrieval_per_query(benchmark, index, project, question, mode):
    r = project.thresholds.retrieval
    vec = index.question_vectors[question.question]
    hits = benchmark(rank_sections, index, question.question, vec, mode, r.top_k, r.rrf_k, r.fusion)
    assert len(hits) == r.top_k


def test_served_answer_fixture_path(benchmark, index, project, root):
    """Service.answer on every fixed question in turn: retrieval, fixture draft, grounding."""
    svc = Service(
        Registry(index),
        project.thresholds,
        FixtureDrafter(root / "eval" / "fixtures" / "drafts"),
        query_vector=committed_vector(make_embedder(index.embedder_name, root / "models")),
    )
    qs = project.questions.questions

    def answer_all():
        return [svc.answer(q.question, q.id) for q in qs]

    answers = benchmark(answer_all)
    assert len(answers) == len(qs)
