"""The Markdown format's rules, each on a page written in the test: headings nest, the lead
text is the page's own section, code and tables stay quotable, repeated headings get the
suffixes a documentation site gives them, an empty section is kept, and a ``#`` line inside a
code fence is code, not a heading."""

from __future__ import annotations

from rag_contract.corpus.formats import format_for
from rag_contract.corpus.formats.markdown import parse
from rag_contract.corpus.formats.slugs import Anchors, slugify
from rag_contract.corpus.sections import Section

PAGE = """\
Starlette includes several middleware classes.
See [the ASGI spec](https://asgi.readthedocs.io/) for details.

## Using middleware

Wrap the app.

```python
# Not a heading: a comment inside a fence.
app = Starlette(middleware=middleware)
```

## CORSMiddleware

| Argument | Default |
|---|---|
| `allow_origins` | `[]` |

### Options

Nested text.

## Empty

## CORSMiddleware

Second one.

Setext heading
--------------

Under the setext heading.
"""


def sections() -> dict[str, Section]:
    return {s.id: s for s in parse("middleware.md", "Middleware", PAGE.encode())}


def test_headings_become_nested_sections_in_document_order():
    got = sections()
    assert [(s.id, s.title, s.parent) for s in got.values()] == [
        ("middleware.md", "Middleware", None),
        ("middleware.md#using-middleware", "Using middleware", "middleware.md"),
        ("middleware.md#corsmiddleware", "CORSMiddleware", "middleware.md"),
        ("middleware.md#options", "Options", "middleware.md#corsmiddleware"),
        ("middleware.md#empty", "Empty", "middleware.md"),
        ("middleware.md#corsmiddleware_1", "CORSMiddleware", "middleware.md"),
        ("middleware.md#setext-heading", "Setext heading", "middleware.md"),
    ]


def test_lead_text_is_the_pages_own_section_titled_by_the_manifest():
    lead = sections()["middleware.md"]
    assert lead.title == "Middleware"
    assert lead.text == (
        "Starlette includes several middleware classes.\nSee the ASGI spec for details."
    )  # a link reads as its text


def test_fenced_code_and_tables_stay_quotable_text():
    got = sections()
    assert "# Not a heading: a comment inside a fence.\napp = Starlette(middleware=middleware)" in (
        got["middleware.md#using-middleware"].text
    )
    assert "| `allow_origins` | `[]` |" in got["middleware.md#corsmiddleware"].text
    # the fence's marker lines read as blank lines: the code is a paragraph of its own
    assert got["middleware.md#using-middleware"].text == (
        "Wrap the app.\n\n\n# Not a heading: a comment inside a fence.\napp = Starlette(middleware=middleware)"
    )


def test_a_heading_inside_a_code_fence_is_not_a_heading():
    assert not any("not-a-heading" in sid for sid in sections())


def test_an_empty_section_is_kept_with_no_text():
    assert sections()["middleware.md#empty"].text == ""


def test_a_repeated_heading_is_suffixed_and_keeps_its_own_text():
    assert sections()["middleware.md#corsmiddleware_1"].text == "Second one."


def test_front_matter_is_not_content_and_a_page_without_lead_text_has_an_empty_lead():
    got = parse(
        "release-notes.md", "Release Notes", b"---\ntoc_depth: 2\n---\n\n## 0.47.3 (August 24, 2025)\n\nFixed.\n"
    )
    assert [(s.id, s.text) for s in got] == [
        ("release-notes.md", ""),
        ("release-notes.md#0473-august-24-2025", "Fixed."),
    ]


def test_slugs_are_those_of_python_markdown_toc():
    assert slugify("CORSMiddleware") == "corsmiddleware"
    assert slugify("Using `Request.form()` -- uploads!") == "using-requestform-uploads"
    assert slugify("Caf\u00e9 & cr\u00e8me") == "cafe-creme"
    anchors = Anchors()
    assert [anchors.unique(s) for s in ("a", "a", "a", "", "a_1")] == ["a", "a_1", "a_2", "_1", "a_3"]


def test_the_suffix_names_the_format():
    assert format_for("docs/index.md").name == "markdown"
    assert format_for("page.MARKDOWN").name == "markdown"
    assert format_for("notes.txt", "markdown").name == "markdown"
