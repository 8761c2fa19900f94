"""How sure is a Table 1 gain? Clip-bootstrap intervals of a method's event-F1 gain over its baseline.

``sed_table1.py`` reports the gain of a method over the baseline as a difference of two macro
event F1 figures on the 500 real eval clips, averaged over seeds. Two errors sit in that figure:

* the **eval set's** sampling error (another 500 clips from the same generator would score the
  same models differently). This script measures it by a paired bootstrap over clips
  (:func:`streamkit.eval.sed.bootstrap_macro_f1_gain`): each resample draws the eval clips with
  replacement, once for every model, and recomputes each model's macro F1 from per-clip counts
  (:func:`streamkit.eval.sed.event_counts`; sed_eval matches events within a clip, so counts add up
  exactly);
* the **seeds'** spread (another training seed gives another model). With a few seeds per method
  it is estimated from the per-seed gains: their standard deviation and a Student-t interval of
  their mean.

For each comparison (``--pair GROUP=BASELINE,METHOD``, one per seed; pairs with the same GROUP are
averaged) it prints each seed's gain with its clip interval, the mean gain with its clip interval
(seeds fixed) and its seed interval, and the share of clip resamples in which the mean gain reaches
issue #7's target (+5 points). Post-processing is each model card's (as ``sed_table1.py``), and
each model's F1 on all clips is checked against its card's eval figure.

Usage::

    python benchmarks/sed_gain_ci.py --corpus SEDC \\
        --pair "45 epochs, EMA=B0/sed.pt,M0/sed.pt" --pair "45 epochs, EMA=B1/sed.pt,M1/sed.pt" ...

Writes ``benchmarks/results/sed_gain_ci.json`` (file names and SHA-256, no machine paths).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _bench import write_result  # noqa: E402

from streamkit.core.machine import machine_info  # noqa: E402

OUT = Path(__file__).resolve().parent / "results" / "sed_gain_ci.json"
TARGET_GAIN = 5.0  #: issue #7: Adv.time+Tri beats the baseline by >= 5 points event-based F1
PAPER_GAIN = 35.10 - 24.15  #: paper Table 1, Adv.time+Tri over its baseline (one run each, no interval given)


def parse_pairs(ap: argparse.ArgumentParser, specs: list[str]) -> dict[str, list[tuple[Path, Path]]]:
    """``--pair GROUP=BASELINE,METHOD`` options as ``{group: [(baseline, method), ...]}`` in the order given."""
    groups: dict[str, list[tuple[Path, Path]]] = {}
    for s in specs:
        group, sep, paths = s.rpartition("=")
        parts = paths.split(",")
        if not sep or not group or len(parts) != 2 or not all(parts):
            ap.error(f"--pair wants GROUP=BASELINE_PATH,METHOD_PATH, got {s!r}")
        pair = (Path(parts[0]), Path(parts[1]))
        for p in pair:
            if not p.is_file():
                ap.error(f"--pair {group}: no such weight file: {p}")
        groups.setdefault(group, []).append(pair)
    if not groups:
        ap.error("give at least one --pair GROUP=BASELINE_PATH,METHOD_PATH")
    return groups


def count_model(path: Path, corpus: Any) -> dict[str, Any]:
    """A model's per-clip event counts on the real eval clips, with its card's post-processing."""
    from sed_table1 import card_post

    from streamkit.eval import sed
    from streamkit.models.sed_crnn import load_model
    from streamkit.models.sed_post import median_frames
    from streamkit.train.sed import file_sha256, predict_frames
    from streamkit.train.sed_tune import events_for

    model, meta = load_model(path)
    card_p = path.with_suffix(".json")
    card = json.loads(card_p.read_text(encoding="utf-8")) if card_p.is_file() else {}
    med_s, thr = card_post(card, meta)
    cfg = model.cfg
    files = list(corpus.files["eval"])
    probs = predict_frames(model, corpus.features("eval", cfg, progress=False))
    est = events_for(list(probs), files, cfg, threshold=thr, median=median_frames(med_s, cfg.frame_seconds))
    ref = {f: list(corpus.strong["eval"].get(f, [])) for f in files}
    counts = sed.event_counts(ref, est, classes=cfg.classes, files=files)
    card_f1 = (card.get("metrics", {}).get("eval") or {}).get("event_f1")
    f1 = 100 * counts.macro_f1()
    if card_f1 is not None and abs(f1 - float(card_f1)) > 0.01:
        raise SystemExit(f"error: {path.name}: eval event F1 {f1:.2f} here, {card_f1} in its card (another corpus or post-processing?)")
    return {"weights": path.name, "sha256": file_sha256(path), "method": card.get("method"), "seed": card.get("training", {}).get("seed"),
            "event_f1": round(f1, 2), "card_event_f1": card_f1, "post": {"median_s": med_s, "threshold": thr}, "counts": counts}  # fmt: skip


def seed_interval(gains: list[float], level: float) -> dict[str, Any]:
    """Mean, standard deviation and Student-t interval of per-seed gains (points); no interval from one seed."""
    from scipy import stats

    n = len(gains)
    mean = sum(gains) / n
    if n < 2:
        return {"seeds": n, "mean": mean, "sd": None, "ci": None}
    sd = math.sqrt(sum((g - mean) ** 2 for g in gains) / (n - 1))
    h = float(stats.t.ppf((1 + level) / 2, n - 1)) * sd / math.sqrt(n)
    return {"seeds": n, "mean": mean, "sd": sd, "ci": [mean - h, mean + h]}


def compare(group: str, rows: list[tuple[dict[str, Any], dict[str, Any]]], *, n_boot: int, seed: int, level: float) -> dict[str, Any]:
    from streamkit.eval import sed

    r = sed.bootstrap_macro_f1_gain([b["counts"] for b, _ in rows], [m["counts"] for _, m in rows], n_boot=n_boot, seed=seed, level=level)
    pts = [{k: (round(100 * v, 2) if k != "ci" else [round(100 * x, 2) for x in v]) for k, v in p.items()} for p in r["pairs"]]
    for p, (b, m) in zip(pts, rows):
        p.update(baseline_weights=b["weights"], method_weights=m["weights"], baseline_sha256=b["sha256"], method_sha256=m["sha256"],
                 seed=m["seed"], baseline_seed=b["seed"])  # fmt: skip
    draws = 100 * r["draws"]
    gains = [100 * p["gain"] for p in r["pairs"]]
    si = seed_interval(gains, level)
    return {
        "group": group,
        "pairs": pts,
        "mean_gain": round(100 * r["mean_gain"], 2),
        "clip_ci": [round(100 * x, 2) for x in r["ci"]],
        "clip_share_reaching_target": round(float((draws >= TARGET_GAIN).mean()), 4),
        "seed_sd": None if si["sd"] is None else round(si["sd"], 2),
        "seed_ci": None if si["ci"] is None else [round(x, 2) for x in si["ci"]],
        "files": r["files"],
    }


def _ci(v: Any) -> str:
    return "-" if v is None else f"[{v[0]:+.2f}, {v[1]:+.2f}]"


def table(results: list[dict[str, Any]], level: float) -> str:
    pc = f"{100 * level:.0f} %"
    lines = [f"Real eval event F1 gain of the method over its baseline (points), {pc} intervals:",
             f"{'comparison / seed':44s} {'baseline':>9s} {'method':>9s} {'gain':>8s} {'clip interval':>18s} {'seed interval':>18s} {'P(>= +5)':>9s}"]  # fmt: skip
    for g in results:
        for p in g["pairs"]:
            lab = f"{g['group']}, seed {p['seed']}"
            lines.append(f"{lab[:44]:44s} {p['baseline']:9.2f} {p['method']:9.2f} {p['gain']:+8.2f} {_ci(p['ci']):>18s}")
        lines.append(f"{(g['group'] + ', mean')[:44]:44s} {'':9s} {'':9s} {g['mean_gain']:+8.2f} {_ci(g['clip_ci']):>18s} "
                     f"{_ci(g['seed_ci']):>18s} {g['clip_share_reaching_target']:9.3f}")  # fmt: skip
    lines += ["", f"Target (issue #7): +{TARGET_GAIN:.0f}; paper Table 1: +{PAPER_GAIN:.2f} (one run each, DCASE 2019 validation set).",
              "Clip interval: the eval clips resampled, the models fixed. Seed interval: Student t over the seeds' gains.",
              "P(>= +5): share of clip resamples whose mean gain reaches the target."]  # fmt: skip
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", required=True, help="the `streamkit corpus sed` directory the models were trained on")
    ap.add_argument("--pair", action="append", default=[], metavar="GROUP=BASELINE,METHOD",
                    help="one seed's baseline and method weight files (repeat; the same GROUP = seeds of one comparison)")  # fmt: skip
    ap.add_argument("--boot", type=int, default=10000, help="bootstrap resamples (default 10000)")
    ap.add_argument("--seed", type=int, default=0, help="seed of the resampling (default 0)")
    ap.add_argument("--level", type=float, default=0.95, help="interval coverage (default 0.95)")
    ap.add_argument("--cache", default=None, help="log-mel cache directory (default <corpus>/features)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--out", default=str(OUT), help="result JSON (default benchmarks/results/sed_gain_ci.json)")
    a = ap.parse_args(argv)
    if a.boot < 1:
        ap.error("--boot must be positive")
    if not 0.0 < a.level < 1.0:
        ap.error("--level must be in (0, 1)")
    groups = parse_pairs(ap, a.pair)
    import torch

    from streamkit.train.sed import SedCorpus

    torch.set_num_threads(a.threads)
    corpus = SedCorpus(a.corpus, a.cache)
    corpus.require("eval")
    t0 = time.monotonic()
    scored: dict[Path, dict[str, Any]] = {}
    for pairs in groups.values():
        for p in (x for pair in pairs for x in pair):
            if p.resolve() not in scored:
                print(f"scoring {p} ...", file=sys.stderr, flush=True)
                scored[p.resolve()] = count_model(p, corpus)
    results = [compare(g, [(scored[b.resolve()], scored[m.resolve()]) for b, m in pairs], n_boot=a.boot, seed=a.seed, level=a.level)
               for g, pairs in groups.items()]  # fmt: skip
    print(table(results, a.level))
    result = {"benchmark": "sed_gain_ci", "corpus": corpus.corpus_command(), "subset": "eval", "n_boot": a.boot, "boot_seed": a.seed,
              "level": a.level, "target_gain": TARGET_GAIN, "paper_gain": round(PAPER_GAIN, 2), "comparisons": results,
              "score_s": round(time.monotonic() - t0, 1), "machine": machine_info()}  # fmt: skip
    return write_result(a.out, result)


if __name__ == "__main__":
    raise SystemExit(main())
