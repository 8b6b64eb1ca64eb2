"""pytest plugin: every gate check from ``rag_contract.gate`` becomes its own test item.

Registered through the ``pytest11`` entry point. It registers the ``gate`` marker and the
ini options ``ragcontract_root`` (the project directory; default: pytest's rootdir),
``ragcontract_thresholds`` / ``ragcontract_questions`` (relative to the project; command line:
``--ragcontract-root``, ``--ragcontract-thresholds``, ``--ragcontract-questions``) and
``ragcontract_projects`` (further project directories, relative to the rootdir, whose gates run
too: each one's ``eval/thresholds.yaml`` is collected as its own gate). Items are collected from
the thresholds file itself (it is listed in ``testpaths``, or pytest finds it under the
directory it is given), so ``pytest -m gate`` runs the gate alone and ``pytest`` runs it with
everything else. The project is loaded and each eval run
once per session; all items read the shared result. A failing item reports one paragraph
(no traceback), and each item's figures go to JUnit XML as properties. The plugin decides
nothing: the checks, their bars and their messages come from ``rag_contract.gate``.

After the session (``pytest_terminal_summary``, which never raises: a failure to report is one
line, not an error of the run):

- unused ceiling entries are named: ceilings no collected item holds. Collected, not run: an
  item deselected by ``-k`` or left to another shard still counts as using its ceiling.
- ``--ragcontract-update`` re-measures and rewrites eval/thresholds.yaml by the ratchet's rules
  (``rag_contract.quality.thresholds_file.update_thresholds``, as ``rag-contract thresholds
  update`` does; tighten-only unless ``--ragcontract-allow-loosen``) and prints the diff.
- with ``GITHUB_ACTIONS=true``: a Markdown step summary appended to ``$GITHUB_STEP_SUMMARY`` and
  ``::error`` annotations for the ten worst failures, each on the line of its bar; the same
  summary goes to ``--ragcontract-summary FILE`` for other CI systems. Failed items come first,
  then the rank-delta table against ``--ragcontract-base DIR`` (a base revision's eval/results/,
  e.g. written by ``rag-contract diff --base REV --save-base DIR``; default: the committed
  eval/results/, so the table shows what moved since the reports were last committed).

JUnit XML: the family is ``xunit1`` (set in pyproject.toml), because each item's figures are
``<properties>`` of its ``<testcase>``, which xunit1 allows and the xunit2 schema does not.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from rag_contract.quality.ci_report import FailedItem, error_annotations, step_summary
from rag_contract.quality.gate import Check, GateContext, checks, plain_measure, run_check
from rag_contract.quality.report_diff import ReportDiff, ReportSet, diff_reports, load_report_set
from rag_contract.quality.thresholds_file import update_thresholds

# The session's GateContext: the project loaded and each eval run once, read by every item.
GATE_CONTEXT = pytest.StashKey[GateContext]()


@dataclass
class GateSession:
    """What the session collected and how its gate items ended, for the reports after it."""

    collected: list[str] = field(default_factory=list)  # check ids, before any deselection
    failures: list[FailedItem] = field(default_factory=list)
    passed: int = 0


GATE_SESSION = pytest.StashKey[GateSession]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("ragcontract", "rag-contract gate")
    group.addoption(
        "--ragcontract-thresholds", default=None, help="thresholds file (default: ini ragcontract_thresholds)"
    )
    group.addoption("--ragcontract-questions", default=None, help="questions file (default: ini ragcontract_questions)")
    group.addoption(
        "--ragcontract-update",
        action="store_true",
        help="after the gate, rewrite the bars in the thresholds file by the ratchet's rules (tighten-only)",
    )
    group.addoption(
        "--ragcontract-allow-loosen", action="store_true", help="with --ragcontract-update: also loosen bars"
    )
    group.addoption("--ragcontract-summary", default=None, help="also write the Markdown step summary to this file")
    group.addoption(
        "--ragcontract-base",
        default=None,
        help="eval/results/ directory of the base, for the rank-delta table (default: the committed reports)",
    )
    group.addoption("--ragcontract-root", default=None, help="project directory (default: ini ragcontract_root)")
    parser.addini("ragcontract_root", "project directory (default: the rootdir)", default=".")
    parser.addini(
        "ragcontract_projects", "further project directories whose gates run too", type="linelist", default=[]
    )
    parser.addini(
        "ragcontract_thresholds", "thresholds file the gate holds the build to", default="eval/thresholds.yaml"
    )
    parser.addini("ragcontract_questions", "question set the gate evaluates", default="eval/questions.yaml")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "gate: a check of the rag-contract gate (eval/thresholds.yaml)")
    config.stash[GATE_SESSION] = GateSession()
    config.pluginmanager.register(GateReporter(config), "ragcontract-reporter")


def _root(config: pytest.Config) -> Path:
    value = Path(config.getoption("--ragcontract-root") or config.getini("ragcontract_root"))
    return value if value.is_absolute() else Path(config.rootpath) / value


def _option(config: pytest.Config, name: str) -> Path:
    value = config.getoption(f"--ragcontract-{name}") or config.getini(f"ragcontract_{name}")
    path = Path(value)
    return path if path.is_absolute() else _root(config) / path


@dataclass(frozen=True)
class GateProject:
    """One project whose gate this session runs: where it is and which files hold it."""

    root: Path
    thresholds: Path
    questions: Path
    main: bool  # the project the session's reports (update, CI summary) are about


def _projects(config: pytest.Config) -> dict[Path, GateProject]:
    """Each gated project by its thresholds file (resolved)."""
    main = GateProject(_root(config), _option(config, "thresholds"), _option(config, "questions"), True)
    out = {main.thresholds.resolve(): main}
    for extra in config.getini("ragcontract_projects"):
        root = Path(config.rootpath) / extra
        project = GateProject(root, root / "eval" / "thresholds.yaml", root / "eval" / "questions.yaml", False)
        out.setdefault(project.thresholds.resolve(), project)
    return out


def pytest_collect_file(file_path: Path, parent: pytest.Collector):
    project = _projects(parent.config).get(file_path.resolve())
    if project is not None:
        return GateFile.from_parent(parent, path=file_path, project=project)
    return None


class GateFile(pytest.File):
    """A project's thresholds file, collected as its gate: one item per check, all reading
    this file's ``ctx`` (the project loaded and each eval run once)."""

    def __init__(self, *, project: GateProject, **kw) -> None:
        super().__init__(**kw)
        self.project = project
        self.ctx: GateContext | None = None

    def collect(self):

        config = self.config
        try:
            ctx = GateContext(
                self.project.root,
                thresholds_path=self.project.thresholds,
                questions_path=self.project.questions,
                measure=plain_measure,  # replaced per item: the latency check measures with pytest-benchmark
            )
        except Exception as exc:  # a project that does not load is one red item, named
            yield GateLoadItem.from_parent(self, name="load", error=f"{type(exc).__name__}: {exc}")
            return
        self.ctx = ctx
        all_checks = checks(ctx)
        if self.project.main:
            config.stash[GATE_CONTEXT] = ctx
            config.stash[GATE_SESSION].collected.extend(c.id for c in all_checks)
        for check in all_checks:
            # without pytest-benchmark installed, the latency check times plainly (plain_measure)
            if check.needs_measure and config.pluginmanager.hasplugin("benchmark"):
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
        outcome = run_check(self.check, _context(self))
        _record(self, outcome.figures)
        if not outcome.passed:
            raise GateFailure(outcome.message)

    def failure_paragraph(self, message: str) -> str:
        return f"[{self.check.id}] {message}"


