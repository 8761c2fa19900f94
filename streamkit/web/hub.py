"""The live view's hub: bounded per-station history that the engine writes and every viewer reads.

The engine side (the ``web.tap`` block on the scheduler thread, :class:`HubEvents` on the event
dispatcher) only appends to bounded rings under a short lock: it never waits for a viewer. Each
viewer (:class:`Viewer`) keeps its own cursor (the last sequence number it took) into every ring and
is polled by the server five times a second; a viewer that falls further behind than a ring
holds loses the oldest items, and the loss is counted per viewer (``missed_*``) and shown on its
page. Rings: waterfall rows (the last ``history_s`` seconds, what a late viewer sees first), events
(the last ``log_kept``; a late viewer gets the last ``events_on_join``), audio (a few seconds, sent
only to a viewer that listens to that station) and a status dict per station.

Nothing here imports aiohttp: the server (:mod:`streamkit.web.server`) and the benchmark both drive
:class:`Viewer` directly.
"""

from __future__ import annotations

import itertools
import json
import math
import threading
import time
import weakref
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from streamkit.core import events as E
from streamkit.core.block import EventSink
from streamkit.core.events import Event, event_to_dict
from streamkit.web import frames

__all__ = ["HubEvents", "LiveHub", "StationFeed", "Viewer", "get_hub"]

#: events that update a station's status only (they would flood the log): level, S-meter, stats, partials
STATUS_ONLY = frozenset({E.LEVEL, "kiwi.smeter", E.GRAPH_STATS, "asr.partial", "kiwi.info"})
#: ``source.state`` states as the page names them
STATE_NAMES = {"connecting": "connecting", "open": "streaming", "retrying": "reconnecting", "closed": "stopped", "fatal": "stopped"}

_HUBS: weakref.WeakValueDictionary[str, LiveHub] = weakref.WeakValueDictionary()
_ids = itertools.count(1)


def get_hub(hub_id: str) -> LiveHub:
    """The live hub registered under ``hub_id`` (the ``web.tap`` block finds its hub this way)."""
    try:
        return _HUBS[hub_id]
    except KeyError:
        raise KeyError(f"no live hub {hub_id!r} (it must exist before the graph starts)") from None


class _Ring:
    """A bounded deque with consecutive sequence numbers: ``take(after)`` -> (items, missed)."""

    def __init__(self, maxlen: int) -> None:
        self.items: deque[Any] = deque(maxlen=maxlen)
        self.last = 0  # sequence number of the newest item (items are 1, 2, ...)

    def add(self, item: Any) -> None:
        self.last += 1
        self.items.append(item)

    def take(self, after: int, limit: int | None = None) -> tuple[list[Any], int]:
        """Items with a sequence number > ``after`` (at most ``limit``, the newest), and how many were already gone."""
        new = self.last - after
        if new <= 0:
            return [], 0
        have = min(new, len(self.items))
        missed = new - have
        if limit is not None and have > limit:
            have = limit
        out = list(itertools.islice(reversed(self.items), have))
        out.reverse()
        return out, missed


