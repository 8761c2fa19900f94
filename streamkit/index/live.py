"""``streamkit monitor --record DIR --index IDX``: index the recordings while they are being made.

A background thread (:class:`LiveIndexer`) wakes every ``interval_s``, asks each station's
``io.wav_sink`` how many items it has written and with which ``sk:time`` anchors
(``WavSink.describe()``: a copy of a few counters, no lock, no I/O on the scheduler thread), reads
the complete windows that are new from the WAV file on disk (:mod:`streamkit.index.growing`), embeds
them and adds them to the index, where ``streamkit search`` and the live view's search box find
them at once. The engine never waits for it: nothing of the graph calls into the indexer, and the
indexer only reads files and counters. When it falls behind (a slow embedder), each round does at
most ``max_windows`` windows per station and the rest waits on disk; the windows still missing at
the end (``deferred``) are embedded by the final pass.

When the run ends (the sinks have closed their files and written their sidecars), :meth:`finish`
stops the thread and runs :func:`~streamkit.index.build.build_index` over the recording directory
with the station's event files: it replaces each live file's entries by the full ones (UTC from the
sidecar, the events and ASR transcripts overlapping each window, the event segments, the last window
cut at the end of the file), reusing the vectors computed live, so only the event segments and the
windows not done live are embedded then. A live file's row carries size ``-1`` until then, so an
index left by a run that died is completed by the next ``streamkit index build``.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np

from streamkit.index.archive import Recording, station_fields
from streamkit.index.build import BuildReport, _windows, build_index
from streamkit.index.embed import AudioEmbedder
from streamkit.index.growing import read_frames
from streamkit.index.store import IndexStore

__all__ = ["LiveIndexReport", "LiveIndexer"]

log = logging.getLogger("streamkit.index.live")


@dataclass
class LiveIndexReport:
    """What a live index did: windows embedded ``live`` (during the run), ``deferred`` to the final pass,
    rounds that failed (``errors``, the first reasons in ``notes``), and the final pass's :class:`BuildReport`."""

    live: int = 0
    deferred: int = 0
    rounds: int = 0
    errors: int = 0
    notes: list[str] = field(default_factory=list)
    final: BuildReport | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"live": self.live, "deferred": self.deferred, "rounds": self.rounds, "errors": self.errors, "notes": self.notes,
                "final": None if self.final is None else self.final.to_dict()}  # fmt: skip


@dataclass
class _File:
    path: Path
    done: int = 0  # windows [0, done) embedded
    fresh: bool = True  # the file's row (if any, from an earlier run) is dropped on the first write
    known: dict[tuple[int, int], np.ndarray] = field(default_factory=dict)


