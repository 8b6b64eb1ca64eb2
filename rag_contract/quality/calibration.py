"""Calibration that holds on unseen questions: every fitted weight and threshold, fitted with
k-fold cross-validation and reported out of fold beside in sample.

What is fitted (all of it committed to eval/thresholds.yaml from the fit on every question):

- ``retrieval.fusion``: the weights of the fused section score (``retrieval.ranking``), a
  class-balanced logistic regression of "is an expected section" over each answerable question's
  candidate sections;
- ``drafting.selector``: the answer-sentence selector's weights (``answering.selection``), a
  class-balanced logistic regression of "the claim quoted for this sentence carries the
  question's evidence" (``quality.accuracy``) over every sentence of the top ``max(SECTIONS)``
  sections of each training question;
- ``drafting.extractive_sections``: from ``SECTIONS``, the number of top-ranked sections the
  extractive drafter quotes from whose answers, once relevance is fitted on the training
  questions, net the most (``net_answers``; ties to fewer sections);
- ``relevance.weights``: a class-balanced logistic regression of "the answer is accurate" (a
  kept claim carries the evidence) on the relevance features, the selector's confidence among
  them;
- ``relevance.answer_at`` = ``relevance.refuse_below``: one threshold on that one confidence. It
  nets the most accurate answers less ``WRONG_ANSWER_COST`` per answer shown without the
  evidence and ``FALSE_ANSWER_COST`` per unanswerable question answered, on the training
  questions (among the cuts that keep ``min_grounded_citing`` grounded and citing where
  ``config.calibration`` sets one). Below it nothing is shown; at or above it the answer is
  grounded, or partial where a rule of ``answering.asked`` caps it or grounding withdrew a claim.
  ``drafting.evidence_lexical_weight`` is no longer fitted: the selector weighs words itself.

Development sets (``eval/calibration.yaml``: sealed sets opened and measured once) join the
selector, the relevance fit and the choice of ``drafting.extractive_sections``: their questions were written by
people who never saw the rules, so their refusals are the unseen ones the committed refusals,
which the rules were designed against, stand in for badly. Retrieval (fusion, lexical weight)
is fitted on the committed questions alone. Development questions are folded like the
committed ones (ids prefixed with their file's stem) and reported per set, out of fold and in
sample, under ``development``.

Folds are stratified (answerable / unanswerable) and assigned by a hash of the question id, so
they are the same on every machine and a new question does not reshuffle the others. Each fold's
parameters are fitted on the other folds alone and scored on it; the report gives the pooled
out-of-fold figures, the in-sample figures of the full fit, and both broken down by RFC and by
phrasing style. Everything is numpy arithmetic over committed vectors: the same inputs give the
same report.

An index built with the adapted embedder (``rag-contract adapt``) was tuned on every question, so
its vectors rank each question in sample. Its out-of-fold retrieval figures come instead from one
model per fold, tuned without that fold's questions (``quality.adapted_folds``): each fold's
fusion is fitted on its training questions' legs under that fold's model, and its held-out
questions are ranked by theirs. Without a file holding every fold, the report says its
out-of-fold retrieval read the served vectors, in sample for the embedder; a file made for other
inputs is refused. The answers' out-of-fold figures (drafting, relevance) read the served vectors.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np

from rag_contract.answering.drafting import ExtractiveDrafter, claim_text
from rag_contract.answering.relevance import ANSWERS, OFF_TOPIC, Features, logit, verdict_for
from rag_contract.answering.selection import candidates
from rag_contract.answering.service import Service, offered, request_query
from rag_contract.config.calibration import load_calibration
from rag_contract.config.questions import Question
from rag_contract.config.thresholds import (
    FUSION_FEATURES,
    RELEVANCE_FEATURES,
    SELECTOR_FEATURES,
    RelevanceConfig,
    Thresholds,
)
from rag_contract.embedders.local import ADAPTED_NAME
from rag_contract.index.registry import Registry
from rag_contract.index.store import Index
from rag_contract.project import Project, read_development
from rag_contract.quality.accuracy import Outcome, accurate, figures
from rag_contract.quality.adapted_folds import FOLDS_FILE, FoldLegs, fold_meta, load_fold_legs
from rag_contract.quality.evaluation import lazy_embed, vectors_for
from rag_contract.retrieval.ranking import section_columns, section_features

FOLDS = 5
SECTIONS = (3, 4, 5)
# An unanswerable question answered as if the corpus said so costs as much as this many
# answerable questions left unanswered: inventing is worse than declining, by a margin set here
# (docs/adr/0003-relevance-and-calibration.md shows what 4, 8 and 16 trade).
FALSE_ANSWER_COST = 8.0
# An answer shown without the evidence costs this many accurate ones: answering pays only where
# more than WRONG / (1 + WRONG) of the answers shown are accurate (0.8 at 4), the accuracy when
# answered the contract promises.
WRONG_ANSWER_COST = 4.0
CANDIDATES = 40  # sections per question the fusion fit compares the expected ones against
ITERATIONS = 400
LEARNING_RATE = 0.5
L2 = 1e-3
DIGITS = 4


# --- folds and logistic regression ------------------------------------------------------------


def folds(questions: Sequence[Question]) -> dict[str, int]:
    """Stratified by answerability, ordered by a hash of the id, dealt round-robin."""
    out: dict[str, int] = {}
    for stratum in (True, False):
        ids = sorted(
            (q.id for q in questions if q.answerable is stratum), key=lambda i: hashlib.sha256(i.encode()).hexdigest()
        )
        out.update({qid: n % FOLDS for n, qid in enumerate(ids)})
    return out


def fit_logistic(
    x: np.ndarray, y: np.ndarray, iterations: int = ITERATIONS, l2: float = L2
) -> tuple[np.ndarray, float]:
    """Class-balanced logistic regression by plain gradient descent (fixed steps, so repeatable);
    returns weights and bias on the *raw* features."""
    mu = x.mean(axis=0)
    sd = x.std(axis=0)
    sd[sd == 0] = 1.0
    z = (x - mu) / sd
    pos = max(y.sum(), 1.0)
    neg = max(len(y) - y.sum(), 1.0)
    sample = np.where(y > 0, len(y) / (2 * pos), len(y) / (2 * neg))
    w = np.zeros(z.shape[1])
    b = 0.0
    # einsum, not BLAS: threaded partial sums would make the fit depend on the machine's thread count
    for _ in range(iterations):
        p = 1.0 / (1.0 + np.exp(-(np.einsum("ij,j->i", z, w) + b)))
        g = (p - y) * sample
        w -= LEARNING_RATE * (np.einsum("ij,i->j", z, g) / len(y) + l2 * w)
        b -= LEARNING_RATE * float(g.mean())
    raw = w / sd
    return raw, float(b - float(np.einsum("j,j->", raw, mu)))


# --- retrieval fusion ---------------------------------------------------------------------------


SectionColumns = Callable[[Index, str, np.ndarray], np.ndarray]  # (index, question, vector) -> sections x columns


def fusion_weights(
    index: Index,
    questions: Sequence[Question],
    vectors: Mapping[str, np.ndarray],
    features: SectionColumns = section_features,
    candidates: int = CANDIDATES,
    iterations: int = ITERATIONS,
    l2: float = L2,
) -> np.ndarray:
    """One weight per column of ``features``: a logistic fit of "is an expected section" over each
    question's expected sections and its top ``candidates`` by the dense and the lexical column."""
    position = {sid: i for i, sid in enumerate(index.section_order)}
    xs, ys = [], []
    for q in questions:
        f = features(index, q.question, vectors[q.question])
        expected = [position[s] for s in q.expected]
        by_dense = np.argsort(-f[:, 0], kind="stable")[:candidates]
        by_lexical = np.argsort(-f[:, 2], kind="stable")[:candidates]
        rows = np.union1d(np.union1d(by_dense, by_lexical), expected)
        xs.append(f[rows])
        ys.append(np.isin(rows, expected).astype(float))
    w, _ = fit_logistic(np.concatenate(xs), np.concatenate(ys), iterations, l2)
    return w


