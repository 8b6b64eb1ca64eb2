"""The Markdown format's rules, each on a page written in the test: headings nest, the lead
text is the page's own section, code and tables stay quotable, repeated headings get the
suffixes a documentation site gives them, an empty section is kept, and a ``#`` line inside a
code fence is code, not a heading."""

from __future__ import annotations

from rag_contract.corpus.formats import format_for
from rag_contract.corpus.formats.markdown import parse
from rag_contract.corpus.formats.slugs import Anchors, slugify
from rag_contract.corpus.sections import CODE, ITEM, PROSE, ROW, Section

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


def test_code_and_table_rows_are_blocks_of_their_own_kind_and_the_text_stays_quotable():
    got = sections()
    using = got["middleware.md#using-middleware"]
    assert [(b.kind, b.text) for b in using.blocks] == [
        (PROSE, "Wrap the app."),
        (CODE, "# Not a heading: a comment inside a fence.\napp = Starlette(middleware=middleware)"),
    ]
    # the section's text stays its source, quotable as written: the fence's marker lines read as
    # blank lines, so the code is a paragraph of its own
    assert using.text == (
        "Wrap the app.\n\n\n# Not a heading: a comment inside a fence.\napp = Starlette(middleware=middleware)"
    )
    assert "| `allow_origins` | `[]` |" in got["middleware.md#corsmiddleware"].text
    assert [(b.kind, b.text) for b in got["middleware.md#corsmiddleware"].blocks] == [
        (ROW, "Argument | Default"),
        (ROW, "`allow_origins` | `[]`"),
    ]


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


def blocks(page: str, file: str = "page.md") -> list[tuple[str, str]]:
    return [(b.kind, b.text) for s in parse(file, "Page", page.encode()) for b in s.blocks]


def test_an_admonition_reads_as_its_title_then_its_body():
    page = '!!! note "Streaming responses"\n    The body is buffered.\n    It is then compressed.\n\nAfter it.\n'
    assert blocks(page) == [
        (PROSE, "Streaming responses"),
        (PROSE, "The body is buffered.\nIt is then compressed."),
        (PROSE, "After it."),
    ]


def test_an_admonition_without_a_title_drops_its_marker_line_and_keeps_code_in_it_as_code():
    page = "!!! note\n\n    Pass the query in the URL.\n\n    ```python\n    client.get('/?a=1')\n    ```\n"
    assert blocks(page) == [(PROSE, "Pass the query in the URL."), (CODE, "client.get('/?a=1')")]


def test_collapsibles_open_or_closed_and_nested_admonitions_are_read_alike():
    page = '??? info "Why"\n    Because.\n\n???+ tip\n    Open by default.\n\n    !!! warning\n        Nested text.\n'
    assert blocks(page) == [(PROSE, "Why"), (PROSE, "Because."), (PROSE, "Open by default."), (PROSE, "Nested text.")]


def test_content_tabs_read_as_their_label_then_their_body():
    page = '=== "Do"\n\n    ```python\n    app = Starlette()\n    ```\n\n=== "Don\'t"\n\n    Never this.\n'
    assert blocks(page) == [(PROSE, "Do"), (CODE, "app = Starlette()"), (PROSE, "Don't"), (PROSE, "Never this.")]


def test_a_mkdocstrings_directive_is_dropped_with_its_options_and_named_in_its_section():
    page = (
        '??? abstract "API Reference"\n    ::: starlette.testclient.TestClient\n        options:\n'
        "            show_root_heading: true\n\nThe test client.\n\n## Later\n\n::: starlette.requests.Request\n"
    )
    got = parse("testclient.md", "Test Client", page.encode())
    assert [(s.id, " ".join(s.text.split()), s.dropped) for s in got] == [
        ("testclient.md", "API Reference The test client.", ("starlette.testclient.TestClient",)),
        ("testclient.md#later", "", ("starlette.requests.Request",)),
    ]


def test_attribute_lists_are_left_out_and_a_heading_id_names_its_anchor():
    page = "## Setup { #install }\n\nRun it. { .note }\n\n{: .warning }\nCareful now.\n"
    got = parse("page.md", "Page", page.encode())
    assert [(s.id, s.title, " ".join(s.text.split())) for s in got[1:]] == [
        ("page.md#install", "Setup", "Run it. Careful now.")
    ]
    assert [b.text for b in got[1].blocks] == ["Run it.", "Careful now."]


def test_links_across_lines_emphasis_and_comments_read_as_text():
    page = "See [the lifespan\nsection](lifespan.md#tests) for **more** on *this* <!-- a note -->here.\n"
    assert [(k, " ".join(t.split())) for k, t in blocks(page)] == [
        (PROSE, "See the lifespan section for more on this here.")
    ]


def test_markup_inside_a_code_fence_is_code_as_written():
    page = '```markdown\n!!! note\n    Text.\n=== "Tab"\n[link](url) { #id }\n```\n'
    assert blocks(page) == [(CODE, '!!! note\n    Text.\n=== "Tab"\n[link](url) { #id }')]


def test_list_items_are_items_and_code_spans_keep_their_backticks():
    page = "Options:\n\n* `minimum_size` - Do not compress small responses.\n* Nested:\n    1. Inner item here.\n"
    assert blocks(page) == [
        (PROSE, "Options:"),
        (ITEM, "`minimum_size` - Do not compress small responses."),
        (ITEM, "Nested:"),
        (ITEM, "Inner item here."),
    ]


def test_indented_raw_html_after_a_blank_line_is_html_not_code():
    page = (
        '<div class="x">\n<p>First sponsor text here.</p>\n\n'
        "    <div>\n        <h3>Silver Sponsors</h3>\n    </div>\n</div>\n"
    )
    assert [(k, " ".join(t.split())) for k, t in blocks(page)] == [
        (PROSE, "First sponsor text here."),
        (PROSE, "Silver Sponsors"),
    ]
