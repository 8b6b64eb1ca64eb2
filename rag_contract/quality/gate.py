"""The gate's checks, as data. The pytest plugin and ``rag-contract gate`` only present them.

Contract: ``GateContext(root)`` loads the committed project once and computes each shared
result (index, retrieval report, answers report, freshness) at most once, lazily, so every
check of one run reads the same numbers. ``checks(ctx)`` returns one ``Check`` per thing
the build is held to, each with a stable id:

- ``thresholds``                   the thresholds file names exactly the answerable questions
- ``retrieval/floor/<metric>``     aggregate floors (recall@1, recall@5, recall@10, MRR)
- ``retrieval/ceiling/<qid>``      one rank ceiling per answerable question
- ``index/freshness``              corpus, embedder, chunking still those the index was built from
- ``index/question-vectors``       the committed question vectors are those of the question set
- ``report/retrieval``             eval/results/retrieval.json equals what the eval produces now
- ``answers/answer/<qid>``         one per answerable question: answered no worse than it is held at
                                   (accurate, unless ``answers.known_misses`` holds it lower)
- ``answers/refusal/<uid>``        one per unanswerable question: lands in its expected state
- ``answers/<bar>``                grounded rate, answered-unanswerable, state agreement, coverage,
                                   accuracy when answered, false-answer rate (``quality.accuracy``)
- ``report/answers``               eval/results/answers.json equals what the answer eval produces now
- ``budget/latency``               the slowest question's median request time under max_request_ms
- ``budget/rebuild``, ``budget/rerecord``, ``budget/drafting-vs-cap``  priced runs vs their ceilings
- ``ratelimit/probe``              the served app still refuses past the burst, per client

A check returns an ``Outcome``: passed, one readable paragraph, and the figures (for JUnit
properties). Nothing here imports an HTTP client or calls the network, and nothing writes
the spend ledger.
"""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from rag_contract.answering.drafting import FixtureDrafter
from rag_contract.answering.live_drafter import rerecord_prompts
from rag_contract.answering.service import Service, committed_vector, offered
from rag_contract.config.questions import Question
from rag_contract.config.thresholds import ANSWER_BAR_KEYS, FLOOR_KEYS
from rag_contract.embedders import make_embedder
from rag_contract.index.registry import Registry
from rag_contract.index.status import index_status
from rag_contract.index.store import load_index, rebuild_texts
from rag_contract.project import load_project
from rag_contract.quality.accuracy import ANSWERED as SHOWN
from rag_contract.quality.accuracy import MISS_LEVELS, miss_level
from rag_contract.quality.evaluation import answers_report, evaluate_project
from rag_contract.spend import load_prices, priced_rebuild, worst_case_rerecord
from rag_contract.web.ratelimit import Allowance, probe
from rag_contract.web.serving import app_for_probe

# Measure(fn) -> median seconds per call. pytest-benchmark in the plugin; a plain timer in the CLI.
Measure = Callable[[Callable[[], Any]], float]


@dataclass(frozen=True)
class Outcome:
    passed: bool
    message: str
    figures: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Check:
    id: str
    kind: str
    run: Callable[[GateContext], Outcome]
    needs_measure: bool = False


def frozen_clock() -> float:
    return 0.0


def plain_measure(fn: Callable[[], Any], rounds: int = 30) -> float:
    fn()  # warm-up
    times = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


