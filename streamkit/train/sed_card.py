"""The end of ``streamkit train sed``: the selected state of a checkpoint scored on validation, eval and the synthetic
hold-out, written as the weight file with its model card."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import torch

from streamkit.io.outputs import write_text
from streamkit.models.sed_crnn import SedConfig, SedModel, n_params, save_model
from streamkit.models.sed_losses import parse_method
from streamkit.models.sed_post import median_frames
from streamkit.train.sed_corpus import SedCorpus
from streamkit.train.sed_labels import teacher_card
from streamkit.train.sed_options import TrainOptions
from streamkit.train.sed_score import predict_frames, score_probs

__all__ = ["finalize", "weights_path"]


def weights_path(out: str | Path) -> Path:
    """Where a ``--ema`` run writes the weights' own best state beside the shipped average: ``<stem>.weights.pt``."""
    out = Path(out)
    return out.with_name(out.stem + ".weights" + out.suffix)


def finalize(ckpt: Path, out: Path, corpus: SedCorpus, *, opts: TrainOptions, quiet: bool = False, load_s: float = 0.0) -> dict[str, Any]:
    """Write the best state of a checkpoint as the weight file and the model card; returns the card.

    A ``--ema`` run also writes the weights' own best state (selected on the same validation, same epochs) and its card
    at :func:`weights_path` (card ``training.ema`` None, ``training.ema_decay`` the run's): analysis, not shipped."""
    ck = torch.load(ckpt, map_location="cpu", weights_only=False)
    st = ck["state"]
    wb = st.get("weights_best") if opts.ema is not None else None
    if wb is not None:
        _write_model(ck, weights_path(out), corpus, opts=opts, quiet=quiet, load_s=load_s,
                     state=wb["state"], selected=(None, wb["epoch"], wb["f1"]))  # fmt: skip
    best = st["best_state"] if st.get("best_state") is not None else ck["model"]
    return _write_model(
        ck, out, corpus, opts=opts, quiet=quiet, load_s=load_s, state=best, selected=(opts.ema, st.get("best_epoch"), st.get("best_f1"))
    )


