"""The held-out report's arithmetic on canned answers (no index, no model): what counts as
answered, as citing, as a refusal answered, by kind; and the committed hashes it checks against."""

from __future__ import annotations

import gzip
import hashlib
import json
from pathlib import Path

import pytest

from rag_contract.answering.deadline import BudgetReport
from rag_contract.answering.grounding import Claim, Verdict
from rag_contract.answering.service import Abandoned, Answer, AnswerState, Passage
from rag_contract.cli import main
from rag_contract.config.questions import Question
from rag_contract.quality.held_out import committed_hashes, held_out_report, sha256_of
from tools.project_copy import copy_project
from tools.readme import PROJECTS

BUDGET = BudgetReport(150.0, 1.0, {})


def answer(state: AnswerState, cites: str | None, ranks: dict[str, int]) -> Answer:
    kept = (Verdict(Claim("c", cites), True, None, None, 1.0, ()),) if cites else ()
    passages = tuple(Passage(sid, sid, rank, 0.0) for sid, rank in ranks.items())
    return Answer(None, "q", state, kept, (), passages, "v1", BUDGET, "extractive")


class Canned:
    """A service that answers from a table, as ``Service.answer`` would."""

    class _Registry:
        def acquire(self):
            return type("I", (), {"version": "v1"})()

    registry = _Registry()
    drafter = type("D", (), {"name": "extractive"})()

    def __init__(self, table):
        self.table = table

    def answer(self, question, question_id=None):
        return self.table[question_id]


QUESTIONS = [
    Question("a1", "one", ("s#1",)),
    Question("a2", "two", ("s#2",)),
    Question("a3", "three", ("s#3",)),
    Question("a4", "four", ("s#4",)),
    Question("x1", "five", answerable=False, expected_state="partial", why="w", kind="open_number"),
    Question("x2", "six", answerable=False, expected_state="unsupported", why="w", kind="open_number"),
    Question("x3", "seven", answerable=False, expected_state="partial", why="w", kind="practice"),
]
TABLE = {
    "a1": answer(AnswerState.GROUNDED, "s#1", {"s#1": 1, "s#9": 2}),  # grounded, citing, rank 1
    "a2": answer(AnswerState.PARTIAL, "s#2", {"s#9": 1, "s#2": 2}),  # answered (partial), citing, rank 2
    "a3": answer(AnswerState.GROUNDED, "s#9", {"s#9": 1}),  # grounded, citing another: not found
    "a4": Abandoned("a4", "four", "abandoned", "spent", "v1", BUDGET),
    "x1": answer(AnswerState.GROUNDED, "s#9", {"s#9": 1}),  # a refusal answered in full
    "x2": answer(AnswerState.UNSUPPORTED, None, {"s#9": 1}),  # in its annotated state
    "x3": answer(AnswerState.UNSUPPORTED, None, {"s#9": 1}),  # refused, not in its annotated state
}


def test_the_report():
    r = held_out_report(Canned(TABLE), QUESTIONS, 10, "abc", True)
    assert (r["sha256"], r["sealed"], r["index_version"], r["drafter"]) == ("abc", True, "v1", "extractive")
    assert r["answerable"] == {
        "questions": 4,
        "recall@1": 0.25,
        "recall@5": 0.5,
        "recall@10": 0.5,
        "mrr": round((1 + 1 / 2) / 4, 4),
        "answered_citing_expected": 0.5,
        "grounded_citing_expected": 0.25,
    }
    u = r["unanswerable"]
    assert (u["questions"], u["answered_grounded"], u["answered_grounded_rate"]) == (3, ["x1"], 0.3333)
    assert u["state_agreement"] == 0.3333
    assert u["by_kind"] == {
        "open_number": {"questions": 2, "answered_grounded": ["x1"]},
        "practice": {"questions": 1, "answered_grounded": []},
    }
    rows = {row["id"]: row for row in r["questions"]}
    assert rows["a2"] == {
        "id": "a2",
        "answerable": True,
        "state": "partial",
        "rank": 2,
        "cites_expected": True,
        "accurate": False,
    }
    assert rows["a4"] == {"id": "a4", "answerable": True, "state": "abandoned"}
    assert rows["x1"]["kind"] == "open_number" and rows["x1"]["expected_state"] == "partial"


