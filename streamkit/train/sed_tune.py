"""Per-class post-processing of SED frame probabilities, fitted on the validation set.

The CRNN's frame probabilities become events through a median filter and a threshold
(:mod:`streamkit.models.sed_post`). The trainer and the Table 1 benchmark use one setting for
every class (0.45 s, 0.5: the DCASE 2020 baseline's). Classes differ in how long their events last
(a dog bark against running water) and in how well calibrated their probabilities are, and DCASE
systems commonly choose the median window and the decision threshold per class on the validation
set. This module does that, as a grid search:

* for every ``(threshold, median)`` of the grid, the validation clips' events are made with that
  setting for all classes and scored once with sed_eval (:func:`streamkit.eval.sed.event_based`);
* event-based F1 of a class depends only on that class's events, so each class takes the grid
  point with its best validation F1 (ties: the point nearest the default setting, then the
  smaller window), and the macro F1 of the chosen settings is the mean of those per-class bests;
* ``global`` is the single grid point with the best validation macro F1, the simpler alternative;
* a class without validation events keeps the default setting;
* with the clip-level probabilities (``clips=``, ``streamkit train sed-post`` passes them), each
  class then also takes a **clip gate** (:func:`streamkit.models.sed_post.clip_gate`: no events of
  a class in a clip whose clip-level probability is below it) from :data:`DEFAULT_GATES`, scored
  with its chosen threshold and window (ties: the lower gate; 0 = none).

The result (:class:`PostTuning`) lists per class the threshold, the median window (frames and
seconds) and its validation F1 against the default's. :func:`tuned_events` applies it;
the streaming block takes the same per-class values (``median_s``, ``threshold_high``).

``streamkit train sed-post --model IN.pt --corpus DIR --out OUT.pt`` fits them for a weight file
and writes a copy whose weights are unchanged and whose ``meta["post_tuned"]``
(:func:`post_meta`) holds the per-class settings; ``models.sed(post="tuned")`` and
``streamkit sed --post tuned`` use them.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from streamkit.models.sed_post import DEFAULT_MEDIAN_S, DEFAULT_THRESHOLD, META_KEY, clip_gate, frames_to_events, median_frames, post_from_meta

__all__ = [
    "DEFAULT_GATES",
    "DEFAULT_THRESHOLDS",
    "DEFAULT_MEDIANS_S",
    "PostSetting",
    "PostTuning",
    "add_arguments",
    "events_for",
    "post_from_meta",
    "post_meta",
    "run_from_args",
    "tune_post",
    "tuned_events",
]

#: threshold grid (0.1 ... 0.9 in steps of 0.05)
DEFAULT_THRESHOLDS: tuple[float, ...] = tuple(round(0.1 + 0.05 * i, 2) for i in range(17))
#: median window grid in seconds (1, 3, 5, 7, 9, 13, 17, 23, 31, 39, 47 frames of 64 ms); the
#: first run's grid stopped at 23 frames (1.47 s), which most classes chose, so it goes to 3 s
DEFAULT_MEDIANS_S: tuple[float, ...] = (0.0, 0.19, 0.32, 0.45, 0.58, 0.83, 1.09, 1.47, 1.98, 2.5, 3.0)
#: clip gate grid (0: none). On the wide corpus's 45-epoch models one gate for all classes gained
#: validation F1 up to 0.9-0.95 and lost at 0.98 (docs/experiments.md, SED)
DEFAULT_GATES: tuple[float, ...] = (0.0, 0.3, 0.5, 0.7, 0.8, 0.9, 0.95)


@dataclass(frozen=True)
class PostSetting:
    """One class's post-processing: threshold, median window and its validation event F1 (%)."""

    threshold: float
    median_frames: int
    median_s: float
    val_f1: float | None
    default_val_f1: float | None
    clip_gate: float = 0.0
    ungated_val_f1: float | None = None


