"""Block ``models.sed``: sliding-window sound event detection with the SED CRNN in a graph.

The block feeds its input to the engine (:class:`~streamkit.models.sed_engine.SedEngine`, whose
module describes the frame grid, the windows, the exact CNN cache, the post-processing and the
latency), one engine segment per stretch of audio between gaps, and emits what it makes final as
events: ``sed.detection`` (:class:`~streamkit.models.sed_engine.SedDetection`) once an event has
ended, and ``sed.frames`` (:class:`SedFrames`) with ``emit_frames``. The same engine without a
graph is :func:`streamkit.models.sed_offline.sed_file`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from streamkit.core.block import GapPolicy, Sink, require_audio
from streamkit.core.context import Context
from streamkit.core.errors import ConfigError
from streamkit.core.params import integer, number
from streamkit.core.registry import register
from streamkit.core.tags import GAP, Gap
from streamkit.core.types import Chunk, StreamSpec
from streamkit.models import sed_settings as settings
from streamkit.models.sed_engine import SedEngine, SedGeometry, SedStep
from streamkit.models.sed_settings import DEFAULT_HIGH, DEFAULT_HOP_S, DEFAULT_LOW, DEFAULT_MEDIAN_S, DEFAULT_WINDOW_S, PerClass

__all__ = ["SED_DETECTION", "SED_FRAMES", "SedBlock", "SedFrames"]

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
    """Sliding-window sound event detection with the SED CRNN; see :mod:`streamkit.models.sed_engine`.

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
            the tuned post-processing runs and has them, else none (:func:`~streamkit.models.sed_settings.resolve_gate`).
        post ("auto"): where the median windows and on-thresholds come from
            (:func:`~streamkit.models.sed_settings.resolve_post`). ``tuned``: per class from the weight file, fitted on validation
            clips (``meta["post_tuned"]``, ``streamkit train sed-post``; the shipped weights have
            one); ``fixed``: ``median_s`` and ``threshold_high``; ``auto``: ``tuned`` when the file
            has a setting and neither ``median_s`` nor ``threshold_high`` is given. Which one ran
            is ``post_used`` after ``start``, the gates it ran with ``clip_gates_used``.
        cache (True): CNN output cached per frame (False: full recompute per window; same results
            to float rounding, about 3x slower; for benchmarks).
        emit_frames (False): also emit ``sed.frames`` with the final frame probabilities.
        threads (1): ``torch.set_num_threads`` (process-wide; set in ``start`` and re-asserted).
    Events:
        ``sed.detection`` (:class:`~streamkit.models.sed_engine.SedDetection`), span = ``[onset, offset)`` in input items, once
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
        :func:`~streamkit.models.sed_offline.sed_file` on the same samples.
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
        self.median_s = None if median_s is None else settings.check_per_class("median_s", median_s, 0.0, 60.0)
        self.threshold_high = None if threshold_high is None else settings.check_per_class("threshold_high", threshold_high, 0.0, 1.0)
        self.threshold_low = None if threshold_low is None else settings.check_per_class("threshold_low", threshold_low, 0.0, 1.0)
        self.clip_gate = None if clip_gate is None else settings.check_per_class("clip_gate", clip_gate, 0.0, 1.0)
        self.post = settings.check_post(post)
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

        path = settings.default_weights() if self.weights is None else Path(self.weights)
        model, meta = load_model(path)
        where = f"{self.name}: {path.name}"
        med, high, self.post_used = settings.resolve_post(self.post, meta, model.cfg.classes, self.median_s, self.threshold_high, where)
        gate = settings.resolve_gate(self.post_used, meta, model.cfg.classes, self.clip_gate, where)
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
