"""Retrieval fusion on a hand-made index whose every score is known: the order of equal
scores, reciprocal rank fusion's arithmetic, each fused feature, and the cut at ``k``.

The index is three sections of two-dimensional vectors, built in microseconds, so the whole
file runs in well under a second (it is what mutation testing runs against ranking.py)."""

from __future__ import annotations

import numpy as np
import pytest

from rag_contract.corpus.chunking import Chunk
from rag_contract.corpus.sections import Section
from rag_contract.corpus.sentences import Sentence
from rag_contract.index.store import Index, IndexInputs, assemble
from rag_contract.retrieval.ranking import (
    FUSION_FEATURES,
    Hit,
    chunk_scores,
    fused_scores,
    rank_sections,
    section_features,
)

SECTIONS = [
    Section("rfc1#1", "Caching freshness", "Caches store responses. Freshness is computed."),
    Section("rfc1#2", "Range requests", "A range request asks for part of a representation."),
    Section("rfc1#3", "Conditional requests", "Validators make a request conditional."),
]
# chunk rows: section 1 owns 0-1, section 2 owns 2, section 3 owns 3-4
CHUNKS = [
    Chunk("rfc1#1/0", "rfc1#1", 0, "caches store responses"),
    Chunk("rfc1#1/1", "rfc1#1", 1, "freshness lifetime is computed"),
    Chunk("rfc1#2/0", "rfc1#2", 0, "range request asks for part of a representation"),
    Chunk("rfc1#3/0", "rfc1#3", 0, "validators make a request conditional"),
    Chunk("rfc1#3/1", "rfc1#3", 1, "an etag is a validator"),
]
VECTORS = np.array([[0.2, 0.1], [0.6, 0.0], [0.9, 0.3], [0.1, 0.8], [0.4, 0.4]])
SENTENCES = [
    Sentence("rfc1#1", 0, "Caches store responses."),
    Sentence("rfc1#1", 1, "Freshness is computed."),
    Sentence("rfc1#2", 0, "A range request asks for part of a representation."),
    Sentence("rfc1#3", 0, "Validators make a request conditional."),
]
SENTENCE_VECTORS = np.array([[0.5, 0.5], [0.7, 0.1], [0.3, 0.0], [0.0, 0.9]])
QUERY = np.array([1.0, 0.0])  # cosine with a chunk is its first coordinate


def make_index(vectors: np.ndarray = VECTORS) -> Index:
    inputs = IndexInputs("corpus", "embedder", "chunking")
    return assemble(
        inputs.version,
        inputs,
        "fake",
        SECTIONS,
        CHUNKS,
        vectors,
        SENTENCES,
        SENTENCE_VECTORS,
        "q",
        [],
        np.zeros((0, 2)),
    )


@pytest.fixture(scope="module")
def index() -> Index:
    return make_index()


def test_dense_scores_are_each_chunks_cosine(index):
    assert chunk_scores(index, "", QUERY, "dense", 60) == pytest.approx(VECTORS[:, 0])


def test_dense_retrieval_without_a_query_vector_is_refused(index):
    with pytest.raises(ValueError, match="^dense retrieval needs a query vector$"):
        chunk_scores(index, "range", None, "dense", 60)


def test_lexical_scores_are_bm25_over_the_chunks(index):
    scores = chunk_scores(index, "request validators", None, "lexical", 60)
    assert list(scores) == list(index.lexical.scores("request validators"))
    assert scores[3] > 0 and scores[0] == 0


def test_an_unknown_mode_is_refused_naming_the_known_ones(index):
    with pytest.raises(
        ValueError, match=r"^unknown retrieval mode 'sparse'; known: \['dense', 'lexical', 'hybrid', 'fused'\]$"
    ):
        chunk_scores(index, "x", QUERY, "sparse", 60)


def _ranks(scores: np.ndarray) -> np.ndarray:
    # 1-based rank by descending score, ties to the earlier row
    order = sorted(range(len(scores)), key=lambda i: (-scores[i], i))
    ranks = np.empty(len(scores), dtype=np.int64)
    for r, i in enumerate(order, start=1):
        ranks[i] = r
    return ranks


