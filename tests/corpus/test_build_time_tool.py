"""tools.build_time changes one page of a copy as an author would: the corpus still loads, one
document's sections change, and the committed project is not touched."""

from __future__ import annotations

from rag_contract.corpus.sources import load_corpus
from tests.support import ROOT
from tools.build_time import ADDED, change_one_page
from tools.project_copy import copy_project

STARLETTE = ROOT / "examples" / "starlette-docs"


def test_one_page_changes_and_the_manifest_follows_it(tmp_path):
    before = load_corpus(STARLETTE / "corpus")
    copy = copy_project(STARLETTE, tmp_path / "project")
    changed = change_one_page(copy)
    after = load_corpus(copy / "corpus")  # refuses a file whose manifest entry does not match it
    assert after.fingerprint != before.fingerprint
    differ = {s.id.split("#")[0] for s in {*before.sections} ^ {*after.sections}}
    assert differ == {changed}
    assert any(ADDED.strip() in s.text for s in after.sections)
    assert load_corpus(STARLETTE / "corpus").fingerprint == before.fingerprint
