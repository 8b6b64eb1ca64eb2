"""Markdown (CommonMark, with tables, and the MkDocs/Material dialect): headings become nested
sections, their bodies typed blocks.

Contract: ``parse(file, title, data)`` reads the page with markdown-it-py, so only a real
heading (ATX or setext, not a ``#`` line inside a fenced or indented code block) opens a
section. Ids are ``file#anchor`` with the anchor a documentation site gives the heading
(``slugs``: ``middleware.md#corsmiddleware``; a repeated heading ``..._1``; an attribute list's
``{ #id }`` when the heading has one); the text before the first heading is the page's lead
section, id ``file``, titled by the manifest (from the site's navigation or the file name).

A section's text is its Markdown source (``Source``: code and tables as written, so evidence
and chunks read as before; a fence's marker lines read as blank lines, links as their text).
Its ``blocks``, what sentence units are cut from, read as a reader sees the page: a paragraph
is ``prose`` (``item`` inside a list item), a fenced or indented code block is ``code`` (as
written, without its fence lines), a table row is a ``row`` (cells joined by `` | ``), raw HTML
is its text; in them links and images read as their text (across line breaks too), emphasis
and inline HTML (comments included) are left out, code spans keep their backticks.

MkDocs/Material markup is read, never quoted: an admonition or collapsible (``!!! note``,
``??? info "Title"``, ``???+``) and a content tab (``=== "Tab"``) become their title, if they
have one, as a paragraph of its own, then their body, read like any other Markdown; an
attribute list (``{: .class }``, ``{ #id }``) is left out; a mkdocstrings directive
(``::: module.Name`` and its indented options) is dropped and named in the section's
``dropped``, so the corpus inventory counts it. YAML front matter is not content.
"""

from __future__ import annotations

import html
import re

from markdown_it import MarkdownIt
from markdown_it.token import Token

from rag_contract.corpus.formats.decoding import decode
from rag_contract.corpus.formats.nesting import Outline
from rag_contract.corpus.formats.slugs import slugify
from rag_contract.corpus.sections import CODE, ITEM, PROSE, ROW, Block, Section

IDENTITY = "markdown-v3;commonmark+table;toc-slugs;typed-blocks;inline-as-read;mkdocs-material"

_PARSER = MarkdownIt("commonmark").enable("table")
_COMMENT = re.compile(r"<!--.*?-->", re.DOTALL)
_IMAGE = re.compile(r"!\[([^\]]*)\]\([^)]*\)")
_LINK = re.compile(r"\[([^\]]+)\]\([^)]*\)")
_REF_LINK = re.compile(r"\[([^\]]+)\]\[[^\]]*\]")
_TAG = re.compile(r"<[^>]*>")
# Block-level tags end a line of text (so "code.</p><p>Designed" reads as two sentences); others vanish.
_BLOCK_TAG = re.compile(
    r"</?(?:p|div|h[1-6]|br|hr|li|ul|ol|dl|dt|dd|table|tr|td|th|section|blockquote|pre)\b[^>]*>", re.IGNORECASE
)
_HTML_START = re.compile(r"\s*</?[A-Za-z][\w-]*[\s/>]")
# YAML front matter (MkDocs page metadata) is not content: without this, "---" then "key: value"
# then "---" would read as a rule and a setext heading.
_FRONT_MATTER = re.compile(r"\A---[ \t]*\n(?:.*\n)*?---[ \t]*\n")

# MkDocs/Material block markup, each opening a body indented four spaces deeper.
_ADMONITION = re.compile(
    r"^(?P<indent>[ \t]*)(?:!!!|\?\?\?\+?)[ \t]+[\w-]+(?:[ \t]+[\w-]+)*[ \t]*(?:\"(?P<title>[^\"]*)\")?[ \t]*$"
)
_TAB = re.compile(r"^(?P<indent>[ \t]*)===\+?[ \t]+\"(?P<title>[^\"]*)\"[ \t]*$")
_DIRECTIVE = re.compile(r"^(?P<indent>[ \t]*):::[ \t]+(?P<target>\S+)[ \t]*$")
_FENCE = re.compile(r"^[ \t]*(?P<marker>`{3,}|~{3,})")
# An attribute list: "{: .class #id key=value }" or "{ #id .class }" (Python-Markdown attr_list).
_ATTR = r"(?:[#.][\w-]+|[\w-]+=(?:\"[^\"]*\"|'[^']*'|[^\s}]+))"
_ATTR_LIST = re.compile(rf"[ \t]*\{{:?[ \t]*{_ATTR}(?:[ \t]+{_ATTR})*[ \t]*\}}")
_ATTR_ID = re.compile(r"(?:^|\s)#([\w-]+)")


