"""Answer states from hand-written drafts, the deadline in every stage, and recording."""

from __future__ import annotations

import dataclasses
import json

import pytest

from rag_contract.answering.drafting import ExtractiveDrafter, FixtureDrafter, read_draft
from rag_contract.answering.grounding import Claim
from rag_contract.answering.service import Abandoned, Answer, AnswerState, Service, consult, decide
from rag_contract.index.registry import Registry
from rag_contract.quality.recording import draft_all, write_drafts
from tests.support.clocks import FakeClock
from tests.support.thresholds import relevance_always_answers

START = 100.0  # where each test's clock starts; the tests move it by hand


class ScriptedDrafter:
    """Returns the claims it was given; optionally advances a fake clock while drafting."""

    name = "scripted"

    def __init__(self, claims, clock=None, spend_s: float = 0.0):
        self.claims = tuple(claims)
        self.clock = clock
        self.spend_s = spend_s
        self.calls = 0

    def draft(self, question_id, question, passages, query=None):
        self.calls += 1
        if self.clock:
            self.clock.advance(self.spend_s)
        return self.claims


def vector_for(index, embed_text):
    # every test question here is one of the committed set, so its vector is committed
    return index.question_vectors[embed_text]


@pytest.fixture(scope="module")
def q(project):
    return next(x for x in project.questions.questions if "rfc9111#4.2.1" in x.expected)


@pytest.fixture(scope="module")
def cited(project, index, q):
    """The top two sections retrieved for the question (what a drafter is offered)."""
    passages = consult(index, project.thresholds, q.question, index.question_vectors[q.question])
    return [index.section(p.section_id) for p in passages[:2]]


def service(project, index, drafter, clock=None, registry=None):
    return Service(registry or Registry(index), project.thresholds, drafter, clock=clock or FakeClock(START))


def quote(section, n=0):
    sentences = [s for s in ExtractiveDrafterSentences(section.text) if len(s.split()) > 6]
    return sentences[n]


def ExtractiveDrafterSentences(text):
    from rag_contract.answering.drafting import sentences

    return sentences(text)


def test_every_claim_kept_is_grounded(project, index, q, cited):
    # the states grounding decides on its own: relevance answers whatever the claims' confidence
    claims = [Claim(quote(cited[0]), cited[0].id), Claim(quote(cited[1]), cited[1].id)]
    loose = Service(
        Registry(index), relevance_always_answers(project.thresholds), ScriptedDrafter(claims), FakeClock(START)
    )
    a = loose.answer(q.question, q.id)
    assert isinstance(a, Answer) and a.state is AnswerState.GROUNDED and a.http_status == 200
    assert len(a.kept) == 2 and not a.withdrawn
    assert a.index_version == index.version and len(a.passages) == project.thresholds.retrieval.top_k


def test_some_withdrawn_is_partial_with_rules_named(project, index, q, cited):
    claims = [
        Claim(quote(cited[0]), cited[0].id),
        Claim("A cache MUST answer 599 Stale Forever after 86400 seconds.", cited[0].id),
    ]
    # the state grounding decides on its own, as above: relevance answers whatever the confidence
    loose = Service(
        Registry(index), relevance_always_answers(project.thresholds), ScriptedDrafter(claims), FakeClock(START)
    )
    a = loose.answer(q.question, q.id)
    assert a.state is AnswerState.PARTIAL
    assert [v.rule for v in a.withdrawn] == ["literal"]
    assert "599" in a.withdrawn[0].detail
    body = a.as_dict()
    assert body["withdrawn"][0]["rule"] == "literal" and len(body["claims"]) == 1


def test_none_kept_is_a_refusal_naming_passages_and_rejected_claims(project, index, q):
    claims = [Claim("HTTP/2 frames carry a 24-bit length and an 8-bit type.", "rfc9110#15.5.5")]
    a = service(project, index, ScriptedDrafter(claims)).answer(q.question, q.id)
    assert a.state is AnswerState.UNSUPPORTED and a.http_status == 200
    assert a.withdrawn[0].rule == "citation"
    assert a.passages, "a refusal names the passages it consulted"


