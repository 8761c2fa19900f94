"""The steps of ``streamkit train rnnt`` (:func:`streamkit.train.rnnt.train`): the training data
(:func:`load_data`), the initial model (:func:`build_model`), and a run's state between optimiser
steps (:class:`Trainer`: restore a checkpoint, draw the next batch, one step, validate, write the
checkpoint and the weight file)."""

from __future__ import annotations

import json
import math
import signal
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from streamkit.core.errors import ModelError
from streamkit.io.outputs import atomic_output, write_text
from streamkit.models.features import RATE, n_stacked
from streamkit.models.rnnt import RnntConfig, RnntModel, load_model, save_model
from streamkit.train.progress import TrainProgress
from streamkit.train.rnnt_card import model_card
from streamkit.train.rnnt_corpus import AsrCorpus, CorpusError, Utt, collate, compute_logmel, feature_stats, make_batches, spread
from streamkit.train.rnnt_eval import evaluate

__all__ = [
    "BATCHINGS",
    "CKPT_FORMAT",
    "FRAME_S",
    "LID_LOSSES",
    "CtcHeads",
    "TrainData",
    "Trainer",
    "build_model",
    "init_lstm",
    "load_data",
    "lr_at",
]

CKPT_FORMAT = "streamkit-rnnt-train/1"
BATCHINGS = ("language", "mixed")  #: --batching
LID_LOSSES = ("frame-mean", "utt-sum")  #: --lid-loss
FRAME_S = 0.03  #: seconds per stacked frame

# RnntConfig fields that change how a model trains, not its parameters: --init-from may change them
TRAINING_ONLY_CONFIG = ("lid_weight", "lid_detach_encoder", "dropout")


# --------------------------------------------------------------------------------------------
# the model and its training-only parts
# --------------------------------------------------------------------------------------------


def init_lstm(lstm: torch.nn.LSTM) -> None:
    """Xavier-uniform input weights and orthogonal recurrent weights per gate, zero biases but
    forget-gate bias 1. PyTorch's default (uniform +-1/sqrt(H)) let almost nothing through the
    3x256 encoder on normalised 640-dim features: its output varied over time with std 0.01 at
    initialisation (0.14 with this one)."""
    H = lstm.hidden_size
    with torch.no_grad():
        for name, p in lstm.named_parameters():
            if name.startswith("weight_ih"):
                for g in range(4):
                    torch.nn.init.xavier_uniform_(p[g * H : (g + 1) * H])
            elif name.startswith("weight_hh"):
                for g in range(4):
                    torch.nn.init.orthogonal_(p[g * H : (g + 1) * H])
            else:
                p.zero_()
                if name.startswith("bias_ih"):
                    p[H : 2 * H] = 1.0  # forget gate (PyTorch gate order i, f, g, o)


class CtcHeads(torch.nn.Module):
    """Auxiliary CTC loss on the encoder output (training only; not part of the weight file).

    One linear layer per language onto its symbols (the union for ``vanilla``/``onehot``), blank 0.
    Without it the encoder of a small RNN-T trained from scratch on CPU collapsed: at 1000 steps of
    the default ``lid`` recipe its output hardly varied over time (std 0.01), the joint had learnt
    only the label prior from the prediction network, and the LID head predicted the hours prior
    (dev loss plateau, WER 100 %). The CTC gradient reaches the encoder directly and makes it carry
    the labels; it is summed per utterance like the RNN-T loss.
    """

    def __init__(self, cfg: RnntConfig) -> None:
        super().__init__()
        n = cfg.n_lang if cfg.multi else 1
        self.heads = torch.nn.ModuleList(torch.nn.Linear(cfg.enc_hidden, cfg.output_size(i)) for i in range(n))

    def forward(self, model: RnntModel, enc: torch.Tensor, fl: torch.Tensor, y: torch.Tensor, tl: torch.Tensor,
                lang: int | torch.Tensor) -> torch.Tensor:  # fmt: skip
        """Mean over the utterances of the per-utterance CTC loss; ``lang`` an int or one per row."""
        multi = model.cfg.multi
        lv = torch.as_tensor(lang).expand(y.shape[0]) if torch.as_tensor(lang).dim() == 0 else torch.as_tensor(lang)
        total = enc.new_zeros(())
        for lg in torch.unique(lv).tolist() if multi else [None]:
            rows = torch.arange(y.shape[0]) if lg is None else (lv == lg).nonzero().squeeze(1)
            lp = self.heads[0 if lg is None else int(lg)](enc[rows]).log_softmax(-1).transpose(0, 1)  # (T, B, V)
            tgt = y[rows] if multi else model.to_union(y[rows], lv[rows])
            total = total + torch.nn.functional.ctc_loss(lp, tgt, fl[rows], tl[rows], blank=0, reduction="sum", zero_infinity=True)
        return total / y.shape[0]


