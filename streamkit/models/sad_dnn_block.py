"""Block ``models.sad_dnn``: the CNN-GRU SAD (:mod:`streamkit.models.sad_dnn`) on a stream.

Same output, tags and events as ``dsp.stat_sad`` (detector ``"dnn"``), so either drives the
monitor and downstream ASR: a score per 10 ms frame, the centred 25-frame ``>= 12`` vote of
the authors' released code on ``score > threshold``, ``sk:speech`` boundary tags and ``vad.segment`` events.
"""

from __future__ import annotations

from collections.abc import Mapping
from fractions import Fraction
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from streamkit.core.block import GapPolicy, TagPolicy, WindowBlock
from streamkit.core.context import Context
from streamkit.core.errors import ConfigError
from streamkit.core.events import ActivitySegment
from streamkit.core.params import integer, number
from streamkit.core.registry import register
from streamkit.core.tags import SPEECH, Gap, SpeechBoundary
from streamkit.core.types import StreamSpec

if TYPE_CHECKING:
    from streamkit.models.sad_dnn import LoadedSadDnn, SadDnnStream

# the model module (torch) is imported in start(), so that loading the block registry stays cheap;
# these equal streamkit.models.sad_dnn.RATE / WIN / HOP / BACKENDS (checked in tests/test_sad_dnn.py)
RATE = 8000
WIN = 200
HOP = 80
BACKENDS = ("numba", "eager", "script")

VAD_SEGMENT = "vad.segment"
DETECTOR = "dnn"