def document(file: str) -> str:
    return file


def heading_text(inline: Token) -> str:
    """What a heading reads as: its text and code spans, markup and HTML left out."""
    parts = []
    for child in inline.children or ():
        if child.type in ("text", "text_special", "code_inline"):
            parts.append(child.content)
        elif child.type in ("softbreak", "hardbreak"):
            parts.append(" ")
        elif child.type == "image":
            parts.append(heading_text(child))
    return "".join(parts).strip()


def heading(inline: Token) -> tuple[str, str]:
    """A heading's title and anchor: an attribute list's ``#id`` names the anchor, else the slug."""
    text = heading_text(inline)
    attrs = _ATTR_LIST.search(text)
    if attrs is None:
        return text, slugify(text)
    title = (text[: attrs.start()] + text[attrs.end() :]).strip()
    named = _ATTR_ID.search(attrs.group().strip(" \t{}:"))
    return title, named.group(1) if named else slugify(title)


def inline_text(inline: Token) -> str:
    """What a paragraph or cell reads as: text, code spans in backticks, line breaks kept; links and
    images as their text, emphasis, inline HTML and attribute lists left out."""
    parts = []
    for child in inline.children or ():
        if child.type in ("text", "text_special"):
            parts.append(child.content)
        elif child.type == "code_inline":
            pad = " " if child.content.startswith("`") or child.content.endswith("`") else ""
            parts.append(f"{child.markup}{pad}{child.content}{pad}{child.markup}")
        elif child.type in ("softbreak", "hardbreak"):
            parts.append("\n")
        elif child.type == "image":
            parts.append(inline_text(child))
        # link_open/close, em/strong open/close, html_inline: markup, nothing a reader reads
    return _ATTR_LIST.sub("", "".join(parts)).strip()


def html_text(source: str) -> str:
    """What raw HTML reads as: its text, a block-level tag a line break, comments and other tags
    left out, entities decoded."""
    text = _TAG.sub("", _BLOCK_TAG.sub("\n", _COMMENT.sub("", source)))
    return html.unescape("\n".join(line.strip() for line in text.split("\n"))).strip()


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def mkdocs_blocks(lines: list[str]) -> tuple[list[str], dict[int, str]]:
    """``lines`` with MkDocs/Material block markup read: admonitions and tabs as their title (a
    paragraph of its own) and their body dedented; directives blanked, their targets by line."""
    out: list[str] = []
    dropped: dict[int, str] = {}
    fence: str | None = None  # the marker of the fence open, if any
    i = 0
    while i < len(lines):
        line = lines[i].expandtabs(4)
        fenced = _FENCE.match(line)
        if fence is not None:
            marker = fenced.group("marker") if fenced else ""
            if marker[:1] == fence[0] and len(marker) >= len(fence) and not line.strip().strip(fence[0]):
                fence = None
            out.append(lines[i])
            i += 1
            continue
        if fenced:
            fence = fenced.group("marker")
            out.append(lines[i])
            i += 1
            continue
        opened = _ADMONITION.match(line) or _TAB.match(line) or _DIRECTIVE.match(line)
        if opened is None:
            out.append(lines[i])
            i += 1
            continue
        depth = len(opened.group("indent"))
        end = i + 1
        while end < len(lines) and (not lines[end].strip() or _indent(lines[end].expandtabs(4)) > depth):
            end += 1
        while end > i + 1 and not lines[end - 1].strip():
            end -= 1  # blank lines after the body are not part of it
        if "target" in opened.groupdict():
            dropped[len(out)] = opened.group("target")
            out.extend("\n" for _ in range(end - i))
        else:
            title = opened.group("title")
            if title and title.strip():
                out.append(f"{opened.group('indent')}{title.strip()}\n")
            out.append("\n")
            body = [_dedent(ln.expandtabs(4), depth) for ln in lines[i + 1 : end]]
            inner, inner_dropped = mkdocs_blocks(body)
            dropped.update({len(out) + k: v for k, v in inner_dropped.items()})
            out.extend(inner)
        i = end
    return out, dropped


def _dedent(line: str, depth: int) -> str:
    """A body line four spaces shallower, into the column its marker had."""
    if not line.strip():
        return "\n"
    return line[:depth] + line[depth + min(4, _indent(line) - depth) :]


