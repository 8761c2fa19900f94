"""A running graph's statistics: RT factor in total and per block, loss counters, event counts and latencies."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from streamkit.core.runtime import Runner

__all__ = ["runner_stats"]


def runner_stats(run: Runner, brief: bool = False) -> dict[str, Any]:
    """A snapshot: RT factor total and per block, counters, latencies."""
    src_s = {s.name: (s.out_index / float(s.out_spec.rate) if s.out_spec else 0.0) for s in run._sources}
    audio_s = max(src_s.values()) if src_s else 0.0
    blocks: dict[str, Any] = {}
    busy = 0
    busy_first = 0
    for node in run._order:
        m = node.m
        busy += m.busy_ns
        busy_first += m.first_call_ns
        blocks[node.name] = m.to_dict(node.rate_in) if not brief else {"rtf": m.rtf(node.rate_in), "errors": m.errors}
    wall = time.monotonic() - run._t_start_mono if run._t_start_mono else 0.0
    st: dict[str, Any] = {
        "graph": run.graph.name,
        "mode": run.mode.name,
        "state": run.state,
        "stream_s": audio_s,
        "wall_s": wall,
        "rtf_total": (busy / 1e9) / audio_s if audio_s > 0 else None,
        "gaps": run.gap_count,
        "gaps_by_cause": dict(run.gaps_by_cause),
        "dropped_items": run.dropped_items,
        "xruns": run.xruns,
        "reconnects": run.reconnects,
        "blocks": blocks,
    }
    if not brief:
        st["rtf_total_incl_first_call"] = ((busy + busy_first) / 1e9) / audio_s if audio_s > 0 else None
        st["first_call_ms"] = {n.name: n.m.first_call_ns / 1e6 for n in run._order}
        st["start_ms"] = {n.name: n.m.start_ns / 1e6 for n in run._order}
        st["source_s"] = src_s
        st["events"] = dict(run.event_counts)
        st["events_dropped"] = run.bus.dropped
        if run.bus.sink_dropped:
            st["events_dropped_by_sink"] = run.bus.sink_dropped
        if run.bus.sinks_left_behind:
            st["event_sinks_left_behind"] = run.bus.sinks_left_behind
        st["latency_ms"] = {k: v.summary() for k, v in run.latency.items()}
        st["processing_latency_ms"] = {k: v.summary() for k, v in run.proc_latency.items()}
        st["algorithmic_latency_s"] = run.graph.path_latency_s()
        st["fatal"] = run.fatal
    return st
