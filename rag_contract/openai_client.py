"""The ``openai`` client as every paid command makes it: the environment names where and as whom,
never how; retries are off because each call is authorised once by the spend ledger.

It imports no other module of the project, so the embedders and the live drafter can both use it
without reaching each other.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the client is only needed by hand; importing this module loads no HTTP stack
    import openai


class ClientConfigError(ValueError):
    """The client cannot be made as asked (no key), or would retry unauthorised calls."""


def check_no_retries(client: Any) -> None:
    """One call, one authorisation: a client that retries would send paid calls nobody asked the ledger about."""
    retries = getattr(client, "max_retries", 0)
    if retries != 0:
        raise ClientConfigError(f"openai client: max_retries must be 0 (each call is authorised once), got {retries}")


def make_client(base_url: str | None, api_key: str | None) -> openai.OpenAI:
    """The ``openai`` client. The environment says where (OPENAI_BASE_URL) and as whom
    (OPENAI_API_KEY), read here only and only for an argument left ``None``; it never
    changes behaviour (model, limits and prices are committed configuration).
    """
    # Kept off every import path the gate reaches: the openai package brings an HTTP client.
    import openai  # noqa: PLC0415

    base_url = base_url or os.environ.get("OPENAI_BASE_URL") or None
    api_key = api_key or os.environ.get("OPENAI_API_KEY") or None
    if not api_key:
        raise ClientConfigError("openai: no API key (pass one, or set OPENAI_API_KEY)")
    # Retries would be paid calls the ledger never authorised: one call, one authorisation.
    return openai.OpenAI(base_url=base_url, api_key=api_key, max_retries=0)
