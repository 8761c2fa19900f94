"""Synthetic sources: a tone, white noise, and the built-in demo signal.

All three are non-live sources (``live = False``): the runner paces them in ``Paced`` and
``RealTime`` modes and reads them as fast as the graph consumes in ``FreeRun``.

Determinism and chunking invariance
-----------------------------------
Every source here computes its signal in fixed internal blocks of :data:`BLOCK` items, numbered
from the start of the stream, and slices reads out of those blocks. The value of item ``i``
therefore depends only on the parameters (and the seed), never on how the runner happens to split
the stream into reads: one read of 10 000 items, 10 000 reads of one item and any mix in between
give bit-identical output and identical tags.

* :class:`ToneSource` (``io.tone``): ``amplitude * sin(2 pi f i / rate)``. The phase of each
  internal block is computed with exact :class:`~fractions.Fraction` arithmetic, so the tone stays
  phase-continuous and drift-free however long it runs.
* :class:`NoiseSource` (``io.noise``): Gaussian white noise at an RMS level in dBFS; block ``k``
  is drawn from ``numpy.random.default_rng([seed, k])``.
* :class:`DemoSignal` (``io.demo_signal``): what ``streamkit monitor`` listens to when no radio is
  given. A band-limited noise floor with "speech-like" bursts (syllable-rate amplitude-modulated
  harmonic tones with a gliding pitch and two formants), at the KiwiSDR audio rate
  12001.188 Hz by default, optionally with simulated packet loss so that gap events show up.
  The burst intervals (``(start_s, end_s)`` pairs) are in :attr:`DemoSignal.truth` for tests and
  evaluation.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import TYPE_CHECKING, Any

import numpy as np

from streamkit.core.block import Source, SourceRead
from streamkit.core.errors import ConfigError
from streamkit.core.registry import register
from streamkit.core.tags import GAP, TIME, Gap, GapCause, TimeAnchor
from streamkit.core.types import StreamSpec, Tag, as_fraction

if TYPE_CHECKING:
    from streamkit.core.context import Context

__all__ = ["BLOCK", "KIWI_RATE", "Burst", "DemoSignal", "NoiseSource", "ToneSource"]

#: items per internal generation block (the unit that makes output independent of read sizes)
BLOCK = 4096

#: the KiwiSDR's nominal audio rate, exactly (12001.188 Hz)
KIWI_RATE = Fraction("12001.188")


def _check_duration(duration_s: float | None) -> float | None:
    if duration_s is None:
        return None
    d = float(duration_s)
    if not math.isfinite(d) or d <= 0:
        raise ConfigError(f"duration_s must be > 0 (or None for an endless stream), got {duration_s!r}")
    return d


def _check_channels(channels: int) -> int:
    if isinstance(channels, bool) or not isinstance(channels, (int, np.integer)) or channels < 1:
        raise ConfigError(f"channels must be an int >= 1, got {channels!r}")
    return int(channels)


def _check_seed(seed: int) -> int:
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ConfigError(f"seed must be an int >= 0, got {seed!r}")
    return int(seed)


class _BlockSource(Source):
    """Base of the synthetic sources: slices reads out of fixed, numbered generation blocks.

    Subclasses implement :meth:`_make_block` (block ``k`` as float32 ``(BLOCK, channels)``); it is
    called for ``k = 0, 1, 2, ...`` in order, once each, so a subclass may carry filter state from
    one block to the next.
    """

    def __init__(self, *, rate: Any, channels: int, duration_s: float | None, utc_ns: int | None, name: str | None) -> None:
        super().__init__(name=name)
        self.rate: Fraction = as_fraction(rate)
        self.channels = _check_channels(channels)
        self.duration_s = _check_duration(duration_s)
        self.utc_ns = None if utc_ns is None else int(utc_ns)
        self._total: int | None = None if self.duration_s is None else int(round(self.duration_s * float(self.rate)))
        if self._total is not None and self._total < 1:
            raise ConfigError(f"duration_s={duration_s} is shorter than one item at {float(self.rate):g} Hz")
        self._started = False
        self._reset_position()

    # -- lifecycle --------------------------------------------------------------------------------
    def negotiate(self, inputs: Mapping[str, StreamSpec]) -> dict[str, StreamSpec]:
        return {"out": StreamSpec(self.rate, self.channels, np.dtype(np.float32))}

    def start(self, ctx: Context | None) -> None:
        self._reset_position()
        self._started = True

    def read(self, max_items: int, ctx: Context | None) -> SourceRead | None:
        if not self._started:
            self.start(ctx)
        if self._total is not None and self._pos >= self._total:
            return None
        n = max(0, int(max_items))
        if self._total is not None:
            n = min(n, self._total - self._pos)
        tags: list[Tag] = []
        if self._pos == 0 and n > 0 and self.utc_ns is not None:
            tags.append(Tag(0, TIME, TimeAnchor(self.utc_ns, "synthetic")))
        x = self._slice(self._pos, self._pos + n)
        self._pos += n
        return SourceRead(x, tags, end=self._total is not None and self._pos >= self._total)

    # -- internals --------------------------------------------------------------------------------
    def _reset_position(self) -> None:
        self._pos = 0  # signal index of the next item
        self._blk_k = -1  # number of the cached generation block
        self._blk: np.ndarray | None = None
        self._reset_generator()

    def _reset_generator(self) -> None:
        """Clear generator state (filter memories) so block 0 comes next."""

    def _make_block(self, k: int) -> np.ndarray:
        raise NotImplementedError

    def _block(self, k: int) -> np.ndarray:
        if k < self._blk_k:
            raise RuntimeError(f"{type(self).__name__}: generation block {k} requested after {self._blk_k} (reads go forward only)")
        while self._blk_k < k:
            self._blk_k += 1
            self._blk = self._make_block(self._blk_k)
        assert self._blk is not None
        return self._blk

    def _slice(self, a: int, b: int) -> np.ndarray:
        """Signal items ``[a, b)`` as a fresh float32 array ``(b - a, channels)``."""
        out = np.empty((b - a, self.channels), dtype=np.float32)
        pos = a
        while pos < b:
            k = pos // BLOCK
            blk = self._block(k)
            lo = pos - k * BLOCK
            hi = min(b - k * BLOCK, BLOCK)
            out[pos - a : pos - a + hi - lo] = blk[lo:hi]
            pos += hi - lo
        return out


@register("io.tone")
class ToneSource(_BlockSource):
    """A sine tone, identical on every channel, phase-continuous across reads.

    Ports:
        out: float32, ``rate`` Hz, ``channels`` channels.
    Parameters:
        rate: item rate in Hz, any exact rational (``12000``, ``"12001.188"``, ``Fraction``).
        freq_hz: tone frequency in Hz, ``0 <= freq_hz < rate / 2``.
        amplitude: peak amplitude, linear full scale (``0 < amplitude``; 0.5 = -6 dBFS peak).
        channels: output channels (the same tone on each).
        duration_s: stream length in seconds; None for an endless stream (bound it with the
            runner's ``duration``).
        phase_deg: phase of item 0 in degrees.
        utc_ns: if given, a ``TimeAnchor(utc_ns, "synthetic")`` at item 0; otherwise the runner
            anchors item 0 at its own start time.
    Tags:
        Emits ``sk:time`` at 0 when ``utc_ns`` is given. No gaps.
    Events:
        None.
    Latency:
        0 items.
    State:
        Read position only; ``start()`` rewinds to item 0.
    """

    def __init__(
        self,
        *,
        rate: Any,
        freq_hz: float = 440.0,
        amplitude: float = 0.5,
        channels: int = 1,
        duration_s: float | None = None,
        phase_deg: float = 0.0,
        utc_ns: int | None = None,
        name: str | None = None,
    ) -> None:
        f = float(freq_hz)
        if not math.isfinite(f) or f < 0:
            raise ConfigError(f"freq_hz must be >= 0, got {freq_hz!r}")
        a = float(amplitude)
        if not math.isfinite(a) or a <= 0:
            raise ConfigError(f"amplitude must be > 0, got {amplitude!r}")
        self.freq_hz = f
        self.amplitude = a
        self.phase_deg = float(phase_deg)
        super().__init__(rate=rate, channels=channels, duration_s=duration_s, utc_ns=utc_ns, name=name)
        if f >= float(self.rate) / 2:
            raise ConfigError(f"freq_hz={f} is at or above Nyquist ({float(self.rate) / 2:g} Hz) for rate {float(self.rate):g}")
        # cycles per item, exact: the block phase below is computed without rounding drift
        self._step = as_fraction(f) / self.rate if f > 0 else Fraction(0)
        self._phase0 = Fraction(self.phase_deg / 360.0).limit_denominator(10**9)

    def _make_block(self, k: int) -> np.ndarray:
        base = (self._step * (k * BLOCK) + self._phase0) % 1  # exact cycle fraction at the block start
        cycles = float(base) + np.arange(BLOCK, dtype=np.float64) * float(self._step)
        y = (self.amplitude * np.sin(2.0 * np.pi * cycles)).astype(np.float32)
        return np.repeat(y[:, None], self.channels, axis=1) if self.channels > 1 else y[:, None]


@register("io.noise")
class NoiseSource(_BlockSource):
    """Gaussian white noise at a given RMS level, seeded and reproducible.

    Ports:
        out: float32, ``rate`` Hz, ``channels`` channels (independent noise per channel).
    Parameters:
        rate: item rate in Hz, any exact rational.
        level_dbfs: RMS level in dB relative to full scale (e.g. -20 -> RMS 0.1).
        seed: non-negative int; the same seed gives the same noise.
        channels: output channels.
        duration_s: stream length in seconds, None for endless.
        utc_ns: optional ``TimeAnchor(utc_ns, "synthetic")`` at item 0.
    Tags:
        Emits ``sk:time`` at 0 when ``utc_ns`` is given. No gaps.
    Events:
        None.
    Latency:
        0 items.
    State:
        Read position only; block ``k`` is ``default_rng([seed, k])``, so ``start()`` replays the
        same noise.
    """

    def __init__(
        self,
        *,
        rate: Any,
        level_dbfs: float = -20.0,
        seed: int = 0,
        channels: int = 1,
        duration_s: float | None = None,
        utc_ns: int | None = None,
        name: str | None = None,
    ) -> None:
        lv = float(level_dbfs)
        if not math.isfinite(lv) or lv > 20:
            raise ConfigError(f"level_dbfs must be finite and <= 20, got {level_dbfs!r}")
        self.level_dbfs = lv
        self.seed = _check_seed(seed)
        self._sigma = 10.0 ** (lv / 20.0)
        super().__init__(rate=rate, channels=channels, duration_s=duration_s, utc_ns=utc_ns, name=name)

    def _make_block(self, k: int) -> np.ndarray:
        rng = np.random.default_rng([self.seed, k])
        return (self._sigma * rng.standard_normal((BLOCK, self.channels))).astype(np.float32)


@dataclass(frozen=True, slots=True)
class Burst:
    """One synthetic "utterance" of :class:`DemoSignal` (times in seconds of signal time).

    Attributes:
        start_s, end_s: the burst interval, measured on the simulated timeline (items lost to
            ``dropouts`` included), i.e. what the stream's time anchors say.
        f0_hz: base pitch.
        depth: relative depth of the slow pitch modulation.
        mod_hz: rate of the slow pitch modulation.
        mod_phase: its phase (radians).
        glide: pitch declination in Hz per second (usually negative, as in speech).
        syl_hz: syllable rate of the amplitude modulation.
        f1_hz, f2_hz: the two formant centres.
    """

    start_s: float
    end_s: float
    f0_hz: float
    depth: float
    mod_hz: float
    mod_phase: float
    glide: float
    syl_hz: float
    f1_hz: float
    f2_hz: float


@register("io.demo_signal")
class DemoSignal(_BlockSource):
    """The built-in demo input: a noise floor with speech-like bursts, optionally with losses.

    The signal is what a KiwiSDR in SSB mode might deliver on a quiet band with an occasional
    talker: band-limited noise (4th-order Butterworth band-pass, 250 Hz to min(3000 Hz, 0.45 rate))
    at ``noise_dbfs`` RMS, plus bursts of ``burst_s`` seconds separated by ``pause_s`` seconds of
    noise only. A burst is a sum of harmonics of a pitch that glides and wobbles (base 85-240 Hz),
    weighted by two formant bumps, amplitude-modulated at a syllable rate of 3-6 Hz and faded in and
    out over 30 ms. The first burst comes after one pause, so the stream starts with noise.

    With ``dropouts=N``, every N seconds of signal time ``dropout_items`` items are lost the way a
    KiwiSDR packet is lost: they are skipped (the output index simply continues) and the first item
    after the loss carries ``Gap(lost=dropout_items, cause=SEQ_GAP)`` and a fresh ``TimeAnchor``
    that accounts for the skipped time. The runtime turns these into ``stream.gap`` events.

    Everything is a deterministic function of the parameters and ``seed``, and independent of read
    sizes (see the module docstring).

    Ports:
        out: float32 mono at ``rate`` (default exactly 12001.188 Hz, the KiwiSDR audio rate).
    Parameters:
        rate: item rate in Hz, any exact rational; default ``"12001.188"``.
        duration_s: length of the simulated timeline in seconds (lost items included, so the output
            has ``round(duration_s * rate)`` items minus the losses); None for endless.
        seed: non-negative int.
        noise_dbfs: RMS of the noise floor in dBFS.
        speech_dbfs: RMS of a burst's harmonic signal at the envelope's peak, in dBFS.
        burst_s: ``(min, max)`` burst length in seconds (default 1-4 s).
        pause_s: ``(min, max)`` noise-only interval between bursts in seconds (default 2-6 s).
        dropouts: seconds between simulated packet losses (> 0), or None for no losses.
        dropout_items: items lost each time (default 512, one KiwiSDR audio packet).
        utc_ns: UTC of item 0 for the time anchors; None takes the wall clock at ``start()``.
    Tags:
        ``sk:time`` TimeAnchor(source="synthetic") at item 0 and after every loss; ``sk:gap``
        Gap(lost=dropout_items, cause=SEQ_GAP) at the first item after every loss.
    Events:
        None (the runtime emits ``stream.gap`` for the gap tags).
    Latency:
        0 items.
    State:
        Read position and the noise filter's memory; ``start()`` rewinds to item 0.

    Attributes:
        truth: the burst intervals, a list of ``(start_s, end_s)`` in seconds of signal time (the
            time the stream's anchors give; items lost to dropouts included), clipped to
            ``duration_s``. Complete right after construction for a finite ``duration_s``; for an
            endless stream, the bursts scheduled so far (a little ahead of what was read).
        bursts: the same bursts with their synthesis parameters (:class:`Burst`).
    Methods:
        truth_items(): the intervals as ``[start, stop)`` output item indices.
    """

    def __init__(
        self,
        *,
        rate: Any = "12001.188",
        duration_s: float | None = None,
        seed: int = 0,
        noise_dbfs: float = -45.0,
        speech_dbfs: float = -20.0,
        burst_s: tuple[float, float] | list[float] = (1.0, 4.0),
        pause_s: tuple[float, float] | list[float] = (2.0, 6.0),
        dropouts: float | None = None,
        dropout_items: int = 512,
        utc_ns: int | None = None,
        name: str | None = None,
    ) -> None:
        self.seed = _check_seed(seed)
        self.noise_dbfs = float(noise_dbfs)
        self.speech_dbfs = float(speech_dbfs)
        for nm, v in (("noise_dbfs", self.noise_dbfs), ("speech_dbfs", self.speech_dbfs)):
            if not math.isfinite(v) or v > 0:
                raise ConfigError(f"{nm} must be finite and <= 0 dBFS, got {v!r}")
        self.burst_s = self._range("burst_s", burst_s)
        self.pause_s = self._range("pause_s", pause_s)
        self.dropouts = None if dropouts is None else float(dropouts)
        self.dropout_items = int(dropout_items)
        super().__init__(rate=rate, channels=1, duration_s=duration_s, utc_ns=utc_ns, name=name)
        rate_f = float(self.rate)
        if rate_f < 2000:
            raise ConfigError(f"rate must be >= 2000 Hz for the demo signal, got {rate_f:g}")
        if self.dropouts is not None:
            if not math.isfinite(self.dropouts) or self.dropouts <= 0:
                raise ConfigError(f"dropouts must be a positive interval in seconds (or None), got {dropouts!r}")
            if self.dropout_items < 1 or self.dropout_items >= self.dropouts * rate_f:
                raise ConfigError(f"dropout_items must be >= 1 and shorter than the dropout interval ({self.dropouts} s), got {dropout_items!r}")
        self._hi_hz = min(3000.0, 0.45 * rate_f)
        self._bursts: list[Burst] = []
        self._sched_rng = np.random.default_rng([self.seed, 0x5EED])
        self._sched_t = 0.0  # signal time up to which bursts are scheduled
        if self.duration_s is not None:
            self._schedule_until(self.duration_s)
        self._sos: np.ndarray | None = None

    @staticmethod
    def _range(nm: str, v: Any) -> tuple[float, float]:
        try:
            lo, hi = (float(a) for a in v)
        except (TypeError, ValueError):
            raise ConfigError(f"{nm} must be a (min, max) pair of seconds, got {v!r}") from None
        if not (0 < lo <= hi) or not math.isfinite(hi):
            raise ConfigError(f"{nm} must satisfy 0 < min <= max, got {v!r}")
        return (lo, hi)

    # -- truth ------------------------------------------------------------------------------------
    @property
    def bursts(self) -> list[Burst]:
        """Bursts scheduled so far (complete for a finite ``duration_s``), in signal seconds."""
        if self.duration_s is not None:
            return [b for b in self._bursts if b.start_s < self.duration_s]
        return list(self._bursts)

    @property
    def truth(self) -> list[tuple[float, float]]:
        """``(start_s, end_s)`` of every burst in :attr:`bursts`, clipped to ``duration_s``."""
        end = self.duration_s if self.duration_s is not None else math.inf
        return [(b.start_s, min(b.end_s, end)) for b in self.bursts]

    def truth_items(self) -> list[tuple[int, int]]:
        """Bursts as ``[start, stop)`` *output* item indices (items lost to dropouts removed).

        A burst that straddles a loss keeps one interval; its part inside the loss is simply not
        in the output.
        """
        res = []
        for s, e in self.truth:
            a = self._out_index(int(math.ceil(s * float(self.rate))))
            b = self._out_index(int(math.ceil(e * float(self.rate))))
            if b > a:
                res.append((a, b))
        return res

    def _schedule_until(self, t_s: float) -> None:
        rng = self._sched_rng
        while self._sched_t <= t_s:
            start = self._sched_t + float(rng.uniform(*self.pause_s))
            length = float(rng.uniform(*self.burst_s))
            f0 = float(rng.uniform(85.0, 240.0))
            b = Burst(
                start_s=start,
                end_s=start + length,
                f0_hz=f0,
                depth=float(rng.uniform(0.04, 0.18)),
                mod_hz=float(rng.uniform(0.3, 1.5)),
                mod_phase=float(rng.uniform(0.0, 2 * np.pi)),
                glide=float(rng.uniform(-0.05, 0.02)) * f0,
                syl_hz=float(rng.uniform(3.0, 6.0)),
                f1_hz=float(rng.uniform(350.0, 850.0)),
                f2_hz=float(rng.uniform(900.0, min(2400.0, self._hi_hz - 100.0))),
            )
            self._bursts.append(b)
            self._sched_t = b.end_s

    # -- losses -----------------------------------------------------------------------------------
    def _loss_start(self, j: int) -> int:
        """Signal index where loss number ``j`` (1, 2, ...) begins."""
        assert self.dropouts is not None
        return int(round(j * self.dropouts * float(self.rate)))

    def _out_index(self, sig: int) -> int:
        """Output index of signal index ``sig`` (items lost before it removed)."""
        if self.dropouts is None:
            return sig
        lost = 0
        j = 1
        while True:
            a = self._loss_start(j)
            if a >= sig or not self._loss_fits(a):
                break
            lost += min(self.dropout_items, sig - a)
            j += 1
        return sig - lost

    def _loss_fits(self, a: int) -> bool:
        # no loss that would run into (or past) the end of a finite stream: a gap tag needs an item after it
        return self._total is None or a + self.dropout_items < self._total

    # -- lifecycle --------------------------------------------------------------------------------
    def start(self, ctx: Context | None) -> None:
        super().start(ctx)
        self._out = 0
        self._next_loss = 1
        self._utc0 = self.utc_ns if self.utc_ns is not None else time.time_ns()
        if self._sos is None:
            self._design()  # scipy import + filter design here, not on the first read

    def read(self, max_items: int, ctx: Context | None) -> SourceRead | None:
        if not self._started:
            self.start(ctx)
        total = self._total
        if total is not None and self._pos >= total:
            return None
        want = max(0, int(max_items))
        tags: list[Tag] = []
        first = self._out == 0 and self._pos == 0
        parts: list[np.ndarray] = []
        got = 0
        while got < want and (total is None or self._pos < total):
            if self.dropouts is not None:
                a = self._loss_start(self._next_loss)
                if self._pos == a and self._loss_fits(a):
                    self._pos += self.dropout_items
                    self._next_loss += 1
                    off = self._out + got
                    tags.append(Tag(off, GAP, Gap(lost=self.dropout_items, cause=GapCause.SEQ_GAP, detail="simulated packet loss")))
                    tags.append(Tag(off, TIME, TimeAnchor(self._utc_of(self._pos), "synthetic")))
                    continue
                stop = a if (self._pos < a and self._loss_fits(a)) else None
            else:
                stop = None
            n = want - got
            if stop is not None:
                n = min(n, stop - self._pos)
            if total is not None:
                n = min(n, total - self._pos)
            parts.append(self._slice(self._pos, self._pos + n))
            self._pos += n
            got += n
        if first and got:
            tags.insert(0, Tag(0, TIME, TimeAnchor(self._utc0, "synthetic")))
        self._out += got
        if not parts:
            x = np.zeros((0, 1), np.float32)
        else:
            x = parts[0] if len(parts) == 1 else np.concatenate(parts)
        return SourceRead(x, tags, end=total is not None and self._pos >= total)

    def _utc_of(self, sig: int) -> int:
        return self._utc0 + int(Fraction(sig * 10**9) / self.rate)

    # -- generation -------------------------------------------------------------------------------
    def _reset_generator(self) -> None:
        self._zi: np.ndarray | None = None

    def _design(self) -> None:
        from scipy import signal as sps  # lazy: keeps `import streamkit.io` light

        rate_f = float(self.rate)
        self._sos = sps.butter(4, [250.0, self._hi_hz], btype="bandpass", fs=rate_f, output="sos")
        imp = np.zeros(8192)
        imp[0] = 1.0
        h = sps.sosfilt(self._sos, imp)
        # white noise of variance g^2 through the filter has power g^2 * sum(h^2): scale for noise_dbfs
        self._noise_gain = 10.0 ** (self.noise_dbfs / 20.0) / math.sqrt(float(np.sum(h * h)))
        self._sosfilt = sps.sosfilt

    def _make_block(self, k: int) -> np.ndarray:
        if self._sos is None:
            self._design()
        assert self._sos is not None
        if k == 0 or self._zi is None:
            self._zi = np.zeros((self._sos.shape[0], 2))
        w = np.random.default_rng([self.seed, k]).standard_normal(BLOCK)
        y, self._zi = self._sosfilt(self._sos, w, zi=self._zi)
        y = y * self._noise_gain
        rate_f = float(self.rate)
        t0 = k * BLOCK / rate_f
        t1 = (k + 1) * BLOCK / rate_f
        if self.duration_s is None:
            self._schedule_until(t1 + self.pause_s[1] + self.burst_s[1])
        for b in self._bursts:
            if b.end_s <= t0 or b.start_s >= t1:
                continue
            self._add_burst(y, k * BLOCK, b)
        return y.astype(np.float32)[:, None]

    def _add_burst(self, y: np.ndarray, base: int, b: Burst) -> None:
        """Add burst ``b`` to ``y`` (signal items ``base .. base + len(y)``), in place."""
        rate_f = float(self.rate)
        s0 = int(math.ceil(b.start_s * rate_f))
        s1 = int(math.ceil(b.end_s * rate_f))
        lo = max(base, s0)
        hi = min(base + y.shape[0], s1)
        if hi <= lo:
            return
        t = (np.arange(lo, hi, dtype=np.float64) - s0) / rate_f  # seconds since the burst started
        length = (s1 - s0) / rate_f
        w_m = 2 * np.pi * b.mod_hz
        f0 = b.f0_hz * (1.0 + b.depth * np.sin(w_m * t + b.mod_phase)) + b.glide * t
        # phase = 2 pi * integral of f0 (closed form, so no state crosses block boundaries)
        cyc = b.f0_hz * t - b.f0_hz * b.depth / w_m * (np.cos(w_m * t + b.mod_phase) - np.cos(b.mod_phase)) + 0.5 * b.glide * t * t
        phase = 2 * np.pi * cyc
        f0_min = b.f0_hz * (1.0 - b.depth) + min(0.0, b.glide * length)  # lowest pitch the burst reaches
        kmax = int(self._hi_hz / max(40.0, f0_min)) + 1
        # harmonic weights follow the pitch slowly: evaluate them every 32 items and interpolate
        coarse = np.arange(0, t.shape[0] + 31, 32).clip(max=t.shape[0] - 1)
        h = np.arange(1, kmax + 1, dtype=np.float64)[:, None]
        fh = h * f0[coarse][None, :]
        amp_c = (np.exp(-(((fh - b.f1_hz) / 220.0) ** 2)) + 0.6 * np.exp(-(((fh - b.f2_hz) / 320.0) ** 2)) + 0.15 / h) * (fh < self._hi_hz)
        fh0 = h[:, 0] * b.f0_hz
        a0 = (np.exp(-(((fh0 - b.f1_hz) / 220.0) ** 2)) + 0.6 * np.exp(-(((fh0 - b.f2_hz) / 320.0) ** 2)) + 0.15 / h[:, 0]) * (fh0 < self._hi_hz)
        norm = float(np.sum(a0 * a0) / 2.0)
        sig = np.zeros_like(t)
        idx = np.arange(t.shape[0], dtype=np.float64)
        for j in range(kmax):
            if not amp_c[j].any():
                continue
            amp = np.interp(idx, coarse.astype(np.float64), amp_c[j])
            sig += amp * np.sin((j + 1) * phase + 0.7 * (j + 1) ** 2)
        env = (0.5 - 0.5 * np.cos(2 * np.pi * b.syl_hz * t)) ** 1.5
        fade = np.minimum(1.0, np.minimum(t, length - t) / 0.03)
        env *= 0.5 - 0.5 * np.cos(np.pi * np.clip(fade, 0.0, 1.0))
        scale = 10.0 ** (self.speech_dbfs / 20.0) / math.sqrt(max(norm, 1e-12))
        y[lo - base : hi - base] += scale * env * sig
