"""Spend: a committed price table, a provable upper bound on every paid call, and a ledger.

Contract.  The two commands that can call a paid API (``build-index`` with the OpenAI
embedder, ``record-drafts --drafter live``) ask a ``SpendLedger`` BEFORE EVERY CALL with an
upper bound of that call's cost, priced from ``eval/prices.yaml``:

- ``SpendLedger.authorise(bound, what)`` raises ``SpendRefused`` - writing nothing - when
  today's spend (UTC day, from the injected clock) plus ``bound`` exceeds the daily cap.
  Otherwise it writes a *hold* of ``bound``: until settled, a hold counts as spent, so a
  second process sharing the ledger cannot authorise against money already in flight, and
  a call whose process dies before it is recorded still counts (at its bound).
- ``SpendLedger.record(actual_usd, what, usage)`` settles the hold with the cost the API
  reported.  A call that raised is never recorded: its hold stays, counted at the bound
  (we cannot know whether it was billed; the safe side is that it was).
- ``SpendLedger.check(bound, what)`` is ``authorise`` without the hold: "would this fit
  now?" for a whole run priced up front.

The ledger is a local JSON file (``.spend-ledger.json`` in the project root, gitignored,
never committed), rewritten atomically (temporary file + ``os.replace``) under an
exclusive ``flock`` of its directory, so concurrent runs neither tear it nor lose an
entry.  A ledger that exists but cannot be read refuses every call: unknown spend is not
zero spend.

The pricing functions (``price_embedding``, ``price_completion``, ``worst_case_rerecord``,
``priced_rebuild``) are pure: the CI gate compares them with ``budget.max_rebuild_usd``,
``budget.max_rerecord_usd`` and ``budget.daily_cap_usd`` and they never touch a ledger.
"""

from __future__ import annotations

import fcntl
import json
import math
import os
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from types import MappingProxyType
from typing import Any

from rag_contract.config.yamlfile import read_yaml
from rag_contract.project import Paths

EMBEDDING_MODEL = "text-embedding-3-small"
LEDGER_NAME = ".spend-ledger.json"
LEDGER_FORMAT = 1
PER_MILLION = 1_000_000

# Chat framing the text of the messages does not show: role and delimiter tokens (3-4
# per message), the reply priming (3), and the wrapper the server puts around a
# structured-output schema. The priced text already includes the schema itself and
# every JSON key and quote of the messages, so 100 tokens is a wide margin, not a guess
# at the edge.
CHAT_FRAMING_TOKENS = 100

Clock = Callable[[], float]  # seconds since the epoch (time.time); the day is its UTC date


class PricesError(ValueError):
    """The price table is malformed, or a model has no price for what was asked."""


class SpendRefused(RuntimeError):
    """A paid call (or run) that would break the daily cap; nothing was called or written."""


class SpendLedgerError(RuntimeError):
    """The ledger file exists but cannot be read: every paid call is refused."""


# --- prices ------------------------------------------------------------------------------


def prices_path(root: Path) -> Path:
    return Paths(Path(root)).prices


def ledger_path(root: Path) -> Path:
    return Path(root) / LEDGER_NAME


@dataclass(frozen=True)
class ModelPrice:
    model: str
    input_per_mtok: float
    output_per_mtok: float | None  # None: an embedding model, it cannot price a completion


@dataclass(frozen=True)
class Prices:
    """USD per 1M tokens per model. ``of(model)`` refuses a model the table does not list."""

    as_of: str
    models: Mapping[str, ModelPrice]

    def of(self, model: str) -> ModelPrice:
        try:
            return self.models[model]
        except KeyError:
            raise PricesError(
                f"prices.yaml: no price for model {model!r} (priced: {sorted(self.models)}); "
                f"an unpriced call cannot be capped"
            ) from None

    def input(self, model: str) -> float:
        return self.of(model).input_per_mtok

    def output(self, model: str) -> float:
        price = self.of(model).output_per_mtok
        if price is None:
            raise PricesError(f"prices.yaml: model {model!r} has no output price; it cannot price a completion")
        return price