class LiveIndexer:
    """Index the recordings of ``record_dir`` into ``index`` while the sinks write them (see the module docstring).

    ``sinks``: ``{station: io.wav_sink block}`` (added with :meth:`watch`); ``events_dir``: the stations'
    event files, for the final pass; ``embedder``: default the one called ``embedder_name``
    (:func:`~streamkit.index.embed.make_embedder`: ``sed`` or ``contrastive``, with ``embedder_weights``),
    loaded on the indexer's thread.
    """

    def __init__(self, index: str | os.PathLike[str], record_dir: str | os.PathLike[str], *, events_dir: str | os.PathLike[str] | None = None,
                 window_s: float = 10.0, hop_s: float = 5.0, interval_s: float = 5.0, max_windows: int = 64,
                 embedder: AudioEmbedder | None = None, embedder_name: str = "sed", embedder_weights: str | os.PathLike[str] | None = None,
                 ) -> None:  # fmt: skip
        if not (window_s > 0 and 0 < hop_s <= window_s):
            raise ValueError(f"need window > 0 and 0 < hop <= window, got {window_s} / {hop_s}")
        self.index = Path(index)
        self.record_dir = Path(record_dir)
        self.events_dir = None if events_dir is None else Path(events_dir)
        self.window_s, self.hop_s = float(window_s), float(hop_s)
        self.interval_s = float(interval_s)
        self.max_windows = int(max_windows)
        self.embedder = embedder
        self.embedder_name, self.embedder_weights = embedder_name, embedder_weights
        self.report = LiveIndexReport()
        self._sinks: dict[str, Any] = {}
        self._files: dict[str, _File] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._store: IndexStore | None = None

    def watch(self, station: str, sink: Any) -> None:
        self._sinks[station] = sink

    def start(self) -> None:
        self._thread = threading.Thread(target=self._main, name="streamkit-index", daemon=True)
        self._thread.start()

    # -- the thread ------------------------------------------------------------------------------------
    def _main(self) -> None:
        try:
            try:
                self._get_embedder()  # loaded (torch imported) here, before the first window is due
            except Exception as exc:
                self.report.errors += 1
                self.report.notes.append(f"embedder: {type(exc).__name__}: {exc}")
                return
            while not self._stop.wait(self.interval_s):
                self.poll()
        finally:
            if self._store is not None:
                self._store.close()
                self._store = None

    def _get_embedder(self) -> AudioEmbedder:
        if self.embedder is None:
            from streamkit.index.embed import make_embedder

            self.embedder = make_embedder(self.embedder_name, self.embedder_weights)
        return self.embedder

    def poll(self) -> int:
        """One round: index the complete windows written since the last; returns how many."""
        self.report.rounds += 1
        n = 0
        for station, sink in list(self._sinks.items()):
            if self._stop.is_set() and self._thread is not None and threading.current_thread() is self._thread:
                break
            try:
                n += self._index_new(station, sink)
            except Exception as exc:  # a round that fails is counted; the next one tries again
                self.report.errors += 1
                if len(self.report.notes) < 5:
                    self.report.notes.append(f"{station}: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}")
                log.warning("live index: %s: %s", station, exc)
        return n

    def _index_new(self, station: str, sink: Any) -> int:
        d = sink.describe()
        if d.get("subtype") != "PCM_16" or not d.get("file_rate"):
            return 0  # only 16-bit WAV is read while written; the final pass indexes the rest
        path = (self.record_dir / str(d["path"])).resolve()
        f = self._files.get(str(path))
        if f is None:
            f = self._files[str(path)] = _File(path)
        rate_hz, channels, items = int(d["file_rate"]), int(d["file_channels"]), int(d["items"])
        win, hop = max(1, round(self.window_s * rate_hz)), max(1, round(self.hop_s * rate_hz))
        complete = [(s, s + win) for s in range(f.done * hop, items - win + 1, hop)][: self.max_windows]
        if not complete:
            return 0
        emb = self._get_embedder()
        if self._store is None:
            self._store = IndexStore(self.index, create=True)
            desc = emb.describe() if hasattr(emb, "describe") else {"name": emb.name, "dim": emb.dim, "rate": emb.rate}
            self._store.check_embedder(desc, self.window_s, self.hop_s)
        x = read_frames(path, complete[0][0], complete[-1][1], channels, limit=items)
        base = complete[0][0]
        complete = [(s, e) for s, e in complete if e - base <= x.shape[0]]
        if not complete:
            return 0
        mono = x.mean(axis=1, dtype=np.float64).astype(np.float32) if channels > 1 else x[:, 0]
        clips = [_resample(mono[s - base : e - base], rate_hz, emb.rate) for s, e in complete]
        vecs = emb.embed(clips)
        st_name, freq, mode = station_fields(path.stem)
        rec = Recording(path, Fraction(str(d["rate"])), rate_hz, items, channels, st_name, freq, mode,
                        sorted((int(t["offset"]), int(t["utc_ns"])) for t in d.get("tags", []) if t.get("key") == "sk:time"))  # fmt: skip
        entries = [{"kind": "window", "label": None, "start": s, "end": e, "utc_start_ns": rec.utc_ns(s), "utc_end_ns": rec.utc_ns(e),
                    "events": [], "transcript": ""} for s, e in complete]  # fmt: skip
        span = rec.utc_span
        row = {"path": str(path), "size": -1, "mtime_ns": -1, "station": st_name, "freq_khz": freq, "mode": mode, "rate": str(rec.rate),
               "file_rate": rate_hz, "items": items, "channels": channels, "utc_start_ns": span[0] if span else None,
               "utc_end_ns": span[1] if span else None, "events_path": None, "nonfinite": 0, "notes": "being recorded"}  # fmt: skip
        self._store.append_entries(row, entries, vecs, fresh=f.fresh)
        f.fresh = False
        for (s, e), v in zip(complete, vecs):
            f.known[(s, e)] = v
        f.done += len(complete)
        self.report.live += len(complete)
        return len(complete)

    # -- the end ---------------------------------------------------------------------------------------
    def stop(self, timeout: float = 120.0) -> bool:
        """Stop the thread (it ends its current batch first); False if it did not stop within ``timeout``."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
            return not self._thread.is_alive()
        return True

    def finish(self, timeout: float = 120.0) -> LiveIndexReport:
        """Stop the thread and complete the index from the closed files (call after the sinks stopped)."""
        if not self.stop(timeout):
            self.report.notes.append(f"the indexer thread did not stop within {timeout:g} s: index not completed")
            return self.report
        t0 = time.perf_counter()
        dirs = [self.events_dir] if self.events_dir is not None and self.events_dir.is_dir() else []
        rep = build_index(self.record_dir, self.index, events_dirs=dirs, embedder=self.embedder, window_s=self.window_s, hop_s=self.hop_s,
                          known={p: f.known for p, f in self._files.items()})  # fmt: skip
        if rep.audio_s > 0:  # windows the final pass embedded: those of files it added, less the ones known
            total = sum(len(_windows(_items(p), *_win_hop(p, self.window_s, self.hop_s))) for p in rep.added)
            self.report.deferred = max(0, total - sum(len(f.known) for p, f in self._files.items() if p in rep.added))
        rep.seconds = time.perf_counter() - t0
        self.report.final = rep
        return self.report


def _resample(x: np.ndarray, rate: int, to: int) -> np.ndarray:
    if rate == to or not x.size:
        return np.ascontiguousarray(x, np.float32)
    import soxr

    return soxr.resample(x, rate, to, quality="HQ").astype(np.float32, copy=False)


def _items(path: str) -> int:
    import soundfile as sf

    return int(sf.info(path).frames)


def _win_hop(path: str, window_s: float, hop_s: float) -> tuple[int, int]:
    import soundfile as sf

    r = int(sf.info(path).samplerate)
    return max(1, round(window_s * r)), max(1, round(hop_s * r))
