"""The paid paths through a real HTTP fake: the live drafter, the OpenAI embedder, the ledger.

Every test uses the real ``openai.OpenAI`` client against ``tests/support/fake_openai.py`` on
loopback, so what is asserted is what goes over the wire: a refused run is one the fake
server never heard from.
"""

from __future__ import annotations

import dataclasses
import json
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import openai
import pytest

from rag_contract.answering.drafting import DraftError, PassageText
from rag_contract.answering.grounding import Claim
from rag_contract.answering.live_drafter import (
    RESPONSE_FORMAT,
    LiveDrafter,
    RunItem,
    live_drafter_for,
    prompt_for,
    prompt_text,
    record_run,
    rerecord_prompts,
    run_items,
)
from rag_contract.embedders import make_embedder
from rag_contract.embedders.openai_api import DIMENSIONS, OpenAIEmbedder
from rag_contract.index.store import rebuild_texts
from rag_contract.openai_client import ClientConfigError, make_client
from rag_contract.project import Paths
from rag_contract.spend import (
    LEDGER_NAME,
    PricesError,
    SpendLedger,
    SpendRefused,
    cost_of_completion,
    load_prices,
    price_completion,
    priced_rebuild,
    prices_path,
    worst_case_rerecord,
)
from tests.support.clocks import FakeClock
from tests.support.fake_openai import claims_reply, content_reply, fake_vector, truncated_reply

MODEL = "gpt-4.1-mini"
NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC).timestamp()


PASSAGES = (
    PassageText(
        "rfc9111#4.2.1",
        "Calculating Freshness Lifetime",
        "A cache can calculate the freshness lifetime (denoted as freshness_lifetime) of a "
        "response by evaluating the following rules and using the first match: If the cache "
        "is shared and the s-maxage response directive is present, use its value.",
    ),
    PassageText(
        "rfc9111#5.2.2.1",
        "max-age",
        "The max-age response directive indicates that the response is to be considered "
        "stale after its age is greater than the specified number of seconds.",
    ),
)
QUESTION = "Which directive does a shared cache use first to compute freshness?"
ITEMS = tuple(RunItem(f"q0{i}", f"{QUESTION} ({i})", PASSAGES) for i in range(1, 4))


@pytest.fixture(scope="module")
def prices(root):
    return load_prices(prices_path(root))


@pytest.fixture
def client(fake_openai):
    return openai.OpenAI(base_url=fake_openai.base_url, api_key="test-key", max_retries=0)


def make_ledger(tmp_path: Path, cap: float) -> SpendLedger:
    return SpendLedger(tmp_path / LEDGER_NAME, FakeClock(NOW), cap)


def make_drafter(client, tmp_path: Path, prices, cap: float = 2.0, max_tokens: int = 1500) -> LiveDrafter:
    return LiveDrafter(client, MODEL, max_tokens, make_ledger(tmp_path, cap), prices)


def writer(directory: Path):
    def write(item: RunItem, claims: tuple[Claim, ...]) -> None:
        directory.mkdir(exist_ok=True)
        body = [{"text": c.text, "section_id": c.section_id} for c in claims]
        (directory / f"{item.question_id}.json").write_text(json.dumps(body))

    return write


# --- the live drafter --------------------------------------------------------------------------


def test_draft_sends_the_contracted_request_and_records_usage(fake_openai, client, tmp_path, prices):
    fake_openai.script(
        claims_reply(
            [("A shared cache uses the s-maxage directive first.", "rfc9111#4.2.1")],
            prompt_tokens=321,
            completion_tokens=45,
        )
    )
    drafter = make_drafter(client, tmp_path, prices)
    claims = drafter.draft("q01", QUESTION, PASSAGES)

    assert claims == (Claim("A shared cache uses the s-maxage directive first.", "rfc9111#4.2.1"),)
    assert drafter.name == "live"
    (req,) = fake_openai.requests
    assert req.path == "/v1/chat/completions" and req.authorization == "Bearer test-key"
    body = req.body
    assert body["model"] == MODEL and body["max_completion_tokens"] == 1500
    assert body["response_format"] == RESPONSE_FORMAT
    assert body["response_format"]["json_schema"]["strict"] is True
    assert body["messages"] == prompt_for(QUESTION, PASSAGES)
    system, user = body["messages"]
    assert "only" in system["content"] and '{"claims": []}' in system["content"]
    assert QUESTION in user["content"]
    for p in PASSAGES:
        assert f'section_id="{p.section_id}"' in user["content"] and p.text in user["content"]

    actual = cost_of_completion(prices, MODEL, 321, 45)
    assert drafter.ledger.spent() == pytest.approx(actual)
    hold, spend = drafter.ledger.entries()
    assert hold["kind"] == "hold" and hold["usd"] == pytest.approx(drafter.bound(QUESTION, PASSAGES))
    assert spend["kind"] == "spend" and spend["settles"] == hold["id"]
    assert spend["usage"] == {"model": MODEL, "prompt_tokens": 321, "completion_tokens": 45}


