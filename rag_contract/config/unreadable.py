"""How a file that cannot be read is named in a refusal: its name and the system's reason.

A refusal may reach an HTTP body (``/health``'s ``load_error``, a 503's ``detail``), so it
never carries the absolute path of the checkout: ``unreadable(path, exc)`` is
``"<name>: cannot be read (<reason>)"``, e.g. ``"meta.json: cannot be read (Is a directory)"``.
"""

from __future__ import annotations

from pathlib import Path


def unreadable(path: Path | str, exc: OSError) -> str:
    """One line naming the file (by name) and why the system refused to read it."""
    reason = exc.strerror or type(exc).__name__
    return f"{Path(path).name}: cannot be read ({reason})"


def not_utf8(path: Path | str, exc: UnicodeDecodeError) -> str:
    """One line naming the file (by name) and the first byte that is not UTF-8."""
    return f"{Path(path).name}: not UTF-8 text (byte {exc.start} is 0x{exc.object[exc.start]:02x})"
