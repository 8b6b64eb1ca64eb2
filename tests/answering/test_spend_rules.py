"""The spend rules at their edges: each bound just inside and just outside, every amount named
when refused, the ledger's entries field by field, and where its temporary file lives."""

from __future__ import annotations

import json
import locale
import os
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from rag_contract.spend import (
    CHAT_FRAMING_TOKENS,
    LEDGER_FORMAT,
    LEDGER_NAME,
    PricesError,
    SpendLedger,
    cost_of_completion,
    cost_of_embedding,
    load_prices,
    open_ledger,
    parse_prices,
    price_completion,
)
from tests.support.clocks import FakeClock

DAY1 = datetime(2026, 11, 29, 23, 0, tzinfo=UTC).timestamp()  # one hour before UTC midnight
TABLE = {"as_of": "2026-11-01", "models": {"chat": {"input": 2.0, "output": 8.0}, "emb": {"input": 0}}}


@pytest.fixture
def prices():
    return parse_prices(TABLE)


def ledger_at(tmp_path: Path, cap: float = 1.0, now: float = DAY1) -> SpendLedger:
    return SpendLedger(tmp_path / LEDGER_NAME, FakeClock(now), cap)


# --- prices -------------------------------------------------------------------------------------


def test_a_parsed_table_keeps_its_date_and_each_model_its_own_name(prices):
    assert prices.as_of == "2026-11-01"
    assert (prices.of("chat").model, prices.of("emb").model) == ("chat", "emb")
    assert parse_prices({"as_of": "x", "models": {7: {"input": 1}}}).of("7").model == "7"


def test_a_price_of_zero_is_a_price(prices):
    assert prices.input("emb") == 0.0
    assert parse_prices({"as_of": "x", "models": {"m": {"input": 0, "output": 0.0}}}).output("m") == 0.0


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ("prices", "prices.yaml: must be a mapping with keys as_of, models"),
        (
            {"as_of": "", "models": {"m": {"input": 1}}},
            "prices.yaml: as_of: must be the date the prices were read, got ''",
        ),
        ({"as_of": 2026, "models": {"m": {"input": 1}}}, "prices.yaml: as_of: must be the date .* got 2026"),
        ({"as_of": "x", "models": []}, "prices.yaml: models: must be a non-empty mapping of model name to prices"),
        ({"as_of": "x", "models": {"m": 1.0}}, r"prices.yaml: models.m: must be a mapping with input\[, output\]"),
        ({"as_of": "x", "models": {"m": {"input": 1, "output": -1}}}, r"prices.yaml: models.m.output: must be"),
    ],
)
def test_a_malformed_table_is_refused_with_the_whole_reason(raw, message):
    with pytest.raises(PricesError, match=f"^{message}"):
        parse_prices(raw)


def test_a_missing_table_says_every_paid_call_needs_it(tmp_path):
    with pytest.raises(PricesError, match="file missing; every paid call is priced from it"):
        load_prices(tmp_path / "prices.yaml")


# --- the prices of calls ------------------------------------------------------------------------


def test_what_a_call_cost_is_tokens_times_each_price(prices):
    assert cost_of_completion(prices, "chat", 1_000_000, 500_000) == 2.0 + 4.0
    assert cost_of_completion(prices, "chat", 250_000, 0) == 0.5
    assert cost_of_embedding(prices, "chat", 3_000_000) == 6.0
    with pytest.raises(PricesError, match="no output price"):
        cost_of_completion(prices, "emb", 1, 1)


@pytest.mark.parametrize(("tokens", "refused"), [(0, True), (1, False), (2, False)])
def test_a_completion_may_be_one_token_long(prices, tokens, refused):
    if refused:
        with pytest.raises(ValueError, match=f"max_completion_tokens must be >= 1, got {tokens}"):
            price_completion(prices, "chat", "", tokens)
    else:
        assert price_completion(prices, "chat", "", tokens) == pytest.approx(
            (CHAT_FRAMING_TOKENS * 2.0 + tokens * 8.0) / 1e6
        )


# --- amounts the ledger accepts -----------------------------------------------------------------


def test_each_amount_is_refused_by_its_own_name(tmp_path):
    with pytest.raises(ValueError, match=r"^daily_cap_usd must be a finite number of USD >= 0, got -1$"):
        ledger_at(tmp_path, cap=-1)
    ledger = ledger_at(tmp_path)
    for call, name in ((ledger.check, "cost_usd_upper_bound"), (ledger.authorise, "cost_usd_upper_bound")):
        with pytest.raises(ValueError, match=rf"^{name} must be a finite number of USD >= 0, got -0.5$"):
            call(-0.5, "a call")
    with pytest.raises(ValueError, match=r"^actual_usd must be a finite number of USD >= 0, got -0.5$"):
        ledger.record(-0.5, "a call", {})


def test_zero_is_an_amount_everywhere(tmp_path):
    ledger = ledger_at(tmp_path, cap=0)
    ledger.check(0.0, "free")
    ledger.authorise(0, "free")
    ledger.record(0.0, "free", {})
    assert ledger.spent() == 0.0  # and a ledger holding zero amounts reads back
    assert [e["usd"] for e in ledger.entries()] == [0.0, 0.0]


def test_a_path_given_as_text_is_a_path(tmp_path):
    ledger = SpendLedger(str(tmp_path / LEDGER_NAME), FakeClock(DAY1), 1.0)  # type: ignore[arg-type]
    assert isinstance(ledger.path, Path)
    ledger.authorise(0.1, "a call")
    assert (tmp_path / LEDGER_NAME).is_file()