def fit_fusion(index: Index, questions: Sequence[Question], vectors: Mapping[str, np.ndarray]) -> dict[str, float]:
    w = fusion_weights(index, questions, vectors)
    return {name: round(float(v), DIGITS) for name, v in zip(FUSION_FEATURES, w, strict=True)}


def rank_of_expected(index: Index, q: Question, scores: np.ndarray) -> int:
    """The best rank of an expected section under ``scores`` (rows in ``index.section_order``),
    ties broken by section order."""
    order = np.lexsort((np.arange(len(scores)), -scores))
    ranks = np.empty(len(scores), dtype=np.int64)
    ranks[order] = np.arange(1, len(scores) + 1)
    position = {sid: i for i, sid in enumerate(index.section_order)}
    return int(min(ranks[position[s]] for s in q.expected))


def expected_rank(index: Index, q: Question, vector: np.ndarray, fusion: Mapping[str, float]) -> int:
    scores = np.einsum(
        "ij,j->i", section_features(index, q.question, vector), np.array([fusion[f] for f in FUSION_FEATURES])
    )
    return rank_of_expected(index, q, scores)


# --- answering rows -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Row:
    """One question answered under some parameters, before the relevance thresholds decide."""

    id: str
    answerable: bool
    expected_state: str | None
    features: Features | None  # None: no claim survived grounding
    ceiling: str  # the best verdict the rules allow (``Relevance.ceiling``), whatever the logit
    all_kept: bool
    cites_expected: bool
    accurate: bool = False  # a kept claim carries the question's evidence (``quality.accuracy``)