def ckpt_config(d: Any) -> dict[str, Any] | None:
    """A checkpoint's config as today's ``to_dict`` (fields added since then take their defaults); None if invalid."""
    try:
        return RnntConfig.from_dict(d).to_dict()
    except (ValueError, TypeError, AttributeError):
        return None


def architecture(cfg: dict[str, Any] | None) -> dict[str, Any] | None:
    """The architecture part of a config dict (without :data:`TRAINING_ONLY_CONFIG`); None stays None."""
    return None if cfg is None else {k: v for k, v in cfg.items() if k not in TRAINING_ONLY_CONFIG}


def init_ctc_from(ctc: CtcHeads, init_from: Path, cfg: RnntConfig) -> str:
    """Load the auxiliary CTC heads of the run that wrote ``init_from`` from its checkpoint (``<stem>.ckpt``).

    The weight file holds no CTC heads; fresh ones send large random gradients into the trained
    encoder in the first steps (the training loss went from about 80 to over 200 at the start of
    such runs). Returns what was done, for the log.
    """
    p = init_from.with_suffix(".ckpt")
    if not p.is_file():
        return f"no checkpoint {p.name} beside it: the CTC heads start fresh"
    try:
        ck = torch.load(p, map_location="cpu", weights_only=False)
        if ck.get("format") != CKPT_FORMAT or architecture(ckpt_config(ck["config"])) != architecture(cfg.to_dict()) or not ck.get("ctc"):
            return f"{p.name} is not a checkpoint of this architecture with CTC heads: they start fresh"
        ctc.load_state_dict(ck["ctc"])
    except Exception as exc:  # noqa: BLE001 - any unreadable checkpoint: fall back to fresh heads
        return f"{p.name} unreadable ({type(exc).__name__}): the CTC heads start fresh"
    return f"CTC heads from {p.name} (step {ck.get('state', {}).get('step')})"


def lr_at(step: int, run: dict[str, Any]) -> float:
    """The learning rate of optimiser step ``step``: linear warm-up, then constant or a cosine decay to ``lr_final`` x lr."""
    lr, warm, total = float(run["lr"]), int(run["warmup"]), run["steps"]
    if step < warm:
        return lr * (step + 1) / warm
    if total is None or total <= warm:
        return lr
    p = min(1.0, (step - warm) / max(1, total - warm))
    f = float(run["lr_final"])
    return lr * (f + (1 - f) * 0.5 * (1 + math.cos(math.pi * p)))


