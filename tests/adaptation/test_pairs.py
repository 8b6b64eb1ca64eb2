"""The training pairs' rules, without torch: what each pair kind holds, that a fold's held-out
questions never reach its pairs, and that batches and negatives are what the loss assumes."""

from __future__ import annotations

import pytest

from rag_contract.adaptation.pairs import (
    DEFAULT_KINDS,
    ancestors,
    batches,
    cloze_pairs,
    defined_terms,
    definition_pairs,
    fold_questions,
    heading_path,
    negatives_mask,
    parent_of,
    question_pairs,
    training_pairs,
)
from rag_contract.config.questions import Question
from rag_contract.corpus.chunking import ChunkParams, chunk_sections
from rag_contract.corpus.sentences import sentences
from rag_contract.corpus.sources import Section

PARAMS = ChunkParams(40, 10)


def _prose(topic: str, n: int) -> str:
    return " ".join(f"Rule {i} of {topic} holds for every {i}th message a server sends." for i in range(n))


SECTIONS = [
    Section("doc#1", "Caching", _prose("caching", 3)),
    Section("doc#1.2", "Freshness", _prose("freshness", 9)),
    Section("doc#1.2.3", "Heuristic Freshness", _prose("heuristics", 2)),
    Section("other#A", "Appendix", _prose("grammar", 2)),
]


def test_heading_path_names_each_ancestor_outermost_first_and_skips_missing_ones():
    known = {s.id: s for s in SECTIONS}
    assert heading_path(known["doc#1.2.3"], known) == "Caching > Freshness > Heuristic Freshness"
    assert heading_path(known["other#A"], known) == "Appendix"
    assert [a.id for a in ancestors("doc#1.9.3", known)] == ["doc#1"]  # doc#1.9 is not in the corpus
    assert ancestors("no-number-here", known) == []


def test_heading_pairs_give_each_chunk_its_path_untitled():
    chunks = chunk_sections(SECTIONS, PARAMS)
    pairs = training_pairs(SECTIONS, PARAMS, [], kinds=("heading",))
    assert len(pairs) == len(chunks)
    for p, c in zip(pairs, chunks, strict=True):
        assert p.kind == "heading" and p.positive == c.text and p.group == c.section_id
        assert not p.positive.startswith(p.anchor.split(" > ")[-1] + ":")


def test_cloze_takes_the_sentence_out_of_its_titled_chunk():
    chunks = chunk_sections(SECTIONS, PARAMS)
    pairs = cloze_pairs(SECTIONS, chunks)
    assert pairs, "chunks of several sentences give cloze pairs"
    known = {s.id: s for s in SECTIONS}
    for p in pairs:
        assert p.positive.startswith(known[p.group].title + ": ")
        assert p.anchor not in p.positive
        assert len(p.anchor.split()) >= 6


def test_cloze_choice_does_not_move_when_another_chunk_changes():
    chunks = chunk_sections(SECTIONS, PARAMS)
    before = {p.group: p.anchor for p in cloze_pairs(SECTIONS, chunks) if p.group == "doc#1.2"}
    edited = [*SECTIONS[:3], Section("other#A", "Appendix", "Entirely different words in this section now. " * 2)]
    after = {p.group: p.anchor for p in cloze_pairs(edited, chunk_sections(edited, PARAMS)) if p.group == "doc#1.2"}
    assert before == after and before


def test_a_chunk_of_one_sentence_gives_no_cloze_pair():
    one = [Section("doc#9", "Short", "Only this one sentence is in the section body.")]
    assert len(sentences(one[0].text)) == 1
    assert cloze_pairs(one, chunk_sections(one, PARAMS)) == []


