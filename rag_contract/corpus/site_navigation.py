"""A documentation site's navigation (MkDocs ``mkdocs.yml``): page titles and reading order.

Contract: ``find_navigation(docs)`` looks for the site configuration where MkDocs keeps it:
``mkdocs.yml`` (or ``mkdocs.yaml``) in the folder above ``docs`` whose ``docs_dir`` (default
``docs``) is that folder, else one inside ``docs`` itself (a copy kept beside the pages). It
returns a ``Navigation``: each page's title and the pages in ``nav`` order, keyed by the path
relative to ``docs`` (``advanced/clients.md``), nested ``nav`` sections walked in order; links
to other sites are not pages. What was found, or why nothing was used (none there, unreadable,
``docs_dir`` naming another folder), is ``note``: a line for the reader, never silence. A
theme's ``custom_dir`` under ``docs`` holds templates, not pages: it is ``theme_dir``. Tags
naming Python objects (``!!python/name:...``, common in MkDocs configurations) read as null.
"""

from __future__ import annotations

import posixpath
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from rag_contract.config.unreadable import not_utf8, unreadable

CONFIG_NAMES = ("mkdocs.yml", "mkdocs.yaml")


@dataclass(frozen=True)
class Navigation:
    titles: Mapping[str, str] = field(default_factory=dict)  # page path -> its nav title
    order: tuple[str, ...] = ()  # page paths in nav order
    config: Path | None = None  # the site configuration read, if one was
    note: str = ""
    theme_dir: str | None = None  # theme.custom_dir, when it is a folder under the pages


class _LenientLoader(yaml.SafeLoader):
    """Reads a site configuration whose tags name Python objects (``!!python/name:...``) as null."""


_LenientLoader.add_multi_constructor("tag:yaml.org,2002:python/", lambda loader, suffix, node: None)
_LenientLoader.add_multi_constructor("!", lambda loader, suffix, node: None)


class NavigationError(ValueError):
    """A site configuration that cannot be read."""


def read_site_config(path: Path) -> dict:
    try:
        doc = yaml.load(path.read_text(encoding="utf-8"), Loader=_LenientLoader)  # noqa: S506 - lenient SafeLoader
    except OSError as exc:
        raise NavigationError(unreadable(path, exc)) from None
    except UnicodeDecodeError as exc:
        raise NavigationError(not_utf8(path, exc)) from None
    except yaml.YAMLError as exc:
        raise NavigationError(f"{path.name}: not valid YAML ({' '.join(str(exc).split())})") from None
    if not isinstance(doc, dict):
        raise NavigationError(f"{path.name}: not a site configuration (a mapping)")
    return doc


def nav_pages(nav: Any) -> tuple[dict[str, str], tuple[str, ...]]:
    """Titles by page path and the page paths in order, from a ``nav`` list."""
    titles: dict[str, str] = {}
    order: list[str] = []

    def page(target: str, title: str | None) -> None:
        if "://" in target or target.startswith(("/", "#", "mailto:")):
            return  # a link to another site or an absolute URL, not a page
        path = posixpath.normpath(target.split("#", 1)[0])
        if path not in order:
            order.append(path)
        if title is not None:
            titles.setdefault(path, title)

    def walk(items: Any) -> None:
        for item in items if isinstance(items, list) else ():
            if isinstance(item, str):
                page(item, None)
            elif isinstance(item, dict):
                for title, target in item.items():
                    if isinstance(target, str):
                        page(target, str(title))
                    else:
                        walk(target)

    walk(nav)
    return titles, tuple(order)


def nav_titles(config: Path) -> dict[str, str]:
    """Page path -> its title in the ``nav`` of the site configuration at ``config``."""
    return nav_pages(read_site_config(config).get("nav"))[0]


def find_navigation(docs: Path) -> Navigation:
    docs = here = Path(docs).resolve()
    for name in CONFIG_NAMES:
        above = docs.parent / name
        if not above.is_file():
            continue
        try:
            config = read_site_config(above)
        except NavigationError as exc:
            return Navigation(note=f"{_shown(above, docs)}: {_reason(exc)}; titles from file names")
        docs_dir = config.get("docs_dir", "docs")
        if isinstance(docs_dir, str) and (above.parent / docs_dir).resolve() == here:
            return _from(config, above, docs)
        inside = [docs / n for n in CONFIG_NAMES if (docs / n).is_file()]
        if not inside:
            return Navigation(
                note=f"{_shown(above, docs)}: its docs_dir is {docs_dir!r}, not {docs.name!r}; titles from file names"
            )
    for name in CONFIG_NAMES:
        inside_config = docs / name
        if inside_config.is_file():
            try:
                return _from(read_site_config(inside_config), inside_config, docs)
            except NavigationError as exc:
                return Navigation(note=f"{_shown(inside_config, docs)}: {_reason(exc)}; titles from file names")
    return Navigation(note=f"no mkdocs.yml in {docs.name}/ or the folder above it: titles from file names")


def _from(config: dict, path: Path, docs: Path) -> Navigation:
    titles, order = nav_pages(config.get("nav"))
    shown = _shown(path, docs)
    theme = _theme_dir(config, path, docs)
    if not order:
        return Navigation({}, (), path, f"{shown}: no nav; titles from file names", theme)
    note = f"{shown}: {len(titles)} page title(s) and the page order from its nav"
    return Navigation(titles, order, path, note, theme)


def _theme_dir(config: dict, path: Path, docs: Path) -> str | None:
    """The theme's ``custom_dir`` (templates, not pages) relative to ``docs``, when under it."""
    theme = config.get("theme")
    custom = theme.get("custom_dir") if isinstance(theme, dict) else None
    if not isinstance(custom, str) or not custom.strip():
        return None
    folder = (path.parent / custom).resolve()
    if folder == docs or not folder.is_relative_to(docs):
        return None
    return folder.relative_to(docs).as_posix()


def _shown(config: Path, docs: Path) -> str:
    """The configuration as the reader knows it: beside or above the documents folder."""
    return f"{docs.name}/{config.name}" if config.parent == docs else f"{config.name} (above {docs.name}/)"


def _reason(exc: NavigationError) -> str:
    return str(exc).split(": ", 1)[1] if ": " in str(exc) else str(exc)
