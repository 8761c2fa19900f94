"""The HF paper's CNN-GRU speech activity detector (model, features, streaming inference, weights).

Heitkaemper et al., "A Database for Research on Detection and Enhancement of Speech Transmitted
over HF links" (ITG 2021) §3.2, details from the authors' released code (``fgnt/ham_radio``)::

    x (8 kHz) -> frames of 200 samples (25 ms) every 80 (10 ms), periodic Hann, FFT 256 -> |X| (129 bins)
      -> causal per-bin mean/variance normalisation (recursive, memory ``norm_memory_s``)
      -> 3 CNN blocks of two 3x3 conv layers (BN, ReLU; max-pool over frequency only after each block)
      -> 2 uni-directional GRU layers -> FF to 10 units -> max over the 10 -> sigmoid
      -> p = 1e-3 + (1 - 2e-3) sigmoid  (frame score)   [the 25-frame ">= 12" vote is the block's]

Frame ``t`` covers samples ``[80 t, 80 t + 200)``; a signal of ``n >= 200`` samples has
``(n - 200) // 80 + 1`` frames (none when shorter), the convention of
:func:`streamkit.eval.sad.frames_to_samples`.

Normalisation (the alternative that matches training exactly): per bin ``f``,
``mu_t = mu + (1 - a_t)(x_t - mu)``, ``v_t = a_t v + (1 - a_t)(x_t - mu_t)^2``,
``x~_t = (x_t - mu_t) / (sqrt(v_t) + eps)`` with ``a_t = min(a, t / (t + 1))`` (``t`` = frames
seen before this one): a cumulative average until ``t = 1/(1 - a)`` frames, then exponential with
``a = exp(-0.01 s / norm_memory_s)``. It runs over the whole signal causally, in float64, frame by
frame (a numba kernel), in training (whole file, then 4 s chunks are cut from the normalised
features) and in inference alike.

Streaming (:class:`SadDnnStream`): the time padding of the "same" 3x3 convolutions is one zero
frame before the first and one after the last frame of each layer's input. The stream keeps, per
layer, the last two input frames (initially one zero frame), so each conv layer outputs a frame
once it has seen the next one: 6 frames of look-ahead for 6 layers; at the end of the stream one
zero frame is pushed through every layer, as offline. The GRU carries its state. Hence pushing a
signal in any split gives the same frame scores as pushing it at once (:func:`dnn_scores`):
bit-exact with the default numba kernels (every output element sums its terms in an order that
does not depend on how many frames a call holds; the normaliser and the GRU run frame by frame),
within ~1e-7 with the torch backends (torch's conv may pick another summation order for another
number of frames).

Inference uses the folded network (:func:`fold`): each BatchNorm is merged into the preceding
convolution's weights and bias. Training uses :class:`SadDnn` (torch); both forms agree to
~1e-7 (float32 rounding).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numba as nb
import numpy as np
import torch
import torch.nn.functional as F
from scipy.signal import get_window
from torch import nn

from streamkit.core.errors import ModelError
from streamkit.models import SAD_DNN_WEIGHTS
from streamkit.models.checkpoint import load_checkpoint, save_checkpoint

__all__ = [
    "RATE",
    "WIN",
    "HOP",
    "N_FFT",
    "N_BINS",
    "SadDnnConfig",
    "SadDnn",
    "FoldedSadDnn",
    "SadDnnStream",
    "LoadedSadDnn",
    "DEFAULT_WEIGHTS",
    "stft_mag",
    "normalize",
    "features",
    "frame_targets",
    "fold",
    "save_weights",
    "load_weights",
    "dnn_scores",
    "dnn_raw_scores",
]

RATE = 8000
WIN = 200  #: 25 ms window [PAPER]
HOP = 80  #: 10 ms shift [PAPER]
N_FFT = 256  #: (the released code)
N_BINS = N_FFT // 2 + 1  #: 129
FORMAT = "streamkit-sad-dnn/1"
#: the shipped weights (loaded by the block by default); the model card is ``sad_dnn.json`` next to it
DEFAULT_WEIGHTS = SAD_DNN_WEIGHTS


@dataclass(frozen=True)
class SadDnnConfig:
    """Architecture and front-end parameters (stored in the weight file).

    The paper's sizes are ``channels=(16, 32, 64)``, ``gru_hidden=514``; the shipped model is
    smaller (see the model card) to fit the CPU training and RT-factor budgets.
    """

    channels: tuple[int, int, int] = (4, 8, 16)
    pools: tuple[int, int, int] = (4, 8, 8)  #: max-pool over frequency after each CNN block [CODE]
    gru_hidden: int = 64
    gru_layers: int = 2
    ff_units: int = 10
    #: memory of the recursive normaliser, chosen on dev: 4-minute training runs (seed 0, the 2 h HF corpus of `streamkit corpus hf --hours 2 --seed 1`) with 1 / 4 / 16 s had
    #: dev loss 0.78 / 0.097 / 0.077 at step 100 and 0.047 (1 s) / 0.041 (16 s) at step 180 (the 4 s run stopped at 130);
    #: the 1 s run was also unstable (0.26 -> 0.78 -> 0.05). The released recipe suggests 4 s (the chunk length)
    norm_memory_s: float = 16.0
    norm_eps: float = 1e-5

    def __post_init__(self) -> None:
        object.__setattr__(self, "channels", tuple(int(c) for c in self.channels))
        object.__setattr__(self, "pools", tuple(int(p) for p in self.pools))
        if len(self.channels) != 3 or len(self.pools) != 3 or min(self.channels) < 1 or min(self.pools) < 1:
            raise ModelError(f"channels and pools must be 3 positive ints each, got {self.channels}, {self.pools}")
        if self.gru_hidden < 1 or self.gru_layers < 1 or self.ff_units < 1:
            raise ModelError("gru_hidden, gru_layers, ff_units must be >= 1")
        if not (self.norm_memory_s > 0 and self.norm_eps > 0):
            raise ModelError("norm_memory_s and norm_eps must be > 0")

    @property
    def bins_out(self) -> int:
        f = N_BINS
        for p in self.pools:
            f = -(-f // p)
        return f

    @property
    def norm_alpha(self) -> float:
        return math.exp(-HOP / RATE / self.norm_memory_s)

    @property
    def lookahead_frames(self) -> int:
        return 2 * len(self.channels)  # one per 3x3 conv layer

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["channels"] = list(self.channels)
        d["pools"] = list(self.pools)
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> SadDnnConfig:
        known = set(cls.__dataclass_fields__)
        bad = set(d) - known
        if bad:
            raise ModelError(f"unknown SAD-DNN config keys {sorted(bad)}")
        try:
            return cls(**dict(d))
        except (TypeError, ValueError) as exc:
            raise ModelError(f"bad SAD-DNN config {dict(d)!r}: {exc}") from None


# ------------------------------------------------------------------------------------------------
# features
# ------------------------------------------------------------------------------------------------

_WINDOW = np.asarray(get_window("hann", WIN), dtype=np.float64)  # periodic Hann


def n_frames(n: int) -> int:
    return (n - WIN) // HOP + 1 if n >= WIN else 0


def stft_mag(x: np.ndarray) -> np.ndarray:
    """|STFT| (frames, 129) float64 of the complete frames of ``x`` (float, mono, 8 kHz)."""
    x = np.ascontiguousarray(x, dtype=np.float64).reshape(-1)
    m = n_frames(x.shape[0])
    if m == 0:
        return np.zeros((0, N_BINS))
    fr = np.lib.stride_tricks.as_strided(x, shape=(m, WIN), strides=(HOP * x.strides[0], x.strides[0]), writeable=False)
    return np.abs(np.fft.rfft(fr * _WINDOW, n=N_FFT, axis=1))


@nb.njit(cache=True, nogil=True)
def _norm_kernel(X: np.ndarray, mu: np.ndarray, var: np.ndarray, cnt: np.ndarray, a: float, eps: float, out: np.ndarray) -> None:  # pragma: no cover
    T, K = X.shape
    c = cnt[0]
    for t in range(T):
        at = c / (c + 1.0)
        if at > a:
            at = a
        b = 1.0 - at
        for f in range(K):
            x = X[t, f]
            m = mu[f] + b * (x - mu[f])
            d = x - m
            v = at * var[f] + b * d * d
            mu[f] = m
            var[f] = v
            out[t, f] = d / (math.sqrt(v) + eps)
        c += 1.0
    cnt[0] = c


class Normalizer:
    """State of the causal per-bin normalisation (see the module docstring)."""

    def __init__(self, cfg: SadDnnConfig) -> None:
        self.a = cfg.norm_alpha
        self.eps = float(cfg.norm_eps)
        self.reset()

    def reset(self) -> None:
        self.mu = np.zeros(N_BINS)
        self.var = np.zeros(N_BINS)
        self.cnt = np.zeros(1)

    def __call__(self, X: np.ndarray) -> np.ndarray:
        out = np.empty(X.shape, np.float32)
        if X.shape[0]:
            _norm_kernel(np.ascontiguousarray(X, dtype=np.float64), self.mu, self.var, self.cnt, self.a, self.eps, out)
        return out


def normalize(X: np.ndarray, cfg: SadDnnConfig) -> np.ndarray:
    """Causal normalisation of a whole feature matrix (frames, 129) from a fresh state; float32."""
    return Normalizer(cfg)(X)


def _sanitize(x: np.ndarray) -> np.ndarray:
    y = np.array(x, dtype=np.float64).reshape(-1)
    y[~np.isfinite(y)] = 0.0
    return y


def features(x: np.ndarray, cfg: SadDnnConfig) -> np.ndarray:
    """Normalised features (frames, 129) float32 of a whole signal (NaN/inf -> 0), as the stream computes them."""
    return normalize(stft_mag(_sanitize(x)), cfg)


def frame_targets(speech: np.ndarray, frames: int) -> np.ndarray:
    """Frame ``t`` is speech iff any sample in ``[80 t, 80 t + 200)`` is (the released code's labels; zero-padded at the end)."""
    s = np.asarray(speech, bool).reshape(-1)
    need = (frames - 1) * HOP + WIN if frames else 0
    if s.shape[0] < need:
        s = np.concatenate([s, np.zeros(need - s.shape[0], bool)])
    cs = np.concatenate([[0], np.cumsum(s, dtype=np.int64)])
    lo = np.arange(frames) * HOP
    return ((cs[lo + WIN] - cs[lo]) > 0).astype(np.float32)


def intervals_to_mask(intervals: Any, n: int) -> np.ndarray:
    m = np.zeros(n, bool)
    for a, b in intervals:
        m[max(int(a), 0) : min(int(b), n)] = True
    return m


# ------------------------------------------------------------------------------------------------
# the network
# ------------------------------------------------------------------------------------------------


def _pool_f(x: torch.Tensor, p: int) -> torch.Tensor:
    """Max-pool the last (frequency) axis by ``p``, zero-padding it to a multiple of ``p`` first
    (split front/back, the extra one at the back, the released code). Inputs are >= 0 (after
    ReLU), so the padding value never wins a maximum; padding and pooling over what remains equal
    ``max_pool2d`` with ``ceil_mode`` windows shifted by the front padding."""
    if p == 1:
        return x
    f = x.shape[-1]
    pad = -(-f // p) * p - f
    if pad:
        x = F.pad(x, (pad // 2, pad - pad // 2))
    return F.max_pool2d(x, (1, p))


def _pool_fast(x: torch.Tensor, p: int) -> torch.Tensor:
    """:func:`_pool_f` in one op: ``max_pool2d`` with ``ceil_mode`` and the front padding (its
    -inf padding never wins over ReLU outputs >= 0, and every window holds an input), or a max
    over the axis when one window covers it."""
    f = x.shape[-1]
    k = (f + p - 1) // p
    if p == 1:
        return x
    if k == 1:
        return x.amax(-1, keepdim=True)
    front = (k * p - f) // 2
    if 2 * front > p:
        return _pool_f(x, p)
    return F.max_pool2d(x, (1, p), (1, p), (0, front), ceil_mode=True)


class SadDnn(nn.Module):
    """Training form: conv -> BN -> ReLU (-> pool) x 6, GRU x 2, FF -> 10, max, sigmoid.

    Layout ``(batch, channels, time, freq)``; time is never pooled. ``forward(feats (B, T, 129))``
    returns frame probabilities ``(B, T)`` in [0.001, 0.999].
    """

    def __init__(self, cfg: SadDnnConfig | None = None) -> None:
        super().__init__()
        self.cfg = cfg = cfg or SadDnnConfig()
        convs, bns = [], []
        cin = 1
        for c in cfg.channels:
            for _ in range(2):
                conv = nn.Conv2d(cin, c, 3, padding=1)
                nn.init.xavier_uniform_(conv.weight)
                nn.init.zeros_(conv.bias)
                convs.append(conv)
                bns.append(nn.BatchNorm2d(c))
                cin = c
        self.convs = nn.ModuleList(convs)
        self.bns = nn.ModuleList(bns)
        self.gru = nn.GRU(cfg.channels[-1] * cfg.bins_out, cfg.gru_hidden, cfg.gru_layers, batch_first=True)
        self.ff = nn.Linear(cfg.gru_hidden, cfg.ff_units)

    def logits(self, feats: torch.Tensor) -> torch.Tensor:
        x = feats.unsqueeze(1)
        for i, (conv, bn) in enumerate(zip(self.convs, self.bns)):
            x = F.relu(bn(conv(x)))
            if i % 2 == 1:
                x = _pool_f(x, self.cfg.pools[i // 2])
        b, c, t, f = x.shape
        h, _ = self.gru(x.permute(0, 2, 1, 3).reshape(b, t, c * f))
        return self.ff(h).amax(-1)

    def forward(self, feats: torch.Tensor) -> torch.Tensor:
        return 1e-3 + (1 - 2e-3) * torch.sigmoid(self.logits(feats))


def n_params(model: nn.Module) -> int:
    return int(sum(p.numel() for p in model.parameters()))


class FoldedSadDnn(nn.Module):
    """Inference form of the CNN with BatchNorm folded into the convolutions; one step of a stream.

    ``step(x, hist)``: ``x`` (1, 1, k, 129) new normalised frames; ``hist`` the per-layer input
    histories (the last <= 2 frames each, initially one zero frame). Returns ``(feats (m, D), new
    hist)``: the CNN output of the ``m`` frames whose look-ahead is complete. ``tail(hist)``: the
    end of the stream (one zero frame through every layer). The GRU and FF layers run in
    :func:`_gru_head` (numba): torch's GRU costs ~0.2 ms per call for a few frames, more than the
    whole CNN.
    """

    def __init__(self, cfg: SadDnnConfig, weights: list[torch.Tensor], biases: list[torch.Tensor]) -> None:
        super().__init__()
        self.pools: list[int] = [int(p) for p in cfg.pools]
        self.weights = nn.ParameterList([nn.Parameter(w, requires_grad=False) for w in weights])
        self.biases = nn.ParameterList([nn.Parameter(b, requires_grad=False) for b in biases])

    def _layer(self, i: int, x: torch.Tensor, w: torch.Tensor, b: torch.Tensor, hist: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        cat = torch.cat([hist, x], 2)
        t = cat.shape[2]
        if t < 3:
            return cat[:, :, :0], cat
        y = torch.relu(F.conv2d(cat, w, b, padding=(0, 1)))
        if i % 2 == 1:
            y = _pool_fast(y, self.pools[i // 2])
        return y, cat[:, :, t - 2 :]

    @staticmethod
    def _flat(x: torch.Tensor) -> torch.Tensor:
        b, c, t, f = x.shape
        if t == 0:
            return x.new_zeros(0, 0)
        return x[0].permute(1, 0, 2).reshape(t, c * f)

    @torch.jit.export
    def step(self, x: torch.Tensor, hist: list[torch.Tensor]) -> tuple[torch.Tensor, list[torch.Tensor]]:
        new_hist: list[torch.Tensor] = []
        i = 0
        for w, b in zip(self.weights, self.biases):
            if x.shape[2] == 0:  # nothing new reaches this layer (an empty output has the wrong shape)
                new_hist.append(hist[i])
            else:
                x, hh = self._layer(i, x, w, b, hist[i])
                new_hist.append(hh)
            i += 1
        return self._flat(x), new_hist

    @torch.jit.export
    def tail(self, hist: list[torch.Tensor]) -> torch.Tensor:
        x = hist[0][:, :, :0]
        i = 0
        for w, b in zip(self.weights, self.biases):
            hh = hist[i]
            zero = hh.new_zeros(hh.shape[0], hh.shape[1], 1, hh.shape[3])
            x, _ = self._layer(i, torch.cat([x, zero], 2), w, b, hh)
            i += 1
        return self._flat(x)


@nb.njit(cache=True, nogil=True, fastmath=True)
def _mv(w: np.ndarray, b: np.ndarray, x: np.ndarray, out: np.ndarray) -> None:  # pragma: no cover
    """``out = w @ x + b`` (fixed summation order for a given shape: bit-identical for every frame)."""
    for g in range(w.shape[0]):
        acc = np.float32(0.0)
        for j in range(w.shape[1]):
            acc += w[g, j] * x[j]
        out[g] = acc + b[g]


@nb.njit(cache=True, nogil=True, fastmath=True)
def _gru_head(X: np.ndarray, wih0: np.ndarray, wih: np.ndarray, whh: np.ndarray, bih: np.ndarray, bhh: np.ndarray, wff: np.ndarray, bff: np.ndarray,
              h: np.ndarray, out: np.ndarray) -> None:  # pragma: no cover  # fmt: skip
    """PyTorch's GRU equations, frame by frame (state ``h`` (L, H) updated in place), then FF, max, clamped sigmoid."""
    T = X.shape[0]
    L, H = h.shape
    gi = np.empty(3 * H, np.float32)
    gh = np.empty(3 * H, np.float32)
    hl = np.empty(H, np.float32)
    zf = np.empty(wff.shape[0], np.float32)
    for t in range(T):
        for li in range(L):
            if li == 0:
                _mv(wih0, bih[0], X[t], gi)
            else:
                _mv(wih[li - 1], bih[li], h[li - 1], gi)
            for j in range(H):
                hl[j] = h[li, j]
            _mv(whh[li], bhh[li], hl, gh)
            for j in range(H):
                r = 1.0 / (1.0 + np.exp(-(gi[j] + gh[j])))
                z = 1.0 / (1.0 + np.exp(-(gi[H + j] + gh[H + j])))
                n = np.tanh(gi[2 * H + j] + r * gh[2 * H + j])
                h[li, j] = (1.0 - z) * n + z * hl[j]
        _mv(wff, bff, h[L - 1], zf)
        out[t] = 1e-3 + (1.0 - 2e-3) / (1.0 + np.exp(-zf.max()))


@nb.njit(cache=True, nogil=True)
def _conv3x3_relu(x: np.ndarray, w: np.ndarray, b: np.ndarray, out: np.ndarray) -> None:  # pragma: no cover
    """``out = relu(conv(x, w) + b)``: 3x3 kernel, valid in time, "same" zero padding in frequency.

    ``x`` (Cin, T + 2, F), ``w`` (Cout, Cin, 3, 3), ``out`` (Cout, T, F). Every output element sums
    its terms in the same order (bias, then per input channel its 9 taps in a fixed order; a
    zero-padding tap adds nothing) whatever ``T`` is, so a stream computed in pieces of any size
    is bit-identical to one piece.
    """
    cout, cin = w.shape[0], w.shape[1]
    to = out.shape[1]
    fn = x.shape[2]
    for co in range(cout):
        bv = b[co]
        for t in range(to):
            for f in range(fn):
                out[co, t, f] = bv
        for ci in range(cin):
            w00, w01, w02 = w[co, ci, 0, 0], w[co, ci, 0, 1], w[co, ci, 0, 2]
            w10, w11, w12 = w[co, ci, 1, 0], w[co, ci, 1, 1], w[co, ci, 1, 2]
            w20, w21, w22 = w[co, ci, 2, 0], w[co, ci, 2, 1], w[co, ci, 2, 2]
            for t in range(to):
                r0 = x[ci, t]
                r1 = x[ci, t + 1]
                r2 = x[ci, t + 2]
                o = out[co, t]
                if fn == 1:
                    o[0] = o[0] + w01 * r0[0] + w11 * r1[0] + w21 * r2[0]
                    continue
                o[0] = o[0] + w01 * r0[0] + w02 * r0[1] + w11 * r1[0] + w12 * r1[1] + w21 * r2[0] + w22 * r2[1]
                for f in range(1, fn - 1):
                    o[f] = (o[f] + w00 * r0[f - 1] + w01 * r0[f] + w02 * r0[f + 1] + w10 * r1[f - 1] + w11 * r1[f] + w12 * r1[f + 1]
                            + w20 * r2[f - 1] + w21 * r2[f] + w22 * r2[f + 1])  # fmt: skip
                g = fn - 1
                o[g] = o[g] + w00 * r0[g - 1] + w01 * r0[g] + w10 * r1[g - 1] + w11 * r1[g] + w20 * r2[g - 1] + w21 * r2[g]
        for t in range(to):
            for f in range(fn):
                if out[co, t, f] < 0:
                    out[co, t, f] = 0.0


@nb.njit(cache=True, nogil=True)
def _pool_max(y: np.ndarray, p: int, out: np.ndarray) -> None:  # pragma: no cover
    """:func:`_pool_f` for ``y >= 0`` (C, T, F) -> (C, T, ceil(F / p))."""
    c, t, fn = y.shape
    fo = out.shape[2]
    front = (fo * p - fn) // 2
    for ci in range(c):
        for ti in range(t):
            for k in range(fo):
                lo = k * p - front
                m = np.float32(0.0)
                for f in range(max(lo, 0), min(lo + p, fn)):
                    if y[ci, ti, f] > m:
                        m = y[ci, ti, f]
                out[ci, ti, k] = m


@nb.njit(cache=True, nogil=True)
def _cnn_run(
    x: np.ndarray, wflat: np.ndarray, bflat: np.ndarray, meta: np.ndarray, hbuf: np.ndarray, hcnt: np.ndarray, tail: bool
) -> np.ndarray:  # pragma: no cover
    """All conv layers (+ pools) of one stream step in one call; returns features (m, C * F).

    ``meta[i]`` = (cin, cout, fin, pool, w offset, b offset, hist offset) of layer ``i``; the
    history of layer ``i`` (its last ``hcnt[i]`` <= 2 input frames, (cin, 2, fin), right-aligned)
    lives in ``hbuf``. ``tail``: the end of the stream, one zero frame appended to every layer's
    input (the "same" time padding), histories left alone.
    """
    L = meta.shape[0]
    cur = np.empty((1, x.shape[0], x.shape[1]), np.float32)
    cur[0] = x
    for i in range(L):
        cin, cout, fin, p, wo, bo, ho = meta[i, 0], meta[i, 1], meta[i, 2], meta[i, 3], meta[i, 4], meta[i, 5], meta[i, 6]
        m_in = cur.shape[1]
        if m_in == 0 and not tail:
            break  # nothing new reaches this layer nor the ones after it
        hc = hcnt[i]
        extra = 1 if tail else 0
        T = hc + m_in + extra
        hist = hbuf[ho : ho + cin * 2 * fin].reshape((cin, 2, fin))
        cat = np.zeros((cin, T, fin), np.float32)
        for c in range(cin):
            for t in range(hc):
                cat[c, t, :] = hist[c, 2 - hc + t, :]
            for t in range(m_in):
                cat[c, hc + t, :] = cur[c, t, :]
        if not tail:
            k = min(T, 2)
            for c in range(cin):
                for t in range(k):
                    hist[c, 2 - k + t, :] = cat[c, T - k + t, :]
            hcnt[i] = k
        if T < 3:
            cur = np.empty((cout, 0, 1), np.float32)
            continue
        w = wflat[wo : wo + cout * cin * 9].reshape((cout, cin, 3, 3))
        y = np.empty((cout, T - 2, fin), np.float32)
        _conv3x3_relu(cat, w, bflat[bo : bo + cout], y)
        if p > 1:
            z = np.empty((cout, T - 2, (fin + p - 1) // p), np.float32)
            _pool_max(y, p, z)
            cur = z
        else:
            cur = y
    C, T2, Fo = cur.shape
    out = np.empty((T2, C * Fo), np.float32)
    for t in range(T2):
        for c in range(C):
            for f in range(Fo):
                out[t, c * Fo + f] = cur[c, t, f]
    return out


class _NumbaCnn:
    """The folded CNN of :class:`FoldedSadDnn` as one numba call per step (:func:`_cnn_run`)."""

    def __init__(self, folded: FoldedSadDnn) -> None:
        ws = [np.ascontiguousarray(w.detach().numpy(), dtype=np.float32) for w in folded.weights]
        bs = [np.ascontiguousarray(b.detach().numpy(), dtype=np.float32) for b in folded.biases]
        self.wflat = np.ascontiguousarray(np.concatenate([w.ravel() for w in ws]), dtype=np.float32)
        self.bflat = np.ascontiguousarray(np.concatenate(bs), dtype=np.float32)
        meta = []
        wo = bo = ho = 0
        fin = N_BINS
        for i, w in enumerate(ws):
            cout, cin = w.shape[0], w.shape[1]
            p = folded.pools[i // 2] if i % 2 == 1 else 1
            meta.append((cin, cout, fin, p, wo, bo, ho))
            wo += w.size
            bo += cout
            ho += cin * 2 * fin
            fin = -(-fin // p)
        self.meta = np.asarray(meta, np.int64)
        self.hsize = ho

    def initial(self) -> tuple[np.ndarray, np.ndarray]:
        """Histories of a fresh stream: one zero frame per layer (the "same" padding before frame 0)."""
        return np.zeros(self.hsize, np.float32), np.ones(self.meta.shape[0], np.int64)

    def step(self, x: np.ndarray, hist: tuple[np.ndarray, np.ndarray]) -> tuple[np.ndarray, tuple[np.ndarray, np.ndarray]]:
        """``x`` (k, 129) new normalised frames -> (features (m, D), histories updated in place)."""
        return _cnn_run(np.ascontiguousarray(x, dtype=np.float32), self.wflat, self.bflat, self.meta, hist[0], hist[1], False), hist

    def tail(self, hist: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
        return _cnn_run(np.zeros((0, N_BINS), np.float32), self.wflat, self.bflat, self.meta, hist[0], hist[1], True)


class _Head:
    """GRU + FF weights as contiguous float32 arrays for :func:`_gru_head`."""

    def __init__(self, gru: nn.GRU, ff: nn.Linear) -> None:
        L = gru.num_layers

        def a(t: torch.Tensor) -> np.ndarray:
            return np.ascontiguousarray(t.detach().cpu().numpy(), dtype=np.float32)

        self.L, self.H = L, gru.hidden_size
        self.wih0 = a(gru.weight_ih_l0)
        self.wih = np.ascontiguousarray(
            np.stack([a(getattr(gru, f"weight_ih_l{i}")) for i in range(1, L)]) if L > 1 else np.zeros((0, 3 * self.H, self.H), np.float32)
        )
        self.whh = np.ascontiguousarray(np.stack([a(getattr(gru, f"weight_hh_l{i}")) for i in range(L)]))
        self.bih = np.ascontiguousarray(np.stack([a(getattr(gru, f"bias_ih_l{i}")) for i in range(L)]))
        self.bhh = np.ascontiguousarray(np.stack([a(getattr(gru, f"bias_hh_l{i}")) for i in range(L)]))
        self.wff = a(ff.weight)
        self.bff = a(ff.bias)

    def __call__(self, X: np.ndarray, h: np.ndarray) -> np.ndarray:
        out = np.empty(X.shape[0], np.float32)
        if X.shape[0]:
            _gru_head(np.ascontiguousarray(X, dtype=np.float32), self.wih0, self.wih, self.whh, self.bih, self.bhh, self.wff, self.bff, h, out)
        return out


def fold(model: SadDnn) -> FoldedSadDnn:
    """The inference form of a trained model's CNN: BN (running statistics) merged into the convs (float64 math)."""
    ws, bs = [], []
    for conv, bn in zip(model.convs, model.bns):
        g = bn.weight.detach().double() / torch.sqrt(bn.running_var.detach().double() + bn.eps)
        w = conv.weight.detach().double() * g[:, None, None, None]
        b = (conv.bias.detach().double() - bn.running_mean.detach().double()) * g + bn.bias.detach().double()
        ws.append(w.float().contiguous())
        bs.append(b.float().contiguous())
    f = FoldedSadDnn(model.cfg, ws, bs)
    f.eval()
    for p in f.parameters():
        p.requires_grad_(False)
    return f


# ------------------------------------------------------------------------------------------------
# weight files
# ------------------------------------------------------------------------------------------------


@dataclass
class LoadedSadDnn:
    """A weight file's content: config, trained model (eval mode), folded net, default threshold."""

    cfg: SadDnnConfig
    model: SadDnn
    folded: FoldedSadDnn
    threshold: float = 0.5
    meta: dict[str, Any] = field(default_factory=dict)
    path: str | None = None


def save_weights(path: str | Path, model: SadDnn, *, threshold: float = 0.5, meta: Mapping[str, Any] | None = None) -> Path:
    """Write ``{format, config, state_dict, threshold, meta}`` atomically (:func:`streamkit.models.checkpoint.save_checkpoint`)."""
    return save_checkpoint(path, FORMAT, model, model.cfg, meta=meta, threshold=float(threshold))


def load_weights(path: str | Path | None = None, *, expect: SadDnnConfig | Mapping[str, Any] | None = None) -> LoadedSadDnn:
    """Load a weight file written by :func:`save_weights` (default: the shipped weights).

    Raises:
        ModelError: missing, corrupt or foreign file; a config that does not match ``expect`` or
            a state dict that does not match its own config.
    """
    p = Path(path) if path is not None else DEFAULT_WEIGHTS
    hint = " (train one with `streamkit train sad-dnn`)" if path is None else ""
    model, cfg, obj = load_checkpoint(p, fmt=FORMAT, what="SAD-DNN", from_dict=SadDnnConfig.from_dict, build=SadDnn, expect=expect, missing_hint=hint)
    thr = float(obj.get("threshold", 0.5))
    return LoadedSadDnn(cfg, model, fold(model), thr, dict(obj.get("meta") or {}), str(p))


# ------------------------------------------------------------------------------------------------
# streaming inference
# ------------------------------------------------------------------------------------------------


BACKENDS = ("numba", "eager", "script")


class SadDnnStream:
    """Frame scores of a stream pushed in pieces of any size (equal to pushing it at once).

    ``push(x)`` returns the scores of the frames whose look-ahead (6 frames) is complete;
    ``flush()`` those of the rest (zero time padding, as offline) and resets. Frame ``j`` covers
    samples ``[80 j, 80 j + 200)`` of the stream since the last reset. ``x`` must be finite.

    ``backend`` runs the folded CNN with ``"numba"`` kernels (default: fastest in 100 ms chunks
    and bit-exact for any split, see ``benchmarks/sad_dnn_speed.py``), torch ``"eager"`` or
    TorchScript (``"script"``; both within ~1e-7 of one piece, torch's conv may change its
    summation order with the number of frames). The GRU/FF head is numba in every backend.
    """

    def __init__(self, loaded: LoadedSadDnn, *, backend: str = "numba", scripted: bool = False) -> None:
        if scripted:
            backend = "script"
        if backend not in BACKENDS:
            raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
        self.backend = backend
        self.cfg = loaded.cfg
        self.net: Any = loaded.folded
        if backend == "script":
            self.net = torch.jit.script(loaded.folded)
        self.cnn = _NumbaCnn(loaded.folded) if backend == "numba" else None
        self.head = _Head(loaded.model.gru, loaded.model.ff)
        self.norm = Normalizer(self.cfg)
        self._chans = [1] + [c for c in self.cfg.channels for _ in range(2)]
        self._bins = [N_BINS]
        f = N_BINS
        for p in self.cfg.pools:
            self._bins += [f]
            f = -(-f // p)
            self._bins += [f]
        self.reset()

    def reset(self) -> None:
        self.norm.reset()
        self.buf = np.zeros(0)
        if self.cnn is not None:
            self.hist: Any = self.cnn.initial()
        else:
            self.hist = [torch.zeros(1, self._chans[i], 1, self._bins[i]) for i in range(len(self._chans) - 1)]
        self.h = np.zeros((self.cfg.gru_layers, self.cfg.gru_hidden), np.float32)
        self.frames_in = 0
        self.frames_out = 0

    def push(self, x: np.ndarray) -> np.ndarray:
        x = np.asarray(x, np.float64).reshape(-1)
        buf = np.concatenate([self.buf, x]) if self.buf.shape[0] else x
        X = stft_mag(buf)
        m = X.shape[0]
        self.buf = buf[m * HOP :].copy()
        if m == 0:
            return np.zeros(0, np.float32)
        self.frames_in += m
        z = self.norm(X)
        if self.cnn is not None:
            f, self.hist = self.cnn.step(z, self.hist)
        else:
            with torch.inference_mode():
                ft, self.hist = self.net.step(torch.from_numpy(z).reshape(1, 1, m, N_BINS), self.hist)
            f = ft.numpy()
        out = self.head(f, self.h)
        self.frames_out += out.shape[0]
        return out

    def flush(self) -> np.ndarray:
        if self.frames_in == 0:
            self.reset()
            return np.zeros(0, np.float32)
        if self.cnn is not None:
            f = self.cnn.tail(self.hist)
        else:
            with torch.inference_mode():
                f = self.net.tail(self.hist).numpy()
        out = self.head(f, self.h)
        self.frames_out += out.shape[0]
        assert self.frames_out == self.frames_in, (self.frames_out, self.frames_in)
        self.reset()
        return out


_CACHE: dict[str, LoadedSadDnn] = {}


def _default_loaded(weights: str | Path | None) -> LoadedSadDnn:
    key = str(Path(weights).resolve()) if weights is not None else str(DEFAULT_WEIGHTS)
    if key not in _CACHE:
        _CACHE[key] = load_weights(weights)
    return _CACHE[key]


def dnn_raw_scores(
    x: np.ndarray, *, weights: str | Path | LoadedSadDnn | None = None, backend: str = "numba", threads: int | None = 1
) -> tuple[np.ndarray, int, int]:
    """Frame scores (before the vote) of a whole signal (float32 mono 8 kHz; NaN/inf -> 0).

    Returns ``(scores float32 (frames,), hop=80, win=200)``; equal to the block's output items
    (bit-exact with the default numba backend). ``threads`` sets torch's threads for the torch
    backends only (the numba kernels run on the calling thread).
    """
    loaded = weights if isinstance(weights, LoadedSadDnn) else _default_loaded(weights)
    a = np.asarray(x)
    if a.ndim == 2 and a.shape[1] == 1:
        a = a[:, 0]
    if a.ndim != 1:
        raise ValueError(f"dnn scores need a mono signal, got shape {np.shape(x)}")
    old = torch.get_num_threads()
    if threads and backend != "numba":
        torch.set_num_threads(int(threads))
    try:
        st = SadDnnStream(loaded, backend=backend)
        s = np.concatenate([st.push(_sanitize(a)), st.flush()])
    finally:
        if torch.get_num_threads() != old:
            torch.set_num_threads(old)
    return s.astype(np.float32), HOP, WIN


def dnn_scores(x: np.ndarray, *, weights: str | Path | LoadedSadDnn | None = None) -> tuple[np.ndarray, int, int]:
    """The ``dnn`` system for offline scoring: ``score_file(x) -> (scores, hop=80, win=200)``.

    The scores are the frame scores after the block's 25-frame ">= 12" vote written as a rank
    filter (:func:`streamkit.eval.sad.majority_filter`: the 12th largest score of the edge-padded
    25-frame window), so ``score > threshold`` is exactly the block's decision at that threshold.
    The default threshold is the weight file's (the dev-EER threshold from training).
    """
    from streamkit.eval.sad import majority_filter

    s, hop, win = dnn_raw_scores(x, weights=weights)
    return majority_filter(s, 25, 12).astype(np.float32), hop, win


def default_threshold(weights: str | Path | None = None) -> float:
    return _default_loaded(weights).threshold
