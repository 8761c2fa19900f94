"""Second training stage of the ``lid`` RNN-T: refit the LID head on the frozen encoder.

``streamkit train rnnt-lid --model IN.pt --corpus DIR --out OUT.pt``

Why a second stage. The paper (Joshi et al. 2021, §4.2) trains the LID output layer jointly with
the RNN-T, with mini-batches from one language at a time, and notes that the LID loss flowing into
the encoder can cost recognition accuracy ("could be avoided by having a separate LID model").
On our scale the joint head fails the other way round: with one-language batches it follows the
language of the last few batches, and its frame-mean cross-entropy is about 100 times weaker than
the per-utterance RNN-T loss. A 5000-step run ended with dev LID 36 % while a
linear head fitted on its frozen encoder with balanced batches reached 67.8 %. Training with
mixed batches and a per-utterance LID loss (``--batching mixed --lid-loss utt-sum``) lifted LID
to 57 % but slowed the RNN-T (dev loss 144.8 against 105.8 at step 2500).

This stage keeps the encoder, prediction networks and joints bit-for-bit (so the recognition
results with the language known do not change) and retrains only the LID head: the model's own
(linear layer + softmax by default, so the model size and the streaming cost do not change), or
with ``--lid-hidden N`` a recurrent head (a GRU of N units before the linear layer,
``RnntConfig.lid_hidden``; it then starts fresh).

* **Data**: ``--utts-per-lang`` training utterances of every language (all of a language that has
  fewer), drawn with ``--seed``, so the languages weigh the same however many hours each has. The
  encoder output of each is computed once (eval mode, whole utterance; the encoder is causal, so
  the outputs are the streaming ones).
* **Loss**: frame-level cross-entropy (paper §4.2), every language's frames weighted to the same
  total, plus ``--weight-decay`` (L2, Adam). Adam, ``--lr``, shuffled mini-batches of
  ``--batch-utts`` whole utterances (a recurrent head needs the sequences), ``--epochs`` passes.
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
from torch.nn.utils.rnn import pad_sequence

from streamkit.io.outputs import write_text
from streamkit.models.checkpoint import ModelError
from streamkit.models.rnnt import RnntConfig, RnntModel, load_model, save_model
from streamkit.train.rnnt_corpus import AsrCorpus, CorpusError, compute_logmel, spread, stacked

__all__ = ["refit_lid", "add_arguments", "run_from_args"]


def _encode(model: torch.nn.Module, logmels: list[torch.Tensor]) -> list[torch.Tensor]:
    out = []
    with torch.inference_mode():
        for lm in logmels:
            out.append(model.encode(stacked(lm)[None])[0].clone())
    return out


def _dev_scores(model: torch.nn.Module, enc: list[torch.Tensor], langs: list[int], n_lang: int) -> dict[str, Any]:
    conf = np.zeros((n_lang, n_lang), np.int64)
    ce_sum, n_frames = 0.0, 0
    with torch.inference_mode():
        for h, lg in zip(enc, langs):
            logp = model.lid_logits(h[None])[0].log_softmax(-1)
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
    batch_utts: int = 32,
    lid_hidden: int | None = None,
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
    from streamkit.core.machine import machine_info

    for name, v in (("--utts-per-lang", utts_per_lang), ("--epochs", epochs), ("--batch-utts", batch_utts), ("--dev-per-lang", dev_per_lang),
                    ("--threads", threads)):  # fmt: skip
        if v < 1:
            raise ValueError(f"{name} must be >= 1, got {v}")
    if lid_hidden is not None and lid_hidden < 0:
        raise ValueError(f"--lid-hidden must be >= 0, got {lid_hidden}")
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
        dev_u += [dev_all[i] for i in spread(didx, dev_per_lang)]
    note(f"train rnnt-lid: encoding {len(train_u)} training and {len(dev_u)} dev utterances with the frozen encoder of {Path(model_path).name}")
    model.eval()
    for p in model.parameters():
        p.requires_grad_(False)
    enc_tr = _encode(model, compute_logmel(train_u, note))
    enc_dv = _encode(model, compute_logmel(dev_u, note))
    dev_langs = [u.lang for u in dev_u]
    y_tr = [u.lang for u in train_u]
    counts = torch.zeros(L)
    for h, lg in zip(enc_tr, y_tr):
        counts[lg] += h.shape[0]
    lang_w = counts.sum() / (L * counts)  # every language's frames weigh the same in total; mean frame weight 1
    new_cfg = cfg if lid_hidden is None or lid_hidden == cfg.lid_hidden else RnntConfig.from_dict({**cfg.to_dict(), "lid_hidden": lid_hidden})
    fresh = reset or new_cfg is not cfg
    torch.manual_seed(seed)
    new = RnntModel(new_cfg)
    keep = {k: v for k, v in model.state_dict().items() if fresh is False or not k.startswith(("lid_head.", "lid_rnn."))}
    missing, unexpected = new.load_state_dict(keep, strict=False)
    assert not unexpected and all(k.startswith(("lid_head.", "lid_rnn.")) for k in missing), (missing, unexpected)
    new.eval()
    head_params = [p for n, p in new.named_parameters() if n.startswith(("lid_head.", "lid_rnn."))]
    for n, p in new.named_parameters():
        p.requires_grad_(n.startswith(("lid_head.", "lid_rnn.")))
    before = _dev_scores(model, enc_dv, dev_langs, L)
    note(f"  frames: {int(counts.sum())} train ({', '.join(f'{lg} {int(c)}' for lg, c in zip(cfg.languages, counts.tolist()))}); "
         f"dev LID before: {100 * before['acc']:.1f} % (frame CE {before['ce']:.3f}); encoding took {time.monotonic() - t0:.0f} s; "
         f"head: {'GRU ' + str(new_cfg.lid_hidden) + ' + linear' if new_cfg.lid_hidden else 'linear'} ({'fresh' if fresh else 'from the model'})")  # fmt: skip
    opt = torch.optim.Adam(head_params, lr=lr, weight_decay=weight_decay)
    rng_b = np.random.default_rng(np.random.SeedSequence([seed, 8]))
    history: list[dict[str, Any]] = []
    best: tuple[float, float] = (-1.0, -np.inf) if fresh else (before["acc"], -before["ce"])
    best_state = {k: v.clone() for k, v in new.state_dict().items() if k.startswith(("lid_head.", "lid_rnn."))}
    best_epoch, best_scores = (None, None) if fresh else (0, before)
    for ep in range(1, epochs + 1):
        perm = rng_b.permutation(len(enc_tr))
        tot, n = 0.0, 0
        for i in range(0, len(perm), batch_utts):
            b = perm[i : i + batch_utts].tolist()
            x = pad_sequence([enc_tr[j] for j in b], batch_first=True)
            lens = torch.tensor([enc_tr[j].shape[0] for j in b])
            yb = torch.tensor([y_tr[j] for j in b])
            mask = torch.arange(x.shape[1])[None, :] < lens[:, None]
            logits = new.lid_logits(x)
            ce = torch.nn.functional.cross_entropy(logits[mask], yb[:, None].expand(-1, x.shape[1])[mask], reduction="none")
            loss = (ce * lang_w[yb[:, None].expand(-1, x.shape[1])[mask]]).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            k = int(mask.sum())
            tot += float(loss.detach()) * k
            n += k
        sc = _dev_scores(new, enc_dv, dev_langs, L)
        history.append({"epoch": ep, "train_ce": round(tot / n, 4), "dev_ce": round(sc["ce"], 4), "dev_lid_acc": round(sc["acc"], 4),
                        "dev_lid_acc_per_lang": {lg: round(float(a), 4) for lg, a in zip(cfg.languages, sc["acc_per_lang"])}})  # fmt: skip
        key = (sc["acc"], -sc["ce"])
        mark = ""
        if key > best:
            best, best_epoch, best_scores, mark = key, ep, sc, " *best*"
            best_state = {k: v.clone() for k, v in new.state_dict().items() if k.startswith(("lid_head.", "lid_rnn."))}
        note(f"  pass {ep}: train CE {tot / n:.4f}, dev CE {sc['ce']:.4f}, dev LID {100 * sc['acc']:.1f} % "
             f"({', '.join(f'{lg} {100 * a:.0f}' for lg, a in zip(cfg.languages, sc['acc_per_lang']))}){mark}")  # fmt: skip
    assert best_scores is not None
    if best_epoch == 0:  # nothing beat the model's own head: keep it (the file is then the source model)
        new, new_cfg = model, cfg
    else:
        new.load_state_dict(best_state, strict=False)
    wall = time.monotonic() - t0
    names = list(cfg.languages)
    refit = {
        "source": Path(model_path).name,
        "best_epoch": best_epoch,
        "dev_lid_acc_before": round(before["acc"], 4),
        "dev_lid_acc": round(best_scores["acc"], 4),
    }
    new_meta = {**meta, "card": out.with_suffix(".json").name, "lid_refit": refit}
    save_model(out, new, meta=new_meta, half=half_weights)
    cmd = (f"streamkit train rnnt-lid --model {Path(model_path).name} --corpus CORPUS --out {out.name} --utts-per-lang {utts_per_lang} "
           f"--epochs {epochs} --lr {lr:g} --weight-decay {weight_decay:g} --batch-utts {batch_utts} --dev-per-lang {dev_per_lang} "
           f"--seed {seed} --threads {threads}" + (f" --lid-hidden {lid_hidden}" if lid_hidden is not None else "") + (" --reset" if reset else "") + (" --half-weights" if half_weights else ""))  # fmt: skip
    card = {
        "model": f"streamkit.models.rnnt ({cfg.variant}): LID head refitted on the frozen encoder of {Path(model_path).name}",
        "weights": out.name,
        "weights_dtype": "float16" if half_weights else "float32",
        "source_weights": Path(model_path).name,
        "source_card": meta.get("card"),
        "source_step": meta.get("step"),
        "config": new_cfg.to_dict(),
        "unchanged": "encoder, prediction networks, joints and input statistics (bit-for-bit); only the LID head is retrained",
        "corpus": {
            "command": corpus.command,
            "languages": names,
            "train_utterances_per_lang": {lg: int((np.array([u.lang for u in train_u]) == i).sum()) for i, lg in enumerate(names)},
            "train_frames_per_lang": {lg: int(c) for lg, c in zip(names, counts.tolist())},
        },  # fmt: skip
        "training": {
            "command": cmd,
            "loss": "frame-level LID cross-entropy, every language's frames weighted to the same total; Adam, L2 weight decay",
            "head": f"GRU {new_cfg.lid_hidden} + linear" if new_cfg.lid_hidden else "linear",
            "init": "fresh" if fresh else "the source model's LID head",
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
    write_text(out.with_suffix(".json"), json.dumps(card, indent=1, ensure_ascii=False) + "\n")
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
    p.add_argument("--batch-utts", type=int, default=32, help="utterances per mini-batch (default 32)")
    p.add_argument("--lid-hidden", type=int, default=None, metavar="N",
                   help="a recurrent head: GRU of N units before the linear layer (0: linear; default: the model's own head)")  # fmt: skip
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
                  batch_utts=ns.batch_utts, lid_hidden=ns.lid_hidden, dev_per_lang=ns.dev_per_lang, reset=ns.reset, seed=ns.seed, threads=ns.threads,
                  half_weights=ns.half_weights, quiet=ns.quiet)  # fmt: skip
    except (CorpusError, ValueError) as exc:
        print(f"streamkit train rnnt-lid: error: {exc}", file=sys.stderr)
        return 2
    return 0
