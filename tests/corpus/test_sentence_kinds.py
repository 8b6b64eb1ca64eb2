"""Sentence units carry their block's kind and never cross a block: prose and list items split into
sentences, a table row is one unit, a code block is cut into its groups of lines (kept as lines,
so it can be shown as code), and a drafter may not join a code unit to anything."""

from __future__ import annotations

import pytest

from rag_contract.corpus.formats.markdown import parse
from rag_contract.corpus.sections import CODE, ITEM, PROSE, ROW, Block, Section
from rag_contract.corpus.sentences import Sentence, code_units, joinable, split_sections

PAGE = """\
Wrap the app with middleware. It runs in order for every request:

```python
app = Starlette(
    middleware=middleware,
)

    async def handler(request):
        return PlainTextResponse("ok")
```

* The `minimum_size` argument sets the smallest response compressed.
* Short item.

| Argument | Meaning of it |
|---|---|
| `allow_origins` | the origins a browser may call from |
"""


def units() -> list[tuple[str, str]]:
    return [(s.kind, s.text) for s in split_sections(parse("page.md", "Page", PAGE.encode()))]


def test_each_unit_carries_its_blocks_kind_and_none_crosses_a_block():
    assert units() == [
        (PROSE, "Wrap the app with middleware."),
        (PROSE, "It runs in order for every request:"),
        (CODE, "app = Starlette(\n    middleware=middleware,\n)"),
        (CODE, 'async def handler(request):\n    return PlainTextResponse("ok")'),
        (ITEM, "The `minimum_size` argument sets the smallest response compressed."),
        (ROW, "Argument | Meaning of it"),
        (ROW, "`allow_origins` | the origins a browser may call from"),
    ]


def test_a_code_group_keeps_its_lines_loses_shared_indentation_and_short_groups():
    assert code_units("    x = f(\n        y)\n\npass\n\n\n  a = b + c  \n") == ["x = f(\n    y)", "a = b + c"]


def test_a_section_without_blocks_is_prose_as_before():
    section = Section("rfc1#1", "One", "A cache stores responses. It reuses them later on.\n\nA third sentence here.")
    assert [(s.kind, s.text) for s in split_sections([section])] == [
        (PROSE, "A cache stores responses."),
        (PROSE, "It reuses them later on."),
        (PROSE, "A third sentence here."),
    ]


def test_a_code_unit_is_never_joined_to_prose():
    lead = Sentence("p.md", 0, "Here is how to do it:")
    code = Sentence("p.md", 1, "app = Starlette(debug=True)", CODE)
    item = Sentence("p.md", 2, "An item of the list.", ITEM)
    assert joinable(lead.kind, item.kind) and not joinable(lead.kind, code.kind) and not joinable(code.kind, lead.kind)


def test_an_unknown_kind_is_refused():
    with pytest.raises(ValueError, match="sentence kind 'heading' is not one of prose, code, item, row"):
        Sentence("p.md", 0, "Some text here too.", "heading")
    with pytest.raises(ValueError, match="block kind 'quote' is not one of prose, code, item, row"):
        Block("quote", "Some text.")
