"""What an archive holds: its recordings, where each sample lies in UTC, and the events recorded with it.

A recording is an audio file (``.wav``, ``.flac``, ``.ogg``, ``.aiff``, ``.w64``, ``.rf64``). A
recording made by ``streamkit monitor --record`` has a sidecar ``<file>.json``
(:mod:`streamkit.io.wav_sink`) with its exact rate and its ``sk:time`` anchors, and its station's
events in ``<station>.jsonl`` (``monitor --events``, by default ``./events``); the station name is
the file's stem (``host-port-7100lsb``, a recording split by a format change ``host-port-7100lsb.1``)
and gives the frequency and mode. A plain audio file has none of these: no station, no UTC time
(``--since`` never matches it), no events.

Events are placed on a recording by their absolute times (``t_start_ns``/``t_end_ns``), since their
spans count items at the rate of the port that emitted them, not the recording's.
"""

from __future__ import annotations

import json
import math
import os
import re
from bisect import bisect_right
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any

__all__ = ["AUDIO_SUFFIXES", "INDEXED_KINDS", "Recording", "find_recordings", "read_station_events", "station_fields"]

AUDIO_SUFFIXES = (".wav", ".flac", ".ogg", ".aiff", ".aif", ".w64", ".rf64")
#: the event kinds an index keeps (and makes a segment entry of)
INDEXED_KINDS = ("sed.detection", "vad.segment", "asr.final")

_STATION = re.compile(r"^(?P<host>.+)-(?P<port>\d+)-(?P<freq>\d+(?:\.\d+)?)(?P<mode>[a-z]+)$")
_SPLIT = re.compile(r"^(?P<base>.+)\.(?P<n>\d+)$")


def station_fields(stem: str) -> tuple[str | None, float | None, str | None]:
    """``(station, freq_khz, mode)`` of a recording's stem (``host-8073-7100lsb`` -> ``(that, 7100.0, "lsb")``);
    the station is the stem without a split suffix ``.N``; frequency and mode None when the name is not a station's."""
    m = _SPLIT.match(stem)
    base = m.group("base") if m and _STATION.match(m.group("base")) else stem
    s = _STATION.match(base)
    if s is None:
        return None, None, None
    return base, float(s.group("freq")), s.group("mode")


@dataclass
class Recording:
    """One audio file of the archive and what is known about it.

    Attributes:
        path: the file.
        rate: exact sample rate (the sidecar's, else the header's).
        file_rate: the header's integer rate (what the samples are read at).
        items: frames in the file.
        channels: channels in the file (mixed to mono for embedding).
        station, freq_khz, mode: from the file name (None for a plain file).
        anchors: ``(offset, utc_ns)`` from the sidecar's ``sk:time`` tags, sorted (empty: no UTC time).
        sidecar_problem: why a sidecar was present but not used (None when fine or absent).
    """

    path: Path
    rate: Fraction
    file_rate: int
    items: int
    channels: int
    station: str | None = None
    freq_khz: float | None = None
    mode: str | None = None
    anchors: list[tuple[int, int]] = field(default_factory=list)
    sidecar_problem: str | None = None

    @classmethod
    def open(cls, path: Path) -> Recording:
        """Read the header (and sidecar); ``ValueError`` naming the file when it is not readable audio."""
        import soundfile as sf

        try:
            info = sf.info(str(path))
        except Exception as exc:  # soundfile raises its own error types
            msg = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise ValueError(f"{path}: not readable audio ({msg})") from None
        if info.frames <= 0 or info.samplerate <= 0:
            raise ValueError(f"{path}: no audio in the file")
        rec = cls(path, Fraction(int(info.samplerate)), int(info.samplerate), int(info.frames), int(info.channels))
        rec.station, rec.freq_khz, rec.mode = station_fields(path.stem)
        side = Path(os.fspath(path) + ".json")
        if side.is_file():
            try:
                d = json.loads(side.read_text(encoding="utf-8"))
                rate = Fraction(str(d["rate"]))
                if rate <= 0 or abs(float(rate) - info.samplerate) > 0.01 * info.samplerate:
                    raise ValueError(f"rate {rate} does not match the file's {info.samplerate} Hz")
                rec.rate = rate
                rec.anchors = sorted((int(t["offset"]), int(t["utc_ns"])) for t in d.get("tags", []) if t.get("key") == "sk:time")
            except (OSError, ValueError, KeyError, TypeError, ZeroDivisionError) as exc:
                rec.sidecar_problem = f"{side.name}: {exc}"
                rec.anchors = []
        return rec

    def utc_ns(self, offset: int) -> int | None:
        """UTC (ns) of the item at ``offset``: the last ``sk:time`` anchor at or before it plus the items since at the exact rate."""
        if not self.anchors:
            return None
        i = max(0, bisect_right([a for a, _ in self.anchors], offset) - 1)
        a, t = self.anchors[i]
        return int(t + (offset - a) * 1_000_000_000 / self.rate)

    def offset_at(self, utc_ns: int) -> int | None:
        """The item at UTC ``utc_ns`` (the inverse of :meth:`utc_ns`), clamped to the file; None without anchors."""
        if not self.anchors:
            return None
        i = max(0, bisect_right([t for _, t in self.anchors], utc_ns) - 1)
        a, t = self.anchors[i]
        o = a + math.floor((utc_ns - t) * self.rate / 1_000_000_000)
        return min(max(0, o), self.items)

    @property
    def utc_span(self) -> tuple[int, int] | None:
        s, e = self.utc_ns(0), self.utc_ns(self.items)
        return None if s is None or e is None else (s, e)


def find_recordings(root: Path) -> list[Path]:
    """The audio files under ``root`` (recursive, sorted; hidden directories and the index's own directory skipped)."""
    out: list[Path] = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith(".") and not (Path(dirpath) / d / "index.sqlite").is_file())
        out += [Path(dirpath) / f for f in sorted(filenames) if Path(f).suffix.lower() in AUDIO_SUFFIXES]
    return out


def read_station_events(path: Path) -> tuple[list[dict[str, Any]], int]:
    """The indexed kinds of a JSONL event file: ``(events, bad lines)``, each event
    ``{"kind", "t0", "t1" (UTC ns), "label", "text", "lang", "confidence"}``; events without times are dropped."""
    out: list[dict[str, Any]] = []
    bad = 0
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            if not line.strip():
                continue
            try:
                e = json.loads(line)
            except json.JSONDecodeError:
                bad += 1
                continue
            if not isinstance(e, dict) or e.get("kind") not in INDEXED_KINDS:
                continue
            t0, t1 = e.get("t_start_ns"), e.get("t_end_ns")
            if not isinstance(t0, int) or not isinstance(t1, int):
                continue
            p = e.get("payload") or {}
            kind = e["kind"]
            label = p.get("label") if kind == "sed.detection" else p.get("detector") if kind == "vad.segment" else p.get("lang")
            ev = {"kind": kind, "t0": t0, "t1": max(t0, t1), "label": None if label is None else str(label)}
            if kind == "asr.final":
                ev["text"] = str(p.get("text") or "")
            if isinstance(p.get("confidence"), (int, float)):
                ev["confidence"] = round(float(p["confidence"]), 3)
            out.append(ev)
    return out, bad
