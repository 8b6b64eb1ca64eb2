"""Markdown (CommonMark, with tables): headings become nested sections.

Contract: ``parse(file, title, data)`` reads the page with markdown-it-py, so only a real
heading (ATX or setext, not a ``#`` line inside a fenced or indented code block) opens a
section. Ids are ``file#anchor`` with the anchor a documentation site gives the heading
(``slugs``: ``middleware.md#corsmiddleware``; a repeated heading ``..._1``); the text before
the first heading is the page's lead section, id ``file``, titled by the manifest (from the
site's navigation or the file name). A section's text is its Markdown source: fenced code and
tables stay as written, so a claim can quote them (a fence's own marker lines read as blank
lines); links and images read as their text, and HTML comments are dropped.
"""

from __future__ import annotations

import re

from markdown_it import MarkdownIt
from markdown_it.token import Token

from rag_contract.corpus.formats.decoding import decode
from rag_contract.corpus.formats.nesting import Outline
from rag_contract.corpus.formats.slugs import slugify
from rag_contract.corpus.sections import Section

IDENTITY = "markdown-v2;commonmark+table;toc-slugs;links-as-text;fence-lines-blank"

_PARSER = MarkdownIt("commonmark").enable("table")
_IMAGE = re.compile(r"!\[([^\]]*)\]\([^)]*\)")
_LINK = re.compile(r"\[([^\]]+)\]\([^)]*\)")
_REF_LINK = re.compile(r"\[([^\]]+)\]\[[^\]]*\]")
_COMMENT = re.compile(r"<!--.*?-->", re.DOTALL)
_TAG = re.compile(r"<[^>]*>")
# YAML front matter (MkDocs page metadata) is not content: without this, "---" then "key: value"
# then "---" would read as a rule and a setext heading.
_FRONT_MATTER = re.compile(r"\A---[ \t]*\n(?:.*\n)*?---[ \t]*\n")


def document(file: str) -> str:
    return file


def heading_text(inline: Token) -> str:
    """What a heading reads as: its text and code spans, markup and HTML left out."""
    parts = []
    for child in inline.children or ():
        if child.type in ("text", "code_inline"):
            parts.append(child.content)
        elif child.type in ("softbreak", "hardbreak"):
            parts.append(" ")
        elif child.type == "image":
            parts.append(heading_text(child))
    return "".join(parts).strip()


def prose(line: str) -> str:
    return _REF_LINK.sub(r"\1", _LINK.sub(r"\1", _IMAGE.sub(r"\1", line)))


def parse(file: str, title: str, data: bytes) -> list[Section]:
    text = decode(data, "a Markdown file")
    # blanked line for line, so the parser's line numbers stay those of the file
    text = _FRONT_MATTER.sub(lambda m: "\n" * m.group().count("\n"), text)
    tokens = _PARSER.parse(text)
    lines = text.splitlines(keepends=True)
    code: set[int] = set()
    markup: set[int] = set()  # raw HTML blocks: their text is kept, their tags are not
    # A fence's own lines (```python, ```) read as blank lines: the code inside is its own
    # paragraph, so a quoted sentence is code or prose, never prose glued to a fence marker.
    fences: set[int] = set()
    headings: dict[int, tuple[int, int, str]] = {}  # first line -> (end line, level, title)
    for i, tok in enumerate(tokens):
        if tok.map is None:
            continue
        if tok.type in ("fence", "code_block"):
            code.update(range(*tok.map))
            if tok.type == "fence":
                fences.add(tok.map[0])
                last = lines[tok.map[1] - 1].strip() if tok.map[1] - 1 > tok.map[0] else ""
                if last.startswith(tok.markup) and not last.strip(tok.markup[0]):
                    fences.add(tok.map[1] - 1)
        elif tok.type == "html_block":
            markup.update(range(*tok.map))
        elif tok.type == "heading_open":
            headings[tok.map[0]] = (tok.map[1], int(tok.tag[1]), heading_text(tokens[i + 1]))
    outline = Outline(document(file), title)
    n = 0
    body: list[str] = []
    while n < len(lines):
        if n in headings:
            outline.add(_clean(body, code | fences, markup, fences, n - len(body)))
            body = []
            end, level, heading = headings[n]
            outline.heading(level, heading, slugify(heading))
            n = end
            continue
        body.append(lines[n])
        n += 1
    outline.add(_clean(body, code | fences, markup, fences, n - len(body)))
    return outline.sections()


def _clean(body: list[str], code: set[int], markup: set[int], fences: set[int], first: int) -> str:
    """The body's source: code kept byte for byte between blank lines where its fences were,
    prose with links as their text, raw HTML as its text (comments dropped)."""
    out: list[str] = []
    html: list[str] = []
    for k, line in enumerate(body):
        if first + k in markup:
            html.append(line)
            continue
        if html:
            out.append(_TAG.sub("", _COMMENT.sub("", "".join(html))))
            html = []
        if first + k in fences:
            out.append("\n")
        else:
            out.append(line if first + k in code else prose(line))
    if html:
        out.append(_TAG.sub("", _COMMENT.sub("", "".join(html))))
    return "".join(out)
