"""Sample-level speech activity detection (SAD) scoring with an OpenSAD-style no-score collar.

This is the evaluation protocol of Heitkaemper et al., "A Database for Research on Detection and
Enhancement of Speech Transmitted over HF links" (ITG 2021, §4 "Evaluation"), as released in ``fgnt/ham_radio``
``evaluation.py`` and ``padertorch/contrib/jensheit/eval_sad.py``, with the NIST OpenSAD 2015
collar rules available as an option.

Protocol choices, and where they come from
------------------------------------------

**Resolution.** Everything is counted in samples (8 kHz in the paper), not frames or seconds,
as the released evaluation code does.

**Collar / no-score zone** (:func:`no_score_mask`). Collars are cut only out of *reference
non-speech*: ``collar_s`` before each reference speech onset and ``collar_s`` after each offset.
Reference speech is always scored, the hypothesis never gets collars, overlapping zones merge
(paper: "a collar of 0.5 s around both the beginning and end of each segment, i.e., speech
on/offset errors below that value were not counted"). At the sample grid,
with ``c = round(collar_s * rate)``, a reference non-speech sample ``i`` is not scored iff some
reference speech sample ``j`` has ``|i - j| <= c``: exactly ``c`` samples before an onset and ``c``
samples after an offset. Two modes:

* ``mode="fgnt"`` (default): only that rule. This is what the authors' released code computes,
  i.e. what produced the paper's Table 2.
* ``mode="opensad"``: additionally the NIST OpenSAD v5.0 minimum-leftover rule: a
  non-speech run next to speech whose scorable remainder after removing its collars would be
  shorter than ``min_scored_s`` (0.1 s) is entirely no-score. For a gap between two speech
  segments that is "gap < 2·collar + 0.1 s"; for leading non-speech before the first onset and
  trailing non-speech after the last offset (one collar each) it is "< collar + 0.1 s" (0.6 s at
  the 0.5 s collar, as in the script; generalised linearly to other collars). A run with no
  adjacent speech (a file with no reference speech) is fully scored.

Both modes exclude nothing at ``collar_s = 0``, which is then plain sample accuracy and coincides
with ``pyannote.metrics`` at ``collar=0``. With a collar, pyannote's ``collar=2c`` (``±c`` around
*every* reference boundary, cut out of *both* classes) gives the same false alarms as
``mode="fgnt"`` with ``collar_s=c`` but also drops reference speech within ``c`` of each boundary
from the miss/recall count; OpenSAD and the paper keep it (recall is unaffected by the collar).

**Counting and metrics** (:class:`Counts`): TP = hyp ∧ ref speech, FP = hyp ∧ ref non-speech,
FN = ¬hyp ∧ ref speech, TN = neither; no-score samples count nowhere. Counts are summed over files
before any ratio is taken (micro average). P = TP/(TP+FP), R = TP/(TP+FN),
F1 = 2PR/(P+R) (paper eq. 2, 3); P_miss = FN/(TP+FN), P_fa = FP/(FP+TN) and
DCF = 0.75·P_miss + 0.25·P_fa (OpenSAD / Fearless Steps weighting).
A ratio with a zero denominator is NaN.

**Decisions.** A score becomes speech when it is **strictly greater** than the threshold
(as in the released code). The paper sweeps thresholds on dev, draws the ROC curve, reads the threshold at
dev's equal error rate (P_miss = P_fa) and applies it to eval (paper §4, Fig. 8, Table 2); we also
report the dev-best-F1 threshold.

**Frames to samples** (:func:`frames_to_samples`): frame ``t`` covers samples
``[hop·t, hop·t + win)``; a speech frame marks all of its ``win`` samples and overlapping frames
are OR-ed; the result is cut (or padded with non-speech) to the annotation length (as
``Transformer.activity_frequency_to_time`` in ``ham_radio/system/data.py``). For scores the OR
becomes a maximum, which commutes with thresholding (``max_t p_t > θ  ⇔  any_t (p_t > θ)``), so a
threshold sweep over sample-level scores equals sweeping the frame decisions and converting each.
:func:`majority_filter` likewise turns the released code's 25-frame "median" vote (``>= 12`` of 25)
into a rank filter on scores that commutes with thresholding.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from streamkit.eval.rttm import mask_to_intervals
from streamkit.io.outputs import atomic_output

__all__ = [
    "DCF_P_FA_WEIGHT",
    "DCF_P_MISS_WEIGHT",
    "DEFAULT_THRESHOLDS",
    "CollarMode",
    "Counts",
    "OperatingPoint",
    "ResultRow",
    "RocCurve",
    "best_f1_point",
    "best_f1_threshold",
    "collar_samples",
    "eer_point",
    "eer_threshold",
    "equal_error_rate",
    "evaluate",
    "frames_to_samples",
    "majority_filter",
    "no_score_mask",
    "operating_point_rows",
    "results_json",
    "results_table",
    "roc_plot",
    "score_mask",
    "sweep",
]

CollarMode = Literal["fgnt", "opensad"]

DCF_P_MISS_WEIGHT = 0.75
"""OpenSAD / Fearless Steps DCF weight of the miss rate."""
DCF_P_FA_WEIGHT = 0.25
"""OpenSAD / Fearless Steps DCF weight of the false-alarm rate."""

DEFAULT_THRESHOLDS: npt.NDArray[np.float64] = np.round(np.linspace(0.0, 1.0, 201), 4)
"""The released code's sweep: 201 thresholds ``linspace(0, 1, 201)`` rounded to 4 decimals."""


