"""Answer accuracy, measured from the annotated evidence: does an answer say the answer?

Every answerable question carries ``evidence``: a short exact substring of an expected section
that states the answer (the header name, the number, the rule). An answer is *accurate* when one
of its kept claims carries that evidence:

- ``contains``: the claim's words, case-folded and with markup and punctuation dropped, hold the
  evidence's words as one contiguous run (a quoting drafter carries it this way); or
- ``share``: at least ``SHARE`` of the evidence's distinct content words (``text.words``,
  normalised as the grounding check normalises them) occur in the claim. This admits a claim that
  breaks the evidence at a sentence boundary or paraphrases it (the live drafter), and refuses
  one that only shares the topic: evidence is four to ten words, so three in five of them is
  the answer's own words, not the question's.

Citing an expected section is not enough: a claim about the right section can say something else
(asked which header a 405 must carry, a sentence of the 405 section that never names ``Allow``).

Over a set of answers, with *answered* meaning shown with claims (``grounded`` or ``partial``):

- ``coverage``: answered answerable questions / answerable questions;
- ``accuracy_when_answered``: answered answerable questions with an accurate answer / answered
  answerable questions (None when none was answered);
- ``accurate_rate``: accurate answers / answerable questions;
- ``false_answer_rate``: answered unanswerable questions / unanswerable questions: a partial
  answer shows claims, and to a reader that is an answer.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from rag_contract.config.thresholds import MISS_LEVELS_HELD
from rag_contract.text.words import content_words

SHARE = 0.6
ANSWERED = frozenset({"grounded", "partial"})
DIGITS = 4

_WORD = re.compile(r"[0-9a-z]+")


def _words(text: str) -> list[str]:
    return _WORD.findall(text.casefold())


def contains(claim: str, evidence: str) -> bool:
    """The evidence's words, in order and adjacent, among the claim's."""
    needle = _words(evidence)
    if not needle:
        return False
    hay = _words(claim)
    n = len(needle)
    return any(hay[i : i + n] == needle for i in range(len(hay) - n + 1))


def share(claim: str, evidence: str) -> float:
    """The share of the evidence's distinct content words the claim says (0 when it has none)."""
    wanted = set(content_words(evidence))
    if not wanted:
        return 0.0
    return len(wanted & set(content_words(claim))) / len(wanted)


def carries(claim: str, evidence: str) -> bool:
    return contains(claim, evidence) or share(claim, evidence) >= SHARE


def accurate(claims: Iterable[str], evidence: str | None) -> bool:
    """Some claim carries the evidence; a question without evidence has no accurate answer."""
    return evidence is not None and any(carries(c, evidence) for c in claims)


@dataclass(frozen=True)
class Outcome:
    """One question's answer as the accuracy figures count it."""

    answerable: bool
    state: str
    accurate: bool  # some kept claim carries the evidence (False for an unanswerable question)

    @property
    def answered(self) -> bool:
        return self.state in ANSWERED


def _rate(n: int, d: int) -> float | None:
    return round(n / d, DIGITS) if d else None


def figures(outcomes: Sequence[Outcome]) -> dict:
    """coverage, accuracy when answered, accurate rate and false-answer rate, with their counts;
    a rate with no denominator is None (n/a), never 0."""
    ans = [o for o in outcomes if o.answerable]
    ref = [o for o in outcomes if not o.answerable]
    answered = [o for o in ans if o.answered]
    right = sum(o.accurate for o in answered)
    false = sum(o.answered for o in ref)
    return {
        "coverage": _rate(len(answered), len(ans)),
        "accuracy_when_answered": _rate(right, len(answered)),
        "accurate_rate": _rate(right, len(ans)),
        "false_answer_rate": _rate(false, len(ref)),
        "answered": len(answered),
        "accurate": right,
        "false_answers": false,
    }


def outcomes(rows: Iterable[Mapping]) -> list[Outcome]:
    """Report rows (``answerable``, ``state``, ``accurate`` when answerable) as outcomes."""
    return [Outcome(r["answerable"], r["state"], bool(r.get("accurate"))) for r in rows]


def _shown(rate: float | None) -> str:
    return "n/a" if rate is None else f"{rate:.2f}"


def line(f: Mapping) -> str:
    """The figures in one line, as the commands print them."""
    return (
        f"coverage {_shown(f['coverage'])} | accuracy when answered {_shown(f['accuracy_when_answered'])} "
        f"({f['accurate']} of {f['answered']}) | false answers {_shown(f['false_answer_rate'])} ({f['false_answers']})"
    )


# How far an answerable question's answer falls short, best first: it says the answer; it says
# nothing (a refusal: safe); it shows claims from an expected section without the evidence; it
# shows claims citing no expected section (an answer from the wrong place). The gate holds each
# answerable question at its level (``answers.known_misses``): a fall to a worse one fails.
MISS_LEVELS = ("accurate", *MISS_LEVELS_HELD)


def miss_level(state: str, cites_expected: bool, is_accurate: bool) -> str:
    if state not in ANSWERED:
        return "unanswered"
    if not cites_expected:
        return "uncited"
    return "accurate" if is_accurate else "inaccurate"
