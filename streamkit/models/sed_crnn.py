"""CRNN for weakly labelled sound event detection with tri-training heads and a domain classifier.

The model of Park et al., "Weakly labeled sound event detection using tri-training and adversarial
learning" (DCASE 2019 task 4), scaled for a
CPU. Losses and the tri-training pieces are in :mod:`streamkit.models.sed_losses`.

Components (paper Fig. 2)
-------------------------
* ``F`` (:class:`FeatureExtractor`): CNN blocks + bidirectional GRU. Each block is a 3x3 conv
  (to ``2 C`` channels), batch norm, GLU (as the DCASE 2019/2020 baselines), dropout and average
  pooling ``(pool_time[i], pool_freq[i])``. The default is the DCASE 2020 baseline's layout (7
  blocks, time pooling 2, 2, 1, ..., frequency pooling 2 x 7, so 128 mel bins pool down to 1) with
  fewer channels (16, 32, 64 x 5) and a 2 x 64 BiGRU for a CPU.
* ``F1``, ``F2`` (pseudo-labelers) and ``Ft`` (final classifier): :class:`Labeler` heads, each a
  frame-level sigmoid classifier plus **attention pooling** to a clip-level probability, as the
  DCASE 2019/2020 baselines (``clip_k = sum_t softmax_t(a_tk) * p_tk`` with ``a = W_att h``), not
  linear-softmax pooling. Optional hidden layer (``head_hidden``); the "first layer" whose
  weights the orthogonality regulariser (paper eq. 8) compares is that hidden layer, or the frame
  classifier when there is none.
* ``D`` (:class:`DomainClassifier`) behind a :class:`GradientReversal` layer (identity forward,
  ``-grl_scale * grad`` backward; ``grl_scale`` is the paper's alpha in eq. 5): an MLP on F's
  output. Mode ``"whole"`` (Adv.whole) averages F's output over time and gives one real/synthetic
  logit per clip; mode ``"time"`` (Adv.time) gives one logit per frame. Logit > 0 means "real".

Frame rate and label alignment
------------------------------
Features (:func:`log_mel`): 16 kHz, frames of ``n_fft = 2048`` samples every ``hop = 256``
(16 ms), no centring: input frame ``j`` covers samples ``[256 j, 256 j + 2048)``. The CNN's time
pooling (default 2 x 2 = 4) **reduces the frame rate** to one output frame per 4 input frames,
64 ms (15.625 Hz); ``T`` input frames give ``T // 4`` output frames (the last ``T % 4`` frames are
dropped). Output frame ``k`` pools input frames ``4k .. 4k+3``, whose window centres lie at
samples ``1024 k + 1024 + 256 i`` (i = 0..3), so its centre is at ``1024 k + 1408`` samples
(88 ms + 64 ms k) and :func:`frame_span` gives it the 64 ms around that centre. Strong labels are
put on the output frame grid by :func:`events_to_frames`: frame ``k`` is active for a class when
its centre lies inside one of the class's ``[onset, offset)`` intervals. A 10 s clip gives 618
input frames and 154 output frames (9.86 s covered).

Streaming split and receptive field
-----------------------------------
``SedModel.frontend(x)`` runs the input normalisation and the CNN, ``SedModel.backend(feats)``
the GRU and the heads; ``backend(frontend(x)) == forward(x)``. In eval mode every CNN output frame
depends only on a fixed span of input frames, so a streaming block can cache CNN outputs per frame
and rerun only the recurrent part over a window. :func:`receptive_field` gives the span: CNN
output frame ``k`` depends on input frames ``[P k - before, P k + P - 1 + after]`` with ``P`` the
time pooling. For the default layout ``before = after = 1 + 1*2 + 5*4 = 23`` input frames (the
first block's conv reaches 1 frame, the second's 1 frame at resolution 2, the five others 1 frame
at resolution 4): a span of 23 + 4 + 23 = 50 input frames (49 hops + a 2048-sample window = 0.91 s), and
a **look-ahead of 23 input frames (368 ms) past the output frame's last input frame** (checked
empirically in the tests). Zero padding at a window's edges means CNN outputs within
``ceil(23 / 4) = 6`` output frames of a window edge differ from those of the same frames computed
inside a longer signal; a per-frame cache must either accept that (and
compare with offline windows accordingly) or pad windows with real context. The BiGRU sees the
whole window in both directions, so the recurrent part has no bounded look-ahead.

Weight files: ``{format, config, state_dict, meta}`` written atomically with ``torch.save`` as
:mod:`streamkit.models.rnnt` and :mod:`streamkit.models.sad_dnn` do, all through
:mod:`streamkit.models.checkpoint`; :func:`load_model` raises :class:`ModelError` for a missing,
corrupt, foreign or mismatched file.

Features: :func:`log_mel` reuses :func:`streamkit.models.features.mel_filterbank` (parameterised
already) but frames the signal itself, because ``features.log_mel``/``_consts``/``n_frames`` use the
module constants of the 8 kHz ASR front end. If ``features.log_mel`` took
``win, hop, n_fft, n_mels, rate, f_min, f_max`` keyword arguments (defaults the ASR values) and
``_consts`` cached per parameter tuple, this module could call it directly.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from streamkit.data.sed_sources import CLASSES
from streamkit.models.checkpoint import load_checkpoint, save_checkpoint
from streamkit.models.features import mel_filterbank

__all__ = [
    "FORMAT",
    "HEADS",
    "DOMAIN_MODES",
    "SedConfig",
    "GradientReversal",
    "grad_reverse",
    "FeatureExtractor",
    "Labeler",
    "DomainClassifier",
    "SedModel",
    "log_mel",
    "n_input_frames",
    "receptive_field",
    "frame_span",
    "events_to_frames",
    "save_model",
    "load_model",
    "n_params",
]

FORMAT = "streamkit-sed-crnn/1"
HEADS = ("f1", "f2", "ft")
DOMAIN_MODES = ("whole", "time")
LOG_FLOOR = 1e-10
#: config fields of removed training experiments (docs/experiments.md) with their "off" values: a file
#: whose field is off loads (the field is dropped), one with the experiment on is refused
REMOVED_FIELDS: dict[str, Any] = {"labeler_hidden": None, "domain_bn": False}


@dataclass(frozen=True)
class SedConfig:
    """Architecture and front end of a :class:`SedModel`."""

    n_mels: int = 128
    n_classes: int = 10
    classes: tuple[str, ...] = CLASSES
    channels: tuple[int, ...] = (16, 32, 64, 64, 64, 64, 64)
    kernel: int = 3
    pool_time: tuple[int, ...] = (2, 2, 1, 1, 1, 1, 1)
    pool_freq: tuple[int, ...] = (2, 2, 2, 2, 2, 2, 2)
    rnn_hidden: int = 64
    rnn_layers: int = 2
    bidirectional: bool = True
    dropout: float = 0.3
    head_hidden: int = 0  #: 0: the labelers' first layer is the frame classifier itself
    domain_hidden: int = 64
    grl_scale: float = 1.0  #: alpha of paper eq. 5
    # front end (see log_mel)
    rate: int = 16000
    n_fft: int = 2048
    hop: int = 256
    f_min: float = 0.0
    f_max: float = 8000.0

    def __post_init__(self) -> None:
        n = len(self.channels)
        if n == 0 or len(self.pool_time) != n or len(self.pool_freq) != n:
            raise ValueError(
                f"channels, pool_time and pool_freq need the same non-zero length, got {len(self.channels)}, {len(self.pool_time)}, {len(self.pool_freq)}"
            )
        if any(c <= 0 for c in self.channels) or any(p <= 0 for p in self.pool_time + self.pool_freq):
            raise ValueError("channels and pooling factors must be positive")
        if self.kernel % 2 != 1 or self.kernel < 1:
            raise ValueError(f"kernel must be odd, got {self.kernel}")
        if self.freq_out < 1:
            raise ValueError(f"n_mels {self.n_mels} pools to nothing with pool_freq {self.pool_freq}")
        if len(self.classes) != self.n_classes:
            raise ValueError(f"{len(self.classes)} class names for n_classes {self.n_classes}")
        if self.rnn_layers < 1 or self.rnn_hidden < 1 or self.domain_hidden < 1 or self.head_hidden < 0:
            raise ValueError("rnn_layers, rnn_hidden, domain_hidden must be >= 1 and head_hidden >= 0")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {self.dropout}")
        if not 0 <= self.f_min < self.f_max <= self.rate / 2:
            raise ValueError(f"need 0 <= f_min < f_max <= rate/2, got {self.f_min}, {self.f_max}")

    @property
    def time_pool(self) -> int:
        """Input frames per output frame."""
        return math.prod(self.pool_time)

    @property
    def freq_out(self) -> int:
        m = self.n_mels
        for p in self.pool_freq:
            m //= p
        return m

    @property
    def cnn_dim(self) -> int:
        return self.channels[-1] * self.freq_out

    @property
    def feat_dim(self) -> int:
        """Dimension of F's output (the GRU's)."""
        return self.rnn_hidden * (2 if self.bidirectional else 1)

    @property
    def frame_seconds(self) -> float:
        return self.hop * self.time_pool / self.rate

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        for k in ("classes", "channels", "pool_time", "pool_freq"):
            d[k] = list(d[k])
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> SedConfig:
        """The config of a weight file or checkpoint; settings of removed training experiments are read as follows
        (:data:`REMOVED_FIELDS`): ``fast_dropout`` changed only the training's dropout masks and is ignored; a file
        trained with ``labeler_hidden`` or ``domain_bn`` holds parameters this model does not have and is refused."""
        d = dict(d)
        d.pop("fast_dropout", None)
        if d.get("labeler_hidden") == d.get("head_hidden", 0):  # F1/F2 as wide as Ft: the plain model
            d.pop("labeler_hidden")
        for k, off in REMOVED_FIELDS.items():
            if k in d and d.pop(k) != off:
                raise ValueError(f"the file was trained with {k}, an experiment removed from streamkit (docs/experiments.md); "
                                 "load it with the streamkit release that trained it")  # fmt: skip
        known = {f.name for f in fields(cls)}
        unknown = set(d) - known
        if unknown:
            raise ValueError(f"unknown SedConfig fields: {sorted(unknown)}")
        return cls(**{k: (tuple(v) if k in ("classes", "channels", "pool_time", "pool_freq") else v) for k, v in d.items()})


# ------------------------------------------------------------------------------------------------
# front end and frame grid
# ------------------------------------------------------------------------------------------------

_CONSTS: dict[tuple[Any, ...], tuple[torch.Tensor, torch.Tensor]] = {}


def n_input_frames(n_samples: int, cfg: SedConfig) -> int:
    """Feature frames in ``n_samples`` samples (no centring)."""
    return 0 if n_samples < cfg.n_fft else (n_samples - cfg.n_fft) // cfg.hop + 1


def log_mel(x: np.ndarray | torch.Tensor, cfg: SedConfig | None = None) -> torch.Tensor:
    """(frames, n_mels) natural-log mel energies of a mono signal at ``cfg.rate``.

    Periodic Hann window of ``n_fft`` samples every ``hop``, power spectrum, HTK-mel triangles
    from :func:`streamkit.models.features.mel_filterbank`, ``log(max(e, 1e-10))``.
    """
    cfg = cfg or SedConfig()
    t = torch.as_tensor(x)
    if t.dim() != 1:
        raise ValueError(f"expected a mono 1-D signal, got shape {tuple(t.shape)}")
    if not t.dtype.is_floating_point:
        t = t.to(torch.float32)
    nf = n_input_frames(t.shape[0], cfg)
    if nf == 0:
        return t.new_zeros(0, cfg.n_mels)
    key = (t.dtype, t.device, cfg.n_mels, cfg.n_fft, cfg.rate, cfg.f_min, cfg.f_max)
    if key not in _CONSTS:
        fb = torch.as_tensor(mel_filterbank(cfg.n_mels, cfg.n_fft, cfg.rate, cfg.f_min, cfg.f_max), dtype=t.dtype, device=t.device)
        win = torch.hann_window(cfg.n_fft, periodic=True, dtype=t.dtype, device=t.device)
        _CONSTS[key] = (fb, win)
    fb, win = _CONSTS[key]
    spec = torch.fft.rfft(t[: (nf - 1) * cfg.hop + cfg.n_fft].unfold(0, cfg.n_fft, cfg.hop) * win)
    power = spec.real.square() + spec.imag.square()
    return torch.log(torch.clamp(power @ fb, min=LOG_FLOOR))


def receptive_field(cfg: SedConfig) -> tuple[int, int]:
    """``(before, after)``: CNN output frame ``k`` depends on input frames ``[P k - before, P k + P - 1 + after]``."""
    lo, hi = 0, 0  # input-frame interval of output frame 0 at the current (backward-traced) resolution
    pad = cfg.kernel // 2
    for pt in reversed(cfg.pool_time):
        lo, hi = pt * lo, pt * hi + pt - 1  # pooling
        lo, hi = lo - pad, hi + pad  # conv
    return -lo, hi - (cfg.time_pool - 1)


def frame_span(k: int | np.ndarray, cfg: SedConfig | None = None) -> tuple[Any, Any]:
    """Seconds ``[start, end)`` that output frame ``k`` stands for (one frame period around its centre)."""
    cfg = cfg or SedConfig()
    p = cfg.time_pool
    centre = (np.asarray(k) * p * cfg.hop + cfg.n_fft / 2 + (p - 1) * cfg.hop / 2) / cfg.rate
    half = cfg.frame_seconds / 2
    return centre - half, centre + half


def events_to_frames(events: Sequence[tuple[str, float, float]], n_frames: int, cfg: SedConfig | None = None) -> torch.Tensor:
    """(n_frames, n_classes) strong targets: 1 where an output frame's centre is inside an event of the class."""
    cfg = cfg or SedConfig()
    start, end = frame_span(np.arange(n_frames), cfg)
    centre = (start + end) / 2
    y = np.zeros((n_frames, cfg.n_classes), dtype=np.float32)
    index = {c: i for i, c in enumerate(cfg.classes)}
    for label, onset, offset in events:
        if label not in index:
            raise ValueError(f"unknown class {label!r}")
        y[(centre >= onset) & (centre < offset), index[label]] = 1.0
    return torch.from_numpy(y)