@dataclass
class StationFeed:
    """One station's rings and status. Written by the engine's threads, read by viewers, under ``lock``."""

    index: int
    name: str
    info: dict[str, Any]
    history_rows: int
    log_kept: int
    audio_chunks: int
    lock: threading.Lock = field(default_factory=threading.Lock)
    rate: float | None = None
    bins: int = 0

    def __post_init__(self) -> None:
        self.rows = _Ring(self.history_rows)
        self.events = _Ring(self.log_kept)
        self.audio = _Ring(self.audio_chunks)
        self.status: dict[str, Any] = {"state": "starting", "detail": "", "smeter_dbm": None, "level_dbfs": None, "rtf": None,
                                       "stream_s": 0.0, "gaps": 0, "lost_s": 0.0, "segments": {}, "speech_t": None, "lang": None,
                                       "text": None, "partial": None, "classes": {}}  # fmt: skip
        self.version = 0  # bumped under ``lock`` whenever ``status`` or ``rate`` changes

    # -- engine side (the tap) -----------------------------------------------------------------------
    def add_rows(self, rows: Iterable[tuple[float, float, bool, str | None, bytes]]) -> None:
        with self.lock:
            for r in rows:
                self.rows.add(r)
                if r[2]:
                    self.status["lost_s"] += r[1]
                    self.version += 1

    def add_audio(self, start: int, rate: float, samples: np.ndarray, lost_s: float = 0.0, gap: bool = False) -> None:
        with self.lock:
            if rate != self.rate:
                self.rate = rate
                self.version += 1
            self.audio.add((start, rate, samples, lost_s, gap))

    # -- engine side (events) -------------------------------------------------------------------------
    def add_event(self, ev: Event) -> None:
        d = event_to_dict(ev)
        p = d["payload"] if isinstance(d["payload"], dict) else {}
        k = ev.kind
        with self.lock:
            self.version += 1
            s = self.status
            if k == E.SOURCE_STATE:
                st = p.get("state", "")
                if st == "warning":
                    s["detail"] = p.get("detail", "")
                else:
                    s["state"] = STATE_NAMES.get(st, st)
                    s["detail"] = p.get("detail", "") if st != "open" else ""
                    s["retry_in_s"] = p.get("retry_in_s")
            elif k == E.GRAPH_STATE:
                st = p.get("state")
                if st == "running" and s["state"] == "starting":
                    s["state"] = "streaming"
                elif st in ("stopped", "fatal"):
                    if s["state"] != "stopped":
                        s["detail"] = p.get("detail", "") or s["detail"]
                    s["state"] = "stopped"
            elif k == "kiwi.smeter":
                s["smeter_dbm"] = p.get("dbm")
            elif k == E.LEVEL:
                s["level_dbfs"] = _finite(p.get("rms_dbfs"))
            elif k == E.GRAPH_STATS:
                s["rtf"] = p.get("rtf_total")
                s["stream_s"] = p.get("stream_s") or s["stream_s"]
            elif k == E.STREAM_GAP:
                s["gaps"] += 1
            elif k == "vad.segment":
                det = p.get("detector", "?")
                s["segments"][det] = s["segments"].get(det, 0) + 1
                if ev.t_end_ns is not None:
                    s["speech_t"] = ev.t_end_ns / 1e9
            elif k == "asr.final":
                s["lang"] = p.get("lang") or s["lang"]
                s["text"] = p.get("text")
                s["partial"] = None
            elif k == "asr.partial":
                s["partial"] = p.get("text")
            elif k == "lid.result":
                s["lang"] = p.get("lang") or s["lang"]
            elif k == "sed.detection" and p.get("label"):
                s["classes"][str(p["label"])] = (ev.t_end_ns or ev.emitted_ns) / 1e9
            if k not in STATUS_ONLY:
                d["station"] = self.index
                self.events.add(d)


def _finite(x: Any) -> float | None:
    return float(x) if isinstance(x, (int, float)) and math.isfinite(x) else None


