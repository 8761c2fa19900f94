"""The event bus of a graph: every event to every subscriber, in order, on its own thread."""

from __future__ import annotations

import logging
import threading
from collections import deque

from streamkit.core.events import Event, kind_matches
from streamkit.core.graph import Subscription
from streamkit.core.sink_queue import SinkQueue, drop_victim

__all__ = ["EventBus"]

log = logging.getLogger("streamkit.runtime")


class EventBus:
    """Delivers events to subscribers in order, on its own thread, through a bounded queue.

    A slow subscriber never blocks the data path: when the queue is full the oldest *partial*
    event (``*.partial``, ``graph.stats``, ``level.*``) is dropped first, then the oldest event;
    drops are counted in ``dropped``. A sink with ``may_drop`` (a console) is fed through its own
    :class:`~streamkit.core.sink_queue.SinkQueue` instead, so that it never holds up the others;
    what it misses is counted in ``sink_dropped``.
    """

    def __init__(self, subscriptions: list[Subscription], maxlen: int = 10000, threaded: bool = True) -> None:
        self.subs = subscriptions
        self.maxlen = maxlen
        self.threaded = threaded and bool(subscriptions)
        self.q: deque[Event] = deque()
        self.cv = threading.Condition()
        self.dropped = 0
        self.sink_errors = 0
        self._closing = False
        self._thread: threading.Thread | None = None
        self._queues: dict[int, SinkQueue] = {}  # id(subscription) -> its own queue, for may_drop sinks

    @property
    def sinks_left_behind(self) -> list[str]:
        """The ``may_drop`` sinks still blocked when the run ended (their output stalled)."""
        return sorted({sq.label for sq in self._queues.values() if sq.left_behind})

    @property
    def sink_dropped(self) -> dict[str, int]:
        """Events each ``may_drop`` sink never got, by sink (only those that missed some)."""
        out: dict[str, int] = {}
        for sq in self._queues.values():
            if sq.dropped:
                out[sq.label] = out.get(sq.label, 0) + sq.dropped
        return out

    def open(self, graph_name: str) -> None:
        for s in self.subs:
            if getattr(s.sink, "may_drop", False):
                sq = SinkQueue(s.sink, graph_name, maxlen=getattr(s.sink, "queue_size", 1000))
                self._queues[id(s)] = sq
                sq.start()
            else:
                s.sink.open(graph_name)
        if self.threaded:
            self._thread = threading.Thread(target=self._loop, name=f"events-{graph_name}", daemon=True)
            self._thread.start()

    def publish(self, ev: Event) -> None:
        if not self.subs:
            return
        if not self.threaded:
            self._deliver(ev)
            return
        with self.cv:
            if len(self.q) >= self.maxlen:
                del self.q[drop_victim(self.q)]
                self.dropped += 1
            self.q.append(ev)
            self.cv.notify()

    def _deliver(self, ev: Event) -> None:
        for s in self.subs:
            if kind_matches(ev.kind, s.kinds):
                sq = self._queues.get(id(s))
                if sq is not None:
                    sq.put(ev)
                    continue
                try:
                    s.sink.handle(ev)
                except Exception:  # a broken sink must not take the graph down
                    self.sink_errors += 1
                    if self.sink_errors <= 3:
                        log.exception("event sink %s failed on %s", type(s.sink).__name__, ev.kind)

    def _loop(self) -> None:
        while True:
            with self.cv:
                while not self.q and not self._closing:
                    self.cv.wait(0.5)
                if not self.q and self._closing:
                    return
                batch = list(self.q)
                self.q.clear()
            for ev in batch:
                self._deliver(ev)

    def close(self) -> None:
        if self._thread is not None:
            with self.cv:
                self._closing = True
                self.cv.notify()
            self._thread.join(timeout=30)
        for s in self.subs:
            sq = self._queues.get(id(s))
            if sq is not None:
                sq.close(getattr(s.sink, "close_timeout_s", 5.0))
                continue
            try:
                s.sink.close()
            except Exception:
                log.exception("event sink %s failed to close", type(s.sink).__name__)
