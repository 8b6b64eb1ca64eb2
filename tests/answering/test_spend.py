"""Spend: the price table, the token bound, the pure pricing functions and the ledger."""

from __future__ import annotations

import json
import math
import threading
from datetime import UTC, datetime
from pathlib import Path

import pytest
from tokenizers import Tokenizer, models, pre_tokenizers, trainers

from rag_contract.index.store import rebuild_texts
from rag_contract.spend import (
    CHAT_FRAMING_TOKENS,
    EMBEDDING_MODEL,
    LEDGER_NAME,
    PricesError,
    SpendLedger,
    SpendLedgerError,
    SpendRefused,
    estimate_tokens,
    ledger_path,
    load_prices,
    parse_prices,
    price_completion,
    price_embedding,
    priced_rebuild,
    prices_path,
    worst_case_rerecord,
)
from tests.support.clocks import FakeClock

DAY1 = datetime(2026, 11, 29, 23, 0, tzinfo=UTC).timestamp()  # one hour before UTC midnight


@pytest.fixture(scope="module")
def prices(root):
    return load_prices(prices_path(root))


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(DAY1)


def ledger_at(tmp_path: Path, clock: FakeClock, cap: float = 1.0) -> SpendLedger:
    return SpendLedger(tmp_path / LEDGER_NAME, clock, cap)


# --- the price table ---------------------------------------------------------------------


def test_committed_price_table_prices_the_configured_models(prices, project):
    assert prices.input(EMBEDDING_MODEL) == 0.02
    assert (prices.input("gpt-4.1-mini"), prices.output("gpt-4.1-mini")) == (0.40, 1.60)
    assert (prices.input("gpt-4.1"), prices.output("gpt-4.1")) == (2.00, 8.00)
    assert (prices.input("gpt-4o-mini"), prices.output("gpt-4o-mini")) == (0.15, 0.60)
    # the live model the thresholds name must be priced, or record-drafts could not run
    prices.output(project.thresholds.drafting.live_model)


def test_unpriced_model_is_refused_naming_it(prices):
    with pytest.raises(PricesError, match="'gpt-9-turbo'.*cannot be capped"):
        prices.input("gpt-9-turbo")
    with pytest.raises(PricesError, match="'gpt-9-turbo'"):
        price_completion(prices, "gpt-9-turbo", "hello", 10)
    with pytest.raises(PricesError, match="'gpt-9-turbo'"):
        price_embedding(prices, "gpt-9-turbo", ["hello"])


def test_embedding_model_cannot_price_a_completion(prices):
    with pytest.raises(PricesError, match="text-embedding-3-small.*no output price"):
        price_completion(prices, EMBEDDING_MODEL, "hello", 10)


@pytest.mark.parametrize(
    "raw, match",
    [
        ([], "must be a mapping"),
        ({"as_of": "2026-11", "models": {}}, "non-empty"),
        ({"models": {"m": {"input": 1}}}, "as_of"),
        ({"as_of": "2026-11", "models": {"m": {"input": 1}}, "currency": "EUR"}, r"unknown key.*currency"),
        ({"as_of": "2026-11", "models": {"m": {"output": 1}}}, r"models\.m\.input: required"),
        ({"as_of": "2026-11", "models": {"m": {"input": -0.1}}}, r"models\.m\.input: must be a finite number >= 0"),
        ({"as_of": "2026-11", "models": {"m": {"input": True}}}, r"models\.m\.input"),
        ({"as_of": "2026-11", "models": {"m": {"input": float("nan")}}}, r"models\.m\.input"),
        ({"as_of": "2026-11", "models": {"m": {"input": "0.4"}}}, r"models\.m\.input"),
        ({"as_of": "2026-11", "models": {"m": {"input": 1, "cached": 0.1}}}, r"models\.m: unknown key.*cached"),
    ],
)
def test_malformed_price_table_is_refused_naming_the_key(raw, match):
    with pytest.raises(PricesError, match=match):
        parse_prices(raw)


