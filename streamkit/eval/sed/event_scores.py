"""Event-, segment- and tag-based SED scores, computed by sed_eval (Mesaros et al., "Metrics for
polyphonic sound event detection", Appl. Sci. 2016) from strong labels, one ``evaluate`` call per
file over the union of reference and estimate files (or the ``files`` given):

* event-based (:func:`event_based`): an estimate matches a reference event of the same class
  when ``|onset difference| <= 200 ms`` and ``|offset difference| <= max(200 ms, 20 % of the
  reference event's length)`` (DCASE task 4; sed_eval's own default is 50 %), optimal one-to-one
  matching;
* segment-based (:func:`segment_based`): 1 s segments, a class is active in a segment when any
  event of it overlaps the segment; a file is scored up to its duration when ``durations`` gives
  it, else up to its last offset (sed_eval's default).

Two analysis views come with them: :func:`tagging_based` scores clip tags (sed_eval
``AudioTaggingMetrics``, one decision per clip and class), and ``event_based(...,
evaluate_offset=False)`` onsets only; :func:`localisation_errors` (our own, not a DCASE score)
pairs each reference event with its best-overlapping estimate and counts missed, split, merged
and false-alarm events and the onset / offset differences. Between the DCASE event score and
tagging they show whether a system fails at *what* sounds or at *where* it starts and ends
(docs/experiments.md, SED findings). :func:`event_counts` gives :func:`event_based`'s counts per
file and class, for the bootstrap of :mod:`streamkit.eval.sed.bootstrap`.

Each scorer gives a :class:`SedScores` (tagging without ER): macro F1 / precision / recall (mean over classes of the
per-class values, sed_eval's "class-wise average"), micro F1 (counts pooled over classes),
the overall error rate ER = (S + D + I) / N_ref, and per-class :class:`ClassScores`. Conventions
(sed_eval's, with ``empty_system_output_handling='zero_score'`` as the DESED baseline): a class
with reference events and no estimates has P = R = F1 = 0; a class with no reference events has
undefined recall, so its F1 is NaN and it is left out of the macro average (false alarms of a class
absent from the reference therefore do not lower macro F1, but they do lower micro F1 and raise
ER); with no reference at all, macro / micro F1 and ER are NaN.

sed_eval is imported on first use (``pip install streamkit[sed]``).
"""

from __future__ import annotations

import importlib
import math
import warnings
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from streamkit.data.sed_corpus import CLASSES
from streamkit.eval.sed.bootstrap import EventCounts
from streamkit.eval.sed.label_files import EventsByFile, EventsLike, events_by_file

__all__ = ["ClassScores", "LocalisationErrors", "SedScores", "evaluate", "event_based", "event_counts", "localisation_errors",
           "segment_based", "tagging_based"]  # fmt: skip

ONSET_COLLAR_S = 0.2
OFFSET_COLLAR_S = 0.2
OFFSET_COLLAR_RATE = 0.2
SEGMENT_S = 1.0


def import_scorer(module: str, purpose: str) -> Any:
    """Import an optional scoring package of ``streamkit[sed]`` (``module``, e.g. ``sed_eval``) without
    its dependencies' deprecation warnings; ImportError naming ``purpose`` and the extra when it is missing."""
    with warnings.catch_warnings():
        # dcase_util imports pkg_resources (hence setuptools<81), which warns that it is deprecated
        warnings.filterwarnings("ignore", message=".*pkg_resources.*")
        warnings.filterwarnings("ignore", category=DeprecationWarning)
        try:
            return importlib.import_module(module)
        except ImportError as e:  # pragma: no cover - depends on the environment
            raise ImportError(f"{purpose} needs {module.split('.')[0]}: pip install 'streamkit[sed]' ({e})") from e


def _import_sed_eval() -> Any:
    return import_scorer("sed_eval", "SED scoring")


def _nan(x: Any) -> float:
    return float("nan") if x is None else float(x)


@dataclass(frozen=True)
class ClassScores:
    f1: float
    precision: float
    recall: float
    error_rate: float
    deletion_rate: float
    insertion_rate: float
    n_ref: int
    n_sys: int
    n_tp: int


