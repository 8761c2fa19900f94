"""Intervals for event-based SED scores: per-file counts and a paired bootstrap over files.

:func:`~streamkit.eval.sed.event_scores.event_counts` gives the event-based counts per file and
class (sed_eval's matching is within a file, so they add up exactly to
:func:`~streamkit.eval.sed.event_scores.event_based`'s), held in an :class:`EventCounts`;
:func:`bootstrap_macro_f1_gain` resamples the files to put a paired interval on the macro-F1 gain
of one system over another (docs/experiments.md, SED findings).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = ["EventCounts", "bootstrap_macro_f1_gain", "macro_f1_from_counts"]


@dataclass(frozen=True)
class EventCounts:
    """Event-based counts per file and class: ``counts[i, k] = (N_ref, N_sys, N_tp)`` of ``files[i]``
    and ``classes[k]`` (see :func:`~streamkit.eval.sed.event_scores.event_counts`). sed_eval
    matches events within a file, so the counts of any multiset of files add up to that multiset's
    score: ``macro_f1()`` of all files is :func:`~streamkit.eval.sed.event_scores.event_based`'s
    macro F1, and resampled files give a bootstrap (:func:`bootstrap_macro_f1_gain`)."""

    files: tuple[str, ...]
    classes: tuple[str, ...]
    counts: npt.NDArray[np.int64]

    def macro_f1(self, weights: npt.ArrayLike | None = None) -> float:
        """Macro F1 of all files, or of each file counted ``weights[i]`` times."""
        c = self.counts.sum(axis=0) if weights is None else np.tensordot(np.asarray(weights, dtype=np.int64), self.counts, axes=1)
        return float(macro_f1_from_counts(c))


def macro_f1_from_counts(counts: npt.ArrayLike) -> npt.NDArray[np.float64] | float:
    """Macro F1 of ``(..., classes, 3)`` counts ``(N_ref, N_sys, N_tp)``, sed_eval's conventions
    (``zero_score``): a class's F1 is ``2 N_tp / (N_ref + N_sys)``, 0 with no estimates, undefined (left
    out of the mean) with no reference events; NaN when no class is defined. Returns ``counts.shape[:-2]``."""
    c = np.asarray(counts, dtype=np.float64)
    if c.ndim < 2 or c.shape[-1] != 3:
        raise ValueError(f"counts must have shape (..., classes, 3), got {c.shape}")
    n_ref, n_sys, n_tp = c[..., 0], c[..., 1], c[..., 2]
    defined = n_ref > 0
    with np.errstate(invalid="ignore", divide="ignore"):
        f1 = np.where(defined, 2.0 * n_tp / np.where(defined, n_ref + n_sys, 1.0), 0.0)
        n_def = defined.sum(axis=-1)
        out = np.where(n_def > 0, f1.sum(axis=-1) / np.maximum(n_def, 1), np.nan)
    return float(out) if out.ndim == 0 else out


def bootstrap_macro_f1_gain(
    baseline: Sequence[EventCounts],
    method: Sequence[EventCounts],
    *,
    n_boot: int = 10000,
    seed: int = 0,
    level: float = 0.95,
) -> dict[str, Any]:
    """Paired bootstrap over files of the macro event F1 gain of ``method[i]`` over ``baseline[i]``.

    Pairs are runs of the same seed (or any pairing); every :class:`EventCounts` must hold the same
    files and classes in the same order. Each of ``n_boot`` resamples draws the files with
    replacement, once for all runs, so the pairs and the mean see the same clips. Returns, in F1
    points (fractions, as :func:`~streamkit.eval.sed.event_scores.event_based`): ``pairs`` (each
    ``baseline``, ``method``, ``gain`` on all files and its percentile interval ``ci``),
    ``mean_gain`` and its ``ci`` (over the clips, the runs fixed), and the draws of the mean gain (``draws``, for any other statistic). What it
    measures is the eval set's sampling error; the spread between seeds is a separate error."""
    if len(baseline) != len(method) or not baseline:
        raise ValueError(f"need as many baseline as method runs (at least one), got {len(baseline)} and {len(method)}")
    if n_boot < 1:
        raise ValueError(f"n_boot must be positive, got {n_boot}")
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must be in (0, 1), got {level}")
    first = baseline[0]
    for c in (*baseline, *method):
        if c.files != first.files or c.classes != first.classes:
            raise ValueError("every run must be counted on the same files and classes, in the same order")
    n = len(first.files)
    if n == 0:
        raise ValueError("no files to resample")
    rng = np.random.default_rng(seed)
    w = rng.multinomial(n, np.full(n, 1.0 / n), size=n_boot)  # (B, files): how often each file is drawn
    lo, hi = 100 * (1 - level) / 2, 100 * (1 + level) / 2

    def draws(c: EventCounts) -> npt.NDArray[np.float64]:
        flat = c.counts.reshape(n, -1)
        return np.asarray(macro_f1_from_counts((w @ flat).reshape(n_boot, len(c.classes), 3)))

    pairs, gains = [], []
    for b, m in zip(baseline, method):
        g = draws(m) - draws(b)
        gains.append(g)
        f_b, f_m = b.macro_f1(), m.macro_f1()
        pairs.append({"baseline": f_b, "method": f_m, "gain": f_m - f_b, "ci": [float(np.nanpercentile(g, lo)), float(np.nanpercentile(g, hi))]})
    mean = np.mean(gains, axis=0)
    return {
        "files": n,
        "n_boot": n_boot,
        "level": level,
        "pairs": pairs,
        "mean_gain": float(np.mean([p["gain"] for p in pairs])),
        "ci": [float(np.nanpercentile(mean, lo)), float(np.nanpercentile(mean, hi))],
        "draws": mean,
    }
