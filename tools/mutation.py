"""Mutation testing of the contract's rules: does the suite notice when a rule changes?

``eval/mutation.yaml`` names each module that holds a rule, the tests that hold it (only
those run against its mutants, which keeps a module's run to a minute or two on two cores),
optionally the functions to mutate, its floor, and its equivalent mutants: each named, with
the lines it changes and the reason no test can tell it from the original. mutmut
(3.x) makes and runs the mutants in a scratch copy of the checkout, never in the worktree.

``python -m tools.mutation [MODULE ...]`` runs the named modules (all when none is named)
and rewrites their entries in ``eval/results/mutation.json``: mutants, killed, survived,
the score (killed over mutants that are not equivalent) and every survivor with its diff
and, when it is a named equivalent, the reason. Each entry carries a fingerprint of the
module, its tests and its configuration, so a change that touches neither is known not to
move its score; ``stale`` lists the modules whose fingerprint no longer matches, which is
what CI re-runs (``tests/quality/test_mutation.py``).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path

import yaml

from rag_contract.project import find_root

CONFIG = Path("eval") / "mutation.yaml"
REPORT = Path("eval") / "results" / "mutation.json"
TOOL = "mutmut"

# Not part of the checkout a test reads: environments, caches, scratch.
_NOT_COPIED = {
    ".git",
    ".venv",
    ".venv-train",
    "mutants",
    "tmp",
    "build",
    "dist",
    ".hypothesis",
    ".pytest_cache",
    ".ruff_cache",
}
# mutmut's exit codes that mean the tests noticed (a failing test, pytest's internal error, a timeout).
_KILLED = {1, 3}
_TIMEOUT = {36, 24, -24, 152, 255}
_STATUS_CODE = {"survived": 0, "no tests": 33, "not killed": None}


class MutationConfigError(ValueError):
    pass


@dataclass(frozen=True)
class Equivalent:
    mutant: str  # mutmut's name for it, e.g. rag_contract.spend.x_usd__mutmut_3
    diff: tuple[str, ...]  # the lines it changes ("-old", "+new"), so a renumbered mutant is not excused
    reason: str


@dataclass(frozen=True)
class ModuleSpec:
    name: str
    path: str
    tests: tuple[str, ...]
    functions: tuple[str, ...]  # "fn" or "Class.method"; empty: every function in the module
    floor: float
    equivalent: tuple[Equivalent, ...]
    raw: Mapping  # the entry as written, part of the fingerprint

    @property
    def dotted(self) -> str:
        return self.path.removesuffix(".py").replace("/", ".")

    def patterns(self) -> tuple[str, ...]:
        """mutmut's mutant-name globs for the functions mutated (mutmut's own mangling)."""
        out = []
        for fn in self.functions:
            cls, _, meth = fn.rpartition(".")
            out.append(f"{self.dotted}.xǁ{cls}ǁ{meth}__mutmut_*" if cls else f"{self.dotted}.x_{fn}__mutmut_*")
        return tuple(out) or (f"{self.dotted}.*",)


def load_config(root: Path) -> dict[str, ModuleSpec]:
    raw = yaml.safe_load((root / CONFIG).read_text(encoding="utf-8"))
    specs: dict[str, ModuleSpec] = {}
    for name, m in (raw.get("modules") or {}).items():
        where = f"{CONFIG}: modules.{name}"
        for key in ("path", "tests", "floor"):
            if key not in m:
                raise MutationConfigError(f"{where}: missing {key!r}")
        if not (root / m["path"]).is_file():
            raise MutationConfigError(f"{where}.path: no file {m['path']}")
        for t in m["tests"]:
            if not (root / t).is_file():
                raise MutationConfigError(f"{where}.tests: no file {t}")
        if not 0.0 < float(m["floor"]) <= 1.0:
            raise MutationConfigError(f"{where}.floor: {m['floor']!r} is not in (0, 1]")
        equivalent = []
        for e in m.get("equivalent") or ():
            if not str(e.get("reason", "")).strip():
                raise MutationConfigError(f"{where}.equivalent: {e.get('mutant')} gives no reason")
            equivalent.append(Equivalent(e["mutant"], tuple(e["diff"]), e["reason"].strip()))
        specs[name] = ModuleSpec(
            name=name,
            path=m["path"],
            tests=tuple(m["tests"]),
            functions=tuple(m.get("functions") or ()),
            floor=float(m["floor"]),
            equivalent=tuple(equivalent),
            raw=m,
        )
    return specs


def fingerprint(root: Path, spec: ModuleSpec) -> str:
    """What decides which mutants die: the module's source, its tests, what is mutated. (Its
    floor and equivalents only classify the result: ``reclassify`` applies them.)"""
    h = hashlib.sha256()
    for rel in (spec.path, *spec.tests):
        h.update(rel.encode() + b"\0" + (root / rel).read_bytes() + b"\0")
    h.update(json.dumps(list(spec.functions)).encode())
    return h.hexdigest()[:16]


def _copied(root: Path) -> list[str]:
    """The checkout's top-level entries a test may read (it runs inside mutmut's copy of them)."""
    return sorted(p.name for p in root.iterdir() if p.name not in _NOT_COPIED and not p.name.endswith(".egg-info"))


def _mutmut_config(root: Path, spec: ModuleSpec) -> str:
    args = ", ".join(json.dumps(t) for t in spec.tests)
    also = ", ".join(json.dumps(n) for n in _copied(root) if n not in ("rag_contract", "tests"))
    return (
        "\n[tool.mutmut]\n"
        'source_paths = ["rag_contract"]\n'
        f'only_mutate = ["{spec.path}"]\n'
        f"also_copy = [{also}]\n"
        'pytest_add_cli_args = ["-p", "no:randomly", "-q", "-p", "no:cacheprovider"]\n'
        f"pytest_add_cli_args_test_selection = [{args}]\n"
        "use_git_change_detection = false\n"
        # workers fork from a process that has run no test, so no cache (grounding's per-token
        # lru_caches) carries an unmutated answer into a mutant's run
        'process_isolation = "forkserver"\n'
    )


def _scratch_copy(root: Path, dst: Path, spec: ModuleSpec) -> None:
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", ".hypothesis")
    for name in _copied(root):
        src = root / name
        if src.is_dir():
            shutil.copytree(src, dst / name, ignore=ignore)
        else:
            shutil.copy(src, dst / name)
    pyproject = dst / "pyproject.toml"
    pyproject.write_text(pyproject.read_text(encoding="utf-8") + _mutmut_config(root, spec), encoding="utf-8")


def _mutmut() -> str:
    return str(Path(sys.executable).with_name("mutmut"))


# One process for every survivor's diff (``mutmut show`` per mutant costs seconds each).
_DIFFS = (
    "import json, sys\n"
    "from mutmut.mutation.diff_apply import get_diff_for_mutant\n"
    "print(json.dumps({n: get_diff_for_mutant(n, path=sys.argv[1]) for n in sys.argv[2:]}))\n"
)


def _diffs(workdir: Path, path: str, mutants: Sequence[str]) -> dict[str, tuple[str, ...]]:
    """The lines each mutant changes, "-old" and "+new", as mutmut shows them."""
    if not mutants:
        return {}
    out = subprocess.run(
        [sys.executable, "-c", _DIFFS, path, *mutants], cwd=workdir, capture_output=True, text=True, check=True
    ).stdout
    return {
        name: tuple(
            line.rstrip()
            for line in diff.splitlines()
            if line[:1] in "+-" and not line.startswith(("+++", "---")) and line[1:].strip()
        )
        for name, diff in json.loads(out).items()
    }


def run_module(root: Path, spec: ModuleSpec, *, children: int = 2, log: Path | None = None) -> tuple[dict, float]:
    """Mutate ``spec``'s module in a scratch copy, run its tests against every mutant, and
    return its report entry and the seconds it took."""
    with tempfile.TemporaryDirectory(prefix=f"mutation-{spec.name}-") as tmp:
        work = Path(tmp)
        _scratch_copy(root, work, spec)
        env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
        env["PYTHONHASHSEED"] = "0"
        began = time.monotonic()
        proc = subprocess.run(
            [_mutmut(), "run", "--max-children", str(children), *spec.patterns()],
            cwd=work,
            env=env,
            capture_output=True,
            text=True,
        )
        seconds = time.monotonic() - began
        if log is not None:
            log.write_text(proc.stdout + proc.stderr, encoding="utf-8")
        meta = work / "mutants" / (spec.path + ".meta")
        if proc.returncode != 0 or not meta.is_file():
            tail = (proc.stdout + proc.stderr)[-3000:]
            raise RuntimeError(f"mutmut failed on {spec.name} (exit {proc.returncode}):\n{tail}")
        codes = json.loads(meta.read_text(encoding="utf-8"))["exit_code_by_key"]
        globs = [re.compile(re.escape(p).replace(r"\*", ".*") + "$") for p in spec.patterns()]
        codes = {k: v for k, v in codes.items() if any(g.match(k) for g in globs)}
        survivors = _diffs(work, spec.path, [k for k, v in codes.items() if v not in _KILLED | _TIMEOUT])
    return summarise(spec, codes, survivors), seconds


def _order(name: str) -> tuple[str, int]:
    stem, _, n = name.rpartition("__mutmut_")
    return stem, int(n) if n.isdigit() else 0


def summarise(spec: ModuleSpec, codes: Mapping[str, int | None], survivors: Mapping[str, Sequence[str]]) -> dict:
    """A module's report entry from mutmut's exit codes and the survivors' diffs."""
    excused = {e.mutant: e for e in spec.equivalent}
    listed = []
    for name in sorted(survivors, key=_order):
        diff = list(survivors[name])
        e = excused.get(name)
        reason = e.reason if e is not None and list(e.diff) == diff else None
        status = "survived" if codes[name] == 0 else ("no tests" if codes[name] in (5, 33) else "not killed")
        listed.append({"mutant": name, "status": status, "diff": diff, "equivalent": reason})
    killed = sum(1 for v in codes.values() if v in _KILLED | _TIMEOUT)
    equivalent = sum(1 for s in listed if s["equivalent"])
    judged = len(codes) - equivalent
    return {
        "path": spec.path,
        "functions": list(spec.functions),
        "tests": list(spec.tests),
        "mutants": len(codes),
        "killed": killed,
        "timeouts": sum(1 for v in codes.values() if v in _TIMEOUT),
        "survived": len(listed),
        "equivalent": equivalent,
        "score": round(killed / judged, 4) if judged else 1.0,
        "floor": spec.floor,
        "survivors": listed,
    }


