"""The answer-sentence selector: each feature at its edges, the order it ranks in, the answer's
confidence, and the extractive drafter quoting what it ranks first."""

from __future__ import annotations

import numpy as np
import pytest

from rag_contract.answering.asked import AnswerType, Asked
from rag_contract.answering.drafting import ExtractiveDrafter
from rag_contract.answering.evidence import PassageText, Query
from rag_contract.answering.selection import LONG_WORDS, candidates, confidence, probability, ranked, score
from rag_contract.config.thresholds import SELECTOR_BASE, SELECTOR_FEATURES, SELECTOR_PAIRS
from rag_contract.retrieval.terms import TermWeights

UNIFORM = TermWeights.uniform()
HOW_LONG = Asked((AnswerType.NUMBER,), ("lifetime", "cookie"), ())
NOTHING = {name: 0.0 for name in SELECTOR_FEATURES}


def passage(section_id: str, *sentences: str, title: str = "Title", vectors=None) -> PassageText:
    vecs = np.zeros((len(sentences), 2)) if vectors is None else np.array(vectors, dtype=float)
    return PassageText(section_id, title, " ".join(sentences), tuple(sentences), vecs)


def features(question: str, passages, asked=None, vector=None) -> list[dict[str, float]]:
    return [c.as_dict() for c in candidates(question, Query(vector, UNIFORM, asked), passages, asked)]


def test_every_sentence_of_every_passage_is_a_candidate_in_rank_then_position_order():
    cs = candidates("q", Query(None, UNIFORM), [passage("a", "One.", "Two."), passage("b", "Three.")], None)
    assert [(c.section_id, c.rank, c.position, c.text) for c in cs] == [
        ("a", 0, 0, "One."),
        ("a", 0, 1, "Two."),
        ("b", 1, 0, "Three."),
    ]


def test_rank_position_and_length_features():
    long = " ".join(["word"] * (LONG_WORDS * 2))
    f = features("q", [passage("a", "Short one.", long), passage("b", "Other.")])
    assert [x["rank"] for x in f] == [1.0, 1.0, 0.5]
    assert [x["position"] for x in f] == [1.0, 0.5, 1.0]
    assert f[0]["length"] == pytest.approx(2 / LONG_WORDS) and f[1]["length"] == 1.0


def test_similarity_is_the_cosine_with_the_question_vector_and_zero_without_one():
    p = passage("a", "Near.", "Far.", vectors=[[1.0, 0.0], [0.0, 1.0]])
    assert [x["similarity"] for x in features("q", [p], vector=np.array([1.0, 0.0]))] == [1.0, 0.0]
    assert [x["similarity"] for x in features("q", [p])] == [0.0, 0.0]


def test_focus_is_the_share_of_focus_words_mentioned_and_one_without_focus():
    p = passage("a", "The cookie expires.", "A cookie lifetime is set.", "Nothing.")
    assert [x["focus"] for x in features("How long does a cookie live?", [p], HOW_LONG)] == [0.5, 1.0, 0.0]
    assert [x["focus"] for x in features("q", [p])] == [1.0, 1.0, 1.0]


def test_instance_wants_a_number_for_a_number_question_tied_to_the_focus():
    p = passage("a", "The cookie lifetime is 400 days.", "The cookie lifetime is long.", "Wait 400 days.")
    assert [x["instance"] for x in features("How long is a cookie lifetime?", [p], HOW_LONG)] == [1.0, 0.0, 0.0]


def test_coverage_counts_the_question_words_the_sentence_or_its_title_says():
    p = passage("a", "Stale responses.", "Nothing.", title="Caches")
    f = features("stale responses caches", [p])
    assert f[0]["coverage"] == pytest.approx(1.0) and f[1]["coverage"] == pytest.approx(1 / 3)


def test_ranked_orders_by_score_then_rank_then_position():
    cs = candidates("q", Query(None, UNIFORM), [passage("a", "One.", "Two."), passage("b", "Three.")], None)
    by_position = NOTHING | {"position": -1.0}  # later sentences score higher
    assert [c.text for c, _ in ranked(cs, by_position)] == ["Two.", "One.", "Three."]
    assert [c.text for c, _ in ranked(cs, NOTHING)] == ["One.", "Two.", "Three."]  # all tied


def test_score_is_the_bias_plus_the_weighted_features():
    c = candidates("q", Query(None, UNIFORM), [passage("a", "One.")], None)[0]
    weights = {name: float(i) for i, name in enumerate(SELECTOR_FEATURES)}
    assert score(c, weights) == pytest.approx(sum(weights[n] * v for n, v in c.as_dict().items()))


def test_confidence_is_the_best_score_among_quoted_sentences_and_none_for_a_paraphrase():
    cs = candidates("q", Query(None, UNIFORM), [passage("a", "One.", "Two.")], None)
    by_position = NOTHING | {"position": 2.0}
    assert confidence(["One. Two."], cs, by_position) == pytest.approx(2.0)
    assert confidence(["Two."], cs, by_position) == pytest.approx(1.0)
    assert confidence(["Something else entirely."], cs, by_position) is None
    assert probability(0.0) == 0.5 and probability(10.0) > 0.99


def test_the_drafter_quotes_what_the_selector_ranks_first():
    passages = [passage("a", "The cookie lifetime is long.", "The cookie lifetime is 400 days.")]
    wants_a_number = NOTHING | {"instance": 5.0}
    drafter = ExtractiveDrafter(1, 1.0, 3, selector=wants_a_number)
    claims = drafter.draft(None, "How long is a cookie lifetime?", passages, Query(None, UNIFORM, HOW_LONG))
    assert [c.text for c in claims] == ["The cookie lifetime is 400 days."]
    # unfitted (similarity and coverage) the two tie and the first wins, taking the next with it
    unfitted = ExtractiveDrafter(1, 1.0, 3).draft(
        None, "How long is a cookie lifetime?", passages, Query(None, UNIFORM)
    )
    assert [c.text for c in unfitted] == ["The cookie lifetime is long. The cookie lifetime is 400 days."]


def test_each_pair_feature_is_the_product_of_its_two_features():
    p = passage("a", "The cookie lifetime is 400 days.", "Nothing.", vectors=[[0.6, 0.8], [1.0, 0.0]])
    for f in features("How long is a cookie lifetime?", [p], HOW_LONG, vector=np.array([1.0, 0.0])):
        for a, b in (n.split("_x_") for n in SELECTOR_PAIRS):
            assert f[f"{a}_x_{b}"] == pytest.approx(f[a] * f[b], abs=1e-6), (a, b)
    assert len(SELECTOR_PAIRS) == len(SELECTOR_BASE) * (len(SELECTOR_BASE) - 1) // 2
    assert ("bias", *SELECTOR_BASE, *SELECTOR_PAIRS) == SELECTOR_FEATURES


def test_a_pair_weight_moves_the_score_only_where_both_features_are_high():
    p = passage("a", "The cookie lifetime is 400 days.", "Wait 400 days.", "The cookie lifetime is long.")
    cs = candidates("How long is a cookie lifetime?", Query(None, UNIFORM, HOW_LONG), [p], HOW_LONG)
    both = NOTHING | {"focus_x_instance": 3.0}
    assert [round(s, 6) for _, s in ranked(cs, both)] == [3.0, 0.0, 0.0]
    assert ranked(cs, both)[0][0].text == "The cookie lifetime is 400 days."