@dataclass(frozen=True)
class SedScores:
    """Event- or segment-based scores (fractions in [0, 1]; NaN where undefined)."""

    kind: str  # "event" | "segment"
    macro_f1: float
    macro_precision: float
    macro_recall: float
    micro_f1: float
    micro_precision: float
    micro_recall: float
    error_rate: float
    substitution_rate: float
    deletion_rate: float
    insertion_rate: float
    n_ref: int
    n_sys: int
    n_tp: int
    per_class: dict[str, ClassScores] = field(default_factory=dict)
    params: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _pair(
    reference: EventsLike, estimate: EventsLike, classes: Sequence[str], files: Iterable[str] | None
) -> tuple[list[str], EventsByFile, EventsByFile]:
    ref = events_by_file(reference, classes=classes)
    est = events_by_file(estimate, classes=classes)
    if files is None:
        names = list(dict.fromkeys([*ref, *est]))
    else:
        names = list(dict.fromkeys(files))
        extra = sorted((set(ref) | set(est)) - set(names))
        if extra:
            raise ValueError(f"labels for files not in the scored file list: {', '.join(extra[:5])}{' ...' if len(extra) > 5 else ''}")
    return names, ref, est


def _macro(per_class: Mapping[str, ClassScores], key: str) -> float:
    """Our own macro over the per-class values (sed_eval's nanmean; NaN, not a warning, when none is defined)."""
    v = [getattr(x, key) for x in per_class.values() if not math.isnan(getattr(x, key))]
    return float(np.mean(v)) if v else float("nan")


def _collect(kind: str, m: Any, classes: Sequence[str], params: dict[str, Any]) -> SedScores:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # nanmean of all-NaN
        overall = m.results_overall_metrics()
        avg = m.results_class_wise_average_metrics()
        cw = m.results_class_wise_metrics()
    per_class: dict[str, ClassScores] = {}
    for c in classes:
        r = cw[c]
        n = m.class_wise[c]
        # sed_eval divides by (N_ref + eps): with no reference events a rate is undefined, not 1e16
        rate = _nan if n["Nref"] > 0 else (lambda _x: float("nan"))
        per_class[c] = ClassScores(
            f1=_nan(r["f_measure"]["f_measure"]),
            precision=_nan(r["f_measure"]["precision"]),
            recall=_nan(r["f_measure"]["recall"]),
            error_rate=rate(r["error_rate"]["error_rate"]),
            deletion_rate=rate(r["error_rate"]["deletion_rate"]),
            insertion_rate=rate(r["error_rate"]["insertion_rate"]),
            n_ref=int(n["Nref"]),
            n_sys=int(n["Nsys"]),
            n_tp=int(n["Ntp"]),
        )

    def macro(key: str) -> float:
        return _macro(per_class, key)

    macro_f1 = macro("f1")
    if avg.get("f_measure") and not (math.isnan(macro_f1) and math.isnan(avg["f_measure"]["f_measure"])):
        assert math.isclose(macro_f1, avg["f_measure"]["f_measure"], rel_tol=1e-9, abs_tol=1e-12), (macro_f1, avg)
    er = overall["error_rate"]
    orate = _nan if m.overall["Nref"] > 0 else (lambda _x: float("nan"))
    return SedScores(
        kind=kind,
        macro_f1=macro_f1,
        macro_precision=macro("precision"),
        macro_recall=macro("recall"),
        micro_f1=_nan(overall["f_measure"]["f_measure"]),
        micro_precision=_nan(overall["f_measure"]["precision"]),
        micro_recall=_nan(overall["f_measure"]["recall"]),
        error_rate=orate(er["error_rate"]),
        substitution_rate=orate(er["substitution_rate"]),
        deletion_rate=orate(er["deletion_rate"]),
        insertion_rate=orate(er["insertion_rate"]),
        n_ref=int(m.overall["Nref"]),
        n_sys=int(m.overall["Nsys"]),
        n_tp=int(m.overall["Ntp"]),
        per_class=per_class,
        params=params,
    )