def _ratio(num: float, den: float) -> float:
    return float(num) / float(den) if den else math.nan


def _ratios(num: npt.NDArray[Any], den: npt.NDArray[Any]) -> npt.NDArray[np.float64]:
    num = np.asarray(num, dtype=np.float64)
    den = np.asarray(den, dtype=np.float64)
    out = np.full(np.broadcast(num, den).shape, np.nan)
    np.divide(num, den, out=out, where=den != 0)
    return out


# --------------------------------------------------------------------------------------------
# counts
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Counts:
    """Sample counts of one file or, summed with ``+`` / :func:`sum`, of a data set (micro average).

    ``no_score`` is the number of samples removed by the collar; :attr:`scored` is
    ``tp + fp + fn + tn``.
    """

    tp: int = 0
    fp: int = 0
    fn: int = 0
    tn: int = 0
    no_score: int = 0

    def __add__(self, other: Counts) -> Counts:
        if not isinstance(other, Counts):
            return NotImplemented
        return Counts(self.tp + other.tp, self.fp + other.fp, self.fn + other.fn, self.tn + other.tn, self.no_score + other.no_score)

    def __radd__(self, other: Any) -> Counts:
        if isinstance(other, int) and other == 0:  # sum() starts from 0
            return self
        return NotImplemented

    @property
    def scored(self) -> int:
        """Scored samples: ``tp + fp + fn + tn``."""
        return self.tp + self.fp + self.fn + self.tn

    @property
    def total(self) -> int:
        """All samples: scored plus no-score."""
        return self.scored + self.no_score

    @property
    def precision(self) -> float:
        """TP / (TP + FP) (paper eq. 2)."""
        return _ratio(self.tp, self.tp + self.fp)

    @property
    def recall(self) -> float:
        """TP / (TP + FN) (paper eq. 3)."""
        return _ratio(self.tp, self.tp + self.fn)

    @property
    def f1(self) -> float:
        """2PR / (P + R); 0 when P + R = 0, NaN when P or R is undefined."""
        p, r = self.precision, self.recall
        if math.isnan(p) or math.isnan(r):
            return math.nan
        return 2 * p * r / (p + r) if p + r > 0 else 0.0

    @property
    def p_miss(self) -> float:
        """Miss rate FN / (TP + FN) = 1 - recall."""
        return _ratio(self.fn, self.tp + self.fn)

    @property
    def p_fa(self) -> float:
        """False-alarm rate FP / (FP + TN) over scored reference non-speech."""
        return _ratio(self.fp, self.fp + self.tn)

    @property
    def dcf(self) -> float:
        """Detection cost 0.75·P_miss + 0.25·P_fa (OpenSAD)."""
        return DCF_P_MISS_WEIGHT * self.p_miss + DCF_P_FA_WEIGHT * self.p_fa

    @property
    def accuracy(self) -> float:
        """(TP + TN) / scored."""
        return _ratio(self.tp + self.tn, self.scored)

    def metrics(self) -> dict[str, float]:
        """All ratios as a dict (NaN where undefined)."""
        return {
            "precision": self.precision,
            "recall": self.recall,
            "f1": self.f1,
            "p_miss": self.p_miss,
            "p_fa": self.p_fa,
            "dcf": self.dcf,
            "accuracy": self.accuracy,
        }

    def to_dict(self) -> dict[str, Any]:
        """Counts and metrics; JSON-able except that undefined ratios are ``None``."""
        out: dict[str, Any] = {"tp": self.tp, "fp": self.fp, "fn": self.fn, "tn": self.tn, "no_score": self.no_score, "scored": self.scored}
        out.update({k: (None if math.isnan(v) else v) for k, v in self.metrics().items()})
        return out