def with_params(
    t: Thresholds,
    fusion: Mapping[str, float],
    lexical_weight: float,
    sections: int,
    selector: Mapping[str, float] | None = None,
) -> Thresholds:
    return replace(
        t,
        retrieval=replace(t.retrieval, serving_mode="fused", fusion=dict(fusion)),
        drafting=replace(
            t.drafting, evidence_lexical_weight=lexical_weight, extractive_sections=sections, selector=selector
        ),
    )


# --- the answer-sentence selector ---------------------------------------------------------------


def selector_samples(
    index: Index, thresholds: Thresholds, questions: Sequence[Question], query_vector: Callable
) -> tuple[np.ndarray, np.ndarray]:
    """Every sentence of the passages the drafter could quote from (the top ``max(SECTIONS)``) for
    each answerable question with evidence: its selector features, and whether the claim the
    drafter would quote for it carries the evidence (``quality.accuracy``)."""
    xs: list[tuple[float, ...]] = []
    ys: list[float] = []
    for q in questions:
        if not q.answerable or q.evidence is None:
            continue
        texts = offered(index, thresholds, q.question, query_vector)[: max(SECTIONS)]
        by_id = {p.section_id: p for p in texts}
        query = request_query(index, q.question, query_vector(index, q.question))
        for c in candidates(q.question, query, texts, query.asked):
            xs.append(c.features)
            ys.append(float(accurate([claim_text(c.position, by_id[c.section_id])], q.evidence)))
    return np.array(xs, dtype=float).reshape(len(xs), len(SELECTOR_FEATURES) - 1), np.array(ys)


def fit_selector(x: np.ndarray, y: np.ndarray) -> dict[str, float]:
    """The selector's weights: a class-balanced logistic regression of "carries the evidence"."""
    w, b = fit_logistic(x, y)
    return {"bias": round(b, DIGITS)} | {
        name: round(float(v), DIGITS) for name, v in zip(SELECTOR_FEATURES[1:], w, strict=True)
    }


def answer_rows(
    index: Index, thresholds: Thresholds, questions: Sequence[Question], query_vector: Callable
) -> list[Row]:
    service = Service(
        Registry(index),
        thresholds,
        ExtractiveDrafter.committed(thresholds.drafting),
        query_vector=query_vector,
    )
    rows = []
    for q in questions:
        d = service.deliberate(q.question, q.id)
        kept = [v for v in d.verdicts if v.kept] if d else []
        rows.append(
            Row(
                q.id,
                q.answerable,
                q.expected_state,
                d.relevance.features if d and d.relevance else None,
                d.relevance.ceiling if d and d.relevance else OFF_TOPIC,
                d is not None and len(kept) == len(d.verdicts),
                q.answerable and any(v.claim.section_id in q.expected for v in kept),
                q.answerable and accurate((v.claim.text for v in kept), q.evidence),
            )
        )
    return rows


