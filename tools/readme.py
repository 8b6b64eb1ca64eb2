"""The measured numbers of the README and the reference pages, generated from the committed reports.

Every figure ``README.md`` or a page of ``docs/`` (``DOCUMENTS``) quotes sits between
``<!-- generated:NAME -->`` and ``<!-- /generated:NAME -->`` markers and is rendered here from
``eval/results/*.json`` (the ``projects`` block also from the example project's reports).
``python -m tools.readme`` rewrites those blocks; a test fails when a document differs from
what this module renders, so a quoted number cannot drift from the report behind it (and a
test per report holds the report equal to what its command produces now).
"""

from __future__ import annotations

import hashlib
import json
import re
import tempfile
from collections.abc import Callable
from pathlib import Path

import yaml

from rag_contract.index.status import index_status
from rag_contract.project import Paths, find_root
from rag_contract.quality.held_out import committed_hashes
from rag_contract.quality.rate_text import rate_text
from tools import container, injection, observability_load, probe, redbot_lint, request_cpu, startup
from tools.loadtest import render
from tools.pr_example import example_summary
from tools.project_copy import copy_project

_BLOCK = re.compile(r"(<!-- generated:(?P<name>[\w-]+) -->\n)(?P<body>.*?)(<!-- /generated:(?P=name) -->)", re.S)


def _load(root: Path, name: str) -> dict:
    return json.loads(Paths(root).result(name).read_text(encoding="utf-8"))


# The projects the README sets side by side: the root, then each example project.
PROJECTS = (Path("."), Path("examples/starlette-docs"), Path("examples/flask-docs"))


def _acc(f: dict) -> str:
    """coverage / accuracy when answered / false answers of an ``accuracy`` block (n/a: no denominator)."""
    return f"{_pct(f['coverage'])} / {_pct(f['accuracy_when_answered'])} / {_pct(f['false_answer_rate'])}"


def _pooled(blocks: list[dict]) -> dict:
    """The ``accuracy`` figures of several question sets, pooled by their counts."""
    ans = sum(b["answerable"] for b in blocks)
    ref = sum(b["refusals"] for b in blocks)
    answered = sum(b["accuracy"]["answered"] for b in blocks)
    right = sum(b["accuracy"]["accurate"] for b in blocks)
    false = sum(b["accuracy"]["false_answers"] for b in blocks)

    def rate(n: int, d: int) -> float | None:
        return round(n / d, 4) if d else None

    return {
        "coverage": rate(answered, ans),
        "accuracy_when_answered": rate(right, answered),
        "false_answer_rate": rate(false, ref),
        "answered": answered,
        "accurate": right,
        "false_answers": false,
    }


def projects_table(root: Path) -> str:
    """One row per project: its corpus, its question set, its figures out of fold and on its
    newest sealed set."""
    lines = [
        "| project | documents | sections | questions (answerable + refusals) | index | recall@5 / MRR "
        "(out of fold) | coverage / accuracy when answered / false answers (out of fold) | the same, newest "
        "sealed set |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for rel in PROJECTS:
        project = root / rel
        c = _load(project, "calibration.json")
        meta = json.loads((project / "index" / "meta.json").read_text(encoding="utf-8"))
        about = yaml.safe_load((project / "project.yaml").read_text(encoding="utf-8"))
        manifest = yaml.safe_load((project / "corpus" / "manifest.yaml").read_text(encoding="utf-8"))
        r, a = c["out_of_fold"]["retrieval"], c["out_of_fold"]["answers"]
        where = "`.`" if rel == Path(".") else f"`{rel.as_posix()}/`"
        sealed = _sealed_reports(project)
        newest = f"{_acc(sealed[-1][1]['accuracy'])} (`{sealed[-1][0]}`)" if sealed else "none yet"
        lines.append(
            f"| {about['name']} ({where}) | {len(manifest['files'])} | {meta['sections']} | "
            f"{a['answerable']} + {a['refusals']} | `{meta['version']}` | {r['recall@5']:.3f} / {r['mrr']:.3f} | "
            f"{_acc(a['accuracy'])} | {newest} |"
        )
    return "\n".join(lines) + "\n"


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.2f}"


