"""rag-contract: the command line. A presenter: every decision is made in the core."""

from __future__ import annotations

import argparse
import contextlib
import datetime
import functools
import json
import os
import sys
import time
from pathlib import Path

from tqdm import tqdm

from rag_contract.adaptation.pairs import NEGATIVES
from rag_contract.answering.drafting import DraftError, ExtractiveDrafter, FixtureDrafter, RecordedOrDrafted
from rag_contract.answering.free_text import AskRejected, validate_question
from rag_contract.answering.live_drafter import LiveDrafter, live_drafter_for
from rag_contract.answering.service import Abandoned, committed_vector
from rag_contract.config.about import AboutError
from rag_contract.config.calibration import CalibrationError, load_calibration
from rag_contract.config.corpus_selection import SelectionError, selection_of
from rag_contract.config.questions import QuestionsError
from rag_contract.config.thresholds import ThresholdsError
from rag_contract.corpus.chunking import ChunkingError
from rag_contract.corpus.section_list import section_rows
from rag_contract.corpus.sources import CorpusError, inventory
from rag_contract.embedders import make_embedder
from rag_contract.embedders.base import EmbedderError
from rag_contract.index.registry import Registry
from rag_contract.index.status import index_status
from rag_contract.index.store import (
    IndexLoadError,
    build_index,
    load_index,
    plan_build,
    previous_build,
    save_index,
)
from rag_contract.observability.settings import ObservabilityConfigError
from rag_contract.openai_client import ClientConfigError
from rag_contract.project import Paths, find_root, load_project, read_development, read_questions
from rag_contract.quality.abstention import write_curve
from rag_contract.quality.accuracy import line as accuracy_line
from rag_contract.quality.adapted_folds import FoldLegsError
from rag_contract.quality.agreement import agreement_report, load_annotations
from rag_contract.quality.blind_packet import load_blind, merge_blind, packet_yaml
from rag_contract.quality.calibration import FALSE_ANSWER_COST, calibrate, folds
from rag_contract.quality.evaluation import answers_report, evaluate_project
from rag_contract.quality.gate import GateContext, checks, frozen_clock, run_check
from rag_contract.quality.held_out import committed_hashes, held_out_report, sha256_of
from rag_contract.quality.rate_text import rate_text
from rag_contract.quality.recording import draft_all, write_drafts
from rag_contract.quality.report_diff import (
    ReportSet,
    RevisionError,
    diff_reports,
    load_report_set,
    measure_revision,
    render_markdown,
    render_text,
    save_report_set,
)
from rag_contract.quality.thresholds_file import update_thresholds, write_fitted
from rag_contract.scaffold.project_init import NEXT_STEPS, InitError, init_project
from rag_contract.spend import PricesError, SpendLedgerError, SpendRefused
from rag_contract.text.english import zipf
from rag_contract.web.serving import (
    ServeConfigError,
    build_services,
    embedder_for,
    port_from,
    redis_url_from,
    serve,
)

# Refusals a person acts on: printed as one line naming the file, key or cap, never a traceback.
LOAD_ERRORS = (
    CorpusError,
    ThresholdsError,
    QuestionsError,
    IndexLoadError,
    ChunkingError,
    EmbedderError,
    DraftError,
    SpendRefused,
    SpendLedgerError,
    PricesError,
    ClientConfigError,
    ServeConfigError,
    ObservabilityConfigError,
    RevisionError,
    AboutError,
    SelectionError,
    CalibrationError,
    InitError,
    FoldLegsError,
    FileNotFoundError,
)


def _project(args):

    return load_project(
        Path(args.root) if args.root else None,
        questions=Path(args.questions) if getattr(args, "questions", None) else None,
    )


# --- commands --------------------------------------------------------------------------