def _price(path: str, value: Any) -> float:
    # bool is an int in Python; a YAML `true` is not a price. NaN would pass every cap test.
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise PricesError(f"prices.yaml: {path}: must be a finite number >= 0 (USD per 1M tokens), got {value!r}")
    return float(value)


def parse_prices(raw: Any) -> Prices:
    """Validate the parsed YAML: ``as_of`` (string) and ``models`` (name -> input[, output])."""
    if not isinstance(raw, dict):
        raise PricesError("prices.yaml: must be a mapping with keys as_of, models")
    unknown = set(raw) - {"as_of", "models"}
    if unknown:
        raise PricesError(f"prices.yaml: unknown key(s) {sorted(unknown)} (known: ['as_of', 'models'])")
    as_of = raw.get("as_of")
    if not isinstance(as_of, str) or not as_of:
        raise PricesError(f"prices.yaml: as_of: must be the date the prices were read, got {as_of!r}")
    models = raw.get("models")
    if not isinstance(models, dict) or not models:
        raise PricesError("prices.yaml: models: must be a non-empty mapping of model name to prices")
    out: dict[str, ModelPrice] = {}
    for name, entry in models.items():
        if not isinstance(entry, dict):
            raise PricesError(f"prices.yaml: models.{name}: must be a mapping with input[, output]")
        extra = set(entry) - {"input", "output"}
        if extra:
            raise PricesError(
                f"prices.yaml: models.{name}: unknown key(s) {sorted(extra)} (known: ['input', 'output'])"
            )
        if "input" not in entry:
            raise PricesError(f"prices.yaml: models.{name}.input: required key missing")
        output = entry.get("output")
        out[str(name)] = ModelPrice(
            model=str(name),
            input_per_mtok=_price(f"models.{name}.input", entry["input"]),
            output_per_mtok=None if output is None else _price(f"models.{name}.output", output),
        )
    return Prices(as_of=as_of, models=MappingProxyType(out))


def load_prices(path: Path) -> Prices:
    return parse_prices(read_yaml(path, PricesError, "file missing; every paid call is priced from it"))


# --- the estimate and the prices of calls --------------------------------------------------


def estimate_tokens(text: str) -> int:
    """An upper bound on the tokens any byte-level BPE (cl100k, o200k) makes of ``text``.

    The bound is the UTF-8 byte count, and it is a proof, not a measurement: byte-level
    BPE encodes a text as a partition of its bytes into tokens, and every token covers at
    least one byte, so no text has more tokens than bytes - for every vocabulary, every
    language, every ABNF line.

    Nothing smaller is a bound without the vocabulary (tiktoken is not a dependency). The
    pre-tokeniser of cl100k/o200k splits digits from dots and punctuation from digits, so
    a section number "4.2.1" is 5 tokens for 5 bytes, and ABNF such as ``%x41-5A`` or a
    table of status codes runs close to one token per byte; ``bytes / 2`` under-counts
    those: even a BPE trained on this corpus spends ~0.49 tokens per byte on the
    reference-resolution table of rfc3986#5.4.1 (tests/test_spend.py). Prose averages
    ~4.5 bytes per token, so on RFC text the bound over-states by ~4x. That price was
    measured, not assumed: a full rebuild prices at ~$0.017 against ``max_rebuild_usd``
    0.05, re-recording all 60 drafts with gpt-4.1-mini at ~$0.68 against
    ``max_rerecord_usd`` 1.50; and the ledger records what the API reports, so the
    margin is only ever held, never accumulated as spend.
    """
    # surrogatepass: a lone surrogate still has a byte length; never crash while pricing.
    return len(text.encode("utf-8", "surrogatepass"))


def usd(tokens: int, usd_per_mtok: float) -> float:
    return tokens * usd_per_mtok / PER_MILLION


