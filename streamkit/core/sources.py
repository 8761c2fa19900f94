"""How the runner reads its sources: pacing by the clock mode, the duration limit, chunks cut at format changes, and the
gap, xrun and format tags of a source counted and reported as events. Functions of the :class:`~streamkit.core.runtime.Runner`
they are given (its scheduling loop calls :func:`read_source`)."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import numpy as np

from streamkit.core import events as E
from streamkit.core import tags as T
from streamkit.core.block import ErrorPolicy, Source
from streamkit.core.clock import FreeRun
from streamkit.core.errors import BlockError
from streamkit.core.nodes import Node, count_call
from streamkit.core.tags import Gap, GapCause, TimeAnchor
from streamkit.core.types import StreamSpec, Tag

if TYPE_CHECKING:
    from streamkit.core.runtime import Runner

__all__ = ["read_source", "source_tags"]

_perf = time.perf_counter_ns


def read_source(run: Runner, node: Node, now: float) -> bool:
    """Read one chunk from a source if the mode allows; returns True if items moved."""
    blk: Source = node.block  # type: ignore[assignment]
    spec = node.out_spec
    assert spec is not None
    rate = float(spec.rate)
    chunk = run.chunk or max(1, int(round(run.chunk_s * rate)))
    want = chunk
    if node.limit is not None:
        want = min(want, node.limit - node.out_index)
        if want <= 0:
            run._end_source(node, "duration reached")
            return False
    if not node.live and not isinstance(run.mode, FreeRun):
        speed = run.mode.speed
        due = node.t0 + (node.out_index + want) / (rate * speed)
        if now < due:
            node.next_due = due
            return False
    if node.live:  # take everything that arrived (up to the duration limit)
        want = (1 << 30) if node.limit is None else node.limit - node.out_index
    t0 = _perf()
    try:
        r = blk.read(want, node.ctx)
    except Exception as exc:
        if blk.on_error == ErrorPolicy.RAISE:
            raise BlockError(node.name, (node.out_index, node.out_index), exc) from exc
        run._failed(node, exc, node.out_index, np.zeros((0, 1)), 0)
        run._end_source(node, f"error: {exc}")
        return False
    dt = _perf() - t0
    if r is None:
        run._end_source(node, "end of stream")
        return False
    x = r.samples
    n = x.shape[0]
    if n or r.tags:
        if x.ndim == 1:
            x = x.reshape(n, 1)
        if x.dtype != spec.dtype or x.shape[1] != spec.channels:
            if x.shape[1] != spec.channels:
                raise BlockError(
                    node.name, (node.out_index, node.out_index + n), ValueError(f"source produced {x.shape[1]} channels, spec says {spec.channels}")
                )
            x = x.astype(spec.dtype)
        m = node.m
        count_call(node, dt, n)
        m.items_out += n
        m.items_in += n
        run._ingest_mono = time.monotonic_ns()
        tags = sorted(r.tags, key=lambda t: t.offset)
        if node.out_index == 0 and not any(t.key == T.TIME and t.offset == 0 for t in tags):
            tags.insert(0, Tag(0, T.TIME, TimeAnchor(run._t_start_wall, "host" if node.live else "synthetic")))
        # split at format changes so that each FormatChange starts a chunk
        cuts = sorted({t.offset for t in tags if t.key == T.FORMAT and t.offset > node.out_index})
        pieces = []
        lo = node.out_index
        for c in cuts + [node.out_index + n]:
            pieces.append(
                (
                    lo,
                    x[lo - node.out_index : c - node.out_index],
                    [t for t in tags if lo <= t.offset < c or (c == node.out_index + n and t.offset >= c)],
                )
            )
            lo = c
        base = node.out_index
        for p_start, p_x, p_tags in pieces:
            source_tags(run, node, p_tags)
            if p_x.flags.writeable:
                p_x.flags.writeable = False
            node.out_index = p_start + p_x.shape[0]
            for ch in node.children:
                run._push(ch, p_start, p_x, p_tags)
        node.out_index = base + n
        node.in_index = node.out_index
    if r.end:
        run._end_source(node, "end of stream")
    return bool(n > 0)


def source_tags(run: Runner, node: Node, tags: list[Tag]) -> None:
    # anchors first, so that a gap event is timed by the fresh anchor at its offset
    tags = sorted(tags, key=lambda t: (t.offset, t.key != T.TIME))
    for t in tags:
        if t.key == T.TIME:
            node.ctx.anchors.add(t.offset, t.value)
        elif t.key == T.GAP:
            g: Gap = t.value
            run.gap_count += 1
            run.gaps_by_cause[g.cause.value if isinstance(g.cause, GapCause) else str(g.cause)] += 1
            if g.lost:
                run.dropped_items += g.lost
            if g.cause == GapCause.RECONNECT:
                run.reconnects += 1
            run._emit_runtime(E.STREAM_GAP, E.GapInfo(g.cause.value if isinstance(g.cause, GapCause) else str(g.cause), g.lost, g.filled,
                               run.dropped_items, run.gap_count, g.detail), node, (t.offset, t.offset))  # fmt: skip
            if g.cause == GapCause.XRUN:
                run.xruns += 1
                run._emit_runtime(E.STREAM_XRUN, E.XrunInfo(g.detail or "input_overflow", run.xruns), node, (t.offset, t.offset))
        elif t.key == T.FORMAT:
            spec: StreamSpec = t.value.spec
            old_rate = float(node.out_spec.rate) if node.out_spec is not None else float(spec.rate)
            node.out_spec = spec
            node.ctx.out_specs = {"out": spec}
            node.ctx.anchors.set_rate(spec.rate)
            node.rate_in = float(spec.rate)
            if run.duration is not None:  # the limit is in seconds of stream: recount at the new rate
                elapsed = t.offset / old_rate
                node.limit = t.offset + int(round((run.duration - elapsed) * float(spec.rate)))
            run._emit_runtime(E.STREAM_FORMAT, {"spec": spec.to_dict()}, node, (t.offset, t.offset))
