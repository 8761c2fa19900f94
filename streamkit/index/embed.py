"""The models behind the archive index: an audio embedder (a clip of audio -> one vector) and a query
encoder (a text -> one vector in the same space, or ``None`` when the text names nothing it knows).

Search ranks entries by the dot product of the two vectors (negative products count as 0), so any
pair that shares a space can replace the first one. An index records the name and dimension of the embedder that built it and refuses a
different one (:class:`~streamkit.index.store.IndexStore`).

The first pair, ``sed-posteriors``: the shipped SED CRNN's clip-level class probabilities
(``models.sed``'s Ft head, 10 DCASE classes) as the audio vector, and the query parsed to those
classes (:mod:`streamkit.index.query`) as a weight vector that sums to 1: a window's score is the
mean posterior of the classes the query names.

The second pair, ``contrastive`` (:mod:`streamkit.index.contrastive`): the audio-text model of
``streamkit train retrieval`` (SED CRNN trunk + projection; all-MiniLM-L6-v2 for the text).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

import numpy as np

__all__ = ["EMBEDDERS", "AudioEmbedder", "QueryEncoder", "SedPosteriorEmbedder", "SedQueryEncoder", "default_embedder", "make_embedder",
           "query_encoder"]

SED_EMBEDDER = "sed-posteriors"


class AudioEmbedder(Protocol):
    """``embed(clips)``: ``(len(clips), dim)`` float32 vectors of mono clips at ``rate`` Hz."""

    name: str
    dim: int
    rate: int

    def embed(self, clips: Sequence[np.ndarray]) -> np.ndarray: ...


class QueryEncoder(Protocol):
    """``encode(text)``: ``(vector (dim,), the words it understood)``, or ``(None, [])`` for a text it cannot place."""

    name: str
    dim: int

    def encode(self, text: str) -> tuple[np.ndarray | None, list[str]]: ...


class SedPosteriorEmbedder:
    """Clip-level probabilities of the SED CRNN (``weights``: a weight file, default the shipped one).

    Each clip runs through the model on its own (log-mel of the clip, no context from outside it);
    clips shorter than the model's smallest input (one FFT window and the CNN's time pooling) are zero-padded to it. Torch is imported here, not by search.
    """

    name = SED_EMBEDDER

    def __init__(self, weights: str | Path | None = None, *, threads: int = 1) -> None:
        import torch

        from streamkit.models.sed_crnn import load_model

        if weights is None:
            from streamkit.monitor import sed_weights

            weights = sed_weights()
        torch.set_num_threads(max(1, int(threads)))
        self.model, _meta = load_model(weights)
        self.classes: tuple[str, ...] = tuple(self.model.cfg.classes)
        self.dim = len(self.classes)
        self.rate = int(self.model.cfg.rate)
        self._torch = torch

    def embed(self, clips: Sequence[np.ndarray]) -> np.ndarray:
        from streamkit.models.sed_crnn import log_mel

        out = np.zeros((len(clips), self.dim), np.float32)
        cfg = self.model.cfg
        need = cfg.n_fft + cfg.hop * (cfg.time_pool - 1)  # the CNN pools time_pool frames: fewer would not run
        with self._torch.inference_mode():
            for i, x in enumerate(clips):
                x = np.asarray(x, np.float32)
                if x.shape[0] < need:
                    x = np.pad(x, (0, need - x.shape[0]))
                _frames, clip = self.model.detect(log_mel(x, self.model.cfg)[None])
                out[i] = clip[0].numpy()
        return out

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "dim": self.dim, "rate": self.rate, "classes": list(self.classes)}


class SedQueryEncoder:
    """A query parsed to the SED classes (:func:`streamkit.index.query.parse_classes`): weight ``1/n`` on each of the ``n`` named."""

    name = SED_EMBEDDER

    def __init__(self, classes: Sequence[str]) -> None:
        self.classes = tuple(classes)
        self.dim = len(self.classes)

    def encode(self, text: str) -> tuple[np.ndarray | None, list[str]]:
        from streamkit.index.query import parse_classes

        named = parse_classes(text, self.classes)
        if not named:
            return None, []
        v = np.zeros(self.dim, np.float32)
        for cls in named:
            v[self.classes.index(cls)] = 1.0 / len(named)
        return v, list(named)


EMBEDDERS = (SED_EMBEDDER, "contrastive")


def default_embedder(weights: str | Path | None = None) -> SedPosteriorEmbedder:
    """The embedder ``streamkit index build`` uses by default (``sed-posteriors``: it needs no optional extra)."""
    return SedPosteriorEmbedder(weights)


def make_embedder(name: str, weights: str | Path | None = None) -> AudioEmbedder:
    """The audio embedder called ``name`` (:data:`EMBEDDERS`; ``sed`` is short for ``sed-posteriors``)."""
    from streamkit.core.errors import ConfigError

    if name in ("sed", SED_EMBEDDER):
        return SedPosteriorEmbedder(weights)
    if name == "contrastive":
        from streamkit.index.contrastive import ContrastiveEmbedder

        return ContrastiveEmbedder(weights)
    raise ConfigError(f"unknown embedder {name!r}: choose sed or contrastive")


def query_encoder(meta: dict[str, Any]) -> QueryEncoder:
    """The query encoder that matches the embedder an index was built with (its ``meta["embedder"]``)."""
    from streamkit.core.errors import ConfigError

    emb = meta.get("embedder") or {}
    if emb.get("name") == SED_EMBEDDER:
        return SedQueryEncoder(emb["classes"])
    if emb.get("name") == "contrastive":
        from streamkit.index.contrastive import ContrastiveQueryEncoder

        return ContrastiveQueryEncoder(emb)
    raise ConfigError(f"the index was built with embedder {emb.get('name')!r}, which this streamkit cannot search")