class LiveHub:
    """Every station's feed, and the viewers' bookkeeping.

    Args:
        history_s: seconds of waterfall a viewer gets when it connects.
        rows_per_s, bins: the waterfall's resolution (the taps use them).
        events_on_join: how many recent events a viewer gets when it connects.
        log_kept: events kept per station for the log (``/api/events.jsonl``).
        audio_chunks: audio chunks kept per station (a few seconds at the runner's chunk size).
    """

    def __init__(self, *, history_s: float = 60.0, rows_per_s: float = 10.0, bins: int = 256, events_on_join: int = 200,
                 log_kept: int = 5000, audio_chunks: int = 256) -> None:  # fmt: skip
        self.id = f"hub{next(_ids)}"
        self.history_s = history_s
        self.rows_per_s = rows_per_s
        self.bins = bins
        self.events_on_join = events_on_join
        self.log_kept = log_kept
        self.audio_chunks = audio_chunks
        self.feeds: list[StationFeed] = []
        self._by_name: dict[str, StationFeed] = {}
        self._lock = threading.Lock()
        self.ended: str | None = None
        self.started_ns = time.time_ns()
        self.events_sink = HubEvents(self)
        self._status_cache: tuple[int, str] | None = None
        _HUBS[self.id] = self

    def station(self, name: str, **info: Any) -> StationFeed:
        """The feed of station ``name`` (created on first use, in the order stations are added)."""
        with self._lock:
            f = self._by_name.get(name)
            if f is None:
                if len(self.feeds) > frames.MAX_STATIONS:
                    raise ValueError(f"more than {frames.MAX_STATIONS} stations in one live view")
                f = StationFeed(len(self.feeds), name, dict(info), int(math.ceil(self.history_s * self.rows_per_s)), self.log_kept, self.audio_chunks)
                f.bins = self.bins
                self.feeds.append(f)
                self._by_name[name] = f
            elif info:
                f.info.update(info)
            return f

    def feed(self, name: str) -> StationFeed | None:
        return self._by_name.get(name)

    def end(self, reason: str = "run finished") -> None:
        """The run is over: viewers are told so (their pages keep what they show)."""
        self.ended = reason

    def stations_status(self) -> str:
        """Every station's status as a JSON list, made again only after a status changed (viewers share it)."""
        version = sum(f.version for f in list(self.feeds))
        cached = self._status_cache
        if cached is not None and cached[0] == version:
            return cached[1]
        st = []
        for f in list(self.feeds):
            with f.lock:
                s = dict(f.status)
                s["segments"] = dict(s["segments"])
                s["classes"] = dict(s["classes"])
            s["index"] = f.index
            s["rate"] = f.rate
            st.append(s)
        text = json.dumps(st, default=_json_default)
        self._status_cache = (version, text)
        return text

    def stations_json(self) -> list[dict[str, Any]]:
        return [{"index": f.index, "name": f.name, **f.info, "rate": f.rate} for f in list(self.feeds)]

    def events_log(self, station: str | None = None) -> list[dict[str, Any]]:
        """The kept events of one station (or all, in station order)."""
        out = []
        for f in list(self.feeds):
            if station is not None and f.name != station:
                continue
            with f.lock:
                out.extend(f.events.items)
        return out


class HubEvents(EventSink):
    """The hub's event subscriber (one per hub, subscribed to every graph): status + event rings.

    It never waits (a lock and an append), so it runs on each graph's event dispatcher beside the
    JSONL files, and sees every event.
    """

    def __init__(self, hub: LiveHub) -> None:
        self._init_params.pop("hub", None)
        self.hub = hub

    def handle(self, event: Event) -> None:
        self.hub.station(event.stream).add_event(event)


@dataclass
class ViewerStats:
    frames_sent: int = 0
    bytes_sent: int = 0
    dropped_frames: int = 0  # the viewer's queue was full: the frame was not sent
    missed_rows: int = 0  # the viewer fell further behind than the rings hold
    missed_events: int = 0
    missed_audio: int = 0