def price_embedding(prices: Prices, model: str, texts: Sequence[str]) -> float:
    """Upper bound (USD) of embedding ``texts`` in one or more calls: input tokens only."""
    return usd(sum(estimate_tokens(t) for t in texts), prices.input(model))


def price_completion(prices: Prices, model: str, prompt_text: str, max_completion_tokens: int) -> float:
    """Upper bound (USD) of one chat completion.

    ``prompt_text`` must contain everything sent (messages and response format; see
    ``rag_contract.live.prompt_text``); ``CHAT_FRAMING_TOKENS`` covers the framing the text
    does not show. The output can never exceed ``max_completion_tokens`` (reasoning
    tokens included): the server stops there, and that is billed as such.
    """
    if max_completion_tokens < 1:
        raise ValueError(f"max_completion_tokens must be >= 1, got {max_completion_tokens}")
    prompt_tokens = estimate_tokens(prompt_text) + CHAT_FRAMING_TOKENS
    return usd(prompt_tokens, prices.input(model)) + usd(max_completion_tokens, prices.output(model))


def cost_of_completion(prices: Prices, model: str, prompt_tokens: int, completion_tokens: int) -> float:
    """What a completion cost, from the usage the API reported (cached input at full price)."""
    return usd(prompt_tokens, prices.input(model)) + usd(completion_tokens, prices.output(model))


def cost_of_embedding(prices: Prices, model: str, prompt_tokens: int) -> float:
    return usd(prompt_tokens, prices.input(model))


def worst_case_rerecord(prices: Prices, model: str, prompts: Sequence[str], max_completion_tokens: int) -> float:
    """Upper bound (USD) of re-recording every draft: one completion per priced prompt text."""
    return sum(price_completion(prices, model, p, max_completion_tokens) for p in prompts)


def priced_rebuild(prices: Prices, texts: Sequence[str], model: str = EMBEDDING_MODEL) -> float:
    """Upper bound (USD) of a full index rebuild: every chunk text and question, embedded once."""
    return price_embedding(prices, model, texts)


# --- the ledger --------------------------------------------------------------------------


def _check_amount(name: str, value: float) -> float:
    # NaN compares false with everything: unchecked, it would authorise any call.
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise ValueError(f"{name} must be a finite number of USD >= 0, got {value!r}")
    return float(value)


