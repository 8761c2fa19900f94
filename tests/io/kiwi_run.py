"""Shared by the KiwiSource tests: one source into a collecting sink, run in real time with its events kept."""

from __future__ import annotations

from typing import Any

from streamkit.core import events as E
from streamkit.core.clock import RealTime
from streamkit.core.graph import Graph
from streamkit.core.runtime import Runner
from streamkit.io.collect import CollectSink
from streamkit.io.kiwi_source import KiwiSource


def run_source(port: int, duration: float, name: str, **params: Any) -> tuple[CollectSink, Runner, KiwiSource]:
    """Run ``io.kiwi`` on the emulator at ``port`` for ``duration`` s of stream; (sink, runner, source)."""
    p: dict[str, Any] = dict(host="127.0.0.1", port=port, freq_khz=7100, mode="lsb", backoff_initial_s=0.05, backoff_cap_s=0.2)
    p.update(params)
    g = Graph(name)
    src = g.add(KiwiSource(**p), name="kiwi")
    sink = g.add(CollectSink(), name="k")
    g.connect(src, sink)
    r = Runner(g, RealTime(), duration=duration, keep_events=True, threaded_events=False, stats_interval_s=0)
    r.run()
    return sink, r, src


def states(r: Runner) -> list[tuple[str, str]]:
    """The source's (state, detail) pairs, in order."""
    return [(e.payload.state, e.payload.detail) for e in r.events if e.kind == E.SOURCE_STATE]