class _PerFile:
    """Iterate a sed_eval ``EventBasedMetrics`` over files, one ``evaluate`` per file, yielding each name."""

    def __init__(self, metric: Any, names: list[str], ref: EventsByFile, est: EventsByFile) -> None:
        self.metric, self.names, self.ref, self.est = metric, names, ref, est

    def __iter__(self) -> Any:
        for name in self.names:
            self.metric.evaluate([e.as_sed_eval() for e in self.ref.get(name, [])], [e.as_sed_eval() for e in self.est.get(name, [])])
            yield name


def _event_metric(
    reference: EventsLike,
    estimate: EventsLike,
    classes: Sequence[str],
    onset_collar: float,
    offset_collar: float,
    offset_collar_rate: float,
    evaluate_offset: bool,
    files: Iterable[str] | None,
) -> tuple[_PerFile, list[str]]:
    if evaluate_offset and onset_collar != offset_collar:
        raise ValueError("sed_eval uses one t_collar for onsets and offsets: onset_collar must equal offset_collar")
    sed_eval = _import_sed_eval()
    names, ref, est = _pair(reference, estimate, classes, files)
    m = sed_eval.sound_event.EventBasedMetrics(
        event_label_list=list(classes),
        t_collar=float(onset_collar),
        percentage_of_length=float(offset_collar_rate),
        evaluate_onset=True,
        evaluate_offset=bool(evaluate_offset),
        event_matching_type="optimal",
    )
    m.empty_system_output_handling = "zero_score"
    return _PerFile(m, names, ref, est), names


def event_based(
    reference: EventsLike,
    estimate: EventsLike,
    *,
    classes: Sequence[str] = CLASSES,
    onset_collar: float = ONSET_COLLAR_S,
    offset_collar: float = OFFSET_COLLAR_S,
    offset_collar_rate: float = OFFSET_COLLAR_RATE,
    evaluate_offset: bool = True,
    files: Iterable[str] | None = None,
) -> SedScores:
    """Event-based scores (sed_eval ``EventBasedMetrics``, optimal matching): onset within
    ``onset_collar``, offset within ``max(offset_collar, offset_collar_rate * reference length)``.
    ``evaluate_offset=False``: onsets only (an analysis view that frees the offsets; the DCASE
    score is the default)."""
    it, names = _event_metric(reference, estimate, classes, onset_collar, offset_collar, offset_collar_rate, evaluate_offset, files)
    for _name in it:  # one sed_eval evaluate() per file
        pass
    params = {"onset_collar": onset_collar, "offset_collar": offset_collar, "offset_collar_rate": offset_collar_rate,
              "evaluate_offset": bool(evaluate_offset), "files": len(names)}  # fmt: skip
    return _collect("event", it.metric, classes, params)


def event_counts(
    reference: EventsLike,
    estimate: EventsLike,
    *,
    classes: Sequence[str] = CLASSES,
    onset_collar: float = ONSET_COLLAR_S,
    offset_collar: float = OFFSET_COLLAR_S,
    offset_collar_rate: float = OFFSET_COLLAR_RATE,
    evaluate_offset: bool = True,
    files: Iterable[str] | None = None,
) -> EventCounts:
    """Per-file, per-class event-based counts, with :func:`event_based`'s matching and arguments
    (read off sed_eval's running class-wise counts after each file)."""
    it, names = _event_metric(reference, estimate, classes, onset_collar, offset_collar, offset_collar_rate, evaluate_offset, files)
    m = it.metric
    cls = list(classes)
    out = np.zeros((len(names), len(cls), 3), dtype=np.int64)
    prev = np.zeros((len(cls), 3), dtype=np.int64)
    for i, _name in enumerate(it):
        now = np.array([[m.class_wise[c]["Nref"], m.class_wise[c]["Nsys"], m.class_wise[c]["Ntp"]] for c in cls], dtype=np.int64)
        out[i] = now - prev
        prev = now
    return EventCounts(tuple(names), tuple(cls), out)


