"""``rag-contract init DIR --from PATH...``: a project from a team's own documents.

Contract: ``init_project(root, sources, ...)`` refuses (``InitError``, one line) a ``root``
that already holds a project, a document no format reads (naming it and the formats known)
and two documents of one name; otherwise it copies each document into ``root/corpus/``
(a directory given as a source contributes the files in it that a format reads), copies the
``kept`` files beside them (licence, provenance: verified by nothing, parsed by nothing), and
writes:

- ``corpus/manifest.yaml``: each document's file, title, format, source, licence, length and
  sha256. A title comes from the site navigation when a ``mkdocs.yml`` sits beside the
  sources (its ``nav``), else from the page itself when its format names one (a
  reStructuredText document title), else from the file name; it titles the page's lead section.
- ``eval/questions.yaml``: the schema explained in comments and one example question about
  the first section with prose, so the project loads and builds before any is written.
- ``eval/thresholds.yaml``: budgets and starting weights, no bars yet (floors 0, no ceilings).
- ``eval/prices.yaml`` (the price table every paid call is capped with) and ``project.yaml``.

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

from rag_contract.corpus.formats import FormatError, format_for, readable_suffixes
from rag_contract.corpus.sentences import sentences
from rag_contract.corpus.sources import MANIFEST, load_corpus
from rag_contract.project import Paths, load_project

NEXT_STEPS = (
    ("rag-contract build-index", "embed the corpus with the local model (no key); writes index/"),
    (
        "edit eval/questions.yaml",
        "write questions; `rag-contract sections --json` lists the section ids to expect",
    ),
    ("rag-contract calibrate --write-thresholds", "from about 30 questions: refit the weights, cross-validated"),
    (
        "rag-contract measure --allow-loosen",
        "record drafts, evaluate, and set every bar from the measurement (thresholds update)",
    ),
    ("python -m pytest -m gate", "the gate: one test item per question, bar and budget"),
    ("rag-contract serve", "pages, /ask and /answer on http://127.0.0.1:8000"),
)


class InitError(ValueError):
    pass


@dataclass(frozen=True)
class Initialised:
    root: Path
    documents: tuple[str, ...]
    kept: tuple[str, ...]
    sections: int


def _data(name: str) -> str:
    return importlib.resources.files("rag_contract.scaffold").joinpath("data", name).read_text(encoding="utf-8")


class _LenientLoader(yaml.SafeLoader):
    """Reads a site configuration whose tags name Python objects (``!!python/name:...``) as null."""


_LenientLoader.add_multi_constructor("tag:yaml.org,2002:python/", lambda loader, suffix, node: None)
_LenientLoader.add_multi_constructor("!", lambda loader, suffix, node: None)


def nav_titles(mkdocs_yml: Path) -> dict[str, str]:
    """Page file name -> its title in the MkDocs ``nav`` (``{"middleware.md": "Middleware"}``)."""
    try:
        doc = yaml.load(mkdocs_yml.read_text(encoding="utf-8"), Loader=_LenientLoader)  # noqa: S506 - lenient SafeLoader
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise InitError(f"{mkdocs_yml.name}: not a readable site configuration ({exc})") from None
    titles: dict[str, str] = {}

    def walk(items: Any) -> None:
        for item in items if isinstance(items, list) else ():
            if isinstance(item, dict):
                for title, target in item.items():
                    if isinstance(target, str):
                        titles.setdefault(Path(target).name, str(title))
                    else:
                        walk(target)

    walk(doc.get("nav") if isinstance(doc, dict) else None)
    return titles


def title_from_name(name: str) -> str:
    stem = Path(name).stem.replace("-", " ").replace("_", " ").strip()
    return stem[:1].upper() + stem[1:] if stem else name


def _documents(sources: Sequence[Path], kept_names: set[str]) -> list[Path]:
    found: list[Path] = []
    for source in sources:
        if source.is_dir():
            found += sorted(
                p
                for p in source.iterdir()
                if p.is_file() and p.name.lower().endswith(readable_suffixes()) and p.name not in kept_names
            )
        elif source.is_file():
            found.append(source)
        else:
            raise InitError(f"{source}: no such file or directory")
    names: dict[str, Path] = {}
    for p in found:
        try:
            format_for(p.name)
        except FormatError as exc:
            raise InitError(str(exc)) from None
        if p.name in names:
            raise InitError(f"{p.name}: two documents of this name ({names[p.name]} and {p}); the corpus is flat")
        names[p.name] = p
    if not found:
        raise InitError(
            f"no document to copy: give files or directories holding {', '.join(readable_suffixes())} files"
        )
    return found


def _site_titles(sources: Sequence[Path]) -> dict[str, str]:
    for source in sources:
        directory = source if source.is_dir() else source.parent
        if (directory / "mkdocs.yml").is_file():
            return nav_titles(directory / "mkdocs.yml")
    return {}


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
) -> Initialised:
    root = Path(root)
    paths = Paths(root)
    for existing in (paths.corpus, root / "eval", paths.about):
        if existing.exists():
            raise InitError(f"{existing}: already there; init writes a new project into an empty directory")
    for k in kept:
        if not Path(k).is_file():
            raise InitError(f"{k}: no such file to keep")
    documents = _documents([Path(s) for s in sources], {Path(k).name for k in kept})
    titles = _site_titles([Path(s) for s in sources])
    retrieved = (today or datetime.date.today()).isoformat()
    paths.corpus.mkdir(parents=True)
    entries = []
    for doc in documents:
        data = doc.read_bytes()
        (paths.corpus / doc.name).write_bytes(data)
        entry: dict[str, Any] = {
            "file": doc.name,
            "title": titles.get(doc.name) or _own_title(doc.name, data) or title_from_name(doc.name),
            "format": format_for(doc.name).name,
            "source": f"{source_base.rstrip('/')}/{doc.name}" if source_base else doc.name,
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
    manifest["files"] = sorted(entries, key=lambda e: e["file"])
    (paths.corpus / MANIFEST).write_text(
        "# Every document, verified byte for byte at load; a changed file is refused until this\n"
        "# entry is updated (and the index rebuilt). `kept` files sit beside them, unparsed.\n"
        + yaml.safe_dump(manifest, sort_keys=False, allow_unicode=True, width=120),
        encoding="utf-8",
    )
    corpus = load_corpus(paths.corpus)
    paths.results.mkdir(parents=True, exist_ok=True)
    paths.questions.write_text(_data("questions.yaml").replace("{example}", _example(corpus)), encoding="utf-8")
    paths.thresholds.write_text(_data("thresholds.yaml"), encoding="utf-8")
    paths.prices.write_text(_data("prices.yaml"), encoding="utf-8")
    label = name or f"the {root.resolve().name} documents"
    paths.about.write_text(
        '# What this project\'s corpus is, in words: the pages say "answers over <description>",\n'
        "# and the live drafter is told it answers questions about <name>.\n"
        + yaml.safe_dump({"name": label, "description": description or label}, sort_keys=False, allow_unicode=True),
        encoding="utf-8",
    )
    project = load_project(root)  # what init leaves must load, or init has failed
    return Initialised(
        root, tuple(d.name for d in documents), tuple(Path(k).name for k in kept), len(project.corpus.sections)
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