def parse(file: str, title: str, data: bytes) -> list[Section]:
    text = decode(data, "a Markdown file")
    text = _FRONT_MATTER.sub(lambda m: "\n" * m.group().count("\n"), text)
    lines, dropped = mkdocs_blocks(text.splitlines(keepends=True))
    tokens = _PARSER.parse("".join(lines))
    source = Source(lines, tokens)
    outline = Outline(document(file), title)
    pending = sorted(dropped.items())
    cursor = 0  # the first line whose source text is not yet added

    def drop_before(line: int) -> None:
        while pending and pending[0][0] < line:
            outline.drop(pending.pop(0)[1])

    items = 0  # list items open
    cells: list[str] | None = None  # the cells of the table row open, if any
    in_cell = False
    for i, tok in enumerate(tokens):
        if tok.map is not None:
            drop_before(tok.map[0])
        if tok.type == "heading_open" and tok.map is not None:
            outline.add(source.text(cursor, tok.map[0]))
            cursor = tok.map[1]
            name, anchor = heading(tokens[i + 1])
            outline.heading(int(tok.tag[1]), name, anchor)
        elif tok.type == "list_item_open":
            items += 1
        elif tok.type == "list_item_close":
            items -= 1
        elif tok.type == "paragraph_open":
            _add(outline, ITEM if items else PROSE, inline_text(tokens[i + 1]))
        elif tok.type == "code_block" and _HTML_START.match(tok.content):
            # Python-Markdown (MkDocs) reads raw HTML up to its closing tag, blank lines and all:
            # an indented "<div>" after a blank line inside one is HTML, not a code block.
            _add(outline, ITEM if items else PROSE, html_text(tok.content))
        elif tok.type in ("fence", "code_block"):
            if tok.content.strip():
                outline.block(Block(CODE, tok.content.rstrip()))
        elif tok.type == "html_block":
            _add(outline, ITEM if items else PROSE, html_text(tok.content))
        elif tok.type == "tr_open":
            cells = []
        elif tok.type in ("th_open", "td_open"):
            in_cell = True
        elif tok.type in ("th_close", "td_close"):
            in_cell = False
        elif tok.type == "inline" and in_cell and cells is not None:
            cells.append(" ".join(inline_text(tok).split()))
        elif tok.type == "tr_close" and cells is not None:
            _add(outline, ROW, " | ".join(cells) if any(cells) else "")
            cells = None
    outline.add(source.text(cursor, len(lines)))
    drop_before(len(lines) + 1)
    return outline.sections()


class Source:
    """A page's Markdown source as a section's text: code kept byte for byte, a fence's marker
    lines read as blank lines (so code is a paragraph of its own), raw HTML as its text, and the
    rest with links and images as their text (across line breaks too), attribute lists and
    comments left out; emphasis and list markers stay, as written."""

    def __init__(self, lines: list[str], tokens: list[Token]) -> None:
        self._lines = lines
        self._code: set[int] = set()
        self._fences: set[int] = set()
        self._html: set[int] = set()
        for tok in tokens:
            if tok.map is None:
                continue
            if tok.type == "html_block" or (tok.type == "code_block" and _HTML_START.match(tok.content)):
                self._html.update(range(*tok.map))
            elif tok.type in ("fence", "code_block"):
                self._code.update(range(*tok.map))
                if tok.type == "fence":
                    self._fences.add(tok.map[0])
                    last = lines[tok.map[1] - 1].strip() if tok.map[1] - 1 > tok.map[0] else ""
                    if last.startswith(tok.markup) and not last.strip(tok.markup[0]):
                        self._fences.add(tok.map[1] - 1)

    def text(self, start: int, end: int) -> str:
        out: list[str] = []
        run: list[str] = []  # consecutive lines of one kind: prose, or raw HTML
        kind = ""  # "" for prose
        for n in range(start, end):
            line = self._lines[n]
            now = (
                "fence" if n in self._fences else "code" if n in self._code else "html" if n in self._html else "prose"
            )
            if now != kind and run:
                out.append(_read(kind, "".join(run)))
                run = []
            kind = now
            if now == "fence":
                out.append("\n")
            elif now == "code":
                out.append(line)
            else:
                run.append(line)
        if run:
            out.append(_read(kind, "".join(run)))
        return "".join(out)


def _read(kind: str, text: str) -> str:
    if kind == "html":
        return _TAG.sub("", _COMMENT.sub("", text))
    text = _ATTR_LIST.sub("", _COMMENT.sub("", text))
    return _REF_LINK.sub(r"\1", _LINK.sub(r"\1", _IMAGE.sub(r"\1", text)))


def _add(outline: Outline, kind: str, text: str) -> None:
    if text.strip():
        outline.block(Block(kind, text))
