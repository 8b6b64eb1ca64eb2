"""The fused section score's features (retrieval.ranking.section_features), one property each."""

from __future__ import annotations

import numpy as np
import pytest

from rag_contract.config.thresholds import FUSION_FEATURES
from rag_contract.corpus.formats.rfc_text import with_parents
from rag_contract.corpus.sections import Section
from rag_contract.index.store import _ancestors
from rag_contract.retrieval.ranking import section_features


def test_ancestors_are_the_sections_above_padded_with_the_count():
    ids = ["r#1", "r#2", "r#2.1", "r#2.1.3", "r#2.2.1", "s#2", "r#A"]
    a = _ancestors(with_parents([Section(i, i, "") for i in ids]))
    pad = len(ids)
    assert a.shape == (7, 2)
    assert a[3].tolist() == [2, 1]  # r#2.1.3 under r#2.1, under r#2
    assert a[4].tolist() == [1, pad]  # r#2.2 is not in the index: only r#2 counts
    assert a[5].tolist() == [pad, pad]  # another document's 2 is not r#2's child
    assert a[0].tolist() == a[6].tolist() == [pad, pad]
    assert not a.flags.writeable


def test_ancestors_follow_the_parents_whatever_the_ids_say():
    sections = [
        Section("p.md", "Page", ""),
        Section("p.md#a", "A", "", "p.md"),
        Section("p.md#b", "B", "", "p.md#a"),
        Section("p.md#c", "C", "", "p.md"),
    ]
    a = _ancestors(sections)
    assert a.tolist() == [[4, 4], [0, 4], [1, 0], [0, 4]]


def _features(index, project, text: str) -> dict[str, np.ndarray]:
    q = project.questions.questions[0]
    vec = index.question_vectors[q.question]  # any unit vector: these checks read the lexical features
    f = section_features(index, text, vec)
    assert f.shape == (len(index.section_order), len(FUSION_FEATURES))
    return {name: f[:, i] for i, name in enumerate(FUSION_FEATURES)}


def _row(index, sid: str) -> int:
    return index.section_order.index(sid)


def test_ancestor_title_credits_a_subsection_with_its_parents_title(index, project):
    f = _features(index, project, "Which path does Set-Cookie default to?")
    path_attr = _row(index, "rfc6265#5.2.4")  # "The Path Attribute", under 5.2 "The Set-Cookie Header"
    assert f["ancestor_title"][path_attr] > 0
    assert f["ancestor_title"][path_attr] == pytest.approx(f["title"][_row(index, "rfc6265#5.2")])
    assert f["ancestor_title"][_row(index, "rfc6265#5")] == 0  # a top-level section has no ancestor


def test_coverage_is_the_weighted_share_of_the_question_words_in_the_passage(index, project):
    f = _features(index, project, "no-cache response directive")
    assert f["coverage"].max() == pytest.approx(1.0)
    assert f["coverage"][_row(index, "rfc9111#5.2.2.4")] == pytest.approx(1.0)
    assert ((f["coverage"] >= 0) & (f["coverage"] <= 1 + 1e-9)).all()
    nothing = _features(index, project, "zyxwvut qqqqq")
    assert not nothing["coverage"].any()


def test_rank_fusion_is_one_only_where_every_leg_ranks_a_section_first(index, project):
    q = next(q for q in project.questions.answerable if q.id == "q11")
    f = section_features(index, q.question, index.question_vectors[q.question])
    fused = f[:, FUSION_FEATURES.index("rank_fusion")]
    firsts = {int(np.argmax(f[:, FUSION_FEATURES.index(leg)])) for leg in ("dense", "sentence", "lexical")}
    assert ((fused > 0) & (fused <= 1 + 1e-9)).all()
    assert (fused.max() == pytest.approx(1.0)) == (len(firsts) == 1)
