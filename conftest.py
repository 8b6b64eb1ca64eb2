"""Shared fixtures for the project's own tests (the gate plugin is separate: pytest_ragcontract)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from rag_contract.embedders.local import LocalEmbedder
from rag_contract.index.store import load_index
from rag_contract.project import load_project
from tests.support import ROOT

# pytester runs pytest in-process for the gate plugin's own tests. The other fixtures live
# with their machinery under tests/support and reach every test module without an import
# (an imported fixture would be shadowed by the parameter that uses it).
pytest_plugins = [
    "pytester",
    "tests.support.fake_openai",
    "tests.support.live_server",
    "tests.support.redis_server",
]


@pytest.fixture(scope="session")
def root() -> Path:
    return ROOT


@pytest.fixture(scope="session")
def project():

    return load_project(ROOT)


@pytest.fixture(scope="session")
def index(project):

    return load_index(project.paths.index)


@pytest.fixture(scope="session")
def embedder():
    """The local embedder, its model loaded once, not inside any request's deadline."""

    e = LocalEmbedder()
    e.embed_one("warm up")
    return e


@pytest.fixture(autouse=True)
def _no_api_keys(monkeypatch):
    """No test may reach a paid API: keys are scrubbed from every test's environment."""
    for key in list(os.environ):
        if key.endswith("_API_KEY"):
            monkeypatch.delenv(key)