@pytest.mark.parametrize("rrf_k", [0, 1, 60])
def test_hybrid_is_the_sum_of_each_legs_reciprocal_rank(index, rrf_k):
    text = "request validators etag"
    dense = _ranks(VECTORS[:, 0])
    lexical = _ranks(index.lexical.scores(text))
    want = 1.0 / (rrf_k + dense) + 1.0 / (rrf_k + lexical)
    assert chunk_scores(index, text, QUERY, "hybrid", rrf_k) == pytest.approx(want, rel=1e-12)


def test_hybrid_fuses_with_k_60_unless_told(index):
    text = "request validators etag"
    got = rank_sections(index, text, QUERY, "hybrid", k=1)
    assert got[0].score == pytest.approx(max(chunk_scores(index, text, QUERY, "hybrid", 60)), rel=1e-12)


def test_equal_scores_rank_by_position_in_the_index():
    tied = np.array([[0.5, 0.0], [0.5, 0.0], [0.5, 0.0], [0.5, 0.0], [0.5, 0.0]])
    hits = rank_sections(make_index(tied), "", QUERY, "dense", k=3)
    assert [h.chunk_id for h in hits] == ["rfc1#1/0", "rfc1#2/0", "rfc1#3/0"]


def test_a_section_ranks_where_its_best_chunk_ranks(index):
    hits = rank_sections(index, "", QUERY, "dense", k=3)
    assert hits == (
        Hit("rfc1#2", "Range requests", pytest.approx(0.9), "rfc1#2/0"),
        Hit("rfc1#1", "Caching freshness", pytest.approx(0.6), "rfc1#1/1"),
        Hit("rfc1#3", "Conditional requests", pytest.approx(0.4), "rfc1#3/1"),
    )
    assert all(type(h.score) is float for h in hits)


@pytest.mark.parametrize(
    ("k", "sections"), [(1, ["rfc1#2"]), (2, ["rfc1#2", "rfc1#1"]), (4, ["rfc1#2", "rfc1#1", "rfc1#3"])]
)
def test_k_sections_are_returned_or_all_when_fewer(index, k, sections):
    assert [h.section_id for h in rank_sections(index, "", QUERY, "dense", k=k)] == sections
    assert [h.section_id for h in rank_sections(index, "", QUERY, "fused", k=k, fusion=ONE_HOT["dense"])] == sections


ONE_HOT = {f: {g: float(g == f) for g in FUSION_FEATURES} for f in FUSION_FEATURES}


def _ranks(scores: np.ndarray) -> np.ndarray:
    """1 for the highest score; ties by position, as the ranking orders them."""
    order = np.lexsort((np.arange(len(scores)), -scores))
    ranks = np.empty(len(scores))
    ranks[order] = np.arange(1, len(scores) + 1)
    return ranks


def test_each_fused_feature_has_its_own_column(index):
    text = "conditional range request"
    features = section_features(index, text, QUERY)
    assert features.shape == (3, len(FUSION_FEATURES))
    dense = np.array([0.6, 0.9, 0.4])  # best chunk's cosine per section
    sentence = np.array([0.7, 0.3, 0.0])  # best sentence's cosine per section
    bm25 = np.array([max(index.lexical.scores(text)[rows]) for rows in ([0, 1], [2], [3, 4])])
    assert bm25.max() > 0
    w = index.weights
    total = w("conditional") + w("range") + w("request")
    title = np.array([0.0, (w("range") + w("request")) / total, (w("conditional") + w("request")) / total])
    ancestor_title = np.zeros(3)  # rfc1#1, #2 and #3 have no section above them
    coverage = title  # here every passage word of the query is also in its section's title
    rrf = sum(1.0 / (60 + _ranks(leg)) for leg in (dense, sentence, bm25)) * 61 / 3
    want = np.stack(
        [dense, sentence, bm25 / bm25.max(), title, dense - 0.9, sentence - 0.7, ancestor_title, coverage, rrf], axis=1
    )
    assert features == pytest.approx(want, rel=1e-6)
    for i, f in enumerate(FUSION_FEATURES):
        assert fused_scores(index, text, QUERY, ONE_HOT[f]) == pytest.approx(want[:, i], rel=1e-6)


