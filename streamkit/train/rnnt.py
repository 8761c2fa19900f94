"""Training recipe of the multilingual RNN-T: ``streamkit train rnnt --corpus DIR --variant V --out PATH``.

Issue #6 part 3; the model family is :mod:`streamkit.models.rnnt`, the corpus
:mod:`streamkit.data.asr_corpus` (``streamkit corpus asr``), the paper
``shared/papers/multi-softmax-streaming-multilingual-rnnt.txt`` (§4-5).

* **Data.** The ``train`` split of the corpus (``train.jsonl``, ``vocab/<lang>.json``); targets are
  each language's own grapheme symbols (``B_`` word starts, blank 0). Features:
  :func:`streamkit.models.features.log_mel` of every file, computed once at start-up and kept in
  memory (80 x float32 per 10 ms), stacked to 640 dims / 30 ms per batch. The model's input
  normalisation (``feat_mean``/``feat_std``) is set from all stacked training frames
  (:meth:`~streamkit.models.rnnt.RnntModel.set_feature_stats`); with ``--feat-norm causal`` (the
  default) the model then normalises each utterance by its running mean/variance
  (``RnntConfig.feat_norm``). The global statistics are dominated by the channel (80 % of the
  corpus through the HF simulator, band-limited, 20 % clean with digital silence at the log
  floor): within an HF utterance the globally normalised features varied with std 0.34 only. An
  encoder-only CTC probe (2x128 LSTM, 400 Hindi utterances, lr 1e-3) stayed on the blank plateau
  with global normalisation (dev CTC 166.7 at step 400) and left it with the running one (150.9).
* **Mini-batches from one language at a time** (paper §4.1): step ``k`` draws its language from
  ``SeedSequence([seed, 1, k])`` with probabilities proportional to the language's training hours,
  then takes that language's next batch. A language's utterances are bucketed per pass ("epoch"
  of that language): sorted by length with a 20 % random jitter (``SeedSequence([seed, 2, lang,
  epoch])``), cut greedily into batches of at most ``--batch-seconds`` of *padded* audio (batch size
  x longest utterance) and ``--max-utts`` utterances, and the batch order shuffled. Everything the
  data order depends on is (seed, step, per-language epoch and position), all in the checkpoint.
  ``--batching mixed`` instead buckets all languages' utterances together (one group, the same
  rules), so a batch holds several languages in proportion to their hours. Why it exists: with
  one-language batches the LID head is pushed towards the batch's language at every step and,
  through Adam, follows the last few batches; in the first ``lid`` run (lr 3e-3) the dev LID
  accuracy sat at the prior (33.7 %, one language predicted for everything) for 2000 steps while
  the RNN-T loss fell, although a linear LID head fitted on the frozen encoder with balanced
  batches already reached 61 % at step 2500.
* **Loss** :meth:`RnntModel.forward`: RNN-T loss (mean over the batch's utterances) plus, for
  ``lid``, ``lid_weight`` x frame-level cross-entropy of the LID head (encoder + LID head only),
  ``--lid-loss frame-mean`` (mean over the batch's frames) or ``utt-sum`` (summed over each
  utterance's frames, mean over utterances: the per-utterance scale of the RNN-T loss; the frame
  mean is about 100 times smaller than an RNN-T loss of 100-200 nats per utterance, so the encoder
  got almost no LID signal).
  Adam (0.9, 0.98, eps 1e-9), learning rate ``--lr`` with a linear warm-up over ``--warmup`` steps,
  then, with ``--steps`` given, a cosine decay to ``--lr-final`` x lr at the last step (constant
  without ``--steps``); gradient norm clipped at ``--clip``.
* **Validation** every ``--eval-every`` steps on a fixed dev subset (``--dev-per-lang``
  utterances per language, evenly spread over its dev list; dev speakers are unseen in training):
  RNN-T loss per language and overall (mean per utterance), LID cross-entropy and utterance LID
  accuracy (arg-max of the mean LID posterior, ``lid`` only), and greedy WER and CER per language with the
  language known (``--wer-per-lang`` of those utterances; batched greedy search, at most 3 symbols
  per frame, the same rule as :class:`~streamkit.models.rnnt_search.BeamSearch` with beam 1). The
  best state by dev loss is kept and written to ``--out`` whenever it improves (with the model
  card ``<out stem>.json``), so a run that is killed still leaves its best weights.
* **Checkpoints** (``--ckpt``, default ``<out stem>.ckpt``): model, optimiser, data position, RNG
  state, best state and history, written atomically at every validation, every ``--ckpt-minutes``
  and on SIGTERM/SIGINT. ``--resume`` continues from it and gives bit-for-bit the same weights as
  an uninterrupted run (one thread; tested). Budgets: ``--steps`` (total optimiser steps, over
  resumed runs; the schedule depends on it) and ``--minutes`` (training wall time summed over
  resumed runs, a safety cap); training stops at whichever comes first.

The weight file is :func:`streamkit.models.rnnt.save_model` with ``meta["symbols"]`` (each
language's symbol table, as :func:`streamkit.models.rnnt_stream.symbol_tables` reads it), so
``models.rnnt_asr`` loads it directly, and ``meta["train_hours"]`` (training hours per language; the
block's ``lid_prior="train"``).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import signal
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from streamkit.core.errors import ModelError
from streamkit.data import asr_corpus
from streamkit.io.outputs import atomic_output, write_text
from streamkit.models.features import N_MELS, RATE, STACK, STRIDE, log_mel, n_stacked
from streamkit.models.rnnt import FEAT_NORMS, VARIANTS, RnntConfig, RnntModel, load_model, n_params, save_model
from streamkit.train.progress import TrainProgress

__all__ = [
    "CKPT_FORMAT",
    "CorpusError",
    "AsrCorpus",
    "Utt",
    "make_batches",
    "greedy_decode",
    "word_errors",
    "train",
    "add_arguments",
    "run_from_args",
]

CKPT_FORMAT = "streamkit-rnnt-train/1"
BATCHINGS = ("language", "mixed")  #: --batching
LID_LOSSES = ("frame-mean", "utt-sum")  #: --lid-loss
FRAME_S = 0.03  #: seconds per stacked frame
MAX_SYMBOLS = 3  #: per frame, greedy dev decoding


class CorpusError(ValueError):
    """The corpus directory is missing, incomplete or not a ``streamkit corpus asr`` corpus."""


# --------------------------------------------------------------------------------------------
# corpus
# --------------------------------------------------------------------------------------------


@dataclass
class Utt:
    id: str
    lang: int
    path: Path
    text: str
    targets: np.ndarray  # language-local symbols, int64
    n_samples: int


class AsrCorpus:
    """A ``streamkit corpus asr`` directory: manifest, vocabularies, splits.

    ``languages``: use only these of the corpus's languages (e.g. ``["en"]`` for a monolingual
    model); ``langs``/``vocabs`` and the splits then hold only them, in the corpus's order, and
    :attr:`Utt.lang` indexes that subset. ``all_langs`` keeps the manifest's list.
    """

    def __init__(self, root: str | os.PathLike[str], languages: Sequence[str] | None = None) -> None:
        self.root = root = Path(root)
        if not root.is_dir():
            raise CorpusError(f"corpus directory not found: {root}")
        man = root / "manifest.json"
        if not man.is_file():
            raise CorpusError(f"{root}: no manifest.json (not a corpus from `streamkit corpus asr`, or its generation has not finished)")
        try:
            self.manifest: dict[str, Any] = json.loads(man.read_text(encoding="utf-8"))
        except (ValueError, UnicodeDecodeError) as exc:
            raise CorpusError(f"{man}: not valid JSON ({exc})") from None
        if not isinstance(self.manifest, dict) or self.manifest.get("format") != asr_corpus.FORMAT:
            got = self.manifest.get("format") if isinstance(self.manifest, dict) else None
            raise CorpusError(f"{man}: format {got!r}, expected {asr_corpus.FORMAT!r} (a corpus from `streamkit corpus asr`)")
        langs = self.manifest.get("hours_per_language")
        if not isinstance(langs, dict) or not langs:
            raise CorpusError(f"{man}: no languages (hours_per_language)")
        self.all_langs: list[str] = [str(x) for x in langs]
        self.langs: list[str] = list(self.all_langs)
        if languages is not None:
            want = [str(x) for x in languages]
            unknown = [x for x in want if x not in self.all_langs]
            if not want or unknown or len(set(want)) != len(want):
                raise CorpusError(f"{root}: --languages {','.join(want) or '(none)'}: pick distinct ones of the corpus's {self.all_langs}")
            self.langs = [x for x in self.all_langs if x in want]
        self.vocabs: list[asr_corpus.Vocab] = []
        for lg in self.langs:
            p = root / "vocab" / f"{lg}.json"
            try:
                self.vocabs.append(asr_corpus.load_vocab(root, lg))
            except FileNotFoundError:
                raise CorpusError(f"{root}: vocabulary {p.relative_to(root)} missing") from None
            except (ValueError, KeyError, TypeError) as exc:
                raise CorpusError(f"{p}: bad vocabulary ({exc})") from None

    @property
    def command(self) -> str | None:
        return self.manifest.get("command")

    def split(self, name: str) -> list[Utt]:
        """The utterances of a split, in file order; every text encoded with its language's vocabulary."""
        p = self.root / f"{name}.jsonl"
        if not p.is_file():
            raise CorpusError(f"{self.root}: no {name}.jsonl (split {name!r} missing)")
        out: list[Utt] = []
        with open(p, encoding="utf-8") as f:
            for n, line in enumerate(f, 1):
                if not line.strip():
                    continue
                try:
                    r = json.loads(line)
                    if r["lang"] in self.all_langs and r["lang"] not in self.langs:
                        continue  # a language left out by ``languages``
                    lg = self.langs.index(r["lang"])
                    targets = np.asarray(self.vocabs[lg].encode(r["text"]), np.int64)
                    out.append(Utt(str(r["id"]), lg, self.root / r["path"], str(r["text"]), targets, int(r["n_samples"])))
                except ValueError as exc:
                    raise CorpusError(f"{p}:{n}: {exc}") from None
                except (KeyError, TypeError) as exc:
                    raise CorpusError(f"{p}:{n}: bad record ({type(exc).__name__}: {exc})") from None
        if not out:
            raise CorpusError(f"{p}: no utterances")
        return out


