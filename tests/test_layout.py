"""The package's layout holds: no import cycle, and imports inside functions only where they keep an
optional dependency off an import path. Read from the source with ast, so an import hidden in a function
counts as much as one at the top."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import ROOT

PACKAGES = ("rag_contract", "pytest_ragcontract")
# Third-party modules a function may import lazily: each keeps a heavy or optional dependency
# (an HTTP client, the ONNX runtime, a Redis client) off the paths that do not need it.
# The observability modules that import OpenTelemetry or prometheus_client load only when on;
# the redis-backed bucket store (redis-py imports OpenTelemetry too) only with a redis URL.
LAZY_ALLOWED = {
    "openai",
    "onnxruntime",
    "redis.asyncio",
    "uvicorn",
    "uvicorn.supervisors",
    "ruamel.yaml",  # the round-trip editor, for the commands that edit or annotate the thresholds file
    "rag_contract.observability.metrics",
    "rag_contract.observability.export_process",
    "rag_contract.web.ratelimit.redis_store",
    # `rag-contract adapt` alone trains: torch and onnx (the train extra) stay off every other command
    "rag_contract.adaptation.adapt",
    "rag_contract.adaptation.training",
    # a build computes BM25 statistics with bm25s; a served process restores them (retrieval/lexical.py)
    "bm25s",
}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def project_modules() -> dict[str, Path]:
    return {module_name(p): p for pkg in PACKAGES for p in sorted((ROOT / pkg).rglob("*.py"))}


def imports_of(path: Path, modules: dict[str, Path], here: str) -> list[tuple[str, bool]]:
    """(imported project module, inside a function?) for every import in module ``here`` at ``path``.

    Importing ``a.b.c`` runs ``a/__init__`` and ``a/b/__init__`` first, so those parents count too,
    except the importer's own ancestors: they are already initialising when it runs."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: list[tuple[str, bool]] = []

    def add(name: str, nested: bool) -> None:
        parts = name.split(".")
        for i in range(1, len(parts) + 1):
            candidate = ".".join(parts[:i])
            own_ancestor = here.startswith(candidate + ".") and candidate != name
            if candidate in modules and candidate != here and not own_ancestor:
                found.append((candidate, nested))

    def visit(node: ast.AST, nested: bool) -> None:
        for child in ast.iter_child_nodes(node):
            inner = nested or isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef)
            if isinstance(child, ast.Import):
                for alias in child.names:
                    add(alias.name, inner)
            elif isinstance(child, ast.ImportFrom) and child.module and child.level == 0:
                add(child.module, inner)
                for alias in child.names:  # ``from pkg import submodule``
                    add(f"{child.module}.{alias.name}", inner)
            visit(child, inner)

    visit(tree, False)
    return found


def graph() -> dict[str, set[str]]:
    modules = project_modules()
    return {m: {dep for dep, _ in imports_of(p, modules, m)} for m, p in modules.items()}


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan), or a module importing itself."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    counter = [0]

    def strong(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1 or v in edges.get(v, ()):
                out.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            strong(v)
    return out


def test_no_import_cycle_among_the_project_modules():
    assert cycles(graph()) == []


def test_the_cycle_detector_sees_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_a_parent_package_counts_as_imported(tmp_path):
    modules = {"p": tmp_path / "p.py", "p.q": tmp_path / "q.py"}
    src = tmp_path / "x.py"
    src.write_text("from p.q import thing\n")
    assert {m for m, _ in imports_of(src, modules, "x")} == {"p", "p.q"}
    # inside the package itself, its own __init__ is already running: no edge to it
    assert {m for m, _ in imports_of(src, modules, "p.r")} == {"p.q"}


@pytest.mark.parametrize("path", sorted(p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py")), ids=str)
def test_imports_inside_functions_only_keep_optional_dependencies_lazy(path):
    tree = ast.parse(path.read_text(encoding="utf-8"))
    lazy = []
    for fn in ast.walk(tree):
        if isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
            for node in ast.walk(fn):
                if isinstance(node, ast.Import):
                    lazy += [a.name for a in node.names]
                elif isinstance(node, ast.ImportFrom):
                    lazy.append(node.module or "")
    assert sorted(set(lazy) - LAZY_ALLOWED) == []


# What ``rag-contract serve`` must start without: each is imported only where it is used.
KEPT_OFF_THE_SERVE_PATH = (
    "redis",
    "opentelemetry",
    "prometheus_client",
    "onnxruntime",
    "openai",
    "requests",
    "torch",
    "onnx",
    "rag_contract.adaptation.training",
    "bm25s",  # the build's (retrieval/lexical.py)
    "lxml",  # each corpus format's library, imported when a file of that format is read
    "markdown_it",
    "docutils",
)


def test_starting_the_command_line_imports_no_optional_dependency():
    # A fresh interpreter: this one has imported whatever the other tests needed.
    probe = f"import sys, rag_contract.cli; print(sorted(m for m in {KEPT_OFF_THE_SERVE_PATH!r} if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == "[]"


def test_the_image_carries_no_developer_tooling():
    copies = [ln.split()[1] for ln in (ROOT / "Dockerfile").read_text().splitlines() if ln.startswith("COPY ")]
    assert copies and "." not in copies and not any(c.startswith("tools") for c in copies)
    assert not (ROOT / "rag_contract" / "loadtest.py").exists()
    assert not (ROOT / "rag_contract" / "readme.py").exists()


def test_the_readme_is_at_most_200_lines(root):
    """The README is the front page: its detail lives in docs/, the sealed-set history in docs/held-out.md."""
    assert len((root / "README.md").read_text(encoding="utf-8").splitlines()) <= 200