def _context(item: pytest.Item) -> GateContext:
    """The context of the gate file ``item`` was collected from."""
    node = item.getparent(GateFile)
    assert node is not None and node.ctx is not None  # items exist only once their file's context loaded
    return node.ctx


def _record(item: pytest.Item, figures) -> None:
    for key, value in figures.items():
        item.user_properties.append((key, value))


def _benchmarked_item(parent: GateFile, check: Check) -> pytest.Function:
    """The latency check as a Function item, so it gets the ``benchmark`` fixture."""

    def gate_check(benchmark, request):
        ctx = _context(request.node)

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


# --- after the session ----------------------------------------------------------------------


class GateReporter:
    """Registered per run by ``pytest_configure``: records how gate items ended, then reports."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if "gate" not in report.keywords or "::" not in report.nodeid:
            return
        main = _option(self.config, "thresholds").resolve()
        if (Path(self.config.rootpath) / report.nodeid.split("::", 1)[0]).resolve() != main:
            return  # another project's gate: its items pass or fail, the reports are the main one's
        session = self.config.stash[GATE_SESSION]
        check_id = report.nodeid.rsplit("::", 1)[1]
        if report.failed:
            message = report.longreprtext.strip().removeprefix(f"[{check_id}] ")
            session.failures.append(FailedItem(check_id, message, dict(report.user_properties)))
        elif report.when == "call" and report.passed:
            session.passed += 1

    def pytest_terminal_summary(self, terminalreporter) -> None:
        """Every report after the gate; none of them may fail the run or hide its verdict."""
        reports = (("unused ceilings", _report_unused), ("update", _update), ("CI summary", _ci_summary))
        for name, report in reports:
            try:
                report(terminalreporter, self.config)
            except Exception as exc:  # reporting is best effort: the verdict is the items'
                terminalreporter.write_line(f"rag-contract: {name} not produced: {type(exc).__name__}: {exc}")


def _report_unused(tr, config: pytest.Config) -> None:
    ctx = config.stash.get(GATE_CONTEXT, None)
    if ctx is None:
        return
    held = {c.split("/", 2)[2] for c in config.stash[GATE_SESSION].collected if c.startswith("retrieval/ceiling/")}
    unused = [q for q in ctx.thresholds.retrieval.ceilings if q not in held]
    if unused:
        tr.write_line(
            f"rag-contract: {len(unused)} unused ceiling entr{'y' if len(unused) == 1 else 'ies'} in "
            f"{_relative(config, _option(config, 'thresholds'))} (no collected item holds them): "
            f"{', '.join(unused)}; --ragcontract-update removes them"
        )


def _update(tr, config: pytest.Config) -> None:
    ctx = config.stash.get(GATE_CONTEXT, None)
    if not config.getoption("--ragcontract-update") or ctx is None:
        return
    path = _option(config, "thresholds")
    update = update_thresholds(
        path,
        ctx.thresholds,
        ctx.retrieval.as_dict(),
        ctx.answers,
        ctx.index.version,
        allow_loosen=config.getoption("--ragcontract-allow-loosen"),
    )
    tr.section("rag-contract thresholds update")
    for change in update.changes:
        tr.write_line(change.describe())
    if update.kept:
        tr.write_line(f"{len(update.kept)} bar(s) would loosen and were kept (--ragcontract-allow-loosen)")
    tr.write(update.diff)
    tr.write_line(f"{len(update.changes)} change(s) written to {_relative(config, path)}; rerun the gate to hold them")


def _ci_summary(tr, config: pytest.Config) -> None:
    on_github = os.environ.get("GITHUB_ACTIONS") == "true"
    target = config.getoption("--ragcontract-summary")
    gate = config.stash[GATE_SESSION]
    if not (on_github or target) or not (gate.collected or gate.failures):
        return
    diff, label = _diff(config)
    text = step_summary(gate.failures, gate.passed, diff, label)
    if target:
        Path(target).write_text(text, encoding="utf-8")
    if on_github:
        if os.environ.get("GITHUB_STEP_SUMMARY"):
            with open(os.environ["GITHUB_STEP_SUMMARY"], "a", encoding="utf-8") as out:
                out.write(text)
        path = _option(config, "thresholds")
        source = path.read_text(encoding="utf-8") if path.is_file() else ""
        for line in error_annotations(gate.failures, source, _relative(config, path)):
            tr.write_line(line)


def _diff(config: pytest.Config) -> tuple[ReportDiff | None, str]:
    """The rank-delta table's diff: this session's measurement against the base, if measured."""
    ctx = config.stash.get(GATE_CONTEXT, None)
    if ctx is None or "retrieval" not in vars(ctx):  # nothing measured (e.g. -k chose no quality item)
        return None, ""
    new = ReportSet(ctx.retrieval.as_dict(), ctx.answers if "answers" in vars(ctx) else None)
    base = config.getoption("--ragcontract-base")
    if base:
        return diff_reports(load_report_set(Path(base)), new), "base"
    return diff_reports(load_report_set(ctx.project.paths.results), new), "committed reports"


def _relative(config: pytest.Config, path: Path) -> str:
    try:
        return path.resolve().relative_to(Path(config.rootpath).resolve()).as_posix()
    except ValueError:
        return str(path)
