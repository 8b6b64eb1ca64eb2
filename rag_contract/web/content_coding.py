"""A request body is read as sent, never decoded: a content-coded one is refused (a plain function).

Contract: ``coding_refusal(values)`` takes every ``Content-Encoding`` field line of a request and
returns None when the body carries no content coding (no field, or only ``identity``), else the
``AskRejected`` to send: 415 ``content_encoding_not_supported`` naming the first coding. RFC 9110
section 8.4: a recipient that does not decode a coding it was sent cannot read the body as the
media type says, and section 15.5.16 names 415 for it; the reply says ``Accept-Encoding:
identity`` (section 12.5.3: the codings the request could have used). Without this, a gzip body
that happens to parse as JSON was answered, and one that does not was blamed on its JSON.
"""

from __future__ import annotations

from collections.abc import Iterable

from rag_contract.answering.free_text import AskRejected

ACCEPTED = {"Accept-Encoding": "identity"}


def coding_refusal(values: Iterable[str]) -> AskRejected | None:
    """None when ``values`` (the ``Content-Encoding`` lines) name no coding but ``identity``."""
    for value in values:
        for coding in (c.strip().lower() for c in value.split(",")):
            if coding and coding != "identity":
                detail = f"the body is content-coded ({coding[:40]}); only an uncoded body is read"
                return AskRejected(415, "content_encoding_not_supported", detail)
    return None
