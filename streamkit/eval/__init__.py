"""Evaluation tools: speech activity detection (SAD) scoring and RTTM label files.

* :mod:`streamkit.eval.rttm`: NIST RTTM ``SPEAKER`` lines <-> sample-exact interval lists <->
  boolean sample masks.
* :mod:`streamkit.eval.sad`: the HF-database paper's protocol (Heitkaemper et al., ITG 2021, §4):
  sample-level counts with a 0.5 s no-score collar cut out of
  reference non-speech (OpenSAD), precision / recall / F1 / DCF pooled over files, a threshold
  sweep (ROC), the dev equal-error-rate and best-F1 thresholds, an ROC plot and result tables.
"""

from __future__ import annotations

from streamkit.eval.rttm import (
    RttmSegment,
    intervals_to_mask,
    mask_to_intervals,
    merge_intervals,
    parse_rttm,
    read_rttm,
    read_rttm_intervals,
    read_rttm_masks,
    rttm_lines,
    samples_to_seconds,
    seconds_to_samples,
    segments_to_intervals,
    write_rttm,
)
from streamkit.eval.sad import (
    DCF_P_FA_WEIGHT,
    DCF_P_MISS_WEIGHT,
    DEFAULT_THRESHOLDS,
    CollarMode,
    Counts,
    OperatingPoint,
    ResultRow,
    RocCurve,
    best_f1_point,
    best_f1_threshold,
    collar_samples,
    eer_point,
    eer_threshold,
    equal_error_rate,
    evaluate,
    frames_to_samples,
    majority_filter,
    no_score_mask,
    operating_point_rows,
    results_json,
    results_table,
    roc_plot,
    score_mask,
    sweep,
)

__all__ = [
    "DCF_P_FA_WEIGHT",
    "DCF_P_MISS_WEIGHT",
    "DEFAULT_THRESHOLDS",
    "CollarMode",
    "Counts",
    "OperatingPoint",
    "ResultRow",
    "RocCurve",
    "RttmSegment",
    "best_f1_point",
    "best_f1_threshold",
    "collar_samples",
    "eer_point",
    "eer_threshold",
    "equal_error_rate",
    "evaluate",
    "frames_to_samples",
    "intervals_to_mask",
    "majority_filter",
    "mask_to_intervals",
    "merge_intervals",
    "no_score_mask",
    "operating_point_rows",
    "parse_rttm",
    "read_rttm",
    "read_rttm_intervals",
    "read_rttm_masks",
    "results_json",
    "results_table",
    "roc_plot",
    "rttm_lines",
    "samples_to_seconds",
    "score_mask",
    "seconds_to_samples",
    "segments_to_intervals",
    "sweep",
    "write_rttm",
]
