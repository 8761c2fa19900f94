"""The live view of a cluster run (``streamkit monitor --ray ... --web``): shard side and driver side, without Ray.

In each shard, :class:`ShardWeb` puts the ``web.tap`` block of a single-process live view on every
station graph, feeding a hub of the shard's own (:class:`~streamkit.web.hub.LiveHub`, no server):
the waterfall rows are computed where the audio is, and only they cross the wire (256 bytes a row,
10 rows/s). That hub's per-station rings are the shard's bounded web outbox: the tap only appends
to them, never waits; rows the driver has not taken when a ring is full are lost, counted per
station (``rows_dropped``) and reported with the next batch. Audio crosses the wire only for the
stations a viewer listens to (the driver names them in each poll), as 16-bit PCM, the page's own
resolution.

On the driver, :class:`DriverWeb` feeds the batches into the :class:`~streamkit.web.attach.LiveView`'s
hub exactly as the taps of a single process do, so that the page is the same. A shard that is
restarted starts with empty rings; its stations' first rows carry the ``Gap(cause=reconnect)``
the resumed run reports, as after a reconnect in one process, and the audio's indices go on from
the station's confirmed point (the task's ``base``).
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterable
from typing import Any

import numpy as np

from streamkit.core.graph import Graph
from streamkit.core.registry import lookup
from streamkit.distributed.tasks import StationTask

__all__ = ["ShardWeb", "DriverWeb", "TAP", "ROW_OVERHEAD_BYTES"]

#: the block whose output the live view shows (as ``streamkit monitor --web``: the 8 kHz audio after the level meter)
TAP = "level"
#: the bytes of a row besides its bins, in the count of what crossed the wire (time, loss, gap flag, cause)
ROW_OVERHEAD_BYTES = 24


class ShardWeb:
    """A shard's side of the live view: ``web.tap`` on each station graph, into a hub of its own.

    ``options``: ``bins``, ``rows_per_s`` (the page's resolution), ``backlog_s`` (seconds of rows a
    station keeps for the driver; older ones are dropped and counted), ``audio_backlog_s``.
    """

    def __init__(self, options: dict[str, Any]) -> None:
        from streamkit.web.hub import LiveHub

        self.rows_per_s = float(options.get("rows_per_s", 10.0))
        self.hub = LiveHub(history_s=float(options.get("backlog_s", 10.0)), rows_per_s=self.rows_per_s, bins=int(options.get("bins", 256)),
                           log_kept=1, events_on_join=0, audio_chunks=int(options.get("audio_chunks", 256)))  # fmt: skip
        self._tasks: dict[str, StationTask] = {}
        self._rows: dict[str, int] = {}  # the last row taken, per station
        self._audio: dict[str, int | None] = {}  # the last audio chunk taken (None: nobody listens)
        self._lock = threading.Lock()  # poll() may run on more than one of Ray's threads
        self.sent_bytes = 0

    def attach(self, graph: Graph, task: StationTask) -> None:
        self.hub.station(task.name)
        graph.connect(TAP, graph.add(lookup("web.tap")(hub=self.hub.id, station=task.name), name="web"))
        self._tasks[task.name] = task
        self._rows[task.name] = 0
        self._audio[task.name] = None

    def take(self, listen: Iterable[str] = ()) -> dict[str, Any]:
        """Every station's new rows (and audio, for the stations in ``listen``) since the last take."""
        listen = set(listen)
        out: dict[str, Any] = {}
        with self._lock:
            for name, task in self._tasks.items():
                f = self.hub.feed(name)
                if f is None:
                    continue
                with f.lock:
                    rows, dropped = f.rows.take(self._rows[name])
                    self._rows[name] = f.rows.last
                    rate = f.rate
                    audio, audio_dropped = self._take_audio(name, f, name in listen)
                if not rows and not dropped and not audio and not audio_dropped:
                    continue
                base = task.base.get(TAP, 0)
                pcm = [(start + base, r, np.clip(np.rint(x * 32767.0), -32768, 32767).astype(np.int16), lost_s, gap)
                       for start, r, x, lost_s, gap in audio]  # fmt: skip
                out[name] = {"rows": rows, "rows_dropped": dropped, "rate": rate, "audio": pcm, "audio_dropped": audio_dropped}
                self.sent_bytes += sum(len(r[4]) + ROW_OVERHEAD_BYTES for r in rows) + sum(p[2].nbytes for p in pcm)
        return out

    def _take_audio(self, name: str, f: Any, listened: bool) -> tuple[list[Any], int]:
        if not listened:
            self._audio[name] = None
            return [], 0
        after = self._audio[name]
        if after is None:  # a viewer began to listen: start with the newest ~0.5 s, not seconds ago
            n, back, total = len(f.audio.items), 0, 0
            while back < n and total < 0.5 * (f.rate or 8000):
                back += 1
                total += f.audio.items[-back][2].shape[0]
            after = f.audio.last - back
        chunks, missed = f.audio.take(after)
        self._audio[name] = f.audio.last
        return [(s, r, (x[:, 0] if x.ndim == 2 else x), lost_s, gap) for s, r, x, lost_s, gap in chunks], missed