def state_of(row: Row, config: RelevanceConfig) -> str:
    """The state ``Service.answer`` reaches for this row under ``config`` (``service.decide``)."""
    if row.features is None:
        return "unsupported"
    verdict = verdict_for(logit(row.features, config.weights), config, row.ceiling)
    if verdict == OFF_TOPIC:
        return "unsupported"
    return "grounded" if verdict == ANSWERS and row.all_kept else "partial"


# --- relevance --------------------------------------------------------------------------------


def _features(rows: Sequence[Row]) -> np.ndarray:
    return np.array(
        [
            [
                r.features.similarity,
                r.features.coverage,
                r.features.unseen,
                r.features.section,
                r.features.retrieval,
                r.features.unmentioned,
                r.features.selected,
            ]
            for r in rows
            if r.features
        ]
    )


def grounded_citing(rows: Sequence[Row], relevance: RelevanceConfig) -> float:
    """The share of the answerable ``rows`` answered grounded, citing an expected section."""
    answerable = [r for r in rows if r.answerable]
    right = sum(r.cites_expected and state_of(r, relevance) == "grounded" for r in answerable)
    return right / len(answerable) if answerable else 0.0


def false_answer_rate(rows: Sequence[Row], relevance: RelevanceConfig) -> float:
    """The share of the unanswerable ``rows`` shown with claims (grounded or partial) under ``relevance``."""
    refusals = [r for r in rows if not r.answerable]
    shown = sum(state_of(r, relevance) != "unsupported" for r in refusals)
    return shown / len(refusals) if refusals else 0.0


def worst_false_answer_rate(
    rows: Sequence[Row], relevance: RelevanceConfig, sources: Sequence[frozenset[str]]
) -> float:
    """The highest ``false_answer_rate`` over the ``rows`` of each source (question ids); over
    all of them together when no source is named."""
    groups = [[r for r in rows if r.id in ids] for ids in sources] or [list(rows)]
    return max(false_answer_rate(g, relevance) for g in groups)


def fit_relevance(
    rows: Sequence[Row],
    false_answer_cost: float = FALSE_ANSWER_COST,
    min_grounded_citing: float | None = None,
    max_false_answer_rate: float | None = None,
    sources: Sequence[frozenset[str]] = (),
) -> RelevanceConfig:
    """One confidence decides the state: a class-balanced logistic regression of "the answer is
    accurate" (a kept claim carries the evidence) over the relevance features, and one threshold,
    ``answer_at`` = ``refuse_below``: at or above it the answer stands (grounded, or partial where
    a rule caps it or a claim was withdrawn), below it nothing is shown. The threshold nets the
    most accurate answers less ``WRONG_ANSWER_COST`` per inaccurate one and ``false_answer_cost``
    per unanswerable question answered (``net_answers``), among the cuts that keep
    ``min_grounded_citing`` where one is configured; ties go to the higher threshold.

    With ``max_false_answer_rate`` the threshold is instead the most answering cut at which no
    source of questions (``sources``: the committed questions, the opened sealed sets) has more
    than that share of its unanswerable questions shown with claims. The bound holds per source
    because the sources' refusals differ in kind: the committed ones were written against the
    rules, the sealed ones by authors who never saw them, and a bound met on their pool can be
    twice exceeded on one of them."""
    scored = [r for r in rows if r.features is not None]
    w, b = fit_logistic(_features(scored), np.array([float(r.accurate) for r in scored]))
    weights = {"bias": round(b, DIGITS)} | {
        name: round(float(v), DIGITS) for name, v in zip(RELEVANCE_FEATURES[1:], w, strict=True)
    }
    z = np.array([logit(r.features, weights) for r in scored if r.features])
    cuts = sorted({round(float(v), DIGITS) for v in z})

    def gain(t: float) -> float:
        return net_answers(scored, RelevanceConfig(weights, t, t), false_answer_cost)

    def kept(t: float) -> bool:
        floor = min_grounded_citing
        return floor is None or grounded_citing(rows, RelevanceConfig(weights, t, t)) >= floor

    if max_false_answer_rate is not None:
        # the operating point: the most answering cut whose false answers stay within the bound
        # (above the highest logit nothing is shown, so some cut always keeps it)
        ceiling = [*cuts, (cuts[-1] + 1.0) if cuts else 0.0]
        within = [
            t
            for t in ceiling
            if worst_false_answer_rate(scored, RelevanceConfig(weights, t, t), sources) <= max_false_answer_rate
        ]
        answer_at = round(min(within), DIGITS)
        return RelevanceConfig(weights, answer_at, answer_at)
    # the most conservative of the best cuts that keep the floor: ties go to the higher threshold;
    # when no cut keeps it (the fit cannot place the answers at all), the most answering one
    allowed = [t for t in cuts if kept(t)] or cuts[:1]
    answer_at = max(allowed, key=lambda t: (gain(t), t)) if allowed else 0.0
    return RelevanceConfig(weights, answer_at, answer_at)


