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


def fit(corpus: str | Path, *, shrink: float = 0.1, log: Any = None) -> tuple[Whitening, dict[str, Any]]:
    recs = read_corpus(corpus)
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
    cal: dict[str, Any] = {}
    for mode in MODES:
        emb = SingerEmbedder(mode, t)
        g = Gallery(mode, t.dim, 0.0)
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
        cal[mode] = {"threshold": round(thr, 4), "dev_eer": round(eer, 4), "dev_recordings": len(tgt)}
        if log:
            log(f"{mode}: threshold {thr:.3f}, dev EER {eer:.3f} on {len(tgt)} recordings")
    t.meta.update({"thresholds": {m: cal[m]["threshold"] for m in MODES}, "train_clips": len(raws), "train_singers": len(set(labels))})
    return t, cal


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--corpus", required=True, metavar="DIR", help="a `streamkit corpus singers` corpus")
    p.add_argument("--out", default=str(WEIGHTS), metavar="NPZ", help="the transform (default: the shipped streamkit/models/weights/singer_embed.npz); "
                   "the card goes to <stem>.json")  # fmt: skip
    p.add_argument("--shrink", type=float, default=0.1, help="shrinkage of the within-singer scatter toward the identity (0..1, default 0.1)")


def run_from_args(ns: argparse.Namespace) -> int:
    if not 0.0 <= ns.shrink <= 1.0:
        raise ValueError(f"--shrink must be in 0..1, got {ns.shrink}")
    t0 = time.perf_counter()
    t, cal = fit(ns.corpus, shrink=ns.shrink, log=lambda m: print(m, file=sys.stderr))
    out = Path(ns.out)
    t.save(out)
    man = Path(ns.corpus) / "manifest.json"
    corpus_cmd = json.loads(man.read_text(encoding="utf-8")).get("command") if man.is_file() else None
    card = {
        "model": "singer embedding: pooled log-mel + pitch-habit statistics, within-singer whitening",
        "command": f"streamkit train singer-id --corpus {ns.corpus} --out {out.name} --shrink {ns.shrink}",
        "corpus_command": corpus_cmd,
        "raw_dim": int(t.mu.shape[0]),
        "dim": t.dim,
        "train": t.meta,
        "calibration": cal,
        "seconds": round(time.perf_counter() - t0, 1),
    }
    out.with_suffix(".json").write_text(json.dumps(card, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {out} and {out.with_suffix('.json').name} in {card['seconds']} s")
    return 0