def cmd_sections(args) -> int:
    """Every section id with its title and parent (``--grep``: those matching); ``--counts``: per document."""
    project = _project(args)
    inv = inventory(project.corpus)
    if args.counts:
        if args.json:
            print(json.dumps(inv, indent=1))
            return 0
        w = max([9, *(len(row["document"]) + 1 for row in inv["documents"])])
        print(f"{'document':<{w}} {'sections':>8} {'with prose':>10} {'words':>8} {'dropped':>7}  title")
        for row in inv["documents"]:
            print(
                f"{row['document']:<{w}} {row['sections']:>8} {row['with_prose']:>10} {row['words']:>8}"
                f" {row['dropped']:>7}  {row['title']}"
            )
        t = inv["total"]
        print(f"{'total':<{w}} {t['sections']:>8} {t['with_prose']:>10} {t['words']:>8} {t['dropped']:>7}")
        _print_skipped("not read", [(s["file"], s["reason"]) for s in inv["skipped"]])
        return 0
    rows = section_rows(project.corpus.sections, args.grep)
    if args.json:
        print(json.dumps({"sections": [r.as_dict() for r in rows], **inv}, indent=1, ensure_ascii=False))
        return 0
    w = max([2, *(len(r.id) for r in rows)])
    print(f"{'id':<{w}}  title  (parent)")
    for r in rows:
        print(f"{r.id:<{w}}  {r.title}" + (f"  (in {r.parent})" if r.parent else ""))
    t = inv["total"]
    matched = f"{len(rows)} of " if args.grep else ""
    print(
        f"{matched}{t['sections']} sections ({t['with_prose']} with prose, {t['words']} words) in "
        f"{len(inv['documents'])} document(s); per document: rag-contract sections --counts"
    )
    _print_skipped("not read", [(s["file"], s["reason"]) for s in inv["skipped"]])
    return 0


def _print_skipped(what: str, skipped: list[tuple[str, str]]) -> None:
    if skipped:
        print(f"{what}: {len(skipped)} file(s)")
        for file, reason in skipped:
            print(f"  {file}: {reason}")


def cmd_index_status(args) -> int:

    root = Path(args.root) if args.root else find_root()
    status = index_status(Paths(root), Path(args.questions) if args.questions else None)
    print(json.dumps(status.as_dict(), indent=1) if args.json else status.describe())
    return 0 if status.fresh else 1


def cmd_build_index(args) -> int:
    """Embed what the index at the destination does not hold already (``--full``: everything)."""
    project = _project(args)
    name = args.embedder or project.thresholds.index.embedder
    embedder = make_embedder(name, project.paths.models, building=True)
    out = Path(args.out) if args.out else project.paths.index
    previous, why = (None, "--full") if args.full else previous_build(out)
    plan = plan_build(project.corpus, project.chunk_params, embedder.identity, project.questions.questions, previous)
    if hasattr(embedder, "authorise_build"):
        # A paid embedder asks the spend ledger before any call, for the texts it will embed; refusal writes nothing.
        embedder.authorise_build(project, plan.missing)
    with tqdm(total=len(plan.missing), desc="embedding", unit="text", disable=args.no_progress) as bar:
        index = build_index(
            project.corpus, project.chunk_params, embedder, name, project.questions.questions, bar.update, plan
        )
    save_index(index, out)
    print(
        f"index {index.version}: {len(index.sections)} sections, {len(index.chunks)} chunks -> {out}; "
        f"embedded {len(plan.missing)} text(s), reused {plan.reused} from the index there"
        + (f" ({why})" if why else "")
    )
    return 0


def cmd_eval(args) -> int:

    project = _project(args)
    report = evaluate_project(project)
    text = report.to_json()
    if not args.questions and not args.no_write:
        project.paths.result("retrieval.json").write_text(text)
    print(report.quiet() if args.quiet else text, end="" if not args.quiet else "\n")
    return 0


def cmd_agreement(args) -> int:
    project = _project(args)
    report = agreement_report(load_annotations(project.paths.annotations), project.questions)
    text = json.dumps(report, indent=1) + "\n"
    if not args.no_write:
        project.paths.result("agreement.json").write_text(text)
    print(text, end="")
    return 0


def cmd_annotation_packet(args) -> int:
    text = packet_yaml(_project(args).questions)
    if args.out:
        Path(args.out).write_text(text)
    else:
        print(text, end="")
    return 0


def cmd_annotation_import(args) -> int:
    project = _project(args)
    blind = load_blind(Path(args.file), project.questions, {s.id for s in project.corpus.sections})
    path = project.paths.annotations
    text, unresolved = merge_blind(path.read_text(), blind, args.annotator)
    path.write_text(text)
    print(f"{path.name}: {len(blind)} annotations of {args.annotator} written")
    if unresolved:
        print(f"{len(unresolved)} records differ with no resolution; write one for each: {', '.join(unresolved)}")
        return 1
    return 0


