"""Corpus verification on a two-file corpus written in the test: the manifest's shape, every
refusal with its whole message, which check wins when two fail, and the fingerprint's exact
arithmetic. Mutation testing runs this file against the verification rules
(eval/mutation.yaml), so it reads nothing from the committed corpus."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
import yaml

from rag_contract.corpus.formats.markdown import IDENTITY as MARKDOWN_IDENTITY
from rag_contract.corpus.sections import Section
from rag_contract.corpus.sources import (
    Corpus,
    CorpusError,
    ManifestEntry,
    corpus_fingerprint,
    load_corpus,
    read_manifest,
    verify_files,
)

TEXTS = {
    "rfc2.txt": "Table of Contents\n\n   1.  Second\n\n1.  Second\n\n   Caf\u00e9 au lait.\n",
    "rfc1.txt": "Table of Contents\n\n   1.  First\n\n1.  First\n\n   Hello world.\n",
}
KEYS = ["bytes", "file", "retrieved", "sha256", "source", "title"]


def entry(name: str, data: bytes) -> dict:
    return {
        "file": name,
        "title": f"Title of {name}",
        "source": f"https://example.org/{name}",
        "retrieved": "2024-01-06",
        "bytes": len(data),
        "sha256": hashlib.sha256(data).hexdigest(),
    }


def write_corpus(d: Path, files: list[dict] | None = None) -> Path:
    d.mkdir(parents=True, exist_ok=True)
    for name, text in TEXTS.items():
        (d / name).write_bytes(text.encode())
    if files is None:
        files = [entry(n, t.encode()) for n, t in TEXTS.items()]
    # "retrieved" unquoted, as the committed manifest writes it: YAML reads it as a date
    (d / "manifest.yaml").write_text(
        yaml.safe_dump({"files": files}, sort_keys=False).replace("'2024-01-06'", "2024-01-06")
    )
    return d


@pytest.fixture
def corpus_dir(tmp_path: Path) -> Path:
    return write_corpus(tmp_path / "corpus")


def test_the_manifest_reads_as_entries_sorted_by_file(corpus_dir):
    entries = read_manifest(corpus_dir)
    one, two = TEXTS["rfc1.txt"].encode(), TEXTS["rfc2.txt"].encode()
    assert entries == (
        ManifestEntry(
            "rfc1.txt",
            "Title of rfc1.txt",
            "https://example.org/rfc1.txt",
            "2024-01-06",
            len(one),
            hashlib.sha256(one).hexdigest(),
        ),
        ManifestEntry(
            "rfc2.txt",
            "Title of rfc2.txt",
            "https://example.org/rfc2.txt",
            "2024-01-06",
            len(two),
            hashlib.sha256(two).hexdigest(),
        ),
    )
    assert all(type(e.bytes) is int and type(e.retrieved) is str for e in entries)
    assert [e.document for e in entries] == ["rfc1", "rfc2"]


def test_a_missing_manifest_is_named(tmp_path):
    with pytest.raises(CorpusError, match="^manifest.yaml: manifest missing$"):
        read_manifest(tmp_path)


@pytest.mark.parametrize("doc", ["[]", "files: {}", "other: []", "files: rfc1.txt"])
def test_a_manifest_must_be_a_mapping_with_a_files_list(tmp_path, doc):
    (tmp_path / "manifest.yaml").write_text(doc)
    with pytest.raises(CorpusError) as caught:
        read_manifest(tmp_path)
    assert str(caught.value) == f"{tmp_path / 'manifest.yaml'}: must be a mapping with a 'files' list"


def test_an_empty_files_list_is_an_empty_manifest(tmp_path):
    (tmp_path / "manifest.yaml").write_text("files: []\n")
    assert read_manifest(tmp_path) == ()


@pytest.mark.parametrize(
    "change",
    [
        lambda e: "rfc1.txt",
        lambda e: {k: v for k, v in e.items() if k != "sha256"},
        lambda e: {k: v for k, v in e.items() if k != "file"},
        lambda e: e | {"license": "none"},
    ],
)
def test_each_listed_file_has_exactly_the_six_keys(tmp_path, change):
    one = entry("rfc1.txt", b"x")
    write_corpus(tmp_path, [one, change(entry("rfc2.txt", b"y"))])
    with pytest.raises(CorpusError) as caught:
        read_manifest(tmp_path)
    assert str(caught.value) == (
        f"{tmp_path / 'manifest.yaml'}: files[1] must have exactly the keys {KEYS}"
        " (and optionally ['format', 'licence'])"
    )


def test_the_first_bad_entry_is_the_one_named(tmp_path):
    write_corpus(tmp_path, [{"file": "rfc1.txt"}, {"file": "rfc2.txt"}])
    with pytest.raises(CorpusError, match=r"files\[0\] must"):
        read_manifest(tmp_path)


def test_a_file_listed_twice_is_refused(tmp_path):
    write_corpus(tmp_path, [entry("rfc1.txt", b"x"), entry("rfc2.txt", b"y"), entry("rfc1.txt", b"z")])
    with pytest.raises(CorpusError) as caught:
        read_manifest(tmp_path)
    assert str(caught.value) == f"{tmp_path / 'manifest.yaml'}: a file is listed twice"


def test_verified_files_are_their_bytes(corpus_dir):
    blobs = verify_files(corpus_dir, read_manifest(corpus_dir))
    assert blobs == {n: t.encode() for n, t in sorted(TEXTS.items())}


@pytest.mark.parametrize("extras", [["rfc9.txt"], ["rfc8.txt", "rfc9.txt"]])
def test_a_text_the_manifest_does_not_list_is_refused_first_by_name(corpus_dir, extras):
    for name in extras:
        (corpus_dir / name).write_text("unlisted")
    (corpus_dir / "rfc1.txt").unlink()  # the unlisted file is named before a missing one
    with pytest.raises(CorpusError) as caught:
        verify_files(corpus_dir, read_manifest(corpus_dir))
    assert str(caught.value) == f"{extras[0]}: on disk but not in manifest.yaml"


def test_files_no_format_reads_are_not_the_manifests_business(corpus_dir):
    (corpus_dir / "mkdocs.yml").write_text("nav: []")
    (corpus_dir / "rfc9.txt.orig").write_text("backup")
    assert set(verify_files(corpus_dir, read_manifest(corpus_dir))) == {"rfc1.txt", "rfc2.txt"}


def test_a_readable_file_is_refused_unless_listed_or_kept(corpus_dir):
    (corpus_dir / "SOURCES.md").write_text("notes")
    with pytest.raises(CorpusError, match="^SOURCES.md: on disk but not in manifest.yaml$"):
        verify_files(corpus_dir, read_manifest(corpus_dir))
    assert set(verify_files(corpus_dir, read_manifest(corpus_dir), kept=("SOURCES.md",))) == {"rfc1.txt", "rfc2.txt"}


def test_a_file_no_format_reads_is_refused_in_one_line_naming_the_formats(tmp_path):
    write_corpus(tmp_path, [entry("rfc1.txt", b"x"), entry("notes.pdf", b"y")])
    with pytest.raises(CorpusError) as caught:
        read_manifest(tmp_path)
    assert str(caught.value) == (
        "notes.pdf: no format reads this file; formats known: rfc-text (.txt), markdown (.md, .markdown), "
        "html (.html, .htm), rst (.rst)"
    )
    write_corpus(tmp_path, [entry("rfc1.txt", b"x") | {"format": "asciidoc"}])
    with pytest.raises(CorpusError, match=r"^rfc1.txt: format 'asciidoc' is not known; formats known: rfc-text"):
        read_manifest(tmp_path)


def test_a_listed_file_that_is_missing_is_refused(corpus_dir):
    entries = read_manifest(corpus_dir)
    (corpus_dir / "rfc2.txt").unlink()
    with pytest.raises(CorpusError) as caught:
        verify_files(corpus_dir, entries)
    assert str(caught.value) == "rfc2.txt: listed in manifest.yaml but missing"


def test_a_directory_is_not_a_listed_file(tmp_path):
    (tmp_path / "rfc1.txt").mkdir()
    with pytest.raises(CorpusError, match="^rfc1.txt: listed in manifest.yaml but missing$"):
        verify_files(tmp_path, (ManifestEntry("rfc1.txt", "t", "s", "r", 0, hashlib.sha256(b"").hexdigest()),))


def test_an_unreadable_file_is_named(corpus_dir, monkeypatch):
    entries = read_manifest(corpus_dir)
    real = Path.read_bytes

    def read_bytes(self: Path) -> bytes:
        if self.name == "rfc2.txt":
            raise PermissionError(13, "Permission denied")
        return real(self)

    monkeypatch.setattr(Path, "read_bytes", read_bytes)
    with pytest.raises(CorpusError) as caught:
        verify_files(corpus_dir, entries)
    assert str(caught.value) == "rfc2.txt: cannot be read (Permission denied)"


def test_a_one_byte_edit_is_refused_with_both_hashes(corpus_dir):
    entries = read_manifest(corpus_dir)
    edited = TEXTS["rfc1.txt"].replace("Hello", "Jello").encode()
    (corpus_dir / "rfc1.txt").write_bytes(edited)
    with pytest.raises(CorpusError) as caught:
        verify_files(corpus_dir, entries)
    assert str(caught.value) == (
        f"rfc1.txt: sha256 mismatch: manifest has {entries[0].sha256}, file has {hashlib.sha256(edited).hexdigest()}"
    )


def test_a_wrong_length_with_the_right_hash_is_refused(tmp_path):
    data = TEXTS["rfc1.txt"].encode()
    write_corpus(
        tmp_path, [entry("rfc1.txt", data) | {"bytes": len(data) + 1}, entry("rfc2.txt", TEXTS["rfc2.txt"].encode())]
    )
    with pytest.raises(CorpusError) as caught:
        verify_files(tmp_path, read_manifest(tmp_path))
    assert str(caught.value) == f"rfc1.txt: length mismatch: manifest has {len(data) + 1}, file has {len(data)}"


def test_the_fingerprint_hashes_each_file_and_its_hash_in_file_order():
    a = ManifestEntry("a.txt", "A", "s", "r", 1, "aa")
    b = ManifestEntry("b.txt", "B", "s", "r", 2, "bb")
    want = hashlib.sha256(b"a.txt\0aa\nb.txt\0bb\n").hexdigest()
    assert corpus_fingerprint((a, b)) == corpus_fingerprint((b, a)) == want
    assert corpus_fingerprint((a, b)) != corpus_fingerprint((a, ManifestEntry("b.txt", "B", "s", "r", 2, "bc")))


def both() -> list[dict]:
    return [entry(n, t.encode()) for n, t in TEXTS.items()]


def test_a_format_with_an_identity_fingerprints_it_and_the_title():
    md = ManifestEntry("a.md", "Page A", "s", "r", 1, "aa")
    want = hashlib.sha256(f"a.md\0aa\0{MARKDOWN_IDENTITY}\0Page A\n".encode()).hexdigest()
    assert corpus_fingerprint((md,)) == want
    retitled = ManifestEntry("a.md", "Another title", "s", "r", 1, "aa")
    assert corpus_fingerprint((retitled,)) != want
    as_text = ManifestEntry("a.md", "Page A", "s", "r", 1, "aa", format="rfc-text")
    assert corpus_fingerprint((as_text,)) == hashlib.sha256(b"a.md\0aa\n").hexdigest()


def test_a_declared_format_reads_the_file_whatever_its_suffix(tmp_path):
    data = b"Lead.\n\n## One\n\nText.\n"
    (tmp_path / "page.txt").write_bytes(data)
    write_corpus(tmp_path, [*both(), entry("page.txt", data) | {"format": "markdown"}])
    entries = read_manifest(tmp_path)
    assert [(e.file, e.format, e.document) for e in entries] == [
        ("page.txt", "markdown", "page.txt"),
        ("rfc1.txt", None, "rfc1"),
        ("rfc2.txt", None, "rfc2"),
    ]
    corpus = load_corpus(tmp_path)
    assert [s.id for s in corpus.sections] == ["page.txt", "page.txt#one", "rfc1#1", "rfc2#1"]
    assert corpus.sections[0].title == "Title of page.txt"  # the lead section, titled by the manifest


def test_kept_files_are_names_and_come_back_with_the_corpus(tmp_path):
    write_corpus(tmp_path)
    (tmp_path / "NOTES.md").write_text("kept")
    (tmp_path / "manifest.yaml").write_text("kept: [NOTES.md]\n" + (tmp_path / "manifest.yaml").read_text())
    assert load_corpus(tmp_path).kept == ("NOTES.md",)
    for bad in ("kept: NOTES.md\n", "kept: [1]\n", "kept: ['']\n"):
        (tmp_path / "manifest.yaml").write_text(bad + "files: []\n")
        with pytest.raises(CorpusError) as caught:
            read_manifest(tmp_path)
        assert str(caught.value) == f"{tmp_path / 'manifest.yaml'}: 'kept' must be a list of file names"


def test_two_files_giving_one_section_id_are_refused(tmp_path):
    text = b"Table of Contents\n\n   1.  One\n\n1.  One\n\n   Body.\n"
    page = b"# 1\n\nBody.\n"
    (tmp_path / "a.md.txt").write_bytes(text)
    (tmp_path / "a.md").write_bytes(page)
    write_corpus(tmp_path, [*both(), entry("a.md.txt", text), entry("a.md", page)])
    with pytest.raises(CorpusError) as caught:
        load_corpus(tmp_path)
    assert str(caught.value) == "manifest.yaml: section id 'a.md#1' is given by two files"


def test_optional_keys_are_read_and_a_licence_kept(tmp_path):
    write_corpus(tmp_path, [both()[0] | {"licence": "MIT", "format": "rfc-text"}, both()[1]])
    e = read_manifest(tmp_path)[1]  # rfc2.txt, sorted after rfc1.txt
    assert (e.licence, e.format) == ("MIT", "rfc-text")


def test_a_verified_corpus_is_parsed_in_file_order_as_utf8(corpus_dir):
    corpus = load_corpus(corpus_dir)
    assert corpus == Corpus(
        entries=read_manifest(corpus_dir),
        sections=(Section("rfc1#1", "First", "Hello world."), Section("rfc2#1", "Second", "Caf\u00e9 au lait.")),
        listed=("rfc2.txt", "rfc1.txt"),  # the manifest's own order: its reading order
    )
    assert [e.file for e in corpus.reading_order] == ["rfc2.txt", "rfc1.txt"]
    assert corpus.fingerprint == corpus_fingerprint(read_manifest(corpus_dir))


def test_nothing_is_parsed_before_every_file_has_passed(corpus_dir):
    (corpus_dir / "rfc2.txt").write_text("no table of contents: the parser would fail on it\n")
    with pytest.raises(CorpusError, match="^rfc2.txt: sha256 mismatch"):
        load_corpus(corpus_dir)


def _replace(d: Path, name: str, data: bytes) -> None:
    """``name`` rewritten to ``data`` with its manifest entry updated: the hash check passes."""
    (d / name).write_bytes(data)
    files = [entry(n, (d / n).read_bytes()) for n in TEXTS]
    (d / "manifest.yaml").write_text(
        yaml.safe_dump({"files": files}, sort_keys=False).replace("'2024-01-06'", "2024-01-06")
    )


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"\x00\x01\xff binary", "rfc1.txt: not UTF-8 text (byte 2); an RFC text file is expected"),
        (b"Just text, no contents.\n", "rfc1.txt: no 'Table of Contents' line, so no sections can be found"),
        (b"Table of Contents\n\n   1.  First\n", "rfc1.txt: nothing follows the table of contents"),
    ],
)
def test_a_file_whose_hash_matches_but_is_no_rfc_text_is_refused_naming_it(corpus_dir, data, message):
    _replace(corpus_dir, "rfc1.txt", data)
    with pytest.raises(CorpusError) as caught:
        load_corpus(corpus_dir)
    assert str(caught.value) == message