class DriverWeb:
    """The driver's side: the shards' batches into a :class:`~streamkit.web.attach.LiveView`'s hub.

    Each station's rows dropped by its shard (all incarnations) are in its status on the page
    (``rows_dropped``) and in :meth:`summary`.
    """

    def __init__(self, view: Any) -> None:
        self.view = view
        self.hub = view.hub
        self.rows_dropped: Counter[str] = Counter()
        self.audio_dropped: Counter[str] = Counter()
        self.rows: Counter[str] = Counter()
        self.bytes = 0

    def station(self, name: str, **info: Any) -> None:
        """Show station ``name`` (before the run: the page lists every station from the start)."""
        self.hub.station(name, **{k: v for k, v in info.items() if v is not None})

    def options(self) -> dict[str, Any]:
        """The shards' ``web`` option: the hub's resolution."""
        return {"bins": self.hub.bins, "rows_per_s": self.hub.rows_per_s}

    def listening(self) -> set[str]:
        """The stations some viewer listens to now."""
        srv = self.view.server
        if srv is None:
            return set()
        feeds = self.hub.feeds
        out = set()
        for s in list(srv.viewers):
            k = getattr(s.viewer, "listen", None)
            if k is not None and 0 <= k < len(feeds):
                out.add(feeds[k].name)
        return out

    def feed(self, batch: dict[str, Any]) -> None:
        """One shard's :meth:`ShardWeb.take`."""
        for name, b in batch.items():
            f = self.hub.station(name)  # made here if :meth:`station` did not name it first
            if b.get("rate") and b["rate"] != f.rate:
                with f.lock:
                    f.rate = float(b["rate"])
                    f.version += 1
            rows = b.get("rows") or []
            if rows:
                f.add_rows(rows)
                self.rows[name] += len(rows)
            for start, rate, pcm, lost_s, gap in b.get("audio") or []:
                f.add_audio(start, rate, pcm.astype(np.float32) / 32767.0, lost_s=lost_s, gap=gap)
            self.bytes += sum(len(r[4]) + ROW_OVERHEAD_BYTES for r in rows) + sum(a[2].nbytes for a in b.get("audio") or [])
            self.audio_dropped[name] += int(b.get("audio_dropped") or 0)
            n = int(b.get("rows_dropped") or 0)
            if n:
                self.rows_dropped[name] += n
                with f.lock:
                    f.status["rows_dropped"] = self.rows_dropped[name]
                    f.version += 1

    def summary(self) -> dict[str, Any]:
        return {"rows": dict(self.rows), "rows_dropped": dict(self.rows_dropped), "audio_dropped": dict(self.audio_dropped), "bytes": self.bytes}
