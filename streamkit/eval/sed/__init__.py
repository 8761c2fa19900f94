"""Sound event detection (SED) scoring: DCASE label files, sed_eval F1 / error rate, PSDS.

The names below are the API; each lives in the module of its task:

* :mod:`streamkit.eval.sed.label_files`: strong and weak DCASE task 4 label files (read, check,
  write) and :class:`Event` / :data:`EventsByFile`, what every scorer takes;
* :mod:`streamkit.eval.sed.event_scores`: event-, segment- and tag-based scores (sed_eval),
  :func:`evaluate` (both DCASE scores), :func:`localisation_errors` and the per-file
  :func:`event_counts`;
* :mod:`streamkit.eval.sed.bootstrap`: :class:`EventCounts` and a paired bootstrap over files of
  the macro-F1 gain of one system over another;
* :mod:`streamkit.eval.sed.psds_score`: PSDS from frame scores (sed_scores_eval).

sed_eval and sed_scores_eval are imported on first use (``pip install streamkit[sed]``), so
reading and writing label files needs neither.
"""

from __future__ import annotations

from streamkit.data.sed_corpus import CLASSES
from streamkit.eval.sed.bootstrap import EventCounts, bootstrap_macro_f1_gain, macro_f1_from_counts
from streamkit.eval.sed.event_scores import (
    ClassScores,
    LocalisationErrors,
    SedScores,
    evaluate,
    event_based,
    event_counts,
    localisation_errors,
    segment_based,
    tagging_based,
)
from streamkit.eval.sed.label_files import (
    Event,
    EventsByFile,
    events_by_file,
    parse_strong,
    parse_weak,
    read_strong_tsv,
    read_weak_tsv,
    strong_tsv_text,
    weak_from_strong,
    weak_tsv_text,
    write_strong_tsv,
    write_weak_tsv,
)
from streamkit.eval.sed.psds_score import PSDS1, PSDS2, FrameScores, PsdsResult, psds

__all__ = [
    "CLASSES",
    "PSDS1",
    "PSDS2",
    "ClassScores",
    "Event",
    "EventCounts",
    "EventsByFile",
    "FrameScores",
    "LocalisationErrors",
    "PsdsResult",
    "SedScores",
    "bootstrap_macro_f1_gain",
    "evaluate",
    "event_based",
    "event_counts",
    "events_by_file",
    "localisation_errors",
    "macro_f1_from_counts",
    "parse_strong",
    "parse_weak",
    "psds",
    "read_strong_tsv",
    "read_weak_tsv",
    "segment_based",
    "strong_tsv_text",
    "tagging_based",
    "weak_from_strong",
    "weak_tsv_text",
    "write_strong_tsv",
    "write_weak_tsv",
]
