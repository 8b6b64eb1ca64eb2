"""Training and export with torch: run only where the train venv exists (``make adapt`` makes
it), in that venv, since the test venv holds no torch. Two runs on the same pairs give the same
weights, a run moves the weights, and the int8 export passes its check against torch."""

from __future__ import annotations

import json
import subprocess

import pytest

from tests.support import ROOT

TRAIN_PYTHON = ROOT / ".venv-train" / "bin" / "python"

SCRIPT = """
import json, sys, tempfile
from pathlib import Path
import torch
from rag_contract.adaptation.export import export
from rag_contract.adaptation.pairs import training_pairs
from rag_contract.adaptation.training import Settings, base_model, train
from rag_contract.project import load_project

project = load_project(Path(sys.argv[1]))
pairs = training_pairs(project.corpus.sections, project.chunk_params, project.questions.questions)[::300]
settings = Settings(batch=4, positive_tokens=64)
one, two = train(pairs, settings), train(pairs, settings)
base = base_model().state_dict()
a, b = one.model.state_dict(), two.model.state_dict()
with tempfile.TemporaryDirectory() as tmp:
    check = export(one.model, Path(tmp) / "m.onnx", [pairs[0].anchor, pairs[0].positive, "hello"])
print(json.dumps({
    "same": all(torch.equal(a[k], b[k]) for k in a),
    "moved": any(not torch.equal(a[k], base[k]) for k in a),
    "check": check.as_dict() | {"passed": check.passed},
}))
"""


@pytest.mark.slow
@pytest.mark.skipif(not TRAIN_PYTHON.is_file(), reason="no train venv (.venv-train: make adapt)")
def test_training_is_deterministic_and_the_export_passes_its_check():
    done = subprocess.run(
        [str(TRAIN_PYTHON), "-c", SCRIPT, str(ROOT)], capture_output=True, text=True, timeout=900, check=True
    )
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["same"] and result["moved"]
    assert result["check"]["passed"], result["check"]