def test_missing_price_table_is_refused(tmp_path):
    with pytest.raises(PricesError, match="prices.yaml: file missing"):
        load_prices(tmp_path / "prices.yaml")


# --- the token bound -----------------------------------------------------------------------


def _byte_level_bpe(texts: list[str], vocab_size: int) -> Tokenizer:
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False
    )
    tok.train_from_iterator(texts, trainer)
    return tok


@pytest.fixture(scope="module")
def corpus_bpes(project):
    """Byte-level BPEs trained on the corpus itself - the vocabulary most favourable to
    it - with no merges (256: one token per byte) and with many (up to 30,000)."""
    texts = [s.text for s in project.corpus.sections]
    return {n: _byte_level_bpe(texts, n) for n in (256, 30_000)}


def test_estimate_is_the_utf8_byte_count():
    assert estimate_tokens("") == 0
    assert estimate_tokens("max-age=3600") == 12
    # bytes, not characters: a character-count estimate under-counts non-ASCII
    assert estimate_tokens("§ — é 日本 🙂") == len("§ — é 日本 🙂".encode()) > len("§ — é 日本 🙂")
    assert estimate_tokens("\ud800") == 3  # a lone surrogate is priced, not a crash


def test_estimate_never_undercounts_a_byte_level_bpe_on_any_section(project, corpus_bpes):
    for section in project.corpus.sections:
        text = f"{section.title}: {section.text}"
        est = estimate_tokens(text)
        assert est >= len(text.encode("utf-8")) / 4  # the weak bound asked for; the strong one follows
        for size, tok in corpus_bpes.items():
            assert est >= len(tok.encode(text).ids), (section.id, size)


def test_estimate_never_undercounts_on_adversarial_text(corpus_bpes):
    samples = [
        "4.2.1 4.2.2 4.3.1",
        "%x41-5A / %x61-7A ; A-Z / a-z",
        'HEXDIG = DIGIT / "A" / "B" / "C" / "D" / "E" / "F"',
        "   |  100  |  Continue  |  Section 15.2.1  |",
        "§ — é 日本 🙂 \u00a0\u2011",
        "\x00\x01\x02\x7f",
    ]
    for text in samples:
        for tok in corpus_bpes.values():
            assert estimate_tokens(text) >= len(tok.encode(text).ids), text


def test_half_the_bytes_is_not_a_bound(project, corpus_bpes):
    """Why the bound is bytes and not bytes/2: digits and dots are split before merging, so
    a section number is one token per byte under any vocabulary, and the corpus's
    reference-resolution table runs at about one token per two bytes even for a BPE
    trained on this corpus."""
    big = corpus_bpes[30_000]
    assert len(big.encode("4.2.1").ids) == 5 > len(b"4.2.1") // 2 + 1
    table = project.corpus.section("rfc3986#5.4.1").text
    assert len(big.encode(table).ids) / len(table.encode()) > 0.45


# --- pricing (pure: no ledger) ---------------------------------------------------------------


def test_price_embedding_is_bytes_times_the_input_price(prices):
    texts = ["a" * 1000, "é" * 500]  # 1000 bytes each
    assert price_embedding(prices, EMBEDDING_MODEL, texts) == pytest.approx(2000 * 0.02 / 1e6)


def test_price_completion_bounds_prompt_and_output(prices):
    prompt = "x" * 4000
    expected = (4000 + CHAT_FRAMING_TOKENS) * 0.40 / 1e6 + 1500 * 1.60 / 1e6
    assert price_completion(prices, "gpt-4.1-mini", prompt, 1500) == pytest.approx(expected)
    with pytest.raises(ValueError, match="max_completion_tokens"):
        price_completion(prices, "gpt-4.1-mini", prompt, 0)


