"""pytest plugin: every gate check from ``rag_contract.gate`` becomes its own test item.

Registered through the ``pytest11`` entry point. It registers the ``gate`` marker and the
ini options ``ragcontract_thresholds`` / ``ragcontract_questions`` (command line:
``--ragcontract-thresholds`` / ``--ragcontract-questions``). Items are collected from the
thresholds file itself (it is listed in ``testpaths``), so ``pytest -m gate`` runs the gate
alone and ``pytest`` runs it with everything else. The project is loaded and each eval run
once per session; all items read the shared result. A failing item reports one paragraph
(no traceback), and each item's figures go to JUnit XML as properties. The plugin decides
nothing: the checks, their bars and their messages come from ``rag_contract.gate``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from rag_contract.quality.gate import GateContext, checks, plain_measure, run_check

_CTX_KEY = pytest.StashKey[GateContext]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("ragcontract", "rag-contract gate")
    group.addoption(
        "--ragcontract-thresholds", default=None, help="thresholds file (default: ini ragcontract_thresholds)"
    )
    group.addoption("--ragcontract-questions", default=None, help="questions file (default: ini ragcontract_questions)")
    parser.addini(
        "ragcontract_thresholds", "thresholds file the gate holds the build to", default="eval/thresholds.yaml"
    )
    parser.addini("ragcontract_questions", "question set the gate evaluates", default="eval/questions.yaml")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "gate: a check of the rag-contract gate (eval/thresholds.yaml)")


def _option(config: pytest.Config, name: str) -> Path:
    value = config.getoption(f"--ragcontract-{name}") or config.getini(f"ragcontract_{name}")
    path = Path(value)
    return path if path.is_absolute() else Path(config.rootpath) / path


def pytest_collect_file(file_path: Path, parent: pytest.Collector):
    if file_path.resolve() == _option(parent.config, "thresholds").resolve():
        return GateFile.from_parent(parent, path=file_path)
    return None


class GateFile(pytest.File):
    """The thresholds file, collected as the gate: one item per check."""

    def collect(self):

        config = self.config
        try:
            ctx = GateContext(
                Path(config.rootpath),
                thresholds_path=_option(config, "thresholds"),
                questions_path=_option(config, "questions"),
                # set per item: the latency check measures with pytest-benchmark
                measure=None,  # type: ignore[arg-type]
            )
        except Exception as exc:  # a project that does not load is one red item, named
            yield GateLoadItem.from_parent(self, name="load", error=f"{type(exc).__name__}: {exc}")
            return
        config.stash[_CTX_KEY] = ctx
        for check in checks(ctx):
            if check.needs_measure:
                yield _benchmarked_item(self, check)
            else:
                yield GateItem.from_parent(self, name=check.id, check=check)


class GateLoadItem(pytest.Item):
    def __init__(self, *, error: str, **kw):
        super().__init__(**kw)
        self.error = error
        self.add_marker(pytest.mark.gate)

    def runtest(self) -> None:
        raise GateFailure(f"the project does not load, so no gate check can run: {self.error}")

    def repr_failure(self, excinfo, style=None):
        return str(excinfo.value)

    def reportinfo(self):
        return self.path, None, f"gate: {self.name}"


class GateFailure(Exception):
    pass


def _record(item: pytest.Item, figures) -> None:
    for key, value in figures.items():
        item.user_properties.append((key, value))


class GateItem(pytest.Item):
    def __init__(self, *, check, **kw):
        super().__init__(**kw)
        self.check = check
        self.add_marker(pytest.mark.gate)

    def runtest(self) -> None:

        outcome = run_check(self.check, self.config.stash[_CTX_KEY])
        _record(self, outcome.figures)
        if not outcome.passed:
            raise GateFailure(outcome.message)

    def repr_failure(self, excinfo, style=None):
        if isinstance(excinfo.value, GateFailure):
            return f"[{self.check.id}] {excinfo.value}"
        return super().repr_failure(excinfo, style)

    def reportinfo(self):
        return self.path, None, f"gate: {self.name}"


def _benchmarked_item(parent: GateFile, check) -> pytest.Function:
    """The latency check as a Function item, so it gets the ``benchmark`` fixture."""

    def gate_check(benchmark, request):
        ctx = request.config.stash[_CTX_KEY]

        def measure(fn):
            if benchmark.disabled:  # --benchmark-disable: the bar still holds, timed plainly
                return plain_measure(fn)
            benchmark.pedantic(fn, rounds=40, iterations=1, warmup_rounds=3)
            return benchmark.stats.stats.median

        ctx.measure = measure
        outcome = run_check(check, ctx)
        _record(request.node, outcome.figures)
        if not outcome.passed:
            pytest.fail(f"[{check.id}] {outcome.message}", pytrace=False)

    item = pytest.Function.from_parent(parent, name=check.id, callobj=gate_check)
    item.add_marker(pytest.mark.gate)
    return item
