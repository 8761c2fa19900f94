"""Sound event detection (SED) scoring: DCASE label files, sed_eval F1 / error rate, PSDS.

**Label files** (DCASE task 4 format, tab-separated, UTF-8, an optional header line):

* *strong*: ``filename  onset  offset  event_label``, times in seconds. A row with the filename
  only (or with the three other fields empty, as DCASE submissions write it) declares a file with
  no events, so empty clips are not lost;
* *weak*: ``filename  event_labels``, the clip tags comma-separated (empty: no event).

Readers check every row (field count, finite times, ``0 <= onset < offset``, a known class, no
duplicate weak rows) and raise :class:`ValueError` naming the source and the 1-based line number.
Strong labels are held per file, ``{filename: [Event, ...]}`` in first-seen order (:data:`EventsByFile`);
every scorer takes that mapping, a flat iterable of :class:`Event` or a TSV path.

**Event- and segment-based scores** are computed by sed_eval (Mesaros et al., "Metrics for
polyphonic sound event detection", Appl. Sci. 2016), one ``evaluate`` call per file over the
union of reference and estimate files (or the ``files`` given):

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
(docs/experiments.md, SED findings).

For intervals, :func:`event_counts` gives the event-based counts per file and class (sed_eval's
matching is within a file, so they add up exactly to :func:`event_based`'s), and
:func:`bootstrap_macro_f1_gain` resamples the files to put a paired interval on the macro-F1 gain
of one system over another (docs/experiments.md, SED findings).

Each scorer gives a :class:`SedScores` (tagging without ER): macro F1 / precision / recall (mean over classes of the
per-class values, sed_eval's "class-wise average"), micro F1 (counts pooled over classes),
the overall error rate ER = (S + D + I) / N_ref, and per-class :class:`ClassScores`. Conventions
(sed_eval's, with ``empty_system_output_handling='zero_score'`` as the DESED baseline): a class
with reference events and no estimates has P = R = F1 = 0; a class with no reference events has
undefined recall, so its F1 is NaN and it is left out of the macro average (false alarms of a class
absent from the reference therefore do not lower macro F1, but they do lower micro F1 and raise
ER); with no reference at all, macro / micro F1 and ER are NaN.

**PSDS** (:func:`psds`, Bilen et al., ICASSP 2020) is computed by sed_scores_eval (Ebbers et al.,
ICASSP 2022; exact, threshold-free) from per-frame scores: a :class:`FrameScores` per file, a
``(frames, classes)`` array whose frame ``i`` covers ``[start + i*hop, start + (i+1)*hop)``.
:data:`PSDS1` and :data:`PSDS2` are the DCASE 2021+ scenarios. psds_eval is not used: it fails on
numpy 2.4.

sed_eval and sed_scores_eval are imported on first use (``pip install streamkit[sed]``), so
reading and writing label files needs neither.
"""

from __future__ import annotations

import io
import math
import os
import warnings
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, TextIO

import numpy as np
import numpy.typing as npt

from streamkit.data.sed_corpus import CLASSES
from streamkit.io.outputs import write_text

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

STRONG_HEADER = ("filename", "onset", "offset", "event_label")
WEAK_HEADER = ("filename", "event_labels")

ONSET_COLLAR_S = 0.2
OFFSET_COLLAR_S = 0.2
OFFSET_COLLAR_RATE = 0.2
SEGMENT_S = 1.0

#: DCASE 2021-2024 task 4 PSDS scenario 1 (tight localisation) and 2 (no cross-triggers, loose).
PSDS1: dict[str, Any] = {"dtc_threshold": 0.7, "gtc_threshold": 0.7, "cttc_threshold": None, "alpha_ct": 0.0, "alpha_st": 1.0, "max_efpr": 100.0}
PSDS2: dict[str, Any] = {"dtc_threshold": 0.1, "gtc_threshold": 0.1, "cttc_threshold": 0.3, "alpha_ct": 0.5, "alpha_st": 1.0, "max_efpr": 100.0}


@dataclass(frozen=True)
class Event:
    """One strongly labelled event (times in seconds)."""

    filename: str
    onset: float
    offset: float
    event_label: str

    def as_sed_eval(self) -> dict[str, Any]:
        return {"filename": self.filename, "event_onset": float(self.onset), "event_offset": float(self.offset), "event_label": self.event_label}


EventsByFile = dict[str, list[Event]]
"""Strong labels per file, first-seen order; a file may have no events."""

PathLike = str | os.PathLike[str]
EventsLike = Mapping[str, Sequence[Event]] | Iterable[Event] | PathLike


# --------------------------------------------------------------------------------------------
# label files


