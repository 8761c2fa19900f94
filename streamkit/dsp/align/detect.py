"""Marker detection: STFT binary-mask correlation (coarse), waveform correlation (fine).

Coarse: the reception's power spectrogram (Hann window of :attr:`SpecGrid.n_fft`, hop
:attr:`SpecGrid.hop`, frames on the grid ``0, hop, 2 hop, ...``) is normalised per frame over the
band :data:`BAND_HZ`, so each frame holds the *fraction* of its in-band power per bin (an AGC, a
fade or the level of the station changes nothing). A marker's own spectrogram thresholded at
-10 dB of each frame's peak (and widened by one bin each side, for mistuning) is a binary mask;
the score of a start frame ``s`` is the mean over the marker's frames of the in-mask fraction::

    score[s] = (1 / T) * sum_{tau < T} sum_f mask[f, tau] * Pn[f, s + tau]

1.0 for a clean marker, about (mask bins / band bins) ~ 0.1-0.15 on noise, and about 0.2-0.3 for
another marker at its best lag (the Gold codes make their masks overlap little). Computed for every ``s`` at once
by FFT correlation along time, bin by bin, summed before one inverse transform (:class:`ScoreBank`).

Fine: around the coarse position, the analytic reception is correlated with each analytic chirp
symbol of the marker, and the magnitudes are summed over the up-chirp symbols and over the
down-chirp symbols separately (incoherent combining: a fade or a frequency offset that turns the
phase from symbol to symbol costs nothing); each sum's peak is located to a fraction of a sample
by a parabola through its three highest points. A frequency offset ``df`` (mistuning)
moves an up-chirp's peak by ``-df / slope`` and a down-chirp's by ``+df / slope``, so the mean of
the two is nearly unbiased and half their difference measures the offset ``df``; the reception is
then shifted back by ``df`` and the magnitudes of all symbols are summed once more: that peak
(parabola) is the position.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Final

import numpy as np
from numpy.typing import NDArray
from scipy import fft as sp_fft
from scipy.signal import hilbert

from streamkit.dsp.markers import N_SYMBOLS, SWEEP_HZ, marker_code, marker_length, marker_waveform, symbol_bounds

__all__ = ["BAND_HZ", "FineMarker", "ScoreBank", "SpecGrid", "marker_mask", "normalized_spectrogram", "parabolic_peak", "refine", "score_curve"]

#: the band the detector looks at (an SSB voice channel)
BAND_HZ: Final = (250.0, 2750.0)
#: power floor per frame (relative to a full-scale sine's frame power) below which a frame counts as silent
_FLOOR: Final = 1e-12


@dataclass(frozen=True, slots=True)
class SpecGrid:
    """STFT grid of the detector at ``rate`` Hz: window ``n_fft`` samples, hop ``hop`` samples."""

    rate: float
    n_fft: int
    hop: int

    @classmethod
    def for_rate(cls, rate: float, hop_s: float = 0.004) -> SpecGrid:
        """About 16 ms windows (a power of two) and ``hop_s`` hops at ``rate``."""
        n_fft = 1 << max(5, int(round(math.log2(0.016 * float(rate)))))
        hop = max(1, int(round(hop_s * float(rate))))
        return cls(float(rate), n_fft, min(hop, n_fft))

    def band_bins(self) -> slice:
        lo = int(math.ceil(BAND_HZ[0] * self.n_fft / self.rate))
        hi = int(math.floor(BAND_HZ[1] * self.n_fft / self.rate)) + 1
        return slice(lo, hi)


def _frames_power(x: NDArray[np.floating], grid: SpecGrid) -> NDArray[np.float64]:
    """Power spectrogram (band bins, frames) of ``x`` on the grid (only whole frames)."""
    x = np.asarray(x, dtype=np.float64)
    n_frames = 0 if x.size < grid.n_fft else 1 + (x.size - grid.n_fft) // grid.hop
    band = grid.band_bins()
    if n_frames == 0:
        return np.zeros((band.stop - band.start, 0))
    idx = np.arange(grid.n_fft)[None, :] + grid.hop * np.arange(n_frames)[:, None]
    win = np.hanning(grid.n_fft + 2)[1:-1]
    out = np.empty((band.stop - band.start, n_frames))
    step = 4096
    for a in range(0, n_frames, step):
        spec = np.fft.rfft(x[idx[a : a + step]] * win, axis=1)[:, band]
        out[:, a : a + step] = (spec.real**2 + spec.imag**2).T
    return out


def normalized_spectrogram(x: NDArray[np.floating], grid: SpecGrid) -> NDArray[np.float64]:
    """Per-frame in-band power fractions ``Pn`` (band bins, frames); a silent frame is all zeros."""
    p = _frames_power(x, grid)
    total = p.sum(axis=0)
    floor = _FLOOR * grid.n_fft**2
    return np.where(total > floor, p / np.maximum(total, floor), 0.0)


@lru_cache(maxsize=256)
def _mask_cached(marker_id: int, rate: float, n_fft: int, hop: int) -> NDArray[np.bool_]:
    grid = SpecGrid(rate, n_fft, hop)
    p = _frames_power(marker_waveform(marker_id, rate), grid)
    peak = p.max(axis=0, keepdims=True)
    m = p >= 0.1 * np.maximum(peak, 1e-30)
    m[1:] |= m[:-1].copy()
    m[:-1] |= m[1:].copy()
    m.flags.writeable = False
    return m


def marker_mask(marker_id: int, grid: SpecGrid) -> NDArray[np.bool_]:
    """Binary STFT mask (band bins, frames) of marker ``marker_id`` on ``grid``."""
    return _mask_cached(int(marker_id), float(grid.rate), grid.n_fft, grid.hop)


class ScoreBank:
    """The score curves of any number of masks over one normalised spectrogram ``pn``.

    ``score[s] = (1 / T) sum_f sum_tau mask[f, tau] pn[f, s + tau]`` is, per band bin ``f``, a 1-D
    correlation along time; their sum is one inverse FFT of the summed cross spectra. The
    spectrogram's spectra along time are computed once (float32), so each further mask costs its
    own transform, a product summed over the bins and one inverse transform (a 2-D FFT
    convolution would transform twice as many rows, and ``pn`` again for every mask).
    """

    def __init__(self, pn: NDArray[np.float64]) -> None:
        self.frames = int(pn.shape[1])
        self.nfft = sp_fft.next_fast_len(max(self.frames, 1), real=True)
        self.spec = sp_fft.rfft(np.asarray(pn, dtype=np.float32), self.nfft, axis=1)

    def score(self, mask: NDArray[np.bool_]) -> NDArray[np.float64]:
        """``score[s]`` for every start frame ``s`` with the whole mask inside ``pn`` (empty if too short)."""
        t = mask.shape[1]
        if self.frames < t:
            return np.zeros(0)
        m = sp_fft.rfft(mask.astype(np.float32), self.nfft, axis=1)
        cross = np.einsum("ft,ft->t", self.spec, np.conj(m))
        # circular correlation; no wrap for s <= frames - t since nfft >= frames
        c = sp_fft.irfft(cross, self.nfft)[: self.frames - t + 1].astype(np.float64)
        return np.clip(c / t, 0.0, None)


def score_curve(pn: NDArray[np.float64], mask: NDArray[np.bool_]) -> NDArray[np.float64]:
    """``score[s]`` for every start frame ``s`` with the whole mask inside ``pn`` (empty if too short)."""
    return ScoreBank(pn).score(mask)


def parabolic_peak(y: NDArray[np.floating], i: int) -> float:
    """Fractional index of the peak at ``i`` of ``y`` (parabola through ``i - 1, i, i + 1``)."""
    if i <= 0 or i >= len(y) - 1:
        return float(i)
    a, b, c = float(y[i - 1]), float(y[i]), float(y[i + 1])
    den = a - 2.0 * b + c
    return float(i) if den >= 0 else float(i) + 0.5 * (a - c) / den


@dataclass(frozen=True, slots=True)
class FineMarker:
    """A marker located on the waveform.

    Attributes:
        position: fractional sample index of the marker's first sample in the searched signal.
        freq_offset_hz: frequency offset of the reception (+ = shifted up), from the up/down split.
        quality: normalised correlation peak in [0, 1] (1 for a clean, undistorted marker).
    """

    position: float
    freq_offset_hz: float
    quality: float


@lru_cache(maxsize=64)
def _symbols(marker_id: int, rate: float) -> tuple[NDArray[np.int64], NDArray[np.bool_], NDArray[np.complex128]]:
    """Symbol bounds, directions and the analytic marker."""
    up, _ = marker_code(marker_id)
    return symbol_bounds(rate), up, marker_waveform(marker_id, rate, analytic=True)


@lru_cache(maxsize=16)
def _symbol_spectra(marker_id: int, rate: float, nfft: int) -> tuple[NDArray[np.complex128], NDArray[np.float64]]:
    """Conjugate spectra (symbols, ``nfft``) of the analytic symbols and their norms."""
    bounds, _, full = _symbols(marker_id, rate)
    t = np.zeros((N_SYMBOLS, nfft), dtype=np.complex128)
    for i in range(N_SYMBOLS):
        a, b = int(bounds[i]), int(bounds[i + 1])
        t[i, : b - a] = full[a:b]
    spec = np.conj(sp_fft.fft(t, axis=1))
    spec.flags.writeable = False
    return spec, np.sqrt(np.sum(np.abs(t) ** 2, axis=1))


def _symbol_envelopes(xa: NDArray[np.complex128], marker_id: int, rate: float, lags: int) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """``(|c_i(l)|, norm_i(l))`` per symbol ``i`` and lag ``l < lags``: the magnitude of the
    correlation of symbol ``i`` with the reception at lag ``l``, and the product of the two norms.

    All symbols at once: the reception's segment under each symbol (``lags - 1`` samples longer)
    is one row of a batch transformed together; the symbols' spectra are cached per size.
    """
    bounds, _, _ = _symbols(marker_id, rate)
    width = int(np.max(np.diff(bounds)))
    nfft = sp_fft.next_fast_len(-(-(width + lags - 1) // 512) * 512)  # few distinct sizes: a small cache
    tspec, tnorm = _symbol_spectra(marker_id, rate, nfft)
    seg = np.zeros((N_SYMBOLS, nfft), dtype=np.complex128)
    norms = np.empty((N_SYMBOLS, lags))
    cs = np.concatenate(([0.0], np.cumsum(np.abs(xa) ** 2)))
    for i in range(N_SYMBOLS):
        a, b = int(bounds[i]), int(bounds[i + 1])
        seg[i, : b - a + lags - 1] = xa[a : b + lags - 1]
        # circular correlation: no wrap for l < lags since nfft >= width + lags - 1
        e = cs[b : b + lags] - cs[a : a + lags]  # the reception's energy under the symbol at lag l
        norms[i] = np.sqrt(np.maximum(e, 0.0)) * tnorm[i]
    mags = np.abs(sp_fft.ifft(sp_fft.fft(seg, axis=1) * tspec, axis=1)[:, :lags])
    return mags, norms


def refine(x: NDArray[np.floating], coarse: int, marker_id: int, rate: float, search: int) -> FineMarker | None:
    """Locate marker ``marker_id`` in ``x`` within ``coarse +- search`` samples to a fraction of a sample.

    Symbols are combined incoherently (sum of correlation magnitudes), so fading and a residual
    frequency offset, which turn the phase from symbol to symbol, cost nothing. Returns None when
    the window does not fit in ``x``.
    """
    n = marker_length(rate)
    lo = int(coarse) - int(search)
    hi = int(coarse) + n + int(search)
    lo, hi = max(lo, 0), min(hi, len(x))
    lags = hi - lo - n + 1
    if lags < 1:
        return None
    xa = hilbert(np.asarray(x[lo:hi], dtype=np.float64))
    _, up, _ = _symbols(int(marker_id), float(rate))
    slope = SWEEP_HZ / (n / rate / N_SYMBOLS)
    mags, _ = _symbol_envelopes(xa, int(marker_id), float(rate), lags)
    env_up, env_down = mags[up].sum(axis=0), mags[~up].sum(axis=0)
    d_up = parabolic_peak(env_up, int(np.argmax(env_up)))
    d_down = parabolic_peak(env_down, int(np.argmax(env_down)))
    df = 0.5 * (d_down - d_up) / rate * slope
    # second pass: undo the frequency offset, then combine all symbols
    xc = xa * np.exp(-2j * math.pi * df * np.arange(xa.size) / rate)
    mags, norms = _symbol_envelopes(xc, int(marker_id), float(rate), lags)
    env = mags.sum(axis=0)
    i = int(np.argmax(env))
    quality = float(env[i] / max(float(norms[:, i].sum()), 1e-30))
    return FineMarker(position=lo + parabolic_peak(env, i), freq_offset_hz=df, quality=min(quality, 1.0))
