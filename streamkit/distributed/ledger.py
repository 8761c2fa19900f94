"""The driver's side of a cluster run, without Ray: each station's ledger and the driver's sinks.

:class:`StationLedger` follows one station across the incarnations of its shard: the status the
shard last reported (items delivered per block, wall time, last event sequence number, losses),
what earlier incarnations delivered and lost, and whether the station ended (its duration, or a
fatal refusal by its server: such a station is never restarted). :meth:`StationLedger.resume`
makes the task of the next incarnation from the last status: it goes on at the confirmed indices,
and its first frame reports the outage since the confirmed wall time as ``Gap(cause=reconnect)``.

Accounting: ``delivered`` (items the source delivered, as confirmed) plus ``lost`` (every gap's
estimate, the reconnects after a restart included) is the station's stream; what a dead shard
received after its last confirmed status is inside the next incarnation's gap, never counted twice.
"""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path
from typing import Any

from streamkit.core import events as E
from streamkit.core.block import EventSink
from streamkit.core.events import Event
from streamkit.distributed.tasks import StationTask

__all__ = ["StationLedger", "DriverSinks"]


class StationLedger:
    def __init__(self, task: StationTask) -> None:
        self.task = task
        self.duration = task.duration
        self.started_wall = time.time()
        self.status: dict[str, Any] | None = None
        self.done = False
        self.fatal: str | None = None
        self.final: dict[str, Any] | None = None
        self.lost_before = 0  # gaps of earlier incarnations
        self.gaps_before: Counter[str] = Counter()
        self.dropped_before = 0
        self.dropped = 0
        self.events = 0
        self.rate: float | None = None
        self.max_seq = task.seq_base - 1  # of the events the driver received
        self.max_end: dict[str, int] = {}  # per block: the furthest span end the driver received
        self.gap_seen = 0  # items lost by the gaps whose events this incarnation sent
        self.gaps_seen: Counter[str] = Counter()

    def note(self, ev: Event) -> None:
        """An event of this station reached the driver."""
        self.events += 1
        self.max_seq = max(self.max_seq, ev.seq)
        if ev.kind == E.STREAM_GAP:
            p: Any = ev.payload
            self.gap_seen += int(getattr(p, "lost", 0) or 0)
            self.gaps_seen[str(getattr(p, "cause", "?"))] += 1
        if not ev.kind.startswith("graph."):
            node = ev.port.rsplit(".", 1)[0]
            if ev.span[1] > self.max_end.get(node, 0):
                self.max_end[node] = ev.span[1]

    def update(self, st: dict[str, Any], dropped: int = 0) -> None:
        """A status from the current incarnation's shard."""
        self.status = st
        self.dropped = dropped
        self.rate = st.get("rate") or self.rate
        if st.get("final") is not None:
            self.final = st["final"]
            self.fatal = st.get("fatal")
            self.done = True

    def resume(self, now: float | None = None) -> StationTask:
        """The next incarnation's task (the shard running this one died)."""
        st = self.status
        t = self.task
        if st is None:  # nothing confirmed by this incarnation: resume from where it started
            base, seq_base = dict(t.base), t.seq_base
            wall = t.resume_after_wall if t.resume_after_wall is not None else self.started_wall
        else:
            base, seq_base, wall = dict(st["items"]), int(st["seq"]) + 1, float(st["wall"])
            # the status lags the events by one poll: the run goes on after the furthest event received
            src = st.get("source")
            p0 = base.get(src, 0) if src else 0
            for node, end in self.max_end.items():
                base[node] = max(base.get(node, 0), end)
            if src and st.get("rate"):
                wall += (base.get(src, 0) - p0) / float(st["rate"])
                st = {**st, "items": base}
                self.status = st
            # the status lags: the gaps whose events arrived after it count too
            self.lost_before += max(int(st.get("gap_lost") or 0), self.gap_seen)
            gaps = Counter(st.get("gaps") or {})
            self.gaps_before.update(gaps if sum(gaps.values()) >= sum(self.gaps_seen.values()) else self.gaps_seen)
        self.dropped_before += self.dropped
        self.dropped = 0
        self.gap_seen = 0
        self.gaps_seen = Counter()
        duration = self.duration
        if duration is not None and st is not None and st.get("rate"):
            duration = max(0.0, duration - self.delivered / float(st["rate"]))
        seq_base = max(seq_base, self.max_seq + 1)
        self.task = t.resumed(base=base, seq_base=seq_base, resume_after_wall=wall, duration=duration)
        self.status = None
        self.started_wall = now if now is not None else time.time()
        return self.task

    @property
    def delivered(self) -> int:
        """Items the station's source delivered, as confirmed (all incarnations)."""
        st = self.status
        if st is not None and st.get("source"):
            return int(st["items"].get(st["source"], 0))
        return int(self.task.base.get("kiwi", 0))

    @property
    def lost(self) -> int:
        return self.lost_before + int((self.status or {}).get("gap_lost") or 0)

    def summary(self) -> dict[str, Any]:
        gaps = Counter(self.gaps_before)
        gaps.update((self.status or {}).get("gaps") or {})
        rate = self.rate
        return {"graph": self.task.name, "state": "fatal" if self.fatal else ("stopped" if self.done else "unfinished"),
                "fatal": self.fatal, "delivered": self.delivered, "lost": self.lost, "rate": rate,
                "stream_s": self.delivered / rate if rate else 0.0, "gaps_by_cause": dict(gaps), "restarts": self.task.incarnation,
                "events": self.events, "events_dropped": self.dropped_before + self.dropped, "final": self.final}  # fmt: skip


class DriverSinks:
    """The driver's event sinks: per-station JSONL files in ``events_dir`` (None: none) and any
    other sinks (the live console), each opened per station before the run and closed after it."""

    def __init__(self, names: list[str], events_dir: str | Path | None, others: list[EventSink] | None = None) -> None:
        from streamkit.io.jsonl_events import JsonlEventSink

        self.names = list(names)
        self.files: dict[str, EventSink] = {}
        if events_dir is not None:
            for n in self.names:
                self.files[n] = JsonlEventSink(path=str(Path(events_dir) / "{graph}.jsonl"))
        self.others = list(others or [])

    def open(self) -> None:
        for n in self.names:
            if n in self.files:
                self.files[n].open(n)
            for s in self.others:
                s.open(n)

    def handle(self, ev: Event) -> None:
        f = self.files.get(ev.stream)
        if f is not None:
            f.handle(ev)
        for s in self.others:
            s.handle(ev)

    def close(self) -> None:
        for n in self.names:
            if n in self.files:
                self.files[n].close()
            for s in self.others:
                s.close()