def read_audio(utt: Utt) -> np.ndarray:
    import soundfile as sf

    if not utt.path.is_file():
        raise CorpusError(f"audio file missing: {utt.path}")
    try:
        x, sr = sf.read(str(utt.path), dtype="float32", always_2d=True)
    except Exception as exc:  # noqa: BLE001 - libsndfile errors
        raise CorpusError(f"{utt.path}: unreadable audio ({exc})") from None
    if sr != RATE:
        raise CorpusError(f"{utt.path}: {sr} Hz, expected {RATE}")
    return x.mean(axis=1)


def compute_logmel(utts: Sequence[Utt], note: Callable[[str], None] | None = None) -> list[torch.Tensor]:
    """(frames, 80) float32 log-mel of every utterance (10 ms frames)."""
    out = []
    t0 = time.monotonic()
    for i, u in enumerate(utts):
        out.append(log_mel(read_audio(u)).contiguous())
        if note is not None and time.monotonic() - t0 > 30 and i % 500 == 0:
            note(f"  features: {i + 1}/{len(utts)}")
    return out


def stacked(lm: torch.Tensor) -> torch.Tensor:
    """(frames, 80) log-mel -> (n, 640) stacked (:func:`streamkit.models.features.stack_frames`)."""
    k = n_stacked(lm.shape[0])
    return lm.unfold(0, STACK, STRIDE)[:k].transpose(1, 2).reshape(k, STACK * N_MELS)


