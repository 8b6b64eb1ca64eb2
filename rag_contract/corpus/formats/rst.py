"""reStructuredText (docutils, with Sphinx's roles and directives read as text): sections become
nested sections.

Contract: ``parse(file, title, data)`` reads the page with docutils, never a file beside it
(``include`` and ``raw`` are off, no configuration file is read). Each section of the document
tree opens a section ``file#anchor``, nested in the section that encloses it, the anchor the
one a Markdown heading of that title gets (``slugs``: ``quickstart.rst#a-minimal-application``,
a repeat ``..._1``); a page's title (docutils promotes a lone top-level section to it) is not a
section: the text under it, before the first subsection, is the page's lead section, id
``file``, titled by the manifest. ``page_title(data)`` is that title, for the manifest.

A section's text carries no markup: inline markup and every role, known or not, read as their
text (``:func:`url_for``` as ``url_for``, ``:class:`~flask.Flask``` as ``Flask``, ``:ref:`the
tutorial <tutorial>``` as ``the tutorial``); a code block (``::``, ``code-block``,
``sourcecode``, doctest) is kept line for line as its own paragraph; admonitions, ``seealso``
and ``versionadded``/``versionchanged``/``deprecated`` read as prose ("Changed in version
2.2: ..."); an object description (``.. py:data:: TESTING``) reads as its signature, then its
text. Directives that stand for text this file does not hold (``autodoc``'s ``automodule``,
``autoclass``, ..., ``toctree``, ``literalinclude``, ``include``) and those that only set
context (``currentmodule``, ``highlight``, ``index``) are dropped; ``read`` counts them. Any
other directive docutils does not know reads as its arguments, then its content.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, ClassVar, cast

import docutils
from docutils import nodes, utils
from docutils.core import publish_doctree
from docutils.frontend import get_default_settings
from docutils.parsers.rst import Directive, Parser, directives, languages, roles

from rag_contract.corpus.formats.decoding import decode
from rag_contract.corpus.formats.nesting import Outline
from rag_contract.corpus.formats.slugs import slugify
from rag_contract.corpus.sections import Section

IDENTITY = (
    f"rst-v1;docutils-{docutils.__version__};toc-slugs;roles-as-text;admonitions-as-prose;"
    "code-kept;autodoc-toctree-dropped;unknown-directives-as-content"
)

# docutils' own configuration files and environment are not read: a corpus parses the same
# on every machine. Nothing is reported or halts on: a problem's source text is left out.
_SETTINGS: Mapping[str, Any] = MappingProxyType(
    {
        "_disable_config": True,
        "report_level": 5,
        "halt_level": 5,
        "warning_stream": False,
        "file_insertion_enabled": False,
        "raw_enabled": False,
        "syntax_highlight": "none",
        "smart_quotes": False,
        "doctitle_xform": True,
        "docinfo_xform": False,
        "sectsubtitle_xform": False,
        "pep_references": False,
        "rfc_references": False,
    }
)

# Directives whose text is not in the file (it is generated from code or another file) or
# which only set context for what follows.
DROPPED = frozenset(
    [
        *(
            f"{domain}auto{what}"
            for domain in ("", "py:")
            for what in (
                "module",
                "class",
                "exception",
                "function",
                "method",
                "attribute",
                "data",
                "decorator",
                "property",
                "summary",
                "classmethod",
                "staticmethod",
                "typeddict",
                "pydantic_model",
                "pydantic_settings",
            )
        ),
        "toctree",
        "literalinclude",
        "include",
        "raw",
        "currentmodule",
        "py:currentmodule",
        "module",
        "py:module",
        "highlight",
        "index",
        "contents",
        "sectnum",
        "meta",
        "program",
        "sectionauthor",
        "moduleauthor",
        "codeauthor",
        "tabularcolumns",
    ]
)
CODE = frozenset(["code-block", "sourcecode", "code-tab", "testcode", "testoutput", "doctest", "productionlist"])
VERSIONS = MappingProxyType(
    {
        "versionadded": "Added in version",
        "versionchanged": "Changed in version",
        "deprecated": "Deprecated since version",
        "versionremoved": "Removed in version",
    }
)
# Sphinx's object descriptions: a signature, then the text describing it.
DESCRIPTIONS = frozenset(
    f"{domain}{what}"
    for domain in ("", "py:")
    for what in (
        "function",
        "class",
        "method",
        "classmethod",
        "staticmethod",
        "attribute",
        "property",
        "data",
        "exception",
        "decorator",
        "decoratormethod",
        "describe",
        "object",
        "envvar",
        "option",
        "confval",
    )
) - {"py:envvar", "py:option", "py:describe", "py:object", "py:confval"}

_DIRECTIVE_NAME = re.compile(r"^[ \t]*\.\.[ \t]+([\w][\w:.+-]*?)[ \t]*::", re.MULTILINE)
_ROLE_NAME = re.compile(r"(?<![\w`]):([\w][\w:.+-]*?):`")
_EXPLICIT_TITLE = re.compile(r"^(.+?)\s*<([^<>]+)>$", re.DOTALL)
# the reST parser's own language tables (directive and role names), as its states look them up
_LANGUAGE: Any = languages.get_language("en")


class _AnyOptions(dict):
    """An option spec that takes every option as text: Sphinx's options (``:caption:``,
    ``:linenos:``, ``:noindex:``) must not turn a directive into an error."""

    def __missing__(self, key: str) -> Any:
        return directives.unchanged

    def __bool__(self) -> bool:
        return True  # docutils reads option lines only for a directive whose option spec is truthy


class _dropped(nodes.Invisible, nodes.Element):  # noqa: N801 - docutils names node classes in lower case
    """Where a dropped directive was; ``read`` counts these by name."""


def xref_text(text: str) -> str:
    """What Sphinx shows for a cross-reference role's text: an explicit title (``title
    <target>``), else the target, its module path left out after ``~``, a leading ``.`` or
    ``!`` dropped; a ``{placeholder}`` (``:file:``) reads without its braces."""
    text = utils.unescape(text)
    explicit = _EXPLICIT_TITLE.match(text)
    if explicit:
        return explicit.group(1)
    text = text.lstrip("!")
    if text.startswith("~"):
        text = text[1:].rsplit(".", 1)[-1]
    return text.lstrip(".").replace("{", "").replace("}", "")


def _role_as_text(
    name: str, rawtext: str, text: str, lineno: int, inliner: Any, options: Any = None, content: Any = None
) -> tuple[list[nodes.Node], list[nodes.system_message]]:
    return [nodes.literal(rawtext, xref_text(text))], []


class _Lenient(Directive):
    """Any arguments, options and content: a directive of Sphinx's or an extension's is read
    whatever it is given, never refused."""

    optional_arguments = 100
    final_argument_whitespace = True
    option_spec: ClassVar[dict[str, Any]] = _AnyOptions()
    has_content = True


def _body(directive: Directive, lead: str | None) -> nodes.container:
    """The directive's content parsed, after ``lead`` (inline text on its own line, when it has
    one) as a first paragraph."""
    body = nodes.container()
    if lead is not None:
        inline, _ = directive.state.inline_text(lead, directive.lineno)
        body += nodes.paragraph("", "", *inline)
    directive.state.nested_parse(directive.content, directive.content_offset, body)
    return body


class _Dropped(_Lenient):
    def run(self) -> list[nodes.Node]:
        return [_dropped(name=self.name)]


class _Code(_Lenient):
    optional_arguments = 1  # the language

    def run(self) -> list[nodes.Node]:
        code = "\n".join(self.content)
        return [nodes.literal_block(code, code)]


class _Version(_Lenient):
    required_arguments = 1
    optional_arguments = 1  # the change, said on the directive's own line

    def run(self) -> list[nodes.Node]:
        lead = f"{VERSIONS[self.name]} {self.arguments[0]}"
        body = _body(self, self.arguments[1] if len(self.arguments) > 1 else None)
        first = body.children[0] if body.children else None
        if isinstance(first, nodes.paragraph):
            first.insert(0, nodes.Text(f"{lead}: "))
            return list(body.children)
        return [nodes.paragraph("", f"{lead}."), *body.children]


class _Described(_Lenient):
    """An object description: the signature as a term, the content as its definition."""

    def run(self) -> list[nodes.Node]:
        definition = nodes.definition()
        self.state.nested_parse(self.content, self.content_offset, definition)
        item = nodes.definition_list_item("", nodes.term("", " ".join(self.arguments)), definition)
        return [nodes.definition_list("", item)]


class _Content(_Lenient):
    """A directive docutils does not know (``seealso``, ``tabs``, ``only``): its arguments, then its content."""

    def run(self) -> list[nodes.Node]:
        return list(_body(self, " ".join(self.arguments) if self.arguments else None).children)


for _name in DROPPED:
    directives.register_directive(_name, _Dropped)
for _name in CODE:
    directives.register_directive(_name, _Code)
for _name in VERSIONS:
    directives.register_directive(_name, _Version)
for _name in DESCRIPTIONS:
    directives.register_directive(_name, _Described)


def _register_unknown(text: str) -> None:
    """Roles and directives this page uses that docutils does not know read as text and as
    content. A name is given the same handler whichever page names it first, so what a page
    parses to does not depend on the pages read before it."""
    document = utils.new_document("", get_default_settings(Parser))
    for name in set(_DIRECTIVE_NAME.findall(text)):
        if directives.directive(name, _LANGUAGE, document)[0] is None:
            directives.register_directive(name, _Content)
    for name in set(_ROLE_NAME.findall(text)):
        if roles.role(name, _LANGUAGE, 0, document.reporter)[0] is None:
            roles.register_local_role(name, cast(Any, _role_as_text))


@dataclass(frozen=True)
class Reading:
    sections: list[Section]
    dropped: Mapping[str, int]  # directive name -> how many were left out


def document(file: str) -> str:
    return file


def _tree(file: str, data: bytes) -> nodes.document:
    text = decode(data, "a reStructuredText file")
    _register_unknown(text)
    try:
        return publish_doctree(text, source_path=file, settings_overrides=dict(_SETTINGS))
    except (utils.SystemMessage, docutils.ApplicationError) as exc:
        raise ValueError(f"not readable as reStructuredText ({exc})") from None


def page_title(data: bytes) -> str | None:
    """The page's own title (its lone top-level section's), or None when it has none."""
    tree = _tree("", data)
    title = next((c for c in tree.children if isinstance(c, nodes.title)), None)
    return (inline(title) or None) if title is not None else None


def read(file: str, title: str, data: bytes) -> Reading:
    tree = _tree(file, data)
    outline = Outline(document(file), title)
    _sections(tree, outline, 0)
    dropped = Counter(str(n["name"]) for n in tree.findall(_dropped))
    return Reading(outline.sections(), MappingProxyType(dict(sorted(dropped.items()))))


def parse(file: str, title: str, data: bytes) -> list[Section]:
    return read(file, title, data).sections


def _sections(node: nodes.Element, outline: Outline, depth: int) -> None:
    for child in node.children:
        if isinstance(child, nodes.section):
            heading = inline(child.next_node(nodes.title))
            outline.heading(depth + 1, heading, slugify(heading))
            _sections(child, outline, depth + 1)
        elif not isinstance(child, nodes.title | nodes.subtitle):
            text = block(child)
            if text:
                outline.add(text + "\n\n")


def inline(node: nodes.Node | None) -> str:
    """A text element's words: inline markup read as its text, a problem's source without its
    markup characters, references to footnotes and images left out."""
    if node is None:
        return ""
    if isinstance(node, nodes.Text):
        return str(node)
    if isinstance(node, nodes.problematic):
        return node.astext().strip("`*_|:")
    if isinstance(node, nodes.footnote_reference | nodes.citation_reference | nodes.image | nodes.system_message):
        return ""
    return "".join(inline(c) for c in node.children)


_SKIPPED = (
    nodes.comment,
    nodes.target,
    nodes.substitution_definition,
    nodes.system_message,
    nodes.pending,
    nodes.raw,
    nodes.transition,
    nodes.image,
    nodes.meta,
    nodes.label,  # a footnote's number: its text follows
    _dropped,
)


def _join(parts: Iterable[str], sep: str = "\n\n") -> str:
    return sep.join(p for p in parts if p)


def block(node: nodes.Node) -> str:
    """A body element as text: paragraphs apart by a blank line, code line for line."""
    if isinstance(node, _SKIPPED):
        return ""
    if isinstance(node, nodes.literal_block | nodes.doctest_block | nodes.math_block):
        return node.astext()
    if isinstance(node, nodes.topic) and "contents" in node["classes"]:
        return ""  # a generated table of contents
    if isinstance(node, nodes.definition_list_item | nodes.field | nodes.option_list_item):
        head, *rest = node.children
        return _join(
            [inline(head) if not isinstance(head, nodes.option_group) else head.astext(), *map(block, rest)], "\n"
        )
    if isinstance(node, nodes.line_block):
        return _join((block(c) if isinstance(c, nodes.line_block) else inline(c) for c in node.children), "\n")
    if isinstance(node, nodes.row):
        return _join((block(c) for c in node.children), "\n")
    if isinstance(node, nodes.entry):
        return _join((block(c) for c in node.children), " ")
    if isinstance(node, nodes.TextElement):
        return inline(node)
    if isinstance(node, nodes.Element):
        return _join(block(c) for c in node.children)
    return ""
