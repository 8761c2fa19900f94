"""The data of ``streamkit train retrieval``: a corpus's clips as cached trunk frames, and captions as cached MiniLM vectors.

* :func:`read_subset`: a ``streamkit corpus sed`` subset's ``meta.json`` (every subset's clips carry
  their events, SNRs and background there, the weak and unlabelled ones too) and audio paths.
* :func:`trunk_cache`: the frozen SED trunk's frames of every clip of a subset
  (:func:`~streamkit.models.retrieval.trunk_frames`), computed once and stored as float16
  ``<corpus>/features/retrieval.<subset>.<sed sha>.npy`` (with the lengths beside it).
* :func:`text_vectors`: MiniLM vectors of captions, cached in a ``.npz`` keyed by the caption text.
"""

from __future__ import annotations

import hashlib
import json
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["clip_frames", "file_sha", "read_subset", "text_vectors", "trunk_cache"]


def file_sha(path: str | Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def read_subset(corpus: str | Path, subset: str) -> tuple[list[dict[str, Any]], list[Path]]:
    """``(meta entries, audio paths)`` of a subset; ValueError naming the command that makes one when it is missing."""
    d = Path(corpus) / subset
    meta_path = d / "meta.json"
    if not meta_path.is_file():
        raise ValueError(f"{d}: no meta.json: not a `streamkit corpus sed` subset (make one with `streamkit corpus sed --out {corpus}`)")
    meta = json.loads(meta_path.read_text(encoding="utf-8"))
    paths = [d / "audio" / f"{m['id']}.wav" for m in meta]
    missing = [p for p in paths if not p.is_file()]
    if missing:
        raise ValueError(f"{d}: {len(missing)} clip(s) listed in meta.json are missing, e.g. {missing[0].name}")
    return meta, paths


def trunk_cache(corpus: str | Path, subset: str, sed_weights: str | Path, *, log: Callable[[str], None] | None = None,
                cache_dir: str | Path | None = None) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """``(frames (N, T, D) float16, lengths (N,))`` of every clip of ``subset``, from the cache when it is there."""
    sha = file_sha(sed_weights)[:12]
    cache = Path(cache_dir) if cache_dir is not None else Path(corpus) / "features"
    f_path = cache / f"retrieval.{subset}.{sha}.npy"
    l_path = cache / f"retrieval.{subset}.{sha}.lengths.npy"
    _meta, paths = read_subset(corpus, subset)
    if f_path.is_file() and l_path.is_file():
        frames, lengths = np.load(f_path, mmap_mode="r"), np.load(l_path)
        if frames.shape[0] == len(paths):
            return frames, lengths
    frames, lengths = clip_frames(paths, sed_weights, log=log, what=subset)
    cache.mkdir(parents=True, exist_ok=True)
    np.save(f_path, frames)
    np.save(l_path, lengths)
    return frames, lengths


def clip_frames(paths: Sequence[Path], sed_weights: str | Path, *, log: Callable[[str], None] | None = None,
                what: str = "clips", max_s: float | None = None) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """``(frames (N, T, D) float16, lengths (N,))``: the frozen SED trunk's frames of each audio file (mixed to mono, at the model's
    rate; only its first ``max_s`` seconds when given)."""
    import soundfile as sf
    import torch

    from streamkit.models.retrieval import trunk_frames
    from streamkit.models.sed_crnn import load_model

    sed, _ = load_model(sed_weights)
    torch.set_num_threads(1)
    feats: list[np.ndarray] = []
    t0 = time.perf_counter()
    for i, p in enumerate(paths):
        x, rate = sf.read(str(p), dtype="float32", always_2d=True)
        x = x.mean(axis=1)
        if max_s is not None:
            x = x[: int(round(max_s * rate))]
        if rate != sed.cfg.rate:
            import soxr

            x = soxr.resample(x, rate, sed.cfg.rate, quality="HQ").astype(np.float32)
        feats.append(trunk_frames(sed, x).numpy().astype(np.float16))
        if log is not None and (i + 1) % 250 == 0:
            log(f"  trunk {what}: {i + 1}/{len(paths)} clips in {time.perf_counter() - t0:.0f} s")
    lengths = np.array([f.shape[0] for f in feats], np.int64)
    frames = np.zeros((len(feats), int(lengths.max(initial=1)), feats[0].shape[1] if feats else 1), np.float16)
    for i, f in enumerate(feats):
        frames[i, : f.shape[0]] = f
    return frames, lengths


def text_vectors(texts: Sequence[str], cache: str | Path | None = None, *, log: Callable[[str], None] | None = None) -> np.ndarray:
    """MiniLM vectors ``(len(texts), 384)`` of ``texts``; those not in ``cache`` (a ``.npz``) are encoded and added to it."""
    from streamkit.models.retrieval_text import MiniLM

    known: dict[str, np.ndarray] = {}
    cpath = Path(cache) if cache is not None else None
    if cpath is not None and cpath.is_file():
        z = np.load(cpath, allow_pickle=False)
        known = dict(zip(z["texts"].tolist(), z["vectors"]))
    todo = sorted({t for t in texts if t not in known})
    if todo:
        t0 = time.perf_counter()
        vecs = MiniLM.shared().encode(todo)
        known.update(zip(todo, vecs))
        if log is not None:
            log(f"  MiniLM: {len(todo)} caption(s) encoded in {time.perf_counter() - t0:.0f} s")
        if cpath is not None:
            cpath.parent.mkdir(parents=True, exist_ok=True)
            keys = list(known)
            tmp = cpath.with_name(cpath.name + ".tmp.npz")
            np.savez(tmp, texts=np.array(keys), vectors=np.stack([known[k] for k in keys]).astype(np.float32))
            tmp.replace(cpath)
    return np.stack([known[t] for t in texts]).astype(np.float32) if texts else np.zeros((0, 384), np.float32)


def stderr_log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)
