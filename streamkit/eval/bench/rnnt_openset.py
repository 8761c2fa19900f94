"""Open-set LID of the LID RNN-T: calibrate the ``unknown`` threshold on dev, measure it on test.

Usage::

    .venv/bin/python benchmarks/rnnt_openset.py --corpus C --openset O --model streamkit/models/weights/rnnt_lid.pt
        [--cache DEBS] [--limit 100] [--max-false-unknown 0.03] [--write-calibration PATH]

* ``--corpus``: a ``streamkit corpus asr`` corpus (in-language dev and test splits; speakers unseen
  in training when it has the shipped model's seed and split fractions).
* ``--openset``: a ``streamkit corpus openset`` corpus (espeak-ng speech of non-model languages;
  its dev and test languages are disjoint).
* ``--cache``: a directory with the pinned Debian packages (``streamkit corpus real --cache``):
  real Czech dialogue of ``fillets-ng-data-cs`` (a training package) joins the dev negatives
  (levels by a hash of their name; the other levels are a held-out real negative set), and the
  evaluation-only ``pocketsphinx-testdata`` (LibriVox, spoken commands) and
  ``asterisk-core-sounds-en-wav`` (telephone prompts) give real English, never used for the choice.

Every utterance is one file, encoded whole; the LID head's frame posteriors give the scores of
:mod:`streamkit.models.rnnt_openset` (the same causal computation the streaming block makes). On
dev, :func:`streamkit.models.rnnt_openset.choose` picks the score and threshold (false-unknown on
in-language dev at most ``--max-false-unknown``); on test it reports the false-unknown rate and
LID accuracy of the in-language split, the share of non-model-language utterances answered
``unknown`` (per language), and LID accuracy on real English (``unknown`` counts as wrong).

Writes ``benchmarks/results/rnnt_openset.json`` (``--out``) and, with ``--write-calibration``,
the calibration file the block loads (:func:`streamkit.models.rnnt_openset.sidecar`).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from streamkit.eval.bench import RESULTS, machine_info, write_result
from streamkit.models.features import log_mel
from streamkit.models.rnnt import load_model
from streamkit.models.rnnt_openset import SCORES, UNKNOWN, OpenSet, checkpoint_score, choose, fit_probe
from streamkit.train.rnnt_corpus import stacked

REAL_MAX_S = 20.0  #: longer real files are cut to their first 20 s
REAL_MIN_S = 1.0


def _read_wav(path: Path) -> np.ndarray:
    import soundfile as sf

    x, sr = sf.read(str(path), dtype="float32", always_2d=True)
    assert sr == 8000, f"{path}: {sr} Hz"
    return x.mean(axis=1)


def posteriors(model: Any, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(T, L) LID frame posteriors and (T, H) encoder frames of one utterance (8 kHz float32)."""
    with torch.inference_mode():
        enc = model.encode(stacked(log_mel(x))[None])
        return model.lid_logits(enc)[0].softmax(-1).double().numpy(), enc[0].double().numpy()


def jsonl_set(root: Path, split: str, langs: list[str] | None, limit: int | None) -> list[tuple[str, Path]]:
    """(language, wav path) of a corpus split, at most ``limit`` per language, evenly spread."""
    recs = [json.loads(line) for line in (root / f"{split}.jsonl").read_text(encoding="utf-8").splitlines() if line.strip()]
    out: list[tuple[str, Path]] = []
    for lg in dict.fromkeys(r["lang"] for r in recs):
        if langs is not None and lg not in langs:
            continue
        rs = [r for r in recs if r["lang"] == lg]
        if limit is not None and limit < len(rs):
            rs = [rs[i] for i in np.unique(np.round(np.linspace(0, len(rs) - 1, limit)).astype(int)).tolist()]
        out += [(lg, root / r["path"]) for r in rs]
    return out


