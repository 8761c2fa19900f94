"""The ``contrastive`` embedder pair of the archive index: the audio-text model of ``streamkit train retrieval``.

* :class:`ContrastiveEmbedder`: a clip -> the frozen SED CRNN trunk's frames -> the trained
  projection (:class:`~streamkit.models.retrieval.AudioProjection`) -> a 384-d unit vector.
* :class:`ContrastiveQueryEncoder`: a text -> all-MiniLM-L6-v2 (the ``streamkit[retrieval]``
  extra) -> the weight file's text adapter, if it has one -> a unit vector in the same space.

The index records the weight file's SHA-256 (and its trunk's) in its embedder description, so an
index built with other weights is refused like one built by another embedder; search loads the
weights it names (the shipped file, or the path recorded at build time).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from streamkit.core.errors import ConfigError

__all__ = ["CONTRASTIVE", "RETRIEVAL_WEIGHTS", "ContrastiveEmbedder", "ContrastiveQueryEncoder"]

CONTRASTIVE = "contrastive"
RETRIEVAL_WEIGHTS = Path(__file__).resolve().parents[1] / "models" / "weights" / "retrieval.pt"


def _sha(path: Path) -> str:
    from streamkit.train.retrieval_data import file_sha

    return file_sha(path)


def _weights(path: str | Path | None) -> Path:
    p = Path(path) if path is not None else RETRIEVAL_WEIGHTS
    if not p.is_file():
        raise ConfigError(f"no retrieval weights at {p}: train them with `streamkit train retrieval`")
    return p


class ContrastiveEmbedder:
    """Audio side; ``weights``: a ``streamkit train retrieval`` file (default the shipped one), ``sed_weights``: its trunk (default the shipped SED file).

    The MiniLM extra is checked here too: an index that no query could search is not built."""

    name = CONTRASTIVE

    def __init__(self, weights: str | Path | None = None, *, sed_weights: str | Path | None = None, threads: int = 1) -> None:
        from streamkit.models.retrieval_text import minilm_dir

        minilm_dir()
        import torch

        from streamkit.models.retrieval import load_retrieval
        from streamkit.models.sed_crnn import load_model

        self.weights = _weights(weights)
        if sed_weights is None:
            from streamkit.monitor import sed_weights as shipped

            sed_weights = shipped()
        torch.set_num_threads(max(1, int(threads)))
        self.model, self.meta = load_retrieval(self.weights)
        self.sed, _ = load_model(sed_weights)
        trunk = ((self.meta.get("card") or {}).get("trunk") or {}).get("sha256")
        self.sed_sha = _sha(Path(sed_weights))
        if trunk is not None and trunk != self.sed_sha:
            raise ConfigError(f"{self.weights} was trained on another SED trunk (sha256 {trunk[:12]}), not {sed_weights}")
        self.dim = int(self.model.cfg.dim)
        self.rate = int(self.sed.cfg.rate)
        self._torch = torch

    def embed(self, clips: Sequence[np.ndarray]) -> np.ndarray:
        from streamkit.models.retrieval import trunk_batch

        torch = self._torch
        if not clips:
            return np.zeros((0, self.dim), np.float32)
        feats = trunk_batch(self.sed, clips)
        lengths = torch.tensor([f.shape[0] for f in feats])
        x = torch.zeros(len(feats), int(lengths.max()), feats[0].shape[1])
        for i, f in enumerate(feats):
            x[i, : f.shape[0]] = f
        with torch.no_grad():
            return self.model.audio(x, lengths).numpy().astype(np.float32)

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "dim": self.dim, "rate": self.rate, "weights": str(self.weights), "sha256": _sha(self.weights),
                "trunk_sha256": self.sed_sha}  # fmt: skip


class ContrastiveQueryEncoder:
    """Text side of the index's weights (its ``meta["embedder"]``): MiniLM, then the file's text adapter if any."""

    name = CONTRASTIVE

    def __init__(self, desc: dict[str, Any]) -> None:
        import torch

        from streamkit.models.retrieval import load_retrieval
        from streamkit.models.retrieval_text import MiniLM

        want = desc.get("sha256")
        path = next((p for p in (RETRIEVAL_WEIGHTS, Path(str(desc.get("weights") or ""))) if p.is_file() and _sha(p) == want), None)
        if path is None:
            raise ConfigError(f"the index was built with retrieval weights {desc.get('weights')} (sha256 {str(want)[:12]}), which are not here")
        self.minilm = MiniLM.shared()
        self.model, _ = load_retrieval(path)
        self.dim = int(desc.get("dim") or self.model.cfg.dim)
        self._torch = torch

    def encode(self, text: str) -> tuple[np.ndarray | None, list[str]]:
        if not text.strip():
            return None, []
        v = self._torch.as_tensor(self.minilm.encode([text]))
        with self._torch.no_grad():
            return self.model.encode_text(v)[0].numpy().astype(np.float32), []
