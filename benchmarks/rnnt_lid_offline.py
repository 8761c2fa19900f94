"""Utterance language ID of LID RNN-T models from the encoder and LID head alone (no decoders).

Usage::

    .venv/bin/python benchmarks/rnnt_lid_offline.py --corpus DIR --model NAME=PATH [--model NAME=PATH ...] [--limit 80]

For each model and for the dev and test splits, ``--limit`` utterances per language (the same
evenly spread choice as ``rnnt_multilingual.py``'s ``pick``) are encoded whole and the LID head's
posteriors decide the language by the last frame (``lid_select="last"``, what the shipped model
uses) and by the mean over frames (the paper, §6.3). The LID head sees only the encoder output,
and the encoder's input normalisation is causal, so these decisions are the ones the streaming
block makes on the same files (``rnnt_multilingual.py --lid-last``'s LID column, oracle
boundaries at the file ends); this runs in a minute instead of decoding four beams.

Writes ``benchmarks/results/rnnt_lid_offline.json`` (``--out``): accuracy per rule, split and
language, confusion matrices (rows: reference, columns: decision), the time, the machine; no
absolute paths.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import torch  # noqa: E402
from rnnt_multilingual import pick  # noqa: E402

from streamkit.cli import machine_info  # noqa: E402
from streamkit.models.rnnt import load_model  # noqa: E402
from streamkit.train.rnnt import AsrCorpus, compute_logmel, stacked  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results"


def decide(model: Any, corpus: AsrCorpus, split: str, limit: int) -> dict[str, Any]:
    """Reference languages and the last-frame / mean-posterior decisions for one split."""
    utts = pick(corpus.split(split), list(model.cfg.languages), limit)
    ref, last, mean = [], [], []
    with torch.inference_mode():
        for u, lm in zip(utts, compute_logmel(utts)):
            post = model.lid_logits(model.encode(stacked(lm)[None]))[0].softmax(-1)
            ref.append(u.lang)
            last.append(int(post[-1].argmax()))
            mean.append(int(post.mean(0).argmax()))
    return {"ref": np.array(ref), "last": np.array(last), "mean": np.array(mean)}


def score(d: dict[str, Any], langs: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {"utterances": int(len(d["ref"]))}
    for rule in ("last", "mean"):
        ref, hyp = d["ref"], d[rule]
        conf = np.zeros((len(langs), len(langs)), dtype=int)
        np.add.at(conf, (ref, hyp), 1)
        out[rule] = {
            "accuracy": round(100.0 * float((ref == hyp).mean()), 2),
            "per_language": {lg: round(100.0 * float((hyp[ref == g] == g).mean()), 2) for g, lg in enumerate(langs) if (ref == g).any()},
            "confusion": conf.tolist(),
        }
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpus", required=True, help="a corpus from `streamkit corpus asr` (dev and test splits)")
    ap.add_argument("--model", action="append", required=True, metavar="NAME=PATH", help="an LID RNN-T weight file (repeatable)")
    ap.add_argument("--limit", type=int, default=80, help="utterances per language and split (default 80)")
    ap.add_argument("--out", default=str(RESULTS / "rnnt_lid_offline.json"))
    a = ap.parse_args(argv)
    torch.set_num_threads(1)
    models = []
    for m in a.model:
        name, sep, path = m.partition("=")
        if not sep or not name or not path:
            ap.error(f"--model wants NAME=PATH, got {m!r}")
        models.append((name, Path(path)))
    corpus = AsrCorpus(a.corpus)
    rows = []
    print(f"{'model':<28} {'split':<5} {'n':>4} {'last %':>7} {'mean %':>7}  last-frame per language", flush=True)
    for name, path in models:
        model, meta = load_model(path)
        model = model.float().eval()
        if not model.cfg.has_lid:
            ap.error(f"{path.name}: variant {model.cfg.variant!r} has no LID head")
        langs = list(model.cfg.languages)
        row: dict[str, Any] = {"model": name, "file": path.name, "config": model.cfg.to_dict(), "splits": {}}
        for split in ("dev", "test"):
            t0 = time.monotonic()
            s = score(decide(model, corpus, split, a.limit), langs)
            s["seconds"] = round(time.monotonic() - t0, 1)
            row["splits"][split] = s
            per = " ".join(f"{lg} {v:.1f}" for lg, v in s["last"]["per_language"].items())
            print(f"{name:<28} {split:<5} {s['utterances']:>4} {s['last']['accuracy']:>7.2f} {s['mean']['accuracy']:>7.2f}  {per}", flush=True)
        rows.append(row)
    result = {
        "benchmark": "benchmarks/rnnt_lid_offline.py",
        "corpus_command": corpus.command,
        "limit_per_language": a.limit,
        "rules": {"last": "highest last-frame LID posterior", "mean": "highest mean LID posterior over the frames (paper §6.3)"},
        "units": "accuracy in % of utterances",
        "rows": rows,
        "paper": {"lid_accuracy_multisoftmax_lid": 90.1},
        "machine": machine_info(),
        "measured_at": time.strftime("%Y-%m-%d %H:%M:%S"),
    }
    out = Path(a.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {out.name}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