# --------------------------------------------------------------------------------------------
# collar and per-file scoring
# --------------------------------------------------------------------------------------------


def collar_samples(collar_s: float, rate: float) -> int:
    """Collar length in samples: ``round(collar_s * rate)``."""
    if rate <= 0:
        raise ValueError(f"rate must be > 0, got {rate}")
    if not collar_s >= 0 or not math.isfinite(collar_s):
        raise ValueError(f"collar_s must be finite and >= 0, got {collar_s}")
    return int(round(collar_s * rate))


def _as_mask(x: npt.ArrayLike, name: str) -> npt.NDArray[np.bool_]:
    a = np.asarray(x)
    if a.ndim != 1:
        raise ValueError(f"{name} must be 1-D, got shape {a.shape}")
    if a.dtype != np.bool_:
        if a.size and not np.isin(a, (0, 1)).all():
            raise ValueError(f"{name} must be boolean (or 0/1)")
        a = a.astype(bool)
    return a


def no_score_mask(
    ref: npt.ArrayLike, rate: float, collar_s: float = 0.5, *, mode: CollarMode = "fgnt", min_scored_s: float = 0.1
) -> npt.NDArray[np.bool_]:
    """Samples excluded from scoring: reference non-speech within the collar of reference speech.

    See the module docstring for the two modes. O(n): runs of reference non-speech are found
    with :func:`numpy.diff`, the zones are marked with a difference array and a cumulative sum.
    """
    r = _as_mask(ref, "ref")
    n = len(r)
    c = collar_samples(collar_s, rate)
    if mode == "fgnt":
        m = 0
    elif mode == "opensad":
        m = collar_samples(min_scored_s, rate)
    else:
        raise ValueError(f"mode must be 'fgnt' or 'opensad', got {mode!r}")
    if c == 0 or n == 0 or not r.any():
        return np.zeros(n, dtype=bool)
    runs = mask_to_intervals(~r)  # non-speech runs [a, b)
    a, b = runs[:, 0], runs[:, 1]
    left = a > 0  # preceded by speech (an offset at a)
    right = b < n  # followed by speech (an onset at b)
    n_collars = left.astype(np.int64) + right
    whole = (b - a) - n_collars * c < m  # collars (plus the OpenSAD leftover) eat the whole run
    delta = np.zeros(n + 1, dtype=np.int64)
    np.add.at(delta, a[whole], 1)
    np.add.at(delta, b[whole], -1)
    sel = ~whole & left
    np.add.at(delta, a[sel], 1)
    np.add.at(delta, np.minimum(a[sel] + c, b[sel]), -1)
    sel = ~whole & right
    np.add.at(delta, np.maximum(b[sel] - c, a[sel]), 1)
    np.add.at(delta, b[sel], -1)
    return np.cumsum(delta[:-1]) > 0


def score_mask(
    ref: npt.ArrayLike,
    hyp: npt.ArrayLike,
    rate: float,
    collar_s: float = 0.5,
    *,
    mode: CollarMode = "fgnt",
    min_scored_s: float = 0.1,
) -> Counts:
    """Score one file's boolean hypothesis against its boolean reference, in samples.

    ``ref`` and ``hyp`` must have the same length (cut or pad the hypothesis to the reference
    first; :func:`frames_to_samples` does that for frame outputs).
    """
    r = _as_mask(ref, "ref")
    h = _as_mask(hyp, "hyp")
    if len(r) != len(h):
        raise ValueError(f"ref and hyp lengths differ: {len(r)} != {len(h)}")
    ns = no_score_mask(r, rate, collar_s, mode=mode, min_scored_s=min_scored_s)
    tp = int(np.count_nonzero(r & h))
    fn = int(np.count_nonzero(r)) - tp
    neg = ~r & ~ns
    fp = int(np.count_nonzero(neg & h))
    tn = int(np.count_nonzero(neg)) - fp
    return Counts(tp=tp, fp=fp, fn=fn, tn=tn, no_score=int(np.count_nonzero(ns)))


