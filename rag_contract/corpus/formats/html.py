"""HTML: headings ``h1``-``h6`` become nested sections; scripts, styles and navigation are dropped.

Contract: ``parse(file, title, data)`` reads the page with lxml (its declared encoding
honoured). Each heading opens a section ``file#id`` with the heading's own ``id`` attribute,
else the anchor a documentation site would give its text (``slugs``), collisions suffixed; the
text before the first heading is the page's lead section, id ``file``, titled by the manifest.
``script``, ``style``, ``nav``, ``noscript`` and ``template`` elements and comments are left
out with everything inside them; a block element ends a line, ``pre`` keeps its lines.
"""

from __future__ import annotations

from lxml import etree
from lxml import html as lxml_html

from rag_contract.corpus.formats.nesting import Outline
from rag_contract.corpus.formats.slugs import slugify
from rag_contract.corpus.sections import Section

IDENTITY = "html-v1;lxml;h1-h6;toc-slugs;drop=script,style,nav,noscript,template"

_DROPPED = frozenset({"script", "style", "nav", "noscript", "template", "head"})
_HEADINGS = {f"h{n}": n for n in range(1, 7)}
_BLOCKS = frozenset(
    [
        "address",
        "article",
        "aside",
        "blockquote",
        "br",
        "dd",
        "details",
        "div",
        "dl",
        "dt",
        "figcaption",
        "figure",
        "footer",
        "form",
        "header",
        "hr",
        "li",
        "main",
        "ol",
        "p",
        "pre",
        "section",
        "summary",
        "table",
        "tbody",
        "thead",
        "tfoot",
        "tr",
        "ul",
    ]
)


def document(file: str) -> str:
    return file


def parse(file: str, title: str, data: bytes) -> list[Section]:
    try:
        root = lxml_html.document_fromstring(data)
    except (etree.ParserError, ValueError) as exc:
        raise ValueError(f"not readable as HTML ({exc})") from None
    outline = Outline(document(file), title)
    _walk(root, outline, pre=False)
    return outline.sections()


def _text(el: etree._Element) -> str:
    return " ".join("".join(el.itertext()).split())


def _walk(el: etree._Element, outline: Outline, pre: bool) -> None:
    for child in el:
        tag = child.tag if isinstance(child.tag, str) else ""  # comments and processing instructions
        if tag in _DROPPED or not tag:
            pass
        elif tag in _HEADINGS:
            heading = _text(child)
            outline.heading(_HEADINGS[tag], heading, child.get("id") or slugify(heading))
        else:
            if child.text:
                _add(outline, child.text, pre or tag == "pre")
            _walk(child, outline, pre or tag == "pre")
            if tag in _BLOCKS:
                outline.add("\n")
        if child.tail:
            _add(outline, child.tail, pre)


def _add(outline: Outline, text: str, pre: bool) -> None:
    """Outside ``pre`` source whitespace is not layout: a run of it reads as one space, and
    none at the start of a line."""
    if pre:
        outline.add(text)
        return
    words = " ".join(text.split())
    start = "" if outline.at_line_start() else " " if text[0].isspace() else ""
    if words:
        outline.add(start + words + (" " if text[-1].isspace() else ""))
    elif start:
        outline.add(start)