class GateContext:
    """Everything the checks share, computed once per run."""

    def __init__(
        self,
        root: Path,
        thresholds_path: Path | None = None,
        questions_path: Path | None = None,
        measure: Measure = plain_measure,
    ):

        self.root = Path(root)
        self.measure = measure
        self.project = load_project(self.root, questions=questions_path, thresholds=thresholds_path)

    @property
    def thresholds(self):
        return self.project.thresholds

    @cached_property
    def index(self):

        return load_index(self.project.paths.index)

    @cached_property
    def status(self):

        return index_status(self.project.paths, self.project.paths.questions)

    @cached_property
    def retrieval(self):
        # A question added without re-embedding is embedded locally so the quality checks still
        # measure it; index/question-vectors is the check that fails for it.
        return evaluate_project(self.project, self.index)

    @cached_property
    def fixture_service(self):

        # the embedder loads its model only if a question has no committed vector
        # A frozen clock: the answers report is a measure of states, never of timings (latency is
        # budget/latency's), so a stall on a loaded machine cannot abandon a question in it.
        return Service(
            Registry(self.index),
            self.thresholds,
            FixtureDrafter(self.project.paths.drafts),
            clock=frozen_clock,
            query_vector=committed_vector(make_embedder(self.index.embedder_name, self.project.paths.models)),
        )

    @cached_property
    def answers(self) -> dict:

        return answers_report(self.fixture_service, self.project.questions.questions, self.index.version)

    def answer_row(self, qid: str) -> dict:
        return next(r for r in self.answers["questions"] if r["id"] == qid)

    @cached_property
    def prices(self):

        return load_prices(self.project.paths.prices)

    @cached_property
    def rerecord_usd(self) -> float:
        """Upper bound of a live re-record of every draft: the prompts a run would send, each
        with max_completion_tokens of output. Held by two checks, priced once."""

        d = self.thresholds.drafting
        prompts = rerecord_prompts(self.project, self.index, self.fixture_service.query_vector)
        return worst_case_rerecord(self.prices, d.live_model, prompts, d.max_completion_tokens)


# --- retrieval ------------------------------------------------------------------------------


def _thresholds_valid(ctx: GateContext) -> Outcome:
    ceilings = set(ctx.thresholds.retrieval.ceilings)
    answerable = {q.id for q in ctx.project.questions.answerable}
    missing = sorted(answerable - ceilings)
    extra = sorted(ceilings - answerable)
    problems = []
    if missing:
        problems.append(f"answerable question(s) without a rank ceiling: {', '.join(missing)}")
    if extra:
        problems.append(f"ceiling(s) for ids that are not answerable questions: {', '.join(extra)}")
    if ctx.thresholds.measured_on != ctx.index.version:
        problems.append(
            f"measured_on is {ctx.thresholds.measured_on} but the index is {ctx.index.version}: "
            "re-measure and record the version the numbers were taken on"
        )
    if problems:
        return Outcome(
            False, "eval/thresholds.yaml: " + "; ".join(problems) + ".", {"missing": len(missing), "extra": len(extra)}
        )
    return Outcome(
        True, f"{len(ceilings)} ceilings for {len(answerable)} answerable questions; measured on {ctx.index.version}"
    )


def _floor(metric: str) -> Callable[[GateContext], Outcome]:
    def run(ctx: GateContext) -> Outcome:
        mode = ctx.retrieval.serving
        value = mode.figure(metric)
        floor = ctx.thresholds.retrieval.floors[metric]
        figures = {"measured": value, "floor": floor, "mode": mode.mode}
        if value >= floor:
            return Outcome(True, f"{metric} {value:.4f} >= floor {floor:.4f} ({mode.mode})", figures)
        worst = sorted((r for r in mode.questions if r.rank != 1), key=lambda r: -(r.rank or 99))[:5]
        names = ", ".join(f"{r.id} (rank {r.rank or 'miss'})" for r in worst)
        return Outcome(
            False,
            f"{metric} is {value:.4f} in {mode.mode} mode, below its floor of {floor:.4f} "
            f"in eval/thresholds.yaml. Worst-placed questions: {names}.",
            figures,
        )

    return run


def _question(ctx: GateContext, qid: str) -> Question:
    """Question ``qid`` of the set the checks were made from (every qid a check names is one)."""
    q = ctx.project.questions.get(qid)
    if q is None:
        raise KeyError(f"no question {qid!r} in the question set")
    return q


