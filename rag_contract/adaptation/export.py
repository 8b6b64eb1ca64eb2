"""A tuned encoder to the serving runtime: ONNX, then int8, checked against torch (needs the
``train`` extra: torch and onnx).

Contract: ``export(model, path, sample)`` (a tuned MiniLM; ``export_to`` for another encoder,
such as all-mpnet-base-v2, with its embedder and inputs) writes the int8 ONNX file (weight-only int8,
``quantize_weights``) the serving embedder runs
(inputs ``input_ids``, ``attention_mask``, ``token_type_ids``, output ``last_hidden_state``,
batch and sequence dimensions dynamic) and returns the check: every text of ``sample`` embedded
by the file through the serving embedder (windows, pooling, norm) and by the torch model the
same way; the lowest cosine must reach ``MIN_COSINE`` (``ExportCheck.passed``), as the shipped
int8 model does against its fp32 weights (docs/adr/0001-local-embedder.md).
"""

from __future__ import annotations

import hashlib
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx
import torch
from onnx import helper, numpy_helper
from torch import nn

from rag_contract.adaptation.training import MiniLM
from rag_contract.embedders.local import AdaptedEmbedder, LocalEmbedder

MIN_COSINE = 0.998
GROUP = 32  # inputs per scale of a MatMul weight's column
OPSET = 17


@dataclass(frozen=True)
class ExportCheck:
    texts: int
    min_cosine: float
    mean_cosine: float

    @property
    def passed(self) -> bool:
        return self.min_cosine >= MIN_COSINE

    def as_dict(self) -> dict:
        return {
            "texts": self.texts,
            "min_cosine": round(self.min_cosine, 6),
            "mean_cosine": round(self.mean_cosine, 6),
            "floor": MIN_COSINE,
        }


def torch_vectors(model: nn.Module, texts: Sequence[str], embedder: LocalEmbedder) -> np.ndarray:
    """``texts`` embedded by ``model`` exactly as ``embedder`` windows and pools them (``embedder.pooled``:
    the same word-pieces and arithmetic), so the check compares the file with torch and nothing else."""

    def embed_ids(ids: list[int]) -> np.ndarray:
        piece = torch.tensor([ids])
        inputs: tuple[torch.Tensor, ...] = (piece, torch.ones_like(piece))
        if isinstance(model, MiniLM):
            inputs = (*inputs, torch.zeros_like(piece))
        return model(*inputs)[0].mean(0).numpy()

    out = np.zeros((len(texts), embedder.dimensions), dtype=np.float32)
    with torch.no_grad():
        for i, text in enumerate(texts):
            out[i] = embedder.pooled(text, embed_ids)
    return out


def export(model: MiniLM, path: Path, sample: Sequence[str]) -> ExportCheck:
    """A tuned MiniLM to ``path``, checked through ``AdaptedEmbedder``."""
    ids = torch.tensor([[101, 7592, 2088, 102]])
    return export_to(
        model,
        path,
        sample,
        AdaptedEmbedder(model_file=path),
        (ids, torch.ones_like(ids), torch.zeros_like(ids)),
        ("input_ids", "attention_mask", "token_type_ids"),
    )


def export_to(
    model: nn.Module,
    path: Path,
    sample: Sequence[str],
    embedder: LocalEmbedder,
    example: tuple[torch.Tensor, ...],
    input_names: Sequence[str],
) -> ExportCheck:
    """``model`` (called with ``example``, one tensor per input name) to the int8 file at ``path``
    that ``embedder`` runs, and the check of ``sample`` through both."""
    model.eval()
    with tempfile.TemporaryDirectory() as tmp:
        fp32 = Path(tmp) / "fp32.onnx"
        torch.onnx.export(
            model,
            example,
            str(fp32),
            input_names=list(input_names),
            output_names=["last_hidden_state"],
            dynamic_axes={n: {0: "batch", 1: "sequence"} for n in (*input_names, "last_hidden_state")},
            opset_version=OPSET,
            dynamo=False,
        )
        path.parent.mkdir(parents=True, exist_ok=True)
        quantize_weights(fp32, path)
    served = embedder.embed(list(sample))
    cos = np.einsum("ij,ij->i", served.astype(np.float64), torch_vectors(model, sample, embedder).astype(np.float64))
    return ExportCheck(len(sample), float(cos.min()), float(cos.mean()))