@dataclass(frozen=True)
class SpendLedger:
    """Today's paid calls, in a local JSON file, against ``daily_cap_usd``.

    ``session`` tells this object's holds from another process's: ``record`` settles the
    latest open hold of the same session and ``what``.
    """

    path: Path
    clock: Clock
    daily_cap_usd: float
    session: str = field(default_factory=lambda: uuid.uuid4().hex[:12])

    def __post_init__(self) -> None:
        object.__setattr__(self, "path", Path(self.path))
        _check_amount("daily_cap_usd", self.daily_cap_usd)

    # reading ---------------------------------------------------------------------------

    def today(self) -> str:
        return datetime.fromtimestamp(self.clock(), UTC).date().isoformat()

    def entries(self) -> tuple[dict, ...]:
        return tuple(self._read())

    def spent(self, day: str | None = None) -> float:
        """Spent on ``day`` (default today, UTC): recorded costs plus holds not yet settled."""
        return _spent(self._read(), day or self.today())

    # deciding --------------------------------------------------------------------------

    def check(self, cost_usd_upper_bound: float, what: str) -> None:
        """Raise ``SpendRefused`` if ``cost_usd_upper_bound`` does not fit today; write nothing."""
        bound = _check_amount("cost_usd_upper_bound", cost_usd_upper_bound)
        with self._locked():
            self._refuse_over_cap(self._read(), bound, what)

    def authorise(self, cost_usd_upper_bound: float, what: str) -> None:
        """Ask before a paid call: refuse (writing nothing) or hold ``cost_usd_upper_bound``."""
        bound = _check_amount("cost_usd_upper_bound", cost_usd_upper_bound)
        with self._locked():
            entries = self._read()
            day = self._refuse_over_cap(entries, bound, what)
            entries.append(
                {
                    "kind": "hold",
                    "id": uuid.uuid4().hex[:12],
                    "session": self.session,
                    "day": day,
                    "at": self._now_iso(),
                    "what": what,
                    "usd": bound,
                }
            )
            self._write(entries)

    def record(self, actual_usd: float, what: str, usage: Mapping[str, Any]) -> None:
        """After a call: the cost the API reported replaces this session's hold for ``what``.

        The spend counts on the day of the hold it settles (the day it was authorised
        against); without a hold, on today.
        """
        actual = _check_amount("actual_usd", actual_usd)
        with self._locked():
            entries = self._read()
            settled = {e.get("settles") for e in entries if e.get("kind") == "spend"}
            hold = next(
                (
                    e
                    for e in reversed(entries)
                    if e.get("kind") == "hold"
                    and e.get("session") == self.session
                    and e.get("what") == what
                    and e.get("id") not in settled
                ),
                None,
            )
            entries.append(
                {
                    "kind": "spend",
                    "settles": hold["id"] if hold else None,
                    "session": self.session,
                    "day": hold["day"] if hold else self.today(),
                    "at": self._now_iso(),
                    "what": what,
                    "usd": actual,
                    "bound_usd": hold["usd"] if hold else None,
                    "usage": dict(usage),
                }
            )
            self._write(entries)

    # internals ---------------------------------------------------------------------------

    def _refuse_over_cap(self, entries: list[dict], bound: float, what: str) -> str:
        day = self.today()
        spent = _spent(entries, day)
        if spent + bound > self.daily_cap_usd:
            raise SpendRefused(
                f"spend refused: {what} may cost up to ${bound:.6f}; spent or held today "
                f"({day} UTC) ${spent:.6f}; the daily cap (budget.daily_cap_usd) is "
                f"${self.daily_cap_usd:.2f} (ledger: {self.path.name})"
            )
        return day

    def _now_iso(self) -> str:
        return datetime.fromtimestamp(self.clock(), UTC).isoformat(timespec="seconds")

    @contextmanager
    def _locked(self) -> Iterator[None]:
        # Lock the directory, not the file: the file is replaced on every write, so a lock
        # on it would not exclude a process that opened the new one; the directory is
        # stable and the lock adds no file to the project root.
        fd = os.open(self.path.parent, os.O_RDONLY)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # releases the lock

    def _read(self) -> list[dict]:
        try:
            raw = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return []
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise SpendLedgerError(
                f"{self.path.name}: unreadable spend ledger ({exc}); refusing every paid call"
            ) from None
        if (
            not isinstance(raw, dict)
            or raw.get("format") != LEDGER_FORMAT
            or not isinstance(raw.get("entries"), list)
            or not all(isinstance(e, dict) and _is_amount(e.get("usd")) for e in raw["entries"])
        ):
            raise SpendLedgerError(
                f"{self.path.name}: not a format-{LEDGER_FORMAT} spend ledger; refusing every paid call"
            )
        return raw["entries"]

    def _write(self, entries: list[dict]) -> None:
        text = json.dumps({"format": LEDGER_FORMAT, "entries": entries}, indent=1) + "\n"
        fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=f"{self.path.name}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(text)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self.path)  # readers see the old ledger or the new one, never half
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise


def _is_amount(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v >= 0


def _spent(entries: Sequence[dict], day: str) -> float:
    settled = {e.get("settles") for e in entries if e.get("kind") == "spend"}
    total = 0.0
    for e in entries:
        if e.get("day") != day:
            continue
        if e.get("kind") == "spend" or (e.get("kind") == "hold" and e.get("id") not in settled):
            total += e["usd"]
    return total


def open_ledger(root: Path, daily_cap_usd: float, clock: Clock = time.time) -> SpendLedger:
    """The project's ledger: ``.spend-ledger.json`` in ``root``."""
    return SpendLedger(ledger_path(root), clock, daily_cap_usd)