def build_model(cfg: RnntConfig, *, seed: int, init: str, train_lm: Sequence[torch.Tensor], init_from: Path | None, ctc_weight: float,
                note: Callable[[str], None]) -> tuple[RnntModel, CtcHeads | None]:  # fmt: skip
    """The model before its first step (on the CPU): seeded initialisation, the input statistics of the
    training features, or the weights of ``init_from``; and the auxiliary CTC heads (None without CTC)."""
    torch.manual_seed(seed)
    if init not in ("xavier", "torch"):
        raise ValueError(f"--init must be xavier or torch, got {init!r}")
    model = RnntModel(cfg)
    if init == "xavier":
        for mod in model.modules():
            if isinstance(mod, torch.nn.LSTM):
                init_lstm(mod)
    mean, std = feature_stats(train_lm)
    model.set_feature_stats(mean, std)
    if init_from is not None:
        try:
            # the architecture must match; the loss weighting and dropout are this run's own
            src, _meta = load_model(init_from, expect=architecture(cfg.to_dict()))
        except ModelError as exc:
            raise ValueError(f"--init-from: {exc}") from None
        model.load_state_dict(src.state_dict())  # weights and input statistics of the earlier run
    ctc = CtcHeads(cfg) if ctc_weight > 0 else None
    if init_from is not None and ctc is not None:
        note(f"--init-from: {init_ctc_from(ctc, init_from, cfg)}")
    return model, ctc


# --------------------------------------------------------------------------------------------
# the data
# --------------------------------------------------------------------------------------------


@dataclass
class TrainData:
    """The training and dev utterances with their features, and the batch groups of the data order."""

    train_u: list[Utt]
    train_lm: list[torch.Tensor]
    dev_u: list[Utt]
    dev_lm: list[torch.Tensor]
    wer_ids: set[str]  #: the dev utterances decoded for the WER
    hours: np.ndarray  #: training hours per language
    groups: list[list[int]]  #: batch groups: one per language (``language``) or one of every utterance (``mixed``)
    probs: np.ndarray  #: the probability of drawing each group
    lens: list[np.ndarray]  #: stacked frames of each group's utterances
    utt_lang: torch.Tensor  #: language of every training utterance
    load_s: float  #: seconds spent loading


def load_data(corpus: AsrCorpus, *, train_limit: int | None, dev_per_lang: int, wer_per_lang: int, batching: str,
              note: Callable[[str], None]) -> TrainData:  # fmt: skip
    """Read the splits, compute every utterance's features (those too short for one frame are left
    out), pick the dev subset, and group the training utterances for the data order."""
    L = len(corpus.langs)
    t_load = time.monotonic()
    train_u = corpus.split("train")
    if train_limit is not None:
        per: dict[int, int] = {}
        keep = []
        for u in train_u:
            if per.get(u.lang, 0) < train_limit:
                keep.append(u)
                per[u.lang] = per.get(u.lang, 0) + 1
        train_u = keep
    dev_all = corpus.split("dev")
    dev_u: list[Utt] = []
    wer_ids: set[str] = set()
    for lg in range(L):
        idx = [i for i, u in enumerate(dev_all) if u.lang == lg]
        chosen = spread(idx, dev_per_lang)
        dev_u += [dev_all[i] for i in chosen]
        wer_ids |= {dev_all[i].id for i in spread(chosen, wer_per_lang)}
    train_lm = compute_logmel(train_u, note)
    keep_i = [i for i, lm in enumerate(train_lm) if n_stacked(lm.shape[0]) >= 1]
    train_u = [train_u[i] for i in keep_i]
    train_lm = [train_lm[i] for i in keep_i]
    dev_lm = compute_logmel(dev_u)
    keep_d = [i for i, lm in enumerate(dev_lm) if n_stacked(lm.shape[0]) >= 1]
    dev_u, dev_lm = [dev_u[i] for i in keep_d], [dev_lm[i] for i in keep_d]
    if batching not in BATCHINGS:
        raise ValueError(f"batching must be one of {BATCHINGS}, got {batching!r}")
    by_lang = [[i for i, u in enumerate(train_u) if u.lang == lg] for lg in range(L)]
    missing = [corpus.langs[lg] for lg in range(L) if not by_lang[lg]]
    if missing:
        raise CorpusError(f"{corpus.root}: no usable training utterance for {missing}")
    hours = np.array([sum(train_u[i].n_samples for i in ix) / RATE / 3600 for ix in by_lang])
    groups = by_lang if batching == "language" else [list(range(len(train_u)))]
    probs = hours / hours.sum() if batching == "language" else np.ones(1)
    lens = [np.array([n_stacked(train_lm[i].shape[0]) for i in ix]) for ix in groups]
    utt_lang = torch.tensor([u.lang for u in train_u], dtype=torch.long)
    return TrainData(train_u, train_lm, dev_u, dev_lm, wer_ids, hours, groups, probs, lens, utt_lang, time.monotonic() - t_load)


