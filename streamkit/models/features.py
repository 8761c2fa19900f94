"""Log-mel features for the ASR models, offline and streaming (``torch.fft`` and our own mel matrix; no torchaudio/librosa).

The multi-softmax RNN-T paper (§5): 80-dimensional log-mel filter bank features every 10 ms,
eight consecutive frames stacked (640 dims) and the stack shifted by 30 ms. Here, at the
monitor's 8 kHz:

* frames of 200 samples (25 ms) every 80 samples (10 ms), no centring/padding: frame ``j`` covers
  samples ``[80 j, 80 j + 200)``; ``n >= 200`` samples give ``(n - 200) // 80 + 1`` frames;
* periodic Hann window, FFT size 512 (the 200 samples zero-padded: 257 bins 15.625 Hz apart, so
  the narrow low-frequency filters, about 17 Hz wide per side at 20 Hz, are sampled near their
  peaks: at 256 points the worst filter's largest weight is 0.21, at 512 it is 0.58), power
  spectrum ``|X|^2``;
* 80 triangular filters on the **HTK mel scale** ``mel(f) = 2595 log10(1 + f / 700)``, centres
  equally spaced in mel between 20 Hz and 4000 Hz (82 edge points), peak 1 (HTK/Kaldi style, no
  Slaney area normalisation), weights sampled at the FFT bin frequencies;
* ``log(max(energy, 1e-10))`` (natural log); no dither, no pre-emphasis, no mean removal (the
  model normalises its input with statistics from training data);
* stacking: output ``k`` is the concatenation of frames ``3k, 3k+1, ..., 3k+7`` (oldest first),
  i.e. the current frame and seven in the past, emitted every third frame (30 ms). ``F >= 8``
  frames give ``(F - 8) // 3 + 1`` stacked frames; nothing is padded at the start, so the first
  output appears after 8 frames (95 ms of audio).

:class:`LogMelStream` gives the same output for any split of the input into chunks (it keeps the
unconsumed samples and the last frames between pushes; tested with chunks of 1 sample to the
whole signal).
"""

from __future__ import annotations

import numpy as np
import torch

__all__ = [
    "RATE",
    "WIN",
    "HOP",
    "N_FFT",
    "N_MELS",
    "F_MIN",
    "F_MAX",
    "STACK",
    "STRIDE",
    "STACKED_DIM",
    "hz_to_mel",
    "mel_to_hz",
    "mel_filterbank",
    "n_frames",
    "n_stacked",
    "log_mel",
    "stack_frames",
    "features",
    "LogMelStream",
]

RATE = 8000
WIN = 200  #: 25 ms
HOP = 80  #: 10 ms
N_FFT = 512
N_MELS = 80
F_MIN = 20.0
F_MAX = 4000.0
STACK = 8  #: frames per stacked vector [PAPER]
STRIDE = 3  #: stacked vectors every 3 frames = 30 ms [PAPER]
STACKED_DIM = STACK * N_MELS
LOG_FLOOR = 1e-10


def hz_to_mel(f: np.ndarray | float) -> np.ndarray:
    """HTK mel scale."""
    return 2595.0 * np.log10(1.0 + np.asarray(f, dtype=np.float64) / 700.0)


def mel_to_hz(m: np.ndarray | float) -> np.ndarray:
    return 700.0 * (10.0 ** (np.asarray(m, dtype=np.float64) / 2595.0) - 1.0)


