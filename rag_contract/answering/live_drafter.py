"""The live drafter: a chat model through the ``openai`` client, capped by the spend ledger.

Run by hand only (``record-drafts --drafter live``); the gate replays what it recorded.

Contract of ``LiveDrafter.draft``:

1. The prompt (``prompt_for``) offers the question and the retrieved passages; the model
   is told to answer only from them, as JSON claims each citing exactly one offered
   ``section_id``, and to return no claims when the passages do not answer.
2. BEFORE the call, ``ledger.authorise`` is asked with ``price_completion`` of the exact
   text sent (``prompt_text``) and ``max_completion_tokens``; a refusal raises
   ``SpendRefused`` and nothing is sent.
3. AFTER the call, the cost of the reported ``usage`` is recorded - also for a response
   then refused, because it was billed.
4. A response is refused (``DraftError`` naming why) unless ``finish_reason`` is "stop"
   ("length" is a truncated answer) and its content parses as the claims schema. A claim
   citing a section that was not offered is NOT refused here: grounding's citation rule
   withdraws it visibly, claim by claim.

``max_completion_tokens`` is not part of ``drafting.prompt_fingerprint``: it bounds what
the model may say, it cannot change what was asked.

``record_run`` drafts every item before writing any: a run refused midway (cap, truncated
answer) writes nothing, so fixtures never mix two runs.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from rag_contract.answering.drafting import Drafter, DraftError, PassageText, prompt_fingerprint
from rag_contract.answering.evidence import Query
from rag_contract.answering.grounding import Claim
from rag_contract.answering.service import offered
from rag_contract.openai_client import check_no_retries, make_client
from rag_contract.spend import (
    Clock,
    Prices,
    SpendLedger,
    cost_of_completion,
    load_prices,
    open_ledger,
    price_completion,
    prices_path,
)

if TYPE_CHECKING:  # the client is only needed by hand; importing this module loads no HTTP stack
    import openai

# {subject}: the project's name for its corpus (project.yaml), e.g. "IETF RFCs".
SYSTEM_PROMPT = """\
You answer questions about {subject} using only the passages in the user message.
Reply with a JSON object {"claims": [...]}, each claim {"text": ..., "section_id": ...}:
- text: one sentence stating one fact that the cited passage itself states. Keep numbers,
  status codes, header, field and directive names exactly as the passage writes them.
- section_id: exactly one section id, copied from the passage the sentence comes from.
  Cite only the section_id values of the passages given.
Use no outside knowledge. If the passages do not answer the question, return {"claims": []}.\
"""

CLAIMS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["claims"],
    "properties": {
        "claims": {
            "type": "array",
            "items": {
                "type": "object",
                "additionalProperties": False,
                "required": ["text", "section_id"],
                "properties": {
                    "text": {"type": "string"},
                    "section_id": {"type": "string"},
                },
            },
        }
    },
}

RESPONSE_FORMAT: dict[str, Any] = {
    "type": "json_schema",
    "json_schema": {"name": "claims", "strict": True, "schema": CLAIMS_SCHEMA},
}


DEFAULT_SUBJECT = "the documents"


def prompt_for(question: str, passages: Sequence[PassageText], subject: str = DEFAULT_SUBJECT) -> list[dict]:
    """The chat messages sent for ``question`` and the passages offered, in rank order, about
    ``subject`` (what the corpus is)."""
    blocks = [f'<passage section_id="{p.section_id}" title="{p.title}">\n{p.text}\n</passage>' for p in passages]
    user = f"Question: {question}\n\nPassages:\n\n" + "\n\n".join(blocks)
    system = SYSTEM_PROMPT.replace("{subject}", subject)
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


def prompt_text(messages: Sequence[dict]) -> str:
    """Everything a completion request sends that the model reads: what is priced.

    The messages and the response format (a structured-output schema is prompt tokens
    too), as JSON - its quotes and keys only add bytes, so pricing it never under-counts.
    """
    return json.dumps({"messages": list(messages), "response_format": RESPONSE_FORMAT}, ensure_ascii=False)


def parse_claims(content: str | None) -> tuple[Claim, ...]:
    """Claims from a response's content, or ``DraftError`` naming what does not match the schema."""
    if content is None:
        raise DraftError("live: response has no content")
    try:
        raw = json.loads(content)
    except json.JSONDecodeError as exc:
        raise DraftError(f"live: response content is not valid JSON ({exc})") from None
    if not isinstance(raw, dict) or set(raw) != {"claims"} or not isinstance(raw["claims"], list):
        raise DraftError('live: response content does not match the claims schema (want {"claims": [...]})')
    claims = []
    for i, item in enumerate(raw["claims"]):
        if (
            not isinstance(item, dict)
            or set(item) != {"text", "section_id"}
            or not isinstance(item["text"], str)
            or not isinstance(item["section_id"], str)
        ):
            raise DraftError(
                f'live: claims[{i}] does not match the claims schema (want {{"text": str, "section_id": str}})'
            )
        claims.append(Claim(item["text"], item["section_id"]))
    return tuple(claims)


@dataclass(frozen=True)
class RunItem:
    """One question of a recording run, with the passages retrieval offered for it."""

    question_id: str
    question: str
    passages: tuple[PassageText, ...]