@dataclass(frozen=True)
class PostTuning:
    """Per-class settings (``per_class``) and the best single setting for all classes (``global_``)."""

    classes: tuple[str, ...]
    per_class: dict[str, PostSetting]
    global_threshold: float
    global_median_frames: int
    global_median_s: float
    val_macro_f1_default: float
    val_macro_f1_global: float
    val_macro_f1_per_class: float
    grid: dict[str, list[float]] = field(default_factory=dict)
    val_macro_f1_per_class_ungated: float | None = None

    def clip_gates(self) -> list[float]:
        return [self.per_class[c].clip_gate for c in self.classes]

    def thresholds(self) -> list[float]:
        return [self.per_class[c].threshold for c in self.classes]

    def median_frames(self) -> list[int]:
        return [self.per_class[c].median_frames for c in self.classes]

    def medians_s(self) -> list[float]:
        return [self.per_class[c].median_s for c in self.classes]

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["classes"] = list(self.classes)
        return d


def events_for(
    probs: Sequence[np.ndarray],
    files: Sequence[str],
    cfg: Any,
    *,
    threshold: float | Sequence[float],
    median: int | Sequence[int],
    clips: Sequence[np.ndarray] | None = None,
    gate: float | Sequence[float] = 0.0,
) -> dict[str, list[Any]]:
    """Events per file (:class:`streamkit.eval.sed.Event`) of per-file ``(T, K)`` probabilities,
    gated by the per-file ``(K,)`` clip probabilities ``clips`` when given."""
    from streamkit.eval.sed import Event

    if len(probs) != len(files):
        raise ValueError(f"{len(probs)} probability arrays for {len(files)} files")
    if clips is not None and len(clips) != len(files):
        raise ValueError(f"{len(clips)} clip probability vectors for {len(files)} files")
    if clips is not None:
        probs = [clip_gate(p, c, gate) for p, c in zip(probs, clips)]
    return {
        f: [Event(f, on, off, lab) for lab, on, off, _c in frames_to_events(p, cfg, median=median, threshold=threshold)] for f, p in zip(files, probs)
    }


def tuned_events(
    probs: Sequence[np.ndarray],
    files: Sequence[str],
    cfg: Any,
    tuning: PostTuning,
    *,
    mode: str = "per-class",
    clips: Sequence[np.ndarray] | None = None,
) -> dict[str, list[Any]]:
    """Events with ``tuning`` applied: ``mode`` ``per-class`` (with its clip gates when ``clips`` are given) or ``global``."""
    if tuple(cfg.classes) != tuning.classes:
        raise ValueError(f"the tuning is for classes {list(tuning.classes)}, the model has {list(cfg.classes)}")
    if mode == "per-class":
        return events_for(probs, files, cfg, threshold=tuning.thresholds(), median=tuning.median_frames(), clips=clips, gate=tuning.clip_gates())
    if mode == "global":
        return events_for(probs, files, cfg, threshold=tuning.global_threshold, median=tuning.global_median_frames)
    raise ValueError(f"mode must be 'per-class' or 'global', got {mode!r}")


def _pct(x: float) -> float | None:
    return None if x != x else round(100.0 * x, 2)


