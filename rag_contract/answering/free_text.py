"""Free-text questions (``POST /ask``): what is refused before any drafter is reached.

Contract: ``read_question(body, max_chars)`` takes the raw request body and returns the
question text (whitespace-trimmed) or raises ``AskRejected(status, reason, detail)``. The
rules, in the order they are applied (the first failure is the one reported):

==========================  ======  =====================================================
reason                      status  rule
==========================  ======  =====================================================
``content_type_not_json``   415     media type is not ``application/json`` (``require_json``)
``body_too_large``          413     body longer than ``max_body_bytes(max_chars)``, declared
                                    (``Content-Length``) or received (``body_too_large``)
``body_not_json``           400     body is not UTF-8 JSON
``body_not_object``         400     the JSON value is not an object
``question_missing``        422     no ``question`` key
``question_not_string``     422     ``question`` is not a string
``question_not_text``       422     it holds control characters or lone surrogates
``question_empty``          422     nothing visible: whitespace, format characters
                                    (zero-width, BOM), combining marks or blank fillers
``question_too_long``       413     more than ``max_chars`` characters (after trimming)
``prompt_injection``        422     the injection screen (``injection_screen.screen``) matches
==========================  ======  =====================================================

``validate_question(raw, max_chars)`` is the same, starting from the parsed JSON value.
The first two rules are the web layer's, applied before the body is read: a request whose
content type is not JSON is refused without reading it (a cross-origin page can send
``text/plain`` without a preflight; it cannot send ``application/json``), and the body is
read with a ceiling, so an oversized one is never held in memory.

The injection screen is a tripwire, not a defence: the extractive drafter cannot be
instructed (it copies sentences from the corpus), and grounding withdraws any claim its
cited passage does not support, whichever drafter wrote it. What the screen buys is that
text written to steer a model never reaches one, and that the refusal names the pattern.
It normalises before matching (look-alike letters, digits for letters, separators and
invisible characters inside words, base64) and is held to ``eval/injection.yaml``: hostile
phrasings it must catch and HTTP questions using the same words that it must pass.
"""

from __future__ import annotations

import json
import unicodedata
from typing import Any

from rag_contract.answering.injection_screen import screen


class AskRejected(Exception):
    """Input refused before any drafter runs: an HTTP status and a machine-readable reason."""

    def __init__(self, status: int, reason: str, detail: str):
        super().__init__(f"{reason}: {detail}")
        self.status = status
        self.reason = reason
        self.detail = detail

    def as_dict(self) -> dict:
        return {"error": "question_rejected", "reason": self.reason, "detail": self.detail}


def max_body_bytes(max_chars: int) -> int:
    # A JSON string may spend up to 12 bytes per character ("\\ud83d\\ude00" for one emoji);
    # the rest is room for the braces, the key and whitespace.
    return 12 * max_chars + 1024


def require_json(content_type: str | None) -> None:
    """Refuse (415) unless the media type is ``application/json`` (parameters such as charset
    are allowed; JSON is UTF-8 whatever they say, and a body that is not is refused later)."""
    media = (content_type or "").split(";", 1)[0].strip().lower()
    if media != "application/json":
        shown = media[:40] or "none"
        raise AskRejected(415, "content_type_not_json", f"the content type must be application/json, got {shown}")


def body_too_large(size: int, max_chars: int, how: str = "has") -> AskRejected:
    """The 413 for a body that ``how`` ("has", "declares", "has at least") ``size`` bytes."""
    return AskRejected(413, "body_too_large", f"the body {how} {size} bytes; the limit is {max_body_bytes(max_chars)}")


# Blank characters that are letters or symbols by category (Hangul fillers, the braille blank).
_BLANK = frozenset("\u115f\u1160\u3164\uffa0\u2800")


def _visible(ch: str) -> bool:
    if ch.isspace() or ch in _BLANK:
        return False
    return unicodedata.category(ch) not in ("Cf", "Mn", "Me", "Zs", "Zl", "Zp", "Cc")


def _is_text(s: str) -> bool:
    for ch in s:
        cat = unicodedata.category(ch)
        if cat == "Cs" or (cat == "Cc" and ch not in "\t\n\r"):
            return False
    return True


def validate_question(raw: Any, max_chars: int) -> str:
    """The question in a parsed ``/ask`` body, trimmed; ``AskRejected`` naming the rule otherwise."""
    if not isinstance(raw, dict):
        raise AskRejected(400, "body_not_object", f"the body must be a JSON object, got {type(raw).__name__}")
    if "question" not in raw:
        raise AskRejected(422, "question_missing", 'the body must hold "question"')
    question = raw["question"]
    if not isinstance(question, str):
        raise AskRejected(422, "question_not_string", f'"question" must be a string, got {type(question).__name__}')
    if not _is_text(question):
        raise AskRejected(422, "question_not_text", '"question" holds control characters or unpaired surrogates')
    question = question.strip()
    if not question:
        raise AskRejected(422, "question_empty", '"question" is empty')
    if not any(map(_visible, question)):
        raise AskRejected(422, "question_empty", '"question" has no visible character')
    if len(question) > max_chars:
        raise AskRejected(
            413, "question_too_long", f'"question" has {len(question)} characters; the limit is {max_chars}'
        )
    if (hit := screen(question)) is not None:
        raise AskRejected(422, "prompt_injection", hit.describe())
    return question


def read_question(body: bytes, max_chars: int) -> str:
    """The question in a raw ``/ask`` body: size, JSON, then ``validate_question``."""
    if len(body) > max_body_bytes(max_chars):
        raise body_too_large(len(body), max_chars)
    try:
        raw = json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        # ValueError covers JSONDecodeError and over-long integers; RecursionError deep nesting.
        raise AskRejected(400, "body_not_json", f"the body is not UTF-8 JSON ({type(exc).__name__})") from None
    return validate_question(raw, max_chars)
