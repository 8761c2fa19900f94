"""``streamkit train singer-id``: fit the singer embedding's whitening and calibrate its threshold.

On a ``streamkit corpus singers`` corpus (split by recording):

* train split: every recording's motif-occurrence clips and its 3 s windows (hop 1.5 s) become raw
  vectors (:func:`streamkit.models.singer_embed.raw_vector`) labelled with the singer; the
  :class:`~streamkit.models.singer_embed.Whitening` is fitted on them;
* dev split: each known singer is enrolled from its train recordings (one embedding per
  recording); each dev recording scores against its own singer (target) and against the best of
  the others (the score an unknown singer would get): the open-set threshold of each mode is the
  equal-error point of those two sets.

Writes the transform (``.npz``, thresholds in its meta) and a JSON card with the command that
reproduces it.
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from streamkit.models.singer_embed import MODES, WEIGHTS, SingerEmbedder, Whitening, raw_vector, read_audio
from streamkit.models.singer_gallery import Gallery, eer_threshold

WINDOW_ROWS = 300  #: 3 s training windows
WINDOW_HOP = 150


def read_corpus(root: str | Path) -> list[dict[str, str]]:
    p = Path(root) / "recordings.tsv"
    if not p.is_file():
        raise ValueError(f"{root}: not a singers corpus (no recordings.tsv; make one with `streamkit corpus singers`)")
    with p.open(encoding="utf-8", newline="") as f:
        return list(csv.DictReader(f, delimiter="\t"))


def analyse(root: str | Path, rec: dict[str, str]) -> tuple[np.ndarray, np.ndarray]:
    """(16 kHz audio, melody rows) of one recording."""
    from streamkit.dsp.melody import melody_f0

    x = read_audio(Path(root) / "audio" / f"{rec['id']}.wav")
    return x, melody_f0(x)


def train_vectors(x: np.ndarray, rows: np.ndarray) -> list[np.ndarray]:
    from streamkit.dsp.motifs import motifs_of_contour

    _, clips, _ = motifs_of_contour(rows)
    spans = [(int(round(c.start_s * 100)), int(round(c.end_s * 100))) for c in clips]
    spans += [(a, a + WINDOW_ROWS) for a in range(0, max(rows.shape[0] - WINDOW_ROWS, 0) + 1, WINDOW_HOP)]
    return [r for r in (raw_vector(x, rows, a, b) for a, b in spans) if r is not None]


def fit(
    corpus: str | Path, *, shrink: float = 0.1, log: Any = None, data: dict[str, tuple[np.ndarray, np.ndarray]] | None = None
) -> tuple[Whitening, dict[str, Any]]:
    recs = read_corpus(corpus)
    if data is None:
        data = {r["id"]: analyse(corpus, r) for r in recs if r["split"] in ("train", "dev") and r["known"] == "1"}
    raws: list[np.ndarray] = []
    labels: list[str] = []
    for r in recs:
        if r["split"] == "train" and r["id"] in data:
            v = train_vectors(*data[r["id"]])
            raws += v
            labels += [r["singer"]] * len(v)
    if not raws:
        raise ValueError(f"{corpus}: no voiced training clips in the train split")
    t = Whitening.fit(np.array(raws), np.array(labels), shrink=shrink)
    cal = {mode: calibrate(SingerEmbedder(mode, t), recs, data, log=log) for mode in MODES}
    t.meta.update({"thresholds": {m: cal[m]["threshold"] for m in MODES}, "train_clips": len(raws), "train_singers": len(set(labels))})
    return t, cal


def calibrate(emb: Any, recs: list[dict[str, str]], data: dict[str, tuple[np.ndarray, np.ndarray]], *, log: Any = None) -> dict[str, Any]:
    """Enrol each known singer from its train recordings, score the dev recordings against their own
    singer and the best other one: the equal-error threshold of ``emb`` (any embedder)."""
    g = Gallery(emb.mode, emb.dim, 0.0)
    for r in recs:
        if r["split"] == "train" and r["id"] in data:
            e = emb.embed(*data[r["id"]]).vector
            if e is not None:
                g.enroll(r["singer"], r["id"], e)
    tgt, non = [], []
    for r in recs:
        if r["split"] == "dev" and r["id"] in data:
            e = emb.embed(*data[r["id"]]).vector
            if e is None:
                continue
            d = g.score(e)
            tgt.append(d.scores[r["singer"]])
            non.append(max(s for n, s in d.scores.items() if n != r["singer"]))
    thr, eer = eer_threshold(np.array(tgt), np.array(non))
    if log:
        log(f"{emb.mode}: threshold {thr:.3f}, dev EER {eer:.3f} on {len(tgt)} recordings")
    return {"threshold": round(thr, 4), "dev_eer": round(eer, 4), "dev_recordings": len(tgt)}


MODELS = ("embed", "crnn", "blstm")  #: embed: the pooled statistics + whitening (singer_embed); crnn, blstm: singer_nets


def add_arguments(p: argparse.ArgumentParser) -> None:
    from streamkit.models.singer_nets import FEATURES

    p.add_argument("--corpus", required=True, metavar="DIR", help="a `streamkit corpus singers` corpus")
    p.add_argument("--model", default="embed", metavar="|".join(MODELS),
                   help="embed (default): pooled log-mel and pitch statistics with a within-singer whitening; crnn or blstm: the "
                   "singer-ID paper's CRNN or residual BLSTM trained on motif clips")  # fmt: skip
    p.add_argument("--features", default="mel", metavar="|".join(FEATURES), help="front-end of crnn/blstm: mel (40 log-mel, default), "
                   "mfcc (20 cepstra), stft (128 log-power bins); embed uses mel only")  # fmt: skip
    p.add_argument("--out", default=None, metavar="FILE", help="embed: the transform (.npz, default: the shipped "
                   "streamkit/models/weights/singer_embed.npz); crnn/blstm: the weights (.pt, default singer_MODEL_FEATURES.pt); "
                   "the card goes to <stem>.json")  # fmt: skip
    p.add_argument("--shrink", type=float, default=0.1, help="embed: shrinkage of the within-singer scatter toward the identity (0..1, default 0.1)")
    p.add_argument("--epochs", type=int, default=12, help="crnn/blstm: training epochs (default 12; the best dev epoch is kept)")
    p.add_argument("--seed", type=int, default=0, help="crnn/blstm: random seed (default 0)")
    p.add_argument("--segments", action="store_true", help="crnn/blstm: learn from the train recordings' 1 s voiced windows too, "
                   "not only from their motif clips (the paper's motifs+segment set)")  # fmt: skip


def check_options(ns: argparse.Namespace) -> Path:
    """Validate the options; the output path. ValueError (one line) on a bad one."""
    from streamkit.models.singer_nets import FEATURES

    if ns.model not in MODELS:
        raise ValueError(f"--model must be one of {', '.join(MODELS)}, got {ns.model!r}")
    if ns.features not in FEATURES:
        raise ValueError(f"--features must be one of {', '.join(FEATURES)}, got {ns.features!r}")
    if ns.model == "embed" and ns.features != "mel":
        raise ValueError(f"--model embed uses log-mel statistics only; --features {ns.features} needs --model crnn or blstm")
    if not 0.0 <= ns.shrink <= 1.0:
        raise ValueError(f"--shrink must be in 0..1, got {ns.shrink}")
    if ns.model == "embed" and ns.segments:
        raise ValueError("--segments is for --model crnn or blstm (embed always uses motif clips and 3 s windows)")
    if not 1 <= ns.epochs <= 1000:
        raise ValueError(f"--epochs must be in 1..1000, got {ns.epochs}")
    out = Path(ns.out) if ns.out else WEIGHTS if ns.model == "embed" else Path(f"singer_{ns.model}_{ns.features}.pt")
    want = ".npz" if ns.model == "embed" else ".pt"
    if out.suffix != want:
        raise ValueError(f"--out for --model {ns.model} must end in {want}, got {out}")
    if not out.parent.is_dir():
        raise ValueError(f"--out {out}: no such directory {out.parent}")
    return out


def run_from_args(ns: argparse.Namespace) -> int:
    out = check_options(ns)
    t0 = time.perf_counter()
    man = Path(ns.corpus) / "manifest.json"
    corpus_cmd = json.loads(man.read_text(encoding="utf-8")).get("command") if man.is_file() else None
    if ns.model == "embed":
        t, cal = fit(ns.corpus, shrink=ns.shrink, log=lambda m: print(m, file=sys.stderr))
        t.save(out)
        card = {
            "model": "singer embedding: pooled log-mel + pitch-habit statistics, within-singer whitening",
            "command": f"streamkit train singer-id --corpus {ns.corpus} --out {out.name} --shrink {ns.shrink}",
            "raw_dim": int(t.mu.shape[0]),
            "dim": t.dim,
            "train": t.meta,
            "calibration": cal,
        }
    else:
        from streamkit.train.singer_nets import run_net

        card = run_net(ns, out)
    card = {**card, "corpus_command": corpus_cmd, "seconds": round(time.perf_counter() - t0, 1)}
    out.with_suffix(".json").write_text(json.dumps(card, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {out} and {out.with_suffix('.json').name} in {card['seconds']} s")
    return 0
