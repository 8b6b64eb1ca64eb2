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

from rag_contract.quality.gate import Check, GateContext, checks, plain_measure, run_check

# The session's GateContext: the project loaded and each eval run once, read by every item.
GATE_CONTEXT = pytest.StashKey[GateContext]()


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
                measure=plain_measure,  # replaced per item: the latency check measures with pytest-benchmark
            )
        except Exception as exc:  # a project that does not load is one red item, named
            yield GateLoadItem.from_parent(self, name="load", error=f"{type(exc).__name__}: {exc}")
            return
        config.stash[GATE_CONTEXT] = ctx
        for check in checks(ctx):
            if check.needs_measure:
                yield _benchmarked_item(self, check)
            else:
                yield GateCheckItem.from_parent(self, name=check.id, check=check)


class GateFailure(Exception):
    """A gate item's verdict: reported as its one paragraph, without a traceback."""


class GateItem(pytest.Item):
    """What every gate item is: marked ``gate``, located at the thresholds file under its
    check's name, and failing with one paragraph (``failure_paragraph``), no traceback."""

    def __init__(self, **kw) -> None:
        super().__init__(**kw)
        self.add_marker(pytest.mark.gate)

    def failure_paragraph(self, message: str) -> str:
        return message

    def repr_failure(self, excinfo, style=None):
        if isinstance(excinfo.value, GateFailure):
            return self.failure_paragraph(str(excinfo.value))
        return super().repr_failure(excinfo, style)

    def reportinfo(self):
        return self.path, None, f"gate: {self.name}"


class GateLoadItem(GateItem):
    """The one item of a project that does not load: red, saying why."""

    def __init__(self, *, error: str, **kw) -> None:
        super().__init__(**kw)
        self.error = error

    def runtest(self) -> None:
        raise GateFailure(f"the project does not load, so no gate check can run: {self.error}")


class GateCheckItem(GateItem):
    """One check of ``rag_contract.quality.gate``, run on the session's context."""

    def __init__(self, *, check: Check, **kw) -> None:
        super().__init__(**kw)
        self.check = check

    def runtest(self) -> None:
        outcome = run_check(self.check, self.config.stash[GATE_CONTEXT])
        _record(self, outcome.figures)
        if not outcome.passed:
            raise GateFailure(outcome.message)

    def failure_paragraph(self, message: str) -> str:
        return f"[{self.check.id}] {message}"


def _record(item: pytest.Item, figures) -> None:
    for key, value in figures.items():
        item.user_properties.append((key, value))


def _benchmarked_item(parent: GateFile, check: Check) -> pytest.Function:
    """The latency check as a Function item, so it gets the ``benchmark`` fixture."""

    def gate_check(benchmark, request):
        ctx = request.config.stash[GATE_CONTEXT]

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
