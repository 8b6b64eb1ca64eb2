"""The reStructuredText format's rules, each on a page written in the test: sections nest with
their parents and take the anchors a Markdown heading of that title gets, the page title is
the lead section's, Sphinx's roles read as their text, admonitions and version notes as prose,
code blocks as code, autodoc and toctree directives are dropped and counted, directives nobody
registered read as their content, and no sentence carries reST markup."""

from __future__ import annotations

import pytest

from rag_contract.corpus.formats import FORMATS, format_for
from rag_contract.corpus.formats.rst import page_title, parse, read, xref_text
from rag_contract.corpus.sections import Section
from rag_contract.corpus.sentences import sentences
from rag_contract.scaffold.project_init import init_project
from tests.corpus.test_sentence_markup import RST_MARKUP

PAGE = """\
.. _quickstart:

Quickstart
==========

Eager to get started? This page gives an introduction to Flask.

A Minimal Application
---------------------

Call :func:`~flask.url_for` to build a URL, and :class:`flask.Flask` for the app.
Read :ref:`the tutorial <tutorial>` or :doc:`/patterns/index` first, and see
:meth:`.Flask.run` and :attr:`app.config`. Set :envvar:`FLASK_APP` in :file:`instance/{name}.cfg`.
Unregistered roles like :issue:`5001` or :py:obj:`~a.b.c` read as their text too.
Inline ``literal`` text, *emphasis*, **strong** and `a link <https://example.com>`_ lose their markup.

.. code-block:: python
   :caption: hello.py
   :emphasize-lines: 2

   from flask import Flask
   app = Flask(__name__)

Run it like this::

    $ flask --app hello run

.. note::

   This launches a very simple builtin server.

.. warning:: Never use it in production.

Variable Rules
~~~~~~~~~~~~~~

Converters turn a part of the URL into a value.

.. versionadded:: 2.2
   The ``path`` converter accepts slashes.

.. versionchanged:: 3.0

.. deprecated:: 2.3 Use ``int`` instead.

.. autoclass:: flask.Flask
   :members:

.. automodule:: flask.json
   :members:

.. toctree::
   :maxdepth: 2

   tutorial/index

.. currentmodule:: flask

A Minimal Application
---------------------

Same title, second anchor.

.. py:data:: TESTING
   :noindex:

   Enable testing mode.

   Default: ``False``

.. seealso:: The :doc:`api` page.

.. tabs::

   .. group-tab:: Bash

      .. code-block:: text

         $ export FLASK_APP=hello

.. admonition:: Debug mode

   The debugger allows executing code.
"""


def sections() -> dict[str, Section]:
    return {s.id: s for s in parse("quickstart.rst", "Quickstart guide", PAGE.encode())}


def test_sections_nest_with_parents_and_markdown_anchors():
    got = sections()
    assert [(s.id, s.title, s.parent) for s in got.values()] == [
        ("quickstart.rst", "Quickstart guide", None),
        ("quickstart.rst#a-minimal-application", "A Minimal Application", "quickstart.rst"),
        ("quickstart.rst#variable-rules", "Variable Rules", "quickstart.rst#a-minimal-application"),
        ("quickstart.rst#a-minimal-application_1", "A Minimal Application", "quickstart.rst"),
    ]
    assert got["quickstart.rst"].text == "Eager to get started? This page gives an introduction to Flask."


def test_the_page_title_is_the_lead_section_and_init_writes_it_into_the_manifest(tmp_path):
    assert page_title(PAGE.encode()) == "Quickstart"
    assert page_title(b"Just a paragraph.\n") is None
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "quickstart.rst").write_text(PAGE)
    (docs / "untitled.rst").write_text("No title here, only text.\n")
    init_project(tmp_path / "p", [docs])
    manifest = (tmp_path / "p" / "corpus" / "manifest.yaml").read_text()
    assert "title: Quickstart\n" in manifest and "title: Untitled\n" in manifest
    assert "format: rst\n" in manifest


def test_roles_read_as_their_text():
    text = sections()["quickstart.rst#a-minimal-application"].text
    assert "Call url_for to build a URL, and flask.Flask for the app." in text
    assert "Read the tutorial or /patterns/index first" in text
    assert "see\nFlask.run and app.config. Set FLASK_APP in instance/name.cfg." in text
    assert "Unregistered roles like 5001 or c read as their text too." in text
    assert "Inline literal text, emphasis, strong and a link lose their markup." in text


