"""A transmission for making a parallel corpus from real receptions: markers around speech sequences.

Layout (sample-exact at the transmission's rate)::

    M_0 | 5 s | sequence 0 | 1 s | M_1 | 5 s | sequence 1 | 1 s | M_2 | ... | sequence N-1 | 1 s | M_N

``M_i`` is chirp marker ``first_marker + i`` (:mod:`streamkit.dsp.markers`, 4 s). A sequence is
``per_sequence`` utterances, each followed by a silence of ``gap_s`` (a random length in
``[gap_min, gap_max]`` when a range is given). The silences after a marker let a receiver's AGC
recover before the speech, so the speech is received at a realistic gain.

The schedule (``<out>.json``, :func:`schedule_dict`) lists every marker's and utterance's first
sample and every utterance's speech intervals; ``<out>.rttm`` holds the speech labels of the
whole transmission. :func:`load_schedule` reads a schedule back and checks its shape.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any, Final

import numpy as np
from numpy.typing import NDArray

from streamkit.dsp.markers import DEFAULT_AMPLITUDE, MARKER_S, MAX_MARKERS, N_SYMBOLS, marker_length, marker_waveform

__all__ = [
    "FORMAT",
    "MarkerSlot",
    "Schedule",
    "Utterance",
    "UtteranceSlot",
    "build",
    "load_schedule",
    "load_utterances",
    "speech_intervals",
    "write_transmission",
]

#: schedule format tag
FORMAT: Final = "streamkit-transmission/1"
#: silence after each marker, seconds
AFTER_MARKER_S: Final = 5.0
#: silence after each sequence (before the next marker), seconds
AFTER_SEQUENCE_S: Final = 1.0


@dataclass(frozen=True)
class Utterance:
    """A clean utterance: ``audio`` at the transmission rate, speech ``intervals`` in samples (k, 2)."""

    name: str
    audio: NDArray[np.float32]
    intervals: NDArray[np.int64]


@dataclass(frozen=True)
class MarkerSlot:
    id: int
    start: int


@dataclass(frozen=True)
class UtteranceSlot:
    id: str
    source: str
    start: int
    samples: int
    speech: tuple[tuple[int, int], ...]


@dataclass(frozen=True)
class Schedule:
    """A transmission's schedule; sequence ``i`` lies between markers ``i`` and ``i + 1``."""

    rate: int
    samples: int
    audio: str
    markers: tuple[MarkerSlot, ...]
    sequences: tuple[tuple[UtteranceSlot, ...], ...]
    amplitude: float = DEFAULT_AMPLITUDE
    extra: dict[str, Any] = field(default_factory=dict)


def speech_intervals(x: NDArray[np.floating], rate: int, *, threshold_db: float = -35.0, bridge_s: float = 0.2) -> NDArray[np.int64]:
    """Speech intervals of a clean utterance: 20 ms frames within ``threshold_db`` of its loudest
    frame, gaps under ``bridge_s`` bridged, as sample ranges (k, 2)."""
    x = np.asarray(x, dtype=np.float64)
    hop = max(1, int(round(0.02 * rate)))
    n = x.size // hop
    if n == 0:
        return np.zeros((0, 2), dtype=np.int64)
    e = np.mean(x[: n * hop].reshape(n, hop) ** 2, axis=1)
    if float(e.max()) <= 0.0:
        return np.zeros((0, 2), dtype=np.int64)
    on = e >= float(e.max()) * 10.0 ** (threshold_db / 10.0)
    out: list[list[int]] = []
    for i in np.flatnonzero(on):
        a, b = int(i) * hop, (int(i) + 1) * hop
        if out and a - out[-1][1] <= bridge_s * rate:
            out[-1][1] = b
        else:
            out.append([a, b])
    return np.asarray(out, dtype=np.int64).reshape(-1, 2)