# --------------------------------------------------------------------------------------------
# frames -> samples
# --------------------------------------------------------------------------------------------


def frames_to_samples(frame_values: npt.ArrayLike, hop: int, win: int, n_samples: int, *, fill: float | bool | None = None) -> npt.NDArray[Any]:
    """Per-frame decisions or scores to per-sample values, as the fgnt evaluation does.

    Frame ``t`` covers samples ``[hop·t, hop·t + win)``; each sample takes the **maximum** over
    the frames covering it (the OR of boolean decisions). Samples covered by no frame, and samples
    past the last frame up to ``n_samples``, get ``fill`` (default ``False`` for boolean input,
    ``-inf`` for scores, i.e. non-speech at every threshold); the output is cut to ``n_samples``.
    ``fill`` must not exceed any score, or the OR equivalence breaks.

    At the DNN SAD's ``hop=80, win=200`` (8 kHz, 10 ms / 25 ms) each speech region is dilated by
    up to 120 samples relative to the frame grid. Vectorised over ``ceil(win/hop) + 1`` shifts.
    """
    v = np.asarray(frame_values)
    if v.ndim != 1:
        raise ValueError(f"frame_values must be 1-D, got shape {v.shape}")
    if hop <= 0 or win <= 0:
        raise ValueError(f"hop and win must be > 0, got hop={hop}, win={win}")
    if n_samples < 0:
        raise ValueError(f"n_samples must be >= 0, got {n_samples}")
    is_bool = v.dtype == np.bool_
    if not is_bool:
        v = v.astype(np.float64)
        if np.isnan(v).any():
            raise ValueError("frame scores contain NaN")
    fill_value: Any = (False if is_bool else -np.inf) if fill is None else fill
    dtype = np.bool_ if is_bool else np.float64
    n_frames = len(v)
    if n_frames == 0:
        return np.full(n_samples, fill_value, dtype=dtype)
    q, r = divmod(win, hop)  # each frame covers q whole hop-blocks and r samples of one more
    n_blocks = n_frames - 1 + q + (1 if r else 0)
    blocks: npt.NDArray[Any] = np.full((n_blocks, hop), fill_value, dtype=dtype)
    col = v[:, None]
    for j in range(q):
        np.maximum(blocks[j : j + n_frames], col, out=blocks[j : j + n_frames])
    if r:
        part = blocks[q : q + n_frames, :r]
        np.maximum(part, col, out=part)
    flat = blocks.reshape(-1)
    if len(flat) >= n_samples:
        return flat[:n_samples].copy()
    return np.concatenate([flat, np.full(n_samples - len(flat), fill_value, dtype=dtype)])


def majority_filter(frame_values: npt.ArrayLike, window: int = 25, min_count: int = 12) -> npt.NDArray[Any]:
    """The released code's smoothing as a rank filter that commutes with thresholds.

    The released DNN SAD binarises frame scores and marks frame ``t`` as speech when at least
    ``min_count`` of the ``window`` frames centred on ``t`` are speech, with the decisions
    edge-padded. Since ``#{p_j > θ} >= k  ⇔  (k-th largest p_j) > θ``, that equals thresholding the
    ``min_count``-th largest score of each edge-padded window, which this returns (for boolean
    input: the smoothed decisions). ``window`` must be odd.
    """
    from scipy.ndimage import rank_filter

    v = np.asarray(frame_values)
    if v.ndim != 1:
        raise ValueError(f"frame_values must be 1-D, got shape {v.shape}")
    if window < 1 or window % 2 == 0:
        raise ValueError(f"window must be odd and >= 1, got {window}")
    if not 1 <= min_count <= window:
        raise ValueError(f"min_count must be in [1, window], got {min_count}")
    if v.size == 0:
        return v.copy()
    is_bool = v.dtype == np.bool_
    x = v.astype(np.uint8) if is_bool else v.astype(np.float64)
    out = rank_filter(x, rank=window - min_count, size=window, mode="nearest")
    return out.astype(bool) if is_bool else out


