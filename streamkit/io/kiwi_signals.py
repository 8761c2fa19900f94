"""Signals for the KiwiSDR emulator: what each station sounds like, as int16 frames.

A signal is a deterministic callable ``signal(n_samples, start_index, rate, iq) -> ndarray``
(:data:`SignalFn`): float samples in [-1, 1] (complex for IQ) starting at absolute sample
``start_index`` of a connection. :class:`Tone`, :class:`Noise`, :class:`SpeechLike` and
:class:`Mix` (and their factories :func:`tone`, :func:`noise`, :func:`speech_like`, :func:`mix`)
are exact per sample index, so the output does not depend on how a stream is cut into frames.

:func:`select_station` picks the signal heard at a dial frequency and passband,
:func:`render_block` turns a signal into one frame's int16 samples and S-meter
(:func:`quantize`, :func:`frame_smeter_dbm`), :func:`parse_station_spec` reads ``--station``.

S-meter calibration (documented choice): ``dBm = 10*log10(P) + SMETER_OFFSET_DB`` where ``P`` is
the mean power of the frame's int16 samples scaled by 1/32768 (``I^2 + Q^2`` for IQ) and
``SMETER_OFFSET_DB = -10 - 10*log10(0.5) = -6.99``, so a full-scale real sine reads -10.0 dBm, a
full-scale complex exponential -7.0 dBm, digital silence -127 dBm (the clamp of the wire format).

Default stations (:func:`default_stations`)
    * 7074 kHz: a 1500 Hz tone at -12 dBFS plus white noise at -40 dBFS RMS (an FT8-like carrier);
    * 7100 kHz: :func:`speech_like` (seed 7100);
    * 10000 kHz: a 1000 Hz tone at -20 dBFS (a time-signal-like carrier);
    * 14200 kHz: :func:`speech_like` (seed 14200);
    * everywhere else: white noise at -60 dBFS RMS (seed 0).
"""

from __future__ import annotations

import bisect
import math
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Final, TypeAlias

import numpy as np
from numpy.typing import NDArray

__all__ = [
    "SMETER_OFFSET_DB",
    "Mix",
    "Noise",
    "SignalFn",
    "SpeechLike",
    "Tone",
    "default_stations",
    "exact_fraction",
    "frame_smeter_dbm",
    "mix",
    "noise",
    "parse_station_spec",
    "quantize",
    "render_block",
    "select_station",
    "speech_like",
    "tone",
]

SMETER_OFFSET_DB: Final = -10.0 - 10.0 * math.log10(0.5)
"""dBm = 10*log10(mean power re full scale) + this; a full-scale sine reads -10 dBm."""

SignalFn: TypeAlias = Callable[[int, int, float, bool], NDArray[Any]]
"""``signal(n_samples, start_index, rate, iq) -> ndarray``: ``n_samples`` float samples in
[-1, 1] (complex for ``iq``) starting at absolute sample ``start_index`` of the connection at
``rate`` Hz. Must be a deterministic function of its arguments (results may be cached and
shared between connections)."""


def _db_to_amplitude(level_db: float) -> float:
    if not math.isfinite(level_db):
        raise ValueError(f"level_db must be finite, got {level_db}")
    return float(10.0 ** (level_db / 20.0))


def exact_fraction(x: float) -> Fraction:
    """The decimal value ``repr(x)`` as a Fraction (12001.188 -> 12001188/1000)."""
    return Fraction(repr(float(x)))


def _cycles(freq_hz: float, rate: float, start: int, n: int) -> NDArray[np.float64]:
    """``frac(freq * i / rate)`` for ``i`` in ``[start, start + n)``, exact per index when the
    integers fit in int64 (so the phase neither drifts nor depends on the chunking)."""
    f = exact_fraction(freq_hz) / exact_fraction(rate)
    num, den = f.numerator, f.denominator
    if n and abs(num) * (start + n) < (1 << 62) and den < (1 << 62):
        idx = np.arange(start, start + n, dtype=np.int64)
        return ((idx * num) % den).astype(np.float64) / float(den)
    base = float((f * start) % 1)
    return (base + float(f) * np.arange(n, dtype=np.float64)) % 1.0


