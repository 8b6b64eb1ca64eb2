"""Helpers the tests share: clocks, servers on loopback, the app factory, the checkout's root.

Fixtures defined here (``fake_openai``, ``live_server``, ``redis_server``) are registered
as plugins by the root ``conftest.py``; test modules import only plain helpers from here.
"""

from __future__ import annotations

from pathlib import Path

# The checkout: where corpus/, index/, eval/ and pyproject.toml live.
ROOT = Path(__file__).resolve().parents[2]
