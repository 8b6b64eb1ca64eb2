"""Fuzz the index loader over hash-consistent, structurally broken files.

Each example takes the committed index, alters one file structurally (vectors truncated,
reshaped, of another dtype or width; a JSON line of the wrong type, missing a key, naming an
unknown section, a sentence position out of range; ``questions.json`` reshaped; meta.json's
own fields changed), then rewrites meta.json's hashes as a careless rebuild would, so the
hash check passes and only the structure checks stand between the files and the service.
``load_index`` must load them or refuse in one line (``IndexLoadError``), never raise
anything else; for a few examples the served app over what loaded (or over nothing, with
the load error) answers the routes without a 500.
"""

from __future__ import annotations

import hashlib
import io
import json
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from starlette.testclient import TestClient

from rag_contract.index.registry import Registry
from rag_contract.index.store import FILES, Index, IndexLoadError, load_index
from tests.support.apps import fresh_status, make_app

FUZZ = settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
VECTORS = ("vectors.npy", "sentence_vectors.npy", "question_vectors.npy")
LINES = ("sections.jsonl", "chunks.jsonl", "sentences.jsonl")
KEYS = {
    "sections.jsonl": ("id", "title", "text", "parent"),
    "chunks.jsonl": ("id", "section_id", "ordinal", "text"),
    "sentences.jsonl": ("section_id", "position", "text", "kind"),
}
WRONG_JSON = st.sampled_from([None, 0, -1, 10**9, 1.5, "", "x", "rfc9999#1", [], ["x"], {}, {"a": 1}, True])
Files = dict[str, bytes]
Alteration = Callable[[Files], Files]


class Committed(dict):
    """The committed index's files by name (a short repr: hypothesis prints its arguments)."""

    def __repr__(self) -> str:
        return "<the committed index files>"


@pytest.fixture(scope="module")
def committed(root) -> Files:
    return Committed({name: (root / "index" / name).read_bytes() for name in (*FILES, "meta.json")})


def npy(a: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, a, allow_pickle=False)
    return buf.getvalue()


def write(files: Files, directory: Path) -> None:
    """``files`` into ``directory``, meta.json's hashes rewritten to vouch for every one."""
    meta = json.loads(files["meta.json"])
    if isinstance(meta, dict) and isinstance(meta.get("files"), dict):
        meta["files"] = {name: hashlib.sha256(files[name]).hexdigest() for name in FILES}
    for name in FILES:
        (directory / name).write_bytes(files[name])
    (directory / "meta.json").write_text(json.dumps(meta))


# --- alterations -------------------------------------------------------------------------------