# --------------------------------------------------------------------------------------------
# threshold sweep
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RocCurve:
    """Pooled counts at each threshold (ascending); a decision is ``score > threshold``."""

    thresholds: npt.NDArray[np.float64]
    tp: npt.NDArray[np.int64]
    fp: npt.NDArray[np.int64]
    fn: npt.NDArray[np.int64]
    tn: npt.NDArray[np.int64]
    no_score: int = 0

    def __len__(self) -> int:
        return len(self.thresholds)

    def counts(self, index: int) -> Counts:
        """The :class:`Counts` at ``thresholds[index]``."""
        return Counts(int(self.tp[index]), int(self.fp[index]), int(self.fn[index]), int(self.tn[index]), self.no_score)

    def index_of(self, threshold: float) -> int:
        """Index of a threshold of the sweep (exact match; raises :class:`KeyError` otherwise)."""
        hit = np.flatnonzero(self.thresholds == threshold)
        if len(hit) == 0:
            raise KeyError(f"threshold {threshold} is not in the sweep")
        return int(hit[0])

    def __add__(self, other: RocCurve) -> RocCurve:
        if not isinstance(other, RocCurve):
            return NotImplemented
        if not np.array_equal(self.thresholds, other.thresholds):
            raise ValueError("cannot add ROC curves over different thresholds")
        return RocCurve(
            self.thresholds, self.tp + other.tp, self.fp + other.fp, self.fn + other.fn, self.tn + other.tn, self.no_score + other.no_score
        )

    @property
    def p_miss(self) -> npt.NDArray[np.float64]:
        return _ratios(self.fn, self.tp + self.fn)

    @property
    def p_fa(self) -> npt.NDArray[np.float64]:
        return _ratios(self.fp, self.fp + self.tn)

    @property
    def tpr(self) -> npt.NDArray[np.float64]:
        """Recall = 1 - P_miss (the ROC's y axis)."""
        return _ratios(self.tp, self.tp + self.fn)

    @property
    def fpr(self) -> npt.NDArray[np.float64]:
        """P_fa (the ROC's x axis)."""
        return self.p_fa

    @property
    def precision(self) -> npt.NDArray[np.float64]:
        return _ratios(self.tp, self.tp + self.fp)

    @property
    def recall(self) -> npt.NDArray[np.float64]:
        return self.tpr

    @property
    def f1(self) -> npt.NDArray[np.float64]:
        """2·TP / (2·TP + FP + FN) (= 2PR/(P+R)); NaN where there is no reference or hypothesis speech."""
        p, r = self.precision, self.recall
        out = _ratios(2 * self.tp, 2 * self.tp + self.fp + self.fn)
        out[np.isnan(p) | np.isnan(r)] = np.nan
        return out

    @property
    def dcf(self) -> npt.NDArray[np.float64]:
        return DCF_P_MISS_WEIGHT * self.p_miss + DCF_P_FA_WEIGHT * self.p_fa

    def to_dict(self) -> dict[str, Any]:
        """JSON-able: thresholds and the four count arrays (as lists), plus no_score."""
        return {
            "thresholds": self.thresholds.tolist(),
            "tp": self.tp.tolist(),
            "fp": self.fp.tolist(),
            "fn": self.fn.tolist(),
            "tn": self.tn.tolist(),
            "no_score": self.no_score,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> RocCurve:
        """Inverse of :meth:`to_dict`."""
        tp, fp, fn, tn = (np.asarray(d[k], dtype=np.int64) for k in ("tp", "fp", "fn", "tn"))
        return cls(np.asarray(d["thresholds"], dtype=np.float64), tp, fp, fn, tn, no_score=int(d.get("no_score", 0)))


def _pair_files(refs: Any, hyps: Any) -> list[tuple[Any, Any]]:
    if isinstance(refs, Mapping) or isinstance(hyps, Mapping):
        if not (isinstance(refs, Mapping) and isinstance(hyps, Mapping)):
            raise TypeError("pass both references and hypotheses as mappings, or both as sequences")
        if set(refs) != set(hyps):
            missing = sorted(set(refs) ^ set(hyps))[:5]
            raise ValueError(f"reference and hypothesis file ids differ, e.g. {missing}")
        return [(refs[k], hyps[k]) for k in refs]
    if isinstance(refs, np.ndarray) and refs.ndim == 1:
        refs, hyps = [refs], [hyps]
    refs, hyps = list(refs), list(hyps)
    if len(refs) != len(hyps):
        raise ValueError(f"{len(refs)} references but {len(hyps)} hypotheses")
    return list(zip(refs, hyps))


FileArrays = Sequence[npt.ArrayLike] | Mapping[str, npt.ArrayLike] | npt.NDArray[Any]


_CHUNK = 1 << 22


def _exceed_histogram(thr: npt.NDArray[np.float64], values: npt.ArrayLike) -> npt.NDArray[np.int64]:
    """``hist[k]`` = number of values with exactly ``k`` thresholds strictly below them.

    Equal to ``bincount(searchsorted(thr, values, side="left"), minlength=len(thr) + 1)`` for
    sorted unique ``thr`` (checked in the tests), about twice as fast on random scores:
    :func:`numpy.searchsorted` with unsorted keys is branch-bound (~100 ns per key). Each value's
    position is first guessed from a uniform grid of ``4·len(thr)`` cells spanning the thresholds
    and then corrected with exact float64 comparisons, so rounding in the guess cannot change the
    result. Falls back to :func:`numpy.searchsorted` for non-finite or strongly clustered thresholds.
    """
    v = np.asarray(values)
    n_thr = len(thr)
    hist = np.zeros(n_thr + 1, dtype=np.int64)
    lo, hi = float(thr[0]), float(thr[-1])
    n_cells = 4 * n_thr
    base: npt.NDArray[np.intp] | None = None
    if math.isfinite(lo) and math.isfinite(hi) and hi > lo:
        scale = n_cells / (hi - lo)
        if math.isfinite(scale):
            base = np.searchsorted(thr, lo + np.arange(n_cells + 2) / scale, side="left")
            if np.diff(base).max(initial=0) > 8:  # clustered thresholds: many correction passes
                base = None
    thr_ext = np.concatenate([thr, [np.inf]])
    for a in range(0, len(v), _CHUNK):
        x = np.asarray(v[a : a + _CHUNK], dtype=np.float64)
        if base is None:
            idx = np.searchsorted(thr, x, side="left")
        else:
            g = np.floor((x - lo) * scale)
            np.clip(g, 0, n_cells + 1, out=g)
            idx = base[g.astype(np.intp)]
            while True:  # move up past thresholds below x
                up = thr_ext[idx] < x
                if not up.any():
                    break
                idx += up
            while True:  # move down below thresholds >= x
                down = (idx > 0) & (thr_ext[idx - 1] >= x)
                if not down.any():
                    break
                idx -= down
        hist += np.bincount(idx, minlength=n_thr + 1)
    return hist


def sweep(
    ref_masks: FileArrays,
    hyp_scores: FileArrays,
    thresholds: npt.ArrayLike = DEFAULT_THRESHOLDS,
    collar_s: float = 0.5,
    *,
    rate: float = 8000,
    mode: CollarMode = "fgnt",
    min_scored_s: float = 0.1,
) -> RocCurve:
    """Pooled counts over all files at every threshold (decision ``score > threshold``).

    ``ref_masks`` and ``hyp_scores`` are per-file sample arrays of equal lengths: two sequences
    in the same order, two mappings with the same keys, or one array each. Thresholds are sorted
    and de-duplicated. Cost per file: one no-score mask, then one :func:`numpy.searchsorted` of
    the scored samples into the thresholds and a :func:`numpy.bincount` per class; the counts for
    all thresholds follow from a cumulative sum (O(n log T), not O(n·T)).
    """
    thr = np.unique(np.asarray(thresholds, dtype=np.float64).ravel())
    if thr.size == 0:
        raise ValueError("no thresholds")
    if np.isnan(thr).any():
        raise ValueError("thresholds contain NaN")
    n_thr = len(thr)
    pos_sp = np.zeros(n_thr, dtype=np.int64)  # reference speech scored > thr  (TP)
    pos_ns = np.zeros(n_thr, dtype=np.int64)  # scored reference non-speech > thr  (FP)
    n_sp = n_ns = n_excluded = 0
    for ref, scores in _pair_files(ref_masks, hyp_scores):
        r = _as_mask(ref, "ref")
        s = np.asarray(scores)
        if s.ndim != 1 or len(s) != len(r):
            raise ValueError(f"hyp scores must be 1-D with the reference's length {len(r)}, got shape {s.shape}")
        if s.dtype.kind == "f" and np.isnan(s).any():
            raise ValueError("hyp scores contain NaN")
        ns = no_score_mask(r, rate, collar_s, mode=mode, min_scored_s=min_scored_s)
        for sel, acc in ((r, pos_sp), (~r & ~ns, pos_ns)):
            vals = s[sel]
            hist = _exceed_histogram(thr, vals)  # hist[k]: scores exceeding exactly k thresholds
            acc += len(vals) - np.cumsum(hist)[:n_thr]  # scores exceeding thresholds[k]
        n_sp += int(np.count_nonzero(r))
        n_ns_file = int(np.count_nonzero(~r & ~ns))
        n_ns += n_ns_file
        n_excluded += int(np.count_nonzero(ns))
    return RocCurve(thr, pos_sp, pos_ns, n_sp - pos_sp, n_ns - pos_ns, n_excluded)


def evaluate(
    ref_masks: FileArrays,
    hyp_scores: FileArrays,
    threshold: float,
    collar_s: float = 0.5,
    *,
    rate: float = 8000,
    mode: CollarMode = "fgnt",
    min_scored_s: float = 0.1,
) -> Counts:
    """Pooled :class:`Counts` over all files at one threshold (decision ``score > threshold``)."""
    total = Counts()
    for ref, scores in _pair_files(ref_masks, hyp_scores):
        total = total + score_mask(ref, np.asarray(scores) > threshold, rate, collar_s, mode=mode, min_scored_s=min_scored_s)
    return total


# --------------------------------------------------------------------------------------------
# operating points
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class OperatingPoint:
    """A threshold picked on a curve, with the rule that picked it and the counts there."""

    rule: str
    threshold: float
    index: int
    counts: Counts


def eer_point(curve: RocCurve) -> OperatingPoint:
    """The swept threshold closest to the equal error rate: ``argmin |P_miss - P_fa|``.

    P_miss rises and P_fa falls with the threshold, so this is the sweep point next to the
    crossing of the ROC curve with the line TPR = 1 - FPR (the paper's gray line, Fig. 8). Ties go
    to the lower threshold.
    """
    d = np.abs(curve.p_miss - curve.p_fa)
    if np.isnan(d).all():
        raise ValueError("EER undefined: the reference has no scored speech or no scored non-speech")
    i = int(np.nanargmin(d))
    return OperatingPoint("dev-EER", float(curve.thresholds[i]), i, curve.counts(i))


def eer_threshold(curve: RocCurve) -> float:
    """Threshold of :func:`eer_point`."""
    return eer_point(curve).threshold


def equal_error_rate(curve: RocCurve) -> float:
    """The EER, linearly interpolated between the two sweep points that bracket the crossing.

    Falls back to ``(P_miss + P_fa) / 2`` at :func:`eer_point` when the sweep never crosses.
    """
    pm, pf = curve.p_miss, curve.p_fa
    d = pm - pf
    ok = ~np.isnan(d)
    pm, pf, d = pm[ok], pf[ok], d[ok]
    if len(d) == 0:
        raise ValueError("EER undefined: the reference has no scored speech or no scored non-speech")
    cross = np.flatnonzero((d[:-1] <= 0) & (d[1:] >= 0))
    if len(cross):
        i = int(cross[0])
        if d[i] == d[i + 1]:
            return float((pm[i] + pf[i]) / 2)
        t = d[i] / (d[i] - d[i + 1])
        return float(pm[i] + t * (pm[i + 1] - pm[i]))
    i = int(np.argmin(np.abs(d)))
    return float((pm[i] + pf[i]) / 2)


def best_f1_point(curve: RocCurve) -> OperatingPoint:
    """The swept threshold with the highest F1 (ties to the lower threshold)."""
    f1 = curve.f1
    if np.isnan(f1).all():
        raise ValueError("F1 undefined at every threshold")
    i = int(np.nanargmax(f1))
    return OperatingPoint("dev-best-F1", float(curve.thresholds[i]), i, curve.counts(i))


def best_f1_threshold(curve: RocCurve) -> float:
    """Threshold of :func:`best_f1_point`."""
    return best_f1_point(curve).threshold


# --------------------------------------------------------------------------------------------
# reporting
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ResultRow:
    """One line of a results table: a system on a data set at an operating point."""

    system: str
    dataset: str
    operating_point: str
    threshold: float
    counts: Counts
    rt_factor: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "system": self.system,
            "dataset": self.dataset,
            "operating_point": self.operating_point,
            "threshold": self.threshold,
            "rt_factor": self.rt_factor,
        }
        out.update(self.counts.to_dict())
        out.update(self.extra)
        return out


