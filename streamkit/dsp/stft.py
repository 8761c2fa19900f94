"""Short-time Fourier transform and its inverse, streaming, equal to scipy's on the whole signal.

:class:`STFT` turns audio into frames of one-sided spectra::

    X[j, c*n_freq + f] = scale * sum_t w[t] x_pad[j*hop + t, c] exp(-2i pi f t / n_fft)

with ``x_pad`` the input with ``n_fft // 2`` zeros at both ends and the tail zero-padded to a
whole number of hops (``center=True``), and ``scale = 1 / sum(w)`` (``scaling="spectrum"``) or
``1 / sqrt(rate * sum(w**2))`` (``"psd"``). That is exactly ``scipy.signal.stft(x, fs, window,
nperseg=n_fft, noverlap=n_fft-hop, boundary='zeros', padded=True)`` of the whole signal, for any
chunking: the runtime's window buffer supplies the padding (``pad_start``/``pad_end``) and the last
partial frame (``flush_partial``).

:class:`ISTFT` is ``scipy.signal.istft(..., boundary=True)``: windowed inverse FFTs overlap-added
and divided by the overlap-added squared window (where it exceeds 1e-10), the first and last
``n_fft // 2`` samples dropped. Samples are emitted as soon as no later frame can touch them.

Use them around a spectral-domain block (noise reduction, masking) or to feed spectral features.
"""

from __future__ import annotations

from collections.abc import Mapping
from fractions import Fraction
from typing import Any, ClassVar

import numba as nb
import numpy as np
from scipy.signal import check_NOLA, get_window

from streamkit.core.block import GapPolicy, RateBlock, WindowBlock
from streamkit.core.context import Context
from streamkit.core.errors import ConfigError
from streamkit.core.registry import register
from streamkit.core.tags import Gap
from streamkit.core.types import StreamSpec

SCALINGS = ("spectrum", "psd")


@nb.njit(cache=True, nogil=True)
def overlap_add(acc: np.ndarray, norm: np.ndarray, segs: np.ndarray, win2: np.ndarray, hop: int, offset: int) -> None:
    """Add frame ``segs[j]`` into ``acc[offset + j*hop :][:n]`` and ``win2`` into ``norm`` likewise.

    Args:
        acc: (m, channels) float64 accumulator, updated in place; ``m >= offset + (k-1)*hop + n``.
        norm: (m,) float64 window-power accumulator, updated in place.
        segs: (k, channels, n) float64 windowed frames.
        win2: (n,) float64 squared window.
        hop: frame advance in samples.
        offset: position of frame 0 in ``acc``.

    Frames are added in index order, so each sample's sum is formed in the same order whatever
    the chunking (bit-exact streaming).
    """
    k, ch, n = segs.shape
    for j in range(k):
        o = offset + j * hop
        for t in range(n):
            norm[o + t] += win2[t]
        for c in range(ch):
            for t in range(n):
                acc[o + t, c] += segs[j, c, t]


def _frame_params(n_fft: int | None, nperseg: int | None, hop: int | None, noverlap: int | None) -> tuple[int, int]:
    """Validate the (n_fft | nperseg, hop | noverlap) pairs; scipy's default overlap is n_fft // 2."""
    if n_fft is not None and nperseg is not None and int(n_fft) != int(nperseg):
        raise ConfigError(f"give n_fft or nperseg, not both ({n_fft} != {nperseg})")
    n = n_fft if n_fft is not None else nperseg
    if n is None:
        n = 256
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 2:
        raise ConfigError(f"n_fft must be an int >= 2, got {n!r}")
    n = int(n)
    if hop is not None and noverlap is not None:
        raise ConfigError("give hop or noverlap, not both")
    if hop is None:
        nov = n // 2 if noverlap is None else noverlap
        if isinstance(nov, bool) or not isinstance(nov, (int, np.integer)) or not 0 <= nov < n:
            raise ConfigError(f"noverlap must be an int in [0, n_fft), got {nov!r}")
        hop = n - int(nov)
    if isinstance(hop, bool) or not isinstance(hop, (int, np.integer)) or not 1 <= hop <= n:
        raise ConfigError(f"hop must be an int in [1, n_fft={n}], got {hop!r}")
    return n, int(hop)