def _services(project, index=None):
    """(fixture service, extractive service for free text) over one registry, as served."""

    index = index or load_index(project.paths.index)
    registry = Registry(index)
    embedders = embedder_for(functools.partial(make_embedder, models=project.paths.models))
    embedders(index.embedder_name).embed(["warm-up"])  # load the model now, not inside a request's deadline
    zipf("the")  # and the English word list
    return build_services(
        registry,
        project.thresholds,
        fixture_drafter=FixtureDrafter(project.paths.drafts),
        ask_drafter=ExtractiveDrafter.committed(project.thresholds.drafting),
        embedders=embedders,
        clock=time.perf_counter,
    )


def _print_answer(answer, as_json: bool) -> int:

    if as_json:
        print(json.dumps(answer.as_dict(), indent=1, ensure_ascii=False))
        return 0 if answer.http_status == 200 else 1
    if isinstance(answer, Abandoned):
        print(f"ABANDONED (index {answer.index_version}): {answer.detail}")
        return 1
    print(
        f"{answer.state.value.upper()}  (index {answer.index_version}, drafter {answer.drafter}, "
        f"{answer.budget.spent_ms:.1f} ms of {answer.budget.deadline_ms:g})"
    )
    print(f"Q: {answer.question}")
    for v in answer.kept:
        print(f"  + {v.claim.text}  [{v.claim.section_id}]")
    for v in answer.withdrawn:
        print(f"  - WITHDRAWN ({v.rule}): {v.claim.text}  [{v.claim.section_id}]\n      {v.detail}")
    if answer.relevance is not None and answer.relevance.asked is not None:
        asked = answer.relevance.asked
        about = ", ".join(f"'{w}'" for w in asked.focus[:3]) or "(no focus words)"
        print(f"  asked for: {asked.answer_type.value.replace('_', ' ')}, about {about}")
    if answer.relevance is not None:
        print(f"  relevance: {answer.relevance.reason()}")
    if answer.state.value == "unsupported" and answer.relevance is None:
        print("  refused: no claim survived the grounding check.")
    elif answer.state.value == "no_context":
        print(f"  service error: {answer.detail}")
    print("  passages consulted: " + ", ".join(f"{p.section_id} ({p.title})" for p in answer.passages))
    return 0 if answer.http_status == 200 else 1


def cmd_answer(args) -> int:
    project = _project(args)
    q = project.questions.get(args.question_id)
    if q is None:
        print(f"rag-contract: unknown question id {args.question_id!r}", file=sys.stderr)
        return 2
    fixture, _ = _services(project)
    return _print_answer(fixture.answer(q.question, q.id), args.json)


def cmd_ask(args) -> int:

    project = _project(args)
    try:
        text = validate_question({"question": args.question}, project.thresholds.ask.max_question_chars)
    except AskRejected as exc:
        print(f"rag-contract: question refused: {exc.reason}", file=sys.stderr)
        return 2
    _, extractive = _services(project)
    return _print_answer(extractive.answer(text), args.json)


def cmd_eval_answers(args) -> int:

    project = _project(args)
    index = load_index(project.paths.index)
    fixture, _ = _services(project, index)
    fixture.clock = frozen_clock  # as the gate measures it: states, never timings
    if args.questions:
        # A question file of its own: recorded drafts where they exist, drafted otherwise.
        fallback = (
            live_drafter_for(project, index)
            if args.drafter == "live"
            else ExtractiveDrafter.committed(project.thresholds.drafting)
        )
        fixture.drafter = RecordedOrDrafted(FixtureDrafter(project.paths.drafts), fallback)
    report = answers_report(fixture, project.questions.questions, index.version)
    text = json.dumps(report, indent=1, ensure_ascii=False) + "\n"
    if not args.questions and not args.no_write:
        project.paths.result("answers.json").write_text(text)
    if args.quiet:
        answerable, refusals = report["answerable"], report["refusals"]
        print(
            f"index {index.version} | grounded {rate_text(report['grounded_rate'], answerable)} of {answerable} | "
            f"cites expected {rate_text(report['expected_citation_rate'], answerable)} | "
            f"state agreement {rate_text(report['state_agreement'], refusals)} of {refusals} | "
            f"answered unanswerable {report['answered_unanswerable']} | "
            f"withdrawn {report['claims_withdrawn']} of {report['claims']} | {accuracy_line(report['accuracy'])}"
        )
    else:
        print(text, end="")
    return 0