class Viewer:
    """One browser's view: a cursor into every ring, the stations it watches, the one it listens to.

    The server calls :meth:`join` once, then :meth:`poll` every tick and :meth:`status` now and then;
    each returns frames (``bytes`` = binary, ``str`` = JSON text) to put on the viewer's queue.
    """

    def __init__(self, hub: LiveHub) -> None:
        self.hub = hub
        self.stats = ViewerStats()
        self.watch: set[int] | None = None  # None: every station
        self.listen: int | None = None
        self._rows: dict[int, int] = {}
        self._events: dict[int, int] = {}
        self._audio_next: int = 0
        self._audio_expect: int | None = None

    def hello(self) -> str:
        h = self.hub
        return json.dumps({"type": "hello", "stations": h.stations_json(), "bins": h.bins, "rows_per_s": h.rows_per_s, "history_s": h.history_s,
                           "gap_causes": list(frames.GAP_CAUSES), "started_ns": h.started_ns, "ended": h.ended}, allow_nan=False)  # fmt: skip

    def join(self) -> list[bytes | str]:
        """Hello, the recent history of every station (waterfall and events), then a status."""
        out: list[bytes | str] = [self.hello()]
        evs: list[dict[str, Any]] = []
        for f in list(self.hub.feeds):
            with f.lock:
                rows, _ = f.rows.take(0)
                self._rows[f.index] = f.rows.last
                e, _ = f.events.take(max(0, f.events.last - self.hub.events_on_join))
                self._events[f.index] = f.events.last
            evs.extend(e)
            out.extend(self._row_frames(f.index, rows))
        evs.sort(key=lambda d: d.get("emitted_ns") or 0)
        if evs:
            out.append(_events_msg(evs[-self.hub.events_on_join :], history=True))
        out.append(self.status())
        return out

    def set_listen(self, station: int | None) -> None:
        self.listen = station if station is not None and 0 <= station < len(self.hub.feeds) else None
        self._audio_expect = None
        if self.listen is not None:
            f = self.hub.feeds[self.listen]
            with f.lock:  # start with the newest ~0.4 s (the page's jitter buffer), not seconds ago
                n, back, total = len(f.audio.items), 0, 0
                while back < n and total < 0.4 * (f.rate or 8000):
                    back += 1
                    total += f.audio.items[-back][2].shape[0]
                self._audio_next = f.audio.last - back

    def set_watch(self, stations: Iterable[int] | None) -> None:
        self.watch = None if stations is None else {int(s) for s in stations}

    def poll(self) -> list[bytes | str]:
        out: list[bytes | str] = []
        evs: list[dict[str, Any]] = []
        for f in list(self.hub.feeds):
            watched = self.watch is None or f.index in self.watch
            with f.lock:
                rows, missed_r = f.rows.take(self._rows.get(f.index, 0))
                self._rows[f.index] = f.rows.last
                e, missed_e = f.events.take(self._events.get(f.index, 0))
                self._events[f.index] = f.events.last
            evs.extend(e)
            self.stats.missed_events += missed_e
            if watched:
                self.stats.missed_rows += missed_r
                out.extend(self._row_frames(f.index, rows))
        if evs:
            evs.sort(key=lambda d: d.get("emitted_ns") or 0)
            out.append(_events_msg(evs))
        if self.listen is not None:
            out.extend(self._audio_frames(self.hub.feeds[self.listen]))
        return out

    def _row_frames(self, index: int, rows: list[Any], per_frame: int = 50) -> list[bytes]:
        return [frames.encode_rows(index, rows[i : i + per_frame], self.hub.bins) for i in range(0, len(rows), per_frame)]

    def _audio_frames(self, f: StationFeed) -> list[bytes]:
        with f.lock:
            chunks, missed = f.audio.take(self._audio_next)
            self._audio_next = f.audio.last
        if not chunks:
            return []
        out = []
        if missed:
            self.stats.missed_audio += missed
        run: list[np.ndarray] = []
        run_start = 0
        run_lost, run_gap = 0.0, False
        rate = chunks[0][1]
        for start, r, samples, lost_s, gap in chunks:
            x = samples[:, 0] if samples.ndim == 2 else samples
            contiguous = self._audio_expect is None or start == self._audio_expect
            if run and (gap or not contiguous or r != rate):
                out.append(frames.encode_audio(f.index, rate, run_start, np.concatenate(run), lost_s=run_lost, gap=run_gap))
                run = []
            if not run:
                run_start, run_lost, run_gap, rate = start, lost_s, gap, r
            run.append(x)
            self._audio_expect = start + x.shape[0]
        if run:
            out.append(frames.encode_audio(f.index, rate, run_start, np.concatenate(run), lost_s=run_lost, gap=run_gap))
        return out

    def status(self) -> str:
        """The status message: every station's status (shared by all viewers, see
        :meth:`LiveHub.stations_status`) and this viewer's own counters."""
        v = self.stats
        head = json.dumps({"type": "status", "t": time.time(), "ended": self.hub.ended,
                           "viewer": {"dropped_frames": v.dropped_frames, "missed_rows": v.missed_rows, "missed_events": v.missed_events,
                                      "missed_audio": v.missed_audio, "frames_sent": v.frames_sent, "bytes_sent": v.bytes_sent}})  # fmt: skip
        return head[:-1] + ', "stations": ' + self.hub.stations_status() + "}"


def _json_default(o: Any) -> Any:
    if isinstance(o, (np.floating, np.integer)):
        return o.item()
    return str(o)


def _events_msg(evs: list[dict[str, Any]], history: bool = False) -> str:
    return json.dumps({"type": "events", "history": history, "items": evs}, default=_json_default)