def retrieval_table(root: Path) -> str:
    r = _load(root, "retrieval.json")
    lines = [
        f"Index `{r['index_version']}`, {r['questions']} answerable questions, top {r['top_k']} sections. "
        f"Serving mode: **{r['serving_mode']}**.",
        "",
        "| mode | recall@1 | recall@3 | recall@5 | recall@10 | MRR | misses |",
        "|---|---|---|---|---|---|---|",
    ]
    for mode, m in r["modes"].items():
        star = " (serving)" if mode == r["serving_mode"] else ""
        misses = ", ".join(m["misses"]) or "none"
        lines.append(
            f"| {mode}{star} | {m['recall@1']:.2f} | {m['recall@3']:.2f} | {m['recall@5']:.2f} | "
            f"{m['recall@10']:.2f} | {m['mrr']:.3f} | {misses} |"
        )
    lines += [
        "",
        f"The serving mode ({r['serving_mode']}) by phrasing style and by RFC:",
        "",
        "| questions | n | recall@1 | recall@5 | recall@10 | MRR |",
        "|---|---|---|---|---|---|",
    ]
    for kind in ("by_style", "by_rfc"):
        for name, b in r["breakdown"][kind].items():
            lines.append(
                f"| {name} | {b['questions']} | {b['recall@1']:.2f} | {b['recall@5']:.2f} | "
                f"{b['recall@10']:.2f} | {b['mrr']:.3f} |"
            )
    return "\n".join(lines) + "\n"


def answers_table(root: Path) -> str:
    a = _load(root, "answers.json")
    s = a["states"]
    lines = [
        f"Index `{a['index_version']}`, drafts replayed by the `{a['drafter']}` drafter, "
        f"coverage floor {a['coverage_floor']}.",
        "",
        "| grounded (of answerable) | grounded, citing an expected section | a kept claim cites an expected section "
        "| state agreement (of refusals) | answered unanswerable | claims withdrawn |",
        "|---|---|---|---|---|---|",
        f"| {rate_text(a['grounded_rate'], a['answerable'], '.2f')} of {a['answerable']} | "
        f"{rate_text(a['grounded_citing_expected_rate'], a['answerable'], '.2f')} | "
        f"{rate_text(a['expected_citation_rate'], a['answerable'], '.2f')} | "
        f"{rate_text(a['state_agreement'], a['refusals'], '.2f')} of {a['refusals']} | {a['answered_unanswerable']} | "
        f"{a['claims_withdrawn']} of {a['claims']} |",
        "",
        f"States over all {a['answerable'] + a['refusals']} questions: "
        + ", ".join(f"{k} {v}" for k, v in s.items())
        + ".",
    ]
    return "\n".join(lines) + "\n"


def abstention_table(root: Path) -> str:
    a = _load(root, "abstention.json")
    t0 = a["committed_threshold"]
    lines = [
        f"{a['answerable']} answerable and {a['unanswerable']} unanswerable questions, index `{a['index_version']}`; "
        f"the answer stands at a relevance logit of at least **{t0}** (committed). Out of fold: each question "
        "scored by parameters fitted without it; in sample: the committed fit.",
        "",
        "| threshold | coverage (out of fold / in sample) | accuracy when answered | false answers |",
        "|---|---|---|---|",
    ]
    rows = sorted(zip(a["out_of_fold"], a["in_sample"], strict=True), key=lambda r: r[0]["threshold"])
    for n, (o, i) in enumerate(rows):
        committed = o["threshold"] == t0
        if n % 4 and not committed:
            continue  # every fourth step, plus the committed threshold
        mark = " **(committed)**" if committed else ""
        lines.append(
            f"| {o['threshold']:.2f}{mark} | {o['coverage']:.2f} / {i['coverage']:.2f} | "
            f"{_pct(o['accuracy_when_answered'])} / {_pct(i['accuracy_when_answered'])} | "
            f"{o['false_answer_rate']:.2f} / {i['false_answer_rate']:.2f} |"
        )
    return "\n".join(lines) + "\n"