def reclassify(spec: ModuleSpec, entry: Mapping) -> dict:
    """``entry`` summarised again under ``spec``'s floor and equivalents, without re-running."""
    codes: dict[str, int | None] = {f"killed-{i}": 1 for i in range(entry["killed"])}
    codes.update({s["mutant"]: _STATUS_CODE[s["status"]] for s in entry["survivors"]})
    again = summarise(spec, codes, {s["mutant"]: s["diff"] for s in entry["survivors"]})
    again["timeouts"] = entry["timeouts"]
    return {**again, "fingerprint": entry.get("fingerprint")}


def load_report(root: Path) -> dict:
    path = root / REPORT
    if not path.is_file():
        return {"tool": TOOL, "modules": {}}
    return json.loads(path.read_text(encoding="utf-8"))


def write_report(root: Path, report: dict) -> None:
    (root / REPORT).write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def stale(root: Path, specs: Mapping[str, ModuleSpec], report: Mapping) -> list[str]:
    """Modules whose committed entry was not produced from the module, tests and config on disk."""
    done = report.get("modules", {})
    return [n for n, s in specs.items() if n not in done or done[n].get("fingerprint") != fingerprint(root, s)]


def run(
    root: Path,
    names: Iterable[str],
    *,
    children: int = 2,
    verbose: bool = True,
    on_entry: Callable[[dict], None] | None = None,
) -> dict:
    """Run the named modules; ``on_entry`` sees the report after each one (to save progress)."""
    specs = load_config(root)
    unknown = [n for n in names if n not in specs]
    if unknown:
        raise MutationConfigError(f"{CONFIG}: no module named {', '.join(unknown)} (known: {', '.join(specs)})")
    report = load_report(root)
    report["tool"] = f"{TOOL} {version(TOOL)}"
    modules = dict(report.get("modules", {}))
    for name in names:
        spec = specs[name]
        entry, seconds = run_module(root, spec, children=children)
        entry["fingerprint"] = fingerprint(root, spec)
        modules[name] = entry
        if verbose:
            print(
                f"{name}: {entry['killed']} of {entry['mutants']} killed, {entry['survived']} survived "
                f"({entry['equivalent']} equivalent), score {entry['score']:.3f}, floor {spec.floor} "
                f"[{seconds:.0f} s]",
                flush=True,
            )
        report["modules"] = {n: modules[n] for n in specs if n in modules}
        if on_entry is not None:
            on_entry(report)
    report["modules"] = {n: modules[n] for n in specs if n in modules}
    return report


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tools.mutation", description=__doc__.split("\n")[0])
    p.add_argument("modules", nargs="*", help="modules from eval/mutation.yaml (default: all)")
    p.add_argument("--stale", action="store_true", help="run only the modules whose fingerprint changed")
    p.add_argument("--children", type=int, default=2, help="mutants tested at once (default 2)")
    p.add_argument(
        "--reclassify", action="store_true", help="apply eval/mutation.yaml's floors and equivalents, run nothing"
    )
    args = p.parse_args(argv)
    root = find_root()
    specs = load_config(root)
    if args.reclassify:
        report = load_report(root)
        report["modules"] = {n: reclassify(specs[n], e) for n, e in report["modules"].items() if n in specs}
        write_report(root, report)
        return 0
    names = list(args.modules) or list(specs)
    if args.stale:
        names = [n for n in names if n in stale(root, specs, load_report(root))]
    report = run(root, names, children=args.children, on_entry=lambda r: write_report(root, r))
    write_report(root, report)
    below = [n for n, e in report["modules"].items() if e["score"] < e["floor"]]
    for n in below:
        print(f"{n}: score {report['modules'][n]['score']:.3f} is below its floor {report['modules'][n]['floor']}")
    return 1 if below else 0


if __name__ == "__main__":
    raise SystemExit(main())
