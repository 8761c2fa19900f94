"""``streamkit train singer-id --model crnn|blstm --features mel|mfcc|stft``: train a singer net on motif clips.

On a ``streamkit corpus singers`` corpus (split by recording):

* every known-singer recording of the train and dev splits is analysed (pYIN melody); its own
  melody is mined for motifs (:func:`streamkit.dsp.motifs.motifs_of_contour`) and every motif
  occurrence clip becomes one training example of its singer (features of
  :func:`streamkit.models.singer_nets.clip_features`);
* the net (:class:`~streamkit.models.singer_nets.SingerNet`) learns to classify the train split's
  clips (cross-entropy, Adam, one thread); after each epoch the dev clips are classified and the
  best epoch's weights are kept;
* the open-set threshold is calibrated as for the pooled embedding
  (:func:`streamkit.train.singer_id.calibrate`): enrol from train, score dev, equal-error point.

Writes the weights (``.pt``, float16) and a JSON card with the command that reproduces them.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from streamkit.models.singer_nets import MIN_FRAMES, NetConfig, NetEmbedder, SingerNet, clip_features, n_params, pad_batch

Data = dict[str, tuple[np.ndarray, np.ndarray]]


def motif_clip_audio(x: np.ndarray, rows: np.ndarray) -> list[np.ndarray]:
    """The audio of every motif occurrence clip of a recording's own melody."""
    from streamkit.dsp.motifs import motifs_of_contour

    _, clips, _ = motifs_of_contour(rows)
    return [x[int(round(c.start_s * 16000)) : int(round(c.end_s * 16000))] for c in clips]


def segment_audio(x: np.ndarray, rows: np.ndarray) -> list[np.ndarray]:
    """Every 1 s window (hop 1 s) of a recording with at least 0.5 s voiced."""
    return [x[a * 160 : (a + 100) * 160] for a in range(0, rows.shape[0] - 99, 100) if np.count_nonzero(rows[a : a + 100, 1] > 0.5) >= 50]


def clip_set(recs: list[dict[str, str]], data: Data, split: str, kind: str, classes: list[str],
             segments: bool = False) -> tuple[list[np.ndarray], np.ndarray]:  # fmt: skip
    feats, labels = [], []
    for r in recs:
        if r["split"] == split and r["id"] in data and r["singer"] in classes:
            for a in motif_clip_audio(*data[r["id"]]) + (segment_audio(*data[r["id"]]) if segments else []):
                f = clip_features(a, kind)
                if f.shape[0] >= MIN_FRAMES:
                    feats.append(f)
                    labels.append(classes.index(r["singer"]))
    return feats, np.array(labels, dtype=np.int64)


def _batches(lengths: np.ndarray, batch: int, rng: np.random.Generator) -> list[np.ndarray]:
    """Batches of similar lengths (little padding), in random order."""
    order = np.argsort(lengths + rng.uniform(0, 20, len(lengths)))
    out = [order[i : i + batch] for i in range(0, len(order), batch)]
    rng.shuffle(out)  # type: ignore[arg-type]
    return out


def accuracy(net: SingerNet, feats: list[np.ndarray], labels: np.ndarray) -> float:
    net.eval()
    right = 0
    with torch.no_grad():
        for i in range(0, len(feats), 64):
            x, n = pad_batch(feats[i : i + 64])
            right += int((net(x, n).argmax(dim=1).numpy() == labels[i : i + 64]).sum())
    return right / max(len(feats), 1)