def cmd_thresholds_update(args) -> int:
    """Re-measure (retrieval and answers, as committed), then rewrite the bars by the rules."""
    project = _project(args)
    index = load_index(project.paths.index)
    retrieval = evaluate_project(project, index).as_dict()
    fixture, _ = _services(project, index)
    answers = answers_report(fixture, project.questions.questions, index.version)
    update = update_thresholds(
        project.paths.thresholds, project.thresholds, retrieval, answers, index.version, args.allow_loosen, args.dry_run
    )
    for change in update.changes:
        print(change.describe())
    if update.kept:
        kept = ", ".join(update.kept[:10])
        print(f"{len(update.kept)} bar(s) would loosen and were kept (pass --allow-loosen): {kept}")
    print(update.diff, end="")
    print(f"{len(update.changes)} change(s){' (dry run)' if args.dry_run else ''}; measured on {index.version}")
    return 0


def cmd_diff(args) -> int:
    """Per-question rank and state changes between two report sets; a base revision is measured."""
    if args.base:
        if len(args.reports) > 1:
            raise SystemExit("rag-contract diff: with --base, give at most one report directory (the head)")
        root = Path(args.root) if args.root else find_root()
        old = measure_revision(root, args.base)
        if args.save_base:
            save_report_set(old, Path(args.save_base))
        head = args.reports[0] if args.reports else None
    else:
        if len(args.reports) != 2:
            raise SystemExit("rag-contract diff: give two eval/results/ directories, or --base REV")
        old = load_report_set(Path(args.reports[0]))
        head = args.reports[1]
    if head is not None:
        new = load_report_set(Path(head))
    else:  # the working tree, measured now as the gate measures it
        ctx = GateContext(Path(args.root) if args.root else find_root())
        new = ReportSet(ctx.retrieval.as_dict(), ctx.answers)
    diff = diff_reports(old, new)
    print((render_markdown if args.markdown else render_text)(diff, args.max_rows), end="")
    return 0


def cmd_held_out(args) -> int:
    """Answer a held-out question file as a reader's free text is answered; report it whole."""
    project = _project(args)
    path = Path(args.questions)
    questions = read_questions(path, project.corpus)
    digest = sha256_of(path)
    sealed = committed_hashes(project.paths.root / "eval" / "sealed" / "SHA256SUMS").get(path.name) == digest
    _, extractive = _services(project)
    extractive.clock = frozen_clock  # states, never timings
    config = load_calibration(project.paths.calibration, project.paths.root)
    development = path.resolve() in {(project.paths.root / p).resolve() for p in config.development}
    report = held_out_report(
        extractive, questions.questions, project.thresholds.retrieval.top_k, digest, sealed, development
    )
    if args.write:
        project.paths.result(f"{path.stem}.json").write_text(json.dumps(report, indent=1, ensure_ascii=False) + "\n")
    a, u = report["answerable"], report["unanswerable"]
    print(
        f"{path.name} ({'sealed' if sealed else 'not the sealed file'}"
        f"{', a development set the fit learns from' if development else ''}): answerable {a['questions']}, "
        f"answered citing expected {a['answered_citing_expected']}, grounded citing expected "
        f"{a['grounded_citing_expected']}, r@1 {a['recall@1']} mrr {a['mrr']} | unanswerable {u['questions']}, "
        f"answered grounded {len(u['answered_grounded'])} ({rate_text(u['answered_grounded_rate'], u['questions'])}) | "
        f"{accuracy_line(report['accuracy'])}"
    )
    return 0


