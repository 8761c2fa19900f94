"""Multilingual streaming RNN-T models: vanilla, onehot, multi-softmax, multi-softmax LSP, multi-softmax LID.

After Joshi et al., "Multiple Softmax Architecture for Streaming Multilingual End-to-End ASR
Systems" (Interspeech 2021).
One model family, the variant chosen by :class:`RnntConfig`:

==============  ==============================================================================
``vanilla``     one softmax over the union of all languages' symbols (one blank); shared
                encoder, prediction network (embedding + LSTM) and joint. LID-free.
``onehot``      vanilla + the language one-hot appended to the encoder input and to the
                prediction network's input (the language must be known).
``multisoftmax`` language-specific embedding, joint network and softmax (each over that
                language's own symbols); shared encoder and prediction LSTM.
``lsp``         multi-softmax + a language-specific prediction LSTM per language.
``lid``         multi-softmax + an LID head (linear layer + softmax over the languages) on the
                encoder output, trained with frame-level cross-entropy against the utterance's
                language. LID-free at inference (all decoders run; the LID posteriors pick one).
                ``lid_hidden > 0`` puts a one-layer uni-directional GRU of that size between the
                encoder output and the linear layer (a recurrent LID head; see below).
==============  ==============================================================================

Network: stacked 30 ms log-mel vectors (:mod:`streamkit.models.features`, 640 dims) ->
per-dimension normalisation (buffers ``feat_mean``/``feat_std``, set from training data with
:meth:`RnntModel.set_feature_stats`) -> uni-directional LSTM encoder; prediction network =
embedding of the previous non-blank symbol (blank, index 0, is the start symbol) -> LSTM; joint
``out(tanh(enc_proj(enc) + pred_proj(pred)))``. The paper uses 6x1024 encoder and 2x1024
prediction LSTMs (about 69 M parameters); the defaults here (3x256 encoder, 1x256 prediction, joint
256, embedding 64) are scaled so that training fits a 2-core CPU: for four 60-symbol languages
2.51 M parameters (vanilla), 2.52 M (onehot), 2.90 M (multi-softmax; each language has its own
256x256 joint projection), 3.89 M (LSP), 2.91 M (LID).

Symbols: targets are always given in each language's **own** vocabulary (0 = blank, 1..V_l-1).
For ``vanilla``/``onehot`` they are mapped to the union vocabulary by :meth:`RnntModel.to_union`
(language ``l``'s symbol ``i > 0`` becomes ``union_offset[l] + i - 1``); their joint outputs, and
the tokens fed to :meth:`RnntModel.predictor_step`, are union ids. For the multi-softmax variants
joint outputs and tokens are language-local.

LID gradient isolation (paper §4.2: "the final loss is the addition of RNN-T and CE loss; however,
CE loss only affects the encoder and LID specific parameters"): the LID head reads only the
encoder output, so the CE gradient reaches the LID head and the encoder and nothing else, and
the RNN-T loss, computed from the joint of the utterance's own language, never touches the LID
head. Both facts are tested with ``torch.autograd.grad``. ``lid_detach_encoder=True`` stops the CE
gradient at the encoder output as well (the "separate LID" alternative the paper mentions as a
possible fix for the LID loss disturbing the encoder).

Recurrent LID head (``lid_hidden``, default 0 = the paper's linear layer). On our scale the linear
layer on a frozen encoder tops out at 77-78 % dev utterance LID (run A, ``streamkit train rnnt-lid``),
while a 64-unit GRU between encoder and linear layer reached 83-85 % on the same frozen encoder
(the frames of one utterance are scored with context, not one by one). The GRU is causal and
carries its own state, so the streaming decoder runs it frame by frame
(:meth:`RnntModel.lid_step`) and resets it at utterance starts; :meth:`RnntModel.lid_logits` over a
whole sequence equals the frame-by-frame steps.

Mini-batches may mix languages: the multi-softmax variants then run each language's prediction
network / joint on its own rows (the paper draws each mini-batch from one language).

Input normalisation (``RnntConfig.feat_norm``): ``global`` (the per-dimension training statistics
only; the default, so older weight files load unchanged) or ``causal`` (then a running
per-utterance mean/variance normalisation, see :meth:`RnntModel._enc_input`; what ``streamkit
train rnnt`` uses by default).

Streaming: :meth:`RnntModel.encoder_step` carries the LSTM state across chunks (equal to the
full-sequence encoder), :meth:`RnntModel.predictor_step` advances the prediction network by one
token per row, :meth:`RnntModel.joint` combines any broadcastable encoder/prediction outputs, and
:meth:`RnntModel.lid_logits` gives the per-frame LID logits. The streaming decoder lives apart
(``rnnt_stream.py``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from streamkit.models.checkpoint import load_checkpoint, save_checkpoint
from streamkit.models.lstm_step import lstm_step
from streamkit.models.rnnt_loss import rnnt_loss

__all__ = [
    "BLANK",
    "VARIANTS",
    "FEAT_NORMS",
    "FORMAT",
    "RnntConfig",
    "RnntModel",
    "Joint",
    "save_model",
    "load_model",
    "n_params",
]

BLANK = 0
VARIANTS = ("vanilla", "onehot", "multisoftmax", "lsp", "lid")
FEAT_NORMS = ("global", "causal")
FORMAT = "streamkit-rnnt/1"

LstmState = tuple[torch.Tensor, torch.Tensor]
STEP_FRAMES = 8  #: encoder chunks of at most this many frames go frame by frame through lstm_step (inference)
STEP_ROWS = 32  #: single-symbol prediction steps of at most this many rows take lstm_step (more rows: nn.LSTM is as fast)


@dataclass(frozen=True)
class RnntConfig:
    """Architecture of an :class:`RnntModel`. ``vocab_sizes[l]`` counts blank (index 0)."""

    variant: str = "lid"
    languages: tuple[str, ...] = ("en", "hi", "ta", "gu")
    vocab_sizes: tuple[int, ...] = (60, 60, 60, 60)
    feat_dim: int = 640
    enc_layers: int = 3
    enc_hidden: int = 256
    pred_layers: int = 1
    pred_hidden: int = 256
    embed_dim: int = 64
    joint_dim: int = 256
    dropout: float = 0.0
    lid_weight: float = 1.0
    lid_detach_encoder: bool = False
    lid_hidden: int = 0
    feat_norm: str = "global"
    norm_prior_frames: float = 50.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "languages", tuple(str(x) for x in self.languages))
        object.__setattr__(self, "vocab_sizes", tuple(int(x) for x in self.vocab_sizes))
        if self.variant not in VARIANTS:
            raise ValueError(f"variant must be one of {VARIANTS}, got {self.variant!r}")
        if not self.languages or len(self.languages) != len(self.vocab_sizes):
            raise ValueError(f"need one vocabulary size per language: {self.languages} vs {self.vocab_sizes}")
        if len(set(self.languages)) != len(self.languages):
            raise ValueError(f"duplicate language names: {self.languages}")
        if min(self.vocab_sizes) < 2:
            raise ValueError(f"each vocabulary needs blank plus at least one symbol: {self.vocab_sizes}")
        for name in ("feat_dim", "enc_layers", "enc_hidden", "pred_layers", "pred_hidden", "embed_dim", "joint_dim"):
            if int(getattr(self, name)) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if int(self.lid_hidden) < 0:
            raise ValueError(f"lid_hidden must be >= 0 (0: linear LID head), got {self.lid_hidden}")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {self.dropout}")
        if self.feat_norm not in FEAT_NORMS:
            raise ValueError(f"feat_norm must be one of {FEAT_NORMS}, got {self.feat_norm!r}")
        if not self.norm_prior_frames > 0:
            raise ValueError(f"norm_prior_frames must be > 0, got {self.norm_prior_frames}")

    @property
    def n_lang(self) -> int:
        return len(self.languages)

    @property
    def multi(self) -> bool:
        """Language-specific embedding/joint/softmax (the multi-softmax family)."""
        return self.variant in ("multisoftmax", "lsp", "lid")

    @property
    def has_lid(self) -> bool:
        return self.variant == "lid"

    @property
    def union_size(self) -> int:
        return 1 + sum(v - 1 for v in self.vocab_sizes)

    @property
    def union_offsets(self) -> tuple[int, ...]:
        """Union id of each language's symbol 1."""
        out, o = [], 1
        for v in self.vocab_sizes:
            out.append(o)
            o += v - 1
        return tuple(out)

    def output_size(self, lang: int) -> int:
        """Size of the joint's output for language ``lang`` (the union for vanilla/onehot)."""
        return self.vocab_sizes[lang] if self.multi else self.union_size

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["languages"] = list(self.languages)
        d["vocab_sizes"] = list(self.vocab_sizes)
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> RnntConfig:
        known = {f.name for f in fields(cls)}
        unknown = set(d) - known
        if unknown:
            raise ValueError(f"unknown RnntConfig fields: {sorted(unknown)}")
        return cls(**{k: (tuple(v) if k in ("languages", "vocab_sizes") else v) for k, v in d.items()})