def train_net(cfg: NetConfig, train: tuple[list[np.ndarray], np.ndarray], dev: tuple[list[np.ndarray], np.ndarray] | None = None, *,
              epochs: int = 12, batch: int = 32, lr: float = 3e-3, seed: int = 0,
              log: Callable[[str], None] | None = None) -> tuple[NetEmbedder, list[dict[str, float]]]:  # fmt: skip
    """Train on (features, labels); returns the embedder (best dev epoch, or the last without dev) and the history."""
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    feats, labels = train
    if len(feats) < 2 or len(set(labels.tolist())) < 2:
        raise ValueError(f"a singer net needs clips of >= 2 singers, got {len(feats)} clips of {len(set(labels.tolist()))} singer(s)")
    allf = np.concatenate(feats)
    mu, sd = allf.mean(axis=0), allf.std(axis=0) + 1e-5
    norm = [(f - mu) / sd for f in feats]
    dnorm = [(f - mu) / sd for f in dev[0]] if dev else []
    net = SingerNet(cfg)
    opt = torch.optim.Adam(net.parameters(), lr=lr, weight_decay=1e-4)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=max(epochs, 1))
    loss_fn = nn.CrossEntropyLoss()
    lengths = np.array([f.shape[0] for f in norm])
    hist: list[dict[str, float]] = []
    best: tuple[float, dict[str, torch.Tensor]] | None = None
    for ep in range(epochs):
        net.train()
        tot, n = 0.0, 0
        for idx in _batches(lengths, batch, rng):
            x, ln = pad_batch([norm[i] for i in idx])
            loss = loss_fn(net(x, ln), torch.from_numpy(labels[idx]))
            opt.zero_grad()
            loss.backward()
            opt.step()
            tot += loss.item() * len(idx)
            n += len(idx)
        sched.step()
        h = {"epoch": ep + 1, "loss": round(tot / n, 4)}
        if dev and dnorm:
            h["dev_clip_accuracy"] = round(accuracy(net, dnorm, dev[1]), 4)
            if best is None or h["dev_clip_accuracy"] > best[0]:
                best = (h["dev_clip_accuracy"], {k: v.detach().clone() for k, v in net.state_dict().items()})
        hist.append(h)
        if log:
            log(" ".join(f"{k} {v}" for k, v in h.items()))
    if best is not None:
        net.load_state_dict(best[1])
    emb = NetEmbedder(net, mu, sd, {"params": n_params(net)})
    emb.fit_post(norm, labels)
    return emb, hist


def fit_net(corpus: str | Path, cfg_kw: dict[str, Any], *, epochs: int = 12, seed: int = 0, data: Data | None = None,
            segments: bool = False, log: Callable[[str], None] | None = None) -> tuple[NetEmbedder, dict[str, Any]]:  # fmt: skip
    """Train a net on a corpus and calibrate its threshold; (embedder, card fields). ``segments``: the
    train split's 1 s voiced windows are training examples too (the paper's "motifs + segments")."""
    from streamkit.train.singer_id import analyse, calibrate, read_corpus

    torch.set_num_threads(1)
    recs = read_corpus(corpus)
    if data is None:
        data = {r["id"]: analyse(corpus, r) for r in recs if r["split"] in ("train", "dev") and r["known"] == "1"}
    classes = sorted({r["singer"] for r in recs if r["split"] == "train" and r["known"] == "1"})
    cfg = NetConfig(n_classes=len(classes), **cfg_kw)
    tr = clip_set(recs, data, "train", cfg.features, classes, segments)
    dv = clip_set(recs, data, "dev", cfg.features, classes)
    if log:
        log(f"{cfg.model}/{cfg.features}: {len(tr[0])} train clips, {len(dv[0])} dev clips, {len(classes)} singers")
    emb, hist = train_net(cfg, tr, dv, epochs=epochs, seed=seed, log=log)
    cal = {"motif": calibrate(emb, recs, data, log=log)}
    emb.meta.update({"thresholds": {"motif": cal["motif"]["threshold"]}, "singers": classes, "train_clips": len(tr[0]),
                     "dev_clips": len(dv[0]), "segments": segments, "history": hist})  # fmt: skip
    return emb, {"calibration": cal, "history": hist, "params": emb.meta["params"]}


def run_net(ns: Any, out: Path) -> dict[str, Any]:
    """The ``--model crnn|blstm`` path of ``train singer-id``: returns the card."""
    import sys

    emb, info = fit_net(ns.corpus, {"model": ns.model, "features": ns.features}, epochs=ns.epochs, seed=ns.seed, segments=ns.segments,
                        log=lambda m: print(m, file=sys.stderr))  # fmt: skip
    emb.save(out)
    return {
        "model": f"singer net: {ns.model} on {ns.features} motif clips{' and 1 s segments' if ns.segments else ''} (streamkit.models.singer_nets)",
        "command": f"streamkit train singer-id --corpus {ns.corpus} --model {ns.model} --features {ns.features} --epochs {ns.epochs} "
        f"--seed {ns.seed}{' --segments' if ns.segments else ''} --out {out.name}",
        "config": emb.net.cfg.to_dict(),
        "dim": emb.dim,
        "train": {k: v for k, v in emb.meta.items() if k != "history"},
        **info,
    }
