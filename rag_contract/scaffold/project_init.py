"""``rag-contract init DIR --from PATH...``: a project from a team's own documents.

Contract: ``init_project(root, sources, ...)`` refuses (``InitError``, one line) a ``root``
that already holds a project, a file given by name that no format reads (naming it and the
formats known) and two documents of one corpus path; otherwise it copies each document into
``root/corpus/`` and copies the ``kept`` files beside them (licence, provenance: verified by
nothing, parsed by nothing). A directory given as a source is walked with its sub-folders
(``corpus.discovery``): each page keeps its path relative to that directory
(``advanced/clients.md``, also the document part of its section ids), the ``selection`` globs
say which files count, and every file not taken is in ``Initialised.skipped`` with its reason.
It writes:

- ``corpus/manifest.yaml``: each document's file, title, format, source, licence, length and
  sha256, in the site's reading order. A page's title and place come from the MkDocs ``nav``
  when a ``mkdocs.yml`` is found where MkDocs keeps it (``corpus.site_navigation``: the folder
  above the documents, or beside them), else from the page itself when its format names one (a
  reStructuredText document title), else from the file name; it titles the page's lead
  section. What was found of the navigation is in ``Initialised.notes``.
- ``eval/questions.yaml``: the schema explained in comments and one example question about
  the first section with prose, so the project loads and builds before any is written.
- ``eval/thresholds.yaml``: budgets and starting weights, no bars yet (floors 0, no ceilings).
- ``eval/prices.yaml`` (the price table every paid call is capped with) and ``project.yaml``
  (with the ``selection`` globs under ``corpus``, so every later load leaves out what init did).

Then it loads the project it wrote, so what ``init`` leaves is a project every command reads.
``NEXT_STEPS`` are the commands that follow, in order.
"""

from __future__ import annotations

import datetime
import hashlib
import importlib.resources
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from rag_contract.config.corpus_selection import EVERYTHING, Selection
from rag_contract.corpus.discovery import Skipped, discover
from rag_contract.corpus.formats import FormatError, format_for, readable_suffixes
from rag_contract.corpus.sentences import sentences
from rag_contract.corpus.site_navigation import find_navigation
from rag_contract.corpus.sources import MANIFEST, load_corpus
from rag_contract.project import Paths, load_project

NEXT_STEPS = (
    ("rag-contract build-index", "embed the corpus with the local model (no key); writes index/"),
    (
        "edit eval/questions.yaml",
        "write questions; `rag-contract sections [--grep WORD]` lists the section ids to expect",
    ),
    (
        "rag-contract measure --allow-loosen",
        "record drafts, evaluate, and set every bar from the measurement (thresholds update)",
    ),
    ("rag-contract measure --calibrate", "from about 30 questions: refit the weights (cross-validated), then measure"),
    ("python -m pytest -m gate", "the gate: one test item per question, bar and budget"),
    ("rag-contract serve", "pages, /ask and /answer on http://127.0.0.1:8000"),
)


class InitError(ValueError):
    pass


@dataclass(frozen=True)
class Initialised:
    root: Path
    documents: tuple[str, ...]  # corpus paths, in reading order
    kept: tuple[str, ...]
    sections: int
    skipped: tuple[Skipped, ...] = ()  # files under a documents folder not taken, and why
    notes: tuple[str, ...] = ()  # what was found of each folder's site navigation


def _data(name: str) -> str:
    return importlib.resources.files("rag_contract.scaffold").joinpath("data", name).read_text(encoding="utf-8")


def title_from_name(name: str) -> str:
    """``advanced/client-setup.md`` -> "Client setup"; a folder's ``index.md`` (or ``README.md``)
    is titled by its folder, as a site shows it."""
    path = Path(name)
    stem = path.stem
    if stem.lower() in ("index", "readme") and path.parent.name:
        stem = path.parent.name
    stem = stem.replace("-", " ").replace("_", " ").strip()
    return stem[:1].upper() + stem[1:] if stem else name


@dataclass(frozen=True)
class _Document:
    path: Path
    file: str  # its corpus path
    title: str | None  # from the site's navigation
    rank: tuple[int, int]  # (its source, its place in that source's nav; unlisted pages after all listed)


def _documents(
    sources: Sequence[Path], kept: Sequence[Path], selection: Selection
) -> tuple[list[_Document], list[Skipped], list[str]]:
    """The documents (each directory walked), the files skipped and why, and notes on the
    site navigation of each directory."""
    kept_paths = {Path(k).resolve() for k in kept}
    found: list[_Document] = []
    skipped: list[Skipped] = []
    notes: list[str] = []
    for n, source in enumerate(sources):
        if source.is_dir():
            nav = find_navigation(source)
            notes.append(nav.note)
            ignore = {
                p.relative_to(source.resolve()).as_posix()
                for p in (*kept_paths, *((nav.config.resolve(),) if nav.config else ()))
                if p.is_relative_to(source.resolve())
            }
            aside = {nav.theme_dir: "the site theme's templates (mkdocs.yml theme.custom_dir)"} if nav.theme_dir else {}
            walked = discover(source, selection, ignore, aside)
            prefix = "" if len(sources) == 1 else f"{source.name}/"
            skipped += [Skipped(prefix + s.file, s.reason) for s in walked.skipped]
            place = {page: k for k, page in enumerate(nav.order)}
            found += [
                _Document(p.path, p.file, nav.titles.get(p.file), (n, place.get(p.file, len(place))))
                for p in walked.pages
            ]
            pages = {p.file for p in walked.pages}
            missing = [page for page in nav.order if page not in pages]
            if missing:
                notes.append(
                    f"{len(missing)} page(s) in the nav are not among the documents: {', '.join(missing[:5])}"
                    + (", ..." if len(missing) > 5 else "")
                )
        elif source.is_file():
            try:
                format_for(source.name)
            except FormatError as exc:
                raise InitError(str(exc)) from None
            refused = selection.refusal(source.name)
            if refused:  # the project's globs would refuse it at every load
                skipped.append(Skipped(source.name, refused))
            else:
                found.append(_Document(source, source.name, None, (n, 0)))
        else:
            raise InitError(f"{source}: no such file or directory")
    names: dict[str, Path] = {}
    for d in found:
        if d.file in names:
            raise InitError(f"{d.file}: two documents of this name ({names[d.file]} and {d.path})")
        names[d.file] = d.path
    if not found:
        known = ", ".join(readable_suffixes())
        raise InitError(f"no document to copy: give files or directories holding {known} files")
    return found, skipped, notes