@pytest.mark.parametrize(
    ("role_text", "shown"),
    [
        ("flask.Flask", "flask.Flask"),
        ("~flask.Flask.run", "run"),
        (".Flask.run", "Flask.run"),
        ("!flask.g", "flask.g"),
        ("the tutorial <tutorial>", "the tutorial"),
        ("instance/{name}.cfg", "instance/name.cfg"),
    ],
)
def test_a_cross_reference_shows_what_sphinx_shows(role_text, shown):
    assert xref_text(role_text) == shown


def test_code_blocks_are_code_on_their_own_lines():
    text = sections()["quickstart.rst#a-minimal-application"].text
    assert "\n\nfrom flask import Flask\napp = Flask(__name__)\n\n" in text
    assert "Run it like this:\n\n$ flask --app hello run\n\n" in text
    assert ":caption:" not in text and "code-block" not in text


def test_admonitions_are_prose():
    text = sections()["quickstart.rst#a-minimal-application"].text
    assert text.endswith("This launches a very simple builtin server.\n\nNever use it in production.")
    last = sections()["quickstart.rst#a-minimal-application_1"].text
    assert last.endswith("Debug mode\n\nThe debugger allows executing code.")


def test_version_notes_read_as_sphinx_writes_them():
    text = sections()["quickstart.rst#variable-rules"].text
    assert "Added in version 2.2: The path converter accepts slashes." in text
    assert "Changed in version 3.0." in text
    assert "Deprecated since version 2.3: Use int instead." in text


def test_autodoc_toctree_and_context_directives_are_dropped_and_counted():
    reading = read("quickstart.rst", "Quickstart", PAGE.encode())
    assert dict(reading.dropped) == {"autoclass": 1, "automodule": 1, "currentmodule": 1, "toctree": 1}
    text = reading.sections[2].text
    assert "flask.Flask" not in text and "members" not in text and "tutorial/index" not in text
    assert text.endswith("Deprecated since version 2.3: Use int instead.")


def test_object_descriptions_and_unregistered_directives_read_as_their_content():
    text = sections()["quickstart.rst#a-minimal-application_1"].text
    assert "TESTING\nEnable testing mode.\n\nDefault: False" in text
    assert "noindex" not in text  # an option is not a signature
    assert "The api page." in text  # seealso: its content
    assert "Bash\n\n$ export FLASK_APP=hello" in text  # tabs and group-tab: arguments and content


def test_nothing_outside_the_file_is_read(tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("TOP SECRET")
    page = f".. include:: {secret}\n\n.. raw:: html\n\n   <b>raw</b>\n\n.. literalinclude:: {secret}\n\nText.\n"
    reading = read("p.rst", "P", page.encode())
    assert [s.text for s in reading.sections] == ["Text."]
    assert dict(reading.dropped) == {"include": 1, "literalinclude": 1, "raw": 1}


def test_broken_markup_is_left_out_not_reported_in_the_text():
    page = "Title\n=====\n\nAn ``unclosed literal and *emphasis.\n\n.. no-such-directive-here::\n\n:bad\n\nEnd.\n"
    got = parse("p.rst", "P", page.encode())
    assert [s.id for s in got] == ["p.rst"]
    assert got[0].text == "An unclosed literal and emphasis.\n\n:bad\n\nEnd."
    assert "ERROR" not in got[0].text and "`" not in got[0].text


def test_a_lone_section_is_the_page_title_but_two_top_sections_are_sections():
    got = parse("p.rst", "P", b"One\n===\n\nFirst.\n\nTwo\n===\n\nSecond.\n")
    assert [(s.id, s.parent, s.text) for s in got] == [
        ("p.rst", None, ""),
        ("p.rst#one", "p.rst", "First."),
        ("p.rst#two", "p.rst", "Second."),
    ]


def test_tables_lists_and_definitions_read_as_text():
    page = """\
- first item in a list
- second item in a list

term
   Its definition.

======  =========
Key     Meaning
======  =========
``A``   the first
======  =========
"""
    text = parse("p.rst", "P", page.encode())[0].text
    assert (
        text == "first item in a list\n\nsecond item in a list\n\nterm\nIts definition.\n\nKey\nMeaning\n\nA\nthe first"
    )


def test_a_file_that_is_not_utf8_is_refused():
    with pytest.raises(ValueError, match="not UTF-8"):
        parse("p.rst", "P", b"\xff\xfe")


def test_rst_is_chosen_by_suffix():
    assert format_for("quickstart.rst").name == "rst"
    assert FORMATS["rst"].title is not None


def test_no_sentence_of_the_page_carries_markup():
    for section in sections().values():
        for sentence in sentences(section.text):
            assert not RST_MARKUP.search(sentence), (section.id, sentence)