def load_utterances(directory: str | os.PathLike[str], rate: int) -> list[Utterance]:
    """Every ``*.wav`` / ``*.flac`` of ``directory`` (sorted by name), mono, resampled to ``rate``;
    labels from ``<stem>.rttm`` beside it when present, else :func:`speech_intervals`.

    Raises:
        ValueError: no audio file, an unreadable file, or samples outside [-1, 1].
    """
    import soundfile as sf
    from scipy.signal import resample_poly

    from streamkit.eval.rttm import read_rttm, segments_to_intervals

    d = Path(directory)
    if not d.is_dir():
        raise ValueError(f"--utterances {d}: not a directory")
    files = sorted(p for p in d.iterdir() if p.suffix.lower() in (".wav", ".flac") and p.is_file())
    if not files:
        raise ValueError(f"--utterances {d}: no .wav or .flac file")
    out = []
    for p in files:
        try:
            x, fs = sf.read(str(p), dtype="float32", always_2d=True)
        except Exception as exc:  # soundfile raises its own error types
            raise ValueError(f"{p}: cannot read audio ({str(exc).splitlines()[0] if str(exc) else type(exc).__name__})") from None
        x = x.mean(axis=1)
        if fs != rate:
            q = Fraction(int(rate), int(fs))
            x = resample_poly(x, q.numerator, q.denominator).astype(np.float32)
        if x.size and float(np.max(np.abs(x))) > 1.0:
            raise ValueError(f"{p}: samples beyond full scale after resampling to {rate} Hz")
        rttm = p.with_suffix(".rttm")
        if rttm.is_file():
            per = segments_to_intervals(read_rttm(rttm), rate)
            iv = np.concatenate(list(per.values())) if per else np.zeros((0, 2), dtype=np.int64)
            iv = np.clip(np.asarray(iv, dtype=np.int64).reshape(-1, 2), 0, x.size)
        else:
            iv = speech_intervals(x, rate)
        out.append(Utterance(p.stem, np.ascontiguousarray(x, dtype=np.float32), iv))
    return out