def test_question_pairs_hold_only_the_questions_given_and_only_answerable_ones():
    chunks = chunk_sections(SECTIONS, PARAMS)
    train = Question("t1", "How long is a response fresh?", expected=("doc#1.2",))
    held_out = Question("h1", "Can a cache guess a lifetime?", expected=("doc#1.2.3",))
    refusal = Question("r1", "What does the cache cost?", answerable=False, expected_state="unsupported")
    pairs = question_pairs(SECTIONS, chunks, [train, refusal])
    freshness = [c for c in chunks if c.section_id == "doc#1.2"]
    assert len(pairs) == len(freshness) > 1  # every chunk of the expected section
    assert {p.anchor for p in pairs} == {train.question}
    assert all(p.positive == f"Freshness: {c.text}" for p, c in zip(pairs, freshness, strict=True))
    everything = training_pairs(SECTIONS, PARAMS, [train, refusal])
    assert held_out.question not in {p.anchor for p in everything}
    assert {p.kind for p in everything} == set(DEFAULT_KINDS)


def test_a_fold_trains_on_the_other_folds_and_every_development_question():
    a, b, c = (Question(i, f"Question {i}?", expected=("doc#1.2",)) for i in ("a", "b", "c"))
    dev = Question("rfc-sealed-2/w01", "A development question?", expected=("doc#1.2.3",))
    assignment = {"a": 0, "b": 1, "c": 0}
    assert fold_questions([a, b, c], assignment, 0) == [b]
    assert fold_questions([a, b, c], assignment, 1, [dev]) == [a, c, dev]


def test_an_unknown_pair_kind_is_refused_naming_it():
    with pytest.raises(ValueError, match="glossary"):
        training_pairs(SECTIONS, PARAMS, [], kinds=("heading", "glossary"))


@pytest.mark.parametrize(
    "sentence, terms",
    [
        ('A "proxy" is a message-forwarding agent.', ["proxy"]),
        ('In HTTP, the term "user agent" refers to any client program.', ["user agent"]),
        ('An "origin server" (the last hop) is a program that answers.', ["origin server"]),
        ('This specification uses the term "target URI" to refer to that URI.', ["target URI"]),
        ("`TestClient` is a client for tests.", ["TestClient"]),
        ("The \u201cshared cache\u201d is one used by many users.", ["shared cache"]),
        ('The "Cookie" header field is sent by the user agent.', []),  # a quote, then no "is"
        ('See "proxy" is a typo here.', []),  # the term must open the clause
        ("A cache is a local store.", []),  # nothing quoted
    ],
)
def test_a_definition_opens_on_a_quoted_term_that_it_says_is_something(sentence, terms):
    assert defined_terms(sentence) == terms


def test_definition_pairs_give_each_defined_term_its_titled_chunk():
    sections = [*SECTIONS, Section("doc#2", "Terms", 'A "validator" is metadata a cache compares. ' + _prose("x", 1))]
    chunks = chunk_sections(sections, PARAMS)
    pairs = definition_pairs(sections, chunks)
    assert [(p.kind, p.anchor, p.group) for p in pairs] == [("definition", "validator", "doc#2")]
    assert pairs[0].positive.startswith('Terms: A "validator" is metadata')
    assert training_pairs(sections, PARAMS, [], kinds=("definition",)) == pairs
    assert not [p for p in training_pairs(sections, PARAMS, []) if p.kind == "definition"]  # not by default


def test_batches_cover_every_pair_once_per_epoch_in_a_seeded_order():
    pairs = training_pairs(SECTIONS, PARAMS, [])
    first = batches(pairs, 4, seed=0, epoch=0)
    assert sorted(i for b in first for i in b) == list(range(len(pairs)))
    assert all(len(b) == 4 for b in first[:-1])
    assert first == batches(pairs, 4, seed=0, epoch=0)
    assert first != batches(pairs, 4, seed=0, epoch=1) != batches(pairs, 4, seed=1, epoch=0)


def test_a_positive_of_the_anchors_own_section_is_never_its_negative():
    mask = negatives_mask(["a", "b", "a"])
    assert mask == [[True, True, False], [True, True, True], [False, True, True]]