def real_sets(cache: Path, work: Path, limit: int) -> dict[str, list[tuple[str, np.ndarray]]]:
    """Real speech from the pinned packages: ``cs_dev``/``cs_test`` (fillets-ng-data-cs by level),
    ``en_real`` (pocketsphinx-testdata and asterisk-core-sounds-en-wav, evaluation only)."""
    from streamkit.data import real_corpus as rc
    from streamkit.data.real_packages import fetch, pin, unpack

    out: dict[str, list[tuple[str, np.ndarray]]] = {"cs_dev": [], "cs_test": [], "en_real": []}
    for pkg in ("fillets-ng-data-cs", "pocketsphinx-testdata", "asterisk-core-sounds-en-wav"):
        p = pin(pkg)
        root = unpack(fetch(p, cache), work / pkg, p)
        srcs = [s for s in rc.inventory(pkg, root) if s.cls == "speech"]
        picked: list[tuple[str, np.ndarray]] = []
        for s in srcs:
            x, _ = rc.load(root, s, 8000)
            if x.shape[0] < REAL_MIN_S * 8000:
                continue
            picked.append((s.path, np.array(x[: int(REAL_MAX_S * 8000)], dtype=np.float32)))
        if pkg == "fillets-ng-data-cs":
            for path, x in picked:
                level = path.split("/")[-3]
                dev = hashlib.sha256(level.encode()).digest()[0] % 2 == 0
                out["cs_dev" if dev else "cs_test"].append(("cs", x))
        else:
            out["en_real"] += [("en", x) for _, x in picked]
    for k, v in out.items():
        if len(v) > limit:
            out[k] = [v[i] for i in np.unique(np.round(np.linspace(0, len(v) - 1, limit)).astype(int)).tolist()]
    return out