def test_the_bound_covers_what_the_server_reports(fake_openai, client, tmp_path, prices):
    fake_openai.script(claims_reply([("x", "rfc9111#4.2.1")]))  # usage counted by the fake (bytes / 4)
    drafter = make_drafter(client, tmp_path, prices)
    drafter.draft("q01", QUESTION, PASSAGES)
    (spend,) = [e for e in drafter.ledger.entries() if e["kind"] == "spend"]
    assert spend["usd"] <= spend["bound_usd"]
    assert spend["usage"]["prompt_tokens"] <= len(prompt_text(prompt_for(QUESTION, PASSAGES)).encode())


def test_no_claims_when_the_passages_do_not_answer(fake_openai, client, tmp_path, prices):
    fake_openai.script(claims_reply([]))
    assert make_drafter(client, tmp_path, prices).draft("q01", QUESTION, PASSAGES) == ()


@pytest.mark.parametrize(
    "reply, match",
    [
        (truncated_reply(prompt_tokens=500, completion_tokens=1500), r"finish_reason 'length' \(truncated"),
        (content_reply('{"claims": []}', "content_filter"), r"finish_reason 'content_filter'"),
        (content_reply("The answer is s-maxage."), "not valid JSON"),
        (content_reply('{"claims": [{"text": "x"}]}'), r"claims\[0\] does not match the claims schema"),
        (content_reply('{"claims": [{"text": "x", "section_id": 7}]}'), r"claims\[0\] does not match"),
        (content_reply('{"claims": [], "confidence": 0.9}'), "does not match the claims schema"),
        (content_reply('{"claims": "none"}'), "does not match the claims schema"),
        (content_reply('["x"]'), "does not match the claims schema"),
        (content_reply(None, refusal="I can't help with that."), "refused: I can't help"),
    ],
)
def test_incomplete_or_malformed_responses_are_refused_naming_why(fake_openai, client, tmp_path, prices, reply, match):
    fake_openai.script(reply)
    drafter = make_drafter(client, tmp_path, prices)
    with pytest.raises(DraftError, match=match) as exc:
        drafter.draft("q07", QUESTION, PASSAGES)
    assert "q07" in str(exc.value)
    # billed even though refused: the reported usage is on the ledger, the hold settled
    kinds = [e["kind"] for e in drafter.ledger.entries()]
    assert kinds == ["hold", "spend"]
    assert drafter.ledger.spent() > 0


def test_a_citation_outside_the_offered_passages_is_left_to_grounding(fake_openai, client, tmp_path, prices):
    fake_openai.script(claims_reply([("Heuristic freshness applies.", "rfc9111#4.2.2")]))
    claims = make_drafter(client, tmp_path, prices).draft("q01", QUESTION, PASSAGES)
    assert claims == (Claim("Heuristic freshness applies.", "rfc9111#4.2.2"),)  # grounding's citation rule withdraws it


def test_unpriced_model_is_refused_before_any_call(fake_openai, client, tmp_path, prices):
    with pytest.raises(PricesError, match="gpt-9-turbo"):
        LiveDrafter(client, "gpt-9-turbo", 1500, make_ledger(tmp_path, 2.0), prices)
    assert fake_openai.requests == []


def test_a_retrying_client_is_refused(fake_openai, tmp_path, prices):
    retrying = openai.OpenAI(base_url=fake_openai.base_url, api_key="test-key", max_retries=2)
    with pytest.raises(ClientConfigError, match="max_retries must be 0"):
        LiveDrafter(retrying, MODEL, 1500, make_ledger(tmp_path, 2.0), prices)


