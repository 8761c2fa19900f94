"""Pseudo-labels of the real clips for ``streamkit train sed``: tri-training's labelers F1/F2, a finished
``--teacher`` model's Ft, and the ``--pseudo-level`` rules applied to them."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from streamkit.core.errors import ModelError
from streamkit.models.sed_crnn import SedConfig, SedModel, load_model
from streamkit.models.sed_losses import pseudo_label_batch

if TYPE_CHECKING:
    from streamkit.train.sed_options import TrainOptions
    from streamkit.train.sed_steps import TrainData

__all__ = ["load_init", "load_teacher", "make_labels", "positive_frames", "pseudo_label_all", "teacher_card", "teacher_label_all"]


def pseudo_label_all(
    model: SedModel,
    feats: np.ndarray,
    tags: np.ndarray | None,
    batch: int = 32,
    rule: dict[str, float] | None = None,
    heads: tuple[str, str] = ("f1", "f2"),
) -> tuple[np.ndarray, np.ndarray]:
    """int8 frame (N, T', K) and clip (N, K) pseudo-labels of the labelers ``heads``: 1, 0 or -1 (no label)."""
    rule = rule or {"positive": 0.5, "negative": 0.5}
    frames, clips = [], []
    for i in range(0, feats.shape[0], batch):
        x = torch.from_numpy(np.asarray(feats[i : i + batch], dtype=np.float32))
        ct = None if tags is None else torch.from_numpy(tags[i : i + batch])
        pl = pseudo_label_batch(model, x, clip_tags=ct, threshold=rule["positive"], negative=rule["negative"], heads=heads)
        frames.append(torch.where(pl["frame_mask"] > 0, pl["frame"], torch.full_like(pl["frame"], -1)).to(torch.int8).numpy())
        clips.append(torch.where(pl["clip_mask"] > 0, pl["clip"], torch.full_like(pl["clip"], -1)).to(torch.int8).numpy())
    return np.concatenate(frames), np.concatenate(clips)


def load_teacher(path: str | Path, cfg: SedConfig) -> tuple[SedModel, dict[str, Any]]:
    """``--teacher``: a model file of ``streamkit train sed`` whose features and frame rate are this run's.

    Raises ``ValueError`` (missing or corrupt file, another feature front end or time pooling)."""
    try:
        model, meta = load_model(path)
    except (ModelError, OSError) as e:
        raise ValueError(f"--teacher {path}: {e}") from None
    mine, theirs = cfg.to_dict(), model.cfg.to_dict()
    keys = ("rate", "n_fft", "hop", "n_mels", "f_min", "f_max", "classes")
    diff = {k: (mine.get(k), theirs.get(k)) for k in keys if mine.get(k) != theirs.get(k)}
    if diff or model.cfg.time_pool != cfg.time_pool:
        diff["time_pool"] = (cfg.time_pool, model.cfg.time_pool)
        raise ValueError(f"--teacher {path}: another front end or frame rate (this run, teacher): {diff}")
    model.eval()
    return model, meta


def load_init(path: str | Path, cfg: SedConfig) -> dict[str, torch.Tensor]:
    """``--init``: the state dict of a model file whose config is this run's (fine-tuning starts from it).

    Raises ``ValueError`` (missing or corrupt file, another config)."""
    try:
        model, _meta = load_model(path)
    except (ModelError, OSError) as e:
        raise ValueError(f"--init {path}: {e}") from None
    mine, theirs = cfg.to_dict(), model.cfg.to_dict()
    keys = sorted((set(mine) | set(theirs)) - {"dropout", "grl_scale"})  # (not part of the weights)
    diff = {k: (mine.get(k), theirs.get(k)) for k in keys if mine.get(k) != theirs.get(k)}
    if diff:
        raise ValueError(f"--init {path}: another model config (this run, the file): {diff}")
    return model.state_dict()


def teacher_label_all(
    model: SedModel, feats: np.ndarray, tags: np.ndarray | None, rule: dict[str, float], batch: int = 32
) -> tuple[np.ndarray, np.ndarray]:
    """``--teacher``: the labels of :func:`pseudo_label_all` with a finished model's final classifier Ft in both
    labeler roles (1 above ``positive``, 0 below ``negative``, -1 between; weak clips gated by their ``tags``)."""
    return pseudo_label_all(model, feats, tags, batch, rule, heads=("ft", "ft"))


def positive_frames(frame: np.ndarray, clip: np.ndarray) -> np.ndarray:
    """``--pseudo-level positive``: int8 frame labels (N, T', K) from frame and clip labels (1, 0 or -1 for none).

    1 where the frame is positive and its clip holds the class, 0 on every frame of a class the clip lacks, -1
    elsewhere: a frame where the labelers doubt an event of a class the clip holds is left out, not taught "off"
    (the 0.05 rule labels about a tenth of the true event frames of the real clips negative)."""
    if frame.ndim != 3 or clip.shape != (frame.shape[0], frame.shape[2]):
        raise ValueError(f"frame labels {frame.shape} and clip labels {clip.shape} do not match")
    held, lacks = (clip == 1)[:, None, :], (clip == 0)[:, None, :]
    out = np.where(held & (frame == 1), 1, np.where(lacks, 0, -1))
    return np.broadcast_to(out, frame.shape).astype(np.int8)


def make_labels(
    data: TrainData, opts: TrainOptions, rule: dict[str, float], labelers: SedModel | None, teacher: SedModel | None
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The labels the real clips W and U are trained on: ``({"w_frame", "u_frame", "u_clip"}, statistics)``.

    Made by the ``teacher``'s Ft when given (``--teacher``), else by F1 and F2 of ``labelers`` (the weights, or
    their moving average with ``--pseudo-from ema``), always from the clean features, then cut to ``--pseudo-level``:
    ``clip`` keeps no frame labels (W its tags, U its clip labels), ``positive`` keeps frame positives only inside
    the classes a clip holds (:func:`positive_frames`)."""
    t0 = time.monotonic()
    if teacher is not None:
        wf, _wc = teacher_label_all(teacher, data.W, data.w_clip, rule)
        uf, uc = teacher_label_all(teacher, data.U, None, rule) if data.U is not None else (None, None)
    else:
        assert labelers is not None
        wf, _wc = pseudo_label_all(labelers, data.W, data.w_clip, rule=rule)
        uf, uc = pseudo_label_all(labelers, data.U, None, rule=rule) if data.U is not None else (None, None)
    if opts.pseudo_level == "clip":
        wf = np.full_like(wf, -1)
        uf = None if uf is None else np.full_like(uf, -1)
    elif opts.pseudo_level == "positive":
        wf = positive_frames(wf, data.w_clip.astype(np.int8))
        uf = None if uf is None else positive_frames(uf, uc)  # type: ignore[arg-type]

    def cov(a: np.ndarray | None) -> float | None:
        return float((a >= 0).mean()) if a is not None else None

    def pos(a: np.ndarray | None) -> float | None:
        return float((a == 1).mean()) if a is not None else None

    stats = {"w_frame_labelled": cov(wf), "w_frame_positive": pos(wf), "u_frame_labelled": cov(uf), "u_frame_positive": pos(uf),
             "u_clip_labelled": cov(uc), "u_clip_positive": pos(uc), "seconds": round(time.monotonic() - t0, 1)}  # fmt: skip
    return {"w_frame": wf, "u_frame": uf, "u_clip": uc}, stats


def teacher_card(path: str | Path, sha256: str) -> dict[str, Any]:
    """The model card's record of a ``--teacher``: its name and digest, and its own card's method, seed and scores when beside it."""
    tp = Path(path)
    teacher: dict[str, Any] = {"file": tp.name, "sha256": sha256, "labels": "Ft frame and clip probabilities of the clean clips, once "
                               "before step 0: positive above pseudo_threshold, negative below pseudo_negative; weak clips: clip labels "
                               "are the tags, frames of absent classes negative"}  # fmt: skip
    try:
        tc = json.loads(tp.with_suffix(".json").read_text(encoding="utf-8"))
        teacher["card"] = {"file": tp.with_suffix(".json").name, "method": tc.get("method"), "seed": (tc.get("training") or {}).get("seed"),
                           "eval_event_f1": ((tc.get("metrics") or {}).get("eval") or {}).get("event_f1"),
                           "augment": (tc.get("training") or {}).get("augment") is not None}  # fmt: skip
    except (OSError, ValueError, AttributeError):
        teacher["card"] = None
    return teacher