# ------------------------------------------------------------------------------------------------
# gradient reversal
# ------------------------------------------------------------------------------------------------


class GradientReversal(torch.autograd.Function):
    """Identity forward; backward multiplies the gradient by ``-scale`` (Ganin and Lempitsky 2015)."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, scale: float) -> torch.Tensor:
        ctx.scale = float(scale)
        return x.view_as(x)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None]:
        return -ctx.scale * grad, None


def grad_reverse(x: torch.Tensor, scale: float = 1.0) -> torch.Tensor:
    return GradientReversal.apply(x, scale)


# ------------------------------------------------------------------------------------------------
# networks
# ------------------------------------------------------------------------------------------------


class _ConvBlock(nn.Module):
    def __init__(self, c_in: int, c_out: int, kernel: int, pool: tuple[int, int], dropout: float) -> None:
        super().__init__()
        self.conv = nn.Conv2d(c_in, 2 * c_out, kernel, padding=kernel // 2)
        self.bn = nn.BatchNorm2d(2 * c_out)
        self.drop = nn.Dropout(dropout)
        self.pool = pool

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (B, C, T, F)
        x = self.drop(F.glu(self.bn(self.conv(x)), dim=1))
        if self.pool != (1, 1):
            x = F.avg_pool2d(x, self.pool)
        return x


class FeatureExtractor(nn.Module):
    """F: input normalisation, CNN blocks (:meth:`frontend`), BiGRU (:meth:`backend`)."""

    def __init__(self, cfg: SedConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.register_buffer("feat_mean", torch.zeros(cfg.n_mels))
        self.register_buffer("feat_std", torch.ones(cfg.n_mels))
        blocks, c_in = [], 1
        for c, pt, pf in zip(cfg.channels, cfg.pool_time, cfg.pool_freq):
            blocks.append(_ConvBlock(c_in, c, cfg.kernel, (pt, pf), cfg.dropout))
            c_in = c
        self.cnn = nn.Sequential(*blocks)
        self.rnn = nn.GRU(
            cfg.cnn_dim,
            cfg.rnn_hidden,
            num_layers=cfg.rnn_layers,
            batch_first=True,
            bidirectional=cfg.bidirectional,
            dropout=cfg.dropout if cfg.rnn_layers > 1 else 0.0,
        )

    def set_normalisation(self, mean: torch.Tensor, std: torch.Tensor) -> None:
        """Per-mel-bin input statistics from training data (applied before the CNN)."""
        self.feat_mean.copy_(torch.as_tensor(mean, dtype=self.feat_mean.dtype))
        self.feat_std.copy_(torch.as_tensor(std, dtype=self.feat_std.dtype).clamp_min(1e-5))

    def frontend(self, x: torch.Tensor) -> torch.Tensor:
        """(B, T, n_mels) log-mel -> (B, T // time_pool, cnn_dim) CNN output per output frame."""
        if x.dim() != 3 or x.shape[-1] != self.cfg.n_mels:
            raise ValueError(f"expected (batch, frames, {self.cfg.n_mels}) features, got {tuple(x.shape)}")
        if x.shape[1] < self.cfg.time_pool:
            raise ValueError(f"need at least {self.cfg.time_pool} frames, got {x.shape[1]}")
        h = ((x - self.feat_mean) / self.feat_std).unsqueeze(1)
        for block in self.cnn:
            h = block(h)  # (B, C, T', F') at the end
        b, c, t, f = h.shape
        return h.permute(0, 2, 1, 3).reshape(b, t, c * f)

    def backend(self, feats: torch.Tensor) -> torch.Tensor:
        """(B, T', cnn_dim) -> (B, T', feat_dim) GRU output."""
        return self.rnn(feats)[0]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.backend(self.frontend(x))


class Labeler(nn.Module):
    """Frame-level sigmoid classifier with attention pooling to clip level (F1, F2 or Ft)."""

    def __init__(self, cfg: SedConfig) -> None:
        """A hidden layer of ``cfg.head_hidden`` units (0: none), with dropout ``cfg.dropout``."""
        super().__init__()
        d = cfg.feat_dim
        hidden = cfg.head_hidden
        if hidden:
            self.hidden: nn.Module | None = nn.Sequential(nn.Linear(d, hidden), nn.ReLU(), nn.Dropout(cfg.dropout))
            d = hidden
        else:
            self.hidden = None
        self.frame = nn.Linear(d, cfg.n_classes)
        self.att = nn.Linear(d, cfg.n_classes)

    def first_layer_weight(self) -> torch.Tensor:
        """(out, in) weight of the layer applied to F's output (paper eq. 8's W_F1 / W_F2, transposed)."""
        return self.hidden[0].weight if self.hidden is not None else self.frame.weight  # type: ignore[index]

    def forward(self, h: torch.Tensor) -> dict[str, torch.Tensor]:
        if self.hidden is not None:
            h = self.hidden(h)
        logits = self.frame(h)  # (B, T, K)
        frame = torch.sigmoid(logits)
        w = torch.softmax(self.att(h), dim=1)  # attention over time, per class
        clip = (w * frame).sum(dim=1).clamp(0.0, 1.0)  # (B, K)
        return {"frame_logits": logits, "frame": frame, "clip": clip}


class DomainClassifier(nn.Module):
    """D: gradient reversal, then an MLP giving a real-vs-synthetic logit per clip or per frame."""

    def __init__(self, cfg: SedConfig) -> None:
        super().__init__()
        self.scale = cfg.grl_scale
        self.net = nn.Sequential(nn.Linear(cfg.feat_dim, cfg.domain_hidden), nn.ReLU(), nn.Linear(cfg.domain_hidden, 1))

    def forward(self, h: torch.Tensor, mode: str = "time", *, reverse: bool = True) -> torch.Tensor:
        """``h`` (B, T, D) -> logits (B,) for ``"whole"`` (time average first) or (B, T) for ``"time"``."""
        if mode not in DOMAIN_MODES:
            raise ValueError(f"domain mode must be one of {DOMAIN_MODES}, got {mode!r}")
        if reverse:
            h = grad_reverse(h, self.scale)
        if mode == "whole":
            h = h.mean(dim=1)
        return self.net(h).squeeze(-1)


class SedModel(nn.Module):
    """F, F1, F2, Ft and D bundled; see the module docstring."""

    def __init__(self, cfg: SedConfig | None = None) -> None:
        super().__init__()
        self.cfg = cfg or SedConfig()
        self.F = FeatureExtractor(self.cfg)
        self.f1 = Labeler(self.cfg)
        self.f2 = Labeler(self.cfg)
        self.ft = Labeler(self.cfg)
        self.D = DomainClassifier(self.cfg)

    def frontend(self, x: torch.Tensor) -> torch.Tensor:
        """(B, T, n_mels) log-mel -> (B, T', cnn_dim) CNN output (cacheable per output frame in eval mode)."""
        return self.F.frontend(x)

    def backend(
        self, feats: torch.Tensor, heads: Sequence[str] = ("ft",), domain: str | None = None, *, detach_labelers: bool = False
    ) -> dict[str, Any]:
        """CNN output -> ``{head: {"frame_logits", "frame", "clip"}, "features": F's output, "domain": logits}``.

        ``heads``: any of ``"f1", "f2", "ft"``; ``domain``: ``None``, ``"whole"`` ((B,) logits) or
        ``"time"`` ((B, T') logits), computed through the gradient reversal layer.
        ``detach_labelers``: F1 and F2 see F's output through a stop-gradient, so their losses (and
        eq. 8) train the labelers only and F learns from Ft (and D) alone.
        """
        bad = [h for h in heads if h not in HEADS]
        if bad:
            raise ValueError(f"unknown heads {bad}; choose from {HEADS}")
        h = self.F.backend(feats)
        out: dict[str, Any] = {"features": h}
        for name in heads:
            out[name] = getattr(self, name)(h.detach() if detach_labelers and name != "ft" else h)
        if domain is not None:
            out["domain"] = self.D(h, domain)
        return out

    def forward(
        self, x: torch.Tensor, heads: Sequence[str] = ("ft",), domain: str | None = None, *, detach_labelers: bool = False
    ) -> dict[str, Any]:
        return self.backend(self.frontend(x), heads, domain, detach_labelers=detach_labelers)

    @torch.no_grad()
    def detect(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Inference with Ft: ``(frame probabilities (B, T', K), clip probabilities (B, K))``."""
        o = self.forward(x)["ft"]
        return o["frame"], o["clip"]


def n_params(model: nn.Module) -> int:
    return int(sum(p.numel() for p in model.parameters()))


# ------------------------------------------------------------------------------------------------
# weight files
# ------------------------------------------------------------------------------------------------


def save_model(path: str | Path, model: SedModel, *, meta: Mapping[str, Any] | None = None) -> Path:
    """Write ``{format, config, state_dict, meta}`` atomically (:func:`streamkit.models.checkpoint.save_checkpoint`)."""
    return save_checkpoint(path, FORMAT, model, model.cfg, meta=meta)


def load_model(path: str | Path, *, expect: SedConfig | Mapping[str, Any] | None = None) -> tuple[SedModel, dict[str, Any]]:
    """Load a file written by :func:`save_model`: ``(model in eval mode, meta)``.

    ``expect``: a config (or some of its fields) the file must match.

    Raises:
        ModelError: missing, corrupt or foreign file; a config that is invalid or does not match
            ``expect``; a state dict that does not match the config.
    """
    model, _cfg, obj = load_checkpoint(path, fmt=FORMAT, what="SED CRNN", from_dict=SedConfig.from_dict, build=SedModel, expect=expect)
    return model, dict(obj.get("meta") or {})