def operating_point_rows(system: str, dev_curve: RocCurve, eval_curve: RocCurve, *, rt_factor: float | None = None) -> list[ResultRow]:
    """The paper's protocol as table rows: thresholds picked on dev, applied to eval.

    Rows: eval at the dev-EER threshold (the paper's Table 2 setting, §4), eval at the dev-best-F1
    threshold, dev at both, and the eval-oracle best F1 (labelled as such; not a
    fair result). Both curves must come from :func:`sweep` over the same thresholds.
    """
    if not np.array_equal(dev_curve.thresholds, eval_curve.thresholds):
        raise ValueError("dev and eval curves must be swept over the same thresholds")
    rows: list[ResultRow] = []
    for op in (eer_point(dev_curve), best_f1_point(dev_curve)):
        rows.append(ResultRow(system, "eval", op.rule, op.threshold, eval_curve.counts(op.index), rt_factor))
        rows.append(ResultRow(system, "dev", op.rule, op.threshold, op.counts, rt_factor))
    oracle = best_f1_point(eval_curve)
    rows.append(ResultRow(system, "eval", "eval-oracle-best-F1", oracle.threshold, oracle.counts, rt_factor))
    return rows


def _pct(x: float) -> str:
    return "n/a" if math.isnan(x) else f"{100 * x:.2f}"