def test_committed_hashes_read_sha256sum_lines(tmp_path):
    f = tmp_path / "set.yaml"
    f.write_text("questions: []\n")
    sums = tmp_path / "SHA256SUMS"
    sums.write_text(f"{sha256_of(f)}  set.yaml\n\n0000  other.yaml\n")
    assert committed_hashes(sums) == {"set.yaml": sha256_of(f), "other.yaml": "0000"}
    assert committed_hashes(tmp_path / "absent") == {}


def test_the_committed_sealed_hash_is_the_protocols(root):
    sums = committed_hashes(root / "eval" / "sealed" / "SHA256SUMS")
    assert list(sums) == [
        "sealed.yaml",
        "rfc-sealed-2.yaml",
        "rfc-sealed-3.yaml",
        "rfc-sealed-4.yaml",
        "rfc-sealed-5.yaml",
        "rfc-sealed-6.yaml",
        "rfc-sealed-7.yaml",
        "rfc-sealed-8.yaml",
        "rfc-sealed-9.yaml",
        "rfc-sealed-10.yaml",
        "rfc-sealed-11.yaml",
        "rfc-sealed-12.yaml",
        "rfc-sealed-13.yaml",
        "rfc-sealed-14.yaml",
        "rfc-sealed-15.yaml",
        "rfc-sealed-16.yaml",
        "rfc-sealed-17.yaml",
        "rfc-sealed-18.yaml",
    ]
    starlette = committed_hashes(root / "examples" / "starlette-docs" / "eval" / "sealed" / "SHA256SUMS")
    assert list(starlette) == [
        "starlette-sealed-2.yaml",
        "starlette-sealed-3.yaml",
        "starlette-sealed-4.yaml",
        "starlette-sealed-5.yaml",
        "starlette-sealed-6.yaml",
        "starlette-sealed-7.yaml",
        "starlette-sealed-8.yaml",
        "starlette-sealed-9.yaml",
        "starlette-sealed-10.yaml",
        "starlette-sealed-11.yaml",
        "starlette-sealed-12.yaml",
        "starlette-sealed-13.yaml",
        "starlette-sealed-14.yaml",
        "starlette-sealed-15.yaml",
        "starlette-sealed-16.yaml",
        "starlette-sealed-17.yaml",
        "starlette-sealed-18.yaml",
    ]
    flask = committed_hashes(root / "examples" / "flask-docs" / "eval" / "sealed" / "SHA256SUMS")
    assert list(flask) == [
        "flask-sealed-15.yaml",
        "flask-sealed-16.yaml",
        "flask-sealed-17.yaml",
        "flask-sealed-18.yaml",
    ]
    assert all(len(v) == 64 for v in [*sums.values(), *starlette.values(), *flask.values()])


# From set 18 on, a sealed set is committed with its hash, compressed in eval/sealed/unopened/
# until it is opened (PROTOCOL-18.md): set 17's files were kept outside the repository and lost.
KEPT_FROM = 18


def _number(name: str) -> int | None:
    """A sealed set's number (``rfc-sealed-18.yaml``: 18), None for an unnumbered one."""
    tail = name.removesuffix(".yaml").rsplit("-", 1)[-1]
    return int(tail) if tail.isdigit() else None


