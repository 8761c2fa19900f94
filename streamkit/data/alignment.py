"""Align a reception with its transmission's schedule: the parallel corpus of a real reception.

Steps (:func:`align`):

1. **Coarse rate.** The reception (at ``rx_rate``) is resampled to the schedule's rate by a small
   rational factor ``q ~ rate / rx_rate`` (``scipy.signal.resample_poly``); what ``q`` misses is
   part of the sampling-rate offset found below.
2. **Markers.** A scheduled marker's binary STFT mask is slid along the reception
   (:mod:`streamkit.dsp.align.detect`); the best start is that marker's hypothesis, kept when its
   score reaches ``threshold``, then located to a fraction of a sample on the waveform. Once two
   markers agree with the schedule, the others are searched only where the schedule puts them,
   at ``guided_threshold``, or by the chirp symbols' matched filter at ``matched_threshold``
   when the mask fails there (:mod:`streamkit.dsp.align.search`).
3. **Clock map and sanity checks.** A straight line ``j = offset + ratio * k`` (reception sample
   of reference sample ``k``) is fitted robustly to the found markers
   (:func:`~streamkit.dsp.align.clock.fit_clock`). A marker is usable when it was found, comes
   after the markers before it, and lies within ``tol_ms`` of the line (the spacing of the
   markers matches the schedule once the clock ratio is known). Sequence ``i`` (between markers
   ``i`` and ``i + 1``) is accepted when both its markers are usable and no recording gap (from
   the recording's sidecar) falls inside it; otherwise it is rejected with the reasons.
   ``ratio`` against the nominal ratio (``nominal_rate / rate``) is the SRO in ppm.
4. **SRO compensation.** Each utterance is read from the raw reception at the fitted positions
   by band-limited interpolation (:func:`~streamkit.dsp.align.clock.interpolate`): one
   resampling step, from the receiver's clock to the reference's, with no drift.
5. **GCC-PHAT.** Per speech segment of a sequence's utterances, the delay between the clean
   reference and the compensated reception (:func:`~streamkit.dsp.align.gcc.gcc_phat`); the
   median over the sequence is applied when at least ``gcc_min_segments`` segments agree within
   ``gcc_max_spread_ms`` (median deviation) and it is under ``gcc_limit_ms`` (16 ms); else the
   sequence keeps the marker alignment (``gcc_not_applied`` in the report says why).

:func:`write_outputs` writes ``audio/<utt>.wav`` (aligned reception), ``clean/<utt>.wav``
(reference), ``labels.rttm`` and ``report.json``.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray
from scipy.signal import resample_poly

from streamkit.data.transmission import Schedule
from streamkit.dsp.align.clock import ClockMap, fit_clock, interpolate
from streamkit.dsp.align.detect import SpecGrid, normalized_spectrogram
from streamkit.dsp.align.gcc import consistent_median, gcc_phat
from streamkit.dsp.align.search import find_markers
from streamkit.dsp.markers import marker_length

__all__ = ["AlignOptions", "AlignResult", "align", "coarse_factor", "write_outputs"]


@dataclass(frozen=True)
class AlignOptions:
    """Knobs of :func:`align` (defaults are the documented ones)."""

    threshold: float = 0.3
    guided_threshold: float = 0.2
    matched_threshold: float = 0.15
    tol_ms: float = 2.0
    max_sro_ppm: float = 1000.0
    gcc_limit_ms: float = 16.0
    gcc_min_segments: int = 2
    gcc_max_spread_ms: float = 0.05
    nominal_rate: float | None = None
    min_segment_s: float = 0.1


@dataclass
class AlignResult:
    """What :func:`align` found; ``utterances`` maps an accepted utterance id to (aligned, clean)."""

    report: dict[str, Any]
    utterances: dict[str, tuple[NDArray[np.float32], NDArray[np.float32]]] = field(default_factory=dict)
    labels: dict[str, NDArray[np.int64]] = field(default_factory=dict)


def coarse_factor(rate: float, rx_rate: float) -> Fraction:
    """A small rational ``up / down`` close to ``rate / rx_rate`` (within 2000 ppm)."""
    target = float(rate) / float(rx_rate)
    for limit in (16, 64, 256, 1024):
        q = Fraction(target).limit_denominator(limit)
        if q > 0 and abs(float(q) / target - 1.0) <= 2e-3:
            return q
    raise ValueError(f"no small rational factor for {rx_rate} Hz -> {rate} Hz")


def align(
    sched: Schedule,
    reference: NDArray[np.floating],
    received: NDArray[np.floating],
    rx_rate: float,
    *,
    gaps: list[tuple[int, int]] | None = None,
    options: AlignOptions | None = None,
) -> AlignResult:
    """Find the markers, check them, fit the clock, compensate it and refine each sequence's delay.

    ``gaps`` are ``(rx_sample, lost_samples)`` of the recording (a lost stretch of samples).
    """
    o = options or AlignOptions()
    rate = sched.rate
    rx = np.asarray(received, dtype=np.float64)
    ref = np.asarray(reference, dtype=np.float32)
    q = coarse_factor(rate, rx_rate)
    rx_c = resample_poly(rx, q.numerator, q.denominator) if q != 1 else rx
    grid = SpecGrid.for_rate(rate)
    pn = normalized_spectrogram(rx_c, grid)
    nominal = float(o.nominal_rate or rx_rate)
    markers: list[dict[str, Any]] = []
    k_found, j_found, idx_found = [], [], []
    hits = find_markers(rx_c, pn, grid, [m.id for m in sched.markers], [m.start for m in sched.markers], ratio=float(q) * rx_rate / rate,
                        threshold=o.threshold, guided_threshold=o.guided_threshold,
                        matched_threshold=o.matched_threshold, max_ppm=o.max_sro_ppm,
                        tol=o.tol_ms * 1e-3 * rate)  # fmt: skip
    for i, (m, h) in enumerate(zip(sched.markers, hits)):
        entry: dict[str, Any] = {"id": m.id, "expected_start": m.start, "score": None, "rx_position": None, "status": "missing", "search": h.search}
        if h.score is not None:
            entry["score"] = round(h.score, 4)
        if h.fine is not None:
            j = h.fine.position / float(q)
            entry.update(rx_position=j, freq_offset_hz=round(h.fine.freq_offset_hz, 3), quality=round(h.fine.quality, 4), status="found")
            k_found.append(m.start)
            j_found.append(j)
            idx_found.append(i)
        markers.append(entry)
    tol = o.tol_ms * 1e-3 * rx_rate
    clock = fit_clock(k_found, j_found, nominal_ratio=rx_rate / rate, tol=tol, max_ppm=o.max_sro_ppm)
    usable = _check_markers(markers, idx_found, clock)
    report: dict[str, Any] = {
        "rate": rate,
        "rx_rate": float(rx_rate),
        "rx_samples": int(rx.size),
        "coarse_factor": f"{q.numerator}/{q.denominator}",
        "markers": markers,
        "clock": None,
        "sequences": [],
    }
    if clock is not None and len(clock.inliers) >= 2:
        report["clock"] = {
            "offset": clock.offset, "ratio": clock.ratio, "nominal_rate": nominal,
            "sro_ppm": round(clock.sro_ppm(nominal / rate), 3), "residual_ms": round(clock.residual_rms / rx_rate * 1e3, 4),
            "markers_used": len(clock.inliers),
        }  # fmt: skip
    result = AlignResult(report)
    n_mark = marker_length(rate)
    for si, seq in enumerate(sched.sequences):
        reasons = []
        for mi in (si, si + 1):
            if mi not in usable:
                reasons.append(f"marker {sched.markers[mi].id} {markers[mi]['status']}")
        entry = {"index": si, "utterances": [u.id for u in seq]}
        if not reasons and clock is not None and gaps:
            lo, hi = clock(sched.markers[si].start), clock(sched.markers[si + 1].start + n_mark)
            lost = [(int(a), int(n)) for a, n in gaps if lo <= a <= hi]
            if lost:
                reasons.append(f"recording gap at rx sample {lost[0][0]} ({sum(n for _, n in lost)} samples lost)")
        if reasons or clock is None or len(clock.inliers) < 2:
            entry.update(status="rejected", reasons=reasons or ["fewer than 2 usable markers"])
            report["sequences"].append(entry)
            continue
        _align_sequence(sched, si, ref, rx, clock, rate, o, entry, result)
        report["sequences"].append(entry)
    return result


def _check_markers(markers: list[dict[str, Any]], idx_found: list[int], clock: ClockMap | None) -> set[int]:
    """The paper's checks per marker: found, in order, on the clock line. Returns the usable indices."""
    usable: set[int] = set()
    last = -math.inf
    for n, i in enumerate(idx_found):
        j = markers[i]["rx_position"]
        if j <= last:
            markers[i]["status"] = "out of order"
            continue
        last = j
        if clock is None or n not in clock.inliers or len(clock.inliers) < 2:
            markers[i]["status"] = "off schedule"
            continue
        markers[i]["status"] = "ok"
        usable.add(i)
    return usable


