"""Chirp markers for marker-based time synchronisation of a transmission (pure functions).

A marker is :data:`MARKER_S` = 4 s of :data:`N_SYMBOLS` = 26 linear chirps in a row. Symbol ``i``
of marker ``m`` sweeps :data:`SWEEP_HZ` up or down, starting from one of eight start frequencies:
its direction (1 bit) and start-frequency index (3 bits) are chips ``4 i .. 4 i + 3`` of Gold
code ``m`` of length 127 (the family of :func:`gold_codes`, 129 codes). Two markers then agree on
a symbol (same direction and start) about one time in sixteen: over all pairs of the first 24
markers and every whole-symbol lag, at most 6 of the 26 symbols coincide (and at most 6 for a
marker with itself off lag 0), so their spectrograms overlap little at any lag: the markers are
mutually near-orthogonal. Every frequency lies inside 400-2600 Hz, the passband of an SSB voice
channel (300-2700 Hz).

Symbol ``i`` covers samples ``[round(i L / 26), round((i + 1) L / 26))`` of the marker's
``L = 4 rate`` samples (exact at any rate), with a 5 ms raised-cosine taper at both ends; the
chirp is synthesised analytically, so a marker can be rendered at any sample rate
(:func:`marker_waveform`), e.g. directly at a KiwiSDR's 12001.188 Hz.
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import Final

import numpy as np
from numpy.typing import NDArray

__all__ = [
    "MARKER_S",
    "MAX_MARKERS",
    "N_SYMBOLS",
    "SWEEP_HZ",
    "START_HZ",
    "gold_codes",
    "marker_code",
    "marker_length",
    "marker_waveform",
    "symbol_bounds",
]

#: marker duration in seconds
MARKER_S: Final = 4.0
#: chirp symbols per marker
N_SYMBOLS: Final = 26
#: the eight start frequencies of an up-chirp (a down-chirp starts at ``START_HZ[k] + SWEEP_HZ``)
START_HZ: Final = tuple(400.0 + 200.0 * k for k in range(8))
#: bandwidth swept by one chirp symbol
SWEEP_HZ: Final = 800.0
#: code chips per symbol: direction, then the start-frequency index (most significant bit first)
_BITS: Final = 4
#: raised-cosine taper at each end of a symbol, seconds
TAPER_S: Final = 0.005
#: default peak amplitude of a marker (full scale 1)
DEFAULT_AMPLITUDE: Final = 0.5

#: degree of the Gold-code generator polynomials (codes of length 2**7 - 1 = 127)
_DEGREE: Final = 7
#: a preferred pair of primitive polynomials of degree 7 (x^7 + x^3 + 1, x^7 + x^3 + x^2 + x + 1), taps as exponents
_POLY_A: Final = (7, 3)
_POLY_B: Final = (7, 3, 2, 1)
#: a Gold family of degree 7 has 2**7 + 1 = 129 codes, one per marker
MAX_MARKERS: Final = 2**_DEGREE + 1


def _m_sequence(taps: tuple[int, ...], degree: int) -> NDArray[np.int8]:
    """One period (2**degree - 1 chips, 0/1) of the maximal-length LFSR sequence with feedback ``taps``."""
    n = 2**degree - 1
    reg = [1] * degree
    out = np.empty(n, dtype=np.int8)
    for i in range(n):
        out[i] = reg[-1]
        fb = 0
        for t in taps:
            fb ^= reg[t - 1]
        reg = [fb, *reg[:-1]]
    return out


@lru_cache(maxsize=1)
def gold_codes() -> NDArray[np.int8]:
    """The Gold family of degree 7: ``(129, 127)`` chips in {0, 1}: ``a``, ``b`` and ``a xor shift(b, k)``."""
    a = _m_sequence(_POLY_A, _DEGREE)
    b = _m_sequence(_POLY_B, _DEGREE)
    codes = [a, b] + [a ^ np.roll(b, -k) for k in range(a.size)]
    out = np.stack(codes).astype(np.int8)
    out.flags.writeable = False
    return out


def marker_code(marker_id: int) -> tuple[NDArray[np.bool_], NDArray[np.int64]]:
    """``(up, start_index)`` of marker ``marker_id``: per symbol, up (True) or down, and the start-frequency index 0..7.

    Raises:
        ValueError: ``marker_id`` outside ``0 .. MAX_MARKERS - 1``.
    """
    if not 0 <= int(marker_id) < MAX_MARKERS:
        raise ValueError(f"marker id must be in 0..{MAX_MARKERS - 1}, got {marker_id}")
    chips = gold_codes()[int(marker_id), : N_SYMBOLS * _BITS].reshape(N_SYMBOLS, _BITS).astype(np.int64)
    up = chips[:, 0].astype(bool)
    start = 4 * chips[:, 1] + 2 * chips[:, 2] + chips[:, 3]
    return up, start


def marker_length(rate: float) -> int:
    """Samples in one marker at ``rate`` Hz (``round(4 * rate)``)."""
    return int(round(MARKER_S * float(rate)))


def symbol_bounds(rate: float) -> NDArray[np.int64]:
    """``N_SYMBOLS + 1`` sample boundaries of the symbols of a marker at ``rate``."""
    n = marker_length(rate)
    return np.array([int(round(i * n / N_SYMBOLS)) for i in range(N_SYMBOLS + 1)], dtype=np.int64)


def marker_waveform(
    marker_id: int, rate: float, *, amplitude: float = DEFAULT_AMPLITUDE, analytic: bool = False, direction: str = "both"
) -> NDArray[np.float64]:
    """Marker ``marker_id`` rendered at ``rate`` Hz: ``marker_length(rate)`` samples, peak ``amplitude``.

    ``analytic=True`` returns the complex analytic signal (``exp(j phase)``; the real part is the
    marker). ``direction="up"`` / ``"down"`` keeps only the up- / down-chirp symbols (the others
    silent): the two halves a receiver correlates separately to cancel the time bias that a
    frequency offset puts on a chirp.
    """
    if direction not in ("both", "up", "down"):
        raise ValueError(f"direction must be 'both', 'up' or 'down', got {direction!r}")
    rate = float(rate)
    if not (math.isfinite(rate) and rate >= 2 * (START_HZ[-1] + SWEEP_HZ) + 1):
        raise ValueError(f"rate must be finite and above {2 * (START_HZ[-1] + SWEEP_HZ):g} Hz, got {rate}")
    up, start = marker_code(marker_id)
    bounds = symbol_bounds(rate)
    out = np.zeros(int(bounds[-1]), dtype=np.complex128 if analytic else np.float64)
    taper_n = max(1, int(round(TAPER_S * rate)))
    for i in range(N_SYMBOLS):
        if (direction == "up" and not up[i]) or (direction == "down" and up[i]):
            continue
        lo, hi = int(bounds[i]), int(bounds[i + 1])
        n = hi - lo
        dur = n / rate
        t = np.arange(n, dtype=np.float64) / rate
        f0 = START_HZ[int(start[i])]
        if up[i]:
            f_start, slope = f0, SWEEP_HZ / dur
        else:
            f_start, slope = f0 + SWEEP_HZ, -SWEEP_HZ / dur
        phase = 2.0 * math.pi * (f_start * t + 0.5 * slope * t * t)
        env = np.ones(n)
        k = min(taper_n, n // 2)
        ramp = 0.5 - 0.5 * np.cos(math.pi * (np.arange(k) + 0.5) / k)
        env[:k] = ramp
        env[n - k :] = ramp[::-1]
        seg = np.exp(1j * phase) if analytic else np.sin(phase)
        out[lo:hi] = amplitude * env * seg
    return out
