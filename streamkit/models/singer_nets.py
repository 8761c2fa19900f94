"""The singer-ID paper's two networks, scaled to train on a few CPU minutes: a CRNN and a residual BLSTM.

Both read a motif clip (16 kHz audio cut at level boundaries, :mod:`streamkit.dsp.motifs`) as
frames of one of three front-ends (:func:`clip_features`, 10 ms hop, 25 ms Hann window):

* ``mel``: 40 log-mel energies (50-8000 Hz);
* ``mfcc``: 20 cepstra c1..c20 of those 40 (DCT-II; c0, the level, is left out);
* ``stft``: the log power spectrum, 128 linear bins of 62.5 Hz (0-8 kHz).

For ``mel`` and ``stft`` every frame is minus its own mean, so the recording level drops out;
then every dimension is standardised with the training set's mean and deviation (stored with
the weights).

* :class:`CRNN` (the paper's baseline, after music tagging): conv blocks (3x3 conv, batch norm,
  ELU, max-pool over frequency, dropout), the first with stride 2x2; a GRU over time.
* :class:`ResBLSTM` (the paper's best): a 3x3 stride-2 conv stem and one residual block (two 3x3
  convs and the identity), then BLSTM layers whose outputs are added to their inputs (residual).

Either net pools its time outputs over the clip's valid frames (mean and standard deviation) into
an embedding (``dim``, 64); a linear layer on it classifies the training singers. For galleries
the embedding is then whitened within singers and length-normalised (the
:class:`~streamkit.models.singer_embed.Whitening` of the pooled embedding, fitted on the training
clips' embeddings).
:class:`NetEmbedder` embeds clips for a gallery (cosine scoring, like
:class:`streamkit.models.singer_embed.SingerEmbedder`); :func:`load_embedder` picks the embedder
a weight file is for.
"""

from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from streamkit.core.errors import ModelError
from streamkit.dsp.motifs import Clip, motifs_of_contour
from streamkit.models.singer_embed import HOP, N_FFT, RATE, WIN, Embedding, SingerEmbedder, Whitening, _fbank
from streamkit.models.singer_embed import WEIGHTS as SINGER_EMBED_WEIGHTS

FORMAT = "streamkit-singer-net"
MODELS = ("crnn", "blstm")
FEATURES = ("mel", "mfcc", "stft")
N_MFCC = 20
MIN_FRAMES = 10  #: frames (0.1 s) a clip needs
PIECE_FRAMES = 300  #: with no motif, the voiced frames are embedded in pieces of this many (3 s; the nets train on clips of 0.15-3 s)
#: the shipped net, the default embedder of motif-mode galleries (``singers``, ``models.singer_id``)
DEFAULT_NET = Path(__file__).parent / "weights" / "singer_crnn_mfcc.pt"


def feature_dim(kind: str) -> int:
    return {"mel": 40, "mfcc": N_MFCC, "stft": 128}[kind]


_DCT: list[np.ndarray] = []


def _dct() -> np.ndarray:
    if not _DCT:
        n = np.arange(40)
        k = np.arange(1, N_MFCC + 1)[:, None]
        _DCT.append((np.sqrt(2.0 / 40) * np.cos(np.pi / 40 * (n + 0.5) * k)).T)  # (40, 20), orthonormal DCT-II rows 1..20
    return _DCT[0]


