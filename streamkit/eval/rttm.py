"""RTTM files, sample-exact interval lists and boolean sample masks for speech activity.

Three representations of one file's speech activity, convertible without loss at a given rate:

* **intervals**: an ``int64`` array of shape ``(k, 2)`` of half-open sample ranges
  ``[start, stop)``, sorted, non-overlapping and non-adjacent after :func:`merge_intervals`
  (the paderbox ``ArrayInterval`` convention that the ham_radio labels use);
* **mask**: a ``bool`` array of length ``n_samples``, ``True`` = speech;
* **RTTM**: NIST Rich Transcription Time Marked ``SPEAKER`` lines, one per speech segment::

      SPEAKER <file> 1 <onset> <dur> <NA> <NA> speech <NA> <NA>

  with onset and duration in seconds.

Seconds <-> samples: ``start = round(onset * rate)``, ``stop = round((onset + dur) * rate)``.
:func:`rttm_lines` writes times with ``decimals=6`` by default, so that a write/read round trip
is sample-exact for any rate below 250 kHz (each written time is off by at most 0.5e-6 s, so the
re-read sample index is off by at most ``1e-6 * rate < 0.5`` before rounding).

For speech activity every ``SPEAKER`` line is speech whatever its speaker name; overlapping or
touching segments (several speakers, or split segments) are merged. Other RTTM line types
(``SPKR-INFO``, ``LEXEME``, ...) and comment lines (``;;`` or ``#``) are skipped. A malformed
``SPEAKER`` line, or a line whose type is not an RTTM type at all, raises :class:`ValueError`
naming the source and the 1-based line number.
"""

from __future__ import annotations

import io
import math
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TextIO

import numpy as np
import numpy.typing as npt

__all__ = [
    "RttmSegment",
    "intervals_to_mask",
    "mask_to_intervals",
    "merge_intervals",
    "parse_rttm",
    "read_rttm",
    "read_rttm_intervals",
    "read_rttm_masks",
    "rttm_lines",
    "samples_to_seconds",
    "seconds_to_samples",
    "segments_to_intervals",
    "write_rttm",
]

IntervalArray = npt.NDArray[np.int64]
"""``(k, 2)`` int64 array of half-open sample ranges ``[start, stop)``."""

RTTM_TYPES = frozenset(
    {
        "SEGMENT",
        "NOSCORE",
        "NO_RT_METADATA",
        "LEXEME",
        "NON-LEX",
        "NON-SPEECH",
        "FILLER",
        "EDIT",
        "IP",
        "SU",
        "CB",
        "A/P",
        "SPEAKER",
        "SPKR-INFO",
    }
)
"""Line types defined by the NIST RTTM format (RT-09 evaluation plan, appendix A)."""


# --------------------------------------------------------------------------------------------
# intervals <-> masks
# --------------------------------------------------------------------------------------------


def _as_intervals(intervals: npt.ArrayLike) -> IntervalArray:
    arr = np.asarray(intervals)
    if arr.size == 0:
        return np.zeros((0, 2), dtype=np.int64)
    if arr.ndim != 2 or arr.shape[1] != 2:
        raise ValueError(f"intervals must have shape (k, 2), got {arr.shape}")
    if not np.issubdtype(arr.dtype, np.integer):
        if not np.all(np.isfinite(arr)) or np.any(arr != np.round(arr)):
            raise ValueError("sample intervals must hold integers")
    out = arr.astype(np.int64)
    if np.any(out[:, 1] < out[:, 0]):
        bad = int(np.flatnonzero(out[:, 1] < out[:, 0])[0])
        raise ValueError(f"interval {bad} has stop < start: {out[bad].tolist()}")
    return out


def merge_intervals(intervals: npt.ArrayLike) -> IntervalArray:
    """Sort and merge overlapping **and adjacent** half-open sample intervals.

    ``[[0, 5], [5, 8], [7, 9], [12, 12]]`` -> ``[[0, 9]]`` (empty intervals are dropped).
    Vectorised: O(k log k) for k intervals.
    """
    arr = _as_intervals(intervals)
    arr = arr[arr[:, 1] > arr[:, 0]]
    if len(arr) == 0:
        return np.zeros((0, 2), dtype=np.int64)
    arr = arr[np.lexsort((arr[:, 1], arr[:, 0]))]
    starts, stops = arr[:, 0], arr[:, 1]
    # running maximum of the stops seen so far; a new group starts where start > that maximum
    reach = np.maximum.accumulate(stops)
    new_group = np.empty(len(arr), dtype=bool)
    new_group[0] = True
    new_group[1:] = starts[1:] > reach[:-1]
    first = np.flatnonzero(new_group)
    last = np.r_[first[1:] - 1, len(arr) - 1]
    return np.stack([starts[first], reach[last]], axis=1).astype(np.int64)


