"""End-of-utterance language choice of the multi-softmax LID RNN-T: which evidence picks the language.

Usage::

    .venv/bin/python benchmarks/rnnt_lid_rules.py --corpus DIR [--model PATH] [--limit 80]

All four language decoders run in lockstep over each utterance (beam 4, at most 3 symbols per
frame, no shutoff: the ``lid-free`` row of ``rnnt_multilingual.py``), on ``--limit`` utterances per
language of the dev and the test split (evenly spread over each list). For every utterance it
keeps the LID head's mean and last-frame posteriors and each decoder's best hypothesis
log-probability and length, then scores these rules:

* ``mean``: highest mean LID posterior (the paper, §6.3);
* ``last``: highest last-frame posterior (what the shipped model uses, ``lid_select="auto"``);
* ``score``: the decoder whose best hypothesis has the highest log-probability (no LID);
* ``fused: ...``: a multinomial logistic regression over per-language features (log last-frame
  posterior, log mean posterior, hypothesis log-probability per frame, symbols per frame) with a
  bias per language, fitted on the dev utterances (L2 1e-2, L-BFGS); its dev figure is a 5-fold
  cross-validation, its test figure the fit on all dev utterances.

The rules are picked on dev and reported on test. Writes ``benchmarks/results/rnnt_lid_rules.json``
(``--out``): accuracy per rule and language, confusion matrices, fitted weights, the machine; no
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

import numpy as np

ROOT = Path(__file__).resolve().parents[1]

import torch  # noqa: E402

from streamkit.eval.bench import machine_info  # noqa: E402
from streamkit.io.outputs import write_text  # noqa: E402
from streamkit.models.rnnt import load_model  # noqa: E402
from streamkit.models.rnnt_search import MultiDecoder  # noqa: E402
from streamkit.train.rnnt_corpus import AsrCorpus, compute_logmel, spread, stacked  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results"
SHIPPED = ROOT / "streamkit" / "models" / "weights" / "rnnt_lid.pt"
FEATURES = ("log last posterior", "log mean posterior", "score per frame", "symbols per frame")
FUSED = {"fused: last + bias": [0], "fused: last + mean": [0, 1], "fused: last + score": [0, 2], "fused: all four": [0, 1, 2, 3]}


def evidence(model: Any, corpus: AsrCorpus, split: str, limit: int) -> dict[str, np.ndarray]:
    """Per utterance: reference language, frames, LID posteriors, decoder scores and lengths."""
    utts = corpus.split(split)
    sel = [u for lg in range(len(corpus.langs)) for u in spread([u for u in utts if u.lang == lg], limit)]
    rows: dict[str, list[Any]] = {"lang": [], "frames": [], "mean": [], "last": [], "score": [], "symbols": []}
    t0 = time.monotonic()
    for i, u in enumerate(sel):
        with torch.inference_mode():
            enc = model.encode(stacked(compute_logmel([u])[0])[None])[0]
            dec = MultiDecoder(model, lid_select="last")
            dec.reset()
            dec.advance_frames(enc)
        r = dec.result()
        n = model.cfg.n_lang
        rows["lang"].append(u.lang)
        rows["frames"].append(r.frames_total)
        rows["mean"].append(r.lid_posterior)
        rows["last"].append(r.lid_last)
        rows["score"].append([r.lang_scores[lg] for lg in range(n)])
        rows["symbols"].append([len(s.hyps[0].tokens) for s in dec.searches])
        if (i + 1) % 80 == 0:
            print(f"  {split}: {i + 1}/{len(sel)} utterances, {time.monotonic() - t0:.0f} s", file=sys.stderr, flush=True)
    return {k: np.asarray(v, dtype=np.float64) for k, v in rows.items()}


def features(ev: dict[str, np.ndarray]) -> np.ndarray:
    """(N, n_lang, 4): the FEATURES per utterance and language."""
    t = ev["frames"][:, None]
    return np.stack([np.log(ev["last"] + 1e-6), np.log(ev["mean"] + 1e-6), ev["score"] / t, ev["symbols"] / t], -1)


def fit(x: np.ndarray, y: np.ndarray, cols: list[int], l2: float = 1e-2) -> tuple[np.ndarray, np.ndarray]:
    """Weights per feature and bias per language of a multinomial logistic regression."""
    xt, yt = torch.tensor(x[..., cols]), torch.tensor(y, dtype=torch.long)
    w = torch.zeros(len(cols), dtype=torch.float64, requires_grad=True)
    b = torch.zeros(x.shape[1], dtype=torch.float64, requires_grad=True)
    opt = torch.optim.LBFGS([w, b], max_iter=500)

    def closure() -> torch.Tensor:
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy((xt * w).sum(-1) + b, yt) + l2 * ((w**2).sum() + (b**2).sum())
        loss.backward()
        return loss

    opt.step(closure)
    return w.detach().numpy(), b.detach().numpy()


def scores(pred: np.ndarray, y: np.ndarray, langs: list[str]) -> dict[str, Any]:
    n = len(langs)
    conf = np.zeros((n, n), int)
    for a, b in zip(y.astype(int), pred.astype(int)):
        conf[a, b] += 1
    per = {lg: round(100.0 * conf[i, i] / max(conf[i].sum(), 1), 2) for i, lg in enumerate(langs)}
    return {"acc": round(100.0 * float(np.mean(pred == y)), 2), "per_lang": per, "confusion": conf.tolist()}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--corpus", required=True, type=Path, help="a `streamkit corpus asr` corpus")
    ap.add_argument("--model", type=Path, default=SHIPPED, help="an RNN-T with an LID head (default: the shipped one)")
    ap.add_argument("--limit", type=int, default=80, help="utterances per language and split (default 80)")
    ap.add_argument("--folds", type=int, default=5)
    ap.add_argument("--out", type=Path, default=RESULTS / "rnnt_lid_rules.json")
    a = ap.parse_args()
    torch.set_num_threads(1)
    model, meta = load_model(a.model)
    model.eval()
    if not model.cfg.has_lid:
        raise SystemExit(f"{a.model}: variant {model.cfg.variant!r} has no LID head")
    corpus = AsrCorpus(a.corpus)
    langs = list(corpus.langs)
    t0 = time.monotonic()
    ev = {sp: evidence(model, corpus, sp, a.limit) for sp in ("dev", "test")}
    decode_s = time.monotonic() - t0
    x = {sp: features(e) for sp, e in ev.items()}
    y = {sp: e["lang"].astype(int) for sp, e in ev.items()}
    rules: dict[str, dict[str, Any]] = {}
    for name, key in (("mean", "mean"), ("last", "last"), ("score", "score")):
        rules[name] = {sp: scores(ev[sp][key].argmax(1), y[sp], langs) for sp in ev}
    rng = np.random.default_rng(0)
    folds = np.array_split(rng.permutation(len(y["dev"])), a.folds)
    for name, cols in FUSED.items():
        cv = np.empty(len(y["dev"]), int)
        for te in folds:
            tr = np.setdiff1d(np.arange(len(y["dev"])), te)
            w, b = fit(x["dev"][tr], y["dev"][tr], cols)
            cv[te] = ((x["dev"][te][..., cols] * w).sum(-1) + b).argmax(1)
        w, b = fit(x["dev"], y["dev"], cols)
        pt = ((x["test"][..., cols] * w).sum(-1) + b).argmax(1)
        rules[name] = {"dev": scores(cv, y["dev"], langs), "test": scores(pt, y["test"], langs),
                       "weights": {FEATURES[c]: round(float(v), 4) for c, v in zip(cols, w)},
                       "bias": {lg: round(float(v), 4) for lg, v in zip(langs, b)}}  # fmt: skip
    print(f"\nLID decision rules, {a.limit} utterances per language (dev {len(y['dev'])}, test {len(y['test'])}); decoding {decode_s:.0f} s\n")
    print("| rule | dev % | test % | test per language (" + " / ".join(langs) + ") |")
    print("| --- | ---: | ---: | --- |")
    for name, r in rules.items():
        print(f"| {name} | {r['dev']['acc']:.2f} | {r['test']['acc']:.2f} | " + " / ".join(f"{v:.1f}" for v in r["test"]["per_lang"].values()) + " |")
    out = {
        "benchmark": "rnnt_lid_rules",
        "model": a.model.name,
        "model_step": meta.get("step"),
        "lid_refit": meta.get("lid_refit"),
        "corpus_command": json.loads((a.corpus / "manifest.json").read_text(encoding="utf-8")).get("command"),
        "utterances_per_language": a.limit,
        "decoding": "four decoders in lockstep, beam 4, <= 3 symbols per frame, no shutoff, one thread",
        "features": list(FEATURES),
        "fit": f"multinomial logistic regression, L2 1e-2, L-BFGS; dev: {a.folds}-fold cross-validation; test: fitted on all dev",
        "rules": rules,
        "decode_s": round(decode_s, 1),
        "machine": machine_info(),
        "command": "python benchmarks/rnnt_lid_rules.py --corpus CORPUS"
        + ("" if a.model == SHIPPED else f" --model {a.model.name}")
        + f" --limit {a.limit}",
    }
    a.out.parent.mkdir(parents=True, exist_ok=True)
    write_text(a.out, json.dumps(out, indent=1) + "\n", encoding="utf-8")
    print(f"\nwrote {a.out.relative_to(ROOT) if a.out.is_relative_to(ROOT) else a.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