def test_max_completion_tokens_changes_the_price_not_the_prompt(fake_openai, client, tmp_path, prices):
    fake_openai.script(claims_reply([]), claims_reply([]))
    short = make_drafter(client, tmp_path, prices, max_tokens=200)
    long = make_drafter(client, tmp_path, prices, max_tokens=4000)
    short.draft("q01", QUESTION, PASSAGES)
    long.draft("q01", QUESTION, PASSAGES)
    first, second = fake_openai.requests
    assert first.body["messages"] == second.body["messages"]
    assert short.bound(QUESTION, PASSAGES) < long.bound(QUESTION, PASSAGES)


def test_worst_case_rerecord_prices_exactly_what_the_drafter_authorises(tmp_path, client, prices):
    drafter = make_drafter(client, tmp_path, prices)
    texts = [prompt_text(prompt_for(i.question, i.passages)) for i in ITEMS]
    assert worst_case_rerecord(prices, MODEL, texts, 1500) == pytest.approx(drafter.price_run(ITEMS))
    assert "claims" in texts[0] and '"strict": true' in texts[0]  # the schema is priced too


# --- runs: all or nothing ----------------------------------------------------------------------


def test_a_run_that_fits_writes_every_draft(fake_openai, client, tmp_path, prices):
    fake_openai.script(*(claims_reply([(f"claim {i}", "rfc9111#4.2.1")]) for i in range(3)))
    drafter = make_drafter(client, tmp_path, prices)
    drafter.authorise_run(ITEMS)
    out = tmp_path / "drafts"
    done = record_run(drafter, ITEMS, writer(out))
    assert [item.question_id for item, _ in done] == ["q01", "q02", "q03"]
    assert sorted(p.name for p in out.iterdir()) == ["q01.json", "q02.json", "q03.json"]
    assert len(fake_openai.requests) == 3
    assert len([e for e in drafter.ledger.entries() if e["kind"] == "spend"]) == 3


def test_a_run_refused_before_its_first_call_sends_and_writes_nothing(fake_openai, client, tmp_path, prices):
    fake_openai.script(*(claims_reply([]) for _ in range(3)))
    bound = price_completion(prices, MODEL, prompt_text(prompt_for(ITEMS[0].question, PASSAGES)), 1500)
    drafter = make_drafter(client, tmp_path, prices, cap=bound * 0.5)
    out = tmp_path / "drafts"
    with pytest.raises(SpendRefused, match="q01") as exc:
        record_run(drafter, ITEMS, writer(out))
    assert "daily cap" in str(exc.value)
    assert fake_openai.requests == []
    assert not out.exists()
    assert not (tmp_path / LEDGER_NAME).exists()


def test_a_run_priced_up_front_is_refused_before_its_first_call(fake_openai, client, tmp_path, prices):
    drafter = make_drafter(client, tmp_path, prices)
    drafter = dataclasses.replace(drafter, ledger=make_ledger(tmp_path, drafter.price_run(ITEMS) * 0.9))
    with pytest.raises(SpendRefused, match="record-drafts"):
        drafter.authorise_run(ITEMS)
    assert fake_openai.requests == []
    assert not (tmp_path / LEDGER_NAME).exists()


def test_a_run_refused_midway_writes_nothing(fake_openai, client, tmp_path, prices):
    # Every call reports the same usage, so its actual cost is known: the cap admits a
    # call's bound on top of one actual cost, but not on top of two.
    usage = {"prompt_tokens": 400, "completion_tokens": 100}
    actual = cost_of_completion(prices, MODEL, 400, 100)
    bound = price_completion(prices, MODEL, prompt_text(prompt_for(ITEMS[0].question, PASSAGES)), 1500)
    fake_openai.script(*(claims_reply([("c", "rfc9111#4.2.1")], **usage) for _ in range(3)))
    drafter = make_drafter(client, tmp_path, prices, cap=bound + 1.5 * actual)
    out = tmp_path / "drafts"
    with pytest.raises(SpendRefused, match="q03"):
        record_run(drafter, ITEMS, writer(out))
    assert len(fake_openai.requests) == 2
    assert not out.exists()
    assert drafter.ledger.spent() == pytest.approx(2 * actual)  # the two calls made are on the ledger