def clip_features(x: np.ndarray, kind: str) -> np.ndarray:
    """(frames, feature_dim(kind)) float32 of 16 kHz audio ``x``: frame ``j`` is the 25 ms window
    centred on sample ``160 j`` (zeros outside ``x``); ``len(x) // 160`` frames."""
    if kind not in FEATURES:
        raise ValueError(f"features must be one of {', '.join(FEATURES)}, got {kind!r}")
    x = np.asarray(x, dtype=np.float64).reshape(-1)
    n = len(x) // HOP
    if n == 0:
        return np.zeros((0, feature_dim(kind)), dtype=np.float32)
    pad = np.concatenate([np.zeros(WIN // 2), x, np.zeros(WIN)])
    fr = np.lib.stride_tricks.sliding_window_view(pad, WIN)[: n * HOP : HOP][:n]
    p = np.abs(np.fft.rfft(fr * np.hanning(WIN + 1)[:WIN], N_FFT)) ** 2
    if kind == "stft":
        f = np.log(p[:, :256].reshape(n, 128, 2).mean(axis=2) + 1e-10)
        f -= f.mean(axis=1, keepdims=True)
    else:
        f = np.log(np.maximum(p @ _fbank(), 1e-10))
        f = f @ _dct() if kind == "mfcc" else f - f.mean(axis=1, keepdims=True)
    return f.astype(np.float32)


@dataclass(frozen=True)
class NetConfig:
    model: str = "blstm"
    features: str = "mel"
    n_classes: int = 8
    channels: int = 16
    hidden: int = 32  #: GRU units (CRNN: 2x this) / LSTM units per direction
    layers: int = 2  #: BLSTM layers (residual)
    dim: int = 64  #: embedding
    dropout: float = 0.1

    def __post_init__(self) -> None:
        if self.model not in MODELS:
            raise ValueError(f"model must be one of {', '.join(MODELS)}, got {self.model!r}")
        if self.features not in FEATURES:
            raise ValueError(f"features must be one of {', '.join(FEATURES)}, got {self.features!r}")
        if self.n_classes < 2:
            raise ValueError(f"n_classes must be >= 2, got {self.n_classes}")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: Any) -> NetConfig:
        return cls(**dict(d))


def _conv(cin: int, cout: int, stride: int = 1) -> nn.Sequential:
    return nn.Sequential(nn.Conv2d(cin, cout, 3, stride=stride, padding=1, bias=False), nn.BatchNorm2d(cout))


class _ResBlock(nn.Module):
    def __init__(self, c: int) -> None:
        super().__init__()
        self.a, self.b = _conv(c, c), _conv(c, c)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | float = 1.0) -> torch.Tensor:
        return torch.relu(x + self.b(torch.relu(self.a(x)) * mask))


def pool_stats(h: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """(B, T, D) -> (B, 2D): mean and standard deviation over each item's first ``lengths`` steps."""
    mask = (torch.arange(h.shape[1])[None, :] < lengths[:, None]).to(h.dtype)[:, :, None]
    n = mask.sum(dim=1).clamp(min=1.0)
    mu = (h * mask).sum(dim=1) / n
    var = (((h - mu[:, None, :]) ** 2) * mask).sum(dim=1) / n
    return torch.cat([mu, torch.sqrt(var + 1e-5)], dim=1)


class SingerNet(nn.Module):
    """(B, T, F) features and their lengths -> (B, dim) embeddings (:meth:`embed`) or class logits (:meth:`forward`)."""

    def __init__(self, cfg: NetConfig) -> None:
        super().__init__()
        self.cfg = cfg
        c = cfg.channels
        if cfg.model == "crnn":
            self.front = nn.Sequential(
                _conv(1, c, 2), nn.ELU(), nn.Dropout(cfg.dropout),
                _conv(c, c), nn.ELU(), nn.MaxPool2d((2, 1)), nn.Dropout(cfg.dropout),
                _conv(c, 2 * c), nn.ELU(), nn.MaxPool2d((2, 1)), nn.Dropout(cfg.dropout),
                _conv(2 * c, 2 * c), nn.ELU(), nn.AdaptiveAvgPool2d((2, None)),
            )  # fmt: skip
            self.rnn = nn.GRU(4 * c, 2 * cfg.hidden, batch_first=True)
            out = 2 * cfg.hidden
        else:
            self.front = nn.Sequential(_conv(1, c, 2), nn.ReLU(), _ResBlock(c), nn.AdaptiveAvgPool2d((4, None)))
            self.proj = nn.Linear(4 * c, 2 * cfg.hidden)
            self.rnns = nn.ModuleList(nn.LSTM(2 * cfg.hidden, cfg.hidden, batch_first=True, bidirectional=True) for _ in range(cfg.layers))
            out = 2 * cfg.hidden
        self.emb = nn.Linear(2 * out, cfg.dim)
        self.cls = nn.Linear(cfg.dim, cfg.n_classes)

    def _seq(self, x: torch.Tensor, lengths: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = x.transpose(1, 2)[:, None]  # (B, 1, F, T)
        lens = torch.div(lengths + 1, 2, rounding_mode="floor").clamp(min=1)  # the stride-2 stem halves time
        mask: torch.Tensor | None = None
        for layer in self.front:  # padding frames are zeroed after every layer: an item's embedding does not depend on its batch
            h = layer(h, mask) if isinstance(layer, _ResBlock) and mask is not None else layer(h)
            if mask is None:
                mask = (torch.arange(h.shape[-1])[None, :] < lens[:, None]).to(h.dtype)[:, None, None, :]
            h = h * mask
        h = h.flatten(1, 2).transpose(1, 2)  # (B, T', C F')
        lens = lens.clamp(max=h.shape[1])
        if self.cfg.model == "crnn":
            return self._rnn(self.rnn, h, lens), lens
        h = self.proj(h)
        for rnn in self.rnns:
            h = h + self._rnn(rnn, h, lens)
        return h, lens

    @staticmethod
    def _rnn(rnn: nn.Module, h: torch.Tensor, lens: torch.Tensor) -> torch.Tensor:
        packed = nn.utils.rnn.pack_padded_sequence(h, lens.cpu(), batch_first=True, enforce_sorted=False)
        out, _ = rnn(packed)
        return nn.utils.rnn.pad_packed_sequence(out, batch_first=True, total_length=h.shape[1])[0]

    def embed(self, x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        h, lens = self._seq(x, lengths)
        return self.emb(pool_stats(h, lens))

    def forward(self, x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        return self.cls(torch.relu(self.embed(x, lengths)))


def pad_batch(feats: list[np.ndarray]) -> tuple[torch.Tensor, torch.Tensor]:
    """Zero-pad (T_i, F) arrays into (B, max T, F) and their lengths."""
    t = max(f.shape[0] for f in feats)
    out = np.zeros((len(feats), t, feats[0].shape[1]), dtype=np.float32)
    for i, f in enumerate(feats):
        out[i, : f.shape[0]] = f
    return torch.from_numpy(out), torch.tensor([f.shape[0] for f in feats])


class NetEmbedder:
    """A trained :class:`SingerNet` as a gallery embedder: ``embed(x, rows) -> Embedding`` (the
    mean of the motif clips' embeddings; of 3 s pieces of the voiced frames when no motif is found), ``embed_clips``,
    ``dim``, ``mode`` (always ``motif``), ``transform.meta`` (thresholds)."""

    mode = "motif"

    def __init__(self, net: SingerNet, mu: np.ndarray, sd: np.ndarray, meta: dict[str, Any] | None = None, post: Whitening | None = None) -> None:
        self.net = net.eval()
        self.mu, self.sd = np.asarray(mu, dtype=np.float32), np.asarray(sd, dtype=np.float32)
        self.meta = dict(meta or {})
        d = net.cfg.dim
        self.post = post or Whitening(np.zeros(d), np.ones(d), np.eye(d), np.zeros(d))
        self.transform = self  # thresholds live in .meta, as on the whitening transform

    def fit_post(self, feats: list[np.ndarray], labels: np.ndarray, *, shrink: float = 0.1) -> None:
        """Fit the within-singer whitening of the net's raw embeddings (normalised features, labelled);
        without it the raw embeddings share a large common part and all cosines are near 1."""
        self.post = Whitening.fit(self.raw_embeddings(feats), labels, shrink=shrink)

    @property
    def dim(self) -> int:
        return self.net.cfg.dim

    def features(self, x: np.ndarray) -> np.ndarray:
        return (clip_features(x, self.net.cfg.features) - self.mu) / self.sd

    def raw_embeddings(self, feats: list[np.ndarray], batch: int = 64) -> np.ndarray:
        """(N, dim) the net's embedding layer for normalised feature arrays (each at least one frame)."""
        res = np.zeros((len(feats), self.dim))
        order = np.argsort([f.shape[0] for f in feats])
        with torch.no_grad():
            for i in range(0, len(feats), batch):
                idx = order[i : i + batch]
                res[idx] = self.net.embed(*pad_batch([feats[j] for j in idx])).numpy()
        return res

    def embed_features(self, feats: list[np.ndarray]) -> np.ndarray:
        """(N, dim) whitened, length-normalised embeddings of normalised feature arrays."""
        return self.post(self.raw_embeddings(feats))

    def embed_clips(self, x: np.ndarray, rows: np.ndarray, clips: list[Clip]) -> list[np.ndarray]:
        """One embedding per clip (clips under 0.1 s are left out)."""
        feats = [self.features(x[int(round(c.start_s * RATE)) : int(round(c.end_s * RATE))]) for c in clips]
        feats = [f for f in feats if f.shape[0] >= MIN_FRAMES]
        return list(self.embed_features(feats)) if feats else []

    def embed(self, x: np.ndarray, rows: np.ndarray | None = None) -> Embedding:
        x = np.nan_to_num(np.asarray(x, dtype=np.float64).reshape(-1))
        if rows is None:
            from streamkit.dsp.melody import melody_f0

            rows = melody_f0(x)
        v = rows[:, 1] > 0.5
        voiced_s = float(np.count_nonzero(v)) * 0.01
        motifs, clips, _ = motifs_of_contour(rows)
        es = self.embed_clips(x, rows, clips)
        if not es:  # no motif: the voiced frames of the whole clip, in pieces of PIECE_FRAMES (one batch)
            if np.count_nonzero(v) < MIN_FRAMES:
                return Embedding(None, (), (), voiced_s)
            f = self.features(x)[: v.shape[0]]
            f = f[v[: f.shape[0]]]
            pieces = [f[i : i + PIECE_FRAMES] for i in range(0, f.shape[0], PIECE_FRAMES)]
            es = list(self.embed_features([p for p in pieces if p.shape[0] >= MIN_FRAMES] or [f]))
            motifs, clips = [], []
        e = np.mean(es, axis=0)
        return Embedding(e / (np.linalg.norm(e) + 1e-12), tuple(m.pattern for m in motifs), tuple((c.start_s, c.end_s) for c in clips), voiced_s)

    def save(self, path: str | Path) -> Path:
        from streamkit.models.checkpoint import save_checkpoint

        post = {k: torch.from_numpy(np.asarray(getattr(self.post, k), dtype=np.float32)) for k in ("mu", "sd", "w", "centre")}
        return save_checkpoint(path, FORMAT, self.net, self.net.cfg, meta=self.meta, storage_dtype=torch.float16,
                               mu=torch.from_numpy(self.mu), sd=torch.from_numpy(self.sd), post=post)  # fmt: skip

    @classmethod
    def load(cls, path: str | Path) -> NetEmbedder:
        from streamkit.models.checkpoint import load_checkpoint

        net, _, obj = load_checkpoint(path, fmt=FORMAT, what="singer net", from_dict=NetConfig.from_dict, build=SingerNet)
        try:
            post = Whitening(*(obj["post"][k].double().numpy() for k in ("mu", "sd", "w", "centre")))
            return cls(net, obj["mu"].float().numpy(), obj["sd"].float().numpy(), obj.get("meta"), post)
        except (KeyError, TypeError, AttributeError) as exc:
            raise ModelError(f"{path}: singer net file without its feature or embedding normalisation ({exc})") from None


def load_embedder(mode: str, weights: str | Path | None = None) -> Any:
    """The embedder for ``weights``: a :class:`NetEmbedder` for a singer-net file (``.pt``, motif
    mode only), a :class:`~streamkit.models.singer_embed.SingerEmbedder` for a whitening transform
    (``.npz``). Without ``weights``: the shipped net (:data:`DEFAULT_NET`) in motif mode, the shipped
    pooled embedding in clip mode. ValueError (or ModelError) naming the file when it does not fit."""
    if weights is None and mode == "motif" and DEFAULT_NET.is_file():
        weights = DEFAULT_NET
    if weights is not None and Path(weights).suffix == ".pt":
        if mode != "motif":
            raise ValueError(f"{weights}: a singer net embeds motif clips; mode {mode!r} needs an .npz transform")
        emb: Any = NetEmbedder.load(weights)
    else:
        emb = SingerEmbedder(mode, weights)
    emb.identity = embedder_identity(weights if weights is not None else SINGER_EMBED_WEIGHTS)
    return emb


def embedder_identity(weights: str | Path) -> str:
    """What a gallery records of the embedder that enrolled it: the weight file's name and the
    first 16 hex digits of its SHA-256 (vectors of two different files never share a space)."""
    p = Path(weights)
    h = hashlib.sha256()
    with open(p, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return f"{p.name} sha256:{h.hexdigest()[:16]}"


def n_params(net: nn.Module) -> int:
    return sum(p.numel() for p in net.parameters())