def tune_post(
    probs: Sequence[np.ndarray],
    files: Sequence[str],
    reference: Mapping[str, Sequence[Any]],
    cfg: Any,
    *,
    thresholds: Sequence[float] = DEFAULT_THRESHOLDS,
    medians_s: Sequence[float] = DEFAULT_MEDIANS_S,
    default_threshold: float = DEFAULT_THRESHOLD,
    default_median_s: float = DEFAULT_MEDIAN_S,
    clips: Sequence[np.ndarray] | None = None,
    gates: Sequence[float] = DEFAULT_GATES,
) -> PostTuning:
    """Choose each class's threshold and median window by validation event F1 (module docstring).

    ``probs``: one ``(T, K)`` array per file of ``files``; ``reference``: strong labels per file
    (files without events may be missing); ``cfg``: the model config (classes, frame grid).
    ``clips``: one ``(K,)`` clip-level probability vector per file; then each class also gets a
    clip gate from ``gates``.
    """
    from streamkit.eval.sed import event_based

    classes = tuple(cfg.classes)
    if not thresholds or not medians_s:
        raise ValueError("the grid needs at least one threshold and one median window")
    for t in thresholds:
        if not 0.0 < float(t) < 1.0:
            raise ValueError(f"thresholds must lie in (0, 1), got {t}")
    fs = float(cfg.frame_seconds)
    meds = sorted({median_frames(float(m), fs) for m in medians_s})
    ths = sorted({round(float(t), 6) for t in thresholds})
    d_med = median_frames(default_median_s, fs)
    d_th = float(default_threshold)
    ref = {f: list(reference.get(f, [])) for f in files}
    n_ref = {c: 0 for c in classes}
    for evs in ref.values():
        for e in evs:
            if e.event_label in n_ref:
                n_ref[e.event_label] += 1

    def score(th: float, med: int) -> tuple[dict[str, float], float]:
        s = event_based(ref, events_for(probs, files, cfg, threshold=th, median=med), classes=classes, files=files)
        return {c: s.per_class[c].f1 for c in classes}, s.macro_f1

    points = [(th, med) for med in meds for th in ths]
    if (d_th, d_med) not in points:
        points.append((d_th, d_med))
    results = {p: score(*p) for p in points}
    default_pc, default_macro = results[(d_th, d_med)]

    def closeness(p: tuple[float, int]) -> tuple[float, int]:
        return (abs(p[0] - d_th) + abs(p[1] - d_med) * fs, p[1])

    per_class: dict[str, PostSetting] = {}
    for c in classes:
        if n_ref[c] == 0:
            best = (d_th, d_med)
        else:
            best = min(points, key=lambda p: (-(results[p][0][c] if results[p][0][c] == results[p][0][c] else -1.0), *closeness(p)))
        per_class[c] = PostSetting(
            threshold=best[0], median_frames=best[1], median_s=round(best[1] * fs, 3),
            val_f1=_pct(results[best][0][c]), default_val_f1=_pct(default_pc[c]),
        )  # fmt: skip
    g = min(points, key=lambda p: (-(results[p][1] if results[p][1] == results[p][1] else -1.0), *closeness(p)))
    chosen = [results[(per_class[c].threshold, per_class[c].median_frames)][0][c] for c in classes]
    chosen = [x for x in chosen if x == x]
    ungated = None
    if clips is not None:
        ungated = _pct(float(np.mean(chosen))) if chosen else 0.0
        per_class, chosen = _fit_gates(probs, files, ref, cfg, per_class, clips, gates, n_ref)
    return PostTuning(
        classes=classes,
        per_class=per_class,
        global_threshold=g[0],
        global_median_frames=g[1],
        global_median_s=round(g[1] * fs, 3),
        val_macro_f1_default=_pct(default_macro) or 0.0,
        val_macro_f1_global=_pct(results[g][1]) or 0.0,
        val_macro_f1_per_class=_pct(float(np.mean(chosen))) if chosen else 0.0,
        grid={"thresholds": list(ths), "median_frames": [float(m) for m in meds], **({"clip_gates": sorted({0.0, *map(float, gates)})} if clips is not None else {})},
        val_macro_f1_per_class_ungated=ungated,
    )


def _fit_gates(
    probs: Sequence[np.ndarray],
    files: Sequence[str],
    ref: Mapping[str, Sequence[Any]],
    cfg: Any,
    per_class: dict[str, PostSetting],
    clips: Sequence[np.ndarray],
    gates: Sequence[float],
    n_ref: Mapping[str, int],
) -> tuple[dict[str, PostSetting], list[float]]:
    """Each class's clip gate at its chosen threshold and window (a class's F1 depends only on its own events)."""
    from streamkit.eval.sed import event_based

    classes = tuple(cfg.classes)
    if len(clips) != len(files):
        raise ValueError(f"{len(clips)} clip probability vectors for {len(files)} files")
    grid = sorted({0.0, *(float(x) for x in gates)})
    for x in grid:
        if not 0.0 <= x <= 1.0:
            raise ValueError(f"clip gates must lie in [0, 1], got {x}")
    th = [per_class[c].threshold for c in classes]
    med = [per_class[c].median_frames for c in classes]
    f1 = {}
    for x in grid:
        s = event_based(ref, events_for(probs, files, cfg, threshold=th, median=med, clips=clips, gate=x), classes=classes, files=files)
        f1[x] = {c: s.per_class[c].f1 for c in classes}
    out: dict[str, PostSetting] = {}
    for c in classes:
        best = 0.0 if n_ref[c] == 0 else min(grid, key=lambda x: (-(f1[x][c] if f1[x][c] == f1[x][c] else -1.0), x))
        out[c] = replace(per_class[c], clip_gate=best, ungated_val_f1=per_class[c].val_f1, val_f1=_pct(f1[best][c]))
    chosen = [f1[out[c].clip_gate][c] for c in classes]
    return out, [x for x in chosen if x == x]


