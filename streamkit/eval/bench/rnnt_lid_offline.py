"""Utterance language ID of LID RNN-T models from the encoder and LID head alone (no decoders).

Usage::

    .venv/bin/python benchmarks/rnnt_lid_offline.py --corpus DIR --model NAME=PATH [--model NAME=PATH ...] [--limit 80]

For each model and for the dev and test splits, ``--limit`` utterances per language (the same
evenly spread choice as ``rnnt_multilingual.py``'s ``pick``) are encoded whole and the LID head's
posteriors decide the language by the last frame (``lid_select="last"``, what the shipped model
uses) and by the mean over frames (the paper, §6.3), and, when the weight file records its
training hours per language (``meta["train_hours"]``), by both times that prior (``last+prior``,
``mean+prior``: the block's ``lid_prior="train"``). Accuracy is over utterances (the paper's
Table 5 Avg.), ``macro`` the mean of the per-language accuracies. The LID head sees only the encoder output,
and the encoder's input normalisation is causal, so these decisions are the ones the streaming
block makes on the same files (``rnnt_multilingual.py --lid-last``'s LID column, oracle
boundaries at the file ends); this runs in a minute instead of decoding four beams.

The same posteriors also drive the paper's §6.3 decoder shutoff offline (``LidShutoff``, the block's own
rule) at the Table 7 points that switch anything off, with both statistics (``sum``: the paper's
cumulative log posterior; ``last``: the latest frame's, ``lid_score="last"``), each also with the
training-hours prior when the file records one (``+prior``): the share of utterances whose
reference-language decoder survives (an upper bound on what the shutoff leaves decodable), the
last-frame LID of the survivors and T_avg. The decoders themselves do not run, so all of a split's utterances can be
simulated where ``rnnt_multilingual.py --sweep`` decodes a few.

Writes ``benchmarks/results/rnnt_lid_offline.json`` (``--out``): accuracy per rule, split and
language, confusion matrices (rows: reference, columns: decision), the time, the machine; no
absolute paths.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from streamkit.eval.bench import RESULTS, machine_info, write_result
from streamkit.eval.bench.rnnt_multilingual import pick
from streamkit.models.rnnt import load_model
from streamkit.models.rnnt_search import LidShutoff
from streamkit.train.rnnt_corpus import AsrCorpus, compute_logmel, stacked

SHUTOFF_POINTS = ((100, 0.2), (30, 0.2), (30, 0.5), (10, 0.2))  #: Table 7 (tau frames, s_th) points that switch decoders off


def decide(model: Any, corpus: AsrCorpus, split: str, limit: int) -> dict[str, Any]:
    """Reference languages and the last-frame / mean-posterior decisions for one split."""
    utts = pick(corpus.split(split), list(model.cfg.languages), limit)
    ref, last, mean, logp = [], [], [], []
    with torch.inference_mode():
        for u, lm in zip(utts, compute_logmel(utts)):
            lp = model.lid_logits(model.encode(stacked(lm)[None]))[0].log_softmax(-1)
            post = lp.exp()
            ref.append(u.lang)
            last.append(post[-1].double().numpy())
            mean.append(post.mean(0).double().numpy())
            logp.append(lp.double().numpy())
    return {"ref": np.array(ref), "post_last": np.array(last), "post_mean": np.array(mean), "logp": logp}


def rules(d: dict[str, Any], prior: list[float] | None) -> dict[str, np.ndarray]:
    """The decisions per rule: ``last``/``mean``, and with a prior ``last+prior``/``mean+prior`` (posterior x prior, as ``LidShutoff.select``)."""
    out = {"last": d["post_last"].argmax(1), "mean": d["post_mean"].argmax(1)}
    if prior is not None:
        lp = np.log(np.asarray(prior, np.float64) / np.sum(prior))
        with np.errstate(divide="ignore"):
            out["last+prior"] = (np.log(d["post_last"]) + lp).argmax(1)
            out["mean+prior"] = (np.log(d["post_mean"]) + lp).argmax(1)
    return out


def shutoff(d: dict[str, Any], n_lang: int, prior: list[float] | None = None) -> dict[str, Any]:
    """Per statistic (with and without the prior) and Table 7 point: % of utterances whose reference decoder
    survives, % whose final language (last-frame rule among the survivors) is right, and mean T_avg."""
    out: dict[str, Any] = {}
    for stat in ("sum", "last"):
        for pr in (None, prior) if prior is not None else (None,):
            for tau, s_th in SHUTOFF_POINTS:
                alive, right, t_avg = 0, 0, []
                for lp, r in zip(d["logp"], d["ref"]):
                    sh = LidShutoff(n_lang, tau=tau, s_th=s_th, score=stat, prior=pr)
                    for row in lp:
                        sh.update(row)
                    alive += bool(sh.active[r])
                    right += sh.select("last") == r
                    t_avg.append(sh.t_avg)
                name = stat + ("" if pr is None else "+prior")
                out[f"{name} tau {tau} s_th {s_th:g}"] = {"statistic": stat, "prior": pr is not None, "tau_frames": tau, "s_th": s_th,
                                                          "reference_survives": round(100.0 * alive / len(d["ref"]), 2),
                                                          "lid_last": round(100.0 * right / len(d["ref"]), 2),
                                                          "t_avg": round(float(np.mean(t_avg)), 3)}  # fmt: skip
    return out


def score(d: dict[str, Any], langs: list[str], prior: list[float] | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"utterances": int(len(d["ref"]))}
    for rule, hyp in rules(d, prior).items():
        ref = d["ref"]
        conf = np.zeros((len(langs), len(langs)), dtype=int)
        np.add.at(conf, (ref, hyp), 1)
        per = {lg: round(100.0 * float((hyp[ref == g] == g).mean()), 2) for g, lg in enumerate(langs) if (ref == g).any()}
        out[rule] = {
            "accuracy": round(100.0 * float((ref == hyp).mean()), 2),
            "macro": round(float(np.mean(list(per.values()))), 2),
            "per_language": per,
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
    print(f"{'model':<28} {'split':<5} {'n':>4} {'rule':<11} {'utt %':>6} {'macro %':>7}  per language", flush=True)
    for name, path in models:
        model, meta = load_model(path)
        model = model.float().eval()
        if not model.cfg.has_lid:
            ap.error(f"{path.name}: variant {model.cfg.variant!r} has no LID head")
        langs = list(model.cfg.languages)
        hours = meta.get("train_hours")
        prior = [float(hours[lg]) for lg in langs] if isinstance(hours, dict) and all(lg in hours for lg in langs) else None
        row: dict[str, Any] = {"model": name, "file": path.name, "config": model.cfg.to_dict(), "prior": None if prior is None else dict(zip(langs, prior)),
                               "splits": {}}  # fmt: skip
        for split in ("dev", "test"):
            t0 = time.monotonic()
            d = decide(model, corpus, split, a.limit)
            s = score(d, langs, prior)
            s["shutoff"] = shutoff(d, len(langs), prior)
            s["seconds"] = round(time.monotonic() - t0, 1)
            row["splits"][split] = s
            for rule in rules(d, prior):
                per = " ".join(f"{lg} {v:.1f}" for lg, v in s[rule]["per_language"].items())
                print(
                    f"{name:<28} {split:<5} {s['utterances']:>4} {rule:<11} {s[rule]['accuracy']:>6.2f} {s[rule]['macro']:>7.2f}  {per}", flush=True
                )
            for key, v in s["shutoff"].items():
                print(f"{'':<28} {split:<5} shutoff {key:<28} reference decoder survives {v['reference_survives']:6.2f} %, "
                      f"last-frame LID {v['lid_last']:6.2f} %, T_avg {v['t_avg']:.2f}")  # fmt: skip
        rows.append(row)
    result = {
        "benchmark": "benchmarks/rnnt_lid_offline.py",
        "corpus_command": corpus.command,
        "limit_per_language": a.limit,
        "rules": {
            "last": "highest last-frame LID posterior",
            "mean": "highest mean LID posterior over the frames (paper §6.3)",
            "last+prior": "highest last-frame posterior x the model's training-hours prior (meta['train_hours'])",
            "mean+prior": "highest mean posterior x the training-hours prior",
        },
        "accuracy": "over utterances (the paper's Table 5 Avg.); macro: the mean of the per-language accuracies",
        "units": "accuracy and reference_survives in % of utterances; tau in 30 ms frames",
        "rows": rows,
        "paper": {"lid_accuracy_multisoftmax_lid": 90.1},
        "machine": machine_info(),
        "measured_at": time.strftime("%Y-%m-%d %H:%M:%S"),
    }
    return write_result(a.out, result)


if __name__ == "__main__":
    raise SystemExit(main())