def cmd_calibrate(args) -> int:
    """Fit every weight and threshold with cross-validation; report out of fold and in sample."""
    project = _project(args)
    index = load_index(project.paths.index)
    report = calibrate(project, index, args.false_answer_cost)
    if not args.no_write and args.false_answer_cost == FALSE_ANSWER_COST:
        project.paths.result("calibration.json").write_text(json.dumps(report, indent=1) + "\n")
        write_curve(project.paths.root, report)
    if args.write_thresholds and args.false_answer_cost == FALSE_ANSWER_COST:
        write_fitted(project.paths.thresholds, report["params"])
    for name in ("out_of_fold", "in_sample"):
        r, a = report[name]["retrieval"], report[name]["answers"]
        print(
            f"{name:11} | fused r@1={r['recall@1']:.3f} r@10={r['recall@10']:.3f} mrr={r['mrr']:.3f} | "
            f"grounded citing expected {rate_text(a['grounded_citing_expected'], a['answerable'], '.3f')} "
            f"of {a['answerable']} | state agreement {rate_text(a['state_agreement'], a['refusals'], '.3f')} "
            f"of {a['refusals']} | "
            f"unanswerable answered {len(a['answered_unanswerable'])} | {accuracy_line(a['accuracy'])}"
        )
    return 0


