"""Block ``models.sed``: sliding-window sound event detection with the SED CRNN, and its offline twin.

The CRNN of :mod:`streamkit.models.sed_crnn` sees W-second windows every H seconds (default 10 s /
1 s). Each window's frame probabilities (head ``Ft``) are added to a per-frame sum; a frame is
**final** once no later window can cover it, and its probability is then the mean over the windows
that covered it. Final frames go through a per-class median filter and per-class hysteresis
thresholds, and an event is emitted once it has ended (``sed.detection``).

Frame grid and windows
----------------------
Everything lives on the model's output frame grid of a *segment* (the stream from its start or from
the last gap): output frame ``k`` pools feature frames ``P k .. P k + P - 1`` (``P`` = the CNN's time
pooling, 4), i.e. ``F = P * hop = 1024`` samples per frame (64 ms), and stands for the samples
``[F k + off, F k + off + F)`` with ``off = (n_fft + (P - 1) hop - F) / 2 = 896`` (the 64 ms around
its centre, as :func:`~streamkit.models.sed_crnn.frame_span`). A W-second window holds
``Lf = ceil(W * rate / F)`` frames (157 for 10 s; the model saw 154 frames per 10 s training clip),
so that any hop ``H <= W`` leaves no frame uncovered; window ``m`` covers frames
``[a_m, a_m + Lf)`` with ``a_m = floor(m * round(H * rate) / F)``, so the hop is 15 or 16 frames
for H = 1 s and exactly H on average. At the end of a segment the windows
that start before its last frame ``K`` are run truncated at ``K`` (the "final partial windows"), so
every frame is averaged over all the windows that start at or before it and reach it.

Exact caching of the CNN
------------------------
The CNN output of a frame is defined with **real context**: it is the value that
``model.frontend(log_mel(segment))`` gives for the whole segment (zero padding only at the
segment's edges). CNN frame ``k`` depends on feature frames ``[P k - before, P k + P - 1 + after]``
(:func:`~streamkit.models.sed_crnn.receptive_field`), so frames ``[k0, k1)`` are computed from the
feature frames ``[P k0 - B, P k1 + A)`` with ``B, A`` = ``before, after`` rounded up to multiples of
``P`` (the pooling grid stays aligned); the outputs next to that slice's edges are thrown away.
With the cache (default) each frame's CNN output is computed once, in the step of the window that
first reaches it, and kept until no later window needs it; the BiGRU and the heads run over each
window. Without it (``cache=False``, the full recompute the benchmark compares with) every window
recomputes its log-mel features and its CNN over ``[P a_m - B, P (a_m + Lf) + A)``. The two agree
to float rounding (torch's convolution may sum in another order for another input length; about
1e-7 on the CNN outputs), and both agree with the whole-segment CNN the same way.

A window is run as soon as the audio up to ``P (a_m + Lf) + A`` feature frames has arrived (the
CNN's look-ahead of ``A`` feature frames, 384 ms). All the computation happens in steps fixed by
the window index (never by chunk boundaries), so any chunking gives bit-identical probabilities and
events, and :func:`sed_file` (the same engine fed the whole signal) gives exactly the streaming
block's output.

Post-processing
---------------
The conventions of :mod:`streamkit.models.sed_post` (shared with the trainer's model selection and
the Table 1 benchmark), applied incrementally to final frames: a per-class median filter of
``median_frames(median_s, 64 ms)`` frames (odd; 0.45 s = 7 frames) with the segment's first and
last values repeated at its edges (``sed_post.median_filter``), then per-class hysteresis
(``sed_post.hysteresis``, carried across steps with its ``initial`` state): a class switches on
at a frame with ``p > threshold_high`` and stays on while ``p > threshold_low`` (default
``threshold_low = threshold_high``: a plain threshold, as the trainer scores). A run of active
frames ``a .. b-1`` is an event ``[F a + off, F b + off)`` (frame ``a``'s span start to frame
``b-1``'s span end, as ``sed_post.frames_to_events``), confidence = the mean median-filtered
probability over the run (``peak`` = its maximum). The detections equal
``sed_post.frames_to_events(probs, cfg, threshold=high, off_threshold=low, median=...)`` on the
window-averaged probabilities of each segment (tested). With ``clip_gate`` (opt-in), each window's
frame probabilities of a class are zeroed before they enter the average when the window's
clip-level probability of that class is below its gate (``sed_post.clip_gate``); the final
partial windows of a segment share the first one's clip probabilities.

Latency (worst case, default model): an item in the first frame of a window waits for that window
(W), for the CNN's look-ahead (384 ms) and for ``h`` more final frames for the median filter, plus
the last feature frame's window: ``F (Lf + h) + hop (A - 1) + n_fft - off`` = 170880 samples =
10.68 s for W = 10 s and a 7-frame median. Items in the last frame before a window start wait
about H less (W - H + the rest). Detections are emitted when they end, so an event's
``sed.detection`` comes that long after its offset.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from streamkit.core.block import GapPolicy, Sink, require_audio
from streamkit.core.context import Context
from streamkit.core.errors import ConfigError, StreamkitError
from streamkit.core.params import integer, number
from streamkit.core.registry import register
from streamkit.core.tags import GAP, Gap
from streamkit.core.types import Chunk, StreamSpec

if TYPE_CHECKING:
    from streamkit.models.sed_crnn import SedConfig, SedModel

__all__ = [
    "SED_DETECTION",
    "SED_FRAMES",
    "SedDetection",
    "SedFrames",
    "SedGeometry",
    "SedEngine",
    "SedStep",
    "SedResult",
    "SedBlock",
    "sed_file",
    "default_weights",
    "load_meta",
    "sed_stream_file",
]

SED_DETECTION = "sed.detection"
SED_FRAMES = "sed.frames"

# the default SedConfig's front end (streamkit.models.sed_crnn is imported in start(), so that loading
# the block registry does not import torch); checked against SedConfig() in the tests
RATE = 16000
N_FFT = 2048
HOP = 256
TIME_POOL = 4
RF_BEFORE = 23
RF_AFTER = 23

DEFAULT_WINDOW_S = 10.0
DEFAULT_HOP_S = 1.0
DEFAULT_MEDIAN_S = 0.45  # the DCASE 2020 baseline's median window (= sed_post.DEFAULT_MEDIAN_S)
DEFAULT_HIGH = 0.5  # = sed_post.DEFAULT_THRESHOLD, what the trainer selects models with
DEFAULT_LOW = None  # None: = threshold_high (no hysteresis)


# ------------------------------------------------------------------------------------------------
# payloads
# ------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SedDetection:
    """Payload of ``sed.detection`` (and an item of :attr:`SedResult.detections`).

    Attributes:
        label: class name.
        class_index: its index in the model's classes.
        onset, offset: absolute input sample indices ``[onset, offset)`` (= the event's span): from
            the start of the first active frame's 64 ms span to the end of the last one's.
        onset_s, offset_s: ``onset / rate`` and ``offset / rate`` (seconds of delivered audio since
            the stream's item 0; after a gap without fill, the events' ``t_start_ns`` / ``t_end_ns``
            from the time anchors give the wall-clock times).
        confidence: mean median-filtered probability over the event's frames.
        peak: their maximum.
        open_start: active from the first frame of its segment (the stream start or a gap): it may
            have begun earlier.
        open_end: still active at the end of its segment (end of stream or a gap): it was cut.
        gap_before: the gap the segment began after, when ``open_start`` (what was lost just before
            the onset); None otherwise.
        gap_after: the gap that ended the segment, when ``open_end`` because of a gap.
    """

    label: str
    class_index: int
    onset: int
    offset: int
    onset_s: float
    offset_s: float
    confidence: float
    peak: float
    open_start: bool = False
    open_end: bool = False
    gap_before: Gap | None = None
    gap_after: Gap | None = None


@dataclass(frozen=True, slots=True)
class SedFrames:
    """Payload of ``sed.frames`` (with ``emit_frames=True``): newly final, window-averaged frame probabilities.

    Frame ``first_frame + i`` of the segment starting at input item ``origin`` stands for the items
    ``[origin + frame_offset + frame_hop * (first_frame + i), ... + frame_hop)``; the event's span is
    the union of those.

    Attributes:
        origin: absolute index of the segment's first item (0, or the offset of the last gap).
        first_frame: segment frame index of ``probs[0]``.
        frame_hop, frame_offset: in samples (1024 and 896 for the default model).
        classes: the class names (columns of ``probs``).
        probs: ``(frames, classes)`` mean of the windows' frame probabilities, before median filtering.
    """

    origin: int
    first_frame: int
    frame_hop: int
    frame_offset: int
    classes: tuple[str, ...]
    probs: tuple[tuple[float, ...], ...]


# ------------------------------------------------------------------------------------------------
# parameters
# ------------------------------------------------------------------------------------------------


PerClass = float | Sequence[float] | Mapping[str, float]


def _per_class_check(name: str, v: Any, lo: float, hi: float) -> Any:
    """Validate a number, a list of numbers or a {class: number} mapping (class names checked in start)."""
    if isinstance(v, Mapping):
        if not v:
            raise ConfigError(f"{name}: empty mapping")
        return {str(k): number(f"{name}[{k!r}]", x, lo, hi) for k, x in v.items()}
    if isinstance(v, (list, tuple, np.ndarray)):
        if len(v) == 0:
            raise ConfigError(f"{name}: empty list")
        return [number(f"{name}[{i}]", x, lo, hi) for i, x in enumerate(v)]
    return number(name, v, lo, hi)


def _per_class(name: str, v: Any, classes: Sequence[str], default: float | None = None) -> np.ndarray:
    """Expand a validated per-class value to an array over ``classes`` (a mapping may omit classes when a default is given)."""
    n = len(classes)
    if isinstance(v, Mapping):
        unknown = sorted(set(v) - set(classes))
        if unknown:
            raise ConfigError(f"{name}: unknown classes {unknown}; the model's are {list(classes)}")
        missing = [c for c in classes if c not in v]
        if missing and default is None:
            raise ConfigError(f"{name}: no value for classes {missing}")
        return np.array([float(v.get(c, default)) for c in classes], dtype=np.float64)
    if isinstance(v, list):
        if len(v) != n:
            raise ConfigError(f"{name}: {len(v)} values for the model's {n} classes")
        return np.array(v, dtype=np.float64)
    return np.full(n, float(v), dtype=np.float64)


# ------------------------------------------------------------------------------------------------
# geometry
# ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SedGeometry:
    """Windows, frames and look-ahead of the sliding-window detector (all in samples or frames of a segment).

    Attributes:
        rate, n_fft, hop, pool: the model's front end (``pool`` = CNN time pooling ``P``).
        frame_hop: samples per output frame ``F = P * hop``.
        frame_offset: frame ``k`` stands for samples ``[F k + frame_offset, F k + frame_offset + F)``.
        win_frames: ``Lf``, output frames per window.
        hop_samples: ``round(H * rate)``; window ``m`` starts at frame ``(m * hop_samples) // F``.
        ctx_before, ctx_after: ``B`` and ``A``, feature frames of real context around a CNN slice.
        median_half: ``h_c`` per class (median filter length ``2 h_c + 1`` = ``sed_post.median_frames(median_s, F / rate)``).
    """

    rate: int
    n_fft: int
    hop: int
    pool: int
    frame_hop: int
    frame_offset: int
    win_frames: int
    hop_samples: int
    ctx_before: int
    ctx_after: int
    median_half: tuple[int, ...]

    @classmethod
    def build(cls, *, rate: int, n_fft: int, hop: int, pool: int, rf: tuple[int, int], window_s: float, hop_s: float,
              median_s: np.ndarray) -> SedGeometry:  # fmt: skip
        F = pool * hop
        win_samples = int(round(window_s * rate))
        if win_samples < 1:
            raise ConfigError(f"window_s must be > 0, got {window_s:g}")
        win_frames = -(-win_samples // F)
        hop_samples = int(round(hop_s * rate))
        if hop_samples < F:
            raise ConfigError(f"hop_s {hop_s:g} s is shorter than one output frame ({F / rate:g} s)")
        if hop_samples > win_samples:
            raise ConfigError(f"hop_s {hop_s:g} s is longer than window_s {window_s:g} s: frames would be skipped")
        B = -(-rf[0] // pool) * pool
        A = -(-rf[1] // pool) * pool
        from streamkit.models.sed_post import median_frames

        half = tuple(median_frames(float(m), F / rate) // 2 for m in median_s)
        return cls(rate, n_fft, hop, pool, F, (n_fft + (pool - 1) * hop - F) // 2, win_frames, hop_samples, B, A, half)

    def window_start(self, m: int) -> int:
        return (m * self.hop_samples) // self.frame_hop

    def n_feature_frames(self, n: int) -> int:
        return 0 if n < self.n_fft else (n - self.n_fft) // self.hop + 1

    def samples_for_features(self, t: int) -> int:
        """Samples needed for feature frames ``[0, t)``."""
        return 0 if t <= 0 else (t - 1) * self.hop + self.n_fft

    def latency(self) -> int:
        """Worst-case samples an item waits for its final, median-filtered frame (see the module docstring)."""
        h = max(self.median_half) if self.median_half else 0
        return self.frame_hop * (self.win_frames + h) + self.hop * (self.ctx_after - 1) + self.n_fft - self.frame_offset

    @property
    def frame_seconds(self) -> float:
        return self.frame_hop / self.rate


# ------------------------------------------------------------------------------------------------
# the engine (plain class: one contiguous segment of audio, no graph)
# ------------------------------------------------------------------------------------------------


@dataclass
class SedStep:
    """What one engine step made final.

    Attributes:
        first_frame: segment frame index of ``probs[0]``.
        probs: ``(n, classes)`` float32 window-averaged probabilities of the newly final frames.
        smooth_first: segment frame index of ``smoothed[0]``.
        smoothed: ``(m, classes)`` float32 median-filtered probabilities (lag ``max h`` frames behind).
        detections: events that ended in this step (segment-relative samples; ``onset_s`` etc. with origin 0).
    """

    first_frame: int
    probs: np.ndarray
    smooth_first: int
    smoothed: np.ndarray
    detections: list[SedDetection]


class SedEngine:
    """Sliding-window SED over one contiguous segment: :meth:`push` samples, :meth:`finish` at its end.

    Args:
        model: a :class:`~streamkit.models.sed_crnn.SedModel` (put in eval mode here).
        window_s, hop_s: W and H.
        median_s: median filter length in seconds, per class (number, list or {class: s}).
        threshold_high, threshold_low: hysteresis thresholds, per class likewise; ``low <= high``
            (``threshold_low`` None: equal to ``threshold_high``).
        clip_gate: per class likewise, in [0, 1]: a window's frame probabilities of a class are set
            to 0 when the window's clip-level probability of it is below the gate
            (:func:`streamkit.models.sed_post.clip_gate`), before they are averaged; 0 (default): none.
            The final partial windows of a segment all take the clip probabilities of the first of
            them (the one that covers the most audio), so that a window cut down to its last second
            is not judged on that second alone.
        cache: cache the CNN output per frame (default) or recompute features and CNN per window.

    :meth:`push` returns the steps it completed (one per window run); :meth:`finish` runs the final
    partial windows, finalises every frame, closes open events and resets the engine for a new
    segment.
    """

    def __init__(
        self,
        model: SedModel,
        *,
        window_s: float = DEFAULT_WINDOW_S,
        hop_s: float = DEFAULT_HOP_S,
        median_s: PerClass = DEFAULT_MEDIAN_S,
        threshold_high: PerClass = DEFAULT_HIGH,
        threshold_low: PerClass | None = DEFAULT_LOW,
        cache: bool = True,
        clip_gate: PerClass = 0.0,
    ) -> None:
        import torch

        from streamkit.models.sed_crnn import receptive_field

        self._torch = torch
        self.model = model.eval()
        cfg: SedConfig = model.cfg
        self.cfg = cfg
        self.classes = tuple(cfg.classes)
        self.n_classes = cfg.n_classes
        window_s = number("window_s", window_s, 0.0)
        hop_s = number("hop_s", hop_s, 0.0)
        med = _per_class("median_s", _per_class_check("median_s", median_s, 0.0, 60.0), self.classes, DEFAULT_MEDIAN_S)
        self.high = _per_class("threshold_high", _per_class_check("threshold_high", threshold_high, 0.0, 1.0), self.classes, DEFAULT_HIGH)
        self.low = (
            self.high.copy()
            if threshold_low is None
            else _per_class("threshold_low", _per_class_check("threshold_low", threshold_low, 0.0, 1.0), self.classes, DEFAULT_HIGH)
        )
        if np.any(self.low > self.high):
            raise ConfigError(f"threshold_low must be <= threshold_high per class, got {self.low.tolist()} > {self.high.tolist()}")
        self.gate = _per_class("clip_gate", _per_class_check("clip_gate", clip_gate, 0.0, 1.0), self.classes, 0.0).astype(np.float32)
        self._gated = bool(np.any(self.gate > 0.0))
        self.geo = SedGeometry.build(rate=cfg.rate, n_fft=cfg.n_fft, hop=cfg.hop, pool=cfg.time_pool, rf=receptive_field(cfg),
                                     window_s=window_s, hop_s=hop_s, median_s=med)  # fmt: skip
        self.cache = bool(cache)
        self._hmax = max(self.geo.median_half)
        self.windows_run = 0
        self.reset()

    # -- state --------------------------------------------------------------------------------------
    def reset(self) -> None:
        """Forget everything (a new segment starts at sample 0)."""
        torch = self._torch
        C = self.n_classes
        self.n = 0  # samples received
        self._buf = np.zeros(0, np.float32)
        self._buf0 = 0  # segment sample index of _buf[0]
        self._pend: list[np.ndarray] = []
        self._m = 0  # next window
        self._need = self._need_samples(0)
        # cache: feature frames [_mel0, _mel0 + len) and CNN frames [_cnn0, _cnn0 + len)
        self._mel = torch.zeros(0, self.cfg.n_mels)
        self._mel0 = 0
        self._cnn = torch.zeros(0, self.cfg.cnn_dim)
        self._cnn0 = 0
        # sums of window probabilities for frames [_fin, _fin + len)
        g = self.geo
        cap = g.win_frames + g.ctx_after // g.pool + -(-g.hop_samples // g.frame_hop) + 2  # frames not final yet, at most
        self._sum = np.zeros((cap, C), np.float64)
        self._cnt = np.zeros(cap, np.int64)
        self._fin = 0  # frames final
        # median filter input: final probabilities of frames [_hist0, _fin); frames < _sm are smoothed
        self._hist = np.zeros((0, C), np.float32)
        self._hist0 = 0
        self._sm = 0
        # hysteresis per class: on/off state, start of the active run (-1: none), sum and max of its values
        self._state = np.zeros(C, dtype=bool)
        self._run_start = [-1] * C
        self._run_sum = [0.0] * C
        self._run_peak = [0.0] * C
        self._final_clip: np.ndarray | None = None  # clip probabilities of the segment's first final partial window

    def _need_samples(self, m: int) -> int:
        g = self.geo
        return g.samples_for_features(g.pool * (g.window_start(m) + g.win_frames) + g.ctx_after)

    # -- audio --------------------------------------------------------------------------------------
    def push(self, x: np.ndarray) -> list[SedStep]:
        """Append mono samples (1-D float); run every window whose audio (with look-ahead) is complete."""
        x = np.array(x, dtype=np.float32).reshape(-1)  # a copy: the caller's buffer may be reused
        if x.shape[0]:
            self._pend.append(x)
            self.n += x.shape[0]
        steps: list[SedStep] = []
        while self.n >= self._need:
            steps.append(self._window(self._m, final_frames=None))
            self._m += 1
            self._need = self._need_samples(self._m)
        return steps

    def finish(self) -> list[SedStep]:
        """End of segment: the remaining (partial) windows, every frame final, open events closed; then reset."""
        g = self.geo
        T = g.n_feature_frames(self.n)
        K = T // g.pool
        steps: list[SedStep] = []
        if K > 0:
            if self.cache and self._cnn0 + self._cnn.shape[0] < K:
                with self._torch.inference_mode():
                    self._extend_cnn(K, T)
            while g.window_start(self._m) < K:
                steps.append(self._window(self._m, final_frames=K))
                self._m += 1
            steps.append(self._finalise(K, K, final=True))
        self.reset()
        return [s for s in steps if s.probs.shape[0] or s.smoothed.shape[0] or s.detections]

    def _samples(self, lo: int, hi: int) -> np.ndarray:
        if self._pend and hi > self._buf0 + self._buf.shape[0]:
            self._buf = np.concatenate([self._buf, *self._pend])
            self._pend = []
        assert lo >= self._buf0 and hi <= self._buf0 + self._buf.shape[0], (lo, hi, self._buf0, self._buf.shape[0])
        return self._buf[lo - self._buf0 : hi - self._buf0]

    def _trim_samples(self, keep: int) -> None:
        if keep > self._buf0:
            drop = min(keep - self._buf0, self._buf.shape[0])
            self._buf = self._buf[drop:]
            self._buf0 += drop

    def _features(self, t0: int, t1: int) -> Any:
        """Log-mel feature frames ``[t0, t1)`` of the segment."""
        from streamkit.models.sed_crnn import log_mel

        g = self.geo
        x = self._samples(t0 * g.hop, (t1 - 1) * g.hop + g.n_fft)
        return log_mel(self._torch.from_numpy(x), self.cfg)

    # -- CNN ------------------------------------------------------------------------------------------
    def _cnn_slice(self, feats: Any, t0: int, k0: int, k1: int) -> Any:
        """CNN outputs of frames ``[k0, k1)`` from feature frames starting at ``t0`` (a multiple of P)."""
        out = self.model.frontend(feats[None])[0]
        s = t0 // self.geo.pool
        return out[k0 - s : k1 - s]

    def _extend_cnn(self, k1: int, t_end: int) -> None:
        """Cache the CNN outputs of frames up to ``k1`` using feature frames up to ``t_end``."""
        g = self.geo
        torch = self._torch
        k0 = self._cnn0 + self._cnn.shape[0]
        mel_end = self._mel0 + self._mel.shape[0]
        if t_end > mel_end:
            f = self._features(mel_end, t_end)
            self._mel = torch.cat([self._mel, f]) if self._mel.shape[0] else f
        t0 = max(0, g.pool * k0 - g.ctx_before)
        new = self._cnn_slice(self._mel[t0 - self._mel0 : t_end - self._mel0], t0, k0, k1)
        self._cnn = torch.cat([self._cnn, new]) if self._cnn.shape[0] else new

    # -- one window -----------------------------------------------------------------------------------
    def _window(self, m: int, final_frames: int | None) -> SedStep:
        """Run window ``m`` (truncated at ``final_frames`` at the end of the segment) and finalise what it makes final."""
        g = self.geo
        torch = self._torch
        a = g.window_start(m)
        e = a + g.win_frames
        if final_frames is None:
            t_end = g.pool * e + g.ctx_after
        else:
            e = min(e, final_frames)
            t_end = g.n_feature_frames(self.n)
        with torch.inference_mode():
            if self.cache:
                if self._cnn0 + self._cnn.shape[0] < e:
                    self._extend_cnn(e, t_end)
                feats = self._cnn[a - self._cnn0 : e - self._cnn0]
            else:
                t0 = max(0, g.pool * a - g.ctx_before)
                feats = self._cnn_slice(self._features(t0, t_end), t0, a, e)
            h = self.model.F.backend(feats[None])
            o = self.model.ft(h)
            p = o["frame"][0].numpy()
            if self._gated:
                clip = o["clip"][0].numpy()
                if final_frames is not None:  # the final partial windows share the first one's decision
                    if self._final_clip is None:
                        self._final_clip = clip
                    clip = self._final_clip
                p = p * (clip >= self.gate)
        self.windows_run += 1
        i0 = a - self._fin
        self._sum[i0 : i0 + (e - a)] += p
        self._cnt[i0 : i0 + (e - a)] += 1
        if final_frames is not None:
            return SedStep(self._fin, np.zeros((0, self.n_classes), np.float32), self._sm, np.zeros((0, self.n_classes), np.float32), [])
        nxt = g.window_start(m + 1)
        step = self._finalise(nxt, None, final=False)
        # drop what no later window needs
        if self.cache:
            keep_cnn = nxt
            if keep_cnn > self._cnn0:
                self._cnn = self._cnn[keep_cnn - self._cnn0 :]
                self._cnn0 = keep_cnn
            keep_mel = max(0, g.pool * (self._cnn0 + self._cnn.shape[0]) - g.ctx_before)
            if keep_mel > self._mel0:
                self._mel = self._mel[keep_mel - self._mel0 :]
                self._mel0 = keep_mel
            self._trim_samples((self._mel0 + self._mel.shape[0]) * g.hop)
        else:
            self._trim_samples(max(0, g.pool * nxt - g.ctx_before) * g.hop)
        return step

    # -- final frames, median filter, hysteresis --------------------------------------------------------
    def _finalise(self, upto: int, K: int | None, final: bool) -> SedStep:
        n = upto - self._fin
        C = self.n_classes
        if n > 0:
            cnt = self._cnt[:n]
            assert cnt.min() >= 1, "a final frame no window covered"
            probs = (self._sum[:n] / cnt[:, None]).astype(np.float32)
            self._sum = np.concatenate([self._sum[n:], np.zeros((n, C), np.float64)])
            self._cnt = np.concatenate([self._cnt[n:], np.zeros(n, np.int64)])
        else:
            probs = np.zeros((0, C), np.float32)
        first = self._fin
        self._fin = upto
        self._hist = np.concatenate([self._hist, probs]) if self._hist.shape[0] else probs
        sm_first = self._sm
        sm_end = self._fin if final else max(self._sm, self._fin - self._hmax)
        smoothed = self._smooth(self._sm, sm_end, final)
        self._sm = sm_end
        dets = self._hysteresis(sm_first, smoothed, final)
        keep = max(0, self._sm - self._hmax)
        if keep > self._hist0:
            self._hist = self._hist[keep - self._hist0 :]
            self._hist0 = keep
        return SedStep(first, probs, sm_first, smoothed, dets)

    def _smooth(self, lo: int, hi: int, final: bool) -> np.ndarray:
        C = self.n_classes
        out = np.empty((max(hi - lo, 0), C), np.float32)
        if hi <= lo:
            return out
        from numpy.lib.stride_tricks import sliding_window_view

        for c in range(C):
            h = self.geo.median_half[c]
            if h == 0:
                out[:, c] = self._hist[lo - self._hist0 : hi - self._hist0, c]
                continue
            a = max(0, lo - h)
            b = min(self._fin, hi + h)
            seg = self._hist[a - self._hist0 : b - self._hist0, c]
            padl = h - (lo - a)
            padr = h - (b - hi)
            if padr and not final:
                raise AssertionError("median filter ran past the final frames")
            if padl or padr:
                seg = np.pad(seg, (padl, padr), mode="edge")
            out[:, c] = np.median(sliding_window_view(seg, 2 * h + 1), axis=-1)
        return out

    def _detection(self, c: int, start: int, end: int, s: float, peak: float, open_end: bool) -> SedDetection:
        g = self.geo
        on = g.frame_offset + g.frame_hop * start
        off = g.frame_offset + g.frame_hop * end
        return SedDetection(self.classes[c], c, on, off, on / g.rate, off / g.rate, s / (end - start), peak, open_start=start == 0,
                            open_end=open_end)  # fmt: skip

    def _hysteresis(self, first: int, sm: np.ndarray, final: bool) -> list[SedDetection]:
        from streamkit.models.sed_post import hysteresis

        dets: list[SedDetection] = []
        n = sm.shape[0]
        act = np.zeros((0, self.n_classes), dtype=bool)
        if n:
            act = hysteresis(sm, self.high, self.low, initial=self._state)
            self._state = act[-1].copy()
        for c in range(self.n_classes):
            start, s, pk = self._run_start[c], self._run_sum[c], self._run_peak[c]
            for i, (on, v) in enumerate(zip(act[:, c].tolist(), sm[:, c].astype(np.float64).tolist())):
                if on:
                    if start < 0:
                        start, s, pk = first + i, 0.0, v
                    s += v
                    pk = v if v > pk else pk
                elif start >= 0:
                    dets.append(self._detection(c, start, first + i, s, pk, open_end=False))
                    start = -1
            if final and start >= 0:
                dets.append(self._detection(c, start, first + n, s, pk, open_end=True))
                start = -1
            self._run_start[c], self._run_sum[c], self._run_peak[c] = start, s, pk
        dets.sort(key=lambda d: (d.offset, d.onset, d.class_index))
        return dets


# ------------------------------------------------------------------------------------------------
# offline
# ------------------------------------------------------------------------------------------------


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


def load_meta(model: Any) -> tuple[SedModel, dict[str, Any]]:
    """A model and its weight file's meta, from a path or from a :class:`SedModel` (then with an empty meta)."""
    from streamkit.models.sed_crnn import SedModel, load_model

    if isinstance(model, SedModel):
        return model.eval(), {}
    return load_model(model)


POSTS = ("auto", "fixed", "tuned")


def _check_post(post: Any) -> str:
    if post not in POSTS:
        raise ConfigError(f"post must be one of {', '.join(POSTS)}, got {post!r}")
    return str(post)


def resolve_post(
    post: str, meta: Mapping[str, Any], classes: Sequence[str], median_s: PerClass | None, threshold_high: PerClass | None, where: str
) -> tuple[PerClass, PerClass, str]:
    """The median windows and on-thresholds to run with: ``(median_s, threshold_high, "fixed" | "tuned")``.

    ``fixed``: ``median_s`` and ``threshold_high`` (None: 0.45 s and 0.5). ``tuned``: per class
    from the weight file's ``meta["post_tuned"]`` (``streamkit train sed-post``); ConfigError when it
    has none, a malformed one, or when ``median_s`` / ``threshold_high`` are given too. ``auto``:
    ``tuned`` when the file has a setting and neither value is given, else ``fixed``.
    """
    from streamkit.models.sed_post import META_KEY, post_from_meta

    post = _check_post(post)
    given = median_s is not None or threshold_high is not None
    if post == "auto":
        post = "tuned" if not given and META_KEY in meta else "fixed"
    if post == "fixed":
        return (DEFAULT_MEDIAN_S if median_s is None else median_s), (DEFAULT_HIGH if threshold_high is None else threshold_high), "fixed"
    if given:
        raise ConfigError("post='tuned' takes the median windows and thresholds from the weight file; leave median_s / threshold_high unset")
    try:
        med, high = post_from_meta(meta, classes, where=where)
    except ValueError as exc:
        raise ConfigError(f"post='tuned': {exc}") from None
    return med, high, "tuned"


def resolve_gate(post_used: str, meta: Mapping[str, Any], classes: Sequence[str], clip_gate: PerClass | None, where: str) -> PerClass:
    """The clip gates to run with: ``clip_gate`` when given; else the weight file's tuned gates when
    the post-processing in use is ``tuned`` and the tuning has them (``streamkit train sed-post``);
    else 0 (none)."""
    from streamkit.models.sed_post import clip_gate_from_meta

    if clip_gate is not None:
        return _per_class_check("clip_gate", clip_gate, 0.0, 1.0)
    if post_used != "tuned":
        return 0.0
    try:
        gates = clip_gate_from_meta(meta, classes, where=where)
    except ValueError as exc:
        raise ConfigError(f"post='tuned': {exc}") from None
    return 0.0 if gates is None else gates


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
            on-thresholds come from (:func:`resolve_post`; ``median_s``/``threshold_high`` None
            mean 0.45 s / 0.5 when fixed).
        clip_gate: as :class:`SedEngine`; None: the tuned setting's gates when ``post`` resolves to
            ``tuned`` (none when the file has none), else 0 (:func:`resolve_gate`).

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
# the block
# ------------------------------------------------------------------------------------------------


def default_weights() -> Path:
    """The shipped SED weights (``streamkit.models.SED_WEIGHTS``).

    Raises:
        ConfigError: none shipped (yet), or the file is missing.
    """
    import streamkit.models as sm

    path = getattr(sm, "SED_WEIGHTS", None)
    if path is None:
        raise ConfigError("no shipped SED weights yet (streamkit.models.SED_WEIGHTS is not defined); pass a weight file (weights=... / --weights PATH), "
                          "e.g. one written by `streamkit train sed`")  # fmt: skip
    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"the shipped SED weights {p} are missing; pass a weight file (weights=... / --weights PATH)")
    return p


