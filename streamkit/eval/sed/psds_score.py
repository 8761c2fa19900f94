"""PSDS, the polyphonic sound detection score (Bilen et al., ICASSP 2020), computed by
sed_scores_eval (Ebbers et al., ICASSP 2022; exact, threshold-free) from per-frame scores: a
:class:`FrameScores` per file, a ``(frames, classes)`` array whose frame ``i`` covers
``[start + i*hop, start + (i+1)*hop)``. :data:`PSDS1` and :data:`PSDS2` are the DCASE 2021+
scenarios. psds_eval is not used: it fails on numpy 2.4.

sed_scores_eval is imported on first use (``pip install streamkit[sed]``).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from streamkit.data.sed_corpus import CLASSES
from streamkit.eval.sed.event_scores import import_scorer
from streamkit.eval.sed.label_files import Event, EventsLike, events_by_file

__all__ = ["PSDS1", "PSDS2", "FrameScores", "PsdsResult", "psds"]

#: DCASE 2021-2024 task 4 PSDS scenario 1 (tight localisation) and 2 (no cross-triggers, loose).
PSDS1: dict[str, Any] = {"dtc_threshold": 0.7, "gtc_threshold": 0.7, "cttc_threshold": None, "alpha_ct": 0.0, "alpha_st": 1.0, "max_efpr": 100.0}
PSDS2: dict[str, Any] = {"dtc_threshold": 0.1, "gtc_threshold": 0.1, "cttc_threshold": 0.3, "alpha_ct": 0.5, "alpha_st": 1.0, "max_efpr": 100.0}


@dataclass
class FrameScores:
    """One file's frame-level class scores: ``scores[i, k]`` for frame ``i`` covering
    ``[start + i*hop, start + (i+1)*hop)`` seconds and class ``classes[k]``."""

    scores: npt.NDArray[np.float64]
    hop: float
    classes: tuple[str, ...] = CLASSES
    start: float = 0.0

    def __post_init__(self) -> None:
        s = np.asarray(self.scores, dtype=np.float64)
        if s.ndim != 2 or s.shape[1] != len(self.classes):
            raise ValueError(f"scores must be (frames, {len(self.classes)}), got shape {s.shape}")
        if not np.all(np.isfinite(s)):
            raise ValueError("scores must be finite")
        if not (math.isfinite(self.hop) and self.hop > 0):
            raise ValueError(f"hop must be > 0 s, got {self.hop}")
        if len(set(self.classes)) != len(self.classes):
            raise ValueError("duplicate class names")
        self.scores = s
        self.classes = tuple(self.classes)

    @property
    def n_frames(self) -> int:
        return int(self.scores.shape[0])

    @property
    def duration(self) -> float:
        return self.start + self.n_frames * self.hop

    def timestamps(self) -> npt.NDArray[np.float64]:
        """Frame boundaries, ``n_frames + 1`` values (what sed_scores_eval wants)."""
        return self.start + np.arange(self.n_frames + 1, dtype=np.float64) * self.hop

    def to_dataframe(self) -> Any:
        """sed_scores_eval's score DataFrame (columns onset, offset, one per class)."""
        from sed_scores_eval.base_modules.scores import create_score_dataframe

        return create_score_dataframe(self.scores, self.timestamps(), list(self.classes))

    @classmethod
    def from_events(cls, events: Iterable[Event], duration: float, hop: float, classes: Sequence[str] = CLASSES) -> FrameScores:
        """Binary scores (1 where an event of the class overlaps the frame), e.g. to score hard
        decisions with PSDS or to build test cases."""
        n = int(math.ceil(duration / hop - 1e-9))
        s = np.zeros((n, len(classes)))
        for e in events:
            k = list(classes).index(e.event_label)
            a = int(math.floor(e.onset / hop + 1e-9))
            b = int(math.ceil(e.offset / hop - 1e-9))
            s[max(a, 0) : min(b, n), k] = 1.0
        return cls(s, hop, tuple(classes))


@dataclass(frozen=True)
class PsdsResult:
    psds: float
    per_class: dict[str, float]
    params: dict[str, Any]


def psds(
    reference: EventsLike,
    scores: Mapping[str, FrameScores],
    *,
    durations: Mapping[str, float] | None = None,
    classes: Sequence[str] = CLASSES,
    dtc_threshold: float = PSDS1["dtc_threshold"],
    gtc_threshold: float = PSDS1["gtc_threshold"],
    cttc_threshold: float | None = PSDS1["cttc_threshold"],
    alpha_ct: float = PSDS1["alpha_ct"],
    alpha_st: float = PSDS1["alpha_st"],
    max_efpr: float = PSDS1["max_efpr"],
    unit_of_time: str = "hour",
) -> PsdsResult:
    """Polyphonic sound detection score (sed_scores_eval ``intersection_based.psds``) of frame
    scores against strong reference labels. Defaults are :data:`PSDS1`; pass ``**PSDS2`` for
    scenario 2. Every reference file needs scores; scored files without reference events count
    as event-free. ``durations`` default to each file's score length."""
    if not scores:
        raise ValueError("no scores")
    ref = events_by_file(reference, classes=classes)
    missing = sorted(set(ref) - set(scores))
    if missing:
        raise ValueError(f"no scores for reference files: {', '.join(missing[:5])}{' ...' if len(missing) > 5 else ''}")
    for name, fs in scores.items():
        if tuple(fs.classes) != tuple(classes):
            raise ValueError(f"{name!r}: score classes {fs.classes} differ from {tuple(classes)}")
    intersection_based = import_scorer("sed_scores_eval.intersection_based", "PSDS")
    dur = {name: float(durations[name]) if durations is not None and name in durations else fs.duration for name, fs in scores.items()}
    gt = {name: [(e.onset, e.offset, e.event_label) for e in ref.get(name, [])] for name in scores}
    value, per_class, _, _ = intersection_based.psds(
        scores={name: fs.to_dataframe() for name, fs in scores.items()},
        ground_truth=gt,
        audio_durations=dur,
        dtc_threshold=dtc_threshold,
        gtc_threshold=gtc_threshold,
        cttc_threshold=cttc_threshold,
        alpha_ct=alpha_ct,
        alpha_st=alpha_st,
        unit_of_time=unit_of_time,
        max_efpr=max_efpr,
    )
    params = {
        "dtc_threshold": dtc_threshold,
        "gtc_threshold": gtc_threshold,
        "cttc_threshold": cttc_threshold,
        "alpha_ct": alpha_ct,
        "alpha_st": alpha_st,
        "max_efpr": max_efpr,
        "unit_of_time": unit_of_time,
    }
    return PsdsResult(float(value), {c: float(v) for c, v in per_class.items()}, params)