def _ceiling(qid: str) -> Callable[[GateContext], Outcome]:
    def run(ctx: GateContext) -> Outcome:
        ceiling = ctx.thresholds.retrieval.ceilings.get(qid)
        q = _question(ctx, qid)
        res = ctx.retrieval.serving.result(qid)
        figures = {"rank": res.rank if res.rank is not None else "miss", "ceiling": ceiling if ceiling else "none"}
        if ceiling is None:
            return Outcome(
                False,
                f"{qid} ({q.question!r}) has no rank ceiling in eval/thresholds.yaml; "
                f"it ranks {res.rank or 'outside the top ' + str(ctx.thresholds.retrieval.top_k)} now. "
                "Add its ceiling in the same change as the question.",
                figures,
            )
        if res.rank is not None and res.rank <= ceiling:
            return Outcome(True, f"{qid} rank {res.rank} <= ceiling {ceiling}", figures)
        above = "; ".join(f"{sid} ({title})" for sid, title in res.outranked_by)
        where = f"rank {res.rank}" if res.rank else f"not in the top {ctx.thresholds.retrieval.top_k}"
        return Outcome(
            False,
            f'{qid} "{q.question}" expects {", ".join(q.expected)}; it is at {where}, ceiling {ceiling}. '
            f"Outranked by: {above}.",
            figures,
        )

    return run


def _freshness(ctx: GateContext) -> Outcome:
    st = ctx.status
    if st.error:
        return Outcome(False, f"index freshness could not be checked: {st.error}")
    corpus_side = [c for c in st.changes if c.what != "questions"]
    if not corpus_side:
        return Outcome(
            True, f"index {st.index_version} matches corpus, embedder and chunking", {"index_version": st.index_version}
        )
    what = "; ".join(f"{c.what}: index has {c.index_has}, disk has {c.disk_has}" for c in corpus_side)
    return Outcome(
        False,
        f"index {st.index_version} no longer describes what is on disk ({what}). "
        f"Run `rag-contract build-index`; the rebuild will produce {st.rebuild_version}.",
        {"index_version": st.index_version, "rebuild_version": st.rebuild_version},
    )


def _question_vectors(ctx: GateContext) -> Outcome:
    st = ctx.status
    if st.error:
        return Outcome(False, f"question vectors could not be checked: {st.error}")
    changed = [c for c in st.changes if c.what == "questions"]
    missing = [q.id for q in ctx.project.questions.questions if q.question not in ctx.index.question_vectors]
    if not changed and not missing:
        return Outcome(True, f"question vectors match question set {ctx.project.questions.fingerprint}")
    detail = (
        f"question set fingerprint: index has {changed[0].index_has}, disk has {changed[0].disk_has}" if changed else ""
    )
    miss = f"no committed vector for {', '.join(missing)}" if missing else ""
    return Outcome(
        False,
        f"committed question vectors are stale ({'; '.join(x for x in (detail, miss) if x)}). "
        "Run `rag-contract build-index` to re-embed.",
        {"missing": len(missing)},
    )


# A project need not be a git repository: the advice names no tool.
KEEP_IT = "keep the result with the project (commit it if the project is under version control)"


def _report_matches(name: str, produce: Callable[[GateContext], str], command: str) -> Callable[[GateContext], Outcome]:
    def run(ctx: GateContext) -> Outcome:
        path = ctx.project.paths.result(name)
        now = produce(ctx)
        try:
            committed = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return Outcome(False, f"eval/results/{name} is missing; run `{command}` and {KEEP_IT}.")
        if committed == now:
            return Outcome(True, f"eval/results/{name} matches the eval")
        diffs = _json_diff(json.loads(committed), json.loads(now))
        return Outcome(
            False,
            f"eval/results/{name} differs from what `{command}` produces now "
            f"({'; '.join(diffs[:5])}). Rerun it and {KEEP_IT}.",
            {"differences": len(diffs)},
        )

    return run


def _json_diff(a: Any, b: Any, path: str = "", tolerance: float = 0.0) -> list[str]:
    """Where two JSON values differ, by path; with ``tolerance``, numbers (never flags) that differ
    by no more than it count as equal."""
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for k in sorted(set(a) | set(b), key=str):
            out += _json_diff(a.get(k), b.get(k), f"{path}.{k}" if path else str(k), tolerance)
        return out
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        out = []
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            out += _json_diff(x, y, f"{path}[{i}]", tolerance)
        return out
    if tolerance and _number(a) and _number(b) and abs(a - b) <= tolerance:
        return []
    # True == 1 in Python, but a flag that became a number is a change in the document
    same = a == b and isinstance(a, bool) == isinstance(b, bool)
    return [] if same else [f"{path}: committed {json.dumps(a)[:60]}, now {json.dumps(b)[:60]}"]


def _number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