class Tone:
    """A sine (real) or complex exponential (IQ) at ``freq_hz`` with peak ``level_db`` dBFS.

    Phase-continuous and exact per sample index (no drift over long runs).
    """

    __slots__ = ("amplitude", "freq_hz", "level_db")

    def __init__(self, freq_hz: float, level_db: float = -12.0) -> None:
        if not math.isfinite(freq_hz):
            raise ValueError(f"freq_hz must be finite, got {freq_hz}")
        self.freq_hz = float(freq_hz)
        self.level_db = float(level_db)
        self.amplitude = _db_to_amplitude(level_db)

    def __call__(self, n: int, start: int, rate: float, iq: bool) -> NDArray[Any]:
        phase = (2.0 * math.pi) * _cycles(self.freq_hz, rate, start, n)
        out: NDArray[Any] = self.amplitude * (np.exp(1j * phase) if iq else np.sin(phase))
        return out

    def __repr__(self) -> str:
        return f"tone({self.freq_hz:g}, {self.level_db:g})"


class Noise:
    """White Gaussian noise at RMS ``level_db`` dBFS (complex: total RMS, split over I and Q).

    Generated in blocks of :attr:`BLOCK` samples, block ``b`` from
    ``numpy.random.default_rng([seed, b, iq])``, so sample ``i`` depends only on ``(seed, i, iq)``.
    """

    BLOCK: Final = 4096
    __slots__ = ("_cache", "_lock", "level_db", "rms", "seed")

    def __init__(self, level_db: float = -60.0, seed: int = 0) -> None:
        self.level_db = float(level_db)
        self.rms = _db_to_amplitude(level_db)
        self.seed = int(seed)
        self._cache: OrderedDict[tuple[int, bool], NDArray[Any]] = OrderedDict()
        self._lock = threading.Lock()

    def _block(self, b: int, iq: bool) -> NDArray[Any]:
        key = (b, iq)
        with self._lock:
            blk = self._cache.get(key)
            if blk is not None:
                self._cache.move_to_end(key)
                return blk
        rng = np.random.default_rng([self.seed, b, int(iq)])
        if iq:
            g = rng.standard_normal((2, self.BLOCK))
            blk = (g[0] + 1j * g[1]) * (self.rms / math.sqrt(2.0))
        else:
            blk = rng.standard_normal(self.BLOCK) * self.rms
        with self._lock:
            self._cache[key] = blk
            while len(self._cache) > 8:
                self._cache.popitem(last=False)
        return blk

    def __call__(self, n: int, start: int, rate: float, iq: bool) -> NDArray[Any]:
        out = np.empty(n, dtype=np.complex128 if iq else np.float64)
        pos = 0
        while pos < n:
            i = start + pos
            b, off = divmod(i, self.BLOCK)
            take = min(self.BLOCK - off, n - pos)
            out[pos : pos + take] = self._block(b, iq)[off : off + take]
            pos += take
        return out

    def __repr__(self) -> str:
        return f"noise({self.level_db:g}, seed={self.seed})"


@dataclass(frozen=True, slots=True)
class _Burst:
    """One speech-like burst, times in seconds from the stream start."""

    t_on: float
    t_off: float
    f0: float
    depth: float
    mod_rate: float
    mod_phase: float
    decl: float
    syl_rate: float
    syl_phase: float
    f1: float
    f2: float


