"""The HTML format's rules, each on a page written in the test: h1-h6 nest with their own ids,
lead text, code kept line for line, repeated headings, an empty section, a heading-like line
inside ``pre`` that is code, and scripts, styles and navigation dropped."""

from __future__ import annotations

import pytest

from rag_contract.corpus.formats.html import parse
from rag_contract.corpus.sections import Section

PAGE = """\
<!DOCTYPE html>
<html><head><title>Ignored</title><style>body { color: red }</style></head>
<body>
<nav><a href="/">Home</a> <a href="/docs">Docs</a></nav>
<script>var tracking = "nothing to quote";</script>
<p>Starlette includes   several
middleware classes.</p>
<h1 id="middleware">Middleware</h1>
<p>Wrap the <code>app</code>.</p>
<pre><code># Not a heading
app = Starlette(
    middleware=middleware)</code></pre>
<h2>CORS Middleware</h2>
<table><tr><th>Argument</th><th>Default</th></tr><tr><td>allow_origins</td><td>[]</td></tr></table>
<h3 id="opts">Options</h3>
<p>Nested text.</p>
<h2>Empty</h2>
<h2>CORS Middleware</h2>
<p>Second one.</p>
<!-- a comment -->
</body></html>
"""


def sections() -> dict[str, Section]:
    return {s.id: s for s in parse("middleware.html", "Middleware", PAGE.encode())}


def test_headings_nest_with_their_own_ids_else_the_site_anchor():
    assert [(s.id, s.title, s.parent) for s in sections().values()] == [
        ("middleware.html", "Middleware", None),
        ("middleware.html#middleware", "Middleware", "middleware.html"),
        ("middleware.html#cors-middleware", "CORS Middleware", "middleware.html#middleware"),
        ("middleware.html#opts", "Options", "middleware.html#cors-middleware"),
        ("middleware.html#empty", "Empty", "middleware.html#middleware"),
        ("middleware.html#cors-middleware_1", "CORS Middleware", "middleware.html#middleware"),
    ]


def test_lead_text_without_scripts_styles_or_navigation():
    lead = sections()["middleware.html"]
    assert lead.text == "Starlette includes several middleware classes."
    body = " ".join(s.text for s in sections().values())
    for dropped in ("tracking", "color: red", "Home", "Docs", "Ignored", "a comment"):
        assert dropped not in body


def test_code_keeps_its_lines_and_a_heading_like_line_in_pre_is_code():
    text = sections()["middleware.html#middleware"].text
    assert "Wrap the app." in text
    assert "# Not a heading\napp = Starlette(\n    middleware=middleware)" in text
    assert not any("not-a-heading" in sid for sid in sections())


def test_a_table_reads_cell_by_cell_and_an_empty_section_has_no_text():
    assert "Argument" in sections()["middleware.html#cors-middleware"].text
    assert "allow_origins" in sections()["middleware.html#cors-middleware"].text
    assert sections()["middleware.html#empty"].text == ""
    assert sections()["middleware.html#cors-middleware_1"].text == "Second one."


def test_bytes_that_are_not_html_are_refused():
    with pytest.raises(ValueError, match="not readable as HTML"):
        parse("empty.html", "Empty", b"")