def segment_based(
    reference: EventsLike,
    estimate: EventsLike,
    *,
    classes: Sequence[str] = CLASSES,
    segment: float = SEGMENT_S,
    durations: Mapping[str, float] | None = None,
    files: Iterable[str] | None = None,
) -> SedScores:
    """Segment-based scores (sed_eval ``SegmentBasedMetrics``) on ``segment``-second segments.
    A file is scored up to ``durations[file]`` when given, else up to its last offset."""
    sed_eval = _import_sed_eval()
    names, ref, est = _pair(reference, estimate, classes, files)
    m = sed_eval.sound_event.SegmentBasedMetrics(event_label_list=list(classes), time_resolution=float(segment))
    m.empty_system_output_handling = "zero_score"
    for name in names:
        r = [e.as_sed_eval() for e in ref.get(name, [])]
        s = [e.as_sed_eval() for e in est.get(name, [])]
        dur = None if durations is None or name not in durations else float(durations[name])
        if dur is None and not r and not s:
            continue  # nothing to score and no length: sed_eval would fail on an empty container
        m.evaluate(r, s, evaluated_length_seconds=dur)
    return _collect("segment", m, classes, {"segment": segment, "files": len(names)})


def tagging_based(
    reference: EventsLike,
    estimate: EventsLike,
    *,
    classes: Sequence[str] = CLASSES,
    files: Iterable[str] | None = None,
) -> SedScores:
    """Clip-level tagging scores (sed_eval ``AudioTaggingMetrics``): a class is present in a clip
    when it has any event there, in the reference and in the estimate; one decision per (clip, class).
    Counts and F1 as the other scores (macro over classes with reference clips); tagging has no error
    rate, so ER and its parts are NaN. Every file of the union (or of ``files``) is scored, with no
    events meaning no tags."""
    _import_sed_eval()
    from dcase_util.containers import MetaDataContainer
    from sed_eval.audio_tag import AudioTaggingMetrics

    names, ref, est = _pair(reference, estimate, classes, files)
    per_class: dict[str, ClassScores] = {}
    m = AudioTaggingMetrics(tags=list(classes))
    if names:
        def tags(ev: EventsByFile) -> Any:
            return MetaDataContainer([{"filename": n, "tags": sorted({e.event_label for e in ev.get(n, [])})} for n in names])

        m.evaluate(tags(ref), tags(est))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        res = m.results()
    for c in classes:
        n = m.tag_wise[c]
        f = res["class_wise"][c]["f_measure"]
        # a class with reference clips and no estimates scores 0 (sed_eval gives None), as the event scores
        def val(key: str, n: dict[str, Any] = n, f: dict[str, Any] = f) -> float:
            if n["Nref"] == 0:
                return float("nan")
            v = _nan(f[key])
            return 0.0 if math.isnan(v) else v

        per_class[c] = ClassScores(
            f1=val("f_measure"),
            precision=val("precision"),
            recall=val("recall"),
            error_rate=float("nan"),
            deletion_rate=float("nan"),
            insertion_rate=float("nan"),
            n_ref=int(n["Nref"]),
            n_sys=int(n["Nsys"]),
            n_tp=int(n["Ntp"]),
        )

    def macro(key: str) -> float:
        return _macro(per_class, key)

    n_ref = sum(x.n_ref for x in per_class.values())
    n_sys = sum(x.n_sys for x in per_class.values())
    n_tp = sum(x.n_tp for x in per_class.values())
    p = n_tp / n_sys if n_sys else float("nan")
    r = n_tp / n_ref if n_ref else float("nan")
    micro = 2 * n_tp / (n_ref + n_sys) if n_ref else float("nan")
    nan = float("nan")
    return SedScores(kind="tagging", macro_f1=macro("f1"), macro_precision=macro("precision"), macro_recall=macro("recall"),
                     micro_f1=micro, micro_precision=p, micro_recall=r, error_rate=nan, substitution_rate=nan, deletion_rate=nan,
                     insertion_rate=nan, n_ref=n_ref, n_sys=n_sys, n_tp=n_tp, per_class=per_class, params={"files": len(names)})  # fmt: skip