def test_no_claims_drafted_is_unsupported(project, index, q):
    a = service(project, index, ScriptedDrafter([])).answer(q.question, q.id)
    assert a.state is AnswerState.UNSUPPORTED and not a.kept and not a.withdrawn


def test_no_index_is_no_context_503_without_version(project, index, q):
    drafter = ScriptedDrafter([])
    a = service(project, index, drafter, registry=Registry(None, load_error="meta.json: missing")).answer(
        q.question, q.id
    )
    assert a.state is AnswerState.NO_CONTEXT and a.http_status == 503
    assert a.index_version is None and "meta.json" in a.detail
    assert drafter.calls == 0


def test_decide():
    from rag_contract.answering.grounding import Verdict

    kept = Verdict(Claim("x", "s"), True, None, None, 1.0, ())
    gone = Verdict(Claim("y", "s"), False, "coverage", "0.2 < 0.667", 0.2, ())
    assert decide([kept, kept]) is AnswerState.GROUNDED
    assert decide([kept, gone]) is AnswerState.PARTIAL
    assert decide([gone]) is AnswerState.UNSUPPORTED
    assert decide([]) is AnswerState.UNSUPPORTED


# --- the deadline fires in each stage, on an injected clock (nothing sleeps) -------------------


def over_deadline_s(project) -> float:
    return project.thresholds.budget.request_deadline_ms / 1000.0 + 0.001


def test_deadline_in_retrieval(project, index, q):
    clock = FakeClock(START)

    def slow_vector(ix, text):
        clock.advance(over_deadline_s(project))
        return ix.question_vectors[text]

    drafter = ScriptedDrafter([])
    svc = Service(Registry(index), project.thresholds, drafter, clock=clock, query_vector=slow_vector)
    a = svc.answer(q.question, q.id)
    assert isinstance(a, Abandoned) and a.http_status == 503
    assert "retrieval" in a.detail and drafter.calls == 0
    body = a.as_dict()
    assert set(body) >= {"error", "detail", "index_version", "budget"} and "state" not in body
    assert body["budget"]["stages"]["retrieval"] > project.thresholds.budget.request_deadline_ms


def test_deadline_in_drafting(project, index, q, cited):
    clock = FakeClock(START)
    drafter = ScriptedDrafter([Claim(quote(cited[0]), cited[0].id)], clock=clock, spend_s=over_deadline_s(project))
    a = service(project, index, drafter, clock=clock).answer(q.question, q.id)
    assert isinstance(a, Abandoned) and "drafting" in a.detail
    assert a.index_version == index.version


def test_an_unhurried_answer_is_the_answer_a_spent_deadline_would_abandon(project, index, q, cited):
    # measurement answers without a deadline: a slow machine measures the states a quiet one does
    claims = [Claim(quote(cited[0]), cited[0].id)]
    slow = ScriptedDrafter(claims, clock=FakeClock(START), spend_s=over_deadline_s(project))
    hurried = service(project, index, slow, clock=slow.clock).answer(q.question, q.id)
    assert isinstance(hurried, Abandoned)
    slow = ScriptedDrafter(claims, clock=FakeClock(START), spend_s=over_deadline_s(project))
    a = service(project, index, slow, clock=slow.clock).answer_unhurried(q.question, q.id)
    quick = service(project, index, ScriptedDrafter(claims)).answer(q.question, q.id)
    assert isinstance(a, Answer) and isinstance(quick, Answer)
    assert (a.state, a.kept, a.withdrawn) == (quick.state, quick.kept, quick.withdrawn)