def answer(rule: OpenSet, post: np.ndarray, enc: np.ndarray, langs: list[str]) -> str:
    """The block's answer on a whole utterance: unknown, or the last-frame LID language."""
    if checkpoint_score(post, rule.score, rule.checkpoint_frames, enc, rule.probe) < rule.threshold:
        return UNKNOWN
    return langs[int(post[-1].argmax())]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpus", required=True, help="a `streamkit corpus asr` corpus (in-language dev and test)")
    ap.add_argument("--openset", required=True, help="a `streamkit corpus openset` corpus (non-model languages)")
    ap.add_argument("--model", required=True, help="an LID RNN-T weight file")
    ap.add_argument("--cache", default=None, help="directory of the pinned Debian packages (real Czech for dev, real English for test)")
    ap.add_argument("--work", default=None, help="where the packages are unpacked (default CACHE/unpacked)")
    ap.add_argument("--limit", type=int, default=100, help="utterances per language and split (default 100)")
    ap.add_argument("--real-limit", type=int, default=120, help="real files per set (default 120)")
    ap.add_argument("--max-false-unknown", type=float, default=0.03, help="false-unknown target on in-language dev (default 0.03)")
    ap.add_argument("--checkpoint-frames", type=int, default=30, help="early check at this frame (default 30 = the shutoff's tau)")
    ap.add_argument("--probe-limit", type=int, default=120, help="in-language train utterances per language for the probe (default 120)")
    ap.add_argument("--scores", default="all", help="score kinds to choose from, comma-separated (default all: last,mean,frame,probe)")
    ap.add_argument("--write-calibration", default=None, metavar="PATH", help="write the chosen rule here (the block's sidecar file)")
    ap.add_argument("--out", default=str(RESULTS / "rnnt_openset.json"))
    a = ap.parse_args(argv)
    torch.set_num_threads(1)
    t0 = time.monotonic()
    model, _meta = load_model(a.model)
    model = model.float().eval()
    langs = list(model.cfg.languages)
    corpus, openset = Path(a.corpus), Path(a.openset)

    def posts_of(items: list[tuple[str, Path]]) -> list[tuple[str, tuple[np.ndarray, np.ndarray]]]:
        return [(lg, posteriors(model, _read_wav(p))) for lg, p in items]

    sets: dict[str, list[tuple[str, tuple[np.ndarray, np.ndarray]]]] = {
        "in_train": posts_of(jsonl_set(corpus, "train", langs, a.probe_limit)),
        "in_dev": posts_of(jsonl_set(corpus, "dev", langs, a.limit)),
        "in_test": posts_of(jsonl_set(corpus, "test", langs, a.limit)),
        "neg_dev": posts_of(jsonl_set(openset, "dev", None, a.limit)),
        "neg_test": posts_of(jsonl_set(openset, "test", None, a.limit)),
    }
    if a.cache:
        real = real_sets(Path(a.cache), Path(a.work) if a.work else Path(a.cache) / "unpacked", a.real_limit)
        for k, v in real.items():
            sets[k] = [(lg, posteriors(model, x)) for lg, x in v]
    dev_neg = sets["neg_dev"] + sets.get("cs_dev", [])
    # the probe: in-language train utterances against the dev languages (never a test language)
    probe = fit_probe([e for _, (_, e) in sets["in_train"]], [e for _, (_, e) in sets["neg_dev"]], a.checkpoint_frames)  # espeak only: real negatives teach it "real = unknown"
    kinds = SCORES if a.scores == "all" else tuple(a.scores.split(","))
    rule, table = choose([p for _, (p, _) in sets["in_dev"]], [p for _, (p, _) in dev_neg], max_false_unknown=a.max_false_unknown,
                         checkpoint_frames=a.checkpoint_frames, kinds=kinds, pos_encs=[e for _, (_, e) in sets["in_dev"]],
                         neg_encs=[e for _, (_, e) in dev_neg], probe=probe)  # fmt: skip
    rule = OpenSet(rule.score, rule.threshold, rule.checkpoint_frames, rule.max_false_unknown,
                   {"scores": table, "in_language": len(sets["in_dev"]), "negatives": len(dev_neg),
                    "negative_sets": {"espeak": len(sets["neg_dev"]), "fillets-ng-data-cs": len(sets.get("cs_dev", []))}},
                   "python benchmarks/rnnt_openset.py " + " ".join(argv if argv is not None else __import__("sys").argv[1:]),
                   rule.probe)  # fmt: skip
    res: dict[str, Any] = {"model": Path(a.model).name, "rule": {k: v for k, v in rule.to_dict().items() if k != "probe"}, "sets": {},
                           "test_by_score": {}}  # fmt: skip
    for k in kinds:  # every kind at its own dev threshold, on the test sets (for the record; the choice is on dev)
        r = OpenSet(k, table[k]["threshold"], a.checkpoint_frames, probe=probe if k == "probe" else None)
        res["test_by_score"][k] = {n: round(100 * float(np.mean([answer(r, p, e, langs) == UNKNOWN for _, (p, e) in sets[n]])), 2)
                                   for n in ("in_test", "neg_test", "cs_test", "en_real") if sets.get(n)}  # fmt: skip
        print(f"  {k:<6} dev th {table[k]['threshold']:.3f}: unknown % " + ", ".join(f"{n} {v}" for n, v in res["test_by_score"][k].items()))
    for name, items in sets.items():
        ans = [answer(rule, p, e, langs) for _, (p, e) in items]
        ref = [lg for lg, _ in items]
        unk = float(np.mean([x == UNKNOWN for x in ans])) if ans else float("nan")
        row: dict[str, Any] = {"utterances": len(items), "unknown_pct": round(100 * unk, 2)}
        if items and ref[0] in langs:
            row["lid_pct"] = round(100 * float(np.mean([x == r for x, r in zip(ans, ref)])), 2)
            row["lid_closed_set_pct"] = round(100 * float(np.mean([langs[int(p[-1].argmax())] == r for r, (_, (p, _e)) in zip(ref, items)])), 2)
        per: dict[str, float] = {}
        for lg in dict.fromkeys(ref):
            per[lg] = round(100 * float(np.mean([x == UNKNOWN for x, r in zip(ans, ref) if r == lg])), 1)
        row["unknown_pct_per_language"] = per
        if items and ref[0] not in langs:
            closed = [langs[int(p[-1].argmax())] for _, (p, _e) in items]
            row["closed_set_answers"] = {lg: closed.count(lg) for lg in langs}
        res["sets"][name] = row
        print(f"{name:<9} n={len(items):<5} unknown {row['unknown_pct']:6.2f} %" + (f"  LID {row['lid_pct']:6.2f} % (closed set {row['lid_closed_set_pct']:.2f} %)" if "lid_pct" in row else ""), flush=True)  # fmt: skip
    print(f"rule: score {rule.score}, threshold {rule.threshold:.4f}, checkpoint {rule.checkpoint_frames}; dev: " +
          ", ".join(f"{k} th {v['threshold']:.3f} unknown {100 * v['unknown_rate']:.1f} %" for k, v in table.items()))  # fmt: skip
    res["seconds"] = round(time.monotonic() - t0, 1)
    res["machine"] = machine_info()
    res["command"] = rule.command
    write_result(Path(a.out), res)
    if a.write_calibration:
        rule.save(a.write_calibration)
    return 0