def _default_geometry(window_s: float, hop_s: float, median_s: Any) -> SedGeometry:
    med = median_s
    if isinstance(med, Mapping):
        vals = list(med.values()) + [DEFAULT_MEDIAN_S]
    elif isinstance(med, list):
        vals = med
    else:
        vals = [med]
    return SedGeometry.build(rate=RATE, n_fft=N_FFT, hop=HOP, pool=TIME_POOL, rf=(RF_BEFORE, RF_AFTER), window_s=window_s, hop_s=hop_s,
                             median_s=np.array([max(vals)]))  # fmt: skip


@register("models.sed")
class SedBlock(Sink):
    """Sliding-window sound event detection with the SED CRNN; see the module docstring.

    Ports:
        in: float32 mono audio at the model's rate (16000 Hz; anything else: ConfigError, put
            ``dsp.resample`` in front). A sink: it ends a branch (fan out the audio to it).
    Parameters:
        weights: SED CRNN weight file (:func:`streamkit.models.sed_crnn.save_model`); default the
            shipped ``streamkit.models.SED_WEIGHTS`` (ConfigError when there is none).
        window_s (10.0), hop_s (1.0): window W and hop H in seconds; H >= one frame (64 ms) and at
            most W (W = H: windows side by side, no overlap).
        median_s (None = 0.45): median filter length per class in seconds (a number, a list over
            the model's classes or a ``{class: seconds}`` mapping; missing classes get 0.45);
            ``2 round((s / 0.064 - 1) / 2) + 1`` frames.
        threshold_high (None = 0.5), threshold_low (None = threshold_high): hysteresis thresholds
            per class (same forms; ``low <= high``): on at ``p > high``, on while ``p > low``.
        clip_gate (None): per class in [0, 1] (same forms): no frames of a class in a window whose
            clip-level probability of it is below the gate; None: the tuned setting's gates when
            the tuned post-processing runs and has them, else none (:func:`resolve_gate`).
        post ("auto"): where the median windows and on-thresholds come from
            (:func:`resolve_post`). ``tuned``: per class from the weight file, fitted on validation
            clips (``meta["post_tuned"]``, ``streamkit train sed-post``; the shipped weights have
            one); ``fixed``: ``median_s`` and ``threshold_high``; ``auto``: ``tuned`` when the file
            has a setting and neither ``median_s`` nor ``threshold_high`` is given. Which one ran
            is ``post_used`` after ``start``, the gates it ran with ``clip_gates_used``.
        cache (True): CNN output cached per frame (False: full recompute per window; same results
            to float rounding, about 3x slower; for benchmarks).
        emit_frames (False): also emit ``sed.frames`` with the final frame probabilities.
        threads (1): ``torch.set_num_threads`` (process-wide; set in ``start`` and re-asserted).
    Events:
        ``sed.detection`` (:class:`SedDetection`), span = ``[onset, offset)`` in input items, once
        the event has ended (or at a gap / the end of the stream). ``sed.frames``
        (:class:`SedFrames`) per window run when ``emit_frames``.
    Tags:
        Reads ``sk:gap``; emits none.
    Latency:
        Worst case ``F (Lf + h) + hop (A - 1) + n_fft - off`` items (10.68 s for W = 10 s and a
        0.45 s median: W, the CNN's 384 ms look-ahead and half the longest median filter; the
        shipped weights' tuned setting, longest window 3 s, adds 1.28 s). The weights are loaded
        when the graph is built (``negotiate``), so ``algorithmic_latency`` is exact from then on;
        before, it assumes the default model and the 0.45 s median (or the ``median_s`` given).
    Gaps:
        A ``sk:gap`` ends the segment: the final partial windows run on the audio before it, all
        its frames are finalised, open events are closed (``open_end``, ``gap_after`` = the gap)
        and emitted; the state is reset and a new segment starts at the gap's offset (its events
        that start on its first frame carry ``gap_before``). No window spans a gap.
    State:
        Samples, features and CNN outputs still needed, the per-frame sums, the median filter's
        history and the hysteresis runs; ``reset()`` drops them without events (error recovery).
    Bad input:
        NaN/inf samples are replaced by 0 (counted in ``nonfinite_samples``).
    Exactness:
        Any chunking gives bit-identical ``sed.frames`` and ``sed.detection`` events, equal to
        :func:`sed_file` on the same samples.
    """

    emits: ClassVar[tuple[str, ...]] = (SED_DETECTION, SED_FRAMES)
    on_gap: ClassVar[GapPolicy] = GapPolicy.CONTINUE  # handled in consume(): a gap ends the segment

    def __init__(
        self,
        *,
        weights: str | None = None,
        window_s: float = DEFAULT_WINDOW_S,
        hop_s: float = DEFAULT_HOP_S,
        median_s: PerClass | None = None,
        threshold_high: PerClass | None = None,
        threshold_low: PerClass | None = DEFAULT_LOW,
        post: str = "auto",
        cache: bool = True,
        emit_frames: bool = False,
        threads: int = 1,
        clip_gate: PerClass | None = None,
        name: str | None = None,
    ) -> None:
        super().__init__(name=name)
        if weights is not None and (not isinstance(weights, (str, Path)) or not str(weights)):
            raise ConfigError(f"weights must be a weight file path or None, got {weights!r}")
        self.weights = None if weights is None else str(weights)
        self.window_s = number("window_s", window_s, 0.0)
        self.hop_s = number("hop_s", hop_s, 0.0)
        self.median_s = None if median_s is None else _per_class_check("median_s", median_s, 0.0, 60.0)
        self.threshold_high = None if threshold_high is None else _per_class_check("threshold_high", threshold_high, 0.0, 1.0)
        self.threshold_low = None if threshold_low is None else _per_class_check("threshold_low", threshold_low, 0.0, 1.0)
        self.clip_gate = None if clip_gate is None else _per_class_check("clip_gate", clip_gate, 0.0, 1.0)
        self.post = _check_post(post)
        if self.post == "tuned" and (median_s is not None or threshold_high is not None):
            raise ConfigError("post='tuned' takes the median windows and thresholds from the weight file; leave median_s / threshold_high unset")
        self.post_used: str | None = None
        self.cache = bool(cache)
        self.emit_frames = bool(emit_frames)
        self.threads = integer("threads", threads, 1, 256)
        high = DEFAULT_HIGH if self.threshold_high is None else self.threshold_high
        if isinstance(self.threshold_low, float) and isinstance(high, float) and self.threshold_low > high:
            raise ConfigError(f"threshold_low {self.threshold_low:g} must be <= threshold_high {high:g}")
        self._geo = _default_geometry(self.window_s, self.hop_s, DEFAULT_MEDIAN_S if self.median_s is None else self.median_s)  # checks W / H early
        self.nonfinite_samples = 0
        self._eng: SedEngine | None = None
        self._path: Path | None = None
        self._ctx: Context | None = None

    # -- description -------------------------------------------------------------------------------
    def algorithmic_latency(self) -> int:
        return self._geo.latency()

    @property
    def clip_gates_used(self) -> dict[str, float] | None:
        """The clip gate of each class the block runs with (0: none); None before the graph is built."""
        if self._eng is None:
            return None
        return {c: round(float(v), 6) for c, v in zip(self._eng.classes, self._eng.gate)}  # float32 -> as given

    # -- lifecycle ---------------------------------------------------------------------------------
    def negotiate(self, inputs: Mapping[str, StreamSpec]) -> dict[str, StreamSpec]:
        require_audio(self.name, inputs["in"], RATE)
        self._prepare()  # fails at build time when there is nothing (valid) to load; the declared latency becomes exact
        return {}

    def _prepare(self) -> None:
        """Load the weights, resolve the post-processing and build the engine (its geometry is the block's latency)."""
        from streamkit.models.sed_crnn import load_model

        path = default_weights() if self.weights is None else Path(self.weights)
        model, meta = load_model(path)
        where = f"{self.name}: {path.name}"
        med, high, self.post_used = resolve_post(self.post, meta, model.cfg.classes, self.median_s, self.threshold_high, where)
        gate = resolve_gate(self.post_used, meta, model.cfg.classes, self.clip_gate, where)
        self._path = path
        self._eng = SedEngine(model, window_s=self.window_s, hop_s=self.hop_s, median_s=med, threshold_high=high,
                              threshold_low=self.threshold_low, cache=self.cache, clip_gate=gate)  # fmt: skip
        self._geo = self._eng.geo

    def start(self, ctx: Context) -> None:
        import torch

        self._ctx = ctx
        torch.set_num_threads(self.threads)
        if self._eng is None:
            self._prepare()
        assert self._eng is not None
        model, path = self._eng.model, self._path
        assert path is not None
        spec = ctx.input_spec("in")
        if model.cfg.rate != spec.rate:
            raise ConfigError(f"{self.name}: the model {path.name} runs at {model.cfg.rate} Hz, the input is {float(spec.rate):g} Hz; "
                              f"put dsp.resample (to {model.cfg.rate} Hz) in front")  # fmt: skip
        self._geo = self._eng.geo
        # warm-up: one full window on noise, then forget it
        noise = (np.random.default_rng(0).standard_normal(self._eng._need_samples(0)) * 0.01).astype(np.float32)
        self._eng.push(noise)
        self._eng.reset()
        self._eng.windows_run = 0
        self._origin: int | None = None  # absolute index of the segment's first item (set by the first item)
        self._gap_before: Gap | None = None

    def reset(self, cause: Gap | None = None) -> None:
        """Drop the segment without events (error recovery); the next item starts a new segment."""
        if self._eng is not None:
            self._eng.reset()
            self._origin = None
            self._gap_before = cause

    def flush(self, ctx: Context) -> np.ndarray | None:
        if self._eng is not None:
            self._emit(ctx, self._eng.finish(), None)
        return None

    def stop(self) -> None:
        self._ctx = None

    def apply_params(self, changes: Mapping[str, Any]) -> None:
        raise ConfigError(f"{self.name}: {sorted(changes)} cannot change while running; build a new graph")

    # -- data ----------------------------------------------------------------------------------------
    def consume(self, chunk: Chunk, ctx: Context) -> None:
        eng = self._eng
        assert eng is not None
        import torch

        if torch.get_num_threads() != self.threads:
            torch.set_num_threads(self.threads)
        x = chunk.samples[:, 0]
        if not np.isfinite(x).all():
            x = np.array(x, dtype=np.float32)
            bad = ~np.isfinite(x)
            if self.nonfinite_samples == 0:
                ctx.log.warning("%s: NaN/inf input samples replaced by 0", self.name)
            self.nonfinite_samples += int(np.count_nonzero(bad))
            x[bad] = 0.0
        start = pos = chunk.start
        if self._origin is None:
            self._origin = start
        for t in chunk.tags:
            if t.key != GAP:
                continue
            off = min(max(t.offset, pos), chunk.stop)
            if off > pos:
                self._emit(ctx, eng.push(x[pos - start : off - start]), None)
                pos = off
            gap = t.value if isinstance(t.value, Gap) else Gap()
            self._emit(ctx, eng.finish(), gap)
            self._origin = off
            self._gap_before = gap
        if chunk.stop > pos:
            self._emit(ctx, eng.push(x[pos - start :]), None)

    def _emit(self, ctx: Context, steps: list[SedStep], gap_after: Gap | None) -> None:
        o = self._origin or 0
        eng = self._eng
        assert eng is not None
        rate = eng.geo.rate
        for s in steps:
            if self.emit_frames and s.probs.shape[0]:
                g = eng.geo
                lo = o + g.frame_offset + g.frame_hop * s.first_frame
                payload = SedFrames(o, s.first_frame, g.frame_hop, g.frame_offset, eng.classes, tuple(tuple(float(v) for v in r) for r in s.probs))
                ctx.emit(SED_FRAMES, payload, span=(lo, lo + g.frame_hop * s.probs.shape[0]))
            for d in s.detections:
                on, off = o + d.onset, o + d.offset
                p = dataclasses.replace(d, onset=on, offset=off, onset_s=on / rate, offset_s=off / rate,
                                        gap_before=self._gap_before if d.open_start else None,
                                        gap_after=gap_after if d.open_end else None)  # fmt: skip
                ctx.emit(SED_DETECTION, p, span=(on, off))


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