def mask_to_intervals(mask: npt.ArrayLike) -> IntervalArray:
    """Runs of ``True`` in a 1-D boolean mask as ``(k, 2)`` half-open sample intervals."""
    m = np.asarray(mask)
    if m.ndim != 1:
        raise ValueError(f"mask must be 1-D, got shape {m.shape}")
    m = m.astype(bool, copy=False)
    d = np.diff(m.view(np.int8), prepend=np.int8(0), append=np.int8(0))
    starts = np.flatnonzero(d == 1)
    stops = np.flatnonzero(d == -1)
    return np.stack([starts, stops], axis=1).astype(np.int64)


def intervals_to_mask(intervals: npt.ArrayLike, n_samples: int, *, clip: bool = False) -> npt.NDArray[np.bool_]:
    """Boolean mask of length ``n_samples``, ``True`` inside any interval (overlaps allowed).

    Intervals reaching outside ``[0, n_samples)`` raise :class:`ValueError` unless ``clip=True``,
    which cuts them to the file.
    """
    if n_samples < 0:
        raise ValueError(f"n_samples must be >= 0, got {n_samples}")
    arr = _as_intervals(intervals)
    if clip:
        arr = np.clip(arr, 0, n_samples)
    elif len(arr) and (arr.min() < 0 or arr.max() > n_samples):
        raise ValueError(f"intervals reach outside [0, {n_samples}): min {arr.min()}, max {arr.max()} (use clip=True to cut them)")
    delta = np.zeros(n_samples + 1, dtype=np.int64)
    np.add.at(delta, arr[:, 0], 1)
    np.add.at(delta, arr[:, 1], -1)
    return np.cumsum(delta[:-1]) > 0


# --------------------------------------------------------------------------------------------
# seconds <-> samples
# --------------------------------------------------------------------------------------------


def seconds_to_samples(seconds: npt.ArrayLike, rate: float) -> npt.NDArray[np.int64]:
    """``round(seconds * rate)`` as int64 (round half to even, as :func:`numpy.rint`)."""
    if rate <= 0:
        raise ValueError(f"rate must be > 0, got {rate}")
    return np.rint(np.asarray(seconds, dtype=np.float64) * rate).astype(np.int64)


def samples_to_seconds(samples: npt.ArrayLike, rate: float) -> npt.NDArray[np.float64]:
    """``samples / rate`` as float64."""
    if rate <= 0:
        raise ValueError(f"rate must be > 0, got {rate}")
    return np.asarray(samples, dtype=np.float64) / rate


# --------------------------------------------------------------------------------------------
# RTTM
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RttmSegment:
    """One ``SPEAKER`` line: file id, channel, onset and duration in seconds, speaker name."""

    file_id: str
    channel: str
    onset: float
    duration: float
    name: str = "speech"

    @property
    def end(self) -> float:
        return self.onset + self.duration


def _parse_time(token: str, what: str, where: str) -> float:
    try:
        value = float(token)
    except ValueError:
        raise ValueError(f"{where}: {what} {token!r} is not a number") from None
    if not math.isfinite(value):
        raise ValueError(f"{where}: {what} {token!r} is not finite")
    if value < 0:
        raise ValueError(f"{where}: {what} {token!r} is negative")
    return value


def parse_rttm(text: str | Iterable[str], source: str = "<rttm>") -> list[RttmSegment]:
    """Parse RTTM text (a string or an iterable of lines) into its ``SPEAKER`` segments.

    Blank lines and comments (``;;`` or ``#``) are skipped, as are the other RTTM line types.
    Raises :class:`ValueError` ``"<source>:<line>: ..."`` for an unknown line type, a ``SPEAKER``
    line with fewer than 9 or more than 10 fields, or a non-numeric, negative or non-finite onset
    or duration.
    """
    lines = text.splitlines() if isinstance(text, str) else text
    out: list[RttmSegment] = []
    for lineno, raw in enumerate(lines, start=1):
        line = raw.strip()
        if not line or line.startswith(";;") or line.startswith("#"):
            continue
        fields = line.split()
        where = f"{source}:{lineno}"
        kind = fields[0]
        if kind not in RTTM_TYPES:
            raise ValueError(f"{where}: unknown RTTM line type {kind!r} (line: {line!r})")
        if kind != "SPEAKER":
            continue
        if not 9 <= len(fields) <= 10:
            raise ValueError(
                f"{where}: SPEAKER line needs 9 or 10 fields "
                f"(SPEAKER file chnl tbeg tdur ortho stype name conf [slat]), got {len(fields)} (line: {line!r})"
            )
        onset = _parse_time(fields[3], "onset", where)
        duration = _parse_time(fields[4], "duration", where)
        out.append(RttmSegment(file_id=fields[1], channel=fields[2], onset=onset, duration=duration, name=fields[7]))
    return out