@dataclass(frozen=True)
class LocalisationErrors:
    """Where detections go wrong, per reference event (see :func:`localisation_errors`)."""

    n_ref: int
    n_sys: int
    missed: float  #: fraction of reference events no estimate of their class overlaps
    split: float  #: fraction of reference events overlapped by two or more estimates of their class
    merged: float  #: fraction of estimates (that hit) overlapping two or more reference events of their class
    false_alarm: float  #: fraction of estimates overlapping no reference event of their class
    false_alarm_absent: float  #: fraction of those false alarms whose class the clip does not hold at all
    onset_error: dict[str, float]  #: signed estimate - reference onset (s) of the best overlap: median, p10, p90, within 200 ms
    offset_error: dict[str, float]  #: the same for offsets (within: max(200 ms, 20 %) of the reference length)
    length_ratio: float  #: median estimate / reference length of the best overlaps

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def localisation_errors(
    reference: EventsLike,
    estimate: EventsLike,
    *,
    classes: Sequence[str] = CLASSES,
    files: Iterable[str] | None = None,
) -> LocalisationErrors:
    """An anatomy of event-detection errors (not a DCASE score): each reference event is paired with
    the estimate of its class in its file that overlaps it longest (none: *missed*); the pair's
    signed onset and offset differences (estimate - reference) show whether the boundaries or the
    detections fail. Counts of split references, merged and false-alarm estimates come with it, and
    the share of false alarms of a class the clip does not hold (a clip tag would have caught them).
    Medians and 10th/90th percentiles are NaN where no pair exists."""
    names, ref, est = _pair(reference, estimate, classes, files)
    n_ref = n_sys = missed = split = merged = hit_sys = fa = fa_absent = 0
    d_on: list[float] = []
    d_off: list[float] = []
    ok_on = ok_off = 0
    ratio: list[float] = []
    for name in names:
        r_ev = ref.get(name, [])
        s_ev = est.get(name, [])
        n_ref += len(r_ev)
        n_sys += len(s_ev)
        for e in r_ev:
            ov = [(min(e.offset, s.offset) - max(e.onset, s.onset), s) for s in s_ev if s.event_label == e.event_label]
            ov = [(o, s) for o, s in ov if o > 0]
            if not ov:
                missed += 1
                continue
            split += len(ov) > 1
            _o, best = max(ov, key=lambda t: t[0])
            d_on.append(best.onset - e.onset)
            d_off.append(best.offset - e.offset)
            ok_on += abs(best.onset - e.onset) <= ONSET_COLLAR_S
            ok_off += abs(best.offset - e.offset) <= max(OFFSET_COLLAR_S, OFFSET_COLLAR_RATE * (e.offset - e.onset))
            ratio.append((best.offset - best.onset) / (e.offset - e.onset))
        held = {e.event_label for e in r_ev}
        for s in s_ev:
            k = sum(1 for e in r_ev if e.event_label == s.event_label and min(e.offset, s.offset) - max(e.onset, s.onset) > 0)
            if k == 0:
                fa += 1
                fa_absent += s.event_label not in held
            else:
                hit_sys += 1
                merged += k > 1

    def stats(d: list[float], ok: int) -> dict[str, float]:
        if not d:
            return {"median": float("nan"), "p10": float("nan"), "p90": float("nan"), "within_collar": float("nan")}
        a = np.asarray(d, dtype=float)
        return {"median": float(np.median(a)), "p10": float(np.percentile(a, 10)), "p90": float(np.percentile(a, 90)),
                "within_collar": ok / len(d)}  # fmt: skip

    def frac(k: int, n: int) -> float:
        return k / n if n else float("nan")

    return LocalisationErrors(
        n_ref=n_ref,
        n_sys=n_sys,
        missed=frac(missed, n_ref),
        split=frac(split, n_ref),
        merged=frac(merged, hit_sys),
        false_alarm=frac(fa, n_sys),
        false_alarm_absent=frac(fa_absent, fa),
        onset_error=stats(d_on, ok_on),
        offset_error=stats(d_off, ok_off),
        length_ratio=float(np.median(ratio)) if ratio else float("nan"),
    )


def evaluate(
    reference: EventsLike,
    estimate: EventsLike,
    *,
    classes: Sequence[str] = CLASSES,
    durations: Mapping[str, float] | None = None,
    files: Iterable[str] | None = None,
) -> dict[str, SedScores]:
    """Both DCASE task 4 scores: ``{"event": event_based(...), "segment": segment_based(...)}``."""
    ref = events_by_file(reference, classes=classes)
    est = events_by_file(estimate, classes=classes)
    return {
        "event": event_based(ref, est, classes=classes, files=files),
        "segment": segment_based(ref, est, classes=classes, durations=durations, files=files),
    }