def _lines(src: PathLike | TextIO | Iterable[str], source: str | None) -> tuple[Iterable[str], str]:
    if isinstance(src, (str, os.PathLike)):
        p = Path(src)
        return p.read_text(encoding="utf-8").splitlines(), source or str(p)
    if isinstance(src, io.TextIOBase) or hasattr(src, "read"):
        return src.read().splitlines(), source or getattr(src, "name", "<stream>")  # type: ignore[union-attr]
    return src, source or "<lines>"


def _check_label(label: str, classes: Sequence[str] | None, where: str) -> str:
    if not label:
        raise ValueError(f"{where}: empty event label")
    if classes is not None and label not in classes:
        raise ValueError(f"{where}: unknown class {label!r}; one of {', '.join(classes)}")
    return label


def _time(text: str, name: str, where: str) -> float:
    try:
        t = float(text)
    except ValueError:
        raise ValueError(f"{where}: {name} {text!r} is not a number") from None
    if not math.isfinite(t):
        raise ValueError(f"{where}: {name} {text!r} is not finite")
    return t


def _check_event(filename: str, onset: float, offset: float, label: str, classes: Sequence[str] | None, where: str) -> Event:
    if not filename:
        raise ValueError(f"{where}: empty filename")
    if not (math.isfinite(onset) and math.isfinite(offset)):
        raise ValueError(f"{where}: onset/offset must be finite, got {onset!r}, {offset!r}")
    if onset < 0:
        raise ValueError(f"{where}: negative onset {onset}")
    if not onset < offset:
        raise ValueError(f"{where}: onset {onset} must be < offset {offset}")
    return Event(filename, float(onset), float(offset), _check_label(label, classes, where))


def parse_strong(lines: Iterable[str], *, source: str = "<lines>", classes: Sequence[str] | None = CLASSES) -> EventsByFile:
    """Parse strong DCASE TSV lines (header optional) into ``{filename: [Event, ...]}``."""
    out: EventsByFile = {}
    for no, raw in enumerate(lines, 1):
        line = raw.rstrip("\r\n")
        if not line.strip():
            continue
        where = f"{source}:{no}"
        f = line.split("\t")
        if no == 1 and tuple(x.strip() for x in f) == STRONG_HEADER:
            continue
        if len(f) == 1 or (len(f) == 4 and not any(x.strip() for x in f[1:])):
            name = f[0].strip()
            if not name:
                raise ValueError(f"{where}: empty filename")
            out.setdefault(name, [])
            continue
        if len(f) != 4:
            raise ValueError(f"{where}: expected 4 tab-separated fields (filename, onset, offset, event_label), got {len(f)}: {line!r}")
        name, label = f[0].strip(), f[3].strip()
        ev = _check_event(name, _time(f[1].strip(), "onset", where), _time(f[2].strip(), "offset", where), label, classes, where)
        out.setdefault(name, []).append(ev)
    return out


def parse_weak(lines: Iterable[str], *, source: str = "<lines>", classes: Sequence[str] | None = CLASSES) -> dict[str, frozenset[str]]:
    """Parse weak DCASE TSV lines (header optional) into ``{filename: frozenset(tags)}``."""
    out: dict[str, frozenset[str]] = {}
    for no, raw in enumerate(lines, 1):
        line = raw.rstrip("\r\n")
        if not line.strip():
            continue
        where = f"{source}:{no}"
        f = line.split("\t")
        if no == 1 and tuple(x.strip() for x in f) == WEAK_HEADER:
            continue
        if len(f) > 2:
            raise ValueError(f"{where}: expected 2 tab-separated fields (filename, event_labels), got {len(f)}: {line!r}")
        name = f[0].strip()
        if not name:
            raise ValueError(f"{where}: empty filename")
        if name in out:
            raise ValueError(f"{where}: duplicate row for {name!r}")
        tags = [t.strip() for t in f[1].split(",")] if len(f) == 2 and f[1].strip() else []
        out[name] = frozenset(_check_label(t, classes, where) for t in tags)
    return out


def read_strong_tsv(src: PathLike | TextIO | Iterable[str], *, classes: Sequence[str] | None = CLASSES, source: str | None = None) -> EventsByFile:
    """Read a strong label file (path, open text file or lines); see :func:`parse_strong`."""
    lines, name = _lines(src, source)
    return parse_strong(lines, source=name, classes=classes)


def read_weak_tsv(
    src: PathLike | TextIO | Iterable[str], *, classes: Sequence[str] | None = CLASSES, source: str | None = None
) -> dict[str, frozenset[str]]:
    """Read a weak label file (path, open text file or lines); see :func:`parse_weak`."""
    lines, name = _lines(src, source)
    return parse_weak(lines, source=name, classes=classes)


