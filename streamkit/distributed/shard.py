"""A shard: many station graphs on one :class:`~streamkit.core.runtime.MultiRunner`, polled by a driver.

:class:`ShardWorker` knows nothing of Ray: :mod:`streamkit.distributed.ray_cluster` runs it as an
actor, tests run it in-process. It builds each station's graph with
:func:`streamkit.monitor.build_station_graph` (the graphs ``streamkit monitor`` runs), starts the
MultiRunner on a thread of its own, and answers :meth:`poll` with a bounded batch of events plus
each station's status: the items every block had delivered (shifted by the task's ``base``), the
wall time of that snapshot, the last event sequence number, the gaps and samples lost, and once a
station ends its final statistics and fatal reason. The status reported is the one taken at the
previous poll, so that every event about the items it counts has passed through the event queue
and been handed over by then (a resumed station starts after it).
"""

from __future__ import annotations

import os
import resource
import socket
import threading
import time
from pathlib import Path
from typing import Any

from streamkit.core.clock import RealTime
from streamkit.core.runtime import MultiRunner, Runner
from streamkit.distributed.outbox import Outbox, StationSink
from streamkit.distributed.tasks import StationTask
from streamkit.distributed.webfeed import ShardWeb

__all__ = ["ShardWorker", "GraphOptions"]

#: keyword arguments of :func:`streamkit.monitor.build_station_graph` a shard passes on, plus
#: ``events_on_node`` (a directory for node-local JSONL files), ``stats_interval_s`` and ``web``
#: (the live view's options, :class:`~streamkit.distributed.webfeed.ShardWeb`; absent: no live view)
GraphOptions = dict[str, Any]


class ShardWorker:
    """Runs ``tasks`` (one graph each) until each reaches its duration or :meth:`stop`."""

    def __init__(self, shard_id: int, tasks: list[StationTask], options: GraphOptions | None = None, outbox_size: int = 20000) -> None:
        from streamkit.io.jsonl_events import JsonlEventSink
        from streamkit.monitor import build_station_graph

        opts = dict(options or {})
        self.shard_id = shard_id
        self.outbox = Outbox(outbox_size)
        self.tasks = {t.name: t for t in tasks}
        self.sinks: dict[str, StationSink] = {}
        self.runners: dict[str, Runner] = {}
        node_events = opts.pop("events_on_node", None)
        stats_interval_s = float(opts.pop("stats_interval_s", 1.0))
        record_dir = opts.pop("record_dir", None)
        web_options = opts.pop("web", None)
        self.web: ShardWeb | None = ShardWeb(web_options) if web_options is not None else None
        for t in tasks:
            rec = record_dir
            if rec is not None and t.incarnation:  # a restart never overwrites the recording of an earlier run
                rec = str(Path(rec) / f"restart{t.incarnation}")
            params = dict(t.params)
            if t.resume_after_wall is not None:
                params["resume_after_wall"] = t.resume_after_wall
            g = build_station_graph(params, name=t.name, events_dir=None, record_dir=rec, **opts)
            local = JsonlEventSink(path=str(Path(node_events) / "{graph}.jsonl")) if node_events else None
            sink = StationSink(t, self.outbox, local)
            g.subscribe(sink)
            if self.web is not None:
                self.web.attach(g, t)
            self.sinks[t.name] = sink
            self.runners[t.name] = Runner(g, RealTime(), duration=t.duration, stats_interval_s=stats_interval_s)
        self.mr = MultiRunner(list(self.runners.values()))
        self.error: str | None = None
        self.finished = threading.Event()
        self._status: dict[str, Any] = {}
        self._cpu0 = _cpu_s()
        self._t0 = time.monotonic()
        self._thread = threading.Thread(target=self._run, name=f"streamkit-shard-{shard_id}", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            self.mr.run()
        except BaseException as exc:  # reported by poll(); the driver decides
            self.error = f"{type(exc).__name__}: {exc}"
        finally:
            self.finished.set()

    # -- what the driver calls ------------------------------------------------------------------
    def where(self) -> dict[str, Any]:
        """Host and process of this shard."""
        return {"host": socket.gethostname(), "pid": os.getpid()}

    def poll(self, max_events: int = 5000, listen: list[str] | None = None) -> dict[str, Any]:
        """At most ``max_events`` events, and the stations' status as of the previous poll; with a
        live view, its new rows (and the audio of the stations in ``listen``) under ``web``."""
        evs = self.outbox.take(max_events)
        status, self._status = self._status, self._snapshot()
        web = self.web.take(listen or ()) if self.web is not None else None
        return {"events": evs, "status": status, "dropped": dict(self.outbox.dropped), "backlog": len(self.outbox),
                "finished": self.finished.is_set(), "error": self.error, "cpu_s": _cpu_s() - self._cpu0,
                "wall_s": time.monotonic() - self._t0, "web": web}  # fmt: skip

    def _snapshot(self) -> dict[str, Any]:
        now = time.time()
        out: dict[str, Any] = {}
        for name, r in self.runners.items():
            t = self.tasks[name]
            sink = self.sinks[name]
            items = {n: t.base.get(n, 0) + node.out_index for n, node in r._nodes.items()}
            src = r._sources[0] if r._sources else None
            rate = float(src.out_spec.rate) if src is not None and src.out_spec is not None else None
            st: dict[str, Any] = {"items": items, "source": src.name if src is not None else None, "rate": rate, "wall": now,
                                  "seq": sink.last_seq, "gap_lost": sink.gap_lost, "gaps": dict(sink.gaps),
                                  "state": r.state}  # fmt: skip
            if src is not None and src.out_index:  # this run's first and last item in UTC (its time anchors): the stream it spans
                st["t_first_ns"], st["t_last_ns"] = src.ctx.anchors.time_of(0), src.ctx.anchors.time_of(src.out_index)
            if r.state in ("stopped", "fatal"):
                kiwi = r.graph.blocks.get("kiwi")
                st["fatal"] = getattr(kiwi, "fatal_message", None) or self.mr.failures.get(name) or r.fatal
                st["final"] = r.stats()
            out[name] = st
        return out

    def stop(self, timeout: float = 30.0) -> dict[str, Any]:
        """Stop every station (flushed, files closed) and return the last :meth:`poll`-style status, current."""
        self.mr.request_stop()
        self._thread.join(timeout)
        self._status = self._snapshot()
        return {"status": self._status, "finished": self.finished.is_set(), "error": self.error}


def _cpu_s() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime
