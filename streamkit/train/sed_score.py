"""Prediction and scoring of SED models: the trainer's model selection and model card, ``streamkit train sed-post``
and the SED benchmarks all score through these."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from streamkit.models.sed_crnn import SedConfig, SedModel
from streamkit.models.sed_post import DEFAULT_THRESHOLD, frame_times, frames_to_events, median_frames

__all__ = ["predict_frames", "predict_frames_and_clips", "score_probs"]


@torch.no_grad()
def predict_frames(model: SedModel, feats: np.ndarray, batch: int = 32, head: str = "ft") -> np.ndarray:
    """(N, T', K) frame probabilities of one head (eval mode) for (N, T, n_mels) features."""
    return predict_frames_and_clips(model, feats, batch, head)[0]


@torch.no_grad()
def predict_frames_and_clips(model: SedModel, feats: np.ndarray, batch: int = 32, head: str = "ft") -> tuple[np.ndarray, np.ndarray]:
    """(N, T', K) frame and (N, K) clip-level (attention-pooled) probabilities of one head (eval mode)."""
    was = model.training
    model.eval()
    frames, clips = [], []
    try:
        for i in range(0, feats.shape[0], batch):
            x = torch.from_numpy(np.asarray(feats[i : i + batch], dtype=np.float32))
            o = model(x, heads=(head,))[head]
            frames.append(o["frame"].numpy())
            clips.append(o["clip"].numpy())
    finally:
        model.train(was)
    if not frames:
        return np.zeros((0, 0, model.cfg.n_classes), np.float32), np.zeros((0, model.cfg.n_classes), np.float32)
    return np.concatenate(frames), np.concatenate(clips)


def score_probs(
    probs: np.ndarray,
    files: Sequence[str],
    reference: dict[str, list[Any]],
    cfg: SedConfig,
    *,
    median_s: float = 0.45,
    threshold: float = DEFAULT_THRESHOLD,
    clip_s: float = 10.0,
    psds: bool = False,
) -> dict[str, Any]:
    """Event-/segment-based macro F1 (%), error rates and optionally PSDS1 of frame probabilities."""
    from streamkit.eval.sed import Event, FrameScores, event_based, segment_based
    from streamkit.eval.sed import psds as psds_fn

    med = median_frames(median_s, cfg.frame_seconds)
    est: dict[str, list[Any]] = {}
    for f, p in zip(files, probs):
        est[f] = [Event(f, on, off, lab) for lab, on, off, _c in frames_to_events(p, cfg, median=med, threshold=threshold)]
    ref = {f: list(reference.get(f, [])) for f in files}
    ev = event_based(ref, est, classes=cfg.classes, files=files)
    seg = segment_based(ref, est, classes=cfg.classes, durations={f: clip_s for f in files}, files=files)
    out: dict[str, Any] = {
        "files": len(files),
        "event_f1": round(100 * ev.macro_f1, 2),
        "event_micro_f1": round(100 * ev.micro_f1, 2),
        "event_er": round(ev.error_rate, 4),
        "segment_f1": round(100 * seg.macro_f1, 2),
        "segment_micro_f1": round(100 * seg.micro_f1, 2),
        "segment_er": round(seg.error_rate, 4),
        "event_f1_per_class": {c: (round(100 * s.f1, 2) if s.f1 == s.f1 else None) for c, s in ev.per_class.items()},
        "post": {"median_frames": med, "median_s": round(med * cfg.frame_seconds, 3), "threshold": threshold},
    }
    if psds:
        start = float(frame_times(0, cfg)[0])
        scores = {f: FrameScores(p, hop=cfg.frame_seconds, classes=tuple(cfg.classes), start=start) for f, p in zip(files, probs)}
        try:
            r = psds_fn(ref, scores, classes=cfg.classes)
            out["psds1"] = round(r.psds, 4)
        except Exception as e:  # noqa: BLE001 - PSDS is an extra column; report why it is missing
            out["psds1"] = None
            out["psds1_error"] = f"{type(e).__name__}: {e}"
    return out
