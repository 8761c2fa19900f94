"""The sample-clock map between a reference and a reception, and its compensation.

A reception of a reference played by a transmitter and recorded by a receiver whose sample clocks
differ is, to first order, the reference read at positions on a straight line::

    j(k) = offset + ratio * k        (k: reference sample, j: reception sample, both fractional)

``ratio`` is the ratio of the two sample rates (times the nominal ratio when they differ on
purpose, e.g. an 8 kHz reference received at 12 kHz); its deviation from the nominal ratio is
the sampling-rate offset (SRO) in ppm. :func:`fit_clock` fits the line to marker positions
robustly: every pair of markers proposes a line, the one with most markers within ``tol``
samples wins, and a least-squares fit over those markers gives the map. Markers off the line
(a wrong detection, or samples lost in between) are outliers.

:func:`interpolate` reads a signal at arbitrary fractional positions with a Kaiser-windowed sinc
(band-limited interpolation; the cutoff follows the local ratio, so reading a 12 kHz reception
at an 8 kHz reference's positions low-passes it first). It resamples by any ratio in one step,
exactly on the fitted line, without accumulated drift.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from numpy.typing import ArrayLike, NDArray

from streamkit.dsp.kernels.interp import interp_kernel, interp_table

__all__ = ["ClockMap", "fit_clock", "interpolate"]


@dataclass(frozen=True, slots=True)
class ClockMap:
    """``j = offset + ratio * k``.

    Attributes:
        offset: reception sample of reference sample 0.
        ratio: reception samples per reference sample.
        inliers: indices (into the fitted points) on the line.
        residual_rms: RMS distance of the inliers from the line, reception samples.
    """

    offset: float
    ratio: float
    inliers: tuple[int, ...]
    residual_rms: float

    def __call__(self, k: ArrayLike) -> NDArray[np.float64]:
        return self.offset + self.ratio * np.asarray(k, dtype=np.float64)

    def sro_ppm(self, nominal_ratio: float) -> float:
        """Sampling-rate offset in ppm relative to ``nominal_ratio`` (e.g. receiver rate / reference rate)."""
        return (self.ratio / nominal_ratio - 1.0) * 1e6


def fit_clock(k: ArrayLike, j: ArrayLike, *, nominal_ratio: float, tol: float, max_ppm: float = 1000.0) -> ClockMap | None:
    """Fit ``j = offset + ratio * k`` to marker positions, robust to outliers.

    Args:
        k: reference positions (at least 1).
        j: reception positions of the same markers.
        nominal_ratio: the expected ratio (used alone when only one marker is given).
        tol: largest distance from the line (reception samples) of an inlier.
        max_ppm: lines whose ratio is further than this from ``nominal_ratio`` are not considered.

    Returns:
        The map, or None when no point is given.
    """
    kk = np.asarray(k, dtype=np.float64)
    jj = np.asarray(j, dtype=np.float64)
    n = kk.size
    if n == 0:
        return None
    if n == 1:
        return ClockMap(float(jj[0] - nominal_ratio * kk[0]), float(nominal_ratio), (0,), 0.0)
    best: tuple[int, float, tuple[int, ...]] | None = None
    for a, b in itertools.combinations(range(n), 2):
        if kk[b] == kk[a]:
            continue
        r = (jj[b] - jj[a]) / (kk[b] - kk[a])
        if abs(r / nominal_ratio - 1.0) * 1e6 > max_ppm:
            continue
        res = np.abs(jj - (jj[a] + r * (kk - kk[a])))
        inl = tuple(int(i) for i in np.flatnonzero(res <= tol))
        score = (len(inl), -float(np.sum(res[list(inl)] ** 2)))
        if best is None or score > (best[0], best[1]):
            best = (score[0], score[1], inl)
    if best is None or best[0] < 2:
        # no consistent pair: keep the first marker alone at the nominal ratio
        return ClockMap(float(jj[0] - nominal_ratio * kk[0]), float(nominal_ratio), (0,), 0.0)
    inl = list(best[2])
    ratio, offset = np.polyfit(kk[inl], jj[inl], 1)
    res = jj[inl] - (offset + ratio * kk[inl])
    return ClockMap(float(offset), float(ratio), tuple(inl), float(math.sqrt(np.mean(res**2))))


def interpolate(x: ArrayLike, positions: ArrayLike, *, ratio: float = 1.0, half_width: int = 16, beta: float = 8.0) -> NDArray[np.float32]:
    """``x`` read at fractional ``positions`` (band-limited; zeros outside ``x``).

    ``ratio`` is the spacing of the positions in samples of ``x``; above 1 the kernel low-passes
    at ``0.5 / ratio`` cycles/sample (anti-aliasing). ``half_width`` zero crossings each side at
    that cutoff, Kaiser window ``beta`` (tabulated; the numba kernel
    :func:`~streamkit.dsp.kernels.interp.interp_kernel` does the sums).
    """
    sig = np.ascontiguousarray(x, dtype=np.float64)
    pos = np.ascontiguousarray(positions, dtype=np.float64).reshape(-1)
    cut = 0.97 * min(1.0, 1.0 / max(float(ratio), 1e-9))
    half = int(math.ceil(half_width / cut))
    table = _table(round(cut, 9), half, float(beta))
    out = np.zeros(pos.size, dtype=np.float32)
    interp_kernel(sig, pos, table, half, out)
    return out


@lru_cache(maxsize=16)
def _table(cut: float, half: int, beta: float) -> NDArray[np.float64]:
    return interp_table(cut, half, beta)
