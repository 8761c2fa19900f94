"""GCC-PHAT time-delay estimation (Knapp & Carter, 1976).

The cross-power spectrum of a reference ``x`` and a reception ``y`` is whitened (phase transform:
divided by its magnitude) inside a band, so every frequency votes equally and the inverse
transform is a sharp peak at the delay whatever the spectra. The delay ``d`` is where
``y[n] ~ x[n - d]`` (positive: the reception lags), located to a fraction of a sample by a
parabola through the peak. Restricting the band (default 300-2700 Hz, an SSB voice channel)
keeps bins that hold only noise from voting.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from streamkit.dsp.align.detect import parabolic_peak

__all__ = ["GccResult", "consistent_median", "gcc_phat"]


@dataclass(frozen=True, slots=True)
class GccResult:
    """``delay`` in samples (positive: ``y`` lags ``x``) and the PHAT peak height (1 = identical up to delay)."""

    delay: float
    peak: float


def gcc_phat(x: ArrayLike, y: ArrayLike, rate: float, *, max_delay: int, band_hz: tuple[float, float] = (300.0, 2700.0)) -> GccResult:
    """Delay of ``y`` relative to ``x`` within ``+-max_delay`` samples by GCC-PHAT.

    Raises:
        ValueError: an empty input or a band with no bin.
    """
    a = np.asarray(x, dtype=np.float64)
    b = np.asarray(y, dtype=np.float64)
    if a.size == 0 or b.size == 0:
        raise ValueError("gcc_phat: empty input")
    n = 1 << int(np.ceil(np.log2(a.size + b.size + 1)))
    fa = np.fft.rfft(a, n)
    fb = np.fft.rfft(b, n)
    g = fb * np.conj(fa)
    f = np.fft.rfftfreq(n, 1.0 / float(rate))
    sel = (f >= band_hz[0]) & (f <= band_hz[1])
    if not np.any(sel):
        raise ValueError(f"gcc_phat: no frequency bin in {band_hz} Hz at {rate} Hz")
    mag = np.abs(g)
    w = np.zeros_like(g)
    ok = sel & (mag > 1e-30 * max(float(mag.max()), 1e-300))
    w[ok] = g[ok] / mag[ok]
    cc = np.fft.irfft(w, n) / max(int(np.count_nonzero(ok)), 1) * (n / 2)
    m = int(max_delay)
    lags = np.concatenate([cc[n - m :], cc[: m + 1]])  # lags -m .. m
    i = int(np.argmax(lags))
    return GccResult(delay=parabolic_peak(lags, i) - m, peak=float(lags[i]))


def consistent_median(delays: list[float], *, limit: float, min_segments: int, max_spread: float) -> tuple[float, str | None]:
    """The median of per-segment delays and None when it can be trusted, else ``(median, reason)``.

    Trusted: at least ``min_segments`` estimates, their median absolute deviation at most
    ``max_spread`` and the median's magnitude under ``limit`` (all in samples). On a fading
    multipath channel at low SNR single GCC-PHAT peaks land on the other path or on voiced
    speech's pitch period (ms away), so a median of a few disagreeing estimates is worse than the
    marker alignment it would correct.
    """
    if not delays:
        return 0.0, "no speech segment"
    med = float(np.median(delays))
    if len(delays) < min_segments:
        return med, f"{len(delays)} segment(s), fewer than {min_segments}"
    spread = float(np.median(np.abs(np.asarray(delays) - med)))
    if spread > max_spread:
        return med, f"segments disagree (median deviation {spread:.1f} samples)"
    if abs(med) >= limit:
        return med, "median beyond the limit"
    return med, None