def _window(window: Any, n: int) -> np.ndarray:
    """``scipy.signal.get_window(window, n)`` (periodic, float64), ConfigError if unknown."""
    spec = tuple(window) if isinstance(window, list) else window
    try:
        w = np.asarray(get_window(spec, n), dtype=np.float64)
    except (ValueError, TypeError) as exc:
        raise ConfigError(f"unknown window {window!r}: {exc}") from exc
    if not np.all(np.isfinite(w)) or not np.any(w):
        raise ConfigError(f"window {window!r} of length {n} is all zeros or not finite")
    return w


def _scale(w: np.ndarray, scaling: str, rate: Fraction) -> float:
    """scipy's STFT scale: 1/sum(w) for "spectrum", 1/sqrt(fs*sum(w**2)) for "psd"."""
    if scaling == "spectrum":
        return float(1.0 / w.sum())
    return float(1.0 / np.sqrt(float(rate) * (w * w).sum()))


def _configure(blk: Any, n_fft: int | None, nperseg: int | None, hop: int | None, noverlap: int | None, window: Any, center: bool,
               scaling: str) -> None:  # fmt: skip
    """Validate and store the framing shared by :class:`STFT` and :class:`ISTFT`."""
    blk.n_fft, blk.hop = _frame_params(n_fft, nperseg, hop, noverlap)
    if scaling not in SCALINGS:
        raise ConfigError(f"scaling must be one of {SCALINGS}, got {scaling!r}")
    _window(window, blk.n_fft)  # validate now; the array is made in start()
    blk.window_spec = window
    blk.center = bool(center)
    blk.scaling = scaling
    blk.n_freq = blk.n_fft // 2 + 1


@register("dsp.stft")
class STFT(WindowBlock):
    """Frames of one-sided spectra, equal to ``scipy.signal.stft`` of the whole signal.

    Ports:
        in: float32 audio, any rate, C channels.
        out: complex64 frames at ``rate / hop``, ``n_freq * C`` channels, channel-major
            (column ``c * n_freq + f`` is bin ``f`` of input channel ``c``), ``n_freq = n_fft//2+1``.
    Parameters:
        n_fft (alias nperseg): frame length in samples (>= 2); default 256. No FFT zero-padding.
        hop: frame advance in samples (1..n_fft); or noverlap = n_fft - hop. Default: scipy's
            ``noverlap = n_fft // 2``.
        window: a ``scipy.signal.get_window`` spec (name or tuple), periodic; default ``"hann"``.
        center: True (default): scipy's ``boundary='zeros', padded=True`` (frame j is centred on
            input item ``j*hop``, the last partial frame is zero-padded and emitted at flush).
            False: ``boundary=None, padded=False`` (frame j starts at item ``j*hop``, no tail frame).
        scaling: ``"spectrum"`` (default) or ``"psd"``, as scipy.
    Tags:
        Forwarded; a tag at input item ``i`` goes to frame ``round_half_up((i + pad_start -
        n_fft/2) / hop)``: the frame centred nearest to it (``round_half_up(i / hop)`` when centred
        with an even ``n_fft``).
    Events:
        None.
    Latency:
        ``n_fft - n_fft // 2`` input items (a frame needs the half window after its centre).
    State:
        None in the block; the runtime's window buffer holds up to ``n_fft`` items. Gaps do not
        reset (``on_gap`` CONTINUE): the transform is linear and the index contiguous, so frames
        straddle a gap like any other transient and STFT -> ISTFT still gives back every item (a
        reset would drop the frames of the last ``n_fft/2`` items before the gap, because the
        runtime clears the window buffer without the end-of-stream tail).
    Notes:
        Inputs shorter than ``n_fft`` differ from scipy, which then shrinks ``nperseg`` to the
        input length; the block keeps its configured frame.
    """

    on_gap: ClassVar[GapPolicy] = GapPolicy.CONTINUE

    def __init__(
        self,
        *,
        n_fft: int | None = None,
        nperseg: int | None = None,
        hop: int | None = None,
        noverlap: int | None = None,
        window: Any = "hann",
        center: bool = True,
        scaling: str = "spectrum",
        name: str | None = None,
    ) -> None:
        super().__init__(name=name)
        _configure(self, n_fft, nperseg, hop, noverlap, window, center, scaling)
        self.window = self.n_fft
        self.pad_start = self.n_fft // 2 if self.center else 0
        self.pad_end = self.n_fft // 2 if self.center else 0
        self.flush_partial = self.center
        self._channels = 1

    def negotiate(self, inputs: Mapping[str, StreamSpec]) -> dict[str, StreamSpec]:
        spec = inputs["in"]
        if spec.dtype != np.float32:
            raise ConfigError(f"{self.name}: needs float32 audio, got {spec.dtype}")
        self._channels = spec.channels
        return {"out": StreamSpec(spec.rate / self.hop, self.n_freq * spec.channels, np.dtype(np.complex64))}

    def start(self, ctx: Context) -> None:
        spec = ctx.input_spec("in")
        self._channels = spec.channels
        w = _window(self.window_spec, self.n_fft)
        # window and scale folded into one (n_fft, 1) column broadcast over channels
        self._wcol = (w * _scale(w, self.scaling, spec.rate))[:, None]

    def work_windows(self, frames: np.ndarray, start: int, ctx: Context) -> np.ndarray:
        k = frames.shape[0]
        spec = np.fft.rfft(frames * self._wcol, axis=1)  # float64 (k, n_fft, C) -> (k, n_freq, C)
        return spec.transpose(0, 2, 1).reshape(k, self._channels * self.n_freq).astype(np.complex64)

    def apply_params(self, changes: Mapping[str, Any]) -> None:
        """The frame layout is fixed once negotiated."""
        if changes:
            raise ConfigError(f"{self.name}: {sorted(changes)} cannot change while running; build a new graph")