def test_worst_case_rerecord_sums_one_completion_per_prompt(prices):
    prompts = ["a" * 100, "b" * 2000, ""]
    total = worst_case_rerecord(prices, "gpt-4.1", prompts, 700)
    assert total == pytest.approx(sum(price_completion(prices, "gpt-4.1", p, 700) for p in prompts))
    assert worst_case_rerecord(prices, "gpt-4.1", [], 700) == 0.0


def test_priced_rebuild_of_the_committed_corpus_fits_the_budget(project, prices, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # pure: no ledger is looked for or written anywhere
    texts = rebuild_texts(project)
    bound = priced_rebuild(prices, texts)
    assert bound == pytest.approx(sum(len(t.encode()) for t in texts) * 0.02 / 1e6)
    assert bound <= project.thresholds.budget.max_rebuild_usd <= project.thresholds.budget.daily_cap_usd
    assert list(tmp_path.iterdir()) == []


# --- the ledger ------------------------------------------------------------------------------


def test_ledger_lives_in_the_project_root_and_is_gitignored(root):
    assert ledger_path(root) == root / ".spend-ledger.json"
    import fnmatch

    patterns = [line.strip() for line in (root / ".gitignore").read_text().splitlines() if line.strip()]
    for name in (".spend-ledger.json", ".spend-ledger.json.1a2b.tmp"):  # the ledger and its atomic-write temp
        assert any(fnmatch.fnmatch(name, p) for p in patterns), name


def test_empty_ledger_has_spent_nothing_and_reading_writes_nothing(tmp_path, clock):
    ledger = ledger_at(tmp_path, clock)
    assert ledger.spent() == 0.0
    ledger.check(0.5, "a run")
    assert list(tmp_path.iterdir()) == []


def test_authorise_holds_the_bound_until_record_settles_it(tmp_path, clock):
    ledger = ledger_at(tmp_path, clock, cap=1.0)
    ledger.authorise(0.30, "call 1")
    assert ledger.spent() == pytest.approx(0.30)  # in flight: counted at its bound
    ledger.record(0.02, "call 1", {"prompt_tokens": 100})
    assert ledger.spent() == pytest.approx(0.02)  # settled: counted at what it cost
    ledger.authorise(0.50, "call 2")
    ledger.record(0.10, "call 2", {"prompt_tokens": 900})
    assert ledger.spent() == pytest.approx(0.12)
    spends = [e for e in ledger.entries() if e["kind"] == "spend"]
    assert [(e["usd"], e["bound_usd"], e["usage"]) for e in spends] == [
        (0.02, 0.30, {"prompt_tokens": 100}),
        (0.10, 0.50, {"prompt_tokens": 900}),
    ]


def test_authorise_refuses_past_the_cap_naming_the_numbers_and_writes_nothing(tmp_path, clock):
    ledger = ledger_at(tmp_path, clock, cap=2.0)
    ledger.authorise(1.5, "first")
    ledger.record(1.25, "first", {})
    before = (tmp_path / LEDGER_NAME).read_bytes()
    with pytest.raises(SpendRefused) as exc:
        ledger.authorise(0.80, "chat gpt-4.1-mini q07")
    message = str(exc.value)
    assert "chat gpt-4.1-mini q07" in message
    assert "$0.800000" in message  # the call's bound
    assert "$1.250000" in message  # today's spent
    assert "$2.00" in message and "daily_cap_usd" in message  # the cap
    assert "2026-11-29" in message
    assert (tmp_path / LEDGER_NAME).read_bytes() == before
    ledger.authorise(0.75, "exactly to the cap")  # spent + bound == cap is allowed


def test_check_refuses_like_authorise_but_never_holds(tmp_path, clock):
    ledger = ledger_at(tmp_path, clock, cap=1.0)
    ledger.check(1.0, "a whole run")
    assert ledger.spent() == 0.0 and not (tmp_path / LEDGER_NAME).exists()
    with pytest.raises(SpendRefused, match="a whole run"):
        ledger.check(1.01, "a whole run")


def test_day_rollover_resets_the_spend(tmp_path, clock):
    ledger = ledger_at(tmp_path, clock, cap=1.0)
    ledger.authorise(0.9, "late call")
    ledger.record(0.9, "late call", {})
    with pytest.raises(SpendRefused):
        ledger.authorise(0.2, "one more")
    clock.advance(59 * 60)  # 23:59 UTC: still the same day
    with pytest.raises(SpendRefused):
        ledger.authorise(0.2, "one more")
    clock.advance(60)  # 00:00 UTC: a new day
    assert ledger.today() == "2026-11-30"
    assert ledger.spent() == 0.0
    ledger.authorise(0.2, "one more")
    assert ledger.spent("2026-11-29") == pytest.approx(0.9)


def test_a_spend_counts_on_the_day_it_was_authorised(tmp_path, clock):
    clock.now = DAY1 + 59 * 60 + 30  # 23:59:30
    ledger = ledger_at(tmp_path, clock, cap=1.0)
    ledger.authorise(0.5, "straddling call")
    clock.advance(60)  # the response arrives after midnight
    ledger.record(0.4, "straddling call", {})
    assert ledger.spent("2026-11-29") == pytest.approx(0.4)
    assert ledger.spent() == 0.0


def test_unsettled_hold_of_another_session_still_counts(tmp_path, clock):
    crashed = ledger_at(tmp_path, clock, cap=1.0)
    crashed.authorise(0.6, "call")  # its process died before record()
    later = ledger_at(tmp_path, clock, cap=1.0)
    assert later.spent() == pytest.approx(0.6)
    later.record(0.01, "call", {})  # same `what`, other session: does not settle the crashed hold
    assert later.spent() == pytest.approx(0.61)
    with pytest.raises(SpendRefused):
        later.authorise(0.5, "next")


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -0.01, True, "0.1"])
def test_bounds_that_would_dodge_the_cap_are_rejected(tmp_path, clock, bad):
    ledger = ledger_at(tmp_path, clock)
    with pytest.raises(ValueError):
        ledger.authorise(bad, "call")
    assert not (tmp_path / LEDGER_NAME).exists()