@dataclass(frozen=True, eq=False)
class LiveDrafter:
    client: openai.OpenAI
    model: str
    max_completion_tokens: int
    ledger: SpendLedger
    prices: Prices
    name: str = "live"
    subject: str = DEFAULT_SUBJECT  # what the corpus is, for the prompt

    def __post_init__(self) -> None:
        # Refuse an unpriced model (or one with no output price) before anything is sent.
        self.prices.input(self.model)
        self.prices.output(self.model)
        if self.max_completion_tokens < 1:
            raise ValueError(f"drafting.max_completion_tokens must be >= 1, got {self.max_completion_tokens}")
        check_no_retries(self.client)

    def bound(self, question: str, passages: Sequence[PassageText]) -> float:
        """Upper bound (USD) of drafting this question: what ``draft`` authorises."""
        return self._price(prompt_for(question, passages, self.subject))

    def _price(self, messages: Sequence[dict]) -> float:
        return price_completion(self.prices, self.model, prompt_text(messages), self.max_completion_tokens)

    def price_run(self, items: Sequence[RunItem]) -> float:
        return sum(self.bound(i.question, i.passages) for i in items)

    def authorise_run(self, items: Sequence[RunItem]) -> None:
        """Refuse, before any call and writing nothing, a run whose summed bounds do not fit today."""
        self.ledger.check(self.price_run(items), f"record-drafts ({len(items)} questions, {self.model})")

    def draft(
        self, question_id: str | None, question: str, passages: Sequence[PassageText], query: Query | None = None
    ) -> tuple[Claim, ...]:
        messages = prompt_for(question, passages, self.subject)
        bound = self._price(messages)  # priced from exactly what is sent
        what = f"chat {self.model} {question_id or prompt_fingerprint(question, passages)}"
        self.ledger.authorise(bound, what)  # raises SpendRefused: nothing is sent
        response = self.client.chat.completions.create(
            model=self.model,
            messages=messages,
            max_completion_tokens=self.max_completion_tokens,
            response_format=RESPONSE_FORMAT,
        )
        self._record(response, bound, what)  # billed whether or not we accept it
        if not response.choices:
            raise DraftError(f"live: {what}: response has no choices")
        choice = response.choices[0]
        if choice.finish_reason != "stop":
            why = "truncated at max_completion_tokens" if choice.finish_reason == "length" else "not a complete answer"
            raise DraftError(f"live: {what}: finish_reason {choice.finish_reason!r} ({why}); refused")
        if getattr(choice.message, "refusal", None):
            raise DraftError(f"live: {what}: the model refused: {choice.message.refusal}")
        try:
            return parse_claims(choice.message.content)
        except DraftError as exc:
            raise DraftError(f"{exc} ({what}); refused") from None

    def _record(self, response: Any, bound: float, what: str) -> None:
        usage = getattr(response, "usage", None)
        if usage is None:
            # No reported usage: record the bound, the most it can have cost.
            self.ledger.record(bound, what, {"model": self.model, "reported": False})
            return
        actual = cost_of_completion(self.prices, self.model, usage.prompt_tokens, usage.completion_tokens)
        self.ledger.record(
            actual,
            what,
            {
                "model": self.model,
                "prompt_tokens": usage.prompt_tokens,
                "completion_tokens": usage.completion_tokens,
            },
        )


def record_run(
    drafter: Drafter,
    items: Sequence[RunItem],
    write: Callable[[RunItem, tuple[Claim, ...]], None],
) -> tuple[tuple[RunItem, tuple[Claim, ...]], ...]:
    """Draft every item, then ``write`` each; if any draft raises, nothing is written.

    The exception (``SpendRefused``, ``DraftError``, a client error) propagates unchanged.
    """
    drafted = tuple((item, drafter.draft(item.question_id, item.question, item.passages)) for item in items)
    for item, claims in drafted:
        write(item, claims)
    return drafted


def run_items(project: Any, index: Any, query_vector: Any = None) -> tuple[RunItem, ...]:
    """The project's questions with the passages serving retrieval offers each, exactly as
    ``recording.draft_all`` will offer them: what a re-recording run sends."""
    return tuple(
        RunItem(q.id, q.question, tuple(offered(index, project.thresholds, q.question, query_vector)))
        for q in project.questions.questions
    )


def rerecord_prompts(project: Any, index: Any, query_vector: Any = None) -> list[str]:
    """The priced text of every completion a re-recording run sends (for ``worst_case_rerecord``)."""
    subject = project.about.name
    return [prompt_text(prompt_for(i.question, i.passages, subject)) for i in run_items(project, index, query_vector)]


def live_drafter_for(project: Any, index: Any, client: Any = None, clock: Clock = time.time) -> LiveDrafter:
    """The live drafter of ``record-drafts``: committed model and limit, the project's price
    table, its ledger (``.spend-ledger.json`` in the root) capped at ``budget.daily_cap_usd``.

    Before returning, the whole run over ``index`` is priced and checked against today's
    cap (``authorise_run``): a run that cannot fit is refused with nothing sent and nothing
    written, instead of midway. Each call is still authorised on its own.
    """
    root = project.paths.root
    d = project.thresholds.drafting
    drafter = LiveDrafter(
        client=client if client is not None else make_client(None, None),
        model=d.live_model,
        max_completion_tokens=d.max_completion_tokens,
        ledger=open_ledger(root, project.thresholds.budget.daily_cap_usd, clock),
        prices=load_prices(prices_path(root)),
        subject=project.about.name,
    )
    drafter.authorise_run(run_items(project, index))
    return drafter