@register("dsp.istft")
class ISTFT(RateBlock):
    """Audio from STFT frames, equal to ``scipy.signal.istft(..., boundary=True)`` of all frames.

    Ports:
        in: complex64 frames, ``n_freq * C`` channels (channel-major, as :class:`STFT` makes
            them), ``n_freq = n_fft // 2 + 1``.
        out: float32 audio at ``rate * hop``, C channels.
    Parameters:
        n_fft (alias nperseg), hop (or noverlap), window, center, scaling: as :class:`STFT`;
        they must match the analysis. ``center=True`` is scipy's ``boundary=True`` (the first and
        last ``n_fft // 2`` samples are dropped); the window/hop pair must satisfy NOLA.
    Tags:
        Forwarded; a tag on frame ``j`` goes to the output item at the frame's centre,
        ``j * hop`` when centred with an even ``n_fft`` (``delay`` = (n_fft/2 - trim) / hop).
    Events:
        None.
    Latency:
        ``ceil(n_fft / 2 / hop)`` frames: a sample is final when no later frame overlaps it.
    State:
        The overlap-add tail (``n_fft - hop`` samples per channel and their window power) and the
        count of frames seen; ``reset()`` clears them (the next frame is treated as the first).
        Gaps do not reset (``on_gap`` CONTINUE), for the reason given in :class:`STFT`.
    Output length:
        ``(frames - 1) * hop + n_fft - 2 * trim`` (scipy's), i.e. ``frames * hop - hop`` for even
        ``n_fft`` centred: the runtime's length check is widened by ``length_slack`` accordingly.
    """

    on_gap: ClassVar[GapPolicy] = GapPolicy.CONTINUE

    def __init__(
        self,
        *,
        n_fft: int | None = None,
        nperseg: int | None = None,
        hop: int | None = None,
        noverlap: int | None = None,
        window: Any = "hann",
        center: bool = True,
        scaling: str = "spectrum",
        name: str | None = None,
    ) -> None:
        super().__init__(name=name)
        _configure(self, n_fft, nperseg, hop, noverlap, window, center, scaling)
        if not check_NOLA(tuple(window) if isinstance(window, list) else window, self.n_fft, self.n_fft - self.hop):
            raise ConfigError(f"window {window!r} with n_fft={self.n_fft}, hop={self.hop} violates NOLA: not invertible")
        self.trim = self.n_fft // 2 if self.center else 0
        self.ratio = Fraction(self.hop)
        self.delay = Fraction(self.n_fft - 2 * self.trim, 2 * self.hop)
        self.length_slack = abs(self.n_fft - 2 * self.trim - self.hop) + 1
        self._channels = 1

    def algorithmic_latency(self) -> int:
        return -(-(self.n_fft // 2) // self.hop) if self.n_fft // 2 else 0

    def negotiate(self, inputs: Mapping[str, StreamSpec]) -> dict[str, StreamSpec]:
        spec = inputs["in"]
        if spec.dtype != np.complex64:
            raise ConfigError(f"{self.name}: needs complex64 frames, got {spec.dtype}")
        if spec.channels % self.n_freq:
            raise ConfigError(f"{self.name}: {spec.channels} channels is not a multiple of n_freq={self.n_freq} (n_fft={self.n_fft})")
        self._channels = spec.channels // self.n_freq
        return {"out": StreamSpec(spec.rate * self.hop, self._channels, np.dtype(np.float32))}

    def start(self, ctx: Context) -> None:
        spec = ctx.input_spec("in")
        self._channels = spec.channels // self.n_freq
        w = _window(self.window_spec, self.n_fft)
        out_rate = spec.rate * self.hop
        # scipy: xsubs *= 1/scale (sum(w) or sqrt(fs*sum(w^2))), then x += xsubs * w
        self._wrow = w / _scale(w, self.scaling, out_rate)
        self._win2 = w * w
        self.reset()
        # numba warm-up with the exact argument types of work()
        overlap_add(np.zeros((self.n_fft, self._channels)), np.zeros(self.n_fft), np.zeros((1, self._channels, self.n_fft)), self._win2, self.hop, 0)

    def work(self, x: np.ndarray, ctx: Context) -> np.ndarray:
        k = x.shape[0]
        n, hop, ch = self.n_fft, self.hop, self._channels
        segs = np.fft.irfft(x.reshape(k, ch, self.n_freq).astype(np.complex128), n=n, axis=2) * self._wrow  # (k, C, n)
        # pre-trim samples [base, base + len(acc)) are open; the new frames start at frames*hop
        first = self._frames * hop
        m = first + (k - 1) * hop + n - self._base
        acc = np.zeros((m, ch))
        norm = np.zeros(m)
        m0 = self._acc.shape[0]
        acc[:m0] = self._acc
        norm[:m0] = self._norm
        overlap_add(acc, norm, segs, self._win2, hop, first - self._base)
        self._frames += k
        # final: no later frame reaches them, and they are not in the trailing trim if the stream ended now
        done = min(self._frames * hop, (self._frames - 1) * hop + n - self.trim) - self._base
        y = self._final(acc[:done], norm[:done])
        self._acc = acc[done:].copy()
        self._norm = norm[done:].copy()
        return y

    def reset(self, cause: Gap | None = None) -> None:
        self._acc = np.zeros((self.n_fft - self.hop, self._channels))
        self._norm = np.zeros(self.n_fft - self.hop)
        self._frames = 0  # frames overlap-added since the last reset
        self._base = 0  # pre-trim index of _acc[0]: everything before it was emitted or trimmed

    def flush(self, ctx: Context) -> np.ndarray | None:
        if self._frames == 0:
            return None
        # the rest of the last frame, minus the trailing trim
        done = (self._frames - 1) * self.hop + self.n_fft - self.trim - self._base
        y = self._final(self._acc[:done], self._norm[:done])
        self.reset()
        return y if y.shape[0] else None

    def apply_params(self, changes: Mapping[str, Any]) -> None:
        """The frame layout is fixed once negotiated."""
        if changes:
            raise ConfigError(f"{self.name}: {sorted(changes)} cannot change while running; build a new graph")

    def _final(self, acc: np.ndarray, norm: np.ndarray) -> np.ndarray:
        """Normalise the final pre-trim samples ``[base, base + len(acc))`` and drop the leading trim."""
        lo = max(self.trim - self._base, 0)
        self._base += acc.shape[0]
        if acc.shape[0] <= lo:
            return np.zeros((0, self._channels), dtype=np.float32)
        nrm = norm[lo:]
        return (acc[lo:] / np.where(nrm > 1e-10, nrm, 1.0)[:, None]).astype(np.float32)