def events_by_file(events: EventsLike, *, classes: Sequence[str] | None = CLASSES) -> EventsByFile:
    """Normalise a mapping, a flat iterable of :class:`Event` or a TSV path to :data:`EventsByFile`,
    checking every event (onset < offset, finite, known class)."""
    if isinstance(events, (str, os.PathLike)):
        return read_strong_tsv(events, classes=classes)
    out: EventsByFile = {}
    if isinstance(events, Mapping):
        for name, evs in events.items():
            lst = out.setdefault(str(name), [])
            for i, e in enumerate(evs):
                if e.filename != name:
                    raise ValueError(f"{name!r} event {i}: filename {e.filename!r} differs from its key")
                lst.append(_check_event(e.filename, e.onset, e.offset, e.event_label, classes, f"{name!r} event {i}"))
        return out
    for i, e in enumerate(events):
        out.setdefault(e.filename, []).append(_check_event(e.filename, e.onset, e.offset, e.event_label, classes, f"event {i} ({e.filename!r})"))
    return out


def weak_from_strong(events: EventsLike, *, classes: Sequence[str] | None = CLASSES) -> dict[str, frozenset[str]]:
    """Clip tags of strong labels (files without events get an empty set)."""
    return {name: frozenset(e.event_label for e in evs) for name, evs in events_by_file(events, classes=classes).items()}


def _fmt(t: float, decimals: int) -> str:
    return f"{t:.{decimals}f}"


def strong_tsv_text(events: EventsLike, *, decimals: int = 3, header: bool = True, classes: Sequence[str] | None = CLASSES) -> str:
    """Strong TSV text; events sorted by (onset, label) per file, files in first-seen order; a file
    with no events is written as a filename-only row so that it survives a round trip."""
    lines = ["\t".join(STRONG_HEADER)] if header else []
    for name, evs in events_by_file(events, classes=classes).items():
        if not evs:
            lines.append(name)
        for e in sorted(evs, key=lambda e: (e.onset, e.event_label, e.offset)):
            lines.append(f"{name}\t{_fmt(e.onset, decimals)}\t{_fmt(e.offset, decimals)}\t{e.event_label}")
    return "\n".join(lines) + "\n"


def weak_tsv_text(tags: Mapping[str, Iterable[str]], *, header: bool = True, classes: Sequence[str] | None = CLASSES) -> str:
    """Weak TSV text, tags sorted and comma-separated."""
    lines = ["\t".join(WEAK_HEADER)] if header else []
    for name, t in tags.items():
        ts = sorted(set(t))
        for x in ts:
            _check_label(x, classes, f"{name!r}")
        lines.append(f"{name}\t{','.join(ts)}")
    return "\n".join(lines) + "\n"


def write_strong_tsv(path: PathLike, events: EventsLike, **kw: Any) -> Path:
    return write_text(path, strong_tsv_text(events, **kw))


def write_weak_tsv(path: PathLike, tags: Mapping[str, Iterable[str]], **kw: Any) -> Path:
    return write_text(path, weak_tsv_text(tags, **kw))


# --------------------------------------------------------------------------------------------
# sed_eval scores


def _import_sed_eval() -> Any:
    with warnings.catch_warnings():
        # dcase_util imports pkg_resources (hence setuptools<81), which warns that it is deprecated
        warnings.filterwarnings("ignore", message=".*pkg_resources.*")
        warnings.filterwarnings("ignore", category=DeprecationWarning)
        try:
            import sed_eval
        except ImportError as e:  # pragma: no cover - depends on the environment
            raise ImportError(f"SED scoring needs sed_eval: pip install 'streamkit[sed]' ({e})") from e
    return sed_eval


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


@dataclass(frozen=True)
class EventCounts:
    """Event-based counts per file and class: ``counts[i, k] = (N_ref, N_sys, N_tp)`` of ``files[i]``
    and ``classes[k]`` (see :func:`event_counts`). sed_eval matches events within a file, so the
    counts of any multiset of files add up to that multiset's score: ``macro_f1()`` of all files is
    :func:`event_based`'s macro F1, and resampled files give a bootstrap (:func:`bootstrap_macro_f1_gain`)."""

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
    points (fractions, as :func:`event_based`): ``pairs`` (each ``baseline``, ``method``, ``gain`` on
    all files and its percentile interval ``ci``), ``mean_gain`` and its ``ci`` (over the clips, the
    runs fixed), and the draws of the mean gain (``draws``, for any other statistic). What it
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


# --------------------------------------------------------------------------------------------
# PSDS from frame scores


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
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*pkg_resources.*")
        warnings.filterwarnings("ignore", category=DeprecationWarning)
        try:
            from sed_scores_eval import intersection_based
        except ImportError as e:  # pragma: no cover - depends on the environment
            raise ImportError(f"PSDS needs sed_scores_eval: pip install 'streamkit[sed]' ({e})") from e
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