def quantize_weights(fp32: Path, out: Path) -> None:
    """Weight-only int8, stored as the shipped model is: every matrix a ``MatMul`` or ``Gather``
    reads becomes int8 with symmetric scales, dequantized in the graph; activations stay float.
    An embedding table has one scale per row and is dequantized after the lookup, row by row, not
    whole on every call. A ``MatMul`` weight (in, out) has one scale per ``GROUP`` inputs of each
    output column. Measured on all-MiniLM-L6-v2 (lowest cosine to torch over the export sample):
    ``onnxruntime.quantization.quantize_dynamic``, which quantizes activations too, 0.914 (per
    channel 0.987); one scale per whole column, as the shipped file, 0.9980; per group, above 0.999."""
    model = onnx.load(str(fp32))
    graph = model.graph
    matmul = {n.input[1] for n in graph.node if n.op_type == "MatMul"}
    tables = {n.input[0] for n in graph.node if n.op_type == "Gather"}
    kept, dequantize = [], []
    for init in graph.initializer:
        w = numpy_helper.to_array(init)
        row = init.name in tables
        if w.ndim != 2 or w.dtype != np.float32 or not (row or (init.name in matmul and w.shape[0] % GROUP == 0)):
            kept.append(init)
            continue
        blocks = w if row else w.reshape(w.shape[0] // GROUP, GROUP, w.shape[1])
        scale = np.abs(blocks).max(axis=1, keepdims=True)  # (rows, 1) for a table, (groups, 1, out) else
        scale = np.where(scale == 0, 1.0, scale / 127.0).astype(np.float32)
        q = np.clip(np.rint(blocks / scale), -127, 127).astype(np.int8)
        kept.append(numpy_helper.from_array(q, f"{init.name}_q"))
        kept.append(numpy_helper.from_array(scale, f"{init.name}_scale"))
        if not row:
            kept.append(numpy_helper.from_array(np.array(w.shape, dtype=np.int64), f"{init.name}_shape"))
            dequantize += [
                helper.make_node("Cast", [f"{init.name}_q"], [f"{init.name}_f"], to=onnx.TensorProto.FLOAT),
                helper.make_node("Mul", [f"{init.name}_f", f"{init.name}_scale"], [f"{init.name}_blocks"]),
                helper.make_node("Reshape", [f"{init.name}_blocks", f"{init.name}_shape"], [init.name]),
            ]
    quantized = {i.name[: -len("_q")] for i in kept if i.name.endswith("_q")}
    nodes = []
    for node in graph.node:
        if node.op_type == "Gather" and node.input[0] in quantized:
            name, looked, ids = node.input[0], node.output[0], node.input[1]
            nodes += [
                helper.make_node("Gather", [f"{name}_q", ids], [f"{looked}_q"], axis=0),
                helper.make_node("Cast", [f"{looked}_q"], [f"{looked}_f"], to=onnx.TensorProto.FLOAT),
                helper.make_node("Gather", [f"{name}_scale", ids], [f"{looked}_scale"], axis=0),
                helper.make_node("Mul", [f"{looked}_f", f"{looked}_scale"], [looked]),
            ]
        else:
            nodes.append(node)
    del graph.initializer[:]
    graph.initializer.extend(kept)
    del graph.node[:]
    graph.node.extend(dequantize + nodes)  # weights first: the graph stays topologically sorted
    onnx.checker.check_model(model)
    onnx.save(model, str(out))


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()