class SpeechLike:
    """Speech-like bursts over a noise floor, deterministic from ``seed`` and the sample index.

    Bursts last ``on_s`` (1-4 s) separated by pauses of ``off_s`` (2-6 s), the stream starting
    with a pause. Each burst is a harmonic series (fundamental 90-220 Hz with a sinusoidal pitch
    contour and a falling declination, harmonics up to 3.4 kHz weighted by two formants),
    amplitude-modulated at a syllable rate of 3-6 Hz with 30 ms fades, peak ``level_db`` dBFS.
    In IQ mode the harmonics are complex exponentials (positive frequencies). The noise floor is
    :class:`Noise` at ``noise_db`` with seed ``seed + 1``.

    The burst list is drawn in chunks of :attr:`CHUNK` bursts, chunk ``c`` from
    ``default_rng([seed, 0x5BEEC4, c])``; :meth:`bursts` returns it in samples (the ground truth
    for detector tests). Calls with the same ``(n, start, rate, iq)`` give bit-identical output;
    different chunkings of the same range agree to ~1e-12.
    """

    CHUNK: Final = 32
    FADE_S: Final = 0.03

    def __init__(
        self,
        seed: int = 0,
        level_db: float = -12.0,
        noise_db: float | None = -55.0,
        on_s: tuple[float, float] = (1.0, 4.0),
        off_s: tuple[float, float] = (2.0, 6.0),
    ) -> None:
        if not (0 < on_s[0] <= on_s[1] and 0 < off_s[0] <= off_s[1]):
            raise ValueError(f"bad on_s/off_s ranges {on_s}, {off_s}")
        self.seed = int(seed)
        self.level_db = float(level_db)
        self.amplitude = _db_to_amplitude(level_db)
        self.on_s = (float(on_s[0]), float(on_s[1]))
        self.off_s = (float(off_s[0]), float(off_s[1]))
        self.noise_floor = Noise(noise_db, self.seed + 1) if noise_db is not None else None
        self._lock = threading.Lock()
        self._chunk_start: list[float] = [0.0]  # start time (s) of chunk c; grows lazily
        self._chunks: OrderedDict[int, list[_Burst]] = OrderedDict()

    def __repr__(self) -> str:
        return f"speech_like(seed={self.seed})"

    def _make_chunk(self, c: int, t0: float) -> tuple[list[_Burst], float]:
        rng = np.random.default_rng([self.seed, 0x5BEEC4, c])
        bursts: list[_Burst] = []
        t = t0
        for _ in range(self.CHUNK):
            p = rng.uniform(0.0, 1.0, 12)
            t_on = t + self.off_s[0] + p[0] * (self.off_s[1] - self.off_s[0])
            t_off = t_on + self.on_s[0] + p[1] * (self.on_s[1] - self.on_s[0])
            bursts.append(
                _Burst(
                    t_on=t_on,
                    t_off=t_off,
                    f0=90.0 + 130.0 * p[2],
                    depth=0.05 + 0.15 * p[3],
                    mod_rate=0.3 + 1.2 * p[4],
                    mod_phase=2.0 * math.pi * p[5],
                    decl=0.1 + 0.15 * p[6],
                    syl_rate=3.0 + 3.0 * p[7],
                    syl_phase=p[8],
                    f1=300.0 + 500.0 * p[9],
                    f2=900.0 + 1600.0 * p[10],
                )
            )
            t = t_off
        return bursts, t

    def _chunk(self, c: int) -> list[_Burst]:
        """Bursts of chunk ``c`` (extends the chunk start list as needed; thread-safe)."""
        with self._lock:
            cached = self._chunks.get(c)
            if cached is not None:
                self._chunks.move_to_end(c)
                return cached
            while len(self._chunk_start) <= c + 1:
                k = len(self._chunk_start) - 1
                _, end = self._make_chunk(k, self._chunk_start[k])
                self._chunk_start.append(end)
            bursts, _ = self._make_chunk(c, self._chunk_start[c])
            self._chunks[c] = bursts
            while len(self._chunks) > 4:
                self._chunks.popitem(last=False)
            return bursts

    def _chunk_index(self, t: float) -> int:
        with self._lock:
            known = self._chunk_start[-1]
        while known <= t:
            self._chunk(len(self._chunk_start))  # extend
            with self._lock:
                known = self._chunk_start[-1]
        with self._lock:
            return max(0, bisect.bisect_right(self._chunk_start, t) - 1)

    def _overlapping(self, start: int, stop: int, rate: float) -> list[tuple[int, int, _Burst]]:
        out: list[tuple[int, int, _Burst]] = []
        c = self._chunk_index(max(0.0, start / rate - 1.0))
        while True:
            bursts = self._chunk(c)
            for b in bursts:
                s0, s1 = round(b.t_on * rate), round(b.t_off * rate)
                if s1 > start and s0 < stop:
                    out.append((s0, s1, b))
            if round(bursts[-1].t_off * rate) >= stop:
                return out
            c += 1

    def bursts(self, rate: float, stop: int, start: int = 0) -> list[tuple[int, int]]:
        """Burst intervals ``[on, off)`` in samples at ``rate`` that overlap ``[start, stop)``."""
        return [(s0, s1) for s0, s1, _ in self._overlapping(start, stop, rate)]

    def _burst_samples(self, b: _Burst, s0: int, s1: int, idx: NDArray[np.int64], rate: float, iq: bool) -> NDArray[Any]:
        t = (idx - s0).astype(np.float64) / rate
        dur = (s1 - s0) / rate
        two_pi = 2.0 * math.pi
        f0, d, m, ph = b.f0, b.depth, b.mod_rate, b.mod_phase
        # Phase = 2 pi * integral of f0(t) = f0 (1 + d sin(2 pi m t + ph)) - f0 decl t / dur.
        phi = two_pi * (f0 * t - (f0 * d / (two_pi * m)) * (np.cos(two_pi * m * t + ph) - math.cos(ph)) - f0 * b.decl * t * t / (2.0 * dur))
        top = min(3400.0, 0.45 * rate)
        n_harm = max(1, int(top // (f0 * (1.0 + d))))
        k = np.arange(1, n_harm + 1, dtype=np.float64)
        fk = k * f0
        w = 1.0 / (1.0 + ((fk - b.f1) / 150.0) ** 2) + 0.6 / (1.0 + ((fk - b.f2) / 250.0) ** 2) + 0.03
        w /= w.sum()
        acc = np.zeros(idx.shape[0], dtype=np.complex128 if iq else np.float64)
        for kk in range(n_harm):
            if iq:
                acc += w[kk] * np.exp(1j * (kk + 1) * phi)
            else:
                acc += w[kk] * np.cos((kk + 1) * phi)
        syl = np.sin(math.pi * (b.syl_rate * t + b.syl_phase)) ** 2
        fade = np.clip(np.minimum(t, dur - t) / self.FADE_S, 0.0, 1.0)
        env = (0.5 - 0.5 * np.cos(math.pi * fade)) * (0.1 + 0.9 * syl)
        return self.amplitude * env * acc

    def __call__(self, n: int, start: int, rate: float, iq: bool) -> NDArray[Any]:
        if self.noise_floor is not None:
            out = self.noise_floor(n, start, rate, iq)
        else:
            out = np.zeros(n, dtype=np.complex128 if iq else np.float64)
        stop = start + n
        for s0, s1, b in self._overlapping(start, stop, rate):
            lo, hi = max(s0, start), min(s1, stop)
            idx = np.arange(lo, hi, dtype=np.int64)
            out[lo - start : hi - start] += self._burst_samples(b, s0, s1, idx, rate, iq)
        return out


class Mix:
    """The sum of several signals (clipped only by the final quantisation)."""

    __slots__ = ("signals",)

    def __init__(self, *signals: SignalFn) -> None:
        if not signals:
            raise ValueError("mix() needs at least one signal")
        self.signals = tuple(signals)

    def __call__(self, n: int, start: int, rate: float, iq: bool) -> NDArray[Any]:
        out = np.zeros(n, dtype=np.complex128 if iq else np.float64)
        for s in self.signals:
            out += s(n, start, rate, iq)
        return out

    def __repr__(self) -> str:
        return "mix(" + ", ".join(repr(s) for s in self.signals) + ")"


def tone(freq_hz: float, level_db: float = -12.0) -> Tone:
    """A tone at ``freq_hz`` (negative = below the carrier in IQ) with peak ``level_db`` dBFS."""
    return Tone(freq_hz, level_db)


def noise(level_db: float = -60.0, seed: int = 0) -> Noise:
    """White Gaussian noise with RMS ``level_db`` dBFS, deterministic from ``seed``."""
    return Noise(level_db, seed)


def speech_like(seed: int = 0, level_db: float = -12.0, noise_db: float | None = -55.0) -> SpeechLike:
    """Speech-like bursts (1-4 s on, 2-6 s off) over a noise floor; see :class:`SpeechLike`."""
    return SpeechLike(seed, level_db, noise_db)


def mix(*signals: SignalFn) -> Mix:
    """The sum of ``signals``."""
    return Mix(*signals)


def default_stations() -> dict[float, SignalFn]:
    """The default station list (fresh instances): see the module docstring."""
    return {
        7074.0: mix(tone(1500.0, -12.0), noise(-40.0, seed=7074)),
        7100.0: speech_like(seed=7100),
        10000.0: tone(1000.0, -20.0),
        14200.0: speech_like(seed=14200),
    }


def quantize(x: NDArray[Any], iq: bool) -> NDArray[np.int16]:
    """Float samples in [-1, 1] -> int16 ``clip(rint(x * 32767))``; IQ -> shape (n, 2) [I, Q]."""
    if iq:
        z = np.asarray(x, dtype=np.complex128)
        out = np.empty((z.shape[0], 2), dtype=np.int16)
        out[:, 0] = np.clip(np.rint(z.real * 32767.0), -32768, 32767)
        out[:, 1] = np.clip(np.rint(z.imag * 32767.0), -32768, 32767)
        return out
    r = np.asarray(x, dtype=np.float64)
    return np.clip(np.rint(r * 32767.0), -32768, 32767).astype(np.int16)


def frame_smeter_dbm(samples: NDArray[np.int16]) -> float:
    """S-meter of a frame (module docstring): mean power re full scale + :data:`SMETER_OFFSET_DB`.

    ``samples`` is int16, shape (n,) or (n, 2) for IQ (``I^2 + Q^2`` per sample).
    """
    if samples.size == 0:
        return -math.inf
    s = samples.astype(np.float64) / 32768.0
    power = np.sum(s * s, axis=1) if s.ndim == 2 else s * s
    p = float(np.mean(power))
    return 10.0 * math.log10(max(p, 1e-30)) + SMETER_OFFSET_DB


def parse_station_spec(spec: str) -> tuple[float, SignalFn]:
    """``KHZ=KIND[:ARG...]`` -> ``(khz, signal)``. Kinds: ``tone:HZ[:DB]``, ``noise[:DB[:SEED]]``,
    ``speech[:SEED[:DB]]``; ``+`` mixes, e.g. ``7074=tone:1500:-12+noise:-40:1``.

    Raises:
        ValueError: malformed spec.
    """
    freq_s, sep, body = spec.partition("=")
    if not sep or not body:
        raise ValueError(f"station spec {spec!r}: expected KHZ=KIND[:ARGS]")
    try:
        khz = float(freq_s)
    except ValueError:
        raise ValueError(f"station spec {spec!r}: bad frequency {freq_s!r}") from None
    if not math.isfinite(khz) or khz < 0:
        raise ValueError(f"station spec {spec!r}: bad frequency {freq_s!r}")
    parts: list[SignalFn] = []
    for item in body.split("+"):
        kind, *args = item.split(":")
        try:
            nums = [float(a) for a in args]
        except ValueError:
            raise ValueError(f"station spec {spec!r}: non-numeric argument in {item!r}") from None
        if kind == "tone" and 1 <= len(nums) <= 2:
            parts.append(tone(*nums))
        elif kind == "noise" and len(nums) <= 2:
            parts.append(noise(nums[0] if nums else -60.0, int(nums[1]) if len(nums) > 1 else 0))
        elif kind == "speech" and len(nums) <= 2:
            parts.append(speech_like(int(nums[0]) if nums else 0, nums[1] if len(nums) > 1 else -12.0))
        else:
            raise ValueError(f"station spec {spec!r}: unknown kind or wrong arguments in {item!r}")
    return khz, (parts[0] if len(parts) == 1 else mix(*parts))


def select_station(signals: dict[float, SignalFn], noise_floor: SignalFn, freq_khz: float, passband: tuple[int, int] | None) -> SignalFn:
    """The signal heard at ``freq_khz``: the nearest station whose distance from the dial is at most
    ``max(|low_cut|, |high_cut|)`` of the passband, else ``noise_floor``. A station is heard the
    same wherever it sits inside the passband (the signal is what the demodulator outputs)."""
    reach_khz = max(abs(passband[0]), abs(passband[1])) / 1000.0 if passband else 0.0
    best: tuple[float, SignalFn] | None = None
    for khz, fn in signals.items():
        d = abs(khz - freq_khz)
        if d <= reach_khz + 1e-9 and (best is None or d < best[0]):
            best = (d, fn)
    return best[1] if best is not None else noise_floor


def render_block(fn: SignalFn, n: int, start: int, rate: float, iq: bool) -> tuple[NDArray[np.int16], float]:
    """``n`` samples of ``fn`` from ``start`` as read-only int16 (shape (n, 2) for IQ) and their S-meter in dBm.

    Raises:
        ValueError: the signal returned the wrong shape, complex samples for mono, or non-finite samples.
    """
    x = np.asarray(fn(n, start, rate, iq))
    if x.shape != (n,):
        raise ValueError(f"signal {fn!r} returned shape {x.shape}, expected ({n},)")
    if not iq and np.iscomplexobj(x):
        raise ValueError(f"signal {fn!r} returned complex samples for a mono frame")
    if not np.all(np.isfinite(x)):
        raise ValueError(f"signal {fn!r} returned non-finite samples")
    samples = quantize(x, iq)
    samples.flags.writeable = False
    return samples, frame_smeter_dbm(samples)