def _write_model(ck: dict[str, Any], out: Path, corpus: SedCorpus, *, opts: TrainOptions, quiet: bool, load_s: float,
                 state: dict[str, torch.Tensor], selected: tuple[float | None, int | None, float | None]) -> dict[str, Any]:  # fmt: skip
    """Score ``state`` and write it with its card; ``selected``: (EMA decay it was averaged with or None, epoch, val F1)."""
    import platform

    st = ck["state"]
    sel_ema, best_epoch, best_f1 = selected
    cfg = SedConfig.from_dict(ck["fingerprint"]["config"])
    model = SedModel(cfg)
    model.load_state_dict(state)
    model.eval()
    t0 = time.monotonic()
    n_s = ck["fingerprint"]["n_s"]
    metrics: dict[str, Any] = {}
    for name, sub, sl in (
        ("validation", "validation", slice(None)),
        ("eval", "eval", slice(None)),
        ("synthetic_holdout", "synthetic", slice(n_s, None)),
    ):
        if not corpus.files.get(sub):
            continue
        files = corpus.files[sub][sl]
        if not files:
            continue
        feats = corpus.features(sub, cfg, progress=not quiet)[sl]
        probs = predict_frames(model, feats)
        metrics[name] = score_probs(probs, files, corpus.strong[sub], cfg, median_s=opts.median_s, threshold=opts.threshold,
                                    clip_s=corpus.clip_s, psds=opts.psds)  # fmt: skip
        if not quiet:
            m = metrics[name]
            print(f"{name}: event F1 {m['event_f1']:.2f} %, segment F1 {m['segment_f1']:.2f} %, PSDS1 {m.get('psds1')}", file=sys.stderr, flush=True)
    adv, tri = parse_method(opts.method)
    rule = opts.pseudo_rule() if tri or opts.teacher is not None else None
    teacher = None if opts.teacher is None else teacher_card(opts.teacher, ck["fingerprint"]["teacher"]["sha256"])
    card = {
        "model": "streamkit.models.sed_crnn (CRNN: F = CNN + BiGRU, labelers F1/F2, final classifier Ft, domain classifier D behind a GRL)",
        "paper": "Park et al., Weakly labeled sound event detection using tri-training and adversarial learning (DCASE 2019 task 4)",
        "method": opts.method,
        "adversarial": adv,
        "tri_training": tri,
        "config": cfg.to_dict(),
        "parameters": n_params(model),
        "parameters_ft_path": n_params(model.F) + n_params(model.ft),
        "inference": "Ft frame probabilities; median filter per class, threshold, events (streamkit.models.sed_post)",
        "post_processing": {
            "median_s": opts.median_s,
            "median_frames": median_frames(opts.median_s, cfg.frame_seconds),
            "threshold": opts.threshold,
            "frame_s": cfg.frame_seconds,
        },  # fmt: skip
        "metrics": metrics,
        "metrics_note": "event-based (200 ms onset collar, offset max(200 ms, 20 %)) and segment-based (1 s) macro F1 in % via sed_eval; "
        "PSDS scenario 1 via sed_scores_eval on the median-free frame probabilities; validation: model selection set; eval: real "
        "domain, scored once; synthetic_holdout: the last synthetic clips, not trained on",
        "training": {
            "corpus_command": corpus.corpus_command(),
            "corpus_seed": corpus.manifest.get("seed"),
            "corpus_counts": corpus.manifest.get("counts"),
            "synthetic_train_clips": n_s,
            "synthetic_holdout": opts.synthetic_holdout,
            "seed": opts.seed,
            "epochs": opts.epochs,
            "extended_from_epochs": st.get("extended_from_epochs"),
            "steps": st["step"],
            "steps_per_epoch": max(1, n_s // opts.batch),
            "batch_per_subset": opts.batch,
            "lr": opts.lr,
            "optimiser": "Adam (0.9, 0.999), eps 1e-8",
            "grl_schedule": opts.grl_schedule if adv else None,
            "tri_epochs": opts.final_epochs() if tri else None,
            "orth_lambda": 1.0 if tri else None,
            "pseudo_threshold": rule["positive"] if rule else None,
            "pseudo_negative": rule["negative"] if rule else None,
            "pseudo_stats": st.get("pseudo_stats"),
            "relabel_every": opts.relabel_every if tri else None,
            "detach_labelers": bool(opts.detach_labelers) if tri else None,
            "pseudo_level": opts.pseudo_level if tri or teacher else None,
            "teacher": teacher,
            "init": None if opts.init is None else {"file": Path(opts.init).name, "sha256": ck["fingerprint"]["init"]},
            "pseudo_history": st.get("pseudo_history"),
            "pseudo_from": opts.pseudo_from if tri else None,
            "augment": (
                {
                    **opts.augment.to_dict(),
                    "what": "every training clip (S, W, U) from step 0: mel-bin shift, "
                    "FilterAugment (linear), level; pseudo-labels are made on clean clips",
                }
                if opts.augment is not None
                else None
            ),
            "ema": sel_ema,
            "ema_decay": opts.ema,
            "selection": (
                "best validation event-based macro F1 at epoch ends"
                + (" of the final (pseudo-label) stage" if tri else "")
                + (
                    f" of the weights' moving average (decay {sel_ema:g}, warm-up min(decay, (1 + step) / (10 + step)))"
                    if sel_ema is not None
                    else (f" of the weights (the run also kept their moving average, decay {opts.ema:g})" if opts.ema is not None else "")
                )
            ),  # fmt: skip
            "best_epoch": best_epoch,
            "best_val_event_f1": best_f1,
            "wall_time_s": round(st["elapsed_s"], 1),
            "feature_load_s": round(load_s, 1),
            "runs": st.get("runs", 1),
            "threads": opts.threads,
            "history": st["history"],
        },
        "final_eval_s": round(time.monotonic() - t0, 1),
        "torch": torch.__version__,
        "machine": {"platform": platform.platform(), "cpu_count": os.cpu_count()},
        "created": time.strftime("%Y-%m-%d %H:%M:%S"),
    }
    save_model(out, model, meta={"card": out.with_suffix(".json").name, "method": opts.method, "steps": st["step"], "seed": opts.seed,
                                 "post_processing": card["post_processing"]})  # fmt: skip
    write_text(out.with_suffix(".json"), json.dumps(card, indent=1) + "\n")
    if not quiet:
        print(f"wrote {out} and {out.with_suffix('.json').name}", file=sys.stderr, flush=True)
    return card