def _own_title(name: str, data: bytes) -> str | None:
    own = format_for(name).title
    if own is None:
        return None
    try:
        return own(data)
    except ValueError as exc:
        raise InitError(f"{name}: {exc}") from None


def init_project(
    root: Path,
    sources: Sequence[Path],
    kept: Sequence[Path] = (),
    name: str | None = None,
    description: str | None = None,
    source_base: str | None = None,
    licence: str | None = None,
    today: datetime.date | None = None,
    selection: Selection = EVERYTHING,
) -> Initialised:
    root = Path(root)
    paths = Paths(root)
    for existing in (paths.corpus, root / "eval", paths.about):
        if existing.exists():
            raise InitError(f"{existing}: already there; init writes a new project into an empty directory")
    for k in kept:
        if not Path(k).is_file():
            raise InitError(f"{k}: no such file to keep")
    documents, skipped, notes = _documents([Path(s) for s in sources], [Path(k) for k in kept], selection)
    clash = {d.file for d in documents} & {Path(k).name for k in kept}
    if clash:
        raise InitError(f"{sorted(clash)[0]}: both a document and a kept file; keep it or leave it to be read")
    retrieved = (today or datetime.date.today()).isoformat()
    paths.corpus.mkdir(parents=True)
    entries = []
    for doc in sorted(documents, key=lambda d: (d.rank, d.file)):  # the site's reading order
        data = doc.path.read_bytes()
        (paths.corpus / doc.file).parent.mkdir(parents=True, exist_ok=True)
        (paths.corpus / doc.file).write_bytes(data)
        entry: dict[str, Any] = {
            "file": doc.file,
            "title": doc.title or _own_title(doc.file, data) or title_from_name(doc.file),
            "format": format_for(doc.file).name,
            "source": f"{source_base.rstrip('/')}/{doc.file}" if source_base else doc.file,
            "retrieved": retrieved,
            "bytes": len(data),
            "sha256": hashlib.sha256(data).hexdigest(),
        }
        if licence:
            entry["licence"] = licence
        entries.append(entry)
    for k in kept:
        shutil.copyfile(k, paths.corpus / Path(k).name)
    manifest: dict[str, Any] = {}
    if kept:
        manifest["kept"] = sorted(Path(k).name for k in kept)
    manifest["files"] = entries
    (paths.corpus / MANIFEST).write_text(
        "# Every document, verified byte for byte at load; a changed file is refused until this\n"
        "# entry is updated (and the index rebuilt). `kept` files sit beside them, unparsed.\n"
        "# Listed in the site's reading order (its navigation); sections are read in file order.\n"
        + yaml.safe_dump(manifest, sort_keys=False, allow_unicode=True, width=120),
        encoding="utf-8",
    )
    corpus = load_corpus(paths.corpus, selection)
    paths.results.mkdir(parents=True, exist_ok=True)
    paths.questions.write_text(_data("questions.yaml").replace("{example}", _example(corpus)), encoding="utf-8")
    paths.thresholds.write_text(_data("thresholds.yaml"), encoding="utf-8")
    paths.prices.write_text(_data("prices.yaml"), encoding="utf-8")
    label = name or f"the {root.resolve().name} documents"
    about: dict[str, Any] = {"name": label, "description": description or label}
    globs = (
        "# corpus: which files under the documents folder are documents (globs; docs/own-documents.md).\n"
        + yaml.safe_dump({"corpus": selection.as_yaml()}, sort_keys=False, allow_unicode=True)
        if selection.as_yaml()
        else ""
    )
    paths.about.write_text(
        '# What this project\'s corpus is, in words: the pages say "answers over <description>",\n'
        "# and the live drafter is told it answers questions about <name>.\n"
        + yaml.safe_dump(about, sort_keys=False, allow_unicode=True)
        + globs,
        encoding="utf-8",
    )
    project = load_project(root)  # what init leaves must load, or init has failed
    return Initialised(
        root,
        tuple(e["file"] for e in entries),
        tuple(Path(k).name for k in kept),
        len(project.corpus.sections),
        tuple(skipped),
        tuple(notes),
    )


def _example(corpus) -> str:
    """One question about the first section with a sentence of prose, its evidence quoted."""
    for s in corpus.sections:
        found = sentences(s.text)
        if found and s.title:
            evidence = " ".join(found[0].split()[:6])
            item = {
                "id": "q01",
                "question": f"What does the documentation say about {s.title}?",
                "expected": [s.id],
                "evidence": evidence,
            }
            text = yaml.safe_dump([item], sort_keys=False, allow_unicode=True, width=120)
            return "  # An example: replace it with your own questions.\n" + "".join(
                f"  {line}\n" for line in text.splitlines()
            )
    return "  []"