@register("models.sad_dnn")
class SadDnnBlock(WindowBlock):
    """CNN-GRU speech activity detector (HF paper §3.2): a speech score per 10 ms frame, segments as events and tags.

    Ports:
        in: float32 mono audio at 8000 Hz (anything else: ConfigError; put ``dsp.resample`` in front).
        out: float32 score in [0.001, 0.999], 1 channel, at 100 Hz; item ``j`` is the score of frame
            ``j`` = input items ``[origin + 80 j, origin + 80 j + 200)`` (origin: the start of the
            stream or of the segment after a reset). Equal to
            :func:`streamkit.models.sad_dnn.dnn_raw_scores` of the same samples (within float
            rounding, see below).
    Parameters:
        weights: weight file (default: the shipped ``streamkit/models/weights/sad_dnn.pt``).
        threshold: decision threshold on the score (default: the weight file's, the dev-EER
            threshold found in training).
        vote_window (25, odd) / vote_min (12): the centred ">= 12 of 25" vote of the released code, the
            first/last decision repeated at the edges.
        threads: torch threads (``torch.set_num_threads``; default 1; process-wide, set in
            ``start`` and re-asserted when something else changed it). The numba backend runs on
            the calling thread whatever this is.
        backend: how the folded CNN runs: ``"numba"`` (default: the fastest in 100 ms chunks and
            bit-exact for any chunking), torch ``"eager"`` or ``"script"`` (TorchScript); see
            ``benchmarks/sad_dnn_speed.py``. The GRU/FF head is a numba kernel in all three.
    Tags and events: as ``dsp.stat_sad`` with detector ``"dnn"``: ``sk:speech``
        (:class:`~streamkit.core.tags.SpeechBoundary`) ``start=True`` on the first speech frame
        (score = that frame's), ``start=False`` on the frame after the last one (score = mean
        segment score); ``vad.segment`` (:class:`~streamkit.core.events.ActivitySegment`) when a
        segment ends, span = the union of its frames' windows ``[origin + 80 a, origin + 80 (b-1) + 200)``.
    Latency:
        ``100 + (6 + 12) * 80 = 1540`` input items (192.5 ms) after a frame's centre: half a
        window, one frame per 3x3 conv layer (6), the vote's 12 frames. The runtime hands the block
        windows of ``200 + 18 * 80`` items; the last 18 frames are output by ``flush``.
    State:
        The causal normaliser, the last two input frames of each conv layer, the GRU state, the
        pending frames' scores and decisions, the open segment. ``reset()`` (``on_gap`` RESET)
        closes an open segment (event; end tag on the next item), drops the pending frames and
        clears the rest, as ``dsp.stat_sad``.
    Bad input:
        NaN/inf samples are replaced by 0 (counted in ``nonfinite_samples``) before anything else.
    Exactness:
        With the numba backend any chunking gives bit-identical scores, tags and events. With the
        torch backends decisions, tags and events are the same and scores agree to ~1e-7 (torch's
        convolution may sum in another order for another number of frames).
    """

    emits: ClassVar[tuple[str, ...]] = (VAD_SEGMENT,)
    on_gap: ClassVar[GapPolicy] = GapPolicy.RESET
    tag_policy: ClassVar[TagPolicy] = TagPolicy.CUSTOM

    def __init__(
        self,
        *,
        weights: str | None = None,
        threshold: float | None = None,
        vote_window: int = 25,
        vote_min: int = 12,
        threads: int = 1,
        backend: str = "numba",
        name: str | None = None,
    ) -> None:
        super().__init__(name=name)
        self.weights = None if weights is None else str(weights)
        self.threshold = None if threshold is None else number("threshold", threshold, 0.0, 1.0)
        self.vote_window = integer("vote_window", vote_window, 1, 1001)
        if self.vote_window % 2 == 0:
            raise ConfigError(f"vote_window must be odd (a centred vote), got {self.vote_window}")
        self.vote_min = integer("vote_min", vote_min, 1, self.vote_window)
        self.threads = integer("threads", threads, 1, 256)
        if backend not in BACKENDS:
            raise ConfigError(f"backend must be one of {BACKENDS}, got {backend!r}")
        self.backend = backend
        self.look = self.vote_window // 2
        self.conv_look = 6  # one frame per 3x3 conv layer (fixed by the architecture)
        self.window = WIN + (self.conv_look + self.look) * HOP
        self.hop = HOP
        self.pad_start = 0
        self.pad_end = 0
        self.flush_partial = False
        self.nonfinite_samples = 0
        self._ctx: Context | None = None
        self._eng: SadDnnStream | None = None
        self._loaded: LoadedSadDnn | None = None

    # -- description ---------------------------------------------------------------------------
    def algorithmic_latency(self) -> int:
        return WIN - WIN // 2 + (self.conv_look + self.look) * HOP

    @property
    def delay(self) -> Fraction:
        return Fraction(-WIN, 2)

    # -- lifecycle -----------------------------------------------------------------------------
    def negotiate(self, inputs: Mapping[str, StreamSpec]) -> dict[str, StreamSpec]:
        spec = inputs["in"]
        if spec.rate != RATE:
            raise ConfigError(f"{self.name}: needs {RATE} Hz input, got {float(spec.rate):g} Hz; put dsp.resample (to 8000 Hz) in front")
        if spec.channels != 1:
            raise ConfigError(f"{self.name}: needs mono input, got {spec.channels} channels")
        if spec.dtype != np.float32:
            raise ConfigError(f"{self.name}: needs float32 audio, got {spec.dtype}")
        return {"out": StreamSpec(Fraction(RATE, HOP), 1, np.dtype(np.float32))}

    def _load(self) -> LoadedSadDnn:
        from streamkit.models.sad_dnn import _default_loaded, load_weights

        if self.weights is None:
            return _default_loaded(None)
        return load_weights(Path(self.weights))

    def start(self, ctx: Context) -> None:
        import torch

        self._ctx = ctx
        torch.set_num_threads(self.threads)
        self._loaded = self._load()
        if self._loaded.cfg.lookahead_frames != self.conv_look:
            raise ConfigError(
                f"{self.name}: weight file has {self._loaded.cfg.lookahead_frames} conv frames of look-ahead, expected {self.conv_look}"
            )
        self._thr = self._loaded.threshold if self.threshold is None else self.threshold
        from streamkit.models.sad_dnn import SadDnnStream

        self._eng = SadDnnStream(self._loaded, backend=self.backend)
        self._out_pos = 0
        self._clear()
        # warm-up: numba kernels (normaliser, GRU head) and torch's first conv calls, on scratch state
        scratch = self._eng
        noise = np.random.default_rng(0).standard_normal(RATE // 2) * 0.01
        scratch.push(noise)
        scratch.push(noise[:800])
        scratch.flush()
        self._eng.reset()

    def work_windows(self, frames: np.ndarray, start: int, ctx: Context) -> np.ndarray:
        eng = self._eng
        assert eng is not None
        if self._origin is None:
            self._origin = start
            new = np.concatenate([frames[0, :, 0], frames[1:, -HOP:, 0].reshape(-1)])
        else:
            new = frames[:, -HOP:, 0].reshape(-1)
        y = np.array(new, dtype=np.float64)
        if not np.isfinite(y).all():
            bad = ~np.isfinite(y)
            if self.nonfinite_samples == 0:
                ctx.log.warning("%s: NaN/inf input samples replaced by 0", self.name)
            self.nonfinite_samples += int(np.count_nonzero(bad))
            y[bad] = 0.0
        self._threads_check()
        scores = eng.push(y)
        out = self._decide(ctx, scores, final=False)
        assert out.shape[0] == frames.shape[0], (out.shape, frames.shape)
        return out

    def _threads_check(self) -> None:
        if self.backend == "numba":  # no torch on the data path
            return
        import torch

        if torch.get_num_threads() != self.threads:
            torch.set_num_threads(self.threads)

    def reset(self, cause: Gap | None = None) -> None:
        if self._ctx is None or self._eng is None:
            return
        if self._origin is not None:
            self._decide(self._ctx, np.zeros(0), final=True, emit_items=False)
        self._eng.reset()
        self._clear()

    def flush(self, ctx: Context) -> np.ndarray | None:
        if self._origin is None or self._eng is None:
            return None
        self._threads_check()
        out1 = self._decide(ctx, self._eng.flush(), final=False)
        out = np.concatenate([out1, self._decide(ctx, np.zeros(0), final=True)])
        self._clear()
        return out if out.shape[0] else None

    def stop(self) -> None:
        self._ctx = None
        self._eng = None

    def apply_params(self, changes: Mapping[str, Any]) -> None:
        """Only the threshold may change while running."""
        bad = set(changes) - {"threshold"}
        if bad:
            raise ConfigError(f"{self.name}: {sorted(bad)} cannot change while running; build a new graph")
        self.threshold = number("threshold", changes["threshold"], 0.0, 1.0)
        self._thr = self.threshold

    # -- decisions (the logic of dsp.stat_sad without hysteresis) -------------------------------
    def _clear(self) -> None:
        self._origin: int | None = None
        self._nout = 0
        self._dh = np.zeros(0)
        self._sc = np.zeros(0)
        self._open = False
        self._start_tagged = False
        self._seg_start = 0
        self._seg_sum = 0.0

    def _decide(self, ctx: Context, scores: np.ndarray, final: bool, emit_items: bool = True) -> np.ndarray:
        """Decide the frames whose look-ahead is complete (all pending ones when ``final``); tags/events."""
        D = self.look
        if scores.shape[0]:
            dec = (scores > self._thr).astype(np.float64)
            if self._nout == 0 and self._dh.shape[0] == 0:
                dec = np.concatenate([np.full(D, dec[0]), dec])  # left edge
            self._dh = np.concatenate([self._dh, dec])
            self._sc = np.concatenate([self._sc, scores.astype(np.float64)])
        dh, sc = self._dh, self._sc
        if final:
            dh = dh[:0] if sc.shape[0] == 0 else np.concatenate([dh, np.full(D, dh[-1])])  # right edge
            n = sc.shape[0]
        else:
            n = max(dh.shape[0] - 2 * D, 0)
        cs = np.concatenate([[0.0], np.cumsum(dh)])
        speech = (cs[2 * D + 1 : 2 * D + 1 + n] - cs[:n]) >= self.vote_min
        self._transitions(ctx, speech, sc[:n], emit_items)
        if final and self._open:
            self._close(ctx, self._nout + n, at=self._out_pos + (n if emit_items else 0))
        out = sc[:n].astype(np.float32).reshape(n, 1)
        self._dh = dh[n:] if not final else np.zeros(0)
        self._sc = sc[n:] if not final else np.zeros(0)
        self._nout += n
        if emit_items:
            self._out_pos += n
        return out

    def _transitions(self, ctx: Context, speech: np.ndarray, sc: np.ndarray, tag: bool) -> None:
        n = speech.shape[0]
        if n == 0:
            return
        prev = np.concatenate([[self._open], speech[:-1]])
        edges = np.flatnonzero(speech != prev)
        last = 0
        for i in edges:
            i = int(i)
            if self._open:
                self._seg_sum += float(np.sum(sc[last:i], dtype=np.float64))
                self._close(ctx, self._nout + i, at=self._out_pos + (i if tag else 0))
            else:
                self._open = True
                self._seg_start = self._nout + i
                self._seg_sum = 0.0
                self._start_tagged = tag
                if tag:
                    ctx.add_tag(self._out_pos + i, SPEECH, SpeechBoundary(True, DETECTOR, float(sc[i])))
            last = i
        if self._open:
            self._seg_sum += float(np.sum(sc[last:n], dtype=np.float64))

    def _close(self, ctx: Context, end_frame: int, at: int) -> None:
        a = self._seg_start
        score = self._seg_sum / max(end_frame - a, 1)
        origin = self._origin or 0
        lo, hi = origin + a * HOP, origin + (end_frame - 1) * HOP + WIN
        if self._start_tagged:
            ctx.add_tag(at, SPEECH, SpeechBoundary(False, DETECTOR, score))
        ctx.emit(VAD_SEGMENT, ActivitySegment(DETECTOR, score, lo / RATE, hi / RATE), span=(lo, hi))
        self._open = False
        self._seg_sum = 0.0