# --- the whole fit ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Params:
    fusion: Mapping[str, float]
    lexical_weight: float
    sections: int
    relevance: RelevanceConfig
    selector: Mapping[str, float]

    def as_dict(self) -> dict:
        return {
            "retrieval.fusion": dict(self.fusion),
            "drafting.evidence_lexical_weight": self.lexical_weight,
            "drafting.extractive_sections": self.sections,
            "drafting.selector": dict(self.selector),
            "relevance.weights": dict(self.relevance.weights),
            "relevance.answer_at": self.relevance.answer_at,
            "relevance.refuse_below": self.relevance.refuse_below,
        }


def calibrate(project: Project, index: Index, false_answer_cost: float = FALSE_ANSWER_COST) -> dict:
    questions = project.questions.questions
    config = load_calibration(project.paths.calibration, project.paths.root)
    development = read_development(project, config.development)
    extra = [q for _, qs in development for q in qs]
    everyone = [*questions, *extra]
    vectors = vectors_for(index, everyone, lazy_embed(index, project.paths.models))

    def query_vector(_index: Index, text: str) -> np.ndarray:
        return vectors[text]

    assignment = folds(questions) | folds(extra)
    fit = Fitting(
        index,
        project.thresholds,
        everyone,
        vectors,
        query_vector,
        false_answer_cost,
        config.min_grounded_citing,
        config.max_false_answer_rate,
    )
    oof_rows: dict[str, Row] = {}
    oof_states: dict[str, str] = {}
    oof_ranks: dict[str, int] = {}
    oof_logits: dict[str, float | None] = {}
    per_fold = []
    for f in range(FOLDS):
        params, rows = fit.on(
            [q for q in questions if assignment[q.id] != f], [q for q in extra if assignment[q.id] != f]
        )
        per_fold.append(params.as_dict())
        for r in rows:
            if assignment[r.id] == f:
                oof_rows[r.id] = r
                oof_states[r.id] = state_of(r, params.relevance)
                oof_logits[r.id] = round(logit(r.features, params.relevance.weights), DIGITS) if r.features else None
        for q in questions:
            if q.answerable and assignment[q.id] == f:
                oof_ranks[q.id] = expected_rank(index, q, vectors[q.question], params.fusion)
    retrieval_source = "served vectors"
    if index.embedder_name == ADAPTED_NAME:
        retrieval_source, legs = adapted_fold_legs(project, {q.id: assignment[q.id] for q in questions})
        if legs is not None:
            oof_ranks = adapted_oof_ranks(index, questions, assignment, legs)
    full, rows = fit.on(questions, extra)
    in_rows = {r.id: r for r in rows}
    in_states = {qid: state_of(r, full.relevance) for qid, r in in_rows.items()}
    in_ranks = {q.id: expected_rank(index, q, vectors[q.question], full.fusion) for q in questions if q.answerable}
    in_logits = {
        qid: round(logit(r.features, full.relevance.weights), DIGITS) if r.features else None
        for qid, r in in_rows.items()
    }
    return {
        "index_version": index.version,
        "question_fingerprint": project.questions.fingerprint,
        "folds": FOLDS,
        "out_of_fold_retrieval": retrieval_source,
        "false_answer_cost": false_answer_cost,
        "min_grounded_citing": config.min_grounded_citing,
        "max_false_answer_rate": config.max_false_answer_rate,
        "params": full.as_dict(),
        "fold_params": per_fold,
        "out_of_fold": summary(questions, oof_rows, oof_states, oof_ranks, project.thresholds.retrieval.top_k),
        "in_sample": summary(questions, in_rows, in_states, in_ranks, project.thresholds.retrieval.top_k),
        "development": {
            str(path): {
                "out_of_fold": _answers(qs, oof_rows, oof_states),
                "in_sample": _answers(qs, in_rows, in_states),
            }
            for path, qs in development
        },
        "questions": [
            {
                "id": q.id,
                "fold": assignment[q.id],
                "oof_state": oof_states[q.id],
                "in_sample_state": in_states[q.id],
                "oof_logit": oof_logits[q.id],
                "in_sample_logit": in_logits[q.id],
                "oof_cites_expected": oof_rows[q.id].cites_expected,
                "in_sample_cites_expected": in_rows[q.id].cites_expected,
                "oof_accurate": oof_rows[q.id].accurate,
                "in_sample_accurate": in_rows[q.id].accurate,
                **({"oof_rank": oof_ranks[q.id], "in_sample_rank": in_ranks[q.id]} if q.answerable else {}),
            }
            for q in questions
        ],
    }