def results_table(rows: Sequence[ResultRow]) -> str:
    """Markdown table: R, P, F1 as in the paper's Table 2 (percent), plus DCF, P_miss, P_fa, RT factor."""
    head = "| system | set | operating point | threshold | R % | P % | F1 % | DCF % | P_miss % | P_fa % | RT factor |"
    sep = "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
    lines = [head, sep]
    for row in rows:
        c = row.counts
        rt = "n/a" if row.rt_factor is None else f"{row.rt_factor:.4f}"
        lines.append(
            f"| {row.system} | {row.dataset} | {row.operating_point} | {row.threshold:.4g} | {_pct(c.recall)} | {_pct(c.precision)} | "
            f"{_pct(c.f1)} | {_pct(c.dcf)} | {_pct(c.p_miss)} | {_pct(c.p_fa)} | {rt} |"
        )
    return "\n".join(lines) + "\n"


def results_json(rows: Sequence[ResultRow], **meta: Any) -> dict[str, Any]:
    """JSON-able dict ``{"protocol": ..., "rows": [...], **meta}`` (undefined ratios are ``None``)."""
    out: dict[str, Any] = {
        "protocol": {
            "resolution": "samples",
            "decision": "score > threshold",
            "collar": "reference non-speech within collar_s of reference speech is not scored",
            "dcf": f"{DCF_P_MISS_WEIGHT}*P_miss + {DCF_P_FA_WEIGHT}*P_fa",
            "pooling": "counts summed over files",
        },
        "rows": [row.to_dict() for row in rows],
    }
    out.update(meta)
    json.dumps(out)  # fail here, not in the caller, if something is not JSON-able
    return out