def cmd_adapt(args) -> int:
    """Tune the embedder on this corpus and its questions (the ``train`` extra: ``make adapt``)."""
    try:
        # torch stays off every other command's import path: only this one trains
        import rag_contract.adaptation.adapt as adapt  # noqa: PLC0415
        from rag_contract.adaptation.training import Settings  # noqa: PLC0415
    except ImportError as exc:
        print(f"rag-contract adapt: needs the train extra ({exc.name} is missing): `make adapt`", file=sys.stderr)
        return 2
    project = _project(args)
    chosen = (("epochs", args.epochs), ("lr", args.lr), ("negatives", args.negatives))
    settings = Settings(**{k: v for k, v in chosen if v is not None})
    kinds = tuple(args.pairs.split(",")) if args.pairs else adapt.DEFAULT_KINDS
    extra: list = []
    if args.development:
        config = load_calibration(project.paths.calibration, project.paths.root)
        extra = [q for _, qs in read_development(project, config.development) for q in qs]

    def progress(line: str) -> None:
        if not args.quiet:
            print(line, file=sys.stderr, flush=True)

    try:
        if args.folds:
            index = load_index(project.paths.index)
            out = Path(args.out) if args.out else None
            record = adapt.adapt_folds(
                project,
                index,
                folds(project.questions.questions),
                settings,
                kinds,
                progress,
                out,
                args.only_folds,
                extra,
            )
        else:
            record = adapt.adapt_serving(project, settings, kinds, progress, extra)
    except adapt.AdaptError as exc:
        print(f"rag-contract adapt: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(record, indent=1))
    return 0


def cmd_record_drafts(args) -> int:

    project = _project(args)
    index = load_index(project.paths.index)
    drafter: ExtractiveDrafter | LiveDrafter
    if args.drafter == "extractive":
        drafter = ExtractiveDrafter.committed(project.thresholds.drafting)
    else:
        drafter = live_drafter_for(project, index)  # asks the spend ledger before every call
    date = args.date or datetime.date.today().isoformat()
    # A question written since the build has no vector in the index: embedded here, as the gate does.
    query_vector = committed_vector(make_embedder(index.embedder_name, project.paths.models))
    drafts = draft_all(index, project.thresholds, drafter, project.questions.questions, date, query_vector)
    out = Path(args.out) if args.out else project.paths.drafts
    paths = write_drafts(drafts, out)
    print(f"{len(paths)} drafts by {drafter.name} over index {index.version} -> {out}")
    return 0


def cmd_gate(args) -> int:

    root = Path(args.root) if args.root else None

    ctx = GateContext(root or find_root())
    failed = 0
    all_checks = checks(ctx)
    for check in all_checks:
        outcome = run_check(check, ctx)
        failed += not outcome.passed
        if not outcome.passed or args.verbose:
            print(f"{'PASS' if outcome.passed else 'FAIL'} {check.id}: {outcome.message}")
    print(f"{len(all_checks) - failed} passed, {failed} failed")
    return 1 if failed else 0


def cmd_init(args) -> int:
    """Scaffold a project from documents, then say what to run next."""
    done = init_project(
        Path(args.directory),
        [Path(p) for p in args.sources],
        kept=[Path(p) for p in args.keep],
        name=args.name,
        description=args.description,
        source_base=args.source_base,
        licence=args.licence,
        selection=selection_of(args.include, args.exclude),
    )
    kept = f" and {len(done.kept)} kept file(s)" if done.kept else ""
    print(f"{done.root}: {len(done.documents)} document(s){kept} in corpus/, {done.sections} sections")
    for note in done.notes:
        print(f"navigation: {note}")
    _print_skipped("skipped", [(s.file, s.reason) for s in done.skipped])
    print("wrote corpus/manifest.yaml, eval/questions.yaml, eval/thresholds.yaml, eval/prices.yaml, project.yaml")
    print(f"next, in {done.root} (or with --root {done.root}):")
    width = max(len(command) for command, _ in NEXT_STEPS)
    for command, why in NEXT_STEPS:
        print(f"  {command:<{width}}  # {why}")
    return 0


def cmd_measure(args) -> int:
    """Every measurement the gate compares with, in order: (calibrate,) drafts, reports, bars."""
    root = ["--root", args.root] if args.root else []
    steps = [["record-drafts"], ["eval", "--quiet"], ["eval-answers", "--quiet"], ["thresholds", "update"]]
    if args.calibrate:
        steps.insert(0, ["calibrate", "--write-thresholds"])
    if args.allow_loosen:
        steps[-1].append("--allow-loosen")
    parser = build_parser()
    for step in steps:
        print(f"$ rag-contract {' '.join(step)}", flush=True)
        sub = parser.parse_args([*root, *step])
        code = sub.func(sub)
        if code:
            return code
    return 0


def cmd_serve(args) -> int:

    port = args.port if args.port is not None else port_from(os.environ.get("PORT") or "8000")
    redis_url = redis_url_from(args.redis, "--redis") if args.redis else None
    if redis_url is None and os.environ.get("REDIS_URL"):
        redis_url = redis_url_from(os.environ["REDIS_URL"])
    root = Path(args.root) if args.root else find_root()
    serve(args.host, port, workers=args.workers, redis_url=redis_url, root=root)
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="rag-contract", description=__doc__)
    p.add_argument("--root", help="project directory (default: found from the current directory)")
    sub = p.add_subparsers(dest="command", required=True)

    s = sub.add_parser("sections", help="every section id, title and parent, the ids questions expect (no network)")
    s.add_argument("--json", action="store_true", help="the list, and the per-document counts, as JSON")
    s.add_argument("--grep", metavar="WORD", help="only sections whose id or title holds WORD (any case)")
    s.add_argument("--counts", action="store_true", help="instead: sections, prose and words per document")
    s.set_defaults(func=cmd_sections)

    s = sub.add_parser("index-status", help="does the index still match the corpus? exit 1 when stale")
    s.add_argument("--json", action="store_true")
    s.add_argument("--questions", help="question file to fingerprint (default eval/questions.yaml)")
    s.set_defaults(func=cmd_index_status)

    s = sub.add_parser("build-index", help="embed the corpus and write index/ (local embedder: no key)")
    s.add_argument("--embedder", help="override index.embedder (e.g. openai-text-embedding-3-small)")
    s.add_argument("--out", help="write here instead of index/")
    s.add_argument("--no-progress", action="store_true")
    s.add_argument("--full", action="store_true", help="embed every text again, reusing no vector of the index there")
    s.set_defaults(func=cmd_build_index)

    s = sub.add_parser("thresholds", help="the bars in eval/thresholds.yaml")
    tsub = s.add_subparsers(dest="thresholds_command", required=True)
    t = tsub.add_parser(
        "update", help="re-measure and rewrite ceilings and floors by the committed rules (tighten-only)"
    )
    t.add_argument("--allow-loosen", action="store_true", help="also write bars that get looser (each is printed)")
    t.add_argument("--dry-run", action="store_true", help="print the changes, write nothing")
    t.set_defaults(func=cmd_thresholds_update)

    s = sub.add_parser(
        "diff",
        help="per-question rank and state changes, aggregate deltas, new and removed questions, "
        "between two eval/results/ directories or against a measured git revision",
    )
    s.add_argument(
        "reports",
        nargs="*",
        metavar="RESULTS_DIR",
        help="base and head eval/results/ directories (with --base: the head only; default: measured now)",
    )
    s.add_argument("--base", metavar="REV", help="measure this git revision in a temporary worktree as the base")
    s.add_argument("--save-base", metavar="DIR", help="with --base: also write the measured base reports here")
    s.add_argument("--markdown", action="store_true", help="Markdown instead of the terminal table")
    s.add_argument("--max-rows", type=int, default=50, help="question rows shown (default 50)")
    s.set_defaults(func=cmd_diff)

    s = sub.add_parser("agreement", help="annotator agreement on the question set; writes eval/results/agreement.json")
    s.add_argument("--no-write", action="store_true", help="print only")
    s.set_defaults(func=cmd_agreement)

    s = sub.add_parser(
        "annotation-packet", help="the question set for a blind annotator: opaque ids, shuffled, question text only"
    )
    s.add_argument("--out", help="write the packet here (default: print)")
    s.set_defaults(func=cmd_annotation_packet)

    s = sub.add_parser(
        "annotation-import", help="a blind annotator's answers to the packet, into eval/annotations.yaml by question id"
    )
    s.add_argument("file", help="the annotator's YAML file (answers: id, label, expected, evidence, foothold)")
    s.add_argument("--as", dest="annotator", choices=["A", "B"], default="B", help="the annotator's slot (default B)")
    s.set_defaults(func=cmd_annotation_import)

    s = sub.add_parser("eval", help="retrieval recall@k / MRR per mode; writes eval/results/retrieval.json")
    s.add_argument("--questions", help="evaluate this question file instead (not written to results)")
    s.add_argument("--quiet", action="store_true", help="one line")
    s.add_argument("--no-write", action="store_true", help="print only")
    s.set_defaults(func=cmd_eval)

    s = sub.add_parser(
        "eval-answers", help="grounded rate, state agreement, answered-unanswerable; writes eval/results/answers.json"
    )
    s.add_argument("--questions", help="answer this question file instead (not written to results)")
    s.add_argument(
        "--drafter",
        choices=["extractive", "live"],
        default="extractive",
        help="with --questions: drafts questions that have no recorded draft (live: paid, capped)",
    )
    s.add_argument("--quiet", action="store_true")
    s.add_argument("--no-write", action="store_true")
    s.set_defaults(func=cmd_eval_answers)

    s = sub.add_parser(
        "calibrate",
        help="fit weights and thresholds by 5-fold cross-validation, report out of fold and in sample; "
        "writes eval/results/calibration.json, abstention.json and docs/abstention.svg",
    )
    s.add_argument("--write-thresholds", action="store_true", help="write the full fit to eval/thresholds.yaml")
    s.add_argument(
        "--false-answer-cost",
        type=float,
        default=FALSE_ANSWER_COST,
        help="what one unanswerable question answered costs, in answerable ones unanswered "
        "(another value only prints: the committed fit uses the default)",
    )
    s.add_argument("--no-write", action="store_true", help="print only")
    s.set_defaults(func=cmd_calibrate)

    s = sub.add_parser(
        "held-out",
        help="answer a held-out question file (the sealed set) as free text is answered; "
        "with --write, eval/results/<file name>.json",
    )
    s.add_argument("questions", help="a question file in the schema of eval/questions.yaml")
    s.add_argument("--write", action="store_true")
    s.set_defaults(func=cmd_held_out)

    s = sub.add_parser(
        "adapt",
        help="tune the embedder on the corpus's structure and the questions; writes models/minilm-l6-adapted.onnx "
        "(needs the train extra: make adapt)",
    )
    s.add_argument(
        "--folds",
        action="store_true",
        help="instead: one model per calibration fold, tuned without that fold's questions; writes the vector "
        "legs calibrate ranks each fold's questions by (models/minilm-l6-adapted-folds.npz)",
    )
    s.add_argument("--epochs", type=int, help="default 1")
    s.add_argument("--lr", type=float, help="default 2e-5")
    s.add_argument(
        "--pairs",
        help="pair kinds, comma-separated, of heading,cloze,question,definition (default heading,cloze,question)",
    )
    s.add_argument("--negatives", choices=NEGATIVES, help="hard negatives for question pairs (default none)")
    s.add_argument("--out", help="with --folds: write the legs here instead")
    s.add_argument(
        "--only-folds",
        type=lambda v: tuple(int(x) for x in v.split(",")),
        default=(),
        help="with --folds: these folds alone (a trial)",
    )
    s.add_argument(
        "--development",
        action="store_true",
        help="train on the development sets' questions too (eval/calibration.yaml); every fold trains on all of them",
    )
    s.add_argument("--quiet", action="store_true", help="no progress lines")
    s.set_defaults(func=cmd_adapt)

    s = sub.add_parser("answer", help="answer one question of the fixed set, showing its state")
    s.add_argument("question_id")
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=cmd_answer)

    s = sub.add_parser("ask", help="answer free text with the extractive drafter, under the same grounding")
    s.add_argument("question")
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=cmd_ask)

    s = sub.add_parser("record-drafts", help="write eval/fixtures/drafts/ (extractive: no key; live: paid, capped)")
    s.add_argument("--drafter", choices=["extractive", "live"], default="extractive")
    s.add_argument("--date", help="the recording date written into each fixture (default: today)")
    s.add_argument("--out", help="write here instead of eval/fixtures/drafts/")
    s.set_defaults(func=cmd_record_drafts)

    s = sub.add_parser("gate", help="every gate check, as pytest -m gate runs them; exit 1 on any failure")
    s.add_argument("-v", "--verbose", action="store_true", help="print passing checks too")
    s.set_defaults(func=cmd_gate)

    s = sub.add_parser("init", help="a new project from your documents (Markdown, HTML, reStructuredText, RFC text)")
    s.add_argument("directory", help="where to write the project (new or empty)")
    s.add_argument("--from", dest="sources", nargs="+", required=True, metavar="PATH", help="documents or directories")
    s.add_argument("--keep", nargs="*", default=[], metavar="FILE", help="copy beside the documents, unparsed")
    s.add_argument("--name", help="what the corpus is, for the drafter (default: from the directory name)")
    s.add_argument("--description", help='completes "answers over ..." on every page (default: the name)')
    s.add_argument("--source-base", help="URL the documents were taken from (each entry's source: URL/file)")
    s.add_argument("--licence", help="the documents' licence, recorded for each")
    s.add_argument(
        "--include", nargs="+", default=[], metavar="GLOB", help="only files matching one (kept in project.yaml)"
    )
    s.add_argument(
        "--exclude", nargs="+", default=[], metavar="GLOB", help="leave out files matching one (kept in project.yaml)"
    )
    s.set_defaults(func=cmd_init)

    s = sub.add_parser(
        "measure",
        help="record drafts (extractive), write the reports, then thresholds update; --calibrate refits first",
    )
    s.add_argument("--calibrate", action="store_true", help="first refit the weights (calibrate --write-thresholds)")
    s.add_argument("--allow-loosen", action="store_true", help="thresholds update may loosen bars (a first run)")
    s.set_defaults(func=cmd_measure)

    s = sub.add_parser("serve", help="serve the HTTP API and pages (uvicorn)")
    s.add_argument("--host", default="127.0.0.1")
    s.add_argument("--port", type=int, default=None, help="default: $PORT or 8000")
    s.add_argument("--workers", type=int, default=1)
    s.add_argument("--redis", help="share rate-limit buckets through Redis (default: $REDIS_URL; else in memory)")
    s.set_defaults(func=cmd_serve)
    # --root after the command too (rag-contract serve --root DIR), for every command
    for parser in [*sub.choices.values(), *tsub.choices.values()]:
        parser.add_argument("--root", default=argparse.SUPPRESS, help="project directory (as before the command)")
    return p


# What a shell reports for a command a closed pipe ended (128 + SIGPIPE).
CLOSED_PIPE_EXIT = 141


def _stdout_closed() -> int:
    """The reader of stdout has gone (``rag-contract sections --json | head -1``): nothing is
    left to say. Later writes, and the interpreter's flush at exit, go to the null device
    instead of ending in a second BrokenPipeError."""
    with contextlib.suppress(OSError, ValueError):  # a stdout with no descriptor (captured) needs none
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    return CLOSED_PIPE_EXIT


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        code = args.func(args)
        sys.stdout.flush()  # a closed pipe is met here, not in the flush at exit
        return code
    except LOAD_ERRORS as exc:
        print(f"rag-contract: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        return _stdout_closed()


if __name__ == "__main__":
    sys.exit(main())
