"""Training recipe of the CNN-GRU SAD: ``streamkit train sad-dnn --corpus DIR --out PATH``.

The HF paper's recipe (the authors' released training code), adapted to CPU:

* Data: the ``train`` split of a ``streamkit corpus hf`` corpus. Epoch 0 uses the received audio
  in ``audio/``; every later epoch re-simulates each file from its clean track (``clean/``) with
  fresh ``ChannelParams.random(rng, severity)`` (``rng`` from ``(seed, epoch, file)``), the same
  call :mod:`streamkit.data.hf_corpus` makes, so the clean labels stay aligned (the simulator's
  output is time-aligned with its input), then quantises to PCM_16 as the corpus does; a file's
  non-speech HF signals (``distractors/<id>.wav``) are added to the clean track before the channel.
* ``--real DIR`` adds the train scenes of a ``streamkit corpus real`` corpus (real speech and
  real non-speech sounds from the training packages; :mod:`streamkit.train.sad_dnn_real`) to the
  epoch data and its dev scenes to the dev loss; ``--init WEIGHTS`` starts from a weight file of
  the same configuration (fine-tuning) instead of a random initialisation.
* Features: :func:`streamkit.models.sad_dnn.features` over the whole file (causal normalisation),
  then non-overlapping 400-frame (4 s) chunks, remainder dropped; chunks of all files shuffled
  per epoch; batches of 24.
* Targets: frame ``t`` is speech iff any sample of ``[80 t, 80 t + 200)`` is in the file's label
  intervals (``labels/<id>.json``).
* Loss: binary cross-entropy on the frame score (max over the 10 units, clamped sigmoid),
  **summed** over frames and batch as in the released code; the log shows it per frame (mean).
  Adam, lr 1e-3, betas (0.9, 0.999), no weight decay, no clipping.
* Validation: mean BCE per frame over the dev split (whole files, up to 40) every
  ``--eval-every`` steps and at the end of each epoch; the best state by dev loss is kept.
* A checkpoint (model, optimiser, position in the epoch, best state, history, wall time) is written
  at every validation; ``--resume`` continues from it, bit-for-bit in the data order.
* ``--minutes`` bounds the training wall time (summed over resumed runs); then the best state is
  written as the weight file with its dev-EER threshold, and a model card ``<out stem>.json``
  with dev/eval metrics (:mod:`streamkit.eval.sad`, 0.5 s collar, dev-EER threshold applied to eval).
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import soundfile as sf
import torch
import torch.nn.functional as F

from streamkit.eval.bench import portable_paths
from streamkit.io.outputs import atomic_output, write_text
from streamkit.models.sad_dnn import (
    HOP,
    RATE,
    WIN,
    SadDnn,
    SadDnnConfig,
    dnn_raw_scores,
    features,
    fold,
    frame_targets,
    intervals_to_mask,
    n_params,
    save_weights,
)
from streamkit.train.progress import TrainProgress
from streamkit.train.sad_dnn_real import GAIN_DB

CHUNK = 400  #: frames per training chunk (4 s)


def _read(path: Path) -> np.ndarray:
    x, sr = sf.read(str(path), dtype="float32", always_2d=True)
    if sr != RATE:
        raise ValueError(f"{path}: {sr} Hz, expected {RATE}")
    return x.mean(axis=1)


def _to_pcm16(x: np.ndarray) -> np.ndarray:
    return (np.clip(np.round(np.asarray(x, np.float64) * 32767), -32768, 32767) / 32767).astype(np.float32)


class Corpus:
    """Files of one split: ids, audio/clean paths, label intervals."""

    def __init__(self, root: Path, split: str, limit: int | None = None) -> None:
        d = root / split
        lab = sorted((d / "labels").glob("*.json"))
        if not lab:
            raise FileNotFoundError(f"{root}: no {split}/labels/*.json (is it a corpus from `streamkit corpus hf`?)")
        self.items: list[dict[str, Any]] = []
        for p in lab[:limit]:
            j = json.loads(p.read_text(encoding="utf-8"))
            fid = j["id"]
            self.items.append({"id": fid, "audio": d / "audio" / f"{fid}.wav", "clean": d / "clean" / f"{fid}.wav",
                               "distractors": d / "distractors" / f"{fid}.wav", "intervals": j["intervals"], "n": int(j["n_samples"]),
                               "kind": "hf"})  # fmt: skip


def _file_signal(item: dict[str, Any], epoch: int, index: int, seed: int, severity: float, real_hf_prob: float = 0.5) -> np.ndarray:
    if item.get("kind") == "real":
        from streamkit.train.sad_dnn_real import scene_signal

        return scene_signal(item, epoch, index, seed, severity, real_hf_prob)
    if epoch == 0 or not item["clean"].is_file():
        return _read(item["audio"])
    from streamkit.data.hf_channel import ChannelParams
    from streamkit.data.hf_distractors import simulate_mix

    rng = np.random.default_rng(np.random.SeedSequence([seed, 2, epoch, index]))
    clean = _read(item["clean"])
    dist = _read(item["distractors"]) if item.get("distractors") and item["distractors"].is_file() else None
    return _to_pcm16(simulate_mix(clean, dist, ChannelParams.random(rng, severity)).received)


def epoch_data(corpus: Corpus, cfg: SadDnnConfig, epoch: int, seed: int, severity: float, real_hf_prob: float = 0.5) -> tuple[np.ndarray, np.ndarray]:
    """All 4 s chunks of one epoch, shuffled: features (N, 400, 129) float32, targets (N, 400)."""
    feats, tgts = [], []
    for i, it in enumerate(corpus.items):
        x = _file_signal(it, epoch, i, seed, severity, real_hf_prob)
        f = features(x, cfg)
        t = frame_targets(intervals_to_mask(it["intervals"], x.shape[0]), f.shape[0])
        k = f.shape[0] // CHUNK
        if k:
            feats.append(f[: k * CHUNK].reshape(k, CHUNK, -1))
            tgts.append(t[: k * CHUNK].reshape(k, CHUNK))
    if not feats:
        raise ValueError("no training chunk: every train file is shorter than 4 s")
    X = np.concatenate(feats)
    Y = np.concatenate(tgts)
    order = np.random.default_rng(np.random.SeedSequence([seed, 1, epoch])).permutation(X.shape[0])
    return X[order], Y[order]


def dev_data(corpus: Corpus, cfg: SadDnnConfig) -> list[tuple[torch.Tensor, torch.Tensor]]:
    from streamkit.train.sad_dnn_real import read_8k

    out = []
    for it in corpus.items:
        x = read_8k(it["audio"]) if it.get("kind") == "real" else _read(it["audio"])
        f = features(x, cfg)
        t = frame_targets(intervals_to_mask(it["intervals"], x.shape[0]), f.shape[0])
        out.append((torch.from_numpy(f)[None], torch.from_numpy(t)[None]))
    return out


def dev_loss(model: SadDnn, dev: list[tuple[torch.Tensor, torch.Tensor]]) -> float:
    """Mean BCE per frame over the dev files (whole files, eval mode)."""
    was = model.training
    model.eval()
    tot, n = 0.0, 0
    with torch.inference_mode():
        for f, t in dev:
            p = model(f)
            tot += float(F.binary_cross_entropy(p, t, reduction="sum"))
            n += t.numel()
    model.train(was)
    return tot / max(n, 1)


class _Progress(TrainProgress):
    """The shared progress bar; plain lines at most every 30 s (or when forced)."""

    def __init__(self, total_s: float, quiet: bool) -> None:
        super().__init__("train sad-dnn", total_s, quiet=quiet)
        self.last = 0.0

    def update(self, elapsed: float, info: str, force: bool = False) -> None:  # type: ignore[override]
        line = None
        if self.bar is None and (force or time.monotonic() - self.last > 30):
            self.last = time.monotonic()
            line = f"[{elapsed / 60:6.1f} min] {info}"
        super().update(elapsed, info, line)


def _save_ckpt(path: Path, state: dict[str, Any]) -> None:
    with atomic_output(path, "wb") as f:
        torch.save(state, f)


def train(
    corpus_dir: str | Path,
    out: str | Path,
    *,
    cfg: SadDnnConfig | None = None,
    minutes: float = 50.0,
    seed: int = 0,
    resume: bool = False,
    ckpt: str | Path | None = None,
    batch: int = 24,
    lr: float = 1e-3,
    threads: int = 2,
    eval_every: int = 100,
    max_steps: int | None = None,
    max_epochs: int | None = None,
    train_limit: int | None = None,
    dev_limit: int = 40,
    finalize: bool = True,
    quiet: bool = False,
    real: str | Path | None = None,
    real_hf_prob: float = 0.5,
    init: str | Path | None = None,
    on_step: Callable[[int, float], None] | None = None,
) -> dict[str, Any]:
    """Train (or continue training) and, with ``finalize``, write the weights and the model card.

    Returns the checkpoint state's summary (and the card when finalized).
    """
    root = Path(corpus_dir)
    out = Path(out)
    ckpt_p = Path(ckpt) if ckpt is not None else out.with_name(out.stem + ".ckpt")
    torch.set_num_threads(int(threads))
    manifest = json.loads((root / "manifest.json").read_text(encoding="utf-8")) if (root / "manifest.json").is_file() else {}
    severity = float(manifest.get("severity", 0.5))
    cfg = cfg or SadDnnConfig()
    train_c = Corpus(root, "train", train_limit)
    dev_c = Corpus(root, "dev", dev_limit)
    if real is not None:
        from streamkit.train.sad_dnn_real import scene_items

        train_c.items += scene_items(real, "train", train_limit)
        dev_c.items += scene_items(real, "dev", dev_limit)
    dev = dev_data(dev_c, cfg)

    torch.manual_seed(seed)
    np.random.seed(seed)
    model = SadDnn(cfg)
    if init is not None and not (resume and ckpt_p.is_file()):
        from streamkit.models.sad_dnn import load_weights

        model.load_state_dict(load_weights(init, expect=cfg).model.state_dict())
    opt = torch.optim.Adam(model.parameters(), lr=lr, betas=(0.9, 0.999), eps=1e-8)
    st: dict[str, Any] = {"step": 0, "epoch": 0, "batch_in_epoch": 0, "elapsed_s": 0.0, "best_dev": math.inf, "best_step": 0,
                          "best_state": None, "history": [], "runs": 0,
                          "real": str(real) if real is not None else None, "real_hf_prob": real_hf_prob, "init": str(init) if init is not None else None}  # fmt: skip
    if resume and ckpt_p.is_file():
        ck = torch.load(ckpt_p, map_location="cpu", weights_only=False)
        if ck["config"] != cfg.to_dict() or ck["seed"] != seed or ck["batch"] != batch:
            raise ValueError(f"{ckpt_p}: checkpoint of another run (config/seed/batch differ); drop --resume or use another --ckpt")
        model.load_state_dict(ck["model"])
        opt.load_state_dict(ck["opt"])
        st = ck["state"]
    elif resume:
        print(f"no checkpoint at {ckpt_p}; starting from scratch", flush=True)
    st["runs"] += 1

    budget = minutes * 60.0
    prog = _Progress(budget, quiet)
    prog.note(f"train sad-dnn: {len(train_c.items)} train files, {len(dev_c.items)} dev files, config {cfg.to_dict()}, "
              f"{n_params(model)} parameters, {threads} threads, budget {minutes:g} min, checkpoint {ckpt_p}")  # fmt: skip
    t_run = time.monotonic()
    base = st["elapsed_s"]

    def elapsed() -> float:
        return base + time.monotonic() - t_run

    def validate_and_save() -> None:
        dl = dev_loss(model, dev)
        st["history"].append({"step": st["step"], "epoch": st["epoch"], "dev_loss": dl, "elapsed_s": round(elapsed(), 1)})
        if dl < st["best_dev"]:
            st["best_dev"] = dl
            st["best_step"] = st["step"]
            st["best_state"] = {k: v.detach().clone() for k, v in model.state_dict().items()}
        st["elapsed_s"] = elapsed()
        _save_ckpt(ckpt_p, {"model": model.state_dict(), "opt": opt.state_dict(), "state": st, "config": cfg.to_dict(), "seed": seed,
                            "batch": batch, "lr": lr, "corpus": str(root)})  # fmt: skip
        prog.note(
            f"step {st['step']} epoch {st['epoch']}: dev loss {dl:.4f} (best {st['best_dev']:.4f} @ {st['best_step']}), {elapsed() / 60:.1f} min"
        )

    model.train()
    loss_ema = None
    # a resumed run whose budget (or step limit) is already spent trains no further
    stop = elapsed() >= budget or (max_steps is not None and st["step"] >= max_steps)
    while not stop:
        if max_epochs is not None and st["epoch"] >= max_epochs:
            break
        X, Y = epoch_data(train_c, cfg, st["epoch"], seed, severity, real_hf_prob)
        nb = -(-X.shape[0] // batch)
        while st["batch_in_epoch"] < nb:
            b = st["batch_in_epoch"]
            xb = torch.from_numpy(X[b * batch : (b + 1) * batch])
            yb = torch.from_numpy(Y[b * batch : (b + 1) * batch])
            p = model(xb)
            loss = F.binary_cross_entropy(p, yb, reduction="sum")
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            st["step"] += 1
            st["batch_in_epoch"] += 1
            per_frame = loss.item() / yb.numel()
            loss_ema = per_frame if loss_ema is None else 0.95 * loss_ema + 0.05 * per_frame
            if on_step is not None:
                on_step(st["step"], per_frame)
            prog.update(min(elapsed(), budget), f"epoch {st['epoch']} step {st['step']} loss {loss_ema:.4f} best dev {st['best_dev']:.4f}")
            if st["step"] % eval_every == 0:
                validate_and_save()
            if elapsed() >= budget or (max_steps is not None and st["step"] >= max_steps):
                stop = True
                break
        if not stop:
            st["epoch"] += 1
            st["batch_in_epoch"] = 0
            if st["step"] % eval_every:
                validate_and_save()
    if not st["history"] or st["history"][-1]["step"] != st["step"]:
        validate_and_save()
    prog.close()
    summary = {k: v for k, v in st.items() if k != "best_state"}
    if finalize:
        summary["card"] = finalize_model(ckpt_p, out, corpus_dir=root, threads=threads, quiet=quiet)
    return summary


def evaluate_items(weights: Any, items: list[dict[str, Any]], collar: float = 0.5) -> tuple[Any, float]:
    """ROC curve (sample level, :func:`streamkit.eval.sad.sweep`) of the voted DNN scores on corpus items, and the RT factor."""
    from streamkit.eval.sad import DEFAULT_THRESHOLDS, frames_to_samples, majority_filter, sweep
    from streamkit.train.sad_dnn_real import read_8k

    curve = None
    secs, n_tot = 0.0, 0
    dnn_raw_scores(np.random.default_rng(0).standard_normal(RATE).astype(np.float32) * 0.01, weights=weights)  # untimed warm-up (numba)
    for it in items:
        x = read_8k(it["audio"]) if it.get("kind") == "real" else _read(it["audio"])
        ref = intervals_to_mask(it["intervals"], len(x))
        t0 = time.perf_counter()
        s, hop, win = dnn_raw_scores(x, weights=weights, threads=1)
        secs += time.perf_counter() - t0
        n_tot += len(x)
        hyp = frames_to_samples(majority_filter(s, 25, 12), hop, win, len(x))
        c = sweep({it["id"]: ref}, {it["id"]: hyp}, DEFAULT_THRESHOLDS, collar, rate=RATE)
        curve = c if curve is None else curve + c
    return curve, secs / (n_tot / RATE)


def evaluate_split(weights: Any, root: Path, split: str, collar: float = 0.5) -> tuple[Any, float]:
    """ROC curve of the voted DNN scores on a split of a ``corpus hf`` corpus, and the RT factor."""
    return evaluate_items(weights, Corpus(root, split).items, collar)


def finalize_model(ckpt: str | Path, out: str | Path, *, corpus_dir: str | Path, threads: int = 2, quiet: bool = False) -> dict[str, Any]:
    """Write the best state of a checkpoint as the weight file (with its dev-EER threshold) and the model card."""
    from streamkit.eval.sad import eer_point
    from streamkit.models.sad_dnn import LoadedSadDnn

    ck = torch.load(Path(ckpt), map_location="cpu", weights_only=False)
    cfg = SadDnnConfig.from_dict(ck["config"])
    st = ck["state"]
    model = SadDnn(cfg)
    model.load_state_dict(st["best_state"] if st.get("best_state") is not None else ck["model"])
    model.eval()
    loaded = LoadedSadDnn(cfg, model, fold(model))
    root = Path(corpus_dir)
    dev_curve, rt_dev = evaluate_split(loaded, root, "dev")
    ev_curve, rt_ev = evaluate_split(loaded, root, "eval")
    real_curve = None
    if st.get("real"):  # the threshold is chosen on both dev sets: the HF split and the real scenes
        from streamkit.train.sad_dnn_real import scene_items

        real_curve, _ = evaluate_items(loaded, scene_items(st["real"], "dev"))
    op = eer_point(dev_curve if real_curve is None else dev_curve + real_curve)
    thr = op.threshold
    ev_counts = ev_curve.counts(ev_curve.index_of(thr))
    hf_dev = dev_curve.counts(dev_curve.index_of(thr))
    real_dev = None
    if real_curve is not None:
        real_dev = {"at": "dev-EER threshold", **real_curve.counts(real_curve.index_of(thr)).metrics()}
    manifest = json.loads((root / "manifest.json").read_text(encoding="utf-8")) if (root / "manifest.json").is_file() else {}
    card = {
        "model": "streamkit.models.sad_dnn (CNN-GRU SAD, HF paper §3.2)",
        "config": cfg.to_dict(),
        "parameters": n_params(model),
        "size_note": "smaller than the paper (channels 16/32/64, GRU 514): channels 4/8/16, GRU 2x64, chosen so that CPU training fits "
        "~50 min on 2 cores and single-thread streaming in 100 ms chunks stays under RT factor 0.003",
        "frames": {"win": WIN, "hop": HOP, "n_fft": 256, "rate": RATE},
        "normalisation": f"causal recursive per-bin mean/variance, memory {cfg.norm_memory_s:g} s (a = {cfg.norm_alpha:.6f}), cumulative warm-up, "
        "over the whole file in training and inference",
        "threshold": thr,
        "threshold_rule": "dev-EER (paper protocol) on the voted scores (25-frame >= 12 majority), 0.5 s collar, fgnt mode"
        + (", over the HF dev split and the real dev scenes pooled" if real_curve is not None else ""),
        "latency": {
            "frames_lookahead": cfg.lookahead_frames + 12,
            "samples": WIN - WIN // 2 + (cfg.lookahead_frames + 12) * HOP,
            "ms": (WIN - WIN // 2 + (cfg.lookahead_frames + 12) * HOP) / RATE * 1000,
            "note": "half window + 6 conv frames + 12 vote frames after a frame's centre",
        },  # fmt: skip
        "metrics": {
            "dev": {"at": "dev-EER threshold", **hf_dev.metrics()},
            "eval": {"at": "dev-EER threshold", **ev_counts.metrics()},
            **({"real_dev": real_dev} if real_dev is not None else {}),
            "collar_s": 0.5,
            "rt_factor_offline_1thread": round((rt_dev + rt_ev) / 2, 5),
        },
        "training": {
            "corpus_command": manifest.get("command"),
            "corpus_seed": manifest.get("seed"),
            "seed": ck["seed"],
            "steps": st["step"],
            "epochs_completed": st["epoch"],
            "best_step": st["best_step"],
            "best_dev_loss_per_frame": st["best_dev"],
            "wall_time_s": round(st["elapsed_s"], 1),
            "runs": st.get("runs", 1),
            "threads": threads,
            "batch": ck["batch"],
            "lr": ck["lr"],
            "loss": "BCE on the frame score (max over 10 units, clamped sigmoid), summed over frames and batch (dev loss: mean per frame)",
            "optimiser": "Adam (0.9, 0.999), eps 1e-8, no weight decay",
            "augmentation": "epoch 0: corpus audio; later epochs: each train file re-simulated from clean/ with fresh ChannelParams.random"
            + (f"; real scenes: random gain {GAIN_DB} dB and, with probability {st.get('real_hf_prob')}, the HF channel" if st.get("real") else ""),
            "real_corpus": portable_paths(st.get("real")),
            "real_corpus_command": portable_paths(_real_manifest(st.get("real")).get("command")),
            "real_packages": _train_packages(st.get("real")),
            "init": portable_paths(st.get("init")),
            "history": st["history"],
        },
        "torch": torch.__version__,
        "machine": platform.platform(),
        "created": time.strftime("%Y-%m-%d %H:%M:%S"),
    }
    out = Path(out)
    save_weights(out, model, threshold=thr, meta={"card": out.with_suffix(".json").name, "steps": st["step"], "seed": ck["seed"]})
    write_text(out.with_suffix(".json"), json.dumps(card, indent=1, default=float) + "\n")
    if not quiet:
        m = card["metrics"]
        print(f"wrote {out} and {out.with_suffix('.json')}: threshold {thr:.3f}, dev F1 {m['dev']['f1'] * 100:.2f} %, eval F1 {m['eval']['f1'] * 100:.2f} %",
              flush=True)  # fmt: skip
    return card


def _real_manifest(real: str | None) -> dict[str, Any]:
    """The manifest of a ``corpus real`` root ({} when there is none)."""
    m = Path(real) / "manifest.json" if real else None
    return json.loads(m.read_text(encoding="utf-8")) if m is not None and m.is_file() else {}


def _train_packages(real: str | None) -> list[dict[str, Any]] | None:
    """The training packages (name, version, licence) of a ``corpus real`` root, from its manifest."""
    pk = _real_manifest(real).get("packages")
    if not real or pk is None:
        return None
    return [{k: p.get(k) for k in ("package", "version", "licence")} for p in pk if p.get("role") == "train"]


def add_train_arguments(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
    p.add_argument("--corpus", required=True, help="a corpus from `streamkit corpus hf` (train/dev/eval splits)")
    p.add_argument("--out", required=True, help="weight file to write (the model card goes next to it as .json)")
    p.add_argument("--minutes", type=float, default=50.0, help="training wall-time budget in minutes, over resumed runs (default 50)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--resume", action="store_true", help="continue from the checkpoint")
    p.add_argument("--ckpt", default=None, help="checkpoint path (default: <out stem>.ckpt next to --out)")
    p.add_argument("--threads", type=int, default=2, help="torch threads (default 2)")
    p.add_argument("--batch", type=int, default=24)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--eval-every", type=int, default=100, help="dev loss + checkpoint every N steps (and every epoch)")
    p.add_argument("--max-steps", type=int, default=None)
    p.add_argument("--channels", default="4,8,16", help="channels of the 3 CNN blocks (paper: 16,32,64)")
    p.add_argument("--gru", type=int, default=64, help="GRU hidden size (paper: 514)")
    p.add_argument("--norm-memory", type=float, default=16.0, help="memory of the causal normaliser in seconds (default 16, chosen on dev)")
    p.add_argument(
        "--real",
        default=None,
        metavar="DIR",
        help="also train on the train scenes of a `streamkit corpus real` corpus (dev scenes join the dev loss)",
    )
    p.add_argument("--real-hf-prob", type=float, default=0.5, help="fraction of real scenes sent through the HF channel per epoch (default 0.5)")
    p.add_argument("--init", default=None, metavar="WEIGHTS", help="start from these weights (fine-tuning) instead of a random init")
    p.add_argument("--finalize-only", action="store_true", help="only write weights + card from the checkpoint's best state")
    p.add_argument("--quiet", action="store_true")
    return p


def run_from_args(ns: argparse.Namespace) -> int:
    try:
        ch = tuple(int(c) for c in str(ns.channels).split(","))
        cfg = SadDnnConfig(channels=ch, gru_hidden=ns.gru, norm_memory_s=ns.norm_memory)  # type: ignore[arg-type]
    except (ValueError, TypeError) as exc:
        print(f"streamkit train sad-dnn: error: {exc}", file=sys.stderr)
        return 2
    out = Path(ns.out)
    ckpt = Path(ns.ckpt) if ns.ckpt else out.with_name(out.stem + ".ckpt")
    if ns.finalize_only:
        if not ckpt.is_file():
            print(f"streamkit train sad-dnn: error: no checkpoint {ckpt}", file=sys.stderr)
            return 2
        torch.set_num_threads(ns.threads)
        finalize_model(ckpt, out, corpus_dir=ns.corpus, threads=ns.threads, quiet=ns.quiet)
        return 0
    train(ns.corpus, out, cfg=cfg, minutes=ns.minutes, seed=ns.seed, resume=ns.resume, ckpt=ckpt, batch=ns.batch, lr=ns.lr, threads=ns.threads,
          eval_every=ns.eval_every, max_steps=ns.max_steps, quiet=ns.quiet, real=ns.real, real_hf_prob=ns.real_hf_prob, init=ns.init)  # fmt: skip
    return 0