def adapted_fold_legs(project: Project, assignment: Mapping[str, int]) -> tuple[str, FoldLegs | None]:
    """Where an adapted index's out-of-fold ranks come from, and the legs when the fold file holds
    every fold; else the served vectors, labelled as in sample for the embedder. A file made for
    other inputs is refused (``load_fold_legs``): it would report another question set."""
    path = project.paths.models / FOLDS_FILE
    in_sample = "served vectors: the adapted embedder was tuned on these questions"
    if not path.is_file():
        return f"{in_sample} ({FOLDS_FILE} missing)", None
    legs = load_fold_legs(path, fold_meta(project, assignment))
    if legs.missing:
        return f"{in_sample} ({FOLDS_FILE} lacks folds {legs.missing})", None
    return f"one adapted model per fold, tuned without its questions ({FOLDS_FILE})", legs


def adapted_oof_ranks(
    index: Index, questions: Sequence[Question], assignment: Mapping[str, int], legs: FoldLegs
) -> dict[str, int]:
    """Each answerable question's expected rank under its fold's adapted model: that fold's fusion
    fitted on its training questions' legs (as ``fit_fusion``), its held-out questions ranked."""
    ranks: dict[str, int] = {}
    for f in sorted(legs.legs):  # calibrate refuses a file missing a fold; a partial run ranks its own

        def columns(index: Index, text: str, _vector: np.ndarray, fold: int = f) -> np.ndarray:
            return section_columns(index, text, *legs.of(fold, text))

        answerable = [q for q in questions if q.answerable]
        train = [q for q in answerable if assignment[q.id] != f]
        weights = np.round(fusion_weights(index, train, {q.question: np.zeros(0) for q in train}, columns), DIGITS)
        for q in answerable:
            if assignment[q.id] == f:
                ranks[q.id] = rank_of_expected(
                    index, q, np.einsum("ij,j->i", columns(index, q.question, np.zeros(0)), weights)
                )
    return ranks


def net_answers(rows: Sequence[Row], relevance: RelevanceConfig, false_answer_cost: float) -> float:
    """Accurate answers less ``WRONG_ANSWER_COST`` x answers shown without the evidence and
    ``false_answer_cost`` x unanswerable questions answered, as ``state_of`` decides them under
    ``relevance`` (answered: shown with claims, grounded or partial)."""
    right = wrong = false = 0
    for r in rows:
        if state_of(r, relevance) in ("grounded", "partial"):
            right += r.answerable and r.accurate
            wrong += r.answerable and not r.accurate
            false += not r.answerable
    return right - WRONG_ANSWER_COST * wrong - false_answer_cost * false