# --- answers --------------------------------------------------------------------------------


# How much of an answer a state gives, for a question the corpus cannot answer.
# Looked up with Question.expected_state (typed optional; parse_questions sets it on every refusal).
ANSWERED: dict[str | None, int] = {"no_context": 0, "abandoned": 0, "unsupported": 0, "partial": 1, "grounded": 2}


def _refusal(qid: str) -> Callable[[GateContext], Outcome]:
    """A refusal question must not land more answered than annotated.

    ``unsupported`` < ``partial`` < ``grounded``, with the service errors ``no_context`` and
    ``abandoned`` level with ``unsupported`` (they answer nothing either). Landing exactly in
    the annotated state is agreement; landing level with it in another state, or below it (a
    partial-annotated question refused outright, which is all a drafter that only quotes can
    do), is the safe direction and passes, named; landing above it means the service answered
    what the corpus cannot answer, and fails. Exact agreement over the whole set is held by
    ``answers.min_state_agreement``.
    """

    def run(ctx: GateContext) -> Outcome:
        q = _question(ctx, qid)
        row = ctx.answer_row(qid)
        state = row["state"]
        figures = {"state": state, "expected_state": q.expected_state}
        if state == q.expected_state:
            return Outcome(True, f"{qid} landed in {state} as annotated", figures)
        if state in ANSWERED and ANSWERED[state] <= ANSWERED[q.expected_state]:
            # no_context and abandoned answer nothing, as unsupported does: as safe, never "more answered"
            how = "more than" if ANSWERED[state] < ANSWERED[q.expected_state] else "as much as"
            return Outcome(True, f"{qid} landed in {state}, refusing {how} its annotated {q.expected_state}", figures)
        held = ctx.thresholds.answers.known_overanswered.get(qid)
        if held is not None and state in ANSWERED and ANSWERED[state] <= ANSWERED[held]:
            return Outcome(
                True,
                f"{qid} landed in {state}, more answered than its annotated {q.expected_state}: a known exception "
                f"held at {held} by answers.known_overanswered, which may not get worse",
                figures | {"held_at": held},
            )
        kept = row.get("kept", 0)
        return Outcome(
            False,
            f'{qid} "{q.question}" is annotated {q.expected_state} ({q.why}) but landed in {state}: '
            f"{kept} claim(s) kept and {len(row.get('withdrawn', []))} withdrawn, so the service answered "
            "more than the corpus supports.",
            figures,
        )

    return run


def _measured(answers: Mapping, figure: str) -> float | int | None:
    """A figure of the answers report: top-level, or one of its ``accuracy`` block."""
    accuracy = answers.get("accuracy", {})
    return accuracy[figure] if figure in accuracy else answers[figure]


def _answer(qid: str) -> Callable[[GateContext], Outcome]:
    """An answerable question's answer may not fall short of it by more than it is held at.

    Its level (``quality.accuracy.miss_level``), best first: ``accurate`` (a kept claim carries
    its evidence), ``unanswered`` (nothing shown: a refusal is safe), ``inaccurate`` (claims from
    an expected section without the evidence), ``uncited`` (claims citing no expected section:
    an answer from the wrong place). ``answers.known_misses`` holds a question measured short at
    its level; every other one is held at ``accurate``."""

    def run(ctx: GateContext) -> Outcome:
        q = _question(ctx, qid)
        row = ctx.answer_row(qid)
        level = miss_level(row["state"], bool(row.get("cites_expected")), bool(row.get("accurate")))
        held = ctx.thresholds.answers.known_misses.get(qid, MISS_LEVELS[0])
        figures = {"state": row["state"], "level": level, "held_at": held}
        where = f" citing {', '.join(row.get('cited', [])) or 'nothing'}" if row["state"] in SHOWN else ""
        if MISS_LEVELS.index(level) <= MISS_LEVELS.index(held):
            note = "" if held == MISS_LEVELS[0] else f", held at {held} by answers.known_misses"
            return Outcome(True, f"{qid} answered {level} ({row['state']}{where}){note}", figures)
        return Outcome(
            False,
            f'{qid} "{q.question}" was answered {level} ({row["state"]}{where}; expected {", ".join(q.expected)}, '
            f"evidence {q.evidence!r}), worse than the {held} it is held at"
            + (" by answers.known_misses." if held != MISS_LEVELS[0] else "."),
            figures,
        )

    return run


