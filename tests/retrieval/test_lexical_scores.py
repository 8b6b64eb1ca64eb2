"""The served lexical leg scores with bm25s's arithmetic written out (``Lexical.scores``), so a
served process does not import bm25s: its scores must equal bm25s's own, bit for bit, for every
question the project answers and for queries that repeat a token or name none of the texts'."""

from __future__ import annotations

import subprocess
import sys

import bm25s
import numpy as np

from rag_contract.retrieval.lexical import Lexical, tokenize


def _bm25s_scores(lexical: Lexical, query: str) -> np.ndarray:
    """What bm25s's own ``get_scores`` gives over ``lexical``'s statistics."""
    state = lexical.state()
    bm25 = bm25s.BM25(k1=1.5, b=0.75, method="lucene")
    bm25.vocab_dict = dict(state.vocab)
    bm25.scores = {"data": state.data, "indices": state.indices, "indptr": state.indptr, "num_docs": state.num_docs}
    bm25.nonoccurrence_array = None
    toks = [t for t in tokenize(query) if t in bm25.vocab_dict]
    if not toks:
        return np.zeros(state.num_docs, dtype=np.float32)
    return np.asarray(bm25.get_scores(toks), dtype=np.float32)


def test_scores_equal_bm25s_bit_for_bit_on_every_question(index, project):
    queries = [q.question for q in project.questions.questions]
    queries += ["cache cache cache max-age", "zzzz-unknown-token", "", "the of and", "ETag If-None-Match 304"]
    for query in queries:
        ours, theirs = index.lexical.scores(query), _bm25s_scores(index.lexical, query)
        assert ours.dtype == np.float32 and ours.tobytes() == theirs.tobytes(), query


def test_a_fresh_build_scores_as_its_restored_state():
    texts = ["max-age of a cached response", "the cache stores responses", "nothing here", ""]
    built = Lexical(texts)
    restored = Lexical.restored(built.state())
    for query in ("cache", "max-age max-age", "responses stores", "absent", ""):
        assert (
            built.scores(query).tobytes() == restored.scores(query).tobytes() == _bm25s_scores(built, query).tobytes()
        )


def test_the_served_modules_do_not_import_bm25s():
    code = "import sys, rag_contract.web.serving; print('bm25s' in sys.modules, 'tqdm' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "False"]
