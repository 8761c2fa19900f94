"""``streamkit index build``: embed the recordings of an archive into an index, incrementally.

Each recording gets one entry per window (``window_s`` long every ``hop_s``, the last one cut at the
end of the file; a file shorter than a window gets one) and one per indexed event
(:data:`~streamkit.index.archive.INDEXED_KINDS`) that falls in it: its own span, at least 1 s
(widened around its middle) and embedded over at most one window from its start. Every entry
stores the events that overlap it and the text of the ASR finals among them.

A file already indexed with the same size and modification time is skipped; a changed one is
indexed again (its old entries dropped); a new one is added. A file that cannot be read is
skipped, counted and named in the report, and the build goes on. NaN/inf samples are read as 0
and counted per file (``files.nonfinite``).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from streamkit.index.archive import Recording, find_recordings, read_station_events
from streamkit.index.embed import AudioEmbedder
from streamkit.index.store import IndexStore

__all__ = ["BuildReport", "build_index", "default_events_dirs"]

MIN_SEGMENT_S = 1.0
BATCH = 16


@dataclass
class BuildReport:
    """What a build did: files ``added``, ``skipped`` (unchanged), ``failed`` (``(path, why)``), entries made, audio seconds."""

    index: Path
    added: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    failed: list[tuple[str, str]] = field(default_factory=list)
    windows: int = 0
    segments: int = 0
    audio_s: float = 0.0
    seconds: float = 0.0
    nonfinite: int = 0
    notes: list[str] = field(default_factory=list)

    @property
    def rtf(self) -> float | None:
        return self.seconds / self.audio_s if self.audio_s > 0 else None

    def to_dict(self) -> dict[str, Any]:
        return {"index": str(self.index), "added": self.added, "skipped": len(self.skipped), "failed": [list(f) for f in self.failed],
                "windows": self.windows, "segments": self.segments, "audio_s": round(self.audio_s, 3), "seconds": round(self.seconds, 3),
                "rtf": None if self.rtf is None else round(self.rtf, 5), "nonfinite": self.nonfinite, "notes": self.notes}  # fmt: skip


def default_events_dirs(archive: Path) -> list[Path]:
    """Where a station's ``<station>.jsonl`` is looked for by default: the archive, ``ARCHIVE/events`` and ``ARCHIVE/../events``."""
    return [d for d in (archive, archive / "events", archive.parent / "events") if d.is_dir()]


def _windows(items: int, win: int, hop: int) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    s = 0
    while True:
        e = min(s + win, items)
        out.append((s, e))
        if e >= items:
            return out
        s += hop


class _Reader:
    """Mono float32 clips of one file at the embedder's rate; NaN/inf read as 0 and counted."""

    def __init__(self, rec: Recording, rate: int) -> None:
        import soundfile as sf

        self.rec = rec
        self.rate = rate
        self.f = sf.SoundFile(str(rec.path))
        self.nonfinite = 0

    def clip(self, start: int, end: int) -> np.ndarray:
        self.f.seek(start)
        data = self.f.read(end - start, dtype="float32", always_2d=True)
        x = data.mean(axis=1, dtype=np.float64).astype(np.float32) if data.shape[1] > 1 else data[:, 0].copy()
        bad = ~np.isfinite(x)
        if bad.any():
            self.nonfinite += int(bad.sum())
            x[bad] = 0.0
        if self.rec.file_rate != self.rate and x.size:
            import soxr

            x = soxr.resample(x, self.rec.file_rate, self.rate, quality="HQ").astype(np.float32, copy=False)
        return x

    def close(self) -> None:
        self.f.close()