def test_a_run_with_a_truncated_answer_writes_nothing(fake_openai, client, tmp_path, prices):
    fake_openai.script(claims_reply([("c", "rfc9111#4.2.1")]), truncated_reply(), claims_reply([]))
    out = tmp_path / "drafts"
    with pytest.raises(DraftError, match="q02.*length"):
        record_run(make_drafter(client, tmp_path, prices), ITEMS, writer(out))
    assert len(fake_openai.requests) == 2
    assert not out.exists()


# --- the client ----------------------------------------------------------------------------------


def test_make_client_reads_the_environment_only_for_what_it_was_not_given(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "env-key")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    c = make_client(None, None)
    assert (c.api_key, str(c.base_url).rstrip("/"), c.max_retries) == ("env-key", "http://127.0.0.1:9/v1", 0)
    c = make_client("http://127.0.0.1:8/v1", "arg-key")
    assert (c.api_key, str(c.base_url).rstrip("/")) == ("arg-key", "http://127.0.0.1:8/v1")


def test_make_client_without_a_key_is_refused(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(ClientConfigError, match="OPENAI_API_KEY"):
        make_client(None, None)


# --- the OpenAI embedder -------------------------------------------------------------------------


def test_openai_embedder_is_configurable_without_key_or_call(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    e = make_embedder("openai-text-embedding-3-small")
    assert isinstance(e, OpenAIEmbedder)
    assert (e.identity, e.dimensions) == ("openai-text-embedding-3-small;dims=1536", 1536)


def test_embedder_batches_normalises_and_records_every_call(fake_openai, client, tmp_path, prices):
    texts = [f"text number {i}: the max-age directive" for i in range(201)]
    ledger = make_ledger(tmp_path, 2.0)
    seen: list[int] = []
    vectors = OpenAIEmbedder(client, ledger, prices).embed(texts, seen.append)

    assert vectors.shape == (201, DIMENSIONS) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-6)
    expected = fake_vector(texts[137], DIMENSIONS)
    assert np.allclose(vectors[137], expected / np.linalg.norm(expected), atol=1e-6)  # order kept
    assert seen == [100, 100, 1]
    batches = [r.body for r in fake_openai.requests]
    assert [len(b["input"]) for b in batches] == [100, 100, 1]
    assert {(b["model"], b["dimensions"], b["encoding_format"]) for b in batches} == {
        ("text-embedding-3-small", 1536, "float")
    }
    spends = [e for e in ledger.entries() if e["kind"] == "spend"]
    assert len(spends) == 3 and all(s["usd"] <= s["bound_usd"] for s in spends)
    assert ledger.spent() == pytest.approx(sum(s["usd"] for s in spends))


def test_embedder_refuses_before_its_first_call_when_the_cap_is_too_small(fake_openai, client, tmp_path, prices):
    texts = ["x" * 1000] * 10
    with pytest.raises(SpendRefused, match="batch 1/1"):
        OpenAIEmbedder(client, make_ledger(tmp_path, 1e-9), prices).embed(texts)
    assert fake_openai.requests == []
    assert not (tmp_path / LEDGER_NAME).exists()


def test_embedder_refused_midway_stops_sending(fake_openai, client, tmp_path, prices):
    texts = ["y" * 1000] * 30  # three batches of 10, each bounded at 10,000 tokens
    batch_bound = 10_000 * 0.02 / 1e6
    batch_actual = 2_500 * 0.02 / 1e6  # the fake reports bytes / 4
    # a batch's bound fits on top of one batch's actual cost, not on top of two
    ledger = make_ledger(tmp_path, batch_bound + 1.5 * batch_actual)
    with pytest.raises(SpendRefused, match="batch 3/3"):
        OpenAIEmbedder(client, ledger, prices, batch_size=10).embed(texts)
    assert len(fake_openai.requests) == 2
    assert ledger.spent() == pytest.approx(2 * batch_actual)


def test_authorise_build_refuses_the_whole_rebuild_up_front(fake_openai, client, tmp_path, prices, project):
    bound = priced_rebuild(prices, rebuild_texts(project))
    tight = OpenAIEmbedder(client, make_ledger(tmp_path, bound * 0.99), prices)
    with pytest.raises(SpendRefused, match="build-index"):
        tight.authorise_build(project, rebuild_texts(project))
    roomy = OpenAIEmbedder(client, make_ledger(tmp_path, 2.0), prices)
    assert roomy.authorise_build(project, rebuild_texts(project)) == pytest.approx(bound)
    assert fake_openai.requests == []
    assert not (tmp_path / LEDGER_NAME).exists()  # pricing a run holds nothing


def test_authorise_build_binds_the_project_ledger_when_none_is_injected(fake_openai, client, tmp_path, project, root):
    # A project rooted in tmp_path: its ledger and price table, its (tiny) daily cap.
    (tmp_path / "eval").mkdir()
    (tmp_path / "eval" / "prices.yaml").write_text(prices_path(root).read_text())
    budget = dataclasses.replace(project.thresholds.budget, daily_cap_usd=1e-6, max_rebuild_usd=0, max_rerecord_usd=0)
    thresholds = dataclasses.replace(project.thresholds, budget=budget)
    here = dataclasses.replace(project, paths=Paths(tmp_path), thresholds=thresholds)

    embedder = OpenAIEmbedder(client=client)
    with pytest.raises(SpendRefused, match=r"\$0\.00 \(ledger: \.spend-ledger\.json\)"):
        embedder.authorise_build(here, rebuild_texts(here))
    assert fake_openai.requests == []
    embedder.embed(["one short text"])  # fits the tiny cap: the bound ledger records it
    ledger = json.loads((tmp_path / LEDGER_NAME).read_text())
    assert [e["kind"] for e in ledger["entries"]] == ["hold", "spend"]
    assert len(fake_openai.requests) == 1


def test_a_call_that_fails_stays_held_at_its_bound(fake_openai, client, tmp_path, prices):
    # Nothing scripted: the fake answers 500. Whether a failed call was billed is unknown,
    # so its hold is never released: it counts at the bound.
    drafter = make_drafter(client, tmp_path, prices)
    with pytest.raises(openai.InternalServerError):
        drafter.draft("q01", QUESTION, PASSAGES)
    assert len(fake_openai.requests) == 1
    assert [e["kind"] for e in drafter.ledger.entries()] == ["hold"]
    assert drafter.ledger.spent() == pytest.approx(drafter.bound(QUESTION, PASSAGES))


# --- record-drafts wiring ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def committed_index(project):
    from rag_contract.index.store import load_index

    return load_index(project.paths.index)


def project_in(tmp_path: Path, project, daily_cap_usd: float):
    """The committed project, rooted in tmp_path (its ledger and price table there)."""
    (tmp_path / "eval").mkdir(exist_ok=True)
    (tmp_path / "eval" / "prices.yaml").write_text(prices_path(project.paths.root).read_text())
    b = project.thresholds.budget
    budget = dataclasses.replace(
        b,
        daily_cap_usd=daily_cap_usd,
        max_rebuild_usd=min(b.max_rebuild_usd, daily_cap_usd),
        max_rerecord_usd=min(b.max_rerecord_usd, daily_cap_usd),
    )
    return dataclasses.replace(
        project, paths=Paths(tmp_path), thresholds=dataclasses.replace(project.thresholds, budget=budget)
    )


def test_live_drafter_for_prices_the_whole_run_before_any_call(fake_openai, client, tmp_path, project, committed_index):
    here = project_in(tmp_path, project, daily_cap_usd=0.01)
    n = len(project.questions.questions)
    with pytest.raises(SpendRefused, match=rf"record-drafts \({n} questions, gpt-4.1-mini\)"):
        live_drafter_for(here, committed_index, client, FakeClock(NOW))
    assert fake_openai.requests == []
    assert not (tmp_path / LEDGER_NAME).exists()


def test_live_drafter_for_builds_the_committed_drafter_when_the_run_fits(
    fake_openai, client, tmp_path, project, committed_index, prices
):
    here = project_in(tmp_path, project, daily_cap_usd=project.thresholds.budget.daily_cap_usd)
    drafter = live_drafter_for(here, committed_index, client, FakeClock(NOW))
    d = project.thresholds.drafting
    assert (drafter.model, drafter.max_completion_tokens) == (d.live_model, d.max_completion_tokens)
    assert drafter.ledger.path == tmp_path / LEDGER_NAME
    run = drafter.price_run(run_items(here, committed_index))
    assert run == pytest.approx(
        worst_case_rerecord(prices, d.live_model, rerecord_prompts(here, committed_index), d.max_completion_tokens)
    )
    assert run <= project.thresholds.budget.max_rerecord_usd
    assert fake_openai.requests == [] and not (tmp_path / LEDGER_NAME).exists()