@pytest.mark.parametrize(
    "content",
    ["{not json", '{"format": 1}', '{"format": 2, "entries": []}', '{"format": 1, "entries": [{"usd": "x"}]}'],
)
def test_unreadable_ledger_refuses_every_call(tmp_path, clock, content):
    (tmp_path / LEDGER_NAME).write_text(content)
    ledger = ledger_at(tmp_path, clock)
    with pytest.raises(SpendLedgerError, match=r"\.spend-ledger\.json"):
        ledger.authorise(0.01, "call")
    assert (tmp_path / LEDGER_NAME).read_text() == content


def test_ledger_file_is_json_replaced_atomically(tmp_path, clock):
    ledger = ledger_at(tmp_path, clock)
    for i in range(3):
        ledger.authorise(0.1, f"call {i}")
        ledger.record(0.05, f"call {i}", {"i": i})
    assert [p.name for p in tmp_path.iterdir()] == [LEDGER_NAME]  # no temporary file left behind
    raw = json.loads((tmp_path / LEDGER_NAME).read_text())
    assert raw["format"] == 1 and len(raw["entries"]) == 6
    assert {e["day"] for e in raw["entries"]} == {"2026-11-29"}


def test_concurrent_sessions_never_authorise_past_the_cap(tmp_path, clock):
    cap, bound, workers = 1.0, 0.125, 24
    outcomes: list[bool] = []
    lock = threading.Lock()
    start = threading.Barrier(workers)

    def run() -> None:
        ledger = ledger_at(tmp_path, clock, cap=cap)  # one session per worker, like one process each
        start.wait()
        try:
            ledger.authorise(bound, "call")
            ok = True
        except SpendRefused:
            ok = False
        with lock:
            outcomes.append(ok)

    threads = [threading.Thread(target=run) for _ in range(workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert outcomes.count(True) == 8
    assert math.isclose(ledger_at(tmp_path, clock).spent(), cap)
