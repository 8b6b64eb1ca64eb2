"""eval/calibration.yaml: what the relevance fit learns from besides the committed question set.

Contract: ``load_calibration(path, root)`` returns ``CalibrationConfig(development,
min_grounded_citing, max_false_answer_rate)`` or raises ``CalibrationError`` naming the file, the
key and the rule.

- ``development``: question files (paths relative to the project root, each read with the
  question loader's rules) that were sealed, opened and measured once. From then on they are
  development sets: the relevance fit learns from them (cross-validated like the committed
  set), and their held-out reports are in sample for it. A sealed set joins only after its
  report was committed: listing the newest sealed set would make its figure a fitted one.
- ``min_grounded_citing``: the share of the training questions' answerable ones that must stay
  answered grounded and citing an expected section. The fit's ``answer_at`` is the cut that nets
  the most answers under the false-answer cost among the cuts that keep at least this share; a
  cut that refuses more would turn the service's answers partial wholesale. ``null``: no floor.

- ``max_false_answer_rate``: the operating point. The fit's ``answer_at`` is then the cut that
  answers the most training questions accurately among those that answer at most this share of
  the training questions the corpus cannot answer (shown with claims at all, partial included),
  in each source of them: the committed questions and the development sets, each held to the
  share on its own; absent: ``MAX_FALSE_ANSWER_RATE``; ``null``: the cut is chosen by cost alone.

A project without the file fits on its committed questions alone, with no floor, at
``MAX_FALSE_ANSWER_RATE``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from rag_contract.config.yamlfile import read_mapping

_KEYS = ("development", "min_grounded_citing", "max_false_answer_rate")
# The contract's operating point when a project names none: at most a tenth of the questions the
# corpus cannot answer shown with claims (docs/adr/0011).
MAX_FALSE_ANSWER_RATE = 0.1


class CalibrationError(ValueError):
    pass


@dataclass(frozen=True)
class CalibrationConfig:
    development: tuple[Path, ...] = ()  # relative to the project root
    min_grounded_citing: float | None = None
    max_false_answer_rate: float | None = MAX_FALSE_ANSWER_RATE


def load_calibration(path: Path, root: Path) -> CalibrationConfig:
    """``root``: the project's root, which the ``development`` paths are relative to."""
    path = Path(path)
    if not path.exists():
        return CalibrationConfig()
    raw = read_mapping(path, CalibrationError, _KEYS)
    sets = raw.get("development") or []
    if not isinstance(sets, list) or not all(isinstance(s, str) and s.strip() for s in sets):
        raise CalibrationError(f"{path.name}: development: must be a list of question files")
    development = tuple(Path(s.strip()) for s in sets)
    for p in development:
        if p.is_absolute() or ".." in p.parts:
            raise CalibrationError(f"{path.name}: development: {p}: must be a path inside the project")
        if not (Path(root) / p).is_file():
            raise CalibrationError(f"{path.name}: development: {p}: no such file")
    if len(set(development)) != len(development):
        raise CalibrationError(f"{path.name}: development: each file may be listed once")
    floor = raw.get("min_grounded_citing")
    if floor is not None and (isinstance(floor, bool) or not isinstance(floor, int | float) or not 0 <= floor <= 1):
        raise CalibrationError(f"{path.name}: min_grounded_citing: must be a share between 0 and 1, or null")
    ceiling = raw.get("max_false_answer_rate", MAX_FALSE_ANSWER_RATE)
    if ceiling is not None and (
        isinstance(ceiling, bool) or not isinstance(ceiling, int | float) or not 0 <= ceiling <= 1
    ):
        raise CalibrationError(f"{path.name}: max_false_answer_rate: must be a share between 0 and 1, or null")
    return CalibrationConfig(
        development, None if floor is None else float(floor), None if ceiling is None else float(ceiling)
    )