def build(
    utterances: list[Utterance],
    rate: int,
    *,
    per_sequence: int = 5,
    gap_s: tuple[float, float] = (2.0, 2.0),
    first_marker: int = 0,
    amplitude: float = DEFAULT_AMPLITUDE,
    seed: int = 0,
    audio_name: str = "tx.wav",
) -> tuple[NDArray[np.float32], Schedule]:
    """Lay out ``utterances`` (in order, ``per_sequence`` per sequence; the last may be shorter).

    Raises:
        ValueError: bad counts, gap, or more markers than the Gold family has.
    """
    if per_sequence < 1:
        raise ValueError(f"--per-sequence must be >= 1, got {per_sequence}")
    if not utterances:
        raise ValueError("no utterance to transmit")
    lo_gap, hi_gap = gap_s
    if not (math.isfinite(lo_gap) and math.isfinite(hi_gap) and 0 <= lo_gap <= hi_gap):
        raise ValueError(f"--gap must be MIN[:MAX] seconds with 0 <= MIN <= MAX, got {lo_gap}:{hi_gap}")
    n_seq = -(-len(utterances) // per_sequence)
    if first_marker < 0 or first_marker + n_seq >= MAX_MARKERS:
        raise ValueError(f"{n_seq} sequences need markers {first_marker}..{first_marker + n_seq}: at most {MAX_MARKERS - 1}")
    rng = np.random.default_rng(seed)
    parts: list[NDArray[np.float32]] = []
    pos = 0
    markers: list[MarkerSlot] = []
    sequences: list[tuple[UtteranceSlot, ...]] = []

    def put(x: NDArray[np.floating]) -> None:
        nonlocal pos
        parts.append(np.asarray(x, dtype=np.float32))
        pos += len(x)

    def silence(seconds: float) -> None:
        put(np.zeros(int(round(seconds * rate)), dtype=np.float32))

    for s in range(n_seq + 1):
        mid = first_marker + s
        markers.append(MarkerSlot(mid, pos))
        put(marker_waveform(mid, rate, amplitude=amplitude))
        if s == n_seq:
            break
        silence(AFTER_MARKER_S)
        slots = []
        for k, u in enumerate(utterances[s * per_sequence : (s + 1) * per_sequence]):
            uid = f"seq{s:03d}_utt{k:02d}_{u.name}"
            slots.append(UtteranceSlot(uid, u.name, pos, len(u.audio), tuple((int(a), int(b)) for a, b in u.intervals)))
            put(u.audio)
            silence(float(rng.uniform(lo_gap, hi_gap)) if hi_gap > lo_gap else lo_gap)
        sequences.append(tuple(slots))
        silence(AFTER_SEQUENCE_S)
    audio = np.concatenate(parts)
    sched = Schedule(int(rate), int(audio.size), audio_name, tuple(markers), tuple(sequences), float(amplitude))
    return audio, sched


def schedule_dict(s: Schedule) -> dict[str, Any]:
    """The JSON form of a schedule."""
    return {
        "format": FORMAT,
        "rate": s.rate,
        "samples": s.samples,
        "audio": s.audio,
        "marker": {"seconds": MARKER_S, "symbols": N_SYMBOLS, "samples": marker_length(s.rate), "amplitude": s.amplitude},
        "silence_after_marker_s": AFTER_MARKER_S,
        "silence_after_sequence_s": AFTER_SEQUENCE_S,
        "markers": [{"id": m.id, "start": m.start} for m in s.markers],
        "sequences": [
            {"index": i, "utterances": [{"id": u.id, "source": u.source, "start": u.start, "samples": u.samples, "speech": [list(iv) for iv in u.speech]} for u in seq]}
            for i, seq in enumerate(s.sequences)
        ],
    }  # fmt: skip


def write_transmission(out_wav: str | os.PathLike[str], audio: NDArray[np.float32], sched: Schedule) -> dict[str, Path]:
    """Write the audio (32-bit float WAV), ``<stem>.json`` (schedule) and ``<stem>.rttm`` (speech labels)."""
    from streamkit.eval.rttm import write_rttm
    from streamkit.io.outputs import write_audio, write_text

    out = Path(out_wav)
    js = out.with_suffix(".json")
    rt = out.with_suffix(".rttm")
    write_audio(out, audio, sched.rate, subtype="FLOAT")
    write_text(js, json.dumps(schedule_dict(sched), indent=1) + "\n")
    labels = [(u.start + a, u.start + b) for seq in sched.sequences for u in seq for a, b in u.speech]
    write_rttm(rt, {out.stem: np.asarray(labels, dtype=np.int64).reshape(-1, 2)}, sched.rate)
    return {"audio": out, "schedule": js, "rttm": rt}


def _int(d: Any, key: str, where: str, *, low: int = 0) -> int:
    v = d.get(key) if isinstance(d, dict) else None
    if isinstance(v, bool) or not isinstance(v, int) or v < low:
        raise ValueError(f"{where}: '{key}' must be an integer >= {low}")
    return v


def load_schedule(path: str | os.PathLike[str]) -> tuple[Schedule, Path]:
    """Read a schedule written by :func:`write_transmission`; returns it and its audio's path.

    Raises:
        ValueError: not JSON, not a transmission schedule, or a field of the wrong type.
    """
    p = Path(path)
    try:
        d = json.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ValueError(f"--reference {p}: no such file") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"--reference {p}: not JSON ({exc})") from None
    where = f"--reference {p}"
    if not isinstance(d, dict) or d.get("format") != FORMAT:
        raise ValueError(f"{where}: not a transmission schedule (expected format {FORMAT!r})")
    rate = _int(d, "rate", where, low=1)
    samples = _int(d, "samples", where)
    audio = d.get("audio")
    if not isinstance(audio, str) or not audio:
        raise ValueError(f"{where}: 'audio' must be a file name")
    amp = d.get("marker", {}).get("amplitude", DEFAULT_AMPLITUDE) if isinstance(d.get("marker"), dict) else DEFAULT_AMPLITUDE
    ms = d.get("markers")
    seqs = d.get("sequences")
    if not isinstance(ms, list) or len(ms) < 2 or not isinstance(seqs, list) or len(seqs) != len(ms) - 1:
        raise ValueError(f"{where}: needs 'markers' (a list of at least 2) and 'sequences' (one fewer)")
    markers = []
    for i, m in enumerate(ms):
        mid = _int(m, "id", f"{where}: markers[{i}]")
        if mid >= MAX_MARKERS:
            raise ValueError(f"{where}: markers[{i}]: id must be < {MAX_MARKERS}")
        markers.append(MarkerSlot(mid, _int(m, "start", f"{where}: markers[{i}]")))
    sequences = []
    for i, s in enumerate(seqs):
        us = s.get("utterances") if isinstance(s, dict) else None
        if not isinstance(us, list):
            raise ValueError(f"{where}: sequences[{i}]: 'utterances' must be a list")
        slots = []
        for k, u in enumerate(us):
            w = f"{where}: sequences[{i}].utterances[{k}]"
            if not isinstance(u, dict) or not isinstance(u.get("id"), str):
                raise ValueError(f"{w}: needs a string 'id'")
            sp = u.get("speech", [])
            if not isinstance(sp, list) or not all(
                isinstance(iv, list) and len(iv) == 2 and all(isinstance(v, int) and not isinstance(v, bool) for v in iv) for iv in sp
            ):
                raise ValueError(f"{w}: 'speech' must be a list of [start, end] sample pairs")
            slots.append(
                UtteranceSlot(u["id"], str(u.get("source", u["id"])), _int(u, "start", w), _int(u, "samples", w), tuple((a, b) for a, b in sp))
            )
        sequences.append(tuple(slots))
    starts = [m.start for m in markers]
    if any(b <= a for a, b in zip(starts, starts[1:])):
        raise ValueError(f"{where}: marker starts must increase")
    sched = Schedule(rate, samples, audio, tuple(markers), tuple(sequences), float(amp))
    return sched, p.parent / audio