@pytest.mark.parametrize("project", PROJECTS, ids=str)
def test_every_set_sealed_since_eighteen_is_kept_opened_or_unopened_and_is_the_hashed_file(root, project):
    """Hashed, never printed: each kept file is the one whose hash was committed, opened
    (``eval/sealed/<set>.yaml``) or not (``unopened/<set>.yaml.gz``, which held-out and the startup
    probe never read), and none is lost."""
    sealed = root / project / "eval" / "sealed"
    sums = committed_hashes(sealed / "SHA256SUMS")
    kept = [n for n in sums if (_number(n) or 0) >= KEPT_FROM]
    assert kept, "the sets sealed since 18 are listed"
    for name in kept:
        opened, unopened = sealed / name, sealed / "unopened" / f"{name}.gz"
        assert opened.exists() != unopened.exists(), f"{name}: kept once, opened or not"
        data = opened.read_bytes() if opened.exists() else gzip.decompress(unopened.read_bytes())
        assert hashlib.sha256(data).hexdigest() == sums[name], f"{name}: not the file whose hash was committed"


@pytest.mark.slow
@pytest.mark.parametrize(
    ("project", "name"),
    [
        (".", "sealed.yaml"),
        (".", "rfc-sealed-2.yaml"),
        (".", "rfc-sealed-3.yaml"),
        (".", "rfc-sealed-4.yaml"),
        (".", "rfc-sealed-5.yaml"),
        (".", "rfc-sealed-6.yaml"),
        (".", "rfc-sealed-7.yaml"),
        (".", "rfc-sealed-8.yaml"),
        (".", "rfc-sealed-9.yaml"),
        (".", "rfc-sealed-10.yaml"),
        (".", "rfc-sealed-11.yaml"),
        (".", "rfc-sealed-12.yaml"),
        (".", "rfc-sealed-14.yaml"),
        (".", "rfc-sealed-15.yaml"),
        (".", "rfc-sealed-16.yaml"),
        (".", "rfc-sealed-18.yaml"),
        ("examples/starlette-docs", "starlette-sealed-2.yaml"),
        ("examples/starlette-docs", "starlette-sealed-3.yaml"),
        ("examples/starlette-docs", "starlette-sealed-4.yaml"),
        ("examples/starlette-docs", "starlette-sealed-5.yaml"),
        ("examples/starlette-docs", "starlette-sealed-6.yaml"),
        ("examples/starlette-docs", "starlette-sealed-7.yaml"),
        ("examples/starlette-docs", "starlette-sealed-8.yaml"),
        ("examples/starlette-docs", "starlette-sealed-9.yaml"),
        ("examples/starlette-docs", "starlette-sealed-10.yaml"),
        ("examples/starlette-docs", "starlette-sealed-11.yaml"),
        ("examples/starlette-docs", "starlette-sealed-12.yaml"),
        ("examples/starlette-docs", "starlette-sealed-14.yaml"),
        ("examples/starlette-docs", "starlette-sealed-15.yaml"),
        ("examples/starlette-docs", "starlette-sealed-16.yaml"),
        ("examples/starlette-docs", "starlette-sealed-18.yaml"),
        ("examples/flask-docs", "flask-sealed-15.yaml"),
        ("examples/flask-docs", "flask-sealed-16.yaml"),
        ("examples/flask-docs", "flask-sealed-18.yaml"),
    ],
)
def test_each_committed_sealed_report_is_what_the_command_produces(root, tmp_path, project, name):
    """eval/results/<set>.json is `rag-contract [--root P] held-out eval/sealed/<set>.yaml --write`,
    run now on a copy of the project (the README's sealed rows are rendered from them), and the
    file measured is the one whose hash was committed before the rules it measures."""
    copy = copy_project(root / project, tmp_path / "p")
    assert main(["--root", str(copy), "held-out", str(copy / "eval" / "sealed" / name), "--write"]) == 0
    report = f"{Path(name).stem}.json"
    fresh = json.loads((copy / "eval" / "results" / report).read_text())
    committed = json.loads((root / project / "eval" / "results" / report).read_text())
    assert fresh == committed, f"run `rag-contract held-out eval/sealed/{name} --write` and commit the report"
    assert committed["sealed"] is True