def _answer_bar(key: str) -> Callable[[GateContext], Outcome]:
    spec = {
        "min_grounded_rate": ("grounded_rate", ">="),
        "min_state_agreement": ("state_agreement", ">="),
        "max_answered_unanswerable": ("answered_unanswerable", "<="),
        "min_coverage": ("coverage", ">="),
        "min_accuracy_when_answered": ("accuracy_when_answered", ">="),
        "max_false_answer_rate": ("false_answer_rate", "<="),
    }[key]

    def run(ctx: GateContext) -> Outcome:
        bar = getattr(ctx.thresholds.answers, key)
        value = _measured(ctx.answers, spec[0])
        figures = {"measured": value, "bar": bar}
        # a rate with no denominator (n/a) holds no bar: nothing was answered to be accurate
        ok = value is not None and (value >= bar if spec[1] == ">=" else value <= bar)
        if ok:
            return Outcome(True, f"{spec[0]} {value} {spec[1]} {bar}", figures)
        rows = ctx.answers["questions"]
        if spec[0] == "answered_unanswerable":
            who = ", ".join(ctx.answers["answered_unanswerable_ids"])
            return Outcome(
                False,
                f"{value} unanswerable question(s) were answered anyway ({who}); answers.{key} allows {bar}.",
                figures,
            )
        if spec[0] == "grounded_rate":
            who = ", ".join(r["id"] for r in rows if r["answerable"] and r["state"] != "grounded")
            return Outcome(False, f"grounded rate {value} is below answers.{key} {bar}; not grounded: {who}.", figures)
        if spec[0] == "coverage":
            who = ", ".join(r["id"] for r in rows if r["answerable"] and r["state"] not in SHOWN)
            return Outcome(False, f"coverage {value} is below answers.{key} {bar}; not answered: {who}.", figures)
        if spec[0] == "accuracy_when_answered":
            who = ", ".join(r["id"] for r in rows if r["answerable"] and r["state"] in SHOWN and not r.get("accurate"))
            return Outcome(
                False,
                f"accuracy when answered {value if value is not None else 'n/a'} is below answers.{key} {bar}; "
                f"answered without the evidence: {who or 'none (nothing answered)'}.",
                figures,
            )
        if spec[0] == "false_answer_rate":
            who = ", ".join(r["id"] for r in rows if not r["answerable"] and r["state"] in SHOWN)
            return Outcome(
                False, f"false-answer rate {value} is above answers.{key} {bar}; answered anyway: {who}.", figures
            )
        who = ", ".join(r["id"] for r in rows if not r["answerable"] and r["state"] != r["expected_state"])
        return Outcome(False, f"state agreement {value} is below answers.{key} {bar}; disagreeing: {who}.", figures)

    return run


# --- budgets --------------------------------------------------------------------------------


def slowest_question(ctx: GateContext) -> str:
    """The question whose served request does the most grounding work: most claims x passage size."""

    def work(q) -> tuple[int, str]:
        row = ctx.answer_row(q.id)
        passages = offered(ctx.index, ctx.thresholds, q.question, ctx.fixture_service.query_vector)
        return (row.get("claims", 0) * sum(len(p.text) for p in passages), q.id)

    return max(work(q) for q in ctx.project.questions.questions)[1]


def _latency(ctx: GateContext) -> Outcome:
    qid = slowest_question(ctx)
    q = _question(ctx, qid)
    svc = ctx.fixture_service
    median_ms = ctx.measure(lambda: svc.answer(q.question, q.id)) * 1000.0
    bar = ctx.thresholds.budget.max_request_ms
    figures = {
        "question": qid,
        "median_ms": round(median_ms, 3),
        "max_request_ms": bar,
        "request_deadline_ms": ctx.thresholds.budget.request_deadline_ms,
    }
    if median_ms <= bar:
        return Outcome(True, f"{qid} median {median_ms:.2f} ms <= {bar} ms", figures)
    return Outcome(
        False,
        f"Service.answer on {qid} (the slowest question) has a median of {median_ms:.2f} ms, "
        f"above budget.max_request_ms {bar} ms.",
        figures,
    )