class Joint(nn.Module):
    """``out(tanh(enc_proj(enc) + pred_proj(pred)))`` with broadcasting over leading dims."""

    def __init__(self, enc_dim: int, pred_dim: int, joint_dim: int, vocab: int) -> None:
        super().__init__()
        self.enc_proj = nn.Linear(enc_dim, joint_dim)
        self.pred_proj = nn.Linear(pred_dim, joint_dim, bias=False)
        self.out = nn.Linear(joint_dim, vocab)

    def forward(self, enc: torch.Tensor, pred: torch.Tensor) -> torch.Tensor:
        return self.combine(self.enc_proj(enc), self.pred_proj(pred))

    def combine(self, enc_p: torch.Tensor, pred_p: torch.Tensor) -> torch.Tensor:
        """Logits from already projected inputs (``enc_proj(enc)``, ``pred_proj(pred)``), so that a
        decoder projects each encoder frame and each hypothesis' prediction output only once."""
        return self.out(torch.tanh(enc_p + pred_p))


def _lstm(inp: int, hidden: int, layers: int, dropout: float) -> nn.LSTM:
    return nn.LSTM(inp, hidden, num_layers=layers, batch_first=True, dropout=dropout if layers > 1 else 0.0)


class RnntModel(nn.Module):
    """The five model variants of the paper behind one interface (see the module docstring)."""

    def __init__(self, cfg: RnntConfig | None = None) -> None:
        super().__init__()
        self.cfg = cfg = cfg or RnntConfig()
        L = cfg.n_lang
        oh = L if cfg.variant == "onehot" else 0
        self.register_buffer("feat_mean", torch.zeros(cfg.feat_dim))
        self.register_buffer("feat_std", torch.ones(cfg.feat_dim))
        self.encoder = _lstm(cfg.feat_dim + oh, cfg.enc_hidden, cfg.enc_layers, cfg.dropout)
        if cfg.multi:
            self.embed = nn.ModuleList(nn.Embedding(v, cfg.embed_dim) for v in cfg.vocab_sizes)
            self.joints = nn.ModuleList(Joint(cfg.enc_hidden, cfg.pred_hidden, cfg.joint_dim, v) for v in cfg.vocab_sizes)
        else:
            self.embed = nn.ModuleList([nn.Embedding(cfg.union_size, cfg.embed_dim)])
            self.joints = nn.ModuleList([Joint(cfg.enc_hidden, cfg.pred_hidden, cfg.joint_dim, cfg.union_size)])
        n_pred = L if cfg.variant == "lsp" else 1
        self.predictors = nn.ModuleList(_lstm(cfg.embed_dim + oh, cfg.pred_hidden, cfg.pred_layers, cfg.dropout) for _ in range(n_pred))
        self.lid_rnn = nn.GRU(cfg.enc_hidden, cfg.lid_hidden, batch_first=True) if cfg.has_lid and cfg.lid_hidden else None
        self.lid_head = nn.Linear(cfg.lid_hidden or cfg.enc_hidden, L) if cfg.has_lid else None
        self.register_buffer("_offsets", torch.tensor(cfg.union_offsets, dtype=torch.long) - 1, persistent=False)

    # ------------------------------------------------------------------ helpers
    def _lang_vec(self, lang: int | torch.Tensor | None, B: int) -> torch.Tensor:
        dev = self.feat_mean.device
        if lang is None:
            if self.cfg.variant == "onehot" or self.cfg.multi:
                raise ValueError(f"variant {self.cfg.variant!r} needs the language")
            return torch.zeros(B, dtype=torch.long, device=dev)
        t = torch.as_tensor(lang, device=dev)
        if t.dtype.is_floating_point or t.dtype == torch.bool:
            raise ValueError(f"lang must be an int or integer tensor, got {t.dtype}")
        t = t.to(torch.long)
        if t.dim() == 0:
            t = t.expand(B)
        if t.shape != (B,):
            raise ValueError(f"lang must be an int or have shape ({B},), got {tuple(t.shape)}")
        if B and (int(t.min()) < 0 or int(t.max()) >= self.cfg.n_lang):
            raise ValueError(f"lang must lie in [0, {self.cfg.n_lang}), got {t.tolist()}")
        return t

    def _onehot(self, lang: torch.Tensor, n: int, dtype: torch.dtype) -> torch.Tensor:
        return F.one_hot(lang, self.cfg.n_lang).to(dtype)[:, None, :].expand(lang.shape[0], n, self.cfg.n_lang)

    def to_union(self, tokens: torch.Tensor, lang: int | torch.Tensor) -> torch.Tensor:
        """Language-local symbols (blank 0 stays 0) to union ids; ``lang`` int or one per row."""
        lv = self._lang_vec(lang, tokens.shape[0]).to(tokens.device)
        off = self._offsets.to(tokens.device)[lv].reshape((-1,) + (1,) * (tokens.dim() - 1))
        return torch.where(tokens > 0, tokens + off, torch.zeros_like(tokens))

    def from_union(self, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Union ids -> (language, local symbol); blank gives language -1, symbol 0."""
        offs = torch.tensor(self.cfg.union_offsets, device=ids.device)
        lang = torch.bucketize(ids, offs, right=True) - 1
        local = torch.where(ids > 0, ids - offs[lang.clamp(min=0)] + 1, torch.zeros_like(ids))
        return torch.where(ids > 0, lang, torch.full_like(lang, -1)), local

    @torch.no_grad()
    def set_feature_stats(self, mean: torch.Tensor, std: torch.Tensor) -> None:
        """Per-dimension input normalisation (from training features)."""
        self.feat_mean.copy_(torch.as_tensor(mean, dtype=self.feat_mean.dtype))
        self.feat_std.copy_(torch.as_tensor(std, dtype=self.feat_std.dtype).clamp(min=1e-5))

    # ------------------------------------------------------------------ encoder
    def _enc_input(
        self, feats: torch.Tensor, lang: int | torch.Tensor | None, norm_state: tuple[torch.Tensor, ...] | None = None
    ) -> tuple[torch.Tensor, tuple[torch.Tensor, ...] | None]:
        """Normalised encoder input and the running-normalisation state (None for ``feat_norm="global"``).

        ``global``: ``(feats - feat_mean) / feat_std``. ``causal``: that, then per utterance and
        dimension a running mean/variance normalisation over the frames so far, started from
        ``norm_prior_frames`` pseudo-frames of the global statistics (mean 0, variance 1 after the
        global step): mean ``sum / (n0 + t)``, variance ``(n0 + scatter about the utterance's own
        mean) / (n0 + t)``. It removes the utterance's channel (band limit, gain, noise floor),
        which otherwise dominates the global statistics, and is causal, so streaming carries
        ``(count, sum, sum of squares)`` in the encoder state.
        """
        if feats.dim() != 3 or feats.shape[2] != self.cfg.feat_dim:
            raise ValueError(f"feats must be (B, T, {self.cfg.feat_dim}), got {tuple(feats.shape)}")
        x = (feats - self.feat_mean) / self.feat_std
        new_norm = None
        if self.cfg.feat_norm == "causal":
            B, T, D = x.shape
            if norm_state is None:
                cnt = x.new_zeros(B, 1)
                s1 = x.new_zeros(B, D)
                s2 = x.new_zeros(B, D)
            else:
                cnt, s1, s2 = norm_state
            n0 = float(self.cfg.norm_prior_frames)
            c1 = s1[:, None] + torch.cumsum(x, 1)
            c2 = s2[:, None] + torch.cumsum(x * x, 1)
            t = cnt[:, None] + torch.arange(1, T + 1, dtype=x.dtype, device=x.device)[None, :, None]  # (B, T, 1) frames so far
            mu = c1 / (t + n0)  # shrunk towards the global mean 0 by the prior pseudo-frames
            var = ((n0 + c2 - c1 * c1 / t) / (t + n0)).clamp(min=1e-2)  # prior variance 1 + the utterance's own scatter
            x = (x - mu) * torch.rsqrt(var)
            new_norm = (cnt + T, c1[:, -1], c2[:, -1]) if T else (cnt, s1, s2)
        if self.cfg.variant == "onehot":
            x = torch.cat([x, self._onehot(self._lang_vec(lang, feats.shape[0]), feats.shape[1], x.dtype)], dim=2)
        return x, new_norm

    def encoder_step(
        self, feats_chunk: torch.Tensor, state: tuple[torch.Tensor, ...] | None = None, lang: int | torch.Tensor | None = None
    ) -> tuple[torch.Tensor, tuple[torch.Tensor, ...]]:
        """Encoder over a chunk ``(B, n, feat_dim)`` from ``state`` (None: start); ``(enc, state)``.

        The state is ``(h, c)`` of the LSTM, followed for ``feat_norm="causal"`` by the running
        normalisation's ``(count, sum, sum of squares)``; callers pass it through unchanged.
        """
        x, norm = self._enc_input(feats_chunk, lang, None if state is None or len(state) < 5 else tuple(state[2:5]))
        hc = None if state is None else (state[0], state[1])
        if x.shape[1] <= STEP_FRAMES and self._stepping(self.encoder):
            # streaming: frame by frame through the packed one-step cell (5x faster than nn.LSTM per
            # call; every frame computed alike whatever the chunk, so chunking cannot change a bit)
            outs = []
            for k in range(x.shape[1]):
                o, hc = lstm_step(self.encoder, x[:, k], hc)
                outs.append(o)
            out = torch.stack(outs, 1) if outs else x.new_zeros((x.shape[0], 0, self.cfg.enc_hidden))
            st = hc if hc is not None else (x.new_zeros((self.cfg.enc_layers, x.shape[0], self.cfg.enc_hidden)),) * 2
        else:
            out, st = self.encoder(x, hc)
        return out, ((st[0], st[1]) if norm is None else (st[0], st[1], *norm))

    def _stepping(self, net: nn.LSTM) -> bool:
        """Whether inference may take :func:`~streamkit.models.lstm_step.lstm_step` (no autograd, no live dropout)."""
        return not torch.is_grad_enabled() and not (self.training and net.dropout > 0)

    def encode(self, feats: torch.Tensor, lang: int | torch.Tensor | None = None) -> torch.Tensor:
        """Full-sequence encoder output (B, T, enc_hidden)."""
        return self.encoder_step(feats, None, lang)[0]

    def lid_logits(self, enc: torch.Tensor) -> torch.Tensor:
        """Per-frame LID logits of encoder outputs (``lid`` variant only).

        ``enc`` (..., enc_hidden) for the linear head; (B, T, enc_hidden) whole sequences from
        their start for a recurrent head (``lid_hidden > 0``). Returns (..., n_lang).
        """
        return self.lid_step(enc, None)[0]

    def lid_step(self, enc: torch.Tensor, state: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor | None]:
        """LID logits of the encoder frames ``enc`` (B, n, enc_hidden) that follow ``state``.

        ``state``: the recurrent head's hidden state (None: the utterance starts); the linear head
        has none and returns None. Chunks stepped one after another equal one :meth:`lid_logits`.
        """
        if self.lid_head is None:
            raise ValueError(f"variant {self.cfg.variant!r} has no LID head")
        x = enc.detach() if self.cfg.lid_detach_encoder else enc
        if self.lid_rnn is None:
            return self.lid_head(x), None
        if x.dim() != 3:
            raise ValueError(f"a recurrent LID head needs (B, T, enc_hidden) encoder frames, got shape {tuple(x.shape)}")
        h, state = self.lid_rnn(x, state)
        return self.lid_head(h), state

    # ------------------------------------------------------------------ prediction network
    def _predict(self, tokens: torch.Tensor, state: LstmState | None, lang: int) -> tuple[torch.Tensor, LstmState]:
        """Prediction network on tokens (B, n) of one language (not for onehot)."""
        cfg = self.cfg
        x = self.embed[lang if cfg.multi else 0](tokens)
        net = self.predictors[lang if cfg.variant == "lsp" else 0]
        return self.run_predictor(net, x, state)

    def run_predictor(self, net: nn.LSTM, x: torch.Tensor, state: LstmState | None) -> tuple[torch.Tensor, LstmState]:
        """A prediction LSTM over embedded inputs ``x`` (B, n, in): one packed step for the decoders'
        single-symbol calls of up to ``STEP_ROWS`` rows, where it is faster than ``nn.LSTM``."""
        if x.shape[1] == 1 and x.shape[0] <= STEP_ROWS and self._stepping(net):
            o, st = lstm_step(net, x[:, 0], state)
            return o[:, None], st
        out, st = net(x, state)
        return out, (st[0], st[1])

    def _predict_rows(self, tokens: torch.Tensor, state: LstmState | None, lang: torch.Tensor) -> tuple[torch.Tensor, LstmState]:
        """Prediction network on (B, n) tokens with one language per row."""
        cfg = self.cfg
        B, n = tokens.shape
        if cfg.variant == "onehot":
            x = torch.cat([self.embed[0](tokens), self._onehot(lang, n, self.embed[0].weight.dtype)], dim=2)
            return self.run_predictor(self.predictors[0], x, state)
        if not cfg.multi:
            return self._predict(tokens, state, 0)
        langs = torch.unique(lang).tolist()
        if len(langs) == 1:
            return self._predict(tokens, state, int(langs[0]))
        out = tokens.new_zeros((B, n, cfg.pred_hidden), dtype=self.embed[0].weight.dtype)
        H = cfg.pred_layers
        h = tokens.new_zeros((H, B, cfg.pred_hidden), dtype=out.dtype) if state is None else state[0].clone()
        c = torch.zeros_like(h) if state is None else state[1].clone()
        for lg in langs:
            idx = (lang == lg).nonzero().squeeze(1)
            o, (hh, cc) = self._predict(tokens[idx], (h[:, idx].contiguous(), c[:, idx].contiguous()), int(lg))
            out = out.index_copy(0, idx, o)
            h = h.index_copy(1, idx, hh)
            c = c.index_copy(1, idx, cc)
        return out, (h, c)

    def predictor_step(
        self, tokens: torch.Tensor, state: LstmState | None = None, lang: int | torch.Tensor | None = None
    ) -> tuple[torch.Tensor, LstmState]:
        """Advance the prediction network by one token per row.

        Args:
            tokens: (B,) previous non-blank symbols (blank 0 to start); language-local ids for the
                multi-softmax variants, union ids for vanilla/onehot.
            state: ``(h, c)`` each (pred_layers, B, pred_hidden), or None (zeros).
            lang: int or (B,) languages (rows may differ); unused by ``vanilla``.
        Returns:
            ``(pred_out (B, pred_hidden), state)``.
        """
        if tokens.dim() != 1:
            raise ValueError(f"tokens must be (B,), got {tuple(tokens.shape)}")
        lv = self._lang_vec(lang, tokens.shape[0])
        out, st = self._predict_rows(tokens[:, None], state, lv)
        return out[:, 0], st

    # ------------------------------------------------------------------ joint
    def joint(self, enc: torch.Tensor, pred: torch.Tensor, lang: int | None = None) -> torch.Tensor:
        """Joint logits over ``output_size(lang)`` for broadcastable ``enc`` (..., H_e), ``pred`` (..., H_p)."""
        return self.joint_net(lang)(enc, pred)

    def joint_net(self, lang: int | None = None) -> Joint:
        """The :class:`Joint` that scores language ``lang`` (the one joint of ``vanilla``/``onehot``)."""
        if self.cfg.multi:
            if lang is None:
                raise ValueError(f"variant {self.cfg.variant!r} needs the language for its joint")
            if not 0 <= int(lang) < self.cfg.n_lang:
                raise ValueError(f"lang must lie in [0, {self.cfg.n_lang}), got {lang}")
            return self.joints[int(lang)]
        return self.joints[0]

    # ------------------------------------------------------------------ training
    def forward(
        self,
        feats: torch.Tensor,
        feat_lens: torch.Tensor,
        targets: torch.Tensor,
        target_lens: torch.Tensor,
        lang: int | torch.Tensor | None = None,
    ) -> dict[str, torch.Tensor]:
        """Losses of a batch: ``{"loss", "rnnt_loss", "lid_loss"}`` (RNN-T: mean over utterances).

        ``feats`` (B, T, feat_dim) stacked features with ``feat_lens`` (B,) valid frames;
        ``targets`` (B, U) language-local symbols (1..V_l-1 within ``target_lens``, anything after);
        ``lang`` int or (B,). ``loss = rnnt_loss + lid_weight * lid_loss`` (lid_loss 0 without LID head).
        """
        cfg = self.cfg
        B = feats.shape[0]
        feat_lens = torch.as_tensor(feat_lens, device=feats.device).to(torch.long)
        target_lens = torch.as_tensor(target_lens, device=feats.device).to(torch.long)
        if feat_lens.shape != (B,) or target_lens.shape != (B,) or targets.dim() != 2 or targets.shape[0] != B:
            raise ValueError(
                f"batch shapes disagree: feats {tuple(feats.shape)}, feat_lens {tuple(feat_lens.shape)}, targets {tuple(targets.shape)}, target_lens {tuple(target_lens.shape)}"
            )
        if B == 0:
            raise ValueError("empty batch")
        if int(feat_lens.min()) < 1 or int(feat_lens.max()) > feats.shape[1]:
            raise ValueError(f"feat_lens must lie in [1, {feats.shape[1]}], got {feat_lens.tolist()}")
        if int(target_lens.min()) < 0 or int(target_lens.max()) > targets.shape[1]:
            raise ValueError(f"target_lens must lie in [0, {targets.shape[1]}], got {target_lens.tolist()}")
        if lang is None:
            raise ValueError("forward needs the language of each utterance (targets are language-local symbols)")
        lv = self._lang_vec(lang, B)
        T, U = int(feat_lens.max()), int(target_lens.max())
        feats, targets = feats[:, :T], targets[:, :U].to(torch.long)
        valid = torch.arange(U, device=targets.device)[None, :] < target_lens[:, None]
        vocab = torch.tensor(cfg.vocab_sizes, device=targets.device)[lv][:, None]
        if bool(((targets < 1) | (targets >= vocab))[valid].any()):
            raise ValueError("targets must be language-local symbols in [1, vocab_size) within target_lens")
        targets = torch.where(valid, targets, torch.zeros_like(targets))
        if not cfg.multi:
            targets = self.to_union(targets, lv)

        enc = self.encode(feats, lv)
        pred_in = torch.cat([targets.new_zeros(B, 1), targets], dim=1)  # blank = start symbol
        pred, _ = self._predict_rows(pred_in, None, lv)
        if cfg.multi:
            total = enc.new_zeros(())
            for lg in torch.unique(lv).tolist():
                idx = (lv == lg).nonzero().squeeze(1)
                logits = self.joint(enc[idx][:, :, None], pred[idx][:, None], int(lg))
                total = total + rnnt_loss(logits, targets[idx], feat_lens[idx], target_lens[idx], blank=BLANK, reduction="sum")
            rnnt = total / B
        else:
            logits = self.joint(enc[:, :, None], pred[:, None])
            rnnt = rnnt_loss(logits, targets, feat_lens, target_lens, blank=BLANK, reduction="mean")

        if self.lid_head is not None:
            lid_logits = self.lid_logits(enc)  # (B, T, L)
            frames = torch.arange(T, device=enc.device)[None, :] < feat_lens[:, None]
            lid = F.cross_entropy(lid_logits[frames], lv[:, None].expand(B, T)[frames])
        else:
            lid = enc.new_zeros(())
        return {"loss": rnnt + cfg.lid_weight * lid, "rnnt_loss": rnnt, "lid_loss": lid}


def n_params(model: nn.Module) -> int:
    return int(sum(p.numel() for p in model.parameters()))


# ------------------------------------------------------------------------------------------------
# weight files
# ------------------------------------------------------------------------------------------------


def save_model(path: str | Path, model: RnntModel, *, meta: Mapping[str, Any] | None = None, half: bool = False) -> Path:
    """Write ``{format, config, state_dict, meta}`` atomically (:func:`streamkit.models.checkpoint.save_checkpoint`).

    ``half``: store the weights as float16 (half the file; they load into float32 parameters).
    """
    return save_checkpoint(path, FORMAT, model, model.cfg, meta=meta, storage_dtype=torch.float16 if half else None)


def load_model(path: str | Path, *, expect: RnntConfig | Mapping[str, Any] | None = None) -> tuple[RnntModel, dict[str, Any]]:
    """Load a file written by :func:`save_model`: ``(model in eval mode, meta)``.

    ``expect``: a config (or some of its fields) the file must match.

    Raises:
        ModelError: missing, corrupt or foreign file; a config that is invalid or does not match
            ``expect``; a state dict that does not match the config.
    """
    model, _cfg, obj = load_checkpoint(path, fmt=FORMAT, what="RNN-T", article="an", from_dict=RnntConfig.from_dict, build=RnntModel, expect=expect)
    return model, dict(obj.get("meta") or {})
