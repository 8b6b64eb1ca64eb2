"""eval/calibration.yaml: what the relevance fit learns from is refused at load when malformed,
naming the file, the key and the rule."""

from __future__ import annotations

from pathlib import Path

import pytest

from rag_contract.config.calibration import MAX_FALSE_ANSWER_RATE, CalibrationConfig, CalibrationError, load_calibration
from rag_contract.project import load_project, read_development
from rag_contract.quality.held_out import committed_hashes
from tests.support import ROOT


def write(root: Path, text: str) -> Path:
    (root / "eval").mkdir(exist_ok=True)
    path = root / "eval" / "calibration.yaml"
    path.write_text(text)
    return path


def test_a_project_without_the_file_fits_on_its_questions_alone_with_no_floor(tmp_path):
    assert load_calibration(tmp_path / "eval" / "calibration.yaml", tmp_path) == CalibrationConfig((), None)


def test_the_files_and_the_floor_are_read(tmp_path):
    (tmp_path / "eval" / "sealed").mkdir(parents=True)
    (tmp_path / "eval" / "sealed" / "a.yaml").write_text("questions: []\n")
    path = write(tmp_path, "development:\n  - eval/sealed/a.yaml\nmin_grounded_citing: 0.62\n")
    assert load_calibration(path, tmp_path) == CalibrationConfig((Path("eval/sealed/a.yaml"),), 0.62)
    assert load_calibration(write(tmp_path, "min_grounded_citing: null\n"), tmp_path) == CalibrationConfig()


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("- a\n", "calibration.yaml: must be a mapping"),
        ("developement: []\n", "calibration.yaml: developement: unknown key"),
        ("development: eval/a.yaml\n", "calibration.yaml: development: must be a list of question files"),
        ("development:\n  - 3\n", "calibration.yaml: development: must be a list of question files"),
        ("development:\n  - eval/absent.yaml\n", "calibration.yaml: development: eval/absent.yaml: no such file"),
        ("development:\n  - ../other/a.yaml\n", "must be a path inside the project"),
        ("development:\n  - /etc/passwd\n", "must be a path inside the project"),
        ("development:\n  - eval/a.yaml\n  - eval/a.yaml\n", "development: each file may be listed once"),
        ("min_grounded_citing: 1.5\n", "min_grounded_citing: must be a share between 0 and 1"),
        ("min_grounded_citing: -0.1\n", "min_grounded_citing: must be a share between 0 and 1"),
        ("min_grounded_citing: true\n", "min_grounded_citing: must be a share between 0 and 1"),
        ("min_grounded_citing: high\n", "min_grounded_citing: must be a share between 0 and 1"),
    ],
)
def test_a_malformed_file_is_refused_naming_the_key_and_the_rule(tmp_path, text, message):
    (tmp_path / "eval").mkdir()
    (tmp_path / "eval" / "a.yaml").write_text("questions: []\n")
    with pytest.raises(CalibrationError, match=message.replace("(", r"\(")):
        load_calibration(write(tmp_path, text), tmp_path)


def test_the_floor_bounds_are_shares_included(tmp_path):
    for value in ("0", "1", "0.0", "1.0"):
        assert load_calibration(
            write(tmp_path, f"min_grounded_citing: {value}\n"), tmp_path
        ).min_grounded_citing == float(value)


def test_development_questions_are_read_with_the_loaders_rules_and_their_ids_prefixed():
    project = load_project(ROOT)
    config = load_calibration(project.paths.calibration, project.paths.root)
    sets = read_development(project, config.development)
    assert [p for p, _ in sets] == list(config.development)
    ids = [q.id for _, qs in sets for q in qs]
    assert len(ids) == len(set(ids))  # sets reuse ids (k01 ...): the prefix keeps them apart
    assert all(i.startswith(f"{p.stem}/") for p, qs in sets for i in (q.id for q in qs))
    assert not set(ids) & {q.id for q in project.questions.questions}


@pytest.mark.parametrize("project", [".", "examples/starlette-docs", "examples/flask-docs"])
def test_the_newest_sealed_set_is_never_fitted_on(project):
    """Its report is the sealed figure: fitting on it would make that figure in sample."""
    root = ROOT / project
    newest = list(committed_hashes(root / "eval" / "sealed" / "SHA256SUMS"))[-1]
    config = load_calibration(root / "eval" / "calibration.yaml", root)
    assert config.development, "the opened sealed sets are development sets"
    assert newest not in {p.name for p in config.development}


def test_the_operating_point_defaults_to_a_tenth_and_null_chooses_by_cost(tmp_path):
    assert load_calibration(tmp_path / "absent.yaml", tmp_path).max_false_answer_rate == MAX_FALSE_ANSWER_RATE == 0.1
    path = tmp_path / "calibration.yaml"
    path.write_text("development: []\n")
    assert load_calibration(path, tmp_path).max_false_answer_rate == 0.1
    path.write_text("max_false_answer_rate: null\n")
    assert load_calibration(path, tmp_path).max_false_answer_rate is None
    path.write_text("max_false_answer_rate: 1.5\n")
    with pytest.raises(CalibrationError, match="max_false_answer_rate: must be a share between 0 and 1, or null"):
        load_calibration(path, tmp_path)
