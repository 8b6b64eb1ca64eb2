"""The one rule for what a span may carry out of the process.

An attribute leaves only if its key is listed: ``METADATA`` always, ``TEXT`` (question, claim
and passage text) only when the operator set the text flag. Anything else, including a key
added later and not listed here, is dropped: a new attribute is private until someone decides
otherwise. Events (exception messages can quote a question) and status descriptions are dropped
by the encoder that applies this rule (``otlp_wire``), the one place spans become bytes.

The question leaves as its sha256 digest; the client as a keyed hash (HMAC-SHA256, truncated),
since a plain digest of an IPv4 address can be reversed by trying them all.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Mapping
from typing import Any

QUESTION_TEXT = "rag.question.text"
CLAIMS_TEXT = "rag.claims.text"
WITHDRAWN_TEXT = "rag.withdrawn.text"
PASSAGE_TITLES = "rag.passages.titles"
TEXT = frozenset({QUESTION_TEXT, CLAIMS_TEXT, WITHDRAWN_TEXT, PASSAGE_TITLES})

METADATA = frozenset(
    {
        "http.request.method",
        "http.route",
        "http.response.status_code",
        "rag.state",
        "rag.refused",
        "rag.index_version",
        "rag.drafter",
        "rag.question.sha256",
        "rag.client.key",
        "rag.claims.kept",
        "rag.claims.withdrawn",
        "rag.withdrawn.rules",
        "rag.passages.ids",
        "rag.passages.count",
        "rag.budget.deadline_ms",
        "rag.budget.spent_ms",
        "rag.stage.ms",
    }
)
CLIENT_KEY_HEX = 16


def question_digest(question: str) -> str:
    return hashlib.sha256(question.encode("utf-8")).hexdigest()


def client_key(identity: str, salt: bytes) -> str:
    """The client identity as traces carry it: comparable under one salt, not reversible."""
    return hmac.new(salt, identity.encode("utf-8"), hashlib.sha256).hexdigest()[:CLIENT_KEY_HEX]


def allowed(key: str, include_text: bool) -> bool:
    return key in METADATA or (include_text and key in TEXT)


def redact(attributes: Mapping[str, Any] | None, include_text: bool) -> dict[str, Any]:
    """Only the listed keys of ``attributes``."""
    return {k: v for k, v in (attributes or {}).items() if allowed(k, include_text)}
