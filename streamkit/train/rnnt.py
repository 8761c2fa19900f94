"""Training recipe of the multilingual RNN-T: ``streamkit train rnnt --corpus DIR --variant V --out PATH``.

The model family is :mod:`streamkit.models.rnnt`, the corpus :mod:`streamkit.data.asr_corpus`
(``streamkit corpus asr``), the recipe that of Joshi et al. 2021, "Multiple softmax architecture
for streaming multilingual end-to-end ASR systems" (sections 4-5). The steps of the loop are in
:mod:`streamkit.train.rnnt_steps`, the data in :mod:`streamkit.train.rnnt_corpus`, the dev
evaluation in :mod:`streamkit.train.rnnt_eval`, the model card in :mod:`streamkit.train.rnnt_card`.

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
import math
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch

from streamkit.models.rnnt import FEAT_NORMS, VARIANTS, RnntConfig, n_params
from streamkit.train.rnnt_corpus import AsrCorpus, CorpusError, Utt, make_batches
from streamkit.train.rnnt_eval import greedy_decode, word_errors
from streamkit.train.rnnt_steps import BATCHINGS, CKPT_FORMAT, FRAME_S, LID_LOSSES, Trainer, build_model, load_data

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
    :func:`~streamkit.train.rnnt_steps.init_ctc_from`). Its file name is part of the run.
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
    batch_frames = max(1, int(batch_seconds / FRAME_S))
    prog_note = (lambda m: None) if quiet else (lambda m: print(m, flush=True))

    data = load_data(corpus, train_limit=train_limit, dev_per_lang=dev_per_lang, wer_per_lang=wer_per_lang, batching=batching, note=prog_note)
    if lid_loss not in LID_LOSSES:
        raise ValueError(f"lid_loss must be one of {LID_LOSSES}, got {lid_loss!r}")
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
        "train_utterances": len(data.train_u),
        "batching": batching,
        "lid_loss": lid_loss,
        "init_from": None if init_from is None else Path(init_from).name,
        "languages": None if languages is None else list(corpus.langs),
    }
    model, ctc = build_model(cfg, seed=seed, init=init, train_lm=data.train_lm, init_from=None if init_from is None else Path(init_from),
                             ctc_weight=ctc_weight, note=prog_note)  # fmt: skip
    tr = Trainer(cfg, corpus, data, run, model, ctc, out, ckpt_p, dev, batch_frames, steps,
                 budget_s=math.inf if minutes is None else float(minutes) * 60.0, stop_after=stop_after, threads=threads,
                 half_weights=half_weights, weights_from=weights_from, clip=clip, ctc_weight=ctc_weight, lid_loss=lid_loss,
                 eval_every=eval_every, ckpt_minutes=ckpt_minutes, log_every=log_every, quiet=quiet, on_step=on_step)  # fmt: skip
    tr.restore(resume, prog_note)
    st = tr.st
    tr.start(
        f"train rnnt {cfg.variant}: {len(data.train_u)} train utterances ({', '.join(f'{lg} {h:.2f} h' for lg, h in zip(corpus.langs, data.hours))}), "
        f"{len(data.dev_u)} dev, vocab {list(cfg.vocab_sizes)}, {n_params(model) / 1e6:.2f} M parameters, {threads} thread(s), "
        f"batches <= {batch_seconds:g} s padded / {max_utts} utts, budget {steps if steps is not None else '-'} steps / "
        f"{minutes if minutes is not None else '-'} min, start at step {st['step']}, data loaded in {data.load_s:.0f} s"
    )
    try:
        while not tr.should_stop():
            tr.step(tr.next_batch())
        interrupted = tr.finish()
        if interrupted is not None:
            return interrupted
    finally:
        tr.restore_signals()
    tr.prog.close()
    done = (steps is not None and st["step"] >= steps) or tr.elapsed() >= tr.budget_s
    c = tr.write_card(done)
    tr.prog.note(f"{'finished' if done else 'stopped'} at step {st['step']}: best dev loss {st['best_loss']:.3f} at step {st['best_step']}; "
                 f"weights {out.name}, card {out.with_suffix('.json').name}")  # fmt: skip
    return c


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
