"""Training and export with torch: run only where the train venv exists (``make adapt`` makes
it), in that venv, since the test venv holds no torch. Two runs on the same pairs give the same
weights, a run moves the weights, hard negatives change what it learns (deterministically too),
and the int8 export passes its check against torch."""

from __future__ import annotations

import json
import subprocess

import pytest

from tests.support import ROOT

TRAIN_PYTHON = ROOT / ".venv-train" / "bin" / "python"

SCRIPT = """
import json, sys, tempfile
from dataclasses import replace
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
every = training_pairs(project.corpus.sections, project.chunk_params, project.questions.questions, negatives="lexical")
hard = [p for p in every if p.kind == "question"][::40]
plain = [replace(p, negative=None, negative_group=None) for p in hard]
h1, h2, h0 = (train(x, settings).model.state_dict() for x in (hard, hard, plain))
with tempfile.TemporaryDirectory() as tmp:
    check = export(one.model, Path(tmp) / "m.onnx", [pairs[0].anchor, pairs[0].positive, "hello"])
print(json.dumps({
    "same": all(torch.equal(a[k], b[k]) for k in a),
    "moved": any(not torch.equal(a[k], base[k]) for k in a),
    "hard": [len(hard), all(p.negative for p in hard)],
    "hard_same": all(torch.equal(h1[k], h2[k]) for k in h1),
    "hard_differs": any(not torch.equal(h1[k], h0[k]) for k in h1),
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
    assert result["hard"][0] >= 8 and result["hard"][1], result["hard"]
    assert result["hard_same"] and result["hard_differs"]
    assert result["check"]["passed"], result["check"]