@dataclass(frozen=True)
class Fitting:
    """What every fit shares: the index, the committed thresholds, every question (committed and
    development) with its vector, and the fit's policy (false-answer cost, grounded floor)."""

    index: Index
    thresholds: Thresholds
    everyone: Sequence[Question]
    vectors: Mapping[str, np.ndarray]
    query_vector: Callable
    false_answer_cost: float
    min_grounded_citing: float | None = None
    max_false_answer_rate: float | None = None

    def on(self, train: Sequence[Question], development: Sequence[Question] = ()) -> tuple[Params, list[Row]]:
        """The parameters fitted on ``train`` (retrieval from it alone; the selector, relevance and
        the number of sections quoted from it with ``development``), every question answered
        under them."""
        fusion = fit_fusion(self.index, [q for q in train if q.answerable], self.vectors)
        relevance_ids = {q.id for q in train} | {q.id for q in development}
        lexical_weight = self.thresholds.drafting.evidence_lexical_weight  # the selector weighs words itself
        widest = with_params(self.thresholds, fusion, lexical_weight, max(SECTIONS))
        selector = fit_selector(*selector_samples(self.index, widest, [*train, *development], self.query_vector))
        best: tuple[float, Params, list[Row]] | None = None
        for sections in SECTIONS:
            rows = answer_rows(
                self.index,
                with_params(self.thresholds, fusion, lexical_weight, sections, selector),
                self.everyone,
                self.query_vector,
            )
            trained = [r for r in rows if r.id in relevance_ids]
            relevance = fit_relevance(
                trained,
                self.false_answer_cost,
                self.min_grounded_citing,
                self.max_false_answer_rate,
                (frozenset(q.id for q in train), frozenset(q.id for q in development)),
            )
            net = net_answers(trained, relevance, self.false_answer_cost)
            if best is None or net > best[0]:  # ties go to fewer sections
                best = (net, Params(fusion, lexical_weight, sections, relevance, selector), rows)
        assert best is not None
        return best[1], best[2]


def _rate(n: int, d: int) -> float:
    return round(n / d, DIGITS) if d else 0.0


def _answers(qs: Sequence[Question], rows: Mapping[str, Row], states: Mapping[str, str]) -> dict:
    ans = [q for q in qs if q.answerable]
    ref = [q for q in qs if not q.answerable]
    correct = [q.id for q in ans if states[q.id] == "grounded" and rows[q.id].cites_expected]
    return {
        "answerable": len(ans),
        "refusals": len(ref),
        "grounded_citing_expected": _rate(len(correct), len(ans)),
        # what a reader gets an answer from: grounded or partial, a kept claim citing an expected section
        "answered_citing_expected": _rate(
            sum(states[q.id] in ("grounded", "partial") and rows[q.id].cites_expected for q in ans), len(ans)
        ),
        "grounded": _rate(sum(states[q.id] == "grounded" for q in ans), len(ans)),
        "answered_unanswerable": [q.id for q in ref if states[q.id] == "grounded"],
        "state_agreement": _rate(sum(states[q.id] == q.expected_state for q in ref), len(ref)),
        "accuracy": figures([Outcome(q.answerable, states[q.id], rows[q.id].accurate) for q in qs]),
    }


def _retrieval(qs: Sequence[Question], ranks: Mapping[str, int], k: int) -> dict:
    r = [ranks[q.id] for q in qs if q.answerable]
    n = len(r) or 1
    return {
        "recall@1": _rate(sum(x <= 1 for x in r), n),
        "recall@5": _rate(sum(x <= 5 for x in r), n),
        "recall@10": _rate(sum(x <= k for x in r), n),
        "mrr": round(sum(1 / x for x in r if x <= k) / n, DIGITS),
    }


def summary(
    questions: Sequence[Question], rows: Mapping[str, Row], states: Mapping[str, str], ranks: Mapping[str, int], k: int
) -> dict:
    def both(qs: Sequence[Question]) -> dict:
        return {"retrieval": _retrieval(qs, ranks, k), "answers": _answers(qs, rows, states)}

    rfcs = sorted({q.rfcs[0] for q in questions if q.rfcs})
    styles = sorted({q.style for q in questions if q.style})
    return {
        **both(questions),
        "by_rfc": {rfc: both([q for q in questions if q.rfcs and q.rfcs[0] == rfc]) for rfc in rfcs},
        "by_style": {s: both([q for q in questions if q.style == s]) for s in styles},
    }
