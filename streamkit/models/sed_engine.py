"""The sliding-window sound event detector (no graph): one contiguous segment of audio in, final
frame probabilities and ended events out. The block ``models.sed`` (:mod:`streamkit.models.sed_stream`)
and the functions without a graph (:mod:`streamkit.models.sed_offline`) run it.

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
events, and :func:`~streamkit.models.sed_offline.sed_file` (the same engine fed the whole signal)
gives exactly the streaming block's output.

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

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from streamkit.core.errors import ConfigError
from streamkit.core.params import number
from streamkit.core.tags import Gap
from streamkit.models.sed_settings import (
    DEFAULT_HIGH,
    DEFAULT_HOP_S,
    DEFAULT_LOW,
    DEFAULT_MEDIAN_S,
    DEFAULT_WINDOW_S,
    PerClass,
    check_per_class,
    per_class_values,
)

if TYPE_CHECKING:
    from streamkit.models.sed_crnn import SedConfig, SedModel

__all__ = ["SedDetection", "SedEngine", "SedGeometry", "SedStep"]


# ------------------------------------------------------------------------------------------------
# payload of a detection
# ------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SedDetection:
    """Payload of ``sed.detection`` (and an item of
    :attr:`~streamkit.models.sed_offline.SedResult.detections`).

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
        med = per_class_values("median_s", check_per_class("median_s", median_s, 0.0, 60.0), self.classes, DEFAULT_MEDIAN_S)
        self.high = per_class_values("threshold_high", check_per_class("threshold_high", threshold_high, 0.0, 1.0), self.classes, DEFAULT_HIGH)
        self.low = (
            self.high.copy()
            if threshold_low is None
            else per_class_values("threshold_low", check_per_class("threshold_low", threshold_low, 0.0, 1.0), self.classes, DEFAULT_HIGH)
        )
        if np.any(self.low > self.high):
            raise ConfigError(f"threshold_low must be <= threshold_high per class, got {self.low.tolist()} > {self.high.tolist()}")
        self.gate = per_class_values("clip_gate", check_per_class("clip_gate", clip_gate, 0.0, 1.0), self.classes, 0.0).astype(np.float32)
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
