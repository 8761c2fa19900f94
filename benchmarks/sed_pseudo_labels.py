"""Quality of the tri-training pseudo-labels by threshold rule, on the strongly labelled validation set.

Usage::

    streamkit train sed --corpus DIR --method adv-time+tri --out L/sed.pt --epochs 10 --tri-epochs 5 \\
        --grl-scale 0.1 --threads 1 --max-steps 3000          # stops at the switch: L/sed.ckpt
    .venv/bin/python benchmarks/sed_pseudo_labels.py --corpus DIR --ckpt L/sed.ckpt

The labelers F1 and F2 of a training checkpoint (normally one stopped at the switch to the final
stage, so they are the ones that make the labels) label the validation clips, which have strong
labels; so the rules' labels can be compared with the truth, as they cannot on the weak and
unlabelled clips they are made for. For each rule (``--pseudo-threshold`` P, ``--pseudo-negative``
N of ``streamkit train sed``: positive where both labelers are > P, negative where both are < N)
it reports, over all frames and classes: the share labelled positive, the positives' precision, the
recall of the true event frames, the share of true event frames labelled *negative* (what teaches
the final classifier to miss events), and the labelled share. ``gated`` applies what training does on
the weak clips (frames of classes absent from the clip's tags are negatives; here the tags come from
the strong labels); ungated is the unlabelled clips' case. Per-class recall and event-to-negative
rates are listed for the paper's rule and the most permissive one.

Clip-level labels (what ``--pseudo-level clip`` keeps for the unlabelled clips) are scored the same
way against the clips' true tags, and each head (F1, F2, Ft) gets its validation event-based macro
F1 with the default post-processing, so labelers and final classifier can be compared at the switch.

``--teacher ema`` scores the labelers of the checkpoint's moving average (a ``--ema`` run; what
``--pseudo-from ema`` labels with). ``--subset unlabelled`` or ``weak`` scores the clips the labels
are made for, against the generator's truth (``<subset>/meta.json``, which training never reads
except for ``--oracle-labels``); on ``weak`` every row is gated by the clips' tags. ``positive_rows``
score what ``--pseudo-level positive`` keeps (:func:`streamkit.train.sed.positive_frames`: frame
positives inside the classes the clip holds, every frame of a class it lacks negative; the clip
labels by the same rule, or the tags when gated).

``--model MODEL.pt`` (instead of ``--ckpt``) scores a finished model's final classifier Ft as the labeler in
both roles (F1 = F2 = Ft): what ``streamkit train sed --teacher MODEL.pt`` labels the clips with.

``--tta-shifts 0,-4,4`` scores labels made with test-time augmentation (not used by the trainer): each
labeler's frame and clip probabilities are the mean (``--tta-reduce mean``) or the largest (``max``) over
the clips shifted by those mel bins (:func:`streamkit.train.sed_augment.mel_shift`, the augmentation's
shift). The wide corpus shifts every real source's frequencies by 0.7-1.4x, 14-17 bins at the ends of that
range, beyond ``--augment``'s 8; on validation the per-head F1 of F1 and F2 then scores their augmented
probabilities (Ft's stays plain). ``--clips N`` scores the subset's first N clips only.

Writes ``benchmarks/results/sed_pseudo_labels.json`` (``--out``); no absolute paths.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from streamkit.core.machine import machine_info  # noqa: E402
from streamkit.io.outputs import write_text  # noqa: E402
from streamkit.models.sed_crnn import SedConfig, SedModel, events_to_frames  # noqa: E402
from streamkit.train.sed import SedCorpus, hysteresis_mask, positive_frames, predict_frames, score_probs  # noqa: E402
from streamkit.train.sed_augment import mel_shift  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results"
RULES = ((0.5, 0.5), (0.5, 0.1), (0.5, 0.05), (0.4, 0.2), (0.3, 0.3), (0.3, 0.1), (0.2, 0.1))
SUBSETS = ("validation", "unlabelled", "weak")
#: --pseudo-level positive with hysteresis: (P, N, low): frame positives grown from > P through frames both above low
HYSTERESIS_RULES = ((0.5, 0.05, 0.3), (0.5, 0.05, 0.2), (0.5, 0.05, 0.1))


def rule_stats(p1: np.ndarray, p2: np.ndarray, y: np.ndarray, pos: float, neg: float, gated: bool) -> dict[str, Any]:
    """Pseudo-labels of one rule against the truth ``y`` (N, T, K) bool."""
    positive = (p1 > pos) & (p2 > pos)
    negative = (p1 < neg) & (p2 < neg)
    if gated:
        absent = ~y.any(axis=1, keepdims=True)  # the clip's tags, broadcast over frames
        positive &= ~absent
        negative |= absent
    per_k = y.sum(axis=(0, 1)).clip(min=1)
    return {
        **_stats(positive, negative, y),
        "recall_per_class": ((positive & y).sum(axis=(0, 1)) / per_k).round(4).tolist(),
        "events_to_negative_per_class": ((negative & y).sum(axis=(0, 1)) / per_k).round(4).tolist(),
    }


def _stats(positive: np.ndarray, negative: np.ndarray, y: np.ndarray) -> dict[str, Any]:
    """Share labelled positive, precision, recall, true event frames labelled negative, labelled share."""
    n_true = max(int(y.sum()), 1)
    return {
        "positive_share": round(float(positive.mean()), 4),
        "precision": round(float((positive & y).sum() / max(int(positive.sum()), 1)), 4),
        "recall": round(float((positive & y).sum() / n_true), 4),
        "events_to_negative": round(float((negative & y).sum() / n_true), 4),
        "labelled_share": round(float((positive | negative).mean()), 4),
    }


def positive_rule_stats(p1: np.ndarray, p2: np.ndarray, c1: np.ndarray, c2: np.ndarray, y: np.ndarray, pos: float, neg: float,
                        gated: bool, low: float | None = None) -> dict[str, Any]:  # fmt: skip
    """What ``--pseudo-level positive`` keeps of one rule, against the truth ``y`` (N, T, K) bool: frame positives of the
    rule inside the classes whose clip label (the rule on ``c1``/``c2``, or the true tags when ``gated``) is 1, every
    frame of a class whose clip label is 0 negative. ``low``: the frame positives grow by hysteresis
    (:func:`streamkit.train.sed.hysteresis_mask`) through the frames where both are above ``low``."""
    high = (p1 > pos) & (p2 > pos)
    frame = (high if low is None else hysteresis_mask(high, (p1 > low) & (p2 > low))).astype(np.int8)
    if gated:
        clip = y.any(axis=1).astype(np.int8)
    else:
        clip = np.where((c1 > pos) & (c2 > pos), 1, np.where((c1 < neg) & (c2 < neg), 0, -1)).astype(np.int8)
    lab = positive_frames(frame, clip)
    return _stats(lab == 1, lab == 0, y)


def clip_rule_stats(c1: np.ndarray, c2: np.ndarray, tags: np.ndarray, pos: float, neg: float) -> dict[str, Any]:
    """Clip-level pseudo-labels (N, K) of one rule against the true tags (N, K) bool: :func:`rule_stats` on one-frame clips."""
    r = rule_stats(c1[:, None, :], c2[:, None, :], tags[:, None, :], pos, neg, gated=False)
    return {"positive_share": r["positive_share"], "precision": r["precision"], "recall": r["recall"],
            "tags_to_negative": r["events_to_negative"], "labelled_share": r["labelled_share"]}  # fmt: skip


@torch.no_grad()
def labeler_probs(model: SedModel, feats: np.ndarray, heads: tuple[str, str], shifts: tuple[int, ...] = (0,), reduce: str = "mean",
                  batch: int = 32) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:  # fmt: skip
    """Frame (N, T', K) and clip (N, K) probabilities of the two labelers ``heads``: ``(p1, p2, c1, c2)`` (eval mode;
    one forward pass per batch and shift for both heads). Over several mel ``shifts``, their mean or max (``reduce``)."""
    if reduce not in ("mean", "max") or not shifts:
        raise ValueError(f"reduce must be 'mean' or 'max' over at least one shift, got {reduce!r} over {shifts!r}")
    model.eval()
    names = tuple(dict.fromkeys(heads))  # (F1 = F2 = Ft for a finished model: computed once)
    acc: dict[tuple[str, str], np.ndarray] = {}
    for k in shifts:
        parts: dict[tuple[str, str], list[np.ndarray]] = {(h, kind): [] for h in names for kind in ("frame", "clip")}
        for i in range(0, feats.shape[0], batch):
            x = np.asarray(feats[i : i + batch], dtype=np.float32)
            o = model(torch.from_numpy(mel_shift(x, k) if k else x), heads=names)
            for h, kind in parts:
                parts[(h, kind)].append(o[h][kind].numpy())
        for key, p in parts.items():
            got = np.concatenate(p)
            acc[key] = got if key not in acc else (acc[key] + got if reduce == "mean" else np.maximum(acc[key], got))
    if reduce == "mean":
        acc = {key: a / len(shifts) for key, a in acc.items()}
    p1, p2, c1, c2 = (acc[(h, kind)] for kind in ("frame", "clip") for h in heads)
    return p1, p2, c1, c2


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--corpus", required=True, type=Path, help="a `streamkit corpus sed` directory")
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--ckpt", type=Path, help="a `streamkit train sed` checkpoint of a tri-training method")
    src.add_argument("--model", type=Path, help="a finished model file: its Ft labels (what --teacher MODEL.pt uses)")
    ap.add_argument("--teacher", choices=("weights", "ema"), default="weights",
                    help="the labelers of the weights (default) or of the checkpoint's moving average (--ema runs)")
    ap.add_argument("--subset", choices=SUBSETS, default="validation",
                    help="validation (default, its strong labels) or the clips labelled in training, scored against the generator's truth")
    ap.add_argument("--tta-shifts", default="0", metavar="K,K,...",
                    help="test-time augmentation: the labelers' probabilities over these mel-bin shifts (default 0: none)")
    ap.add_argument("--tta-reduce", choices=("mean", "max"), default="mean", help="how the shifts' probabilities combine (default mean)")
    ap.add_argument("--clips", type=int, default=None, metavar="N", help="score the subset's first N clips only")
    ap.add_argument("--out", type=Path, default=RESULTS / "sed_pseudo_labels.json")
    a = ap.parse_args(argv)
    try:
        a.tta_shifts = tuple(int(k) for k in a.tta_shifts.split(","))
    except ValueError:
        ap.error(f"--tta-shifts takes whole mel-bin shifts separated by commas, got {a.tta_shifts!r}")
    if a.clips is not None and a.clips < 1:
        ap.error(f"--clips must be >= 1, got {a.clips}")
    torch.set_num_threads(1)
    if a.model is not None:
        return _main_model(a)
    try:
        ck = torch.load(a.ckpt, map_location="cpu", weights_only=False)
    except Exception as e:  # noqa: BLE001
        raise SystemExit(f"{a.ckpt}: not readable as a checkpoint: {type(e).__name__}: {e}") from None
    if not isinstance(ck, dict) or "fingerprint" not in ck or "model" not in ck:
        raise SystemExit(f"{a.ckpt}: not a `streamkit train sed` checkpoint")
    fp = ck["fingerprint"]
    if "tri" not in fp["method"]:
        raise SystemExit(f"{a.ckpt}: method {fp['method']!r} has no labelers")
    cfg = SedConfig.from_dict(fp["config"])
    state = ck["model"]
    if a.teacher == "ema":
        state = (ck.get("state") or {}).get("ema")
        if state is None:
            raise SystemExit(f"{a.ckpt}: no moving average in this checkpoint (train with --ema DECAY)")
    model = SedModel(cfg)
    model.load_state_dict(state)
    model.eval()
    step = ck["state"]["step"]
    hist = ck["state"].get("history") or []
    info = {"checkpoint_step": step, "method": fp["method"], "seed": fp["seed"],
            "labeler_stage_val_event_f1": [h["val_event_f1"] for h in hist if h.get("stage") == "labelers"]}  # fmt: skip
    who = f"the {'moving average' if a.teacher == 'ema' else 'weights'}' labelers at step {step} ({fp['method']}, seed {fp['seed']})"
    return _report(a, model, ("f1", "f2"), info, who, bool(fp.get("detach_labelers", False)),
                   f"python benchmarks/sed_pseudo_labels.py --corpus CORPUS --ckpt sed.ckpt --teacher {a.teacher} --subset {a.subset}")


def _main_model(a: argparse.Namespace) -> int:
    """``--model``: a finished model's Ft in both labeler roles."""
    from streamkit.core.errors import ModelError
    from streamkit.models.sed_crnn import load_model

    try:
        model, meta = load_model(a.model)
    except ModelError as e:
        raise SystemExit(f"error: {e}") from None
    info = {"checkpoint_step": meta.get("steps"), "method": meta.get("method"), "seed": meta.get("seed"), "model": a.model.name}
    who = f"the final classifier Ft of {a.model.name} ({meta.get('method')}, seed {meta.get('seed')}, {meta.get('steps')} steps)"
    return _report(a, model, ("ft", "ft"), info, who, None,
                   f"python benchmarks/sed_pseudo_labels.py --corpus CORPUS --model {a.model.name} --subset {a.subset}")