def feature_stats(logmels: Sequence[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    """Mean and standard deviation of every stacked dimension over all frames."""
    s = torch.zeros(STACK * N_MELS, dtype=torch.float64)
    ss = torch.zeros_like(s)
    n = 0
    for lm in logmels:
        x = stacked(lm).to(torch.float64)
        s += x.sum(0)
        ss += (x * x).sum(0)
        n += x.shape[0]
    if n == 0:
        raise CorpusError("no training utterance is long enough for one feature frame")
    mean = s / n
    std = (ss / n - mean * mean).clamp(min=0).sqrt()
    return mean.float(), std.float()


def make_batches(lens: np.ndarray, batch_frames: int, max_utts: int, rng: np.random.Generator | None) -> list[list[int]]:
    """Indices into ``lens`` grouped by length: each batch's ``size x longest <= batch_frames`` (or a
    single utterance) and ``size <= max_utts``; with ``rng`` the sort is jittered and the batch order shuffled."""
    lens = np.asarray(lens, np.int64)
    key = lens.astype(np.float64) if rng is None else lens * (1.0 + 0.2 * rng.random(lens.shape[0]))
    order = np.argsort(key, kind="stable")
    batches: list[list[int]] = []
    cur: list[int] = []
    longest = 0
    for i in order.tolist():
        m = max(longest, int(lens[i]))
        if cur and ((len(cur) + 1) * m > batch_frames or len(cur) >= max_utts):
            batches.append(cur)
            cur, m = [], int(lens[i])
        cur.append(i)
        longest = m
    if cur:
        batches.append(cur)
    if rng is not None:
        perm = rng.permutation(len(batches))
        batches = [batches[j] for j in perm.tolist()]
    return batches


def collate(utts: Sequence[Utt], logmels: Sequence[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Padded stacked features (B, T, 640), frame counts, padded targets (B, U), target counts."""
    feats = [stacked(lm) for lm in logmels]
    B = len(feats)
    T = max(f.shape[0] for f in feats)
    U = max(1, max(len(u.targets) for u in utts))
    x = torch.zeros(B, T, STACK * N_MELS)
    y = torch.zeros(B, U, dtype=torch.long)
    for b, (f, u) in enumerate(zip(feats, utts)):
        x[b, : f.shape[0]] = f
        y[b, : len(u.targets)] = torch.from_numpy(u.targets)
    fl = torch.tensor([f.shape[0] for f in feats], dtype=torch.long)
    tl = torch.tensor([len(u.targets) for u in utts], dtype=torch.long)
    return x, fl, y, tl


# --------------------------------------------------------------------------------------------
# decoding and scoring (dev)
# --------------------------------------------------------------------------------------------


@torch.no_grad()
def greedy_decode(model: RnntModel, enc: torch.Tensor, lens: torch.Tensor, lang: int, max_symbols: int = MAX_SYMBOLS) -> list[list[int]]:
    """Batched greedy RNN-T search of encoder outputs ``enc`` (B, T, H) of one language.

    Per frame at most ``max_symbols`` arg-max symbols, stopping at blank (the rule of
    :class:`streamkit.models.rnnt_search.BeamSearch` with beam 1). Returns the symbols per row:
    language-local for the multi-softmax variants, union ids for vanilla/onehot.
    """
    cfg = model.cfg
    B, T, _ = enc.shape
    dev = enc.device
    lens = lens.to(dev)
    lv = None if cfg.variant == "vanilla" else torch.full((B,), int(lang), dtype=torch.long, device=dev)
    tok = torch.zeros(B, dtype=torch.long, device=dev)
    pred, (h, c) = model.predictor_step(tok, None, lv)
    out: list[list[int]] = [[] for _ in range(B)]
    for t in range(T):
        ok = lens > t
        if not bool(ok.any()):
            break
        e = enc[:, t]
        for _ in range(max_symbols):
            k = model.joint(e, pred, int(lang) if cfg.multi else None).argmax(-1)
            emit = ok & (k != 0)
            if not bool(emit.any()):
                break
            for b in emit.nonzero().squeeze(1).tolist():
                out[b].append(int(k[b]))
            p2, (h2, c2) = model.predictor_step(k, (h, c), lv)
            pred = torch.where(emit[:, None], p2, pred)
            h = torch.where(emit[None, :, None], h2, h)
            c = torch.where(emit[None, :, None], c2, c)
            ok = emit
    return out


def tokens_to_text(model: RnntModel, tokens: Sequence[int], lang: int, symbols: Sequence[Sequence[str]]) -> str:
    """Text of decoded symbols (``B_`` symbols start words); union ids are mapped to their languages."""
    if model.cfg.multi:
        syms = [symbols[lang][t] for t in tokens]
    else:
        if not tokens:
            return ""
        lg, loc = model.from_union(torch.tensor(list(tokens), dtype=torch.long))
        syms = [symbols[int(a)][int(b)] for a, b in zip(lg.tolist(), loc.tolist())]
    words: list[str] = []
    for s in syms:
        if s.startswith("B_") or not words:
            words.append(s[2:] if s.startswith("B_") else s)
        else:
            words[-1] += s
    return " ".join(w for w in words if w)


def word_errors(ref: str, hyp: str) -> tuple[int, int]:
    """(word edit distance, reference words)."""
    return _edits(ref.split(), hyp.split())


def char_errors(ref: str, hyp: str) -> tuple[int, int]:
    """(character edit distance, reference characters; spaces included)."""
    return _edits(list(ref), list(hyp))


def _edits(r: Sequence[str], h: Sequence[str]) -> tuple[int, int]:
    prev = list(range(len(h) + 1))
    for i in range(1, len(r) + 1):
        cur = [i] + [0] * len(h)
        for j in range(1, len(h) + 1):
            cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (r[i - 1] != h[j - 1]))
        prev = cur
    return prev[len(h)], len(r)


def evaluate(
    model: RnntModel,
    utts: Sequence[Utt],
    logmels: Sequence[torch.Tensor],
    wer_ids: set[str],
    symbols: Sequence[Sequence[str]],
    batch_frames: int,
    max_utts: int,
) -> dict[str, Any]:
    """Dev metrics (see the module docstring); ``model`` is left in eval mode. Runs on the model's device."""
    model.eval()
    cfg = model.cfg
    dev = model.feat_mean.device
    L = cfg.n_lang
    captured: dict[str, torch.Tensor] = {}
    hooks = [model.encoder.register_forward_hook(lambda m, i, o: captured.__setitem__("enc", o[0]))]
    if model.lid_head is not None:
        hooks.append(model.lid_head.register_forward_hook(lambda m, i, o: captured.__setitem__("lid", o)))
    rnnt_sum = np.zeros(L)
    n_utt = np.zeros(L, np.int64)
    lid_sum, lid_frames = 0.0, 0
    lid_ok = np.zeros(L, np.int64)
    err = np.zeros(L, np.int64)
    words = np.zeros(L, np.int64)
    cerr = np.zeros(L, np.int64)
    chars = np.zeros(L, np.int64)
    n_wer = np.zeros(L, np.int64)
    examples: dict[str, list[dict[str, str]]] = {}
    try:
        with torch.inference_mode():
            for lg in range(L):
                idx = [i for i, u in enumerate(utts) if u.lang == lg]
                if not idx:
                    continue
                lens = np.array([n_stacked(logmels[i].shape[0]) for i in idx])
                for bt in make_batches(lens, batch_frames, max_utts, None):
                    sel = [idx[j] for j in bt]
                    x, fl, y, tl = collate([utts[i] for i in sel], [logmels[i] for i in sel])
                    x, y, fl = x.to(dev), y.to(dev), fl.to(dev)
                    out = model(x, fl, y, tl, lg)
                    B = len(sel)
                    rnnt_sum[lg] += float(out["rnnt_loss"]) * B
                    n_utt[lg] += B
                    if "lid" in captured:
                        lid = captured["lid"]
                        mask = torch.arange(lid.shape[1], device=dev)[None, :] < fl[:, None]
                        lid_sum += float(out["lid_loss"]) * int(mask.sum())
                        lid_frames += int(mask.sum())
                        post = (lid.softmax(-1) * mask[..., None]).sum(1) / fl[:, None]
                        lid_ok[lg] += int((post.argmax(-1) == lg).sum())
                    w = [b for b, i in enumerate(sel) if utts[i].id in wer_ids]
                    if w:
                        enc = captured["enc"][w]
                        hyps = greedy_decode(model, enc, fl[w], lg)
                        for b, toks in zip(w, hyps):
                            u = utts[sel[b]]
                            text = tokens_to_text(model, toks, lg, symbols)
                            e, n = word_errors(u.text, text)
                            err[lg] += e
                            words[lg] += n
                            e, n = char_errors(u.text, text)
                            cerr[lg] += e
                            chars[lg] += n
                            n_wer[lg] += 1
                            ex = examples.setdefault(cfg.languages[lg], [])
                            if len(ex) < 2:
                                ex.append({"ref": u.text, "hyp": text})
    finally:
        for hk in hooks:
            hk.remove()
        captured.clear()
    names = cfg.languages
    have = [lg for lg in range(L) if n_utt[lg]]
    res: dict[str, Any] = {
        "rnnt_loss": float(rnnt_sum.sum() / max(n_utt.sum(), 1)),
        "rnnt_loss_per_lang": {names[lg]: round(float(rnnt_sum[lg] / n_utt[lg]), 4) for lg in have},
        "utterances": {names[lg]: int(n_utt[lg]) for lg in have},
    }
    if model.lid_head is not None:
        res["lid_loss"] = lid_sum / max(lid_frames, 1)
        res["lid_acc"] = float(lid_ok.sum() / max(n_utt.sum(), 1))
        res["lid_acc_per_lang"] = {names[lg]: round(float(lid_ok[lg] / n_utt[lg]), 4) for lg in have}
    res["loss"] = res["rnnt_loss"] + (cfg.lid_weight * res["lid_loss"] if "lid_loss" in res else 0.0)
    if n_wer.sum():
        res["wer_per_lang"] = {names[lg]: round(float(err[lg] / max(words[lg], 1)), 4) for lg in range(L) if n_wer[lg]}
        res["wer_avg"] = round(float(np.mean(list(res["wer_per_lang"].values()))), 4)
        res["wer_word_weighted"] = round(float(err.sum() / max(words.sum(), 1)), 4)
        res["cer_per_lang"] = {names[lg]: round(float(cerr[lg] / max(chars[lg], 1)), 4) for lg in range(L) if n_wer[lg]}
        res["cer_char_weighted"] = round(float(cerr.sum() / max(chars.sum(), 1)), 4)
        res["wer_utterances"] = {names[lg]: int(n_wer[lg]) for lg in range(L) if n_wer[lg]}
        res["examples"] = examples
    return res


# --------------------------------------------------------------------------------------------
# training
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


def _ckpt_config(d: Any) -> dict[str, Any] | None:
    """A checkpoint's config as today's ``to_dict`` (fields added since then take their defaults); None if invalid."""
    try:
        return RnntConfig.from_dict(d).to_dict()
    except (ValueError, TypeError, AttributeError):
        return None


# RnntConfig fields that change how a model trains, not its parameters: --init-from may change them
TRAINING_ONLY_CONFIG = ("lid_weight", "lid_detach_encoder", "dropout")


def _arch(cfg: dict[str, Any] | None) -> dict[str, Any] | None:
    """The architecture part of a config dict (without :data:`TRAINING_ONLY_CONFIG`); None stays None."""
    return None if cfg is None else {k: v for k, v in cfg.items() if k not in TRAINING_ONLY_CONFIG}


def _init_ctc_from(ctc: CtcHeads, init_from: Path, cfg: RnntConfig) -> str:
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
        if ck.get("format") != CKPT_FORMAT or _arch(_ckpt_config(ck["config"])) != _arch(cfg.to_dict()) or not ck.get("ctc"):
            return f"{p.name} is not a checkpoint of this architecture with CTC heads: they start fresh"
        ctc.load_state_dict(ck["ctc"])
    except Exception as exc:  # noqa: BLE001 - any unreadable checkpoint: fall back to fresh heads
        return f"{p.name} unreadable ({type(exc).__name__}): the CTC heads start fresh"
    return f"CTC heads from {p.name} (step {ck.get('state', {}).get('step')})"


def lr_at(step: int, run: dict[str, Any]) -> float:
    lr, warm, total = float(run["lr"]), int(run["warmup"]), run["steps"]
    if step < warm:
        return lr * (step + 1) / warm
    if total is None or total <= warm:
        return lr
    p = min(1.0, (step - warm) / max(1, total - warm))
    f = float(run["lr_final"])
    return lr * (f + (1 - f) * 0.5 * (1 + math.cos(math.pi * p)))


def _save(path: Path, obj: dict[str, Any]) -> None:
    with atomic_output(path, "wb") as f:
        torch.save(obj, f)


def _spread(items: list[int], k: int) -> list[int]:
    if k >= len(items):
        return list(items)
    pos = np.unique(np.round(np.linspace(0, len(items) - 1, k)).astype(int))
    return [items[i] for i in pos.tolist()]


class _Progress(TrainProgress):
    """The shared progress bar; plain lines every ``log_every`` steps."""

    def __init__(self, total: int | None, done: int, quiet: bool, log_every: int) -> None:
        super().__init__("train rnnt", total, done=done, quiet=quiet, count=True)
        self.log_every = max(1, log_every)

    def step(self, step: int, info: str) -> None:
        self.update(step, info, f"step {step} {info}" if step % self.log_every == 0 else None)


def train(
    corpus_dir: str | os.PathLike[str],
    out: str | os.PathLike[str],
    *,
    cfg: RnntConfig | None = None,
    steps: int | None = None,
    minutes: float | None = None,
    seed: int = 0,
    resume: bool = False,
    ckpt: str | os.PathLike[str] | None = None,
    batch_seconds: float = 32.0,
    max_utts: int = 32,
    lr: float = 1e-3,
    lr_final: float = 0.05,
    warmup: int = 300,
    clip: float = 5.0,
    ctc_weight: float = 0.3,
    init: str = "xavier",
    threads: int = 1,
    eval_every: int = 500,
    ckpt_minutes: float = 5.0,
    dev_per_lang: int = 60,
    wer_per_lang: int = 30,
    train_limit: int | None = None,
    log_every: int = 25,
    quiet: bool = False,
    on_step: Callable[[int, float], None] | None = None,
    half_weights: bool = False,
    batching: str = "language",
    lid_loss: str = "frame-mean",
    init_from: str | os.PathLike[str] | None = None,
    stop_after: int | None = None,
    device: str = "cpu",
    languages: Sequence[str] | None = None,
    weights_from: str = "best",
) -> dict[str, Any]:
    """Train (or continue) an RNN-T on a ``streamkit corpus asr`` corpus; returns the model card.

    ``cfg`` gives the architecture; its ``languages``/``vocab_sizes`` are replaced by the corpus's.
    ``train_limit``: at most this many training utterances per language (tests, quick runs).
    ``on_step(step, loss)`` is called after every optimiser step.
    ``batching``: ``language`` (the paper: every mini-batch from one language, drawn by training
    hours) or ``mixed`` (length-bucketed batches over all languages' utterances together, so the
    languages still appear in proportion to their hours). ``lid_loss``: the LID cross-entropy as
    ``frame-mean`` (mean over all frames of the batch) or ``utt-sum`` (summed over each
    utterance's frames, mean over utterances: the same scale as the per-utterance RNN-T loss).
    ``init_from``: start from the weights of an earlier run (a weight file of the same architecture,
    e.g. to go on with a new budget and LR schedule; ``lid_weight``, ``lid_detach_encoder`` and
    ``dropout`` may differ); the input statistics come from that file, the
    optimiser starts afresh, and the training-only CTC heads come from the checkpoint
    ``<stem>.ckpt`` beside it when there is one of the same architecture (else fresh; see
    :func:`_init_ctc_from`). Its file name is part of the run.
    ``stop_after``: pause at this step (checkpoint written; not part of the run, so ``--resume``
    goes on with the same schedule); a run's weight file is its best state up to there.
    ``half_weights``: the weight file ``out`` stores float16 weights (half the size; they load into
    float32 parameters); the checkpoint keeps float32. Not part of the run: ``--resume`` of a
    finished run with it rewrites the weight file only.
    ``device``: where the model, the losses and the dev evaluation run (``cpu``, ``cuda``,
    ``cuda:1`` ...); features, batching and the data order stay on the CPU, so the run (the data
    order, the checkpoint format) is the same on any device and a checkpoint resumes on another one.
    Not part of the run; the card records it.
    ``languages``: train on these of the corpus's languages only (one language: a monolingual
    baseline, the paper's Table 2 first row); the model's languages are then this subset.
    ``weights_from``: the weight file holds the state of the ``best`` dev loss (default) or the
    ``last`` step (a small language's own model overfits: its dev loss turns up long before its
    dev CER stops falling). Not part of the run, like ``half_weights``: ``--resume`` of a
    finished run with it rewrites the weight file only.

    Raises:
        CorpusError: missing or malformed corpus.
        ValueError: bad options, or ``--resume`` with a checkpoint of another run.
    """
    if steps is None and minutes is None:
        raise ValueError("give a budget: --steps and/or --minutes")
    if steps is not None and steps < 1:
        raise ValueError(f"--steps must be >= 1, got {steps}")
    if batch_seconds <= 0 or max_utts < 1 or eval_every < 1 or lr <= 0 or warmup < 0:
        raise ValueError("--batch-seconds, --lr must be > 0, --max-utts, --eval-every >= 1, --warmup >= 0")
    try:
        dev = torch.device(device)
    except RuntimeError as exc:
        raise ValueError(f"--device: {exc}") from None
    if weights_from not in ("best", "last"):
        raise ValueError(f"--weights-from must be best or last, got {weights_from!r}")
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"--device {device}: this torch ({torch.__version__}) sees no CUDA device")
    torch.set_num_threads(int(threads))
    corpus = AsrCorpus(corpus_dir, languages)
    out = Path(out)
    ckpt_p = Path(ckpt) if ckpt is not None else out.with_name(out.stem + ".ckpt")
    base = cfg or RnntConfig()
    cfg = RnntConfig.from_dict({**base.to_dict(), "languages": corpus.langs, "vocab_sizes": [len(v) for v in corpus.vocabs]})
    symbols = {lg: list(v.symbols) for lg, v in zip(corpus.langs, corpus.vocabs)}
    sym_list = [symbols[lg] for lg in corpus.langs]
    L = cfg.n_lang
    batch_frames = max(1, int(batch_seconds / FRAME_S))

    prog_note = (lambda m: None) if quiet else (lambda m: print(m, flush=True))
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
        chosen = _spread(idx, dev_per_lang)
        dev_u += [dev_all[i] for i in chosen]
        wer_ids |= {dev_all[i].id for i in _spread(chosen, wer_per_lang)}
    train_lm = compute_logmel(train_u, prog_note)
    keep_i = [i for i, lm in enumerate(train_lm) if n_stacked(lm.shape[0]) >= 1]
    train_u = [train_u[i] for i in keep_i]
    train_lm = [train_lm[i] for i in keep_i]
    dev_lm = compute_logmel(dev_u)
    keep_d = [i for i, lm in enumerate(dev_lm) if n_stacked(lm.shape[0]) >= 1]
    dev_u, dev_lm = [dev_u[i] for i in keep_d], [dev_lm[i] for i in keep_d]
    if batching not in BATCHINGS:
        raise ValueError(f"batching must be one of {BATCHINGS}, got {batching!r}")
    if lid_loss not in LID_LOSSES:
        raise ValueError(f"lid_loss must be one of {LID_LOSSES}, got {lid_loss!r}")
    by_lang = [[i for i, u in enumerate(train_u) if u.lang == lg] for lg in range(L)]
    missing = [corpus.langs[lg] for lg in range(L) if not by_lang[lg]]
    if missing:
        raise CorpusError(f"{corpus.root}: no usable training utterance for {missing}")
    hours = np.array([sum(train_u[i].n_samples for i in ix) / RATE / 3600 for ix in by_lang])
    # batch groups: one per language (drawn by hours), or one group of every utterance (mixed)
    groups = by_lang if batching == "language" else [list(range(len(train_u)))]
    probs = hours / hours.sum() if batching == "language" else np.ones(1)
    lens = [np.array([n_stacked(train_lm[i].shape[0]) for i in ix]) for ix in groups]
    utt_lang = torch.tensor([u.lang for u in train_u], dtype=torch.long)
    load_s = time.monotonic() - t_load

    run = {
        "seed": int(seed),
        "batch_seconds": float(batch_seconds),
        "max_utts": int(max_utts),
        "lr": float(lr),
        "lr_final": float(lr_final),
        "warmup": int(warmup),
        "clip": float(clip),
        "ctc_weight": float(ctc_weight),
        "init": init,
        "steps": None if steps is None else int(steps),
        "eval_every": int(eval_every),
        "dev_per_lang": int(dev_per_lang),
        "wer_per_lang": int(wer_per_lang),
        "train_limit": train_limit,
        "train_utterances": len(train_u),
        "batching": batching,
        "lid_loss": lid_loss,
        "init_from": None if init_from is None else Path(init_from).name,
        "languages": None if languages is None else list(corpus.langs),
    }
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
            src, _meta = load_model(init_from, expect=_arch(cfg.to_dict()))
        except ModelError as exc:
            raise ValueError(f"--init-from: {exc}") from None
        model.load_state_dict(src.state_dict())  # weights and input statistics of the earlier run
    ctc = CtcHeads(cfg) if ctc_weight > 0 else None
    if init_from is not None and ctc is not None:
        ctc_note = _init_ctc_from(ctc, Path(init_from), cfg)
        prog_note(f"--init-from: {ctc_note}")
    model.to(dev)
    if ctc is not None:
        ctc.to(dev)
    params = list(model.parameters()) + (list(ctc.parameters()) if ctc is not None else [])
    opt = torch.optim.Adam(params, lr=lr, betas=(0.9, 0.98), eps=1e-9)
    st: dict[str, Any] = {"step": 0, "epoch": [0] * len(groups), "pos": [0] * len(groups), "elapsed_s": 0.0, "audio_s": 0.0, "best_loss": math.inf,
                          "best_step": None, "best_eval": None, "history": [], "runs": 0, "train_loss_sum": 0.0, "train_loss_n": 0,
                          "train_lang_steps": [0] * L}  # fmt: skip
    best_state: dict[str, torch.Tensor] | None = None
    if resume and ckpt_p.is_file():
        ck = torch.load(ckpt_p, map_location="cpu", weights_only=False)
        if not isinstance(ck, dict) or ck.get("format") != CKPT_FORMAT:
            raise ValueError(f"{ckpt_p}: not an RNN-T training checkpoint")
        ck["run"].setdefault("batching", "language")  # checkpoints from before these options
        ck["run"].setdefault("lid_loss", "frame-mean")
        ck["run"].setdefault("init_from", None)
        ck["run"].setdefault("languages", None)
        ck["config"] = _ckpt_config(ck.get("config"))  # checkpoints from before later config fields load with their defaults
        if ck["config"] != cfg.to_dict() or ck["run"] != run:
            diff = {k: (v, ck["run"].get(k)) for k, v in run.items() if ck["run"].get(k) != v}
            if ck["config"] != cfg.to_dict():
                diff["config"] = "differs"
            raise ValueError(f"{ckpt_p}: checkpoint of another run (now, checkpoint): {diff}; drop --resume or use another --ckpt")
        model.load_state_dict(ck["model"])
        if ctc is not None:
            ctc.load_state_dict(ck["ctc"])
        opt.load_state_dict(ck["opt"])
        torch.set_rng_state(ck["torch_rng"])
        st = ck["state"]
        best_state = ck.get("best_state")
    elif resume:
        prog_note(f"no checkpoint at {ckpt_p}; starting from scratch")
    st["runs"] += 1

    budget_s = math.inf if minutes is None else float(minutes) * 60.0
    prog = _Progress(steps, st["step"], quiet, log_every)
    prog.note(
        f"train rnnt {cfg.variant}: {len(train_u)} train utterances ({', '.join(f'{lg} {h:.2f} h' for lg, h in zip(corpus.langs, hours))}), "
        f"{len(dev_u)} dev, vocab {list(cfg.vocab_sizes)}, {n_params(model) / 1e6:.2f} M parameters, {threads} thread(s), "
        f"batches <= {batch_seconds:g} s padded / {max_utts} utts, budget {steps if steps is not None else '-'} steps / "
        f"{minutes if minutes is not None else '-'} min, start at step {st['step']}, data loaded in {load_s:.0f} s"
    )
    t_run = time.monotonic()
    base_elapsed = st["elapsed_s"]
    batch_cache: dict[tuple[int, int], list[list[int]]] = {}
    stop_signal: list[int] = []

    def elapsed() -> float:
        return base_elapsed + time.monotonic() - t_run

    def batches_of(lg: int, ep: int) -> list[list[int]]:
        key = (lg, ep)
        if key not in batch_cache:
            batch_cache.clear() if len(batch_cache) > 4 * L else None
            rng = np.random.default_rng(np.random.SeedSequence([seed, 2, lg, ep]))
            batch_cache[key] = make_batches(lens[lg], batch_frames, max_utts, rng)
        return batch_cache[key]

    def save_ckpt() -> None:
        st["elapsed_s"] = elapsed()
        _save(ckpt_p, {"format": CKPT_FORMAT, "config": cfg.to_dict(), "run": run, "model": model.state_dict(), "opt": opt.state_dict(),
                       "ctc": None if ctc is None else ctc.state_dict(), "torch_rng": torch.get_rng_state(), "state": st, "best_state": best_state})  # fmt: skip

    def card(final: bool) -> dict[str, Any]:
        return _model_card(cfg, model, corpus, run, st, hours, threads, out, final, half_weights, str(dev), weights_from)

    def write_weights() -> None:
        """The weight file: the best dev-loss state, or the current one with ``weights_from="last"``."""
        last = weights_from == "last"
        if best_state is None and not last:
            return
        m = RnntModel(cfg)
        m.load_state_dict(model.state_dict() if last else best_state)
        meta = {"symbols": symbols, "variant": cfg.variant, "step": st["step"] if last else st["best_step"], "seed": seed,
                "card": out.with_suffix(".json").name, "corpus_command": corpus.command, "weights_from": weights_from,
                "train_hours": {lg: round(float(h), 4) for lg, h in zip(corpus.langs, hours)}}  # fmt: skip
        save_model(out, m, meta=meta, half=half_weights)

    def validate() -> None:
        nonlocal best_state
        ev = evaluate(model, dev_u, dev_lm, wer_ids, sym_list, batch_frames, max_utts)
        model.train()
        tl = st["train_loss_sum"] / max(st["train_loss_n"], 1)
        st["train_loss_sum"], st["train_loss_n"] = 0.0, 0
        rec = {"step": st["step"], "elapsed_s": round(elapsed(), 1), "audio_h": round(st["audio_s"] / 3600, 3), "train_loss": round(tl, 4),
               **{k: (round(v, 4) if isinstance(v, float) else v) for k, v in ev.items() if k != "examples"}}  # fmt: skip
        st["history"].append(rec)
        improved = ev["loss"] < st["best_loss"]
        if improved:
            st["best_loss"], st["best_step"], st["best_eval"] = ev["loss"], st["step"], {**rec, "examples": ev.get("examples")}
            best_state = {k: v.detach().clone() for k, v in model.state_dict().items()}
        save_ckpt()
        if improved or weights_from == "last":
            write_weights()
        write_text(out.with_suffix(".json"), json.dumps(card(False), indent=1, ensure_ascii=False) + "\n")
        wer = " ".join(f"{k} {v * 100:.1f}" for k, v in ev.get("wer_per_lang", {}).items())
        lid = f", LID acc {ev['lid_acc'] * 100:.1f} %" if "lid_acc" in ev else ""
        cer = f", CER {ev['cer_char_weighted'] * 100:.1f} %" if "cer_char_weighted" in ev else ""
        prog.note(f"[eval] step {st['step']}: train loss {tl:.3f}, dev loss {ev['loss']:.3f} (rnnt {ev['rnnt_loss']:.3f}{lid}), "
                  f"dev WER % {wer}{cer}{' *best*' if improved else ''}, {elapsed() / 60:.1f} min")  # fmt: skip

    def on_signal(signum: int, frame: Any) -> None:
        stop_signal.append(signum)

    old_handlers = {}
    for sig in (signal.SIGTERM, signal.SIGINT):
        try:
            old_handlers[sig] = signal.signal(sig, on_signal)
        except ValueError:  # not the main thread
            pass
    model.train()
    last_ckpt = time.monotonic()
    win_sum, win_n = 0.0, 0
    enc_out: dict[int, torch.Tensor] = {}
    t_rate, s_rate, a_rate = time.monotonic(), st["step"], st["audio_s"]
    try:
        while True:
            if (
                (steps is not None and st["step"] >= steps)
                or elapsed() >= budget_s
                or stop_signal
                or (stop_after is not None and st["step"] >= stop_after)
            ):
                break
            k = st["step"]
            gi = int(np.random.default_rng(np.random.SeedSequence([seed, 1, k])).choice(len(groups), p=probs))
            bl = batches_of(gi, st["epoch"][gi])
            sel = [groups[gi][j] for j in bl[st["pos"][gi]]]
            st["pos"][gi] += 1
            if st["pos"][gi] >= len(bl):
                st["epoch"][gi] += 1
                st["pos"][gi] = 0
            x, fl, y, tl = collate([train_u[i] for i in sel], [train_lm[i] for i in sel])
            x, y = x.to(dev, non_blocking=True), y.to(dev, non_blocking=True)
            rows_lang = utt_lang[sel]
            lg = int(rows_lang[0]) if bool((rows_lang == rows_lang[0]).all()) else rows_lang
            for g in opt.param_groups:
                g["lr"] = lr_at(k, run)
            if ctc is not None:
                hook = model.encoder.register_forward_hook(lambda mod, i, o: enc_out.__setitem__(0, o[0]))
                try:
                    res = model(x, fl, y, tl, lg)
                finally:
                    hook.remove()
                loss = res["loss"] + ctc_weight * ctc(model, enc_out.pop(0), fl, y, tl, lg)
            else:
                res = model(x, fl, y, tl, lg)
                loss = res["loss"]
            if lid_loss == "utt-sum" and cfg.has_lid:  # frame mean x frames per utterance = per-utterance sum, mean over utterances
                loss = loss + cfg.lid_weight * res["lid_loss"] * (float(fl.sum()) / len(sel) - 1.0)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(params, clip)
            opt.step()
            lv = float(loss.detach())
            if not math.isfinite(lv):
                names = sorted({corpus.langs[i] for i in rows_lang.tolist()})
                raise FloatingPointError(f"non-finite training loss at step {k} (language {', '.join(names)})")
            st["step"] += 1
            st["audio_s"] += sum(train_u[i].n_samples for i in sel) / RATE
            st["train_loss_sum"] += lv
            st["train_loss_n"] += 1
            for row_lang in rows_lang.tolist():  # steps per language: fraction of the batch's utterances
                st["train_lang_steps"][row_lang] += 1.0 / len(sel)
            win_sum += lv
            win_n += 1
            if on_step is not None:
                on_step(st["step"], lv)
            now = time.monotonic()
            if st["step"] % log_every == 0:
                dt = max(now - t_rate, 1e-9)
                sps, aps = (st["step"] - s_rate) / dt, (st["audio_s"] - a_rate) / dt
                t_rate, s_rate, a_rate = now, st["step"], st["audio_s"]
                eta = "" if steps is None or sps <= 0 else f", ETA {(steps - st['step']) / sps / 60:.0f} min"
                prog.step(st["step"], f"loss {win_sum / max(win_n, 1):.3f} lr {lr_at(k, run):.2e} {sps:.2f} steps/s {aps:.0f} audio-s/s "
                                      f"{st['audio_s'] / 3600:.2f} h seen, {elapsed() / 60:.1f} min{eta}")  # fmt: skip
                win_sum, win_n = 0.0, 0
            if st["step"] % eval_every == 0:
                validate()
                last_ckpt = time.monotonic()
            elif now - last_ckpt > ckpt_minutes * 60:
                save_ckpt()
                last_ckpt = now
        if stop_signal:
            save_ckpt()
            prog.note(f"signal {stop_signal[0]}: checkpoint written at step {st['step']} ({ckpt_p.name}); continue with --resume")
            prog.close()
            return card(False)
        if not st["history"] or st["history"][-1]["step"] != st["step"]:
            validate()
        else:
            save_ckpt()
        write_weights()  # the weight file in the requested storage type, also when resuming a finished run
    finally:
        for sig, h in old_handlers.items():
            signal.signal(sig, h)
    prog.close()
    done = (steps is not None and st["step"] >= steps) or elapsed() >= budget_s
    c = card(done)
    write_text(out.with_suffix(".json"), json.dumps(c, indent=1, ensure_ascii=False) + "\n")
    prog.note(f"{'finished' if done else 'stopped'} at step {st['step']}: best dev loss {st['best_loss']:.3f} at step {st['best_step']}; "
              f"weights {out.name}, card {out.with_suffix('.json').name}")  # fmt: skip
    return c


def _model_card(cfg: RnntConfig, model: RnntModel, corpus: AsrCorpus, run: dict[str, Any], st: dict[str, Any], hours: np.ndarray,
                threads: int, out: Path, final: bool, half_weights: bool = False, device: str = "cpu",
                weights_from: str = "best") -> dict[str, Any]:  # fmt: skip
    from streamkit.core.machine import machine_info

    elapsed = st["elapsed_s"]
    return {
        "model": f"streamkit.models.rnnt ({cfg.variant}), multilingual streaming RNN-T (Joshi et al. 2021, multi-softmax)",
        "variant": cfg.variant,
        "weights": out.name,
        "weights_dtype": "float16" if half_weights else "float32",
        "status": "finished" if final else "in progress",
        "config": cfg.to_dict(),
        "n_params": n_params(model),
        "size_note": "scaled down from the paper's 6x1024 encoder / 2x1024 prediction LSTMs (about 69 M parameters) so that CPU "
        "training fits a few hours on one thread of a 2-core machine",
        "features": "80 log-mel (25 ms / 10 ms, 8 kHz), 8 frames stacked, 30 ms shift (streamkit.models.features); per-dimension "
        "normalisation from the training data",
        "corpus": {
            "command": corpus.command,
            "languages": corpus.langs,
            "train_hours": {lg: round(float(h), 3) for lg, h in zip(corpus.langs, hours)},
            "train_utterances": run["train_utterances"],
            "vocab_sizes": list(cfg.vocab_sizes),
        },
        "training": {
            "command": _command(cfg, run, threads, out, half_weights, device, weights_from),
            "budget": {"steps": run["steps"], "note": "same --steps (and batch settings) for every variant"},
            "seed": run["seed"],
            "steps": st["step"],
            "audio_hours_seen": round(st["audio_s"] / 3600, 3),
            "steps_per_language": {lg: round(float(n), 1) for lg, n in zip(cfg.languages, st["train_lang_steps"])},
            "wall_time_s": round(elapsed, 1),
            "runs": st["runs"],
            "threads": threads,
            "device": device if device == "cpu" else f"{device} ({torch.cuda.get_device_name(torch.device(device))})",
            "batching": (
                "one language per mini-batch, language ~ training hours"
                if run.get("batching", "language") == "language"
                else "mixed: every language's utterances bucketed together (languages in proportion to their hours)"
            )
            + f"; length-bucketed, <= {run['batch_seconds']:g} s padded audio and <= {run['max_utts']} utterances per batch",
            "optimiser": f"Adam (0.9, 0.98), eps 1e-9, lr {run['lr']:g}, linear warm-up {run['warmup']} steps"
            + (f", cosine decay to {run['lr_final']:g} x lr at step {run['steps']}" if run["steps"] else ", then constant")
            + f", gradient norm clip {run['clip']:g}",
            "loss": "RNN-T (mean per utterance)"
            + (
                f" + {cfg.lid_weight:g} x frame-level LID cross-entropy "
                + ("(mean over frames)" if run.get("lid_loss", "frame-mean") == "frame-mean" else "(summed per utterance, mean over utterances)")
                if cfg.has_lid
                else ""
            )
            + (
                f" + {run['ctc_weight']:g} x auxiliary encoder CTC (per utterance; training-only heads, not in the weight file)"
                if run["ctc_weight"]
                else ""
            ),
            "steps_per_s": round(st["step"] / elapsed, 4) if elapsed > 0 else None,
            "audio_s_per_s": round(st["audio_s"] / elapsed, 2) if elapsed > 0 else None,
        },
        "dev": {
            "subset": f"{run['dev_per_lang']} utterances per language (loss, LID), {run['wer_per_lang']} of them for WER; speakers unseen in training",
            "wer_rule": "greedy search with the language known, at most 3 symbols per frame",
            "best_step": st["best_step"],
            "weights": f"the last step's state (step {st['step']})" if weights_from == "last" else f"the best dev loss (step {st['best_step']})",
            "best": st["best_eval"],
            "history": st["history"],
        },
        "torch": torch.__version__,
        "machine": machine_info(),
        "updated": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


def _command(cfg: RnntConfig, run: dict[str, Any], threads: int, out: Path, half_weights: bool = False, device: str = "cpu",
             weights_from: str = "best") -> str:  # fmt: skip
    d = RnntConfig().to_dict()
    c = cfg.to_dict()
    size = " ".join(f"--{k.replace('_', '-')} {c[k]}" for k in ("enc_layers", "enc_hidden", "pred_layers", "pred_hidden", "embed_dim",
                                                                 "joint_dim", "dropout", "lid_weight", "lid_hidden", "feat_norm") if c[k] != d[k])  # fmt: skip
    cmd = f"streamkit train rnnt --corpus CORPUS --variant {cfg.variant} --out {out.name} --seed {run['seed']}"
    if run["steps"] is not None:
        cmd += f" --steps {run['steps']}"
    cmd += f" --batch-seconds {run['batch_seconds']:g} --max-utts {run['max_utts']} --lr {run['lr']:g} --warmup {run['warmup']}"
    cmd += f" --lr-final {run['lr_final']:g} --clip {run['clip']:g}"
    cmd += f" --batching {run.get('batching', 'language')} --lid-loss {run.get('lid_loss', 'frame-mean')}"
    if run.get("init_from"):
        cmd += f" --init-from {run['init_from']}"
    if run.get("languages"):
        cmd += f" --languages {','.join(run['languages'])}"
    cmd += f" --ctc-weight {run['ctc_weight']:g} --init {run['init']} --eval-every {run['eval_every']} --threads {threads}"
    if device != "cpu":
        cmd += f" --device {device}"
    return (
        cmd + (" " + size if size else "") + (" --half-weights" if half_weights else "") + (" --weights-from last" if weights_from == "last" else "")
    )


# --------------------------------------------------------------------------------------------
# CLI
# --------------------------------------------------------------------------------------------


def add_arguments(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
    d = RnntConfig()
    p.add_argument("--corpus", required=True, metavar="DIR", help="a corpus from `streamkit corpus asr` (train/dev splits)")
    p.add_argument("--variant", choices=VARIANTS, default="lid", help="model variant (default lid: multi-softmax with integrated LID)")
    p.add_argument("--languages", default=None, metavar="LANG[,LANG...]",
                   help="train on these of the corpus's languages only (one: a monolingual baseline; default all)")  # fmt: skip
    p.add_argument("--out", required=True, metavar="PATH", help="weight file (.pt) to write; the model card goes next to it as .json")
    p.add_argument("--steps", type=int, default=None, help="total optimiser steps over resumed runs (the budget; sets the LR schedule)")
    p.add_argument("--minutes", type=float, default=None, help="training wall-time cap in minutes, summed over resumed runs")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    p.add_argument("--device", default="cpu", help="torch device of the model and losses: cpu (default), cuda, cuda:N")
    p.add_argument("--resume", action="store_true", help="continue from the checkpoint (bit-for-bit as an uninterrupted run)")
    p.add_argument("--ckpt", default=None, metavar="PATH", help="checkpoint (default: <out stem>.ckpt next to --out)")
    p.add_argument("--ckpt-minutes", type=float, default=5.0, help="checkpoint at least this often (default 5 min)")
    p.add_argument("--batch-seconds", type=float, default=32.0, help="padded audio seconds per mini-batch (default 32)")
    p.add_argument("--max-utts", type=int, default=32, help="at most this many utterances per mini-batch (default 32)")
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--lr-final", type=float, default=0.05, help="final LR as a fraction of --lr (cosine decay; needs --steps)")
    p.add_argument("--warmup", type=int, default=300, help="linear LR warm-up steps (default 300)")
    p.add_argument("--clip", type=float, default=5.0, help="gradient norm clip (default 5)")
    p.add_argument("--ctc-weight", type=float, default=0.3, help="weight of the auxiliary encoder CTC loss, training only (default 0.3; 0: off)")
    p.add_argument("--init", choices=["xavier", "torch"], default="xavier", help="LSTM initialisation (default xavier: see init_lstm)")
    p.add_argument("--eval-every", type=int, default=500, help="dev evaluation + checkpoint every N steps (default 500)")
    p.add_argument("--dev-per-lang", type=int, default=60, help="dev utterances per language for loss/LID (default 60)")
    p.add_argument("--wer-per-lang", type=int, default=30, help="of those, decoded for the dev WER (default 30)")
    p.add_argument("--train-limit", type=int, default=None, help="at most N training utterances per language (quick runs)")
    p.add_argument("--log-every", type=int, default=25, help="progress line every N steps when not on a terminal")
    g = p.add_argument_group("model size (defaults of RnntConfig)")
    for name in ("enc_layers", "enc_hidden", "pred_layers", "pred_hidden", "embed_dim", "joint_dim"):
        g.add_argument(f"--{name.replace('_', '-')}", type=int, default=getattr(d, name))
    g.add_argument("--dropout", type=float, default=d.dropout)
    g.add_argument("--lid-weight", type=float, default=d.lid_weight, help="weight of the LID cross-entropy (lid variant)")
    g.add_argument("--lid-hidden", type=int, default=d.lid_hidden,
                   help="lid variant: a GRU of this size before the LID layer (default 0: the paper's linear layer)")  # fmt: skip
    g.add_argument("--feat-norm", choices=FEAT_NORMS, default="causal",
                   help="input normalisation (default causal: global statistics, then a running per-utterance mean/variance; "
                   "global: the global statistics only)")  # fmt: skip
    p.add_argument(
        "--batching",
        choices=BATCHINGS,
        default="language",
        help="language: every mini-batch from one language, drawn by hours (the paper); mixed: batches over all languages",
    )
    p.add_argument(
        "--lid-loss",
        choices=LID_LOSSES,
        default="frame-mean",
        help="LID cross-entropy as the mean over frames, or summed per utterance (the RNN-T loss's scale)",
    )
    p.add_argument("--init-from", default=None, metavar="PATH",
                   help="start from this weight file (same architecture): go on with a new --steps budget and LR schedule")  # fmt: skip
    p.add_argument("--stop-after", type=int, default=None, metavar="STEP",
                   help="pause at this step (a checkpoint; the LR schedule still follows --steps; --resume goes on)")  # fmt: skip
    p.add_argument("--weights-from", choices=["best", "last"], default="best",
                   help="the weight file holds the best dev-loss state (default) or the last step's; with --resume of a finished "
                   "run it rewrites the weight file only")  # fmt: skip
    p.add_argument("--half-weights", action="store_true",
                   help="store the weight file as float16 (half the size; the checkpoint stays float32); with --resume of a "
                   "finished run it rewrites the weight file only")  # fmt: skip
    p.add_argument("--quiet", action="store_true")
    return p


def run_from_args(ns: argparse.Namespace) -> int:
    try:
        cfg = RnntConfig(variant=ns.variant, enc_layers=ns.enc_layers, enc_hidden=ns.enc_hidden, pred_layers=ns.pred_layers,
                         pred_hidden=ns.pred_hidden, embed_dim=ns.embed_dim, joint_dim=ns.joint_dim, dropout=ns.dropout,
                         lid_weight=ns.lid_weight, lid_hidden=ns.lid_hidden, feat_norm=ns.feat_norm)  # fmt: skip
        if ns.threads < 1:
            raise ValueError(f"--threads must be >= 1, got {ns.threads}")
        train(ns.corpus, ns.out, cfg=cfg, steps=ns.steps, minutes=ns.minutes, seed=ns.seed, resume=ns.resume, ckpt=ns.ckpt,
              batch_seconds=ns.batch_seconds, max_utts=ns.max_utts, lr=ns.lr, lr_final=ns.lr_final, warmup=ns.warmup, clip=ns.clip,
              ctc_weight=ns.ctc_weight, init=ns.init,
              threads=ns.threads, eval_every=ns.eval_every, ckpt_minutes=ns.ckpt_minutes, dev_per_lang=ns.dev_per_lang,
              wer_per_lang=ns.wer_per_lang, train_limit=ns.train_limit, log_every=ns.log_every, quiet=ns.quiet,
              half_weights=ns.half_weights, batching=ns.batching, lid_loss=ns.lid_loss,
              init_from=ns.init_from, stop_after=ns.stop_after, device=ns.device,
              languages=None if ns.languages is None else [x.strip() for x in ns.languages.split(",") if x.strip()],
              weights_from=ns.weights_from)  # fmt: skip
    except (CorpusError, ValueError) as exc:
        print(f"streamkit train rnnt: error: {exc}", file=sys.stderr)
        return 2
    return 0
