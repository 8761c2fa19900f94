"""A shard's bounded event outbox and the per-station sink that fills it.

Events leave a shard only when the driver asks (``poll``): between two polls they wait in one
bounded :class:`Outbox` per shard. When it is full (the driver is slow or gone), new events are
dropped and counted per station; the audio path never waits on it. What the driver must not miss
(progress, losses, the end of a station) travels outside it, in the poll's status.
"""

from __future__ import annotations

import dataclasses
import threading
from collections import Counter, deque
from typing import Any

from streamkit.core import events as E
from streamkit.core.block import EventSink
from streamkit.core.events import Event
from streamkit.distributed.tasks import StationTask, rebase_port

__all__ = ["Outbox", "StationSink"]


class Outbox:
    """At most ``maxlen`` events of a shard; beyond that new events are dropped and counted per station."""

    def __init__(self, maxlen: int = 20000) -> None:
        self.maxlen = int(maxlen)
        self._q: deque[Event] = deque()
        self._lock = threading.Lock()
        self.dropped: Counter[str] = Counter()

    def put(self, ev: Event) -> None:
        with self._lock:
            if len(self._q) >= self.maxlen:
                self.dropped[ev.stream] += 1
                return
            self._q.append(ev)

    def take(self, max_n: int) -> list[Event]:
        with self._lock:
            n = min(max_n, len(self._q))
            return [self._q.popleft() for _ in range(n)]

    def __len__(self) -> int:
        return len(self._q)


class StationSink(EventSink):
    """Subscribed to one station graph in a shard: shifts the events of a resumed run onto the
    station's indices and sequence numbers (:class:`StationTask` ``base``, ``seq_base``), keeps the
    counters the driver needs even when events are dropped, and hands each event to the outbox and
    to an optional node-local sink (``io.jsonl_events``)."""

    def __init__(self, task: StationTask, outbox: Outbox, local: EventSink | None = None) -> None:
        self._init_params.clear()
        self.task = task
        self.outbox = outbox
        self.local = local
        self.last_seq = task.seq_base - 1
        self.gap_lost = 0
        self.gaps: Counter[str] = Counter()

    def open(self, graph_name: str) -> None:
        if self.local is not None:
            self.local.open(graph_name)

    def rebase(self, ev: Event) -> Event:
        t = self.task
        if not t.incarnation:
            return ev
        off = rebase_port(ev.port, t.base)
        payload = ev.payload
        if ev.kind == E.GRAPH_STATS and isinstance(payload, dict):
            payload = {**payload, "incarnation": t.incarnation}
        return dataclasses.replace(ev, span=(ev.span[0] + off, ev.span[1] + off), seq=ev.seq + t.seq_base, payload=payload)

    def handle(self, event: Event) -> None:
        ev = self.rebase(event)
        self.last_seq = max(self.last_seq, ev.seq)
        if ev.kind == E.STREAM_GAP:
            p: Any = ev.payload
            cause = getattr(p, "cause", None) or (p.get("cause") if isinstance(p, dict) else None)
            lost = getattr(p, "lost", None) if not isinstance(p, dict) else p.get("lost")
            self.gaps[str(getattr(cause, "value", cause))] += 1
            self.gap_lost += int(lost or 0)
        if self.local is not None:
            self.local.handle(ev)
        self.outbox.put(ev)

    def close(self) -> None:
        if self.local is not None:
            self.local.close()