def test_open_ledger_is_the_project_ledger(tmp_path):
    clock = FakeClock(DAY1)
    ledger = open_ledger(tmp_path, 3.0, clock)
    assert (ledger.path, ledger.clock, ledger.daily_cap_usd) == (tmp_path / LEDGER_NAME, clock, 3.0)


# --- the entries --------------------------------------------------------------------------------


def test_a_hold_and_its_spend_field_by_field(tmp_path):
    ledger = ledger_at(tmp_path)
    ledger.authorise(0.25, "call")
    ledger.record(0.125, "call", {"prompt_tokens": 7})
    hold, spend = ledger.entries()
    assert len(hold["id"]) == 12 and int(hold["id"], 16) >= 0
    assert hold == {
        "kind": "hold",
        "id": hold["id"],
        "session": ledger.session,
        "day": "2026-11-29",
        "at": "2026-11-29T23:00:00+00:00",
        "what": "call",
        "usd": 0.25,
    }
    assert spend == {
        "kind": "spend",
        "settles": hold["id"],
        "session": ledger.session,
        "day": "2026-11-29",
        "at": "2026-11-29T23:00:00+00:00",
        "what": "call",
        "usd": 0.125,
        "bound_usd": 0.25,
        "usage": {"prompt_tokens": 7},
    }


def test_two_holds_for_the_same_call_are_settled_one_each(tmp_path):
    ledger = ledger_at(tmp_path)
    ledger.authorise(0.25, "call")
    ledger.authorise(0.25, "call")
    ledger.record(0.125, "call", {})
    ledger.record(0.125, "call", {})
    holds = [e["id"] for e in ledger.entries() if e["kind"] == "hold"]
    settles = [e["settles"] for e in ledger.entries() if e["kind"] == "spend"]
    assert settles == holds[::-1], "the latest open hold first, then the one before"
    assert ledger.spent() == 0.25


def test_spend_of_earlier_days_does_not_stop_today_being_counted(tmp_path):
    clock = FakeClock(DAY1)
    ledger = SpendLedger(tmp_path / LEDGER_NAME, clock, 1.0)
    ledger.authorise(0.5, "yesterday")
    clock.advance(3600)  # past UTC midnight
    ledger.authorise(0.25, "today")
    assert ledger.spent() == 0.25
    assert ledger.spent("2026-11-29") == 0.5


def test_the_day_is_the_utc_day_whatever_the_local_zone(tmp_path, monkeypatch):
    monkeypatch.setenv("TZ", "Pacific/Kiritimati")  # UTC+14: already the next day locally
    time.tzset()
    try:
        ledger = ledger_at(tmp_path)
        assert ledger.today() == "2026-11-29"
        ledger.authorise(0.1, "call")
        assert ledger.entries()[0]["at"] == "2026-11-29T23:00:00+00:00"
    finally:
        monkeypatch.undo()
        time.tzset()


# --- the file -----------------------------------------------------------------------------------


def test_the_file_is_indented_json_written_beside_the_ledger(tmp_path, monkeypatch):
    moves: list[tuple[str, str]] = []
    real_replace = os.replace

    def replace(src, dst):
        moves.append((str(src), str(dst)))
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", replace)
    ledger = ledger_at(tmp_path)
    ledger.authorise(0.1, "call \u00e9")
    ((src, dst),) = moves
    assert Path(src).parent == tmp_path and Path(src).name.startswith(LEDGER_NAME + ".") and src.endswith(".tmp")
    assert dst == str(tmp_path / LEDGER_NAME)
    text = (tmp_path / LEDGER_NAME).read_bytes().decode("utf-8")
    assert text == json.dumps({"format": LEDGER_FORMAT, "entries": list(ledger.entries())}, indent=1) + "\n"


def test_a_failed_write_leaves_no_temporary_file_and_raises_its_own_error(tmp_path, monkeypatch):
    def replace(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", replace)
    with pytest.raises(OSError, match="disk full"):
        ledger_at(tmp_path).authorise(0.1, "call")
    assert list(tmp_path.iterdir()) == []


def test_the_ledger_is_utf8_whatever_the_locale(tmp_path):
    """A "what" outside ASCII is written and read back under an ASCII locale too."""
    ledger = ledger_at(tmp_path)
    before = locale.setlocale(locale.LC_CTYPE)
    locale.setlocale(locale.LC_CTYPE, "C")
    try:
        assert locale.getencoding() != "UTF-8"
        ledger.authorise(0.1, "r\u00e9sum\u00e9 \u2014 call")
        assert ledger.entries()[0]["what"] == "r\u00e9sum\u00e9 \u2014 call"
    finally:
        locale.setlocale(locale.LC_CTYPE, before)


def test_a_ledger_holding_utf8_text_is_read_whatever_the_locale(tmp_path):
    """The writer escapes every character outside ASCII, but a ledger edited by hand (or by a
    writer that does not) may hold UTF-8 text: it is read as UTF-8 under an ASCII locale too."""
    ledger = ledger_at(tmp_path)
    entry = {"kind": "spend", "day": "2026-11-29", "what": "r\u00e9sum\u00e9", "usd": 0.25}
    ledger.path.write_bytes(json.dumps({"format": LEDGER_FORMAT, "entries": [entry]}, ensure_ascii=False).encode())
    before = locale.setlocale(locale.LC_CTYPE)
    locale.setlocale(locale.LC_CTYPE, "C")
    try:
        assert locale.getencoding() != "UTF-8"
        assert ledger.entries()[0]["what"] == "r\u00e9sum\u00e9"
        assert ledger.spent() == 0.25
    finally:
        locale.setlocale(locale.LC_CTYPE, before)
