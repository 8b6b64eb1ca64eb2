"""Training pairs for the embedder, from the corpus's structure and the committed questions.

Contract: every pair is (anchor, positive, group). A pair's positive is a text the index embeds or
a close variant of one; ``group`` is the section the positive belongs to, so a batch never counts
another pair of the same section as a negative. Built from ``Section`` ids, titles and texts alone
(no corpus-specific parsing), so the same rules serve any corpus:

- ``heading``: a section's heading path (its ancestors' titles, then its own, joined by " > ") ->
  each of its chunks, untitled (the title would hand the answer to the model);
- ``cloze``: inverse cloze, one sentence per chunk -> that chunk with the sentence taken out,
  title-prefixed as the index embeds it; the sentence is picked by a hash of the chunk id, so the
  choice is the same on every machine and does not move when another chunk changes;
- ``question``: a committed answerable question -> each chunk of each expected section,
  title-prefixed. Only the questions passed in are used: a fold passes its training questions.
- ``definition`` (not in the default kinds): a term the corpus defines -> the chunk that defines
  it, title-prefixed. A definition is a sentence that opens on a quoted term and says what it is
  ('A "proxy" is ...', 'The term "user agent" refers to ...') or names one ('... uses the term
  "target URI" to refer to ...'); straight, curly and back quotes all count, so Markdown's
  inline code defines too.

``with_lexical_negatives`` gives each question pair a hard negative, as DPR trains with BM25
negatives: the chunk BM25 ranks first for the question among the sections it does not expect
and that can answer (not references, acknowledgements and the like: ``corpus.roles``),
title-prefixed. BM25 is fitted on the corpus alone, so a negative says nothing of the questions
a fold holds out. ``with_sibling_negatives`` picks instead a chunk of a sibling of the
expected section (the same parent by dotted number, or the same document for an undotted id),
by a hash of the question, among the siblings it does not expect and that can answer.

Everything here is plain Python: the rules are tested without torch.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

from rag_contract.config.questions import Question
from rag_contract.corpus.chunking import Chunk, ChunkParams, chunk_sections
from rag_contract.corpus.roles import never_answers
from rag_contract.corpus.sentences import sentences
from rag_contract.corpus.sources import Section
from rag_contract.retrieval.lexical import Lexical

KINDS = ("heading", "cloze", "question", "definition")
DEFAULT_KINDS = ("heading", "cloze", "question")  # the kept recipe (ADR 0006)
# hard negatives for question pairs: none beyond the batch, BM25's, or a sibling section's chunk
NEGATIVES = ("none", "lexical", "sibling")
CLOZE_MIN_WORDS = 6  # shorter sentences (list items, ABNF fragments) say too little to find their chunk
PATH_SEPARATOR = " > "


@dataclass(frozen=True)
class Pair:
    kind: str
    anchor: str
    positive: str
    group: str  # the section the positive belongs to
    negative: str | None = None  # a text like the positive that the anchor must rank below it
    negative_group: str | None = None  # the section the negative belongs to


def fold_questions(
    questions: Sequence[Question], assignment: Mapping[str, int], fold: int, extra: Sequence[Question] = ()
) -> list[Question]:
    """What the model of ``fold`` trains on: the committed questions of the other folds, then
    every ``extra`` question (a development set is never held out of retrieval's folds: the
    out-of-fold figures are the committed questions')."""
    return [q for q in questions if assignment[q.id] != fold] + list(extra)


def ancestors(section_id: str, known: Mapping[str, Section]) -> list[Section]:
    """The sections above ``section_id`` by its dotted number (``doc#2`` and ``doc#2.1`` above
    ``doc#2.1.3``), outermost first, those the corpus holds; none for an undotted id."""
    doc, sep, number = section_id.partition("#")
    if not sep:
        return []
    parts = number.split(".")
    return [known[a] for k in range(1, len(parts)) if (a := f"{doc}#{'.'.join(parts[:k])}") in known]


def heading_path(section: Section, known: Mapping[str, Section]) -> str:
    return PATH_SEPARATOR.join([*(a.title for a in ancestors(section.id, known)), section.title])


def _titled(title: str, text: str) -> str:
    # as the index embeds a chunk (index.store.embed_text); repeated here to keep this layer below index
    return f"{title}: {text}"


def _pick(key: str, n: int) -> int:
    return int(hashlib.sha256(key.encode()).hexdigest()[:8], 16) % n


def heading_pairs(sections: Sequence[Section], chunks: Sequence[Chunk]) -> list[Pair]:
    known = {s.id: s for s in sections}
    return [Pair("heading", heading_path(known[c.section_id], known), c.text, c.section_id) for c in chunks]


def cloze_pairs(sections: Sequence[Section], chunks: Sequence[Chunk]) -> list[Pair]:
    known = {s.id: s for s in sections}
    out = []
    for c in chunks:
        candidates = [s for s in sentences(c.text) if len(s.split()) >= CLOZE_MIN_WORDS]
        if len(candidates) < 2:  # a one-sentence chunk has no context left to find
            continue
        sentence = candidates[_pick(c.id, len(candidates))]
        context = " ".join(s for s in sentences(c.text) if s != sentence)
        out.append(Pair("cloze", sentence, _titled(known[c.section_id].title, context), c.section_id))
    return out


_QUOTED = r'(?:"([^"\n]{2,40})"|\u201c([^\u201d\n]{2,40})\u201d|`([^`\n]{2,40})`)'
_DEFINES = re.compile(
    # 'A "proxy" is', 'The term "user agent" refers to', '"Cookie" means', 'An "origin server" (also ...) is'
    r"(?:^|\b(?:an?|the|terms?)\s+)" + _QUOTED + r"(?:\s+\([^)]*\))?\s*,?\s+(?:is|are|means|refers\s+to)\b"
    r"|\buses?\s+the\s+term\s+" + _QUOTED + r"\s+to\s+(?:refer\s+to|mean)\b",
    re.IGNORECASE,
)


def defined_terms(sentence: str) -> list[str]:
    """The terms ``sentence`` defines (see the module docstring), in order; none for most."""
    return [t for m in _DEFINES.finditer(sentence.strip()) for t in m.groups() if t]


def definition_pairs(sections: Sequence[Section], chunks: Sequence[Chunk]) -> list[Pair]:
    known = {s.id: s for s in sections}
    return [
        Pair("definition", term, _titled(known[c.section_id].title, c.text), c.section_id)
        for c in chunks
        for sentence in sentences(c.text)
        for term in defined_terms(sentence)
    ]


def question_pairs(sections: Sequence[Section], chunks: Sequence[Chunk], questions: Iterable[Question]) -> list[Pair]:
    known = {s.id: s for s in sections}
    by_section: dict[str, list[Chunk]] = {}
    for c in chunks:
        by_section.setdefault(c.section_id, []).append(c)
    return [
        Pair("question", q.question, _titled(known[sid].title, c.text), sid)
        for q in questions
        if q.answerable
        for sid in q.expected
        for c in by_section.get(sid, [])
    ]


def _with_negatives(
    pairs: Sequence[Pair], sections: Sequence[Section], pick: Callable[[Pair], Chunk | None]
) -> list[Pair]:
    """``pairs`` with the chunk ``pick`` gives each question pair as its hard negative,
    title-prefixed; other kinds, and a pair ``pick`` finds none for, are left as they are."""
    known = {s.id: s for s in sections}
    out = []
    for p in pairs:
        c = pick(p) if p.kind == "question" else None
        if c is not None:
            p = replace(p, negative=_titled(known[c.section_id].title, c.text), negative_group=c.section_id)
        out.append(p)
    return out


def _expected(questions: Iterable[Question]) -> dict[str, set[str]]:
    # a question pair's anchor is its question's text: the sections it may not take a negative from
    return {q.question: set(q.expected) for q in questions if q.answerable}


def with_lexical_negatives(
    pairs: Sequence[Pair], sections: Sequence[Section], chunks: Sequence[Chunk], questions: Iterable[Question]
) -> list[Pair]:
    """``pairs`` with a BM25 hard negative on each question pair (see the module docstring); a
    question with no other section that can answer keeps none."""
    expected = _expected(questions)
    mute = {s.id for s in sections if never_answers(s.title)}
    lexical = Lexical([c.text for c in chunks])

    picked: dict[str, Chunk | None] = {}  # per question: its pairs share one negative

    def best(p: Pair) -> Chunk | None:
        if p.anchor not in picked:
            scores = lexical.scores(p.anchor)
            barred = expected.get(p.anchor, {p.group}) | mute
            # highest score first, ties by chunk order: the same pick on every machine
            ranked = sorted(range(len(chunks)), key=lambda i: (-float(scores[i]), i))
            picked[p.anchor] = next((chunks[i] for i in ranked if chunks[i].section_id not in barred), None)
        return picked[p.anchor]

    return _with_negatives(pairs, sections, best)


def parent_of(section_id: str) -> str:
    """``doc#4.2`` for ``doc#4.2.1``, ``doc`` for ``doc#4`` and for an undotted ``doc#slug``."""
    doc, _, number = section_id.partition("#")
    head, dot, _ = number.rpartition(".")
    return f"{doc}#{head}" if dot else doc


def with_sibling_negatives(
    pairs: Sequence[Pair], sections: Sequence[Section], chunks: Sequence[Chunk], questions: Iterable[Question]
) -> list[Pair]:
    """``pairs`` with a sibling section's chunk as the hard negative of each question pair (see
    the module docstring); a section without such a sibling leaves its pairs as they are."""
    expected = _expected(questions)
    first: dict[str, Chunk] = {}
    for c in chunks:
        first.setdefault(c.section_id, c)
    family: dict[str, list[str]] = {}
    for s in sections:
        if s.id in first and not never_answers(s.title):
            family.setdefault(parent_of(s.id), []).append(s.id)

    def sibling(p: Pair) -> Chunk | None:
        wanted = expected.get(p.anchor, {p.group})
        siblings = [sid for sid in family.get(parent_of(p.group), []) if sid not in wanted]
        return first[siblings[_pick(f"{p.anchor}|{p.group}", len(siblings))]] if siblings else None

    return _with_negatives(pairs, sections, sibling)


def training_pairs(
    sections: Sequence[Section],
    params: ChunkParams,
    questions: Iterable[Question],
    kinds: Sequence[str] = DEFAULT_KINDS,
    negatives: str = "none",
) -> list[Pair]:
    """The pairs of ``kinds`` over the corpus chunked by ``params``, in a fixed order; with
    ``negatives`` "lexical" or "sibling", question pairs carry a hard negative of that kind."""
    if negatives not in NEGATIVES:
        raise ValueError(f"unknown negatives {negatives!r}; known: {list(NEGATIVES)}")
    unknown = sorted(set(kinds) - set(KINDS))
    if unknown:
        raise ValueError(f"unknown pair kind(s) {unknown}; known: {list(KINDS)}")
    chunks = chunk_sections(sections, params)
    out: list[Pair] = []
    if "heading" in kinds:
        out += heading_pairs(sections, chunks)
    if "cloze" in kinds:
        out += cloze_pairs(sections, chunks)
    if "definition" in kinds:
        out += definition_pairs(sections, chunks)
    if "question" in kinds:
        questions = list(questions)
        asked = question_pairs(sections, chunks, questions)
        if negatives == "lexical":
            asked = with_lexical_negatives(asked, sections, chunks, questions)
        elif negatives == "sibling":
            asked = with_sibling_negatives(asked, sections, chunks, questions)
        out += asked
    return out


def batches(pairs: Sequence[Pair], size: int, seed: int, epoch: int) -> list[list[int]]:
    """The pairs' rows shuffled by (seed, epoch) and cut into batches of ``size`` (the last may be
    shorter); the same arguments give the same batches on every machine."""
    order = sorted(range(len(pairs)), key=lambda i: hashlib.sha256(f"{seed}:{epoch}:{i}".encode()).hexdigest())
    return [order[i : i + size] for i in range(0, len(order), size)]


def negatives_mask(groups: Sequence[str], negative_groups: Sequence[str] = ()) -> list[list[bool]]:
    """mask[i][j]: True where candidate j may serve as a negative for anchor i (another
    section's). The candidates are the batch's positives, then its hard negatives (of
    ``negative_groups``); anchor i's own positive (j == i) is always allowed."""
    candidates = [*groups, *negative_groups]
    return [[i == j or gi != gj for j, gj in enumerate(candidates)] for i, gi in enumerate(groups)]