def _entries(rec: Recording, events: list[dict[str, Any]], win: int, hop: int) -> list[dict[str, Any]]:
    """The window and segment entries of ``rec`` (without vectors)."""
    out: list[dict[str, Any]] = []

    def overlapping(u0: int | None, u1: int | None) -> list[dict[str, Any]]:
        if u0 is None or u1 is None:
            return []
        return [e for e in events if e["t0"] < u1 and e["t1"] > u0]

    def entry(kind: str, label: str | None, s: int, e: int) -> dict[str, Any]:
        u0, u1 = rec.utc_ns(s), rec.utc_ns(e)
        evs = overlapping(u0, u1)
        text = " ".join(ev["text"] for ev in evs if ev.get("text"))
        return {"kind": kind, "label": label, "start": s, "end": e, "utc_start_ns": u0, "utc_end_ns": u1, "events": evs, "transcript": text}

    for s, e in _windows(rec.items, win, hop):
        out.append(entry("window", None, s, e))
    min_len = int(MIN_SEGMENT_S * rec.file_rate)
    for ev in events:
        s, e = rec.offset_at(ev["t0"]), rec.offset_at(ev["t1"])
        if s is None or e is None:
            continue
        if e - s < min_len:
            mid = (s + e) // 2
            s, e = max(0, mid - min_len // 2), min(rec.items, mid - min_len // 2 + min_len)
        if e > s:
            out.append(entry(ev["kind"], ev.get("label"), s, e))
    return out


def index_file(store: IndexStore, rec: Recording, embedder: AudioEmbedder, events: list[dict[str, Any]], events_path: Path | None,
               window_s: float, hop_s: float, st: os.stat_result,
               known: Mapping[tuple[int, int], np.ndarray] | None = None) -> tuple[int, int, int]:  # fmt: skip
    """Embed and store one recording: ``(windows, segments, nonfinite samples)``.

    ``known``: vectors already computed for windows of this file (``(start, end)`` -> vector; the live
    indexer's), used instead of embedding those windows again."""
    win, hop = max(1, round(window_s * rec.file_rate)), max(1, round(hop_s * rec.file_rate))
    span = rec.utc_span
    evs = [e for e in events if span is not None and e["t0"] < span[1] and e["t1"] > span[0]]
    entries = _entries(rec, evs, win, hop)
    reader = _Reader(rec, embedder.rate)
    try:
        known = known or {}
        todo = [i for i, e in enumerate(entries) if e["kind"] != "window" or (e["start"], e["end"]) not in known]
        v = np.zeros((len(entries), embedder.dim), np.float32)
        for i, e in enumerate(entries):
            if e["kind"] == "window" and (e["start"], e["end"]) in known:
                v[i] = known[(e["start"], e["end"])]
        for j in range(0, len(todo), BATCH):
            batch = todo[j : j + BATCH]
            clips = [reader.clip(entries[i]["start"], min(entries[i]["end"], entries[i]["start"] + win)) for i in batch]
            v[batch] = embedder.embed(clips)
    finally:
        reader.close()
    file = {"path": str(rec.path), "size": st.st_size, "mtime_ns": st.st_mtime_ns, "station": rec.station, "freq_khz": rec.freq_khz, "mode": rec.mode,
            "rate": str(rec.rate), "file_rate": rec.file_rate, "items": rec.items, "channels": rec.channels,
            "utc_start_ns": span[0] if span else None, "utc_end_ns": span[1] if span else None,
            "events_path": None if events_path is None else str(events_path), "nonfinite": reader.nonfinite, "notes": rec.sidecar_problem}  # fmt: skip
    store.add_file(file, entries, v)
    n_win = sum(1 for e in entries if e["kind"] == "window")
    return n_win, len(entries) - n_win, reader.nonfinite


def build_index(
    archive: str | os.PathLike[str],
    index: str | os.PathLike[str],
    *,
    events_dirs: Sequence[str | os.PathLike[str]] | None = None,
    embedder: AudioEmbedder | None = None,
    window_s: float = 10.0,
    hop_s: float = 5.0,
    progress: Callable[[str], None] | None = None,
    known: Mapping[str, Mapping[tuple[int, int], np.ndarray]] | None = None,
) -> BuildReport:
    """Add the recordings under ``archive`` (a directory or one audio file) to the index at ``index`` (created if needed).

    ``events_dirs``: where ``<station>.jsonl`` event files are looked for (default :func:`default_events_dirs`).
    ``embedder``: default the SED-posterior one (:func:`~streamkit.index.embed.default_embedder`).
    ``known``: vectors already computed, per resolved file path, ``{(start, end): vector}`` of its windows.

    Raises:
        FileNotFoundError: no such archive.
        ValueError: a bad window or hop.
        ArchiveIndexError: an index that is corrupt or was built by another embedder or window.
    """
    root = Path(archive)
    if not root.exists():
        raise FileNotFoundError(f"{root}: no such archive directory or file")
    if not (window_s > 0 and 0 < hop_s <= window_s):
        raise ValueError(f"need window > 0 and 0 < hop <= window, got {window_s} / {hop_s}")
    t_start = time.perf_counter()
    store = IndexStore(index, create=True)
    rep = BuildReport(Path(index))
    try:
        model: list[AudioEmbedder] = [] if embedder is None else [embedder]

        def get_embedder() -> AudioEmbedder:  # loaded (torch imported) only when a file needs it
            if not model:
                from streamkit.index.embed import default_embedder

                model.append(default_embedder())
            emb = model[0]
            desc = emb.describe() if hasattr(emb, "describe") else {"name": emb.name, "dim": emb.dim, "rate": emb.rate}
            store.check_embedder(desc, float(window_s), float(hop_s))
            return emb

        if embedder is not None:  # one given explicitly is checked against the index even when no file is new
            get_embedder()
        dirs = [Path(d) for d in events_dirs] if events_dirs is not None else default_events_dirs(root if root.is_dir() else root.parent)
        station_events: dict[str, tuple[list[dict[str, Any]], Path | None]] = {}
        paths = [root] if root.is_file() else find_recordings(root)
        idx_root = Path(index).resolve()
        for path in paths:
            apath = path.resolve()
            if idx_root in apath.parents:
                continue
            try:
                st = apath.stat()
                old = store.file_row(str(apath))
                if old is not None and old["size"] == st.st_size and old["mtime_ns"] == st.st_mtime_ns:
                    rep.skipped.append(str(apath))
                    continue
                rec = Recording.open(apath)
                if rec.sidecar_problem:
                    rep.notes.append(f"{apath}: sidecar ignored ({rec.sidecar_problem}): no UTC time")
                events: list[dict[str, Any]] = []
                ev_path = None
                if rec.station is not None:
                    if rec.station not in station_events:
                        found = next((d / f"{rec.station}.jsonl" for d in dirs if (d / f"{rec.station}.jsonl").is_file()), None)
                        evs, bad = read_station_events(found) if found is not None else ([], 0)
                        if bad:
                            rep.notes.append(f"{found}: {bad} unreadable line(s) skipped")
                        station_events[rec.station] = (evs, found)
                    events, ev_path = station_events[rec.station]
                if progress is not None:
                    progress(f"indexing {apath.name} ({rec.items / float(rec.rate):.1f} s)")
                n_win, n_seg, nonfinite = index_file(store, rec, get_embedder(), events, ev_path, window_s, hop_s, st, (known or {}).get(str(apath)))
            except (OSError, ValueError, RuntimeError) as exc:  # soundfile's read errors are RuntimeErrors
                msg = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
                rep.failed.append((str(apath), msg))
                continue
            rep.added.append(str(apath))
            rep.windows += n_win
            rep.segments += n_seg
            rep.nonfinite += nonfinite
            rep.audio_s += rec.items / float(rec.rate)
            if nonfinite:
                rep.notes.append(f"{apath}: {nonfinite} NaN/inf sample(s) read as 0")
    finally:
        store.close()
    rep.seconds = time.perf_counter() - t_start
    return rep
