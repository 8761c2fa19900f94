"""Small vectorised signal helpers shared by the HF distractor generators
(:mod:`streamkit.data.hf_distractor_digital`, :mod:`streamkit.data.hf_distractor_analog`).

Every helper works on whole arrays (no per-sample Python loop); times are in seconds, frequencies
are audio frequencies in Hz as an SSB receiver outputs them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from scipy.signal import butter, oaconvolve, sosfiltfilt

__all__ = ["bandlimit", "fm", "gauss_smooth", "hold", "keyed_envelope", "random_walk", "ramp", "times"]


def times(n: int, rate: int, t0: float = 0.0) -> np.ndarray:
    """Sample times ``t0 + k / rate`` (float64, ``(n,)``)."""
    return t0 + np.arange(n, dtype=np.float64) / rate


def hold(values: Sequence[float] | np.ndarray, durations: Sequence[float] | np.ndarray, n: int, rate: int, t0: float = 0.0,
         fill: float = 0.0) -> np.ndarray:  # fmt: skip
    """Per-sample piecewise-constant signal: ``values[i]`` for ``durations[i]`` seconds, the first
    piece starting at ``t0`` s; ``fill`` before ``t0`` and after the last piece. Piece edges are
    on the exact (fractional) time grid, so long sequences do not drift."""
    v = np.asarray(values, dtype=np.float64)
    edges = t0 + np.concatenate(([0.0], np.cumsum(np.asarray(durations, dtype=np.float64))))
    idx = np.searchsorted(edges, times(n, rate), side="right") - 1
    ok = (idx >= 0) & (idx < v.shape[0])
    out = np.full(n, fill, dtype=np.float64)
    out[ok] = v[idx[ok]]
    return out


def fm(freq: np.ndarray, rate: int, phase0: float = 0.0) -> np.ndarray:
    """``cos`` of the integrated instantaneous frequency ``freq`` (Hz per sample): continuous phase."""
    return np.cos(phase0 + 2 * np.pi * np.cumsum(np.asarray(freq, np.float64)) / rate)


def _same(x: np.ndarray, k: np.ndarray) -> np.ndarray:
    """Centred convolution of ``x`` with the (odd-length) kernel ``k``, same length."""
    if k.shape[0] <= 1 or x.shape[0] == 0:
        return np.asarray(x, np.float64)
    y = oaconvolve(np.asarray(x, np.float64), k)
    d = (k.shape[0] - 1) // 2
    return y[d : d + x.shape[0]]


def keyed_envelope(key: np.ndarray, rise_s: float, rate: int) -> np.ndarray:
    """On/off keying ``key`` (0/1 per sample) with raised-cosine edges of ``rise_s`` seconds.

    The key is convolved with a normalised half-sine of the rise time: a step becomes exactly
    ``0.5 (1 - cos(pi t / rise))`` centred on the step, so a key-down of length ``L >= rise``
    keeps its length at half amplitude."""
    m = max(1, int(round(rise_s * rate)))
    m += 1 - m % 2  # odd: centred
    k = np.sin(np.pi * (np.arange(m) + 0.5) / m)
    return np.clip(_same(key, k / k.sum()), 0.0, 1.0)


def gauss_smooth(x: np.ndarray, sigma_s: float, rate: int) -> np.ndarray:
    """``x`` smoothed by a unit-gain Gaussian of standard deviation ``sigma_s`` seconds (edges held)."""
    s = sigma_s * rate
    if s < 0.5:
        return np.asarray(x, np.float64)
    h = int(math.ceil(4 * s))
    k = np.exp(-0.5 * (np.arange(-h, h + 1) / s) ** 2)
    x = np.asarray(x, np.float64)
    pad = np.concatenate((np.full(h, x[0]), x, np.full(h, x[-1]))) if x.size else x
    return _same(pad, k / k.sum())[h : h + x.shape[0]]


def random_walk(rng: np.random.Generator, n: int, rate: int, step_s: float, sigma: float) -> np.ndarray:
    """A smooth random wander (zero start): Gaussian steps of ``sigma`` every ``step_s`` s,
    cumulated and linearly interpolated to the sample grid."""
    k = max(2, int(math.ceil(n / rate / step_s)) + 2)
    knots = np.concatenate(([0.0], np.cumsum(rng.normal(0.0, sigma, k - 1))))
    return np.interp(times(n, rate), np.arange(k) * step_s, knots)


def ramp(n: int, rise: int) -> np.ndarray:
    """Raised-cosine fade-in and fade-out of ``rise`` samples each on ``n`` samples."""
    g = np.ones(n)
    r = min(rise, n // 2)
    if r > 0:
        w = 0.5 * (1 - np.cos(np.pi * (np.arange(r) + 0.5) / r))
        g[:r] = w
        g[n - r :] = w[::-1]
    return g


def bandlimit(x: np.ndarray, rate: int, lo: float = 300.0, hi: float = 3000.0, order: int = 4) -> np.ndarray:
    """Zero-phase Butterworth band-pass (the receiver's audio passband)."""
    hi = min(hi, 0.45 * rate)
    if x.shape[0] < 64:
        return np.asarray(x, np.float64)
    sos = butter(order, [lo, hi], btype="bandpass", fs=rate, output="sos")
    return sosfiltfilt(sos, np.asarray(x, np.float64))