def test_deadline_inside_the_grounding_loop_abandons_never_answers_from_checked_claims(project, index, q, cited):
    clock = FakeClock(START)
    claims = [Claim(quote(cited[0], i), cited[0].id) for i in range(3)]
    checked = []

    import rag_contract.answering.service as answering

    real = answering.check_claims

    def spy(claims_, retrieved, floor, checkpoint):
        def tick():
            checked.append(1)
            if len(checked) == 2:  # the second claim's check finds the budget spent
                clock.advance(over_deadline_s(project))
            checkpoint()

        return real(claims_, retrieved, floor, checkpoint=tick)

    answering.check_claims = spy
    try:
        a = service(project, index, ScriptedDrafter(claims), clock=clock).answer(q.question, q.id)
    finally:
        answering.check_claims = real
    assert isinstance(a, Abandoned) and "grounding" in a.detail
    assert len(checked) == 2, "the loop stopped at the claim that found the deadline spent"
    assert "state" not in a.as_dict()


def test_budget_reports_each_stage(project, index, q):
    a = service(project, index, ScriptedDrafter([])).answer(q.question, q.id)
    assert list(a.budget.stages) == ["retrieval", "drafting", "grounding", "relevance"]
    assert a.budget.deadline_ms == project.thresholds.budget.request_deadline_ms


# --- the index is acquired once -----------------------------------------------------------------


def test_a_request_uses_only_the_index_it_acquired(project, index, q, cited):
    registry = Registry(index)
    other = dataclasses.replace(index, version="bbbbbbbbbbbb")

    class SwappingDrafter(ScriptedDrafter):
        def draft(self, question_id, question, passages, query=None):
            registry.install(other)  # a cutover lands mid-draft
            return super().draft(question_id, question, passages)

    a = service(project, index, SwappingDrafter([Claim(quote(cited[0]), cited[0].id)]), registry=registry).answer(
        q.question, q.id
    )
    assert a.index_version == index.version
    assert registry.acquire() is other


# --- fixtures ------------------------------------------------------------------------------------


def test_committed_drafts_rerecord_byte_for_byte(project, index, tmp_path, root):
    committed = root / "eval" / "fixtures" / "drafts"
    first = read_draft(next(committed.glob("*.json")))
    d = project.thresholds.drafting
    drafter = ExtractiveDrafter.committed(d)
    write_drafts(draft_all(index, project.thresholds, drafter, project.questions.questions, first.recorded), tmp_path)
    names = sorted(p.name for p in committed.glob("*.json"))
    assert names == sorted(p.name for p in tmp_path.glob("*.json"))
    for name in names:
        assert (tmp_path / name).read_bytes() == (committed / name).read_bytes(), name


def test_every_committed_draft_records_its_provenance(project, index, root):
    for path in (root / "eval" / "fixtures" / "drafts").glob("*.json"):
        d = read_draft(path)
        assert d.drafter == "extractive" and d.index_version == index.version
        assert len(d.prompt_fingerprint) == 16 and d.recorded
        assert project.questions.get(d.question_id).question == d.question


def test_fixture_replay_reruns_grounding(project, index, q, tmp_path):
    """A fixture freezes the drafter's output only: change the coverage floor and the verdict moves."""
    draft = {
        "question_id": q.id,
        "question": q.question,
        "drafter": "hand",
        "prompt_fingerprint": "0" * 16,
        "index_version": index.version,
        "recorded": "2026-11-29",
        "claims": [{"text": "Caches compute lifetimes from headers in various ways.", "section_id": "rfc9111#4.2.1"}],
    }
    (tmp_path / f"{q.id}.json").write_text(json.dumps(draft))
    strict = dataclasses.replace(
        project.thresholds, grounding=dataclasses.replace(project.thresholds.grounding, coverage_floor=1.0)
    )
    loose = relevance_always_answers(
        dataclasses.replace(
            project.thresholds, grounding=dataclasses.replace(project.thresholds.grounding, coverage_floor=0.0)
        )
    )
    assert (
        Service(Registry(index), strict, FixtureDrafter(tmp_path)).answer(q.question, q.id).state
        is not AnswerState.GROUNDED
    )
    assert (
        Service(Registry(index), loose, FixtureDrafter(tmp_path)).answer(q.question, q.id).state is AnswerState.GROUNDED
    )