def roc_plot(curves: Mapping[str, RocCurve], path_png: str | Path, *, title: str = "SAD ROC", mark_eer: bool = True) -> Path:
    """Draw ROC curves (TPR over P_fa) with the EER line TPR = 1 - FPR, as the paper's Fig. 8.

    Needs matplotlib (imported lazily, rendered off-screen with the Agg canvas, no pyplot state).
    """
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError("roc_plot needs matplotlib: pip install matplotlib") from exc
    fig = Figure(figsize=(5.0, 5.0), dpi=120)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    ax.plot([0, 1], [1, 0], color="0.6", linewidth=1, label="EER line")
    for name, curve in curves.items():
        fpr, tpr = curve.fpr, curve.tpr
        order = np.argsort(fpr, kind="stable")
        (line,) = ax.plot(fpr[order], tpr[order], linewidth=1.5, label=name)
        if mark_eer:
            try:
                op = eer_point(curve)
            except ValueError:
                continue
            ax.plot([fpr[op.index]], [tpr[op.index]], "o", color=line.get_color(), markersize=5)
            ax.annotate(f"θ={op.threshold:.3g}", (fpr[op.index], tpr[op.index]), textcoords="offset points", xytext=(6, -12), fontsize=8)
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.set_xlabel("false-alarm rate P_fa")
    ax.set_ylabel("true-positive rate 1 - P_miss")
    ax.set_title(title)
    ax.grid(True, linewidth=0.3)
    ax.legend(loc="lower right", fontsize=8)
    path = Path(path_png)
    with atomic_output(path, "wb") as f:
        fig.savefig(f, format="png")
    return path