def calibration_table(root: Path) -> str:
    c = _load(root, "calibration.json")
    head = (
        "| | recall@1 | MRR | recall@10 | grounded, citing an expected section | unanswerable answered "
        "| refusals in their annotated state |"
    )
    lines = [
        f"Index `{c['index_version']}`, {c['folds']}-fold cross-validation, an invented answer costed at "
        f"{c['false_answer_cost']:g} unanswered ones. Retrieval is the fused mode.",
        "",
        head,
        "|---|---|---|---|---|---|---|",
    ]

    def row(label: str, block: dict) -> str:
        r, a = block["retrieval"], block["answers"]
        return (
            f"| {label} | {r['recall@1']:.2f} | {r['mrr']:.3f} | {r['recall@10']:.2f} | "
            f"{rate_text(a['grounded_citing_expected'], a['answerable'], '.2f')} of {a['answerable']} | "
            f"{len(a['answered_unanswerable'])} of {a['refusals']} | "
            f"{rate_text(a['state_agreement'], a['refusals'], '.2f')} |"
        )

    lines.append(row("**out of fold**", c["out_of_fold"]))
    lines.append(row("in sample", c["in_sample"]))
    for group in ("by_style", "by_rfc"):
        for name, block in c["out_of_fold"][group].items():
            lines.append(row(f"out of fold, {name}", block))
    return "\n".join(lines) + "\n"


def _sealed_reports(root: Path) -> list[tuple[str, dict]]:
    """Each sealed file whose hash ``eval/sealed/SHA256SUMS`` lists and whose report
    (``rag-contract held-out FILE --write``) is committed, in the order the hashes were."""
    sums = committed_hashes(root / "eval" / "sealed" / "SHA256SUMS")
    paths = Paths(root)
    return [
        (name, _load(root, f"{Path(name).stem}.json"))
        for name in sums
        if paths.result(f"{Path(name).stem}.json").is_file()
    ]


def _project_held_out(root: Path, title: str) -> list[str]:
    c = _load(root, "calibration.json")
    lines = [
        f"{title}, index `{c['index_version']}`. Out of fold: {c['folds']}-fold cross-validation"
        + (f" (its retrieval: {c['out_of_fold_retrieval']})" if "out_of_fold_retrieval" in c else "")
        + ". Sealed: questions written before the rules they measure, only their sha256 committed until "
        "those rules were final (`eval/sealed/`), answered as free text is. Accuracy: a kept claim carries the "
        "question's annotated evidence; answered: shown with claims (grounded or partial).",
        "",
        "| | recall@1 | MRR | recall@10 | coverage | accuracy when answered | false answers "
        "| answered, citing an expected section | unanswerable answered grounded |",
        "|---|---|---|---|---|---|---|---|---|",
    ]

    def cells(f: dict) -> str:
        return (
            f"{_pct(f['coverage'])} | {_pct(f['accuracy_when_answered'])} ({f['accurate']} of {f['answered']}) | "
            f"{_pct(f['false_answer_rate'])} ({f['false_answers']})"
        )

    for label, block in (("in sample", c["in_sample"]), ("out of fold", c["out_of_fold"])):
        r, ans = block["retrieval"], block["answers"]
        n, m = len(ans["answered_unanswerable"]), ans["refusals"]
        lines.append(
            f"| {label} | {r['recall@1']:.2f} | {r['mrr']:.3f} | {r['recall@10']:.2f} | {cells(ans['accuracy'])} | "
            f"{ans['answered_citing_expected']:.2f} | {n} of {m} ({rate_text(n / m if m else 0.0, m, '.0%')}) |"
        )
    dev = [v["out_of_fold"] for v in c.get("development", {}).values()]
    if dev:
        answerable = sum(d["answerable"] for d in dev)
        n, m = sum(len(d["answered_unanswerable"]) for d in dev), sum(d["refusals"] for d in dev)
        answered = sum(d["answered_citing_expected"] * d["answerable"] for d in dev) / answerable
        lines.append(
            f"| out of fold, the {len(dev)} opened sealed sets the fit learns from | | | | {cells(_pooled(dev))} | "
            f"{answered:.2f} | {n} of {m} ({n / m:.0%}) |"
        )
    kinds = []
    reports = _sealed_reports(root)
    for n_report, (name, s) in enumerate(reports):
        a, u = s["answerable"], s["unanswerable"]
        k = next(key for key in a if key.startswith("recall@") and key not in ("recall@1", "recall@5"))
        n, m = len(u["answered_grounded"]), u["questions"]
        # Each set is opened once; rules changed after it are checked against it, so only the newest
        # is bold. An older one outside the fit is still unseen by it (its ADR says on which rules).
        if not s["sealed"]:
            shown = f"`{name}` (NOT the committed file)"
        elif s.get("development"):
            shown = f"`{name}` (opened before; the relevance fit learns from it since, in sample)"
        elif n_report < len(reports) - 1:
            shown = f"sealed, `{name}` (opened before; not in the fit)"
        else:
            shown = f"**sealed, `{name}`**"
        lines.append(
            f"| {shown} | {a['recall@1']:.2f} | {a['mrr']:.3f} | {a[k]:.2f} | {cells(s['accuracy'])} | "
            f"{a['answered_citing_expected']:.2f} | {n} of {m} ({rate_text(n / m if m else 0.0, m, '.0%')}) |"
        )
        by_kind = ", ".join(
            f"{kind} {len(v['answered_grounded'])} of {v['questions']}" for kind, v in u["by_kind"].items()
        )
        kinds.append(f"`{name}`: {by_kind}")
    if kinds:
        lines += ["", "Unanswerable questions answered grounded, by kind: " + "; ".join(kinds) + "."]
    return lines