def test_fused_scores_are_the_weighted_sum_of_the_features(index):
    text = "conditional range request"
    weights = dict(zip(FUSION_FEATURES, (1.0, 2.0, -3.0, 0.5, 4.0, 0.25, 1.5, -0.75, 3.0), strict=True))
    want = section_features(index, text, QUERY) @ np.array(list(weights.values()))
    assert fused_scores(index, text, QUERY, weights) == pytest.approx(want, rel=1e-12)


def test_a_query_without_a_corpus_word_has_no_lexical_or_title_feature(index):
    features = section_features(index, "zebra", QUERY)
    assert list(features[:, 2]) == [0.0, 0.0, 0.0]
    assert list(features[:, 3]) == [0.0, 0.0, 0.0]


def test_a_word_outside_every_title_still_weighs_in_the_title_share(index):
    w = index.weights
    features = section_features(index, "range validators", QUERY)  # content words: range, validator
    assert w("validator") > 0
    assert features[:, 3] == pytest.approx([0.0, w("range") / (w("range") + w("validator")), 0.0])


def test_fused_hits_name_the_section_not_a_chunk(index):
    hits = rank_sections(index, "", QUERY, "fused", k=2, fusion=ONE_HOT["sentence"])
    assert hits == (
        Hit("rfc1#1", "Caching freshness", pytest.approx(0.7), None),
        Hit("rfc1#2", "Range requests", pytest.approx(0.3), None),
    )
    assert all(type(h.score) is float for h in hits)


@pytest.mark.parametrize(("vector", "fusion"), [(None, ONE_HOT["dense"]), (QUERY, None), (None, None)])
def test_fused_retrieval_needs_a_vector_and_weights(index, vector, fusion):
    with pytest.raises(ValueError, match="^fused retrieval needs a query vector and the fusion weights$"):
        rank_sections(index, "range", vector, "fused", k=2, fusion=fusion)


def test_fused_ties_rank_by_section_order(index):
    zero = dict.fromkeys(FUSION_FEATURES, 0.0)
    assert [h.section_id for h in rank_sections(index, "", QUERY, "fused", k=3, fusion=zero)] == [
        "rfc1#1",
        "rfc1#2",
        "rfc1#3",
    ]


NESTED = [
    Section("rfc2#4", "Set-Cookie header", "The header carries one cookie."),
    Section("rfc2#4.1", "Syntax", "The grammar of the header.", "rfc2#4"),
    Section("rfc2#4.1.2", "Path attribute", "The scope of the cookie within the site.", "rfc2#4.1"),
    Section("rfc3#4.1", "Expires attribute", "When the cookie lapses."),
]


def nested_index() -> Index:
    inputs = IndexInputs("corpus", "embedder", "chunking")
    chunks = [Chunk(f"{s.id}/0", s.id, 0, s.text) for s in NESTED]
    sentences = [Sentence(s.id, 0, s.text) for s in NESTED]
    vectors = np.array([[1.0, 0.0]] * len(NESTED))
    return assemble(
        inputs.version, inputs, "fake", NESTED, chunks, vectors, sentences, vectors, "q", [], np.zeros((0, 2))
    )


def test_a_section_is_credited_with_the_best_title_share_among_its_ancestors():
    index = nested_index()
    features = section_features(index, "set-cookie header syntax path", QUERY)
    title = features[:, FUSION_FEATURES.index("title")]
    ancestor = features[:, FUSION_FEATURES.index("ancestor_title")]
    assert title[0] > 0 and title[1] > 0 and title[0] != title[1]
    # rfc2#4.1.2 is under rfc2#4.1 and rfc2#4: the better of the two; rfc2#4.1 under rfc2#4 only
    assert list(ancestor) == pytest.approx([0.0, title[0], max(title[0], title[1]), 0.0])
    # rfc3#4.1 is not under rfc2#4, though its number says 4.1: the parents say what nests


def test_coverage_counts_the_query_words_anywhere_in_the_passage(index):
    w = index.weights
    features = section_features(index, "computed representation", QUERY)  # in the text of #1 and #2, no title
    coverage = features[:, FUSION_FEATURES.index("coverage")]
    total = w("computed") + w("representation")
    assert list(coverage) == pytest.approx([w("computed") / total, w("representation") / total, 0.0])
    assert list(features[:, FUSION_FEATURES.index("title")]) == [0.0, 0.0, 0.0]