def test_a_hard_negative_of_the_anchors_own_section_is_never_its_negative():
    # positives of sections a, b; then hard negatives of sections b and c
    mask = negatives_mask(["a", "b"], ["b", "c"])
    assert mask == [[True, True, True, True], [True, True, False, True]]


LEXICAL = [
    *SECTIONS,
    Section("doc#1.3", "Validation", "A validator such as an entity tag lets a cache revalidate a stale response."),
    Section("doc#9", "References", "Freshness of caches and stale responses, a survey of entity tag validation."),
]


def test_a_lexical_negative_is_bm25s_best_chunk_of_a_section_the_question_does_not_expect():
    chunks = chunk_sections(LEXICAL, PARAMS)
    asked = Question("t1", "When may a cache serve a stale response with an entity tag?", expected=("doc#1.2",))
    pairs = training_pairs(LEXICAL, PARAMS, [asked], kinds=("heading", "question"), negatives="lexical")
    questions = [p for p in pairs if p.kind == "question"]
    validation = next(c for c in chunks if c.section_id == "doc#1.3")
    # the references section matches the question's words too, but never answers: not a negative
    assert {(p.negative, p.negative_group) for p in questions} == {(f"Validation: {validation.text}", "doc#1.3")}
    assert all(p.negative is None for p in pairs if p.kind == "heading")
    plain = training_pairs(LEXICAL, PARAMS, [asked], kinds=("heading", "question"))
    assert [(p.anchor, p.positive) for p in pairs] == [(p.anchor, p.positive) for p in plain]
    assert all(p.negative is None for p in plain)


def test_a_question_whose_every_other_section_cannot_answer_keeps_no_negative():
    only = [SECTIONS[1], LEXICAL[-1]]
    asked = Question("t1", "How long is a response fresh?", expected=("doc#1.2",))
    pairs = training_pairs(only, PARAMS, [asked], kinds=("question",), negatives="lexical")
    assert pairs and all(p.negative is None for p in pairs)


def test_unknown_negatives_are_refused_naming_them():
    with pytest.raises(ValueError, match="random"):
        training_pairs(SECTIONS, PARAMS, [], negatives="random")


def test_a_sections_parent_is_its_dotted_number_less_one_part_or_its_document():
    assert parent_of("doc#4.2.1") == "doc#4.2"
    assert parent_of("doc#4") == "doc" == parent_of("doc#freeze-windows")


def test_a_sibling_negative_is_a_chunk_of_a_sibling_section_the_question_does_not_expect():
    family = [
        Section("doc#2", "Caching", _prose("caching", 2)),
        Section("doc#2.1", "Freshness", _prose("freshness", 2)),
        Section("doc#2.2", "Validation", _prose("validation", 2)),
        Section("doc#2.3", "Invalidation", _prose("invalidation", 2)),
        Section("doc#2.4", "Acknowledgements", _prose("thanks", 2)),
    ]
    chunks = chunk_sections(family, PARAMS)
    asked = Question("t1", "How long is a response fresh?", expected=("doc#2.1", "doc#2.3"))
    pairs = training_pairs(family, PARAMS, [asked], kinds=("question",), negatives="sibling")
    validation = next(c for c in chunks if c.section_id == "doc#2.2")
    # 2.3 is expected too and 2.4 never answers: 2.2 is the one sibling left
    assert pairs and {(p.negative, p.negative_group) for p in pairs} == {(f"Validation: {validation.text}", "doc#2.2")}
    # the pick is by a hash of the question: over several questions, never the acknowledgements
    many = [Question(f"t{i}", f"How long is response {i} fresh?", expected=asked.expected) for i in range(8)]
    picked = training_pairs(family, PARAMS, many, kinds=("question",), negatives="sibling")
    assert {p.negative_group for p in picked} == {"doc#2.2"}
    alone = training_pairs(family[:2], PARAMS, [asked], kinds=("question",), negatives="sibling")
    assert alone and all(p.negative is None for p in alone)
