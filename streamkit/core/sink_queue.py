"""Delivery to event sinks that may fall behind: one bounded queue and one thread per sink.

The runtime's :class:`~streamkit.core.runtime.EventBus` delivers every event to every subscriber
on one thread, in order. That is what event files need (nothing lost, nothing reordered), but it
ties each subscriber to the slowest: a console whose terminal stops reading (a stalled pipe, a
suspended ``less``) would freeze the JSONL files behind it. A sink that declares
``may_drop = True`` (the console views) is instead fed through a :class:`SinkQueue`: its own
thread, its own queue of at most ``queue_size`` events. When the queue is full the oldest
*partial* event (``*.partial``, ``graph.stats``, ``level.*``) is dropped first, then the oldest
event; every drop is counted (``Runner.stats()["events_dropped_by_sink"]``), never silent.

:meth:`SinkQueue.close` waits at most ``close_timeout_s`` for the queue to drain and the sink to
close; a sink still blocked after that is left behind (its thread is a daemon, ``left_behind`` is
set) and the events it never got are counted as dropped. One sink subscribed to several graphs run
together (``streamkit monitor``'s table: one per station) has one queue per graph; only the last of
them to close waits, for all of them at once, so that a graph ending early (a kicked station)
never holds up the scheduler thread the others still stream on.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from typing import Any

from streamkit.core import events as E
from streamkit.core.events import Event

log = logging.getLogger("streamkit.events")

__all__ = ["SinkQueue", "drop_victim"]

_PARTIAL = (E.GRAPH_STATS, E.LEVEL)

_registry_lock = threading.Lock()
_open: dict[int, list[SinkQueue]] = {}  # id(sink) -> its queues not yet closed
_closing: dict[int, list[SinkQueue]] = {}  # id(sink) -> its queues closed but not yet waited for


def drop_victim(q: deque[Event]) -> int:
    """Index of the event to drop from a full queue: the oldest partial one, else the oldest."""
    return next((i for i, e in enumerate(q) if e.kind.endswith(".partial") or e.kind in _PARTIAL), 0)


class SinkQueue:
    """Feeds one ``EventSink`` from its own thread: ``open``, every event in order, ``close``.

    Args:
        sink: the subscriber (its ``open``, ``handle`` and ``close`` run on this thread only).
        graph_name: passed to ``sink.open``.
        maxlen: most events waiting; beyond it the oldest (partial first) are dropped and counted.
    """

    def __init__(self, sink: Any, graph_name: str, maxlen: int = 1000) -> None:
        self.sink = sink
        self.graph_name = graph_name
        self.maxlen = max(1, int(maxlen))
        self.q: deque[Event] = deque()
        self.cv = threading.Condition()
        #: events this sink never got (queue full, or still queued when it was left behind)
        self.dropped = 0
        self.errors = 0
        #: the sink was still busy when close gave up waiting (its output blocked)
        self.left_behind = False
        self._closing = False
        self._thread = threading.Thread(target=self._loop, name=f"events-{graph_name}-{type(sink).__name__}", daemon=True)

    @property
    def label(self) -> str:
        return getattr(self.sink, "registry_name", None) or type(self.sink).__name__

    def start(self) -> None:
        with _registry_lock:
            _open.setdefault(id(self.sink), []).append(self)
        self._thread.start()

    def put(self, ev: Event) -> None:
        with self.cv:
            if self._closing and not self._thread.is_alive():
                self.dropped += 1
                return
            if len(self.q) >= self.maxlen:
                del self.q[drop_victim(self.q)]
                self.dropped += 1
            self.q.append(ev)
            self.cv.notify()

    def close(self, timeout_s: float) -> bool:
        """Let the thread drain the queue and close the sink; wait at most ``timeout_s``.

        Returns whether it finished (``True`` without waiting while other queues of the same sink
        are open: the last one waits for all). A queue still busy at the deadline is left behind:
        its queued events are counted as dropped, and its thread ends on its own.
        """
        with self.cv:
            self._closing = True
            self.cv.notify()
        key = id(self.sink)
        with _registry_lock:
            still_open = _open.get(key, [])
            if self in still_open:
                still_open.remove(self)
            if still_open:  # not the last: the last one waits for this one too
                _closing.setdefault(key, []).append(self)
                return True
            _open.pop(key, None)
            queues = [*_closing.pop(key, []), self]
        deadline = time.monotonic() + timeout_s
        for q in queues:
            q._thread.join(timeout=max(0.0, deadline - time.monotonic()))
        stuck = [q for q in queues if q._thread.is_alive()]
        for q in stuck:
            with q.cv:
                left = len(q.q)
                q.q.clear()
                q.dropped += left
                q.left_behind = True
        if stuck:
            log.info("event sink %s did not finish within %g s (blocked output?): left behind", self.label, timeout_s)
        return self not in stuck

    def _call(self, what: str, fn: Any, *args: Any) -> None:
        try:
            fn(*args)
        except Exception:  # a broken sink must not take anything else down
            self.errors += 1
            if self.errors <= 3:
                log.exception("event sink %s failed in %s", self.label, what)

    def _loop(self) -> None:
        self._call("open", self.sink.open, self.graph_name)
        while True:
            with self.cv:
                while not self.q and not self._closing:
                    self.cv.wait(0.5)
                if not self.q:  # closing and drained
                    break
                ev = self.q.popleft()
            self._call(ev.kind, self.sink.handle, ev)
        self._call("close", self.sink.close)
