"""Second training stage of the ``lid`` RNN-T: refit the LID head on the frozen encoder.

``streamkit train rnnt-lid --model IN.pt --corpus DIR --out OUT.pt``

Why a second stage. The paper (Joshi et al. 2021, §4.2) trains the LID output layer jointly with
the RNN-T, with mini-batches from one language at a time, and notes that the LID loss flowing into
the encoder can cost recognition accuracy ("could be avoided by having a separate LID model").
On our scale the joint head fails the other way round: with one-language batches it follows the
language of the last few batches, and its frame-mean cross-entropy is about 100 times weaker than
the per-utterance RNN-T loss. Run A of session 4 (5000 steps) ended with dev LID 36 % while a
linear head fitted on its frozen encoder with balanced batches reached 67.8 %. Training with
mixed batches and a per-utterance LID loss (``--batching mixed --lid-loss utt-sum``) lifted LID
to 57 % but slowed the RNN-T (dev loss 144.8 against 105.8 at step 2500).

This stage keeps the encoder, prediction networks and joints bit-for-bit (so the recognition
results with the language known do not change) and retrains only the LID layer, the same linear
layer + softmax of the weight file, so the model size and the streaming cost do not change.

* **Data**: ``--utts-per-lang`` training utterances of every language (all of a language that has
  fewer), drawn with ``--seed``, so the languages weigh the same however many hours each has. The
  encoder output of each is computed once (eval mode, whole utterance; the encoder is causal, so
  the outputs are the streaming ones).
* **Loss**: frame-level cross-entropy (paper §4.2), every language's frames weighted to the same
  total, plus ``--weight-decay`` (L2, Adam). Adam, ``--lr``, shuffled mini-batches of
  ``--batch-frames`` frames, ``--epochs`` passes.
* **Selection**: after every pass the dev subset (``--dev-per-lang`` utterances per language,
  spread evenly over the dev list, as in ``streamkit train rnnt``; speakers unseen in training) is
  scored: utterance LID accuracy (arg-max of the mean frame posterior, the trainer's rule and the
  decoder's end-of-utterance choice) and the frame cross-entropy. The pass with the best accuracy
  (ties: lower cross-entropy) is kept.

Writes the weight file (``meta["lid_refit"]`` names the source and the dev accuracy) and a model
card ``<out stem>.json`` with the per-pass history and the dev confusion matrix.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from streamkit.models.checkpoint import ModelError
from streamkit.models.rnnt import load_model, save_model
from streamkit.train.rnnt import AsrCorpus, CorpusError, _spread, compute_logmel, stacked

__all__ = ["refit_lid", "add_arguments", "run_from_args"]


def _encode(model: torch.nn.Module, logmels: list[torch.Tensor]) -> list[torch.Tensor]:
    out = []
    with torch.inference_mode():
        for lm in logmels:
            out.append(model.encode(stacked(lm)[None])[0].clone())
    return out


def _dev_scores(head: torch.nn.Linear, enc: list[torch.Tensor], langs: list[int], n_lang: int) -> dict[str, Any]:
    conf = np.zeros((n_lang, n_lang), np.int64)
    ce_sum, n_frames = 0.0, 0
    with torch.inference_mode():
        for h, lg in zip(enc, langs):
            logp = head(h).log_softmax(-1)
            ce_sum += float(-logp[:, lg].sum())
            n_frames += h.shape[0]
            conf[lg, int(logp.exp().mean(0).argmax())] += 1
    per = conf.diagonal() / np.maximum(conf.sum(1), 1)
    return {"acc": float(conf.diagonal().sum() / max(conf.sum(), 1)), "acc_per_lang": per, "ce": ce_sum / max(n_frames, 1), "confusion": conf}


def refit_lid(
    model_path: str | Path,
    corpus_dir: str | Path,
    out: str | Path,
    *,
    utts_per_lang: int = 400,
    epochs: int = 30,
    lr: float = 3e-3,
    weight_decay: float = 1e-4,
    batch_frames: int = 4096,
    dev_per_lang: int = 60,
    reset: bool = False,
    seed: int = 0,
    threads: int = 1,
    half_weights: bool = False,
    quiet: bool = False,
) -> dict[str, Any]:
    """Refit the LID head of ``model_path`` (see the module docstring); returns the model card.

    Raises:
        ValueError: bad options, a model without an LID head, or a corpus of other languages.
        CorpusError: the corpus is missing or broken.
    """
    from streamkit.cli import machine_info

    for name, v in (("--utts-per-lang", utts_per_lang), ("--epochs", epochs), ("--batch-frames", batch_frames), ("--dev-per-lang", dev_per_lang),
                    ("--threads", threads)):  # fmt: skip
        if v < 1:
            raise ValueError(f"{name} must be >= 1, got {v}")
    if not lr > 0 or weight_decay < 0:
        raise ValueError(f"--lr must be > 0 and --weight-decay >= 0, got {lr:g} and {weight_decay:g}")
    out = Path(out)
    note = (lambda s: None) if quiet else (lambda s: print(s, file=sys.stderr, flush=True))
    torch.set_num_threads(threads)
    t0 = time.monotonic()
    try:
        model, meta = load_model(model_path)
    except ModelError as exc:
        raise ValueError(f"--model: {exc}") from None
    cfg = model.cfg
    if not cfg.has_lid or model.lid_head is None:
        raise ValueError(f"--model: variant {cfg.variant!r} has no LID head (only the lid variant has one)")
    corpus = AsrCorpus(corpus_dir)
    if list(corpus.langs) != list(cfg.languages):
        raise ValueError(f"corpus languages {corpus.langs} differ from the model's {list(cfg.languages)}")
    L = cfg.n_lang
    train_all, dev_all = corpus.split("train"), corpus.split("dev")
    rng = np.random.default_rng(np.random.SeedSequence([seed, 7]))
    train_u, dev_u = [], []
    for lg in range(L):
        idx = [i for i, u in enumerate(train_all) if u.lang == lg]
        if not idx:
            raise CorpusError(f"{corpus.root}: no training utterances of {cfg.languages[lg]!r}")
        pick = sorted(rng.choice(len(idx), size=min(utts_per_lang, len(idx)), replace=False).tolist())
        train_u += [train_all[idx[i]] for i in pick]
        didx = [i for i, u in enumerate(dev_all) if u.lang == lg]
        dev_u += [dev_all[i] for i in _spread(didx, dev_per_lang)]
    note(f"train rnnt-lid: encoding {len(train_u)} training and {len(dev_u)} dev utterances with the frozen encoder of {Path(model_path).name}")
    model.eval()
    for p in model.parameters():
        p.requires_grad_(False)
    enc_tr = _encode(model, compute_logmel(train_u, note))
    enc_dv = _encode(model, compute_logmel(dev_u, note))
    dev_langs = [u.lang for u in dev_u]
    X = torch.cat(enc_tr)
    y = torch.cat([torch.full((h.shape[0],), u.lang, dtype=torch.long) for h, u in zip(enc_tr, train_u)])
    counts = torch.bincount(y, minlength=L).to(torch.float32)
    w = (1.0 / (L * counts))[y] * X.shape[0]  # every language's frames weigh the same in total; mean weight 1
    src = model.lid_head
    head = torch.nn.Linear(src.in_features, L)
    if not reset:
        head.load_state_dict(src.state_dict())
    else:
        torch.manual_seed(seed)
        head.reset_parameters()
    before = _dev_scores(src, enc_dv, dev_langs, L)
    note(f"  frames: {X.shape[0]} train ({', '.join(f'{lg} {int(c)}' for lg, c in zip(cfg.languages, counts.tolist()))}); "
         f"dev LID before: {100 * before['acc']:.1f} % (frame CE {before['ce']:.3f}); encoding took {time.monotonic() - t0:.0f} s")  # fmt: skip
    opt = torch.optim.Adam(head.parameters(), lr=lr, weight_decay=weight_decay)
    gen = torch.Generator().manual_seed(seed)
    history: list[dict[str, Any]] = []
    best: tuple[float, float] = (before["acc"], -before["ce"]) if not reset else (-1.0, -np.inf)
    best_state = {k: v.clone() for k, v in head.state_dict().items()}
    best_epoch, best_scores = (0 if not reset else None), (before if not reset else None)
    for ep in range(1, epochs + 1):
        perm = torch.randperm(X.shape[0], generator=gen)
        tot, n = 0.0, 0
        for i in range(0, X.shape[0], batch_frames):
            b = perm[i : i + batch_frames]
            loss = (torch.nn.functional.cross_entropy(head(X[b]), y[b], reduction="none") * w[b]).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            tot += float(loss.detach()) * b.numel()
            n += b.numel()
        sc = _dev_scores(head, enc_dv, dev_langs, L)
        history.append({"epoch": ep, "train_ce": round(tot / n, 4), "dev_ce": round(sc["ce"], 4), "dev_lid_acc": round(sc["acc"], 4),
                        "dev_lid_acc_per_lang": {lg: round(float(a), 4) for lg, a in zip(cfg.languages, sc["acc_per_lang"])}})  # fmt: skip
        key = (sc["acc"], -sc["ce"])
        mark = ""
        if key > best:
            best, best_epoch, best_scores, mark = key, ep, sc, " *best*"
            best_state = {k: v.clone() for k, v in head.state_dict().items()}
        note(f"  pass {ep}: train CE {tot / n:.4f}, dev CE {sc['ce']:.4f}, dev LID {100 * sc['acc']:.1f} % "
             f"({', '.join(f'{lg} {100 * a:.0f}' for lg, a in zip(cfg.languages, sc['acc_per_lang']))}){mark}")  # fmt: skip
    assert best_scores is not None
    src.load_state_dict(best_state)
    wall = time.monotonic() - t0
    names = list(cfg.languages)
    refit = {
        "source": Path(model_path).name,
        "best_epoch": best_epoch,
        "dev_lid_acc_before": round(before["acc"], 4),
        "dev_lid_acc": round(best_scores["acc"], 4),
    }
    new_meta = {**meta, "card": out.with_suffix(".json").name, "lid_refit": refit}
    save_model(out, model, meta=new_meta, half=half_weights)
    cmd = (f"streamkit train rnnt-lid --model {Path(model_path).name} --corpus CORPUS --out {out.name} --utts-per-lang {utts_per_lang} "
           f"--epochs {epochs} --lr {lr:g} --weight-decay {weight_decay:g} --batch-frames {batch_frames} --dev-per-lang {dev_per_lang} "
           f"--seed {seed} --threads {threads}" + (" --reset" if reset else "") + (" --half-weights" if half_weights else ""))  # fmt: skip
    card = {
        "model": f"streamkit.models.rnnt ({cfg.variant}): LID head refitted on the frozen encoder of {Path(model_path).name}",
        "weights": out.name,
        "weights_dtype": "float16" if half_weights else "float32",
        "source_weights": Path(model_path).name,
        "source_card": meta.get("card"),
        "source_step": meta.get("step"),
        "config": cfg.to_dict(),
        "unchanged": "encoder, prediction networks, joints and input statistics (bit-for-bit); only lid_head is retrained",
        "corpus": {
            "command": corpus.command,
            "languages": names,
            "train_utterances_per_lang": {lg: int((np.array([u.lang for u in train_u]) == i).sum()) for i, lg in enumerate(names)},
            "train_frames_per_lang": {lg: int(c) for lg, c in zip(names, counts.tolist())},
        },  # fmt: skip
        "training": {
            "command": cmd,
            "loss": "frame-level LID cross-entropy, every language's frames weighted to the same total; Adam, L2 weight decay",
            "init": "fresh linear layer" if reset else "the source model's LID head",
            "wall_time_s": round(wall, 1),
            "threads": threads,
        },
        "dev": {
            "subset": f"{dev_per_lang} utterances per language spread over the dev list (the trainer's rule); speakers unseen in training",
            "rule": "utterance LID = arg-max of the mean frame posterior",
            "before": {
                "lid_acc": round(before["acc"], 4),
                "frame_ce": round(before["ce"], 4),
                "lid_acc_per_lang": {lg: round(float(a), 4) for lg, a in zip(names, before["acc_per_lang"])},
            },  # fmt: skip
            "best_epoch": best_epoch,
            "best": {
                "lid_acc": round(best_scores["acc"], 4),
                "frame_ce": round(best_scores["ce"], 4),
                "lid_acc_per_lang": {lg: round(float(a), 4) for lg, a in zip(names, best_scores["acc_per_lang"])},
                "confusion": {"rows_true_cols_predicted": names, "counts": best_scores["confusion"].tolist()},
            },  # fmt: skip
            "history": history,
        },
        "torch": torch.__version__,
        "machine": machine_info(),
        "updated": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    out.with_suffix(".json").write_text(json.dumps(card, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    note(f"dev LID {100 * before['acc']:.1f} % -> {100 * best_scores['acc']:.1f} % (pass {best_epoch}); weights {out.name}, card "
         f"{out.with_suffix('.json').name}, {wall:.0f} s")  # fmt: skip
    return card


def add_arguments(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
    p.add_argument("--model", required=True, metavar="PATH", help="a lid-variant weight file from `streamkit train rnnt`")
    p.add_argument("--corpus", required=True, metavar="DIR", help="the `streamkit corpus asr` corpus it was trained on (train/dev splits)")
    p.add_argument("--out", required=True, metavar="PATH", help="weight file to write (may equal --model); the card goes next to it as .json")
    p.add_argument("--utts-per-lang", type=int, default=400, help="training utterances per language (default 400; all if fewer)")
    p.add_argument("--epochs", type=int, default=30, help="passes over their frames (default 30)")
    p.add_argument("--lr", type=float, default=3e-3, help="Adam learning rate (default 3e-3)")
    p.add_argument("--weight-decay", type=float, default=1e-4, help="L2 weight decay (default 1e-4)")
    p.add_argument("--batch-frames", type=int, default=4096, help="frames per mini-batch (default 4096)")
    p.add_argument("--dev-per-lang", type=int, default=60, help="dev utterances per language for the selection (default 60)")
    p.add_argument("--reset", action="store_true", help="start from a fresh layer instead of the model's LID head")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    p.add_argument("--half-weights", action="store_true", help="store the weight file as float16")
    p.add_argument("--quiet", action="store_true")
    return p


def run_from_args(ns: argparse.Namespace) -> int:
    try:
        refit_lid(ns.model, ns.corpus, ns.out, utts_per_lang=ns.utts_per_lang, epochs=ns.epochs, lr=ns.lr, weight_decay=ns.weight_decay,
                  batch_frames=ns.batch_frames, dev_per_lang=ns.dev_per_lang, reset=ns.reset, seed=ns.seed, threads=ns.threads,
                  half_weights=ns.half_weights, quiet=ns.quiet)  # fmt: skip
    except (CorpusError, ValueError) as exc:
        print(f"streamkit train rnnt-lid: error: {exc}", file=sys.stderr)
        return 2
    return 0