def held_out_table(root: Path) -> str:
    """Each project's in-sample and out-of-fold figures (eval/results/calibration.json) beside
    its sealed sets' (``rag-contract held-out``), one table a project."""
    out: list[str] = []
    for project in PROJECTS:
        if out:
            out.append("")
        about = yaml.safe_load((root / project / "project.yaml").read_text(encoding="utf-8"))
        out += _project_held_out(root / project, f"**{about['name']}**")
    return "\n".join(out) + "\n"


def agreement_table(root: Path) -> str:
    g = _load(root, "agreement.json")
    lines = [
        f"{g['questions']} added questions, each annotated by its writer and by two independent annotators (A, B); "
        f"{g['label_disagreements_resolved']} label and {g['section_disagreements_resolved']} section "
        "disagreements resolved in `eval/annotations.yaml`.",
        "",
        "| pair | Cohen's kappa (answerable / partial / unsupported) | label agreement "
        "| identical sections (both answerable) | mean section Jaccard |",
        "|---|---|---|---|---|",
    ]
    for pair, p in g["pairs"].items():
        lines.append(
            f"| {pair} | {p['kappa']:.2f} | {p['label_agreement']:.2f} | "
            f"{p['sections_identical']} of {p['both_answerable']} | {p['sections_mean_jaccard']:.2f} |"
        )
    return "\n".join(lines) + "\n"