# --------------------------------------------------------------------------------------------
# the run between steps
# --------------------------------------------------------------------------------------------


class _Progress(TrainProgress):
    """The shared progress bar; plain lines every ``log_every`` steps."""

    def __init__(self, total: int | None, done: int, quiet: bool, log_every: int) -> None:
        super().__init__("train rnnt", total, done=done, quiet=quiet, count=True)
        self.log_every = max(1, log_every)

    def step(self, step: int, info: str) -> None:
        self.update(step, info, f"step {step} {info}" if step % self.log_every == 0 else None)


def _save(path: Path, obj: dict[str, Any]) -> None:
    with atomic_output(path, "wb") as f:
        torch.save(obj, f)


@dataclass
class Trainer:
    """One run's model, optimiser and state (``st``, all of it in the checkpoint) between optimiser steps.

    The loop of :func:`streamkit.train.rnnt.train` is :meth:`restore`, :meth:`start`, then
    :meth:`next_batch` and :meth:`step` until :meth:`should_stop`, then :meth:`finish`.
    """

    cfg: RnntConfig
    corpus: AsrCorpus
    data: TrainData
    run: dict[str, Any]
    model: RnntModel
    ctc: CtcHeads | None
    out: Path
    ckpt_p: Path
    device: torch.device
    batch_frames: int
    steps: int | None
    budget_s: float
    stop_after: int | None
    threads: int
    half_weights: bool
    weights_from: str
    clip: float
    ctc_weight: float
    lid_loss: str
    eval_every: int
    ckpt_minutes: float
    log_every: int
    quiet: bool
    on_step: Callable[[int, float], None] | None

    def __post_init__(self) -> None:
        self.symbols = {lg: list(v.symbols) for lg, v in zip(self.corpus.langs, self.corpus.vocabs)}
        self.sym_list = [self.symbols[lg] for lg in self.corpus.langs]
        self.model.to(self.device)
        if self.ctc is not None:
            self.ctc.to(self.device)
        self.params = list(self.model.parameters()) + (list(self.ctc.parameters()) if self.ctc is not None else [])
        self.opt = torch.optim.Adam(self.params, lr=self.run["lr"], betas=(0.9, 0.98), eps=1e-9)
        self.st: dict[str, Any] = {
            "step": 0, "epoch": [0] * len(self.data.groups), "pos": [0] * len(self.data.groups), "elapsed_s": 0.0, "audio_s": 0.0,
            "best_loss": math.inf, "best_step": None, "best_eval": None, "history": [], "runs": 0, "train_loss_sum": 0.0,
            "train_loss_n": 0, "train_lang_steps": [0] * self.cfg.n_lang,
        }  # fmt: skip
        self.best_state: dict[str, torch.Tensor] | None = None
        self.stop_signal: list[int] = []
        self._batch_cache: dict[tuple[int, int], list[list[int]]] = {}
        self._enc_out: dict[int, torch.Tensor] = {}

    # -- before the first step ---------------------------------------------------------------

    def restore(self, resume: bool, note: Callable[[str], None]) -> None:
        """With ``resume``, continue from the checkpoint when there is one; refuse one of another run."""
        if resume and self.ckpt_p.is_file():
            ck = torch.load(self.ckpt_p, map_location="cpu", weights_only=False)
            if not isinstance(ck, dict) or ck.get("format") != CKPT_FORMAT:
                raise ValueError(f"{self.ckpt_p}: not an RNN-T training checkpoint")
            ck["run"].setdefault("batching", "language")  # checkpoints from before these options
            ck["run"].setdefault("lid_loss", "frame-mean")
            ck["run"].setdefault("init_from", None)
            ck["run"].setdefault("languages", None)
            ck["config"] = ckpt_config(ck.get("config"))  # checkpoints from before later config fields load with their defaults
            if ck["config"] != self.cfg.to_dict() or ck["run"] != self.run:
                diff = {k: (v, ck["run"].get(k)) for k, v in self.run.items() if ck["run"].get(k) != v}
                if ck["config"] != self.cfg.to_dict():
                    diff["config"] = "differs"
                raise ValueError(f"{self.ckpt_p}: checkpoint of another run (now, checkpoint): {diff}; drop --resume or use another --ckpt")
            self.model.load_state_dict(ck["model"])
            if self.ctc is not None:
                self.ctc.load_state_dict(ck["ctc"])
            self.opt.load_state_dict(ck["opt"])
            torch.set_rng_state(ck["torch_rng"])
            self.st = ck["state"]
            self.best_state = ck.get("best_state")
        elif resume:
            note(f"no checkpoint at {self.ckpt_p}; starting from scratch")
        self.st["runs"] += 1

    def start(self, summary: str) -> None:
        """Show the run's summary, start the clocks and catch SIGTERM/SIGINT (they end the run at the next step)."""
        self.prog = _Progress(self.steps, self.st["step"], self.quiet, self.log_every)
        self.prog.note(summary)
        self.t_run = time.monotonic()
        self.base_elapsed = self.st["elapsed_s"]
        self.old_handlers = {}
        for sig in (signal.SIGTERM, signal.SIGINT):
            try:
                self.old_handlers[sig] = signal.signal(sig, self._on_signal)
            except ValueError:  # not the main thread
                pass
        self.model.train()
        self.last_ckpt = time.monotonic()
        self.win_sum, self.win_n = 0.0, 0
        self.t_rate, self.s_rate, self.a_rate = time.monotonic(), self.st["step"], self.st["audio_s"]

    def _on_signal(self, signum: int, frame: Any) -> None:
        self.stop_signal.append(signum)

    def restore_signals(self) -> None:
        for sig, h in self.old_handlers.items():
            signal.signal(sig, h)

    def elapsed(self) -> float:
        """Training wall time over every run so far (s)."""
        return self.base_elapsed + time.monotonic() - self.t_run

    # -- the loop ----------------------------------------------------------------------------

    def should_stop(self) -> bool:
        """The budget (steps or minutes) is spent, a signal came, or ``stop_after`` is reached."""
        st = self.st
        return (
            (self.steps is not None and st["step"] >= self.steps)
            or self.elapsed() >= self.budget_s
            or bool(self.stop_signal)
            or (self.stop_after is not None and st["step"] >= self.stop_after)
        )

    def _batches_of(self, gi: int, ep: int) -> list[list[int]]:
        """The batches of group ``gi`` in its pass ``ep``: a function of (seed, group, pass) only."""
        key = (gi, ep)
        if key not in self._batch_cache:
            self._batch_cache.clear() if len(self._batch_cache) > 4 * self.cfg.n_lang else None
            rng = np.random.default_rng(np.random.SeedSequence([self.run["seed"], 2, gi, ep]))
            self._batch_cache[key] = make_batches(self.data.lens[gi], self.batch_frames, self.run["max_utts"], rng)
        return self._batch_cache[key]

    def next_batch(self) -> list[int]:
        """The training utterances of this step: its group drawn from ``SeedSequence([seed, 1, step])``, that group's next batch."""
        st, d = self.st, self.data
        k = st["step"]
        gi = int(np.random.default_rng(np.random.SeedSequence([self.run["seed"], 1, k])).choice(len(d.groups), p=d.probs))
        bl = self._batches_of(gi, st["epoch"][gi])
        sel = [d.groups[gi][j] for j in bl[st["pos"][gi]]]
        st["pos"][gi] += 1
        if st["pos"][gi] >= len(bl):
            st["epoch"][gi] += 1
            st["pos"][gi] = 0
        return sel

    def step(self, sel: list[int]) -> None:
        """One optimiser step on the utterances ``sel``, then its bookkeeping (progress, validation, checkpoint)."""
        st, d, model, cfg, dev = self.st, self.data, self.model, self.cfg, self.device
        k = st["step"]
        x, fl, y, tl = collate([d.train_u[i] for i in sel], [d.train_lm[i] for i in sel])
        x, y = x.to(dev, non_blocking=True), y.to(dev, non_blocking=True)
        rows_lang = d.utt_lang[sel]
        lg = int(rows_lang[0]) if bool((rows_lang == rows_lang[0]).all()) else rows_lang
        for g in self.opt.param_groups:
            g["lr"] = lr_at(k, self.run)
        if self.ctc is not None:
            hook = model.encoder.register_forward_hook(lambda mod, i, o: self._enc_out.__setitem__(0, o[0]))
            try:
                res = model(x, fl, y, tl, lg)
            finally:
                hook.remove()
            loss = res["loss"] + self.ctc_weight * self.ctc(model, self._enc_out.pop(0), fl, y, tl, lg)
        else:
            res = model(x, fl, y, tl, lg)
            loss = res["loss"]
        if self.lid_loss == "utt-sum" and cfg.has_lid:  # frame mean x frames per utterance = per-utterance sum, mean over utterances
            loss = loss + cfg.lid_weight * res["lid_loss"] * (float(fl.sum()) / len(sel) - 1.0)
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.params, self.clip)
        self.opt.step()
        lv = float(loss.detach())
        if not math.isfinite(lv):
            names = sorted({self.corpus.langs[i] for i in rows_lang.tolist()})
            raise FloatingPointError(f"non-finite training loss at step {k} (language {', '.join(names)})")
        st["step"] += 1
        st["audio_s"] += sum(d.train_u[i].n_samples for i in sel) / RATE
        st["train_loss_sum"] += lv
        st["train_loss_n"] += 1
        for row_lang in rows_lang.tolist():  # steps per language: fraction of the batch's utterances
            st["train_lang_steps"][row_lang] += 1.0 / len(sel)
        self.win_sum += lv
        self.win_n += 1
        if self.on_step is not None:
            self.on_step(st["step"], lv)
        self._after_step(k)

    def _after_step(self, k: int) -> None:
        st = self.st
        now = time.monotonic()
        if st["step"] % self.log_every == 0:
            dt = max(now - self.t_rate, 1e-9)
            sps, aps = (st["step"] - self.s_rate) / dt, (st["audio_s"] - self.a_rate) / dt
            self.t_rate, self.s_rate, self.a_rate = now, st["step"], st["audio_s"]
            eta = "" if self.steps is None or sps <= 0 else f", ETA {(self.steps - st['step']) / sps / 60:.0f} min"
            self.prog.step(st["step"], f"loss {self.win_sum / max(self.win_n, 1):.3f} lr {lr_at(k, self.run):.2e} {sps:.2f} steps/s "
                                       f"{aps:.0f} audio-s/s {st['audio_s'] / 3600:.2f} h seen, {self.elapsed() / 60:.1f} min{eta}")  # fmt: skip
            self.win_sum, self.win_n = 0.0, 0
        if st["step"] % self.eval_every == 0:
            self.validate()
            self.last_ckpt = time.monotonic()
        elif now - self.last_ckpt > self.ckpt_minutes * 60:
            self.save_ckpt()
            self.last_ckpt = now

    # -- validation and outputs --------------------------------------------------------------

    def validate(self) -> None:
        """Dev metrics into the history; keep the best state; write the checkpoint, the weight file (when it changes) and the card."""
        st, model = self.st, self.model
        d = self.data
        ev = evaluate(model, d.dev_u, d.dev_lm, d.wer_ids, self.sym_list, self.batch_frames, self.run["max_utts"])
        model.train()
        tl = st["train_loss_sum"] / max(st["train_loss_n"], 1)
        st["train_loss_sum"], st["train_loss_n"] = 0.0, 0
        rec = {"step": st["step"], "elapsed_s": round(self.elapsed(), 1), "audio_h": round(st["audio_s"] / 3600, 3), "train_loss": round(tl, 4),
               **{k: (round(v, 4) if isinstance(v, float) else v) for k, v in ev.items() if k != "examples"}}  # fmt: skip
        st["history"].append(rec)
        improved = ev["loss"] < st["best_loss"]
        if improved:
            st["best_loss"], st["best_step"], st["best_eval"] = ev["loss"], st["step"], {**rec, "examples": ev.get("examples")}
            self.best_state = {k: v.detach().clone() for k, v in model.state_dict().items()}
        self.save_ckpt()
        if improved or self.weights_from == "last":
            self.write_weights()
        self.write_card(False)
        wer = " ".join(f"{k} {v * 100:.1f}" for k, v in ev.get("wer_per_lang", {}).items())
        lid = f", LID acc {ev['lid_acc'] * 100:.1f} %" if "lid_acc" in ev else ""
        cer = f", CER {ev['cer_char_weighted'] * 100:.1f} %" if "cer_char_weighted" in ev else ""
        self.prog.note(f"[eval] step {st['step']}: train loss {tl:.3f}, dev loss {ev['loss']:.3f} (rnnt {ev['rnnt_loss']:.3f}{lid}), "
                       f"dev WER % {wer}{cer}{' *best*' if improved else ''}, {self.elapsed() / 60:.1f} min")  # fmt: skip

    def save_ckpt(self) -> None:
        """Model, optimiser, data position, RNG state, best state and history, written atomically."""
        self.st["elapsed_s"] = self.elapsed()
        _save(self.ckpt_p, {"format": CKPT_FORMAT, "config": self.cfg.to_dict(), "run": self.run, "model": self.model.state_dict(),
                            "opt": self.opt.state_dict(), "ctc": None if self.ctc is None else self.ctc.state_dict(),
                            "torch_rng": torch.get_rng_state(), "state": self.st, "best_state": self.best_state})  # fmt: skip

    def write_weights(self) -> None:
        """The weight file: the best dev-loss state, or the current one with ``weights_from="last"``."""
        last = self.weights_from == "last"
        if self.best_state is None and not last:
            return
        st, out = self.st, self.out
        m = RnntModel(self.cfg)
        m.load_state_dict(self.model.state_dict() if last else self.best_state)
        meta = {"symbols": self.symbols, "variant": self.cfg.variant, "step": st["step"] if last else st["best_step"], "seed": self.run["seed"],
                "card": out.with_suffix(".json").name, "corpus_command": self.corpus.command, "weights_from": self.weights_from,
                "train_hours": {lg: round(float(h), 4) for lg, h in zip(self.corpus.langs, self.data.hours)}}  # fmt: skip
        save_model(out, m, meta=meta, half=self.half_weights)

    def card(self, final: bool) -> dict[str, Any]:
        return model_card(self.cfg, self.model, self.corpus, self.run, self.st, self.data.hours, self.threads, self.out, final,
                          self.half_weights, str(self.device), self.weights_from)  # fmt: skip

    def write_card(self, final: bool) -> dict[str, Any]:
        c = self.card(final)
        write_text(self.out.with_suffix(".json"), json.dumps(c, indent=1, ensure_ascii=False) + "\n")
        return c

    def finish(self) -> dict[str, Any] | None:
        """After the loop: on a signal, the checkpoint and the card so far (returned); else a last validation (unless
        this step had one) and the weight file in the requested storage type, also when resuming a finished run (None)."""
        st = self.st
        if self.stop_signal:
            self.save_ckpt()
            self.prog.note(f"signal {self.stop_signal[0]}: checkpoint written at step {st['step']} ({self.ckpt_p.name}); continue with --resume")
            self.prog.close()
            return self.card(False)
        if not st["history"] or st["history"][-1]["step"] != st["step"]:
            self.validate()
        else:
            self.save_ckpt()
        self.write_weights()
        return None
