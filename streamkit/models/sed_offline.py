"""Sound event detection without a graph: a whole signal (:func:`sed_file`) or an audio file read in
blocks (:func:`sed_stream_file`) through the sliding-window engine
(:class:`~streamkit.models.sed_engine.SedEngine`). Both give exactly the probabilities and
detections of the block ``models.sed`` (:mod:`streamkit.models.sed_stream`) on the same samples.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from streamkit.core.errors import StreamkitError
from streamkit.models.sed_engine import SedDetection, SedEngine, SedStep
from streamkit.models.sed_settings import DEFAULT_HOP_S, DEFAULT_LOW, DEFAULT_WINDOW_S, PerClass, load_meta, resolve_gate, resolve_post

__all__ = ["SedResult", "sed_file", "sed_stream_file"]


@dataclass
class SedResult:
    """What :func:`sed_file` returns.

    Attributes:
        probs: ``(K, classes)`` float32 window-averaged frame probabilities.
        smoothed: the same after the median filter.
        detections: the events (samples and seconds from the signal's first sample).
        classes: column names.
        frame_hop, frame_offset: frame ``k`` stands for samples ``[frame_offset + frame_hop k, ... + frame_hop)``.
        rate: the model's sample rate.
        n_samples: signal length at ``rate``.
        windows: windows run.
        seconds: processing time.
    """

    probs: np.ndarray
    smoothed: np.ndarray
    detections: list[SedDetection]
    classes: tuple[str, ...]
    frame_hop: int
    frame_offset: int
    rate: int
    n_samples: int
    windows: int
    seconds: float

    def frame_times(self) -> np.ndarray:
        """``(K, 2)`` start and end seconds of each frame."""
        k = np.arange(self.probs.shape[0])
        s = (self.frame_offset + self.frame_hop * k) / self.rate
        return np.stack([s, s + self.frame_hop / self.rate], axis=1)


def sed_file(
    audio: np.ndarray,
    model: Any,
    window_s: float = DEFAULT_WINDOW_S,
    hop_s: float = DEFAULT_HOP_S,
    *,
    median_s: PerClass | None = None,
    threshold_high: PerClass | None = None,
    threshold_low: PerClass | None = DEFAULT_LOW,
    cache: bool = True,
    rate: int | None = None,
    post: str = "auto",
    clip_gate: PerClass | None = None,
) -> SedResult:
    """Offline sliding-window SED of a whole signal: the same probabilities and detections as the ``models.sed`` block.

    Args:
        audio: mono samples (1-D, or 2-D ``(n, channels)``: channels averaged).
        model: a :class:`~streamkit.models.sed_crnn.SedModel` or a weight file path.
        window_s, hop_s, median_s, threshold_high, threshold_low, cache: as :class:`SedEngine`.
        rate: the audio's sample rate (None: the model's); another rate is resampled with soxr (HQ).
        post: ``auto`` (default), ``fixed`` or ``tuned``: where the median windows and
            on-thresholds come from (:func:`~streamkit.models.sed_settings.resolve_post`; ``median_s``/``threshold_high`` None
            mean 0.45 s / 0.5 when fixed).
        clip_gate: as :class:`SedEngine`; None: the tuned setting's gates when ``post`` resolves to
            ``tuned`` (none when the file has none), else 0 (:func:`~streamkit.models.sed_settings.resolve_gate`).

    Raises:
        ConfigError: bad parameters, or ``post="tuned"`` with a model without a tuned setting.
        ModelError: a bad weight file.
    """
    m, meta = load_meta(model)
    where = Path(model).name if isinstance(model, (str, Path)) else "the model"
    median_s, threshold_high, used = resolve_post(post, meta, m.cfg.classes, median_s, threshold_high, where)
    gate = resolve_gate(used, meta, m.cfg.classes, clip_gate, where)
    x = np.asarray(audio)
    if x.ndim == 2:
        x = x.mean(axis=1, dtype=np.float64)
    if x.ndim != 1:
        raise ValueError(f"audio must be 1-D (or 2-D samples x channels), got shape {x.shape}")
    x = x.astype(np.float32, copy=False)
    if rate is not None and int(rate) != m.cfg.rate:
        import soxr

        x = soxr.resample(x, int(rate), m.cfg.rate, quality="HQ").astype(np.float32, copy=False)
    if not np.isfinite(x).all():
        raise ValueError("audio contains NaN or inf samples")
    eng = SedEngine(m, window_s=window_s, hop_s=hop_s, median_s=median_s, threshold_high=threshold_high, threshold_low=threshold_low, cache=cache,
                    clip_gate=gate)  # fmt: skip
    t0 = time.perf_counter()
    steps = eng.push(x) + eng.finish()
    dt = time.perf_counter() - t0
    return _result(eng, steps, x.shape[0], dt)


def _result(eng: SedEngine, steps: list[SedStep], n: int, seconds: float) -> SedResult:
    C = eng.n_classes
    probs = np.concatenate([s.probs for s in steps]) if steps else np.zeros((0, C), np.float32)
    sm = np.concatenate([s.smoothed for s in steps]) if steps else np.zeros((0, C), np.float32)
    dets = [d for s in steps for d in s.detections]
    g = eng.geo
    return SedResult(probs, sm, dets, eng.classes, g.frame_hop, g.frame_offset, g.rate, n, eng.windows_run, seconds)


# ------------------------------------------------------------------------------------------------
# an audio file through the engine, in blocks
# ------------------------------------------------------------------------------------------------


def sed_stream_file(path: Path, eng: SedEngine, block_s: float) -> tuple[list[SedStep], int, float]:
    """Read ``path`` in blocks of ``block_s`` seconds (mono mix, soxr resampling to the model rate) through ``eng``.

    Returns ``(steps, samples at the model rate, seconds spent in the engine)``; an unreadable file or
    NaN/inf samples raise :class:`StreamkitError`. Memory stays bounded whatever the file's length.
    """
    import soundfile as sf

    rate = eng.geo.rate
    steps: list[SedStep] = []
    busy = 0.0
    try:
        f = sf.SoundFile(str(path))
    except Exception as exc:  # soundfile raises its own error types
        raise StreamkitError(f"{path}: cannot read audio: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}") from None
    with f:
        sr = int(f.samplerate)
        rs = None
        if sr != rate:
            import soxr

            rs = soxr.ResampleStream(sr, rate, 1, dtype="float32", quality="HQ")
        n = 0
        blk = max(1, int(block_s * sr))
        while True:
            try:
                data = f.read(blk, dtype="float32", always_2d=True)
            except Exception as exc:
                raise StreamkitError(f"{path}: cannot read audio: {exc}") from None
            last = data.shape[0] < blk
            x = data.mean(axis=1, dtype=np.float64).astype(np.float32) if data.shape[1] > 1 else data[:, 0]
            if not np.isfinite(x).all():
                raise StreamkitError(f"{path}: audio contains NaN or inf samples")
            if rs is not None:
                x = rs.resample_chunk(x, last=last)
            t0 = time.perf_counter()
            steps += eng.push(x)
            busy += time.perf_counter() - t0
            n += x.shape[0]
            if last:
                break
    t0 = time.perf_counter()
    steps += eng.finish()
    busy += time.perf_counter() - t0
    return steps, n, busy
