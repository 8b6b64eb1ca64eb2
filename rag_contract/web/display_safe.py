"""Client text is never shown with bidirectional controls in it (plain functions).

Unicode's bidirectional controls (``Bidi_Control``: the embeddings and overrides U+202A..U+202E,
the isolates U+2066..U+2069, and the marks U+200E, U+200F, U+061C) reorder the text displayed
around them: a question holding U+202E (RIGHT-TO-LEFT OVERRIDE) shows its words reversed, and
what is echoed into an answer's JSON or a page then reads differently from what was asked (the
"Trojan Source" display spoof, CVE-2021-42574). A question holding one is refused, naming the
code point (``bidi_refusal``: 422 ``question_bidi_control``); anything else of a client's the
service echoes (an unknown id, the refilled question box) is shown ``without_bidi``.

The corpus is English text: no question about it needs a control, and none is silently
removed from one (that would answer a question other than the one sent).
"""

from __future__ import annotations

from rag_contract.answering.free_text import AskRejected

BIDI_CONTROLS = frozenset("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
_DROP = dict.fromkeys(map(ord, BIDI_CONTROLS))


def without_bidi(text: str) -> str:
    """``text`` with every bidirectional control removed."""
    return text.translate(_DROP)


def bidi_refusal(question: str) -> AskRejected | None:
    """The 422 for a question holding a bidirectional control (the first one named), or None."""
    found = next((ch for ch in question if ch in BIDI_CONTROLS), None)
    if found is None:
        return None
    detail = f'"question" holds the bidirectional control U+{ord(found):04X}, which reorders the text shown'
    return AskRejected(422, "question_bidi_control", detail)