def mel_filterbank(n_mels: int = N_MELS, n_fft: int = N_FFT, rate: int = RATE, f_min: float = F_MIN, f_max: float = F_MAX) -> np.ndarray:
    """(n_fft // 2 + 1, n_mels) triangular HTK-mel filters with peak 1, sampled at the bin frequencies."""
    if not 0 <= f_min < f_max <= rate / 2:
        raise ValueError(f"need 0 <= f_min < f_max <= rate/2, got {f_min}, {f_max}, rate {rate}")
    edges = mel_to_hz(np.linspace(hz_to_mel(f_min), hz_to_mel(f_max), n_mels + 2))
    freqs = np.arange(n_fft // 2 + 1) * rate / n_fft
    lo, ce, hi = edges[:-2], edges[1:-1], edges[2:]
    up = (freqs[:, None] - lo[None, :]) / (ce - lo)[None, :]
    down = (hi[None, :] - freqs[:, None]) / (hi - ce)[None, :]
    return np.maximum(0.0, np.minimum(up, down))


_FB_CACHE: dict[tuple[torch.dtype, torch.device], tuple[torch.Tensor, torch.Tensor]] = {}


def _consts(dtype: torch.dtype, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    key = (dtype, device)
    if key not in _FB_CACHE:
        fb = torch.as_tensor(mel_filterbank(), dtype=dtype, device=device)
        win = torch.hann_window(WIN, periodic=True, dtype=dtype, device=device)
        _FB_CACHE[key] = (fb, win)
    return _FB_CACHE[key]


def n_frames(n: int) -> int:
    """10 ms frames in ``n`` samples."""
    return 0 if n < WIN else (n - WIN) // HOP + 1


def n_stacked(frames: int) -> int:
    """Stacked (30 ms) vectors from ``frames`` 10 ms frames."""
    return 0 if frames < STACK else (frames - STACK) // STRIDE + 1


def _as_tensor(x: np.ndarray | torch.Tensor) -> torch.Tensor:
    t = torch.as_tensor(x)
    if t.dim() != 1:
        raise ValueError(f"expected a mono 1-D signal, got shape {tuple(t.shape)}")
    if not t.dtype.is_floating_point:
        t = t.to(torch.float32)
    return t


def log_mel(x: np.ndarray | torch.Tensor) -> torch.Tensor:
    """(frames, 80) log-mel energies of a mono 8 kHz signal (float32 unless ``x`` is float64)."""
    x = _as_tensor(x)
    nf = n_frames(x.shape[0])
    if nf == 0:
        return x.new_zeros(0, N_MELS)
    fb, win = _consts(x.dtype, x.device)
    # torch.stft would need n_fft samples per frame (it centres a shorter window inside n_fft),
    # so frame explicitly: 200 samples, windowed, zero-padded to 512 by the real FFT
    spec = torch.fft.rfft(x[: (nf - 1) * HOP + WIN].unfold(0, WIN, HOP) * win, n=N_FFT)  # (frames, bins)
    power = spec.real.square() + spec.imag.square()
    return torch.log(torch.clamp(power @ fb, min=LOG_FLOOR))


def stack_frames(frames: torch.Tensor) -> torch.Tensor:
    """(F, 80) -> (n_stacked(F), 640): frames ``3k .. 3k+7`` concatenated, oldest first."""
    k = n_stacked(frames.shape[0])
    if k == 0:
        return frames.new_zeros(0, STACK * frames.shape[1])
    return frames.unfold(0, STACK, STRIDE)[:k].transpose(1, 2).reshape(k, STACK * frames.shape[1])


def features(x: np.ndarray | torch.Tensor) -> torch.Tensor:
    """Stacked log-mel features (n, 640) of a whole 8 kHz signal, one vector per 30 ms."""
    return stack_frames(log_mel(x))


class LogMelStream:
    """Stacked log-mel features of a signal pushed in pieces; equal to :func:`features` of the whole.

    ``push(x)`` returns the stacked vectors completed by ``x`` (possibly none). ``reset()`` starts a
    new signal. Stacked vector ``k`` since the last reset covers samples
    ``[240 k, 240 k + 760)``; :meth:`end_sample` gives the end of the latest one.
    """

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self._buf: torch.Tensor | None = None  # samples from the next frame's start on
        self._frames: torch.Tensor | None = None  # frames from the next stack's first frame on
        self.samples_in = 0
        self.frames_out = 0  # 10 ms frames computed
        self.stacked_out = 0  # stacked vectors emitted

    def end_sample(self) -> int:
        """Exclusive end sample of the last emitted stacked vector (0 before the first)."""
        if self.stacked_out == 0:
            return 0
        last_frame = STRIDE * (self.stacked_out - 1) + STACK - 1
        return last_frame * HOP + WIN

    def push(self, x: np.ndarray | torch.Tensor) -> torch.Tensor:
        x = _as_tensor(x)
        self.samples_in += int(x.shape[0])
        buf = x if self._buf is None else torch.cat([self._buf.to(x.dtype), x])
        nf = n_frames(buf.shape[0])
        if nf:
            new = log_mel(buf[: (nf - 1) * HOP + WIN])
            buf = buf[nf * HOP :]
            self.frames_out += nf
            frames = new if self._frames is None else torch.cat([self._frames.to(new.dtype), new])
        else:
            frames = self._frames
        self._buf = buf
        if frames is None:
            return x.new_zeros(0, STACKED_DIM)
        k = n_stacked(frames.shape[0])
        out = stack_frames(frames)
        self._frames = frames[k * STRIDE :]
        self.stacked_out += k
        return out