def mutation_table(root: Path) -> str:
    m = _load(root, "mutation.json")
    lines = [
        f"`make mutate` ({m['tool']}): per module, the mutants its tests were run against, how many they killed, "
        "and the survivors (named equivalents in brackets); the score is killed over mutants that are not "
        "equivalent.",
        "",
        "| module | mutated | mutants | killed | survived (equivalent) | score | floor |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, e in m["modules"].items():
        scope = ", ".join(f"`{f}`" for f in e["functions"]) or "every function"
        lines.append(
            f"| {name} | `{e['path']}`: {scope} | {e['mutants']} | {e['killed']} | "
            f"{e['survived']} ({e['equivalent']}) | {e['score'] * 100:.1f}% | {e['floor'] * 100:.0f}% |"
        )
    unexplained = [f"`{s['mutant']}`" for e in m["modules"].values() for s in e["survivors"] if not s["equivalent"]]
    lines += ["", "Survivors not named as equivalent: " + (", ".join(unexplained) if unexplained else "none") + "."]
    return "\n".join(lines) + "\n"


def bench_table(root: Path) -> str:
    """Medians of the committed pytest-benchmark baseline (``make bench-save``): the newest
    saved run under ``eval/benchmarks/``."""
    runs = sorted((root / "eval" / "benchmarks").glob("*/*.json"), key=lambda p: p.name)
    if not runs:
        return "No benchmark baseline is committed yet (`make bench-save`).\n"
    run = json.loads(runs[-1].read_text(encoding="utf-8"))
    info = run["machine_info"]
    lines = [
        f"Baseline `{runs[-1].name}`, saved {run['datetime'][:10]}: {info.get('cpu', {}).get('count', '?')} CPUs, "
        f"Python {info['python_version']}.",
        "",
        "| benchmark | median ms | min ms | rounds |",
        "|---|---|---|---|",
    ]
    for b in sorted(run["benchmarks"], key=lambda b: b["fullname"]):
        st = b["stats"]
        name = b["fullname"].removeprefix("tests/")
        lines.append(f"| `{name}` | {st['median'] * 1e3:.3f} | {st['min'] * 1e3:.3f} | {st['rounds']} |")
    return "\n".join(lines) + "\n"


def container_run(root: Path) -> str:
    return f"```\ndocker build -t {container.IMAGE} .\n{container.run_line()}\n```\n"


def container_table(root: Path) -> str:
    return container.render(_load(root, "container.json"))


def injection_table(root: Path) -> str:
    return injection.render(_load(root, injection.REPORT))


def stale_example(root: Path) -> str:
    """What index-status says after one byte is appended to a corpus file (manifest updated),
    run for real on a temporary copy of the project."""
    with tempfile.TemporaryDirectory() as tmp:
        copy = copy_project(root, Path(tmp))
        target = copy / "corpus" / "rfc8259.txt"
        old = target.read_bytes()
        target.write_bytes(old + b"x")
        manifest = copy / "corpus" / "manifest.yaml"
        manifest.write_text(
            manifest.read_text()
            .replace(hashlib.sha256(old).hexdigest(), hashlib.sha256(old + b"x").hexdigest())
            .replace(f"bytes: {len(old)}", f"bytes: {len(old) + 1}")
        )
        described = index_status(Paths(copy)).describe()
    return f"```\n$ rag-contract index-status\n{described}\n```\n"


def _committed(name: str, render_report: Callable[[dict], str], missing: str) -> Callable[[Path], str]:
    """The block of the committed ``eval/results/<name>`` by ``render_report``; ``missing`` while
    there is none."""

    def table(root: Path) -> str:
        path = Paths(root).result(name)
        return render_report(json.loads(path.read_text())) if path.is_file() else missing

    return table


load_table = _committed(
    "load.json", render, "No load run is committed yet (`make load` writes `eval/results/load.json`).\n"
)
request_cpu_table = _committed(
    "request_cpu.json",
    request_cpu.render,
    "No CPU run is committed yet (`make request-cpu` writes `eval/results/request_cpu.json`).\n",
)
startup_table = _committed(
    "startup.json",
    startup.render,
    "No start-up run is committed yet (`make startup` writes `eval/results/startup.json`).\n",
)
probe_table = _committed(
    probe.REPORT, probe.render, "No probe run is committed yet (`make probe` writes `eval/results/probe.json`).\n"
)
redbot_table = _committed(
    redbot_lint.REPORT,
    redbot_lint.render,
    "No REDbot run is committed yet (`make http-lint` writes `eval/results/redbot.json`).\n",
)
observability_table = _committed(
    "observability.json",
    observability_load.render,
    "No run is committed yet (`python -m tools.observability_load` writes it).\n",
)


RENDERERS: dict[str, Callable[[Path], str]] = {
    "retrieval": retrieval_table,
    "answers": answers_table,
    "abstention": abstention_table,
    "calibration": calibration_table,
    "agreement": agreement_table,
    "mutation": mutation_table,
    "load": load_table,
    "request-cpu": request_cpu_table,
    "bench": bench_table,
    "startup": startup_table,
    "container-run": container_run,
    "container": container_table,
    "observability": observability_table,
    "injection": injection_table,
    "probe": probe_table,
    "redbot": redbot_table,
    "stale-example": stale_example,
    "pr-summary": example_summary,
    "projects": projects_table,
    "held-out": held_out_table,
}

# Every document holding generated blocks: the README and the reference pages it links to.
DOCUMENTS = (
    "README.md",
    "docs/retrieval.md",
    "docs/gate.md",
    "docs/refusing.md",
    "docs/index-and-budgets.md",
    "docs/http.md",
    "docs/operating.md",
    "docs/held-out.md",
)


def render_readme(root: Path, text: str, document: str = "README.md") -> str:
    def sub(m: re.Match) -> str:
        name = m.group("name")
        if name not in RENDERERS:
            raise KeyError(f"{document}: unknown generated block {name!r}")
        return m.group(1) + RENDERERS[name](root) + m.group(4)

    return _BLOCK.sub(sub, text)


def update_readme(root: Path) -> bool:
    changed = False
    for document in DOCUMENTS:
        path = root / document
        old = path.read_text(encoding="utf-8")
        new = render_readme(root, old, document)
        if new != old:
            path.write_text(new, encoding="utf-8")
            changed = True
    return changed


def main() -> int:
    root = find_root()
    changed = update_readme(root)
    print("README.md and docs/ regenerated" if changed else "README.md and docs/ already match eval/results/")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
