"""Post-processing of SED frame probabilities: per-class median filter, thresholds, events.

Shared by the trainer's model selection (:mod:`streamkit.train.sed`), the Table 1 benchmark and
the streaming block (:mod:`streamkit.models.sed_stream`), so that all of them turn the CRNN's
frame probabilities into the same events. Pure numpy, no torch.

Conventions
-----------
* ``probs`` is a ``(T, K)`` array: ``T`` output frames of the CRNN, ``K`` classes.
* :func:`median_filter`: per class a median over an odd window of ``lengths[k]`` frames centred on
  each frame (1 = unfiltered). At the ends the signal is extended with its first/last value
  ("nearest"), so ``T`` frames give ``T`` frames and the output at frame ``t`` depends only on
  frames ``t - L//2 .. t + L//2`` (a streaming filter needs ``L//2`` frames of look-ahead, and at
  the end of a stream the last value repeated).
* :func:`binarize`: active where ``p > threshold`` (strictly).
* :func:`hysteresis`: per class a two-state machine: an inactive class becomes active at a frame
  with ``p > on``, an active one stays active while ``p > off`` (``off <= on``); ``off == on`` is
  :func:`binarize`. ``initial`` gives the state before the first frame (streaming continuation).
* :func:`frames_to_events`: optional median filter, then binarize (or hysteresis with
  ``off_threshold``), then every run of active frames ``a .. b-1`` of class ``k`` becomes an event
  ``(label, onset, offset, confidence)`` with ``onset`` the start of frame ``a``'s span and
  ``offset`` the end of frame ``b-1``'s span (:func:`streamkit.models.sed_crnn.frame_span`: frame
  ``k`` stands for the 64 ms around its centre ``88 ms + 64 ms k`` by default), and ``confidence``
  the mean of the (filtered) probabilities over the run. ``frame_offset`` shifts the frame
  indices (frame ``probs[0]`` is frame ``frame_offset`` of a stream). Events are sorted by onset,
  then class order.

* :func:`clip_gate`: the frames of a class whose clip-level probability (the CRNN's attention-pooled
  output for the same clip or window) is below ``gate`` are set to 0, so that class gives no event
  there. Most false alarms on real clips are of a class the clip does not hold at all
  (docs/experiments.md, SED findings), which the clip-level decision, trained on every weak tag,
  rules out better than the frames do. ``gate = 0`` changes nothing. Applied before the median
  filter; per class, fitted on validation clips with the other settings (``streamkit train sed-post``).

The grid arithmetic is repeated here (:func:`frame_times`) without importing torch: it is
``sed_crnn.frame_span`` for a config given as any object with ``hop``, ``n_fft``, ``rate`` and
``pool_time`` (or ``time_pool``) attributes.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = [
    "DEFAULT_MEDIAN_S",
    "DEFAULT_THRESHOLD",
    "META_KEY",
    "binarize",
    "clip_gate",
    "clip_gate_from_meta",
    "frame_times",
    "frames_to_events",
    "hysteresis",
    "median_filter",
    "median_frames",
    "post_from_meta",
    "runs",
]

#: median window of the DCASE 2020 baseline (0.45 s: 7 frames of 64 ms)
DEFAULT_MEDIAN_S = 0.45
DEFAULT_THRESHOLD = 0.5

Event = tuple[str, float, float, float]


def _as_probs(probs: Any) -> npt.NDArray[np.float64]:
    p = np.asarray(probs, dtype=np.float64)
    if p.ndim != 2:
        raise ValueError(f"expected (frames, classes) probabilities, got shape {p.shape}")
    return p


def _per_class(value: Any, k: int, name: str) -> list[Any]:
    if np.ndim(value) == 0:
        return [value] * k
    v = list(value)
    if len(v) != k:
        raise ValueError(f"{name}: {len(v)} values for {k} classes")
    return v


def median_filter(probs: Any, lengths: int | Sequence[int]) -> npt.NDArray[np.float64]:
    """Per-class centred median over ``lengths[k]`` frames (odd, >= 1), edges extended ("nearest")."""
    p = _as_probs(probs)
    t, k = p.shape
    ls = [int(x) for x in _per_class(lengths, k, "lengths")]
    for x in ls:
        if x < 1 or x % 2 != 1:
            raise ValueError(f"median lengths must be odd and >= 1, got {x}")
    out = p.copy()
    if t == 0:
        return out
    for j, length in enumerate(ls):
        if length == 1:
            continue
        h = length // 2
        col = np.concatenate([np.full(h, p[0, j]), p[:, j], np.full(h, p[-1, j])])
        out[:, j] = np.median(np.lib.stride_tricks.sliding_window_view(col, length), axis=1)
    return out


def median_frames(seconds: float, frame_seconds: float) -> int:
    """Odd window length (frames) closest to ``seconds`` (at least 1)."""
    if seconds <= 0:
        return 1
    n = max(1, int(round(seconds / frame_seconds)))
    return n if n % 2 == 1 else n + 1


def binarize(probs: Any, threshold: float | Sequence[float] = DEFAULT_THRESHOLD) -> npt.NDArray[np.bool_]:
    """``p > threshold`` (per class when a sequence)."""
    p = _as_probs(probs)
    th = np.asarray(_per_class(threshold, p.shape[1], "threshold"), dtype=np.float64)
    return p > th[None, :]


def hysteresis(
    probs: Any,
    on: float | Sequence[float],
    off: float | Sequence[float],
    initial: Sequence[bool] | npt.NDArray[np.bool_] | None = None,
) -> npt.NDArray[np.bool_]:
    """Two-threshold activity: switch on at ``p > on``, stay on while ``p > off``."""
    p = _as_probs(probs)
    t, k = p.shape
    on_ = np.asarray(_per_class(on, k, "on"), dtype=np.float64)
    off_ = np.asarray(_per_class(off, k, "off"), dtype=np.float64)
    if np.any(off_ > on_):
        raise ValueError(f"hysteresis needs off <= on, got on {on_.tolist()}, off {off_.tolist()}")
    state = np.zeros(k, dtype=bool) if initial is None else np.asarray(initial, dtype=bool).copy()
    if state.shape != (k,):
        raise ValueError(f"initial state needs {k} values")
    out = np.zeros((t, k), dtype=bool)
    hi = p > on_[None, :]
    lo = p > off_[None, :]
    for i in range(t):
        state = np.where(state, lo[i], hi[i])
        out[i] = state
    return out


def runs(active: Any) -> list[tuple[int, int, int]]:
    """``(class index, first frame, end frame exclusive)`` of every run of active frames."""
    a = np.asarray(active, dtype=bool)
    if a.ndim != 2:
        raise ValueError(f"expected (frames, classes) activity, got shape {a.shape}")
    out = []
    for j in range(a.shape[1]):
        d = np.diff(np.concatenate([[0], a[:, j].astype(np.int8), [0]]))
        for s, e in zip(np.flatnonzero(d == 1), np.flatnonzero(d == -1)):
            out.append((j, int(s), int(e)))
    return out


def _time_pool(cfg: Any) -> int:
    if hasattr(cfg, "time_pool"):
        return int(cfg.time_pool)
    return int(math.prod(cfg.pool_time))


def frame_times(k: Any, cfg: Any) -> tuple[Any, Any]:
    """Seconds ``[start, end)`` of output frame(s) ``k`` (same as ``sed_crnn.frame_span``)."""
    p = _time_pool(cfg)
    centre = (np.asarray(k) * p * cfg.hop + cfg.n_fft / 2 + (p - 1) * cfg.hop / 2) / cfg.rate
    half = cfg.hop * p / cfg.rate / 2
    return centre - half, centre + half


def frames_to_events(
    probs: Any,
    cfg: Any,
    classes: Sequence[str] | None = None,
    *,
    threshold: float | Sequence[float] = DEFAULT_THRESHOLD,
    off_threshold: float | Sequence[float] | None = None,
    median: int | Sequence[int] | None = None,
    frame_offset: int = 0,
    decimals: int | None = 3,
) -> list[Event]:
    """Events ``(label, onset, offset, confidence)`` of ``(T, K)`` frame probabilities (see module doc).

    ``cfg``: the model config (:class:`~streamkit.models.sed_crnn.SedConfig` or any object with
    its ``hop``, ``n_fft``, ``rate``, ``pool_time`` and, when ``classes`` is None, ``classes``).
    ``median``: per-class median lengths in frames (None: no filtering). ``off_threshold``: use
    :func:`hysteresis` with ``on = threshold``. ``decimals``: round times (None: exact).
    """
    p = _as_probs(probs)
    names = list(classes if classes is not None else cfg.classes)
    if len(names) != p.shape[1]:
        raise ValueError(f"{len(names)} class names for {p.shape[1]} columns")
    if median is not None:
        p = median_filter(p, median)
    active = binarize(p, threshold) if off_threshold is None else hysteresis(p, threshold, off_threshold)
    events = []
    for j, a, b in runs(active):
        onset = float(frame_times(frame_offset + a, cfg)[0])
        offset = float(frame_times(frame_offset + b - 1, cfg)[1])
        onset = max(onset, 0.0)
        if decimals is not None:
            onset, offset = round(onset, decimals), round(offset, decimals)
        events.append((names[j], onset, offset, float(p[a:b, j].mean())))
    order = {n: i for i, n in enumerate(names)}
    events.sort(key=lambda e: (e[1], order[e[0]], e[2]))
    return events


#: key of a weight file's meta holding per-class post-processing fitted on validation clips
#: (``streamkit train sed-post``, :mod:`streamkit.train.sed_tune`)
META_KEY = "post_tuned"


def clip_gate(probs: Any, clip: Any, gate: float | Sequence[float]) -> npt.NDArray[np.float64]:
    """``(T, K)`` frame probabilities with class ``k`` zeroed where ``clip[k] < gate[k]`` (see module doc).

    ``clip``: the ``(K,)`` clip-level probabilities of the same clip (or window); ``gate``: one value
    or one per class, in ``[0, 1]`` (0: no gating).
    """
    p = _as_probs(probs)
    c = np.asarray(clip, dtype=np.float64)
    if c.shape != (p.shape[1],):
        raise ValueError(f"clip probabilities must have shape ({p.shape[1]},), got {c.shape}")
    g = np.broadcast_to(np.asarray(gate, dtype=np.float64), c.shape)
    if np.any(~np.isfinite(g)) or np.any(g < 0.0) or np.any(g > 1.0):
        raise ValueError(f"clip gate must lie in [0, 1], got {np.asarray(gate).tolist()}")
    return np.where(c >= g, p, 0.0)


def clip_gate_from_meta(meta: Mapping[str, Any], classes: Sequence[str], *, where: str = "the weight file") -> dict[str, float] | None:
    """Per-class clip gates from ``meta["post_tuned"]["clip_gate"]``, or None when the tuning has none
    (files tuned before the gate existed: no gating). Raises ValueError for a malformed one."""
    post = meta.get(META_KEY)
    if not isinstance(post, Mapping) or "clip_gate" not in post:
        return None
    d = post["clip_gate"]
    if not isinstance(d, Mapping) or set(d) != set(classes):
        raise ValueError(f"{where}: meta['{META_KEY}']['clip_gate'] must give a value for each of the model's classes {list(classes)}")
    out = {}
    for c in classes:
        v = d[c]
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0.0 <= float(v) <= 1.0:
            raise ValueError(f"{where}: meta['{META_KEY}']['clip_gate'][{c!r}] = {v!r} is out of range")
        out[c] = float(v)
    return out


def post_from_meta(meta: Mapping[str, Any], classes: Sequence[str], *, where: str = "the weight file") -> tuple[dict[str, float], dict[str, float]]:
    """``(median_s, threshold)`` per class from a weight file's ``meta["post_tuned"]``.

    Raises ValueError when there is none or it does not cover exactly ``classes`` with valid values.
    """
    post = meta.get(META_KEY)
    if not isinstance(post, Mapping):
        raise ValueError(f"{where} has no tuned post-processing (meta['{META_KEY}']); make one with `streamkit train sed-post`")
    out = []
    for key, lo, hi in (("median_s", 0.0, 60.0), ("threshold", 0.0, 1.0)):
        d = post.get(key)
        if not isinstance(d, Mapping) or set(d) != set(classes):
            raise ValueError(f"{where}: meta['{META_KEY}']['{key}'] must give a value for each of the model's classes {list(classes)}")
        vals = {}
        for c in classes:
            v = d[c]
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not lo <= float(v) <= hi or (key == "threshold" and float(v) in (0.0, 1.0)):
                raise ValueError(f"{where}: meta['{META_KEY}']['{key}'][{c!r}] = {v!r} is out of range")
            vals[c] = float(v)
        out.append(vals)
    return out[0], out[1]