def read_rttm(path: str | os.PathLike[str] | TextIO) -> list[RttmSegment]:
    """Read an RTTM file (path or open text file) with :func:`parse_rttm`."""
    if isinstance(path, (str, os.PathLike)):
        with open(path, encoding="utf-8") as fh:
            return parse_rttm(fh, source=os.fspath(path))
    return parse_rttm(path, source=getattr(path, "name", "<rttm>"))


def segments_to_intervals(segments: Iterable[RttmSegment], rate: float) -> dict[str, IntervalArray]:
    """Merged sample intervals per file id (every ``SPEAKER`` segment counts as speech)."""
    per_file: dict[str, list[tuple[float, float]]] = {}
    for seg in segments:
        per_file.setdefault(seg.file_id, []).append((seg.onset, seg.end))
    out: dict[str, IntervalArray] = {}
    for file_id, times in per_file.items():
        out[file_id] = merge_intervals(seconds_to_samples(np.asarray(times, dtype=np.float64).reshape(-1, 2), rate))
    return out


def read_rttm_intervals(path: str | os.PathLike[str] | TextIO, rate: float) -> dict[str, IntervalArray]:
    """Read an RTTM file into merged sample intervals per file id."""
    return segments_to_intervals(read_rttm(path), rate)


def read_rttm_masks(
    path: str | os.PathLike[str] | TextIO, rate: float, n_samples: Mapping[str, int], *, clip: bool = True
) -> dict[str, npt.NDArray[np.bool_]]:
    """Read an RTTM file into a boolean speech mask per file of ``n_samples[file_id]`` samples.

    Every file in ``n_samples`` gets a mask (all ``False`` if the RTTM has no line for it); a file
    id in the RTTM but not in ``n_samples`` raises :class:`ValueError`. Segments running past the
    end of the file are cut when ``clip`` (the default; OpenSAD trims to the reference span).
    """
    intervals = read_rttm_intervals(path, rate)
    unknown = sorted(set(intervals) - set(n_samples))
    if unknown:
        raise ValueError(f"RTTM has file ids with no known length: {unknown[:5]}")
    return {fid: intervals_to_mask(intervals.get(fid, np.zeros((0, 2), np.int64)), n, clip=clip) for fid, n in n_samples.items()}


def _fmt(x: float, decimals: int) -> str:
    return f"{x:.{decimals}f}"


def rttm_lines(file_id: str, intervals: npt.ArrayLike, rate: float, *, label: str = "speech", channel: str = "1", decimals: int = 6) -> list[str]:
    """RTTM ``SPEAKER`` lines (without newline) for the merged sample intervals of one file.

    ``SPEAKER <file_id> <channel> <onset> <dur> <NA> <NA> <label> <NA> <NA>``. The duration is
    written as ``stop/rate - onset_written`` so that the reader's ``onset + dur`` rounds back to
    ``stop``.
    """
    if not file_id or any(c.isspace() for c in file_id):
        raise ValueError(f"file id must be non-empty and without whitespace, got {file_id!r}")
    if rate <= 0:
        raise ValueError(f"rate must be > 0, got {rate}")
    out: list[str] = []
    for start, stop in merge_intervals(intervals).tolist():
        onset_s = _fmt(start / rate, decimals)
        dur_s = _fmt(max(stop / rate - float(onset_s), 0.0), decimals)
        out.append(f"SPEAKER {file_id} {channel} {onset_s} {dur_s} <NA> <NA> {label} <NA> <NA>")
    return out


def write_rttm(
    path: str | os.PathLike[str] | TextIO,
    per_file: Mapping[str, npt.ArrayLike],
    rate: float,
    *,
    label: str = "speech",
    decimals: int = 6,
    durable: bool = True,
) -> None:
    """Write speech intervals (sample ranges) or boolean masks per file id as RTTM.

    Values of ``per_file`` may be ``(k, 2)`` interval arrays or 1-D boolean masks. A path is
    written atomically and only over a regular file (:func:`streamkit.io.outputs.write_text`;
    ``durable=False`` skips the fsync, for the many files of a corpus).
    """
    buf = io.StringIO()
    for file_id, value in per_file.items():
        arr = np.asarray(value)
        intervals = mask_to_intervals(arr) if arr.ndim == 1 and (arr.dtype == np.bool_ or arr.size == 0) else arr
        for line in rttm_lines(file_id, intervals, rate, label=label, decimals=decimals):
            buf.write(line + "\n")
    if isinstance(path, (str, os.PathLike)):
        from streamkit.io.outputs import write_text

        write_text(path, buf.getvalue(), durable=durable)
    else:
        path.write(buf.getvalue())
