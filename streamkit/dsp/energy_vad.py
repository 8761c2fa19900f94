"""Energy voice-activity detector: a classic baseline (frame energy over an adaptive noise floor).

Per frame of ``frame_ms`` (20 ms) of input audio, over all channels::

    e_db[j]   = 10 * log10(mean(x[frame j]**2))                       (dBFS)
    floor[j]  = min(e_db[j - W + 1 .. j])      W = noise_window_s / frame_ms   (minimum tracking)
    snr[j]    = e_db[j] - floor[j]

A frame counts as speech when ``e_db >= min_level_dbfs`` and ``snr > start_db`` while quiet, or
``snr > stop_db`` while speaking (hysteresis, ``stop_db <= start_db``). A pipecat-style state
machine (:class:`VadStateMachine`: QUIET -> STARTING -> SPEAKING -> STOPPING -> QUIET) turns that
into segments: speech is confirmed after ``min_speech_ms`` of consecutive speech frames, and ends
after ``hangover_ms`` of consecutive non-speech frames. Segment bounds are frame-exact: the first
speech frame's start, and the end of the last speech frame before the hangover.

Use it as the demo's detector until the statistical SAD lands; it works on stationary noise
(receiver hiss) and is fooled by anything loud that is not speech.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, ClassVar

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from streamkit.core.block import GapPolicy, SyncBlock
from streamkit.core.context import Context
from streamkit.core.errors import ConfigError
from streamkit.core.events import ActivitySegment
from streamkit.core.registry import register
from streamkit.core.tags import SPEECH, Gap, SpeechBoundary
from streamkit.core.types import StreamSpec

VAD_SEGMENT = "vad.segment"
DETECTOR = "energy"

#: power of digital silence (-200 dBFS) instead of -inf dB
_SILENCE_POWER = 1e-20


class VadState(enum.IntEnum):
    """States of :class:`VadStateMachine` (pipecat's ``VADState``)."""

    QUIET = 0
    STARTING = 1
    SPEAKING = 2
    STOPPING = 3


@dataclass(frozen=True, slots=True)
class VadDecision:
    """A boundary the state machine decided.

    Attributes:
        start: True when speech is confirmed, False when it is over.
        frame: the boundary in frames: the first speech frame (start), or one past the last
            speech frame (end).
        decided: the frame at whose end the decision was made.
        score: mean SNR (dB over the noise floor) of the segment's frames so far.
    """

    start: bool
    frame: int
    decided: int
    score: float


class VadStateMachine:
    """QUIET / STARTING / SPEAKING / STOPPING with start and stop hysteresis, one frame at a time.

    Pipecat's ``VADAnalyzer`` logic on SNR values: in QUIET and STARTING a frame is speech when
    ``snr > start_db``, in SPEAKING and STOPPING when ``snr > stop_db``. ``start_frames``
    consecutive speech frames confirm speech (QUIET -> STARTING -> SPEAKING; a non-speech frame
    while STARTING goes back to QUIET); ``stop_frames`` consecutive non-speech frames end it
    (SPEAKING -> STOPPING -> QUIET; a speech frame while STOPPING goes back to SPEAKING).

    Args:
        start_frames: frames of speech that confirm a start (>= 1).
        stop_frames: frames of non-speech that end a segment (>= 1).
        start_db, stop_db: SNR thresholds in dB, ``stop_db <= start_db``.
    """

    def __init__(self, *, start_frames: int, stop_frames: int, start_db: float, stop_db: float) -> None:
        if start_frames < 1 or stop_frames < 1:
            raise ConfigError(f"start_frames and stop_frames must be >= 1, got {start_frames}, {stop_frames}")
        if stop_db > start_db:
            raise ConfigError(f"stop_db ({stop_db}) must be <= start_db ({start_db})")
        self.start_frames = int(start_frames)
        self.stop_frames = int(stop_frames)
        self.start_db = float(start_db)
        self.stop_db = float(stop_db)
        self.reset()

    def reset(self) -> None:
        """Back to QUIET at frame 0."""
        self.state = VadState.QUIET
        self.frame = 0  # frames processed
        self._run_start = 0  # first frame of the current (candidate) segment
        self._last_speech = -1  # last speech frame of the current segment
        self._count = 0  # STARTING: speech frames; STOPPING: non-speech frames
        self._sum = 0.0  # SNR summed over the segment up to its last speech frame
        self._pending = 0.0  # SNR summed over the non-speech frames since

    @property
    def in_segment(self) -> bool:
        """True while a confirmed segment is open (SPEAKING or STOPPING)."""
        return self.state in (VadState.SPEAKING, VadState.STOPPING)

    def step(self, snr_db: float, gate: bool = True) -> VadDecision | None:
        """Advance one frame.

        Args:
            snr_db: the frame's energy over the noise floor in dB.
            gate: False forces the frame to count as non-speech (e.g. absolute level too low).

        Returns:
            The decision made at this frame, if any.
        """
        f = self.frame
        self.frame = f + 1
        st = self.state
        thr = self.start_db if st <= VadState.STARTING else self.stop_db
        if gate and snr_db > thr:
            if st == VadState.QUIET:
                self.state = st = VadState.STARTING
                self._run_start, self._count, self._sum, self._pending = f, 1, snr_db, 0.0
            elif st == VadState.STARTING:
                self._count += 1
                self._sum += snr_db
            else:
                self.state = st = VadState.SPEAKING
                self._sum += self._pending + snr_db
                self._pending = 0.0
                self._count = 0
            self._last_speech = f
        elif st == VadState.STARTING:
            self.state = VadState.QUIET
            self._count = 0
            return None
        elif st == VadState.SPEAKING:
            self.state = st = VadState.STOPPING
            self._count = 1
            self._pending = snr_db
        elif st == VadState.STOPPING:
            self._count += 1
            self._pending += snr_db
        if st == VadState.STARTING and self._count >= self.start_frames:
            self.state = VadState.SPEAKING
            self._count = 0
            return VadDecision(True, self._run_start, f, self._score())
        if st == VadState.STOPPING and self._count >= self.stop_frames:
            return self._end(f)
        return None

    def close(self) -> VadDecision | None:
        """End an open segment now (end of stream, gap); a STARTING candidate is dropped."""
        if self.in_segment:
            return self._end(self.frame - 1)
        self.state = VadState.QUIET
        self._count = 0
        return None

    def _score(self) -> float:
        return self._sum / (self._last_speech + 1 - self._run_start)

    def _end(self, decided: int) -> VadDecision:
        d = VadDecision(False, self._last_speech + 1, decided, self._score())
        self.state = VadState.QUIET
        self._count = 0
        self._pending = 0.0
        return d


@register("dsp.energy_vad")
class EnergyVAD(SyncBlock):
    """Energy detector over an adaptive noise floor; audio passes through, speech is tagged.

    Ports:
        in, out: float32 audio, any rate, any channel count (out == in, unchanged, no copy).
    Parameters:
        frame_ms: analysis frame in ms (default 20); ``round(rate * frame_ms / 1000)`` items.
        start_db: SNR over the noise floor (dB) that starts speech (default 10).
        stop_db: SNR that keeps it going (default 6; <= start_db).
        min_speech_ms: speech must last this long to be confirmed (default 100; >= 1 frame).
        hangover_ms: non-speech that ends a segment (default 300; >= 1 frame).
        noise_window_s: minimum-tracking window of the noise floor in s (default 3).
        min_level_dbfs: frames below this absolute level are never speech (default -70).
    Tags:
        Forwards input tags. Adds ``sk:speech`` (:class:`~streamkit.core.tags.SpeechBoundary`,
        detector "energy", score = mean SNR dB) at the frame boundary where the decision is made:
        ``start=True`` at ``segment_start + min_speech`` (the end of the frame that confirmed it),
        ``start=False`` at ``segment_end + hangover``. A SyncBlock cannot tag items it has already
        passed on, so the exact segment bounds are in the event span; a segment closed by a gap
        or the end of stream gets its end tag at that point.
    Events:
        ``vad.segment`` (:class:`~streamkit.core.events.ActivitySegment`: detector "energy",
        score = mean SNR dB over the segment's frames, start_s/end_s = span / rate in stream
        seconds) at segment end; span = the segment ``[first speech frame start, last speech
        frame end)`` in input indices. ``flush`` closes an open segment.
    Latency:
        ``max(min_speech, hangover)`` in items (frame-rounded): an end is known a hangover later.
    State:
        The partial frame, the last ``W - 1`` frame energies (noise floor), the state machine, and
        undelivered tags; ``reset()`` closes an open segment at the reset point (event + end tag)
        and clears the rest; frames restart at the next item. ``on_gap`` RESET.
    Notes:
        A trailing partial frame at end of stream is not analysed. The floor is the minimum of the
        frames seen so far until ``noise_window_s`` has passed: speech from the very first frame
        is missed until a quieter frame arrives.
    """

    emits: ClassVar[tuple[str, ...]] = (VAD_SEGMENT,)
    on_gap: ClassVar[GapPolicy] = GapPolicy.RESET

    def __init__(
        self,
        *,
        frame_ms: float = 20.0,
        start_db: float = 10.0,
        stop_db: float = 6.0,
        min_speech_ms: float = 100.0,
        hangover_ms: float = 300.0,
        noise_window_s: float = 3.0,
        min_level_dbfs: float = -70.0,
        name: str | None = None,
    ) -> None:
        super().__init__(name=name)
        vals = {
            "frame_ms": frame_ms, "start_db": start_db, "stop_db": stop_db, "min_speech_ms": min_speech_ms,
            "hangover_ms": hangover_ms, "noise_window_s": noise_window_s, "min_level_dbfs": min_level_dbfs,
        }  # fmt: skip
        for k, v in vals.items():
            if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)) or not math.isfinite(v):
                raise ConfigError(f"{k} must be a finite number, got {v!r}")
        if not frame_ms > 0:
            raise ConfigError(f"frame_ms must be > 0, got {frame_ms}")
        if min_speech_ms < 0 or hangover_ms < 0:
            raise ConfigError(f"min_speech_ms and hangover_ms must be >= 0, got {min_speech_ms}, {hangover_ms}")
        if stop_db > start_db:
            raise ConfigError(f"stop_db ({stop_db}) must be <= start_db ({start_db}) (hysteresis)")
        if noise_window_s * 1000.0 < frame_ms:
            raise ConfigError(f"noise_window_s ({noise_window_s}) must cover at least one frame ({frame_ms} ms)")
        self.frame_ms = float(frame_ms)
        self.start_db = float(start_db)
        self.stop_db = float(stop_db)
        self.min_speech_ms = float(min_speech_ms)
        self.hangover_ms = float(hangover_ms)
        self.noise_window_s = float(noise_window_s)
        self.min_level_dbfs = float(min_level_dbfs)
        self.start_frames = max(1, math.ceil(self.min_speech_ms / self.frame_ms - 1e-9))
        self.stop_frames = max(1, math.ceil(self.hangover_ms / self.frame_ms - 1e-9))
        self.window_frames = max(1, round(self.noise_window_s * 1000.0 / self.frame_ms))
        self.frame_len = 1
        self._ctx: Context | None = None

    # -- description ---------------------------------------------------------------------------
    def algorithmic_latency(self) -> int:
        return max(self.start_frames, self.stop_frames) * self.frame_len

    # -- lifecycle -----------------------------------------------------------------------------
    def negotiate(self, inputs: Mapping[str, StreamSpec]) -> dict[str, StreamSpec]:
        spec = inputs["in"]
        if spec.dtype != np.float32:
            raise ConfigError(f"{self.name}: needs float32 audio, got {spec.dtype}")
        self.frame_len = round(float(spec.rate) * self.frame_ms / 1000.0)
        if self.frame_len < 1:
            raise ConfigError(f"{self.name}: frame_ms={self.frame_ms} is shorter than one item at {spec.rate} Hz")
        return {"out": spec}

    def start(self, ctx: Context) -> None:
        spec = ctx.input_spec("in")
        self._ctx = ctx
        self._rate: Fraction = spec.rate
        self._channels = spec.channels
        self.frame_len = round(float(spec.rate) * self.frame_ms / 1000.0)
        self._sm = VadStateMachine(start_frames=self.start_frames, stop_frames=self.stop_frames, start_db=self.start_db, stop_db=self.stop_db)
        self._tags: list[tuple[int, SpeechBoundary]] = []  # decided, not yet delivered (offset >= next)
        self._next = 0  # index after the last item seen
        self._seg_start = 0  # index where the open segment started
        self._clear()

    def work(self, x: np.ndarray, ctx: Context) -> np.ndarray:
        pos = ctx.position
        n = x.shape[0]
        if self._origin is None:
            self._origin = pos
        self._next = pos + n
        L = self.frame_len
        have = self._buf.shape[0] + n
        k = have // L
        if k:
            data = np.concatenate([self._buf, x]) if self._buf.shape[0] else x
            self._frames(data[: k * L].reshape(k, L * self._channels))
            self._buf = data[k * L :].copy()
        elif n:
            self._buf = np.concatenate([self._buf, x])
        self._deliver(ctx, final=False)
        return x

    def reset(self, cause: Gap | None = None) -> None:
        if self._ctx is None:  # not started: nothing to drop
            return
        if self._origin is not None:
            d = self._sm.close()
            if d is not None:
                self._decided(self._ctx, d, at=self._next)
        self._clear()

    def flush(self, ctx: Context) -> np.ndarray | None:
        if self._origin is not None:
            d = self._sm.close()
            if d is not None:
                self._decided(ctx, d, at=self._next)
        self._deliver(ctx, final=True)
        return None

    def stop(self) -> None:
        self._ctx = None

    # -- helpers ---------------------------------------------------------------------------------
    def _clear(self) -> None:
        """Forget frames and floor; the frame grid restarts at the next item seen."""
        self._sm.reset()
        self._origin: int | None = None  # index of frame 0's first item
        self._buf = np.zeros((0, self._channels), dtype=np.float32)  # partial frame
        self._hist = np.zeros(0, dtype=np.float64)  # energies (dB) of the last W-1 frames

    def _frames(self, frames: np.ndarray) -> None:
        """Analyse k complete frames (k, L*C) and run the state machine over them."""
        ctx = self._ctx
        assert ctx is not None
        power = np.square(frames, dtype=np.float64).mean(axis=1)
        e_db = 10.0 * np.log10(np.maximum(power, _SILENCE_POWER))
        w = self.window_frames
        ext = np.concatenate([np.full(w - 1 - self._hist.shape[0], np.inf), self._hist, e_db])
        floor = sliding_window_view(ext, w).min(axis=1)
        snr = e_db - floor
        gate = e_db >= self.min_level_dbfs
        self._hist = ext[-(w - 1) :].copy() if w > 1 else self._hist
        self._hist = self._hist[np.isfinite(self._hist)]
        sm = self._sm
        for j in range(snr.shape[0]):  # per frame (50/s), not per sample
            d = sm.step(float(snr[j]), bool(gate[j]))
            if d is not None:
                self._decided(ctx, d)

    def _decided(self, ctx: Context, d: VadDecision, at: int | None = None) -> None:
        """Queue the tag for a decision and emit the event for an end."""
        origin = self._origin or 0
        L = self.frame_len
        off = origin + (d.decided + 1) * L if at is None else at
        self._tags.append((off, SpeechBoundary(d.start, DETECTOR, d.score)))
        if d.start:
            self._seg_start = origin + d.frame * L
        else:
            lo, hi = self._seg_start, origin + d.frame * L
            payload = ActivitySegment(DETECTOR, d.score, float(lo / self._rate), float(hi / self._rate))
            ctx.emit(VAD_SEGMENT, payload, span=(lo, hi))

    def _deliver(self, ctx: Context, final: bool) -> None:
        """Tag the output with the decisions whose offset it has reached (all of them at the end)."""
        if not self._tags:
            return
        keep = []
        for off, val in self._tags:
            if final or off < self._next:
                ctx.add_tag(off, SPEECH, val)
            else:
                keep.append((off, val))
        self._tags = keep

    def apply_params(self, changes: Mapping[str, Any]) -> None:
        """Thresholds may change between chunks; the frame layout may not."""
        fixed = set(changes) & {"frame_ms", "noise_window_s"}
        if fixed:
            raise ConfigError(f"{self.name}: {sorted(fixed)} cannot change while running")
        unknown = set(changes) - {"start_db", "stop_db", "min_speech_ms", "hangover_ms", "min_level_dbfs"}
        if unknown:
            raise ConfigError(f"{self.name}: unknown parameter(s) {sorted(unknown)}")
        start_db = float(changes.get("start_db", self.start_db))
        stop_db = float(changes.get("stop_db", self.stop_db))
        if stop_db > start_db:
            raise ConfigError(f"{self.name}: stop_db ({stop_db}) must be <= start_db ({start_db})")
        self.start_db, self.stop_db = start_db, stop_db
        self.min_level_dbfs = float(changes.get("min_level_dbfs", self.min_level_dbfs))
        self.min_speech_ms = float(changes.get("min_speech_ms", self.min_speech_ms))
        self.hangover_ms = float(changes.get("hangover_ms", self.hangover_ms))
        self.start_frames = max(1, math.ceil(self.min_speech_ms / self.frame_ms - 1e-9))
        self.stop_frames = max(1, math.ceil(self.hangover_ms / self.frame_ms - 1e-9))
        sm = self._sm
        sm.start_db, sm.stop_db, sm.start_frames, sm.stop_frames = self.start_db, self.stop_db, self.start_frames, self.stop_frames
