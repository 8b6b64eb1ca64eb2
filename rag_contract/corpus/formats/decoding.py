"""Bytes to text for the text formats: UTF-8, a byte-order mark dropped."""

from __future__ import annotations


def decode(data: bytes, what: str) -> str:
    """``data`` as UTF-8 text without a leading BOM, or a ValueError naming the first bad byte."""
    try:
        return data.decode("utf-8").lstrip("\ufeff")
    except UnicodeDecodeError as exc:
        raise ValueError(f"not UTF-8 text (byte {exc.start}); {what} is expected") from None