def _report(a: argparse.Namespace, model: SedModel, heads: tuple[str, str], info: dict[str, Any], who: str, detached: bool | None,
            command: str) -> int:  # fmt: skip
    """Score the labels of ``heads`` (the two labelers) of ``model`` on ``a.subset``; print the tables, write the JSON."""
    cfg = model.cfg
    corpus = SedCorpus(a.corpus)
    corpus.require(a.subset)
    sub = a.subset
    files = corpus.files[sub][: a.clips]
    feats = corpus.features(sub, cfg, progress=False)[: len(files)]
    p1, p2, c1, c2 = labeler_probs(model, feats, heads, a.tta_shifts, a.tta_reduce)
    t_out = p1.shape[1]
    if sub == "validation":
        events = {f: [(e.event_label, e.onset, e.offset) for e in corpus.strong[sub][f]] for f in files}
    else:
        events = corpus.generator_truth(sub)
    y = np.stack([events_to_frames(events.get(f, []), t_out, cfg).numpy() for f in files]).astype(bool)
    tags = y.any(axis=1)
    clip_rows = [{"threshold": pos, "negative": neg, **clip_rule_stats(c1, c2, tags, pos, neg)} for pos, neg in RULES]
    heads_f1 = {}
    if sub == "validation":  # (only the validation clips have strong labels in the DCASE format to score with)
        pt = predict_frames(model, feats, head="ft")
        for h, p in ((("f1", p1), ("f2", p2), ("ft", pt)) if heads != ("ft", "ft") else (("ft", pt),)):
            sc = score_probs(p, files, corpus.strong["validation"], cfg, clip_s=corpus.clip_s)
            heads_f1[h] = {"event_f1": sc["event_f1"], "segment_f1": sc["segment_f1"]}
    rows, positive_rows = [], []
    for gated in (False, True) if sub != "weak" else (True,):  # (training always gates the weak clips by their tags)
        for pos, neg in RULES:
            rows.append({"gated": gated, "threshold": pos, "negative": neg, **rule_stats(p1, p2, y, pos, neg, gated)})
            positive_rows.append({"gated": gated, "threshold": pos, "negative": neg,
                                  **positive_rule_stats(p1, p2, c1, c2, y, pos, neg, gated)})  # fmt: skip
        for pos, neg, low in HYSTERESIS_RULES:
            positive_rows.append({"gated": gated, "threshold": pos, "negative": neg, "hysteresis_low": low,
                                  **positive_rule_stats(p1, p2, c1, c2, y, pos, neg, gated, low=low)})  # fmt: skip
    tta = "" if a.tta_shifts == (0,) else f" ({a.tta_reduce} over mel shifts {', '.join(map(str, a.tta_shifts))})"
    print(f"\npseudo-labels of {who}{tta} on {len(files)} {sub} clips; "
          f"true event frames {y.mean() * 100:.2f} % of frames x classes\n")  # fmt: skip
    print("| rule (positive > P, negative < N) | gated | positive % | precision | recall | events → negative | labelled % |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: |")
    for r in rows:
        print(f"| P {r['threshold']:g}, N {r['negative']:g} | {'yes' if r['gated'] else 'no'} | {100 * r['positive_share']:.2f} | "
              f"{r['precision']:.3f} | {r['recall']:.3f} | {r['events_to_negative']:.3f} | {100 * r['labelled_share']:.1f} |")  # fmt: skip
    print("\n--pseudo-level positive (frame positives inside held classes, absent classes negative)\n")
    print("| rule (positive > P, negative < N) | gated | positive % | precision | recall | events → negative | labelled % |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: |")
    for r in positive_rows:
        hy = f" (hysteresis > {r['hysteresis_low']:g})" if "hysteresis_low" in r else ""
        print(f"| P {r['threshold']:g}{hy}, N {r['negative']:g} | {'yes' if r['gated'] else 'no'} | {100 * r['positive_share']:.2f} | "
              f"{r['precision']:.3f} | {r['recall']:.3f} | {r['events_to_negative']:.3f} | {100 * r['labelled_share']:.1f} |")  # fmt: skip
    print(f"\nclip level (true tags {tags.mean() * 100:.2f} % of clips x classes)\n")
    print("| rule (positive > P, negative < N) | positive % | precision | recall | tags → negative | labelled % |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for r in clip_rows:
        print(f"| P {r['threshold']:g}, N {r['negative']:g} | {100 * r['positive_share']:.2f} | {r['precision']:.3f} | {r['recall']:.3f} | "
              f"{r['tags_to_negative']:.3f} | {100 * r['labelled_share']:.1f} |")  # fmt: skip
    if heads_f1:
        print("\nvalidation event / segment F1 per head (median 0.45 s, threshold 0.5): "
              + ", ".join(f"{h} {v['event_f1']:.2f} / {v['segment_f1']:.2f}" for h, v in heads_f1.items()))
    g0 = rows[0]["gated"]
    print(f"\nper class ({'gated' if g0 else 'ungated'}): recall / events → negative")
    for k, c in enumerate(cfg.classes):
        a5 = next(r for r in rows if r["gated"] == g0 and r["threshold"] == 0.5 and r["negative"] == 0.5)
        a2 = next(r for r in rows if r["gated"] == g0 and r["threshold"] == 0.2 and r["negative"] == 0.1)
        print(f"  {c:28} P 0.5, N 0.5: {a5['recall_per_class'][k]:.3f} / {a5['events_to_negative_per_class'][k]:.3f}   "
              f"P 0.2, N 0.1: {a2['recall_per_class'][k]:.3f} / {a2['events_to_negative_per_class'][k]:.3f}")  # fmt: skip
    out = {
        "benchmark": "sed_pseudo_labels",
        **info,
        "corpus_command": corpus.corpus_command(),
        "teacher": a.teacher if a.model is None else "Ft",
        "subset": sub,
        "truth": "strong labels" if sub == "validation" else "the generator's truth (meta.json; analysis only)",
        "clips": len(files),
        "tta": {"shifts": list(a.tta_shifts), "reduce": a.tta_reduce},  # the labelers' test-time augmentation (shifts [0]: none)
        "true_event_share": round(float(y.mean()), 4),
        "classes": list(cfg.classes),
        "rows": rows,
        "true_tag_share": round(float(tags.mean()), 4),
        "clip_rows": clip_rows,
        "positive_rows": positive_rows,
        "validation_f1_per_head": heads_f1,
        "detach_labelers": detached,
        "labeler_hidden": cfg.labeler_hidden,  # F1/F2's own hidden layer (None: as Ft's)
        "machine": machine_info(),
        "command": command + ("" if a.tta_shifts == (0,) else f" --tta-shifts {','.join(map(str, a.tta_shifts))} --tta-reduce {a.tta_reduce}")
        + ("" if a.clips is None else f" --clips {a.clips}"),
    }
    a.out.parent.mkdir(parents=True, exist_ok=True)
    write_text(a.out, json.dumps(out, indent=1) + "\n", encoding="utf-8")
    print(f"\nwrote {a.out.resolve().relative_to(ROOT) if a.out.resolve().is_relative_to(ROOT) else a.out.name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
