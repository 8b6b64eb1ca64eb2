"""A rate as a reader sees it: a rate of nothing is not a number.

Contract: ``rate_text(value, of, spec)`` is ``value`` formatted by ``spec`` when ``of`` (its
denominator: the questions it is a rate over) is at least one, and ``"n/a"`` when there are none
(the state agreement of a document with no refusals is not 0.0). The reports keep their numbers;
the CLI and the README's tables print them through this.
"""

from __future__ import annotations

NOT_APPLICABLE = "n/a"


def rate_text(value: float, of: int, spec: str = "") -> str:
    return format(value, spec) if of else NOT_APPLICABLE