def _align_sequence(sched: Schedule, si: int, ref: NDArray[np.float32], rx: NDArray[np.float64], clock: ClockMap, rate: int,
                    o: AlignOptions, entry: dict[str, Any], result: AlignResult) -> None:  # fmt: skip
    """Compensate the clock for each utterance of sequence ``si``, estimate and apply the GCC-PHAT delay."""
    seq = sched.sequences[si]
    limit = int(math.ceil(o.gcc_limit_ms * 1e-3 * rate))
    first = {}
    delays: list[float] = []
    for u in seq:
        k = u.start + np.arange(u.samples, dtype=np.float64)
        first[u.id] = y = interpolate(rx, clock(k), ratio=clock.ratio)
        clean = ref[u.start : u.start + u.samples]
        for a, b in u.speech:
            if b - a >= o.min_segment_s * rate:
                try:
                    delays.append(gcc_phat(clean[a:b], y[a:b], rate, max_delay=limit).delay)
                except ValueError:
                    continue
    med, why = consistent_median(delays, limit=o.gcc_limit_ms * 1e-3 * rate, min_segments=o.gcc_min_segments,
                                 max_spread=o.gcc_max_spread_ms * 1e-3 * rate)  # fmt: skip
    d = med if why is None else 0.0
    entry.update(status="accepted", gcc_segments=len(delays), gcc_median_ms=round(float(np.median(delays)) / rate * 1e3, 4) if delays else None,
                 delay_applied_ms=round(d / rate * 1e3, 4), rx_starts={})  # fmt: skip
    if why is not None:
        entry["gcc_not_applied"] = why
    for u in seq:
        if d:
            k = u.start + d + np.arange(u.samples, dtype=np.float64)
            y = interpolate(rx, clock(k), ratio=clock.ratio)
        else:
            y = first[u.id]
        entry["rx_starts"][u.id] = float(clock(u.start + d))
        result.utterances[u.id] = (y, ref[u.start : u.start + u.samples].copy())
        result.labels[u.id] = np.asarray(u.speech, dtype=np.int64).reshape(-1, 2)


def write_outputs(out_dir: str | os.PathLike[str], result: AlignResult, rate: int) -> Path:
    """``audio/<utt>.wav``, ``clean/<utt>.wav``, ``labels.rttm``, ``report.json`` under ``out_dir``; returns the report path."""
    from streamkit.eval.rttm import write_rttm
    from streamkit.io.outputs import write_audio, write_text

    d = Path(out_dir)
    for uid, (y, clean) in result.utterances.items():
        write_audio(d / "audio" / f"{uid}.wav", y, rate, subtype="FLOAT", durable=False)
        write_audio(d / "clean" / f"{uid}.wav", clean, rate, subtype="FLOAT", durable=False)
    write_rttm(d / "labels.rttm", result.labels, rate)
    rp = d / "report.json"
    write_text(rp, json.dumps(result.report, indent=1) + "\n")
    return rp