def _priced(kind: str) -> Callable[[GateContext], Outcome]:
    def run(ctx: GateContext) -> Outcome:
        # Prices from committed text only: no client is built and the ledger is not touched.

        b = ctx.thresholds.budget
        if kind == "rebuild":
            cost = priced_rebuild(ctx.prices, rebuild_texts(ctx.project))
            bar, key, what = (
                b.max_rebuild_usd,
                "budget.max_rebuild_usd",
                "build-index --embedder openai-text-embedding-3-small",
            )
        else:
            cost = ctx.rerecord_usd
            if kind == "rerecord":
                bar, key, what = b.max_rerecord_usd, "budget.max_rerecord_usd", "record-drafts --drafter live"
            else:
                bar, key, what = b.daily_cap_usd, "budget.daily_cap_usd", "the worst-case live drafting run"
        figures = {"priced_usd": round(cost, 4), "ceiling_usd": bar}
        if cost <= bar:
            return Outcome(True, f"{what}: priced ${cost:.4f} <= {key} ${bar:.2f}", figures)
        return Outcome(
            False,
            f"{what} is priced at ${cost:.4f} (upper bound from committed text, "
            f"drafting.max_completion_tokens {ctx.thresholds.drafting.max_completion_tokens}), "
            f"above {key} ${bar:.2f}: the cap would refuse the run it exists to permit.",
            figures,
        )

    return run


def _rate_limit(ctx: GateContext) -> Outcome:

    rl = ctx.thresholds.rate_limit
    allowance = Allowance(rl.max_requests_per_minute, rl.max_client_burst, rl.trusted_proxy_hops)
    result = probe(lambda clock: app_for_probe(ctx.project, ctx.index, clock), allowance)
    figures = {
        "burst": rl.max_client_burst,
        "served": result.served,
        "refused_at": result.refused_at if result.refused_at is not None else "never",
    }
    return Outcome(result.passed, result.detail, figures)


# --- the list -------------------------------------------------------------------------------


def checks(ctx: GateContext) -> list[Check]:
    out = [Check("thresholds", "thresholds", _thresholds_valid)]
    out += [Check(f"retrieval/floor/{m}", "floor", _floor(m)) for m in FLOOR_KEYS]
    ids = [q.id for q in ctx.project.questions.answerable]
    out += [Check(f"retrieval/ceiling/{qid}", "ceiling", _ceiling(qid)) for qid in ids]
    out += [
        Check("index/freshness", "freshness", _freshness),
        Check("index/question-vectors", "freshness", _question_vectors),
        Check(
            "report/retrieval",
            "report",
            _report_matches("retrieval.json", lambda c: c.retrieval.to_json(), "rag-contract eval"),
        ),
    ]
    out += [Check(f"answers/answer/{q.id}", "answer", _answer(q.id)) for q in ctx.project.questions.answerable]
    out += [Check(f"answers/refusal/{q.id}", "refusal", _refusal(q.id)) for q in ctx.project.questions.refusals]
    a = ctx.thresholds.answers
    out += [Check(f"answers/{k}", "answers", _answer_bar(k)) for k in ANSWER_BAR_KEYS if getattr(a, k) is not None]
    out += [
        Check(
            "report/answers",
            "report",
            _report_matches(
                "answers.json",
                lambda c: json.dumps(c.answers, indent=1, ensure_ascii=False) + "\n",
                "rag-contract eval-answers",
            ),
        ),
        Check("budget/latency", "latency", _latency, needs_measure=True),
        Check("budget/rebuild", "budget", _priced("rebuild")),
        Check("budget/rerecord", "budget", _priced("rerecord")),
        Check("budget/drafting-vs-cap", "budget", _priced("cap")),
        Check("ratelimit/probe", "ratelimit", _rate_limit),
    ]
    return out


def run_check(check: Check, ctx: GateContext) -> Outcome:
    """Run one check; an exception is a failed check with its message, never a crash of the gate."""
    try:
        return check.run(ctx)
    except Exception as exc:  # the gate reports; it does not fall over
        return Outcome(False, f"{check.id} could not run: {type(exc).__name__}: {exc}")