# ------------------------------------------------------------------------------------------------
# the weight file's tuned setting, and `streamkit train sed-post`
# ------------------------------------------------------------------------------------------------


def post_meta(tuning: PostTuning, *, source: str, corpus_command: str | None) -> dict[str, Any]:
    """``meta["post_tuned"]`` of a weight file: per-class ``median_s`` and ``threshold`` and where they come from."""
    return {
        "median_s": {c: tuning.per_class[c].median_s for c in tuning.classes},
        "threshold": {c: tuning.per_class[c].threshold for c in tuning.classes},
        **({"clip_gate": {c: tuning.per_class[c].clip_gate for c in tuning.classes}} if tuning.val_macro_f1_per_class_ungated is not None else {}),
        "val_event_f1": {c: tuning.per_class[c].val_f1 for c in tuning.classes},
        "val_macro_event_f1": {
            "default": tuning.val_macro_f1_default,
            "global": tuning.val_macro_f1_global,
            "per_class": tuning.val_macro_f1_per_class,
            **({"per_class_ungated": tuning.val_macro_f1_per_class_ungated} if tuning.val_macro_f1_per_class_ungated is not None else {}),
        },
        "grid": tuning.grid,
        "fitted_on": "validation subset, event-based F1 per class (streamkit.train.sed_tune)",
        "source": source,
        "corpus_command": corpus_command,
    }


def add_arguments(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
    p.add_argument("--model", required=True, metavar="PATH", help="a SED weight file from `streamkit train sed`")
    p.add_argument("--corpus", required=True, metavar="DIR", help="the `streamkit corpus sed` corpus (its validation subset is used)")
    p.add_argument(
        "--out", required=True, metavar="PATH", help="weight file to write (may equal --model): the same weights, meta['post_tuned'] added"
    )
    p.add_argument("--cache", default=None, metavar="DIR", help="log-mel cache directory (default <corpus>/features)")
    p.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    p.add_argument("--no-clip-gate", action="store_true", help="fit threshold and median window only (no per-class clip gate)")
    p.add_argument("--quiet", action="store_true")
    return p


def run_from_args(a: argparse.Namespace) -> int:
    """``streamkit train sed-post``: 0 on success, 2 on a bad model, corpus or option (one ``error:`` line)."""
    import torch

    from streamkit.models.checkpoint import ModelError
    from streamkit.models.sed_crnn import load_model, save_model
    from streamkit.train.sed import CorpusError, SedCorpus, predict_frames_and_clips

    try:
        if not 1 <= int(a.threads) <= 256:
            raise ValueError(f"--threads must be in 1..256, got {a.threads}")
        torch.set_num_threads(int(a.threads))
        model, meta = load_model(a.model)
        corpus = SedCorpus(a.corpus, a.cache)
        corpus.require("validation")
        probs, clips = predict_frames_and_clips(model, corpus.features("validation", model.cfg, progress=not a.quiet))
        tuning = tune_post(list(probs), corpus.files["validation"], corpus.strong["validation"], model.cfg,
                           clips=None if a.no_clip_gate else list(clips))  # fmt: skip
        meta = dict(meta)
        meta[META_KEY] = post_meta(tuning, source=Path(a.model).name, corpus_command=corpus.corpus_command())
        save_model(a.out, model, meta=meta)
    except (CorpusError, ModelError, ValueError, OSError) as e:
        print(f"error: {e}".replace("\n", " "), file=sys.stderr)
        return 2
    if not a.quiet:
        print(f"{'class':<28} {'threshold':>9} {'median s':>8} {'clip gate':>9} {'val F1':>7} {'ungated':>7} {'default':>7}")
        for c in tuning.classes:
            st = tuning.per_class[c]
            f1 = "-" if st.val_f1 is None else f"{st.val_f1:.2f}"
            u = "-" if st.ungated_val_f1 is None else f"{st.ungated_val_f1:.2f}"
            d = "-" if st.default_val_f1 is None else f"{st.default_val_f1:.2f}"
            print(f"{c:<28} {st.threshold:9.2f} {st.median_s:8.3f} {st.clip_gate:9.2f} {f1:>7} {u:>7} {d:>7}")
        print(json.dumps({"val_macro_event_f1": meta[META_KEY]["val_macro_event_f1"], "out": Path(a.out).name}))
    return 0