@st.composite
def vector_change(draw) -> Alteration:
    name = draw(st.sampled_from(VECTORS))
    how = draw(
        st.sampled_from(
            ["rows", "dims", "flat", "cube", "dtype", "empty", "nonfinite", "transpose", "no_columns", "scalar"]
        )
    )
    k = draw(st.integers(min_value=0, max_value=12))
    dtype = draw(st.sampled_from(["int8", "int64", "float16", "float64", "bool", "complex64", "<U3", "uint8"]))

    def change(files: Files) -> Files:
        a = np.load(io.BytesIO(files[name]), allow_pickle=False)
        if how == "rows":
            a = a[:k]
        elif how == "dims":
            a = a[:, :k]
        elif how == "flat":
            a = a.reshape(-1)
        elif how == "cube":
            a = a[: (a.shape[0] // 2) * 2].reshape(-1, 2, a.shape[1])
        elif how == "dtype":
            a = a.astype(dtype)
        elif how == "empty":
            a = np.zeros((0, 0), dtype=np.float32)
        elif how == "nonfinite":
            a = a.copy()
            a[k % max(1, a.shape[0]) :: 7, k % a.shape[1]] = [np.nan, np.inf, -np.inf][k % 3]
        elif how == "transpose":
            a = np.ascontiguousarray(a.T)
        elif how == "no_columns":
            a = np.zeros((a.shape[0], 0), dtype=np.float32)
        else:
            a = np.float32(1.0).reshape(())
        return files | {name: npy(a)}

    change.__name__ = f"{name}:{how}:{k}:{dtype}"
    return change


@st.composite
def line_change(draw) -> Alteration:
    name = draw(st.sampled_from(LINES))
    how = draw(
        st.sampled_from(["value", "drop_key", "extra_key", "not_object", "drop_line", "duplicate", "swap", "empty"])
    )
    key = draw(st.sampled_from(KEYS[name]))
    value = draw(WRONG_JSON)
    row = draw(st.integers(min_value=0, max_value=10_000))

    def change(files: Files) -> Files:
        lines = files[name].decode().splitlines()
        i = row % len(lines)
        item: Any = json.loads(lines[i])
        if how == "value":
            item[key] = value
        elif how == "drop_key":
            del item[key]
        elif how == "extra_key":
            item["unexpected"] = value
        elif how == "not_object":
            item = value
        if how == "drop_line":
            del lines[i]
        elif how == "duplicate":
            lines.insert(i, lines[i])
        elif how == "swap":
            j = (i + 1 + row // len(lines)) % len(lines)
            lines[i], lines[j] = lines[j], lines[i]
        elif how == "empty":
            lines = []
        else:
            lines[i] = json.dumps(item)
        return files | {name: "".join(line + "\n" for line in lines).encode()}

    change.__name__ = f"{name}:{how}:{key}:{value!r}:{row}"
    return change


@st.composite
def questions_change(draw) -> Alteration:
    shape = draw(
        st.sampled_from(
            [
                [],
                {},
                {"questions": []},
                {"fingerprint": "x"},
                {"fingerprint": 1, "questions": []},
                {"fingerprint": "x", "questions": "text"},
                {"fingerprint": "x", "questions": [1, 2]},
                "keep-drop-one",
                "keep-add-one",
                "not-json",
            ]
        )
    )

    def change(files: Files) -> Files:
        q = json.loads(files["questions.json"])
        if shape == "keep-drop-one":
            doc: Any = q | {"questions": q["questions"][1:]}
        elif shape == "keep-add-one":
            doc = q | {"questions": [*q["questions"], "One question too many?"]}
        elif shape == "not-json":
            return files | {"questions.json": b"{not json"}
        else:
            doc = shape
        return files | {"questions.json": json.dumps(doc).encode()}

    change.__name__ = f"questions.json:{shape!r}"
    return change


@st.composite
def meta_change(draw) -> Alteration:
    key = draw(st.sampled_from(["dimensions", "sections", "chunks", "sentences", "embedder", "question_fingerprint"]))
    value = draw(WRONG_JSON)
    drop = draw(st.booleans())

    def change(files: Files) -> Files:
        meta = json.loads(files["meta.json"])
        if drop:
            meta.pop(key, None)
        else:
            meta[key] = value
        return files | {"meta.json": json.dumps(meta).encode()}

    change.__name__ = f"meta.json:{key}:{'dropped' if drop else repr(value)}"
    return change


ALTERATIONS = st.one_of(vector_change(), line_change(), questions_change(), meta_change())


def load_altered(committed: Files, alteration: Alteration) -> Index | IndexLoadError:
    with tempfile.TemporaryDirectory() as tmp:
        write(alteration(committed), Path(tmp))
        try:
            return load_index(Path(tmp))
        except IndexLoadError as exc:
            assert "\n" not in str(exc) and tmp not in str(exc), (alteration.__name__, str(exc))
            return exc


@FUZZ
@given(alteration=ALTERATIONS)
def test_a_broken_index_loads_or_is_refused_in_one_line(committed, alteration):
    load_altered(committed, alteration)  # any other exception fails the example


@settings(FUZZ, max_examples=8)
@given(alteration=ALTERATIONS)
def test_the_app_over_a_broken_index_answers_without_a_500(committed, project, embedder, tmp_path, alteration):
    loaded = load_altered(committed, alteration)
    index = loaded if isinstance(loaded, Index) else None
    app = make_app(project, Registry(index), drafts=tmp_path, embedder=embedder, status=fresh_status(index))
    client = TestClient(app, raise_server_exceptions=False)
    replies = [
        client.get("/health"),
        client.get("/answer/q11"),
        client.get("/q/q11"),
        client.post("/ask", json={"question": "Which characters are structural in JSON?"}),
    ]
    assert all(r.status_code != 500 for r in replies), (alteration.__name__, [r.status_code for r in replies])
