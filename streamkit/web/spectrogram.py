"""Waterfall rows from audio: a Welch-averaged power spectrum every 1/``rows_per_s`` s, one byte per bin.

A row covers the items ``[b_k, b_{k+1})`` with ``b_k = floor(k * rate / rows_per_s)`` counted on the
absolute item index, so rows line up with the stream's index (and its time anchors) at any rate, e.g.
a KiwiSDR's 12001.188 Hz. Each row averages Hann-windowed FFTs of ``2 * bins`` items (50 % overlap)
that end at the row's last item, reaching back before the row when the row is shorter than one FFT.
The bins span 0 to Nyquist (the FFT's Nyquist bin is dropped). Power is in dB relative to a
full-scale sine, clipped to ``[floor_db, ceil_db]`` and quantised to 0..255.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

__all__ = ["WaterfallRows", "dequantise"]


def dequantise(row: np.ndarray, floor_db: float = -130.0, ceil_db: float = -10.0) -> np.ndarray:
    """dB values of a quantised row (the inverse of the quantisation, to 1/255 of the range)."""
    return floor_db + row.astype(np.float64) * (ceil_db - floor_db) / 255.0


class WaterfallRows:
    """Incremental waterfall rows of one real mono stream.

    ``push(samples, start)`` takes the next items (``start`` is the absolute index of
    ``samples[0]``; it must continue the previous push) and returns the rows completed:
    ``(end_index, row)`` with ``row`` a ``uint8`` array of ``bins`` values.
    """

    def __init__(
        self, rate: float | Fraction, *, bins: int = 256, rows_per_s: float = 10.0, floor_db: float = -130.0, ceil_db: float = -10.0
    ) -> None:
        if bins < 8:
            raise ValueError(f"bins must be >= 8, got {bins}")
        if not rows_per_s > 0:
            raise ValueError(f"rows_per_s must be > 0, got {rows_per_s}")
        if not ceil_db > floor_db:
            raise ValueError("ceil_db must be above floor_db")
        self.rate = Fraction(rate).limit_denominator(10**6) if not isinstance(rate, Fraction) else rate
        if self.rate <= 0:
            raise ValueError(f"rate must be > 0, got {rate}")
        self.bins = bins
        self.nfft = 2 * bins
        self.hop = self.nfft // 2
        self.row_len = self.rate / Fraction(rows_per_s).limit_denominator(1000)
        self.floor_db = floor_db
        self.ceil_db = ceil_db
        self._win = np.hanning(self.nfft + 2)[1:-1].astype(np.float32)  # no zero end points
        # |X|^2 of a full-scale sine at a bin centre is (sum(w)/2)^2: that is 0 dB
        self._ref = (float(self._win.sum()) / 2.0) ** 2
        self._scale = 255.0 / (ceil_db - floor_db)
        self._k = None  # index of the next row to complete
        self._buf = np.zeros(0, np.float32)
        self._buf_start = 0
        self._next_end = 0
        n_frames = max(1, math.ceil(float(self.row_len) / self.hop))
        self._frame_offsets = np.arange(n_frames)[::-1] * self.hop  # frames end at e, e-hop, ...
        self._keep = self.nfft + int(n_frames * self.hop) + 1

    def _row_end(self, k: int) -> int:
        return int(math.floor(k * self.row_len))

    def push(self, samples: np.ndarray, start: int) -> list[tuple[int, np.ndarray]]:
        x = np.asarray(samples, dtype=np.float32).reshape(-1)
        if self._k is None:
            self._k = int(math.floor(start / self.row_len)) + 1
            self._buf_start = start
            self._next_end = self._row_end(self._k)
        elif start != self._buf_start + self._buf.size:
            raise ValueError(f"push at {start}, expected {self._buf_start + self._buf.size}")
        self._buf = np.concatenate([self._buf, x]) if self._buf.size else x.copy()
        stop = self._buf_start + self._buf.size
        ends = []
        while self._next_end <= stop:
            ends.append(self._next_end)
            self._k += 1
            self._next_end = self._row_end(self._k)
        rows = [(e, self._row(e)) for e in ends]
        if self._buf.size > self._keep:
            cut = self._buf.size - self._keep
            self._buf = self._buf[cut:]
            self._buf_start += cut
        return rows

    def _row(self, end: int) -> np.ndarray:
        e = end - self._buf_start  # position of the row's end in the buffer
        offs = e - self.nfft - self._frame_offsets
        offs = offs[offs >= 0]
        if offs.size == 0:  # the stream's first items: one zero-padded frame
            seg = np.zeros(self.nfft, np.float32)
            avail = self._buf[max(0, e - self.nfft) : e]
            seg[self.nfft - avail.size :] = avail
            frames = seg[None, :]
        else:
            frames = np.lib.stride_tricks.sliding_window_view(self._buf[:e], self.nfft)[offs]
        spec = np.fft.rfft(frames * self._win, axis=1)[:, : self.bins]
        power = (spec.real**2 + spec.imag**2).mean(axis=0) / self._ref
        db = 10.0 * np.log10(power + 1e-30)
        return np.clip((db - self.floor_db) * self._scale, 0.0, 255.0).astype(np.uint8)
