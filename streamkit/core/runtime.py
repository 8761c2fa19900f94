"""Runner: the scheduler that moves chunks from sources through blocks to sinks.

Scheduling model (why it differs from GNU Radio's thread per block)
-------------------------------------------------------------------
One graph has one scheduler thread. Each block has one input, so the graph is a forest rooted at
its sources, and a chunk read from a source is pushed *depth-first* through every block below it
before the next chunk is read. Consequences:

* Edges hold at most one chunk: there are no queues between blocks to grow, and no per-edge
  locking. Backpressure is structural: a file or synthetic source is simply not read until the
  graph has finished the previous chunk (it is "paused"); the only place items can pile up is a
  live source's bounded :class:`~streamkit.core.ring.SampleRing`, which drops the oldest items
  into a counted ``Gap(OVERLOAD)`` when the graph falls behind. A live producer never blocks.
* The per-block overhead is a function call plus two clock reads on the fast path (a
  :class:`SyncBlock` and a chunk without tags), which the engine-overhead benchmark measures.
* Window blocks own no buffering: the runtime keeps a window buffer per block and calls the block
  once per chunk with every complete window as a strided view.

What the runtime guarantees to blocks: contiguous absolute indices, read-only input, tags moved
through rate changes with exact Fraction arithmetic (and re-based after resets), gap policies
applied (split + reset, or zero-fill), errors turned into ``block.error`` events and
``Gap(BLOCK_ERROR)`` zeros per ``on_error``, and staged parameter changes applied between chunks.
What it guarantees to users: every loss is a tag, an event and a counter; metrics per block; RT
factor with the first call (warm-up) reported apart; events delivered in order on their own thread.

The runtime's parts: this module (the :class:`Runner`: set-up, the push of a chunk through the
blocks, gaps, errors, flush), :mod:`streamkit.core.sources` (reading sources),
:mod:`streamkit.core.nodes` (the per-block record and call accounting),
:mod:`streamkit.core.buffers` (tag mapping through rate changes, window buffers),
:mod:`streamkit.core.event_bus` (event delivery), :mod:`streamkit.core.run_stats` (statistics) and
:mod:`streamkit.core.multi_runner` (many graphs on one thread). The names they define are
importable from here as before.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
import traceback
from collections import Counter
from dataclasses import replace
from fractions import Fraction
from math import floor
from typing import Any

import numpy as np

from streamkit.core import events as E
from streamkit.core import tags as T
from streamkit.core.block import (
    Block,
    ErrorPolicy,
    EventSink,
    GapPolicy,
    RateBlock,
    Sink,
    Source,
    SourceRead,
    SyncBlock,
    WindowBlock,
)
from streamkit.core.buffers import TagMapper, WindowBuffer, round_half_up
from streamkit.core.clock import FreeRun, Mode, Paced, RealTime
from streamkit.core.context import Context
from streamkit.core.errors import BlockError, ConfigError, GraphFatal
from streamkit.core.event_bus import EventBus
from streamkit.core.events import Event
from streamkit.core.graph import Graph
from streamkit.core.metrics import LatencyStats
from streamkit.core.nodes import RATE, SINK, SOURCE, SYNC, WINDOW, Node, count_call
from streamkit.core.run_stats import runner_stats
from streamkit.core.sources import read_source
from streamkit.core.tags import Gap, GapCause, ParamChange
from streamkit.core.types import Chunk, StreamSpec, Tag

log = logging.getLogger("streamkit.runtime")

_perf = time.perf_counter_ns


class Runner:
    """Runs a :class:`Graph`.

    Args:
        graph: the graph (built here if not yet).
        mode: :class:`FreeRun` (benchmarks), :class:`Paced` or :class:`RealTime`.
        chunk: items per source read (default: ``chunk_s`` of the source's rate).
        chunk_s: seconds per source read when ``chunk`` is not given (default 20 ms).
        duration: stop after this many seconds of stream time (per source), or None.
        threads: threads each block may use (``ctx.threads``).
        keep_events: also keep every event in ``self.events`` (tests, small runs).
        threaded_events: deliver events on a separate thread (default) or inline.
        max_consecutive_errors: a block failing this often in a row stops the graph (FATAL).
        stats_interval_s: wall seconds between ``graph.stats`` events (0: only at the end).
        error_policy: force every block's ``on_error`` (tests use ``ErrorPolicy.RAISE``).
        event_queue: bound of the event queue.
        notify: the Event live sources set when items arrive (shared by a :class:`MultiRunner`).
    """

    def __init__(
        self,
        graph: Graph,
        mode: Mode | None = None,
        *,
        chunk: int | None = None,
        chunk_s: float = 0.02,
        duration: float | None = None,
        threads: int = 1,
        keep_events: bool = False,
        threaded_events: bool = True,
        max_consecutive_errors: int = 10,
        stats_interval_s: float = 1.0,
        error_policy: ErrorPolicy | None = None,
        event_queue: int = 10000,
        notify: threading.Event | None = None,
    ) -> None:
        self.graph = graph
        self.mode: Mode = mode or FreeRun()
        self.chunk = chunk
        self.chunk_s = chunk_s
        self.duration = duration
        self.threads = threads
        self.keep_events = keep_events
        self.threaded_events = threaded_events
        self.max_consecutive_errors = max_consecutive_errors
        self.stats_interval_s = stats_interval_s
        self.error_policy = error_policy
        self.events: list[Event] = []
        self.bus = EventBus(graph.subscriptions, maxlen=event_queue, threaded=threaded_events)
        self._seq = itertools.count()
        self._nodes: dict[str, Node] = {}
        self._sources: list[Node] = []
        self._order: list[Node] = []
        self._stop = threading.Event()
        self.notify = notify or threading.Event()
        self._prepared = False
        self._bus_open = False
        self._started = False
        self._up: list[Node] = []  # blocks whose start() returned, in start order
        self._finished = False
        self.state = "new"
        self.fatal: str | None = None
        self.gaps_by_cause: Counter[str] = Counter()
        self.gap_count = 0
        self.dropped_items = 0
        self.xruns = 0
        self.reconnects = 0
        self.event_counts: Counter[str] = Counter()
        self.latency: dict[str, LatencyStats] = {}
        self.proc_latency: dict[str, LatencyStats] = {}
        self._ingest_mono = 0
        self._t_start_wall = 0
        self._t_start_mono = 0.0
        self._last_stats = 0.0
        self._emit_lock = threading.Lock()

    # ------------------------------------------------------------------ setup
    def prepare(self) -> None:
        """Negotiate (ConfigError before any audio), create contexts, start every block but the sources.

        Each block's ``start()`` loads its models and compiles its kernels here, while no source is
        open yet: a live source started first would stream into its ring during the compilation and
        drop what does not fit (``Gap(OVERLOAD)``). :meth:`start` then starts the sources; a
        :class:`MultiRunner` prepares every graph before it starts any source.
        """
        if self._prepared or self._started:
            return
        info = self.graph.build()
        self._t_start_wall = time.time_ns()
        for name in info.order:
            blk = self.graph.blocks[name]
            if self.error_policy is not None:
                blk.on_error = self.error_policy
            parent = info.parent[name]
            ctx = Context(blk, self.graph.name, info.in_specs[name], info.out_specs[name], self._emit_from_ctx, threads=self.threads,
                          port_in=f"{parent}.out" if parent else f"{name}.out", notify=self.notify)  # fmt: skip
            if isinstance(blk, Source):
                kind = SOURCE
            elif isinstance(blk, Sink):
                kind = SINK
            elif isinstance(blk, WindowBlock):
                kind = WINDOW
            elif isinstance(blk, RateBlock):
                kind = RATE
            elif isinstance(blk, SyncBlock):
                kind = SYNC
            else:
                raise ConfigError(f"{name}: {type(blk).__name__} is not a Source, SyncBlock, RateBlock, WindowBlock or Sink")
            node = Node(name, blk, ctx, kind)
            self._nodes[name] = node
            self._order.append(node)
        for name in info.order:
            node = self._nodes[name]
            node.children = [self._nodes[c] for c in info.children[name]]
            if node.kind == SOURCE:
                self._sources.append(node)
        self.bus.open(self.graph.name)
        self._bus_open = True
        self._start_nodes([n for n in self._order if n.kind != SOURCE])
        self._prepared = True

    def _start_nodes(self, nodes: list[Node]) -> None:
        try:
            for node in nodes:
                t0 = _perf()
                node.block.start(node.ctx)
                node.m.start_ns = _perf() - t0
                self._up.append(node)
                self._setup_node(node)
        except BaseException:
            self.abort()
            raise

    def abort(self) -> None:
        """Stop the blocks started so far (newest first) and close the event sinks: for a graph that
        was prepared, or failed to start, and will not run (a started graph ends with :meth:`finish`)."""
        if self._started:
            return
        up, self._up = self._up, []
        for n in reversed(up):
            self._safe_stop(n)
        if self._bus_open:
            self._bus_open = False
            self.bus.close()

    def start(self) -> None:
        """:meth:`prepare` (if not done), then start the sources: the first frame is asked for, and a
        live source opens its connection, only once every other block has started and warmed up."""
        if self._started:
            return
        self.prepare()
        self._start_nodes(self._sources)
        self._t_start_mono = time.monotonic()
        for s in self._sources:
            s.t0 = self._t_start_mono
            if self.duration is not None and s.out_spec is not None:
                s.limit = int(round(self.duration * float(s.out_spec.rate)))
        self._started = True
        self.state = "running"
        self._emit_runtime(E.GRAPH_STATE, E.SourceState("running", f"mode={self.mode.name}"), self._order[0], (0, 0))

    def _setup_node(self, node: Node) -> None:
        blk = node.block
        node.work = getattr(blk, "work", None)
        if node.kind == RATE:
            node.mapper = TagMapper(blk.ratio, blk.delay)  # type: ignore[attr-defined]
        elif node.kind == WINDOW:
            wb: WindowBlock = blk  # type: ignore[assignment]
            if wb.window < 1 or wb.hop < 1:
                raise ConfigError(f"{node.name}: window and hop must be >= 1 (got {wb.window}, {wb.hop})")
            node.mapper = TagMapper(wb.ratio, wb.delay)
            spec = node.in_spec
            assert spec is not None
            node.wbuf = WindowBuffer(wb.window, wb.hop, spec.channels, spec.dtype, wb.pad_start, node.in_index)
            node.work = wb.work_windows
        if node.mapper is not None:
            node.mapper.rebase(node.in_index, node.out_index)

    # ------------------------------------------------------------------ events
    def _emit_from_ctx(self, ctx: Context, kind: str, payload: Any, span: tuple[int, int] | None, port: str | None) -> None:
        if span is None:
            span = (ctx.position, ctx.position)
        self._make_event(kind, ctx.name, port or ctx.port, span, ctx.anchors.time_of(span[0]), ctx.anchors.time_of(span[1]), payload)
        ctx.metrics.events += 1

    def _emit_runtime(self, kind: str, payload: Any, node: Node, span: tuple[int, int], port: str | None = None) -> None:
        anchors = node.ctx.anchors
        self._make_event(kind, "runtime" if kind.startswith("graph.") else node.name, port or node.ctx.port, span,
                         anchors.time_of(span[0]), anchors.time_of(span[1]), payload)  # fmt: skip

    def _make_event(self, kind: str, source: str, port: str, span: tuple[int, int], t0: int | None, t1: int | None, payload: Any) -> None:
        now_wall = time.time_ns()
        with self._emit_lock:
            ev = Event(kind, self.graph.name, source, port, (int(span[0]), int(span[1])), t0, t1, now_wall, next(self._seq), payload)
            self.event_counts[kind] += 1
            if not kind.startswith(("graph.", "stream.", "source.", "block.")):
                if t1 is not None and not isinstance(self.mode, FreeRun):
                    self.latency.setdefault(kind, LatencyStats()).add((now_wall - t1) / 1e6)
                if self._ingest_mono:
                    self.proc_latency.setdefault(kind, LatencyStats()).add((time.monotonic_ns() - self._ingest_mono) / 1e6)
            if self.keep_events:
                self.events.append(ev)
        self.bus.publish(ev)

    # ------------------------------------------------------------------ data path
    def _push(self, node: Node, start: int, x: np.ndarray, tags: tuple[Tag, ...] | list[Tag]) -> None:
        """Process one chunk at ``node`` and push the result to its children (depth-first).

        The fast path (a :class:`SyncBlock`, no tags, no staged parameters) walks down a linear
        chain in a loop: per block it costs the work call, two clock reads and a few counters.
        """
        while True:
            if start != node.in_index:
                raise RuntimeError(f"{node.name}: non-contiguous input ({start} != {node.in_index}): runtime bug")
            if node.kind != SYNC or tags or node.block._staged:
                self._push_general(node, start, x, tuple(tags))
                return
            n = x.shape[0]
            ctx = node.ctx
            ctx.position = start + node.fill_shift
            m = node.m
            t0 = _perf()
            try:
                y = node.work(x, ctx)
            except Exception as exc:
                y, extra = self._failed(node, exc, start, x, n)
                self._after_failure(node, n, y, extra)
                return
            dt = _perf() - t0
            if node.first_done:
                m.busy_ns += dt
                if dt > m.max_call_ns:
                    m.max_call_ns = dt
            else:
                node.first_done = True
                m.first_call_ns = dt
                m.first_call_items = n
            m.calls += 1
            m.items_in += n
            m.items_out += n
            node.consecutive_errors = 0
            node.in_index += n
            if y.shape[0] != n:
                raise BlockError(node.name, (start, start + n), RuntimeError(f"SyncBlock returned {y.shape[0]} items for {n}"))
            if y.flags.writeable:
                y.flags.writeable = False
            out_start = node.out_index
            node.out_index += n
            children = node.children
            if ctx.added_tags:
                last = max(out_start, out_start + n - 1)
                out_tags = sorted((t if out_start <= t.offset <= last else Tag(min(max(t.offset, out_start), last), t.key, t.value) for t in ctx.added_tags), key=_off)
                ctx.added_tags = []
                for ch in children:
                    self._push(ch, out_start, y, out_tags)
                return
            if len(children) == 1:
                node, start, x, tags = children[0], out_start, y, ()
                continue
            for ch in children:
                self._push(ch, out_start, y, ())
            return

    def _push_general(self, node: Node, start: int, x: np.ndarray, tags: tuple[Tag, ...]) -> None:
        blk = node.block
        out_tags: list[Tag] = []
        # 1. format changes are handled before anything else (flush, renegotiate, restart)
        for t in tags:
            if t.key == T.FORMAT and t.offset == start:
                self._renegotiate(node, t.value.spec)
        if node.kind == SINK:
            for t in tags:
                if t.key == T.TIME:
                    node.ctx.anchors.add(t.offset, t.value)
            self._consume(node, start, x, tags)
            return
        # 2. staged parameter changes, applied between chunks
        if blk._staged:
            changes = dict(blk._staged)
            blk._staged.clear()
            blk.apply_params(changes)
            out_tags.append(Tag(node.out_index, T.PARAM, ParamChange(node.name, changes)))
        # 3. split at gaps for RESET / ZERO_FILL
        if blk.on_gap != GapPolicy.CONTINUE and any(t.key == T.GAP for t in tags):
            segments: list[tuple[int, np.ndarray, list[Tag], Gap | None]] = []
            cur = start
            cur_tags: list[Tag] = []
            pending_gap: Gap | None = None
            for t in tags:
                if t.key == T.GAP and t.offset > cur:
                    segments.append((cur, x[cur - start : t.offset - start], cur_tags, pending_gap))
                    cur, cur_tags, pending_gap = t.offset, [], None
                if t.key == T.GAP:
                    pending_gap = t.value
                cur_tags.append(t)
            segments.append((cur, x[cur - start :], cur_tags, pending_gap))
            for seg_start, seg_x, seg_tags, gap in segments:
                filled = 0
                if gap is not None:
                    seg_x, seg_tags, filled = self._apply_gap_policy(node, seg_start, seg_x, seg_tags, gap, out_tags)
                self._work_segment(node, seg_start, seg_x, seg_tags, out_tags, filled)
        else:
            self._work_segment(node, start, x, list(tags), out_tags, 0)

    def _apply_gap_policy(self, node: Node, seg_start: int, seg_x: np.ndarray, seg_tags: list[Tag], gap: Gap,
                          out_tags: list[Tag]) -> tuple[np.ndarray, list[Tag], int]:  # fmt: skip
        """RESET: reset the block (and its window buffer / tag mapping) before ``seg_start``.
        ZERO_FILL: put ``gap.lost`` zeros in front of the segment; returns how many."""
        blk = node.block
        spec = node.in_spec
        assert spec is not None
        max_fill = int(10 * float(spec.rate))
        if blk.on_gap == GapPolicy.ZERO_FILL and gap.lost and not gap.filled and gap.lost <= max_fill:
            lost = int(gap.lost)
            fill = np.zeros((lost, spec.channels), dtype=spec.dtype)
            node.fill_shift += lost
            new_tags = [
                Tag(t.offset - lost, T.GAP, replace(gap, filled=True)) if (t.key == T.GAP and t.offset == seg_start) else t for t in seg_tags
            ]
            return np.concatenate([fill, seg_x]), new_tags, lost
        # RESET (or a fill too large / of unknown length). A rate block that holds items back (a
        # delay line, a look-ahead) hands them on first through its ``drain(ctx)``: loss is what
        # the source lost, never what a block was holding at the gap.
        if node.kind == RATE and type(blk).drain is not Block.drain:
            node.ctx.position = node.in_index + node.fill_shift
            t0 = _perf()
            y = blk.drain(node.ctx)
            node.m.busy_ns += _perf() - t0
            self._emit_output(node, y, out_tags, [])
        node.m.resets += 1
        blk.reset(gap)
        bidx = node.in_index + node.fill_shift
        if node.wbuf is not None:
            node.wbuf.reset(bidx)
        if node.mapper is not None:
            out_tags.extend(node.mapper.take(node.out_index, node.out_index, final=True))
            node.mapper.rebase(bidx, node.out_index)
        return seg_x, seg_tags, 0

    def _work_segment(self, node: Node, start: int, x: np.ndarray, tags: list[Tag], out_tags: list[Tag], filled: int) -> None:
        """Run the block on upstream items [start, start+len(x)-filled) (preceded by ``filled`` zeros)."""
        ctx = node.ctx
        m = node.m
        n = x.shape[0]
        shift = node.fill_shift  # block index = upstream index + shift (after any fill just made)
        bstart = start + shift - filled
        ctx.position = bstart
        kind = node.kind
        for t in tags:
            if t.key == T.TIME:
                ctx.anchors.add(t.offset + shift, t.value)
        if node.forward:
            if kind == SYNC:
                for t in tags:
                    if t.key != T.FORMAT:
                        out_tags.append(t if not shift else Tag(t.offset + shift, t.key, t.value))
            elif node.mapper is not None:
                for t in tags:
                    if t.key != T.FORMAT:
                        node.mapper.add(Tag(t.offset + shift, t.key, t.value))
        y: np.ndarray | None
        extra: list[Tag] = []
        t0 = _perf()
        try:
            if kind == SYNC:
                y = node.work(x, ctx)
                if y.shape[0] != n:
                    raise RuntimeError(f"SyncBlock returned {y.shape[0]} items for {n}")
            elif kind == RATE:
                y = node.work(x, ctx) if n else None
            else:  # WINDOW
                wb = node.wbuf
                assert wb is not None
                if n:
                    wb.append(x)
                k = wb.count()
                y = None
                if k:
                    y = node.work(wb.frames(k), wb.pos, ctx)
                    wb.consume(k)
                    if y is not None and y.shape[0] != k:
                        raise RuntimeError(f"WindowBlock returned {y.shape[0]} items for {k} windows")
            dt = _perf() - t0
            node.consecutive_errors = 0
        except Exception as exc:
            dt = _perf() - t0
            if isinstance(exc, (BlockError, GraphFatal)):
                raise
            y, extra = self._failed(node, exc, bstart, x, n)
        if n or y is not None:
            count_call(node, dt, n)
        m.items_in += n
        node.in_index += n - filled
        self._emit_output(node, y, out_tags, extra)

    def _emit_output(self, node: Node, y: np.ndarray | None, out_tags: list[Tag], extra: list[Tag], final: bool = False) -> None:
        ctx = node.ctx
        out_start = node.out_index
        k = 0 if y is None else y.shape[0]
        if y is not None and k and y.ndim == 1:
            y = y.reshape(k, 1)
        out_stop = out_start + k
        if node.mapper is not None:
            out_tags.extend(node.mapper.take(out_start, out_stop, final=final))
        if extra:
            out_tags.extend(extra)
        if ctx.added_tags:
            out_tags.extend(ctx.added_tags)
            ctx.added_tags = []
        # the caller's list is shared by the parts of a call split at a gap: hand its tags on once
        tags_now = list(out_tags)
        out_tags.clear()
        if node.kind == SINK:
            return
        if k == 0 and not tags_now:
            return
        if tags_now:
            last = max(out_start, out_stop - 1) if k else out_start
            tags_now = [t if out_start <= t.offset <= last else Tag(min(max(t.offset, out_start), last), t.key, t.value) for t in tags_now]
            tags_now.sort(key=_off)
        if y is None:
            spec = node.out_spec
            assert spec is not None
            y = np.zeros((0, spec.channels), dtype=spec.dtype)
        if y.flags.writeable:
            y.flags.writeable = False
        node.out_index = out_stop
        node.m.items_out += k
        for ch in node.children:
            self._push(ch, out_start, y, tags_now)

    def _consume(self, node: Node, start: int, x: np.ndarray, tags: tuple[Tag, ...]) -> None:
        m = node.m
        n = x.shape[0]
        node.ctx.position = start
        t0 = _perf()
        try:
            node.block.consume(Chunk(start, x, tags), node.ctx)  # type: ignore[attr-defined]
            node.consecutive_errors = 0
        except Exception as exc:
            self._failed(node, exc, start, x, n)
        count_call(node, _perf() - t0, n)
        m.items_in += n
        node.in_index += n

    def _after_failure(self, node: Node, n: int, y: np.ndarray | None, extra: list[Tag]) -> None:
        node.in_index += n
        node.m.items_in += n
        self._emit_output(node, y, [], extra)

    def _failed(self, node: Node, exc: Exception, start: int, x: np.ndarray, n: int) -> tuple[np.ndarray | None, list[Tag]]:
        """Apply ``on_error``; returns the replacement output and extra tags."""
        blk = node.block
        node.m.errors += 1
        node.consecutive_errors += 1
        policy = blk.on_error
        if policy == ErrorPolicy.RAISE:
            raise BlockError(node.name, (start, start + n), exc) from exc
        tb = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__, limit=8))
        self._emit_runtime(E.BLOCK_ERROR, E.BlockErrorInfo(type(exc).__name__, str(exc), policy.value, tb, node.consecutive_errors), node, (start, start + n))
        if node.consecutive_errors >= self.max_consecutive_errors:
            raise GraphFatal(f"block {node.name!r} failed {node.consecutive_errors} times in a row: {type(exc).__name__}: {exc}") from exc
        if node.kind in (SINK, SOURCE):
            return None, []
        if policy == ErrorPolicy.BYPASS and node.kind == SYNC:
            return x, []
        # RESET: zeros of the contracted length, tagged as a filled gap
        node.m.resets += 1
        try:
            blk.reset(Gap(lost=None, cause=GapCause.BLOCK_ERROR, detail=str(exc)))
        except Exception:
            log.exception("%s: reset() failed after an error", node.name)
        spec = node.out_spec
        assert spec is not None
        if node.kind == SYNC:
            k = n
        elif node.kind == RATE:
            r = node.block.ratio  # type: ignore[attr-defined]
            k = floor(Fraction(node.in_index + n) * r) - floor(Fraction(node.in_index) * r)
        else:
            wb = node.wbuf
            assert wb is not None
            k = wb.count()
            if k:
                wb.consume(k)
        if node.mapper is not None:
            node.mapper.rebase(node.in_index + n + node.fill_shift, node.out_index + k)
        y = np.zeros((k, spec.channels), dtype=spec.dtype)
        self.gaps_by_cause[GapCause.BLOCK_ERROR.value] += 1
        self.gap_count += 1
        gap = Gap(lost=k, cause=GapCause.BLOCK_ERROR, filled=True, detail=f"{type(exc).__name__}: {exc}")
        self._emit_runtime(E.STREAM_GAP, E.GapInfo(GapCause.BLOCK_ERROR.value, k, True, self.dropped_items, self.gap_count, gap.detail), node,
                           (node.out_index, node.out_index), port=f"{node.name}.out")  # fmt: skip
        return y, [Tag(node.out_index, T.GAP, gap)] if k else []

    def _renegotiate(self, node: Node, spec: StreamSpec) -> None:
        """A FormatChange reached ``node``: flush what it holds, renegotiate, restart."""
        if node.kind == SOURCE:
            return
        if node.in_spec == spec:
            return
        if node.kind != SINK:
            self._flush_node(node)
        blk = node.block
        if node.kind != SINK:  # sinks keep their state (an open file...) and see the FormatChange tag
            self._safe_stop(node)
        try:
            outs = dict(blk.negotiate({"in": spec}))
        except ConfigError as exc:
            raise GraphFatal(f"{node.name}: cannot follow format change to {spec}: {exc}") from exc
        old_out = node.out_spec
        node.ctx.in_specs = {"in": spec}
        node.ctx.out_specs = outs
        node.in_spec = spec
        node.out_spec = outs.get("out")
        node.rate_in = float(spec.rate)
        node.ctx.anchors.set_rate(spec.rate)
        if node.kind != SINK:
            blk.start(node.ctx)
            node.first_done = False
        self._setup_node(node)
        self._emit_runtime(E.STREAM_FORMAT, {"spec": spec.to_dict()}, node, (node.in_index, node.in_index))
        if node.out_spec is not None and node.out_spec != old_out:
            node.ctx.added_tags.append(Tag(node.out_index, T.FORMAT, T.FormatChange(node.out_spec)))

    # ------------------------------------------------------------------ sources (reading: streamkit.core.sources)
    def _end_source(self, node: Node, reason: str) -> None:
        if node.ended:
            return
        node.ended = True
        self._emit_runtime(E.STREAM_END, {"reason": reason, "items": node.out_index}, node, (node.out_index, node.out_index))

    # ------------------------------------------------------------------ loop
    def step(self) -> bool:
        """One scheduling round: read each ready source once. Returns True if items moved."""
        if not self._started:
            self.start()
        now = time.monotonic()
        moved = False
        for s in self._sources:
            if not s.ended:
                moved = read_source(self, s, now) or moved
        if self.stats_interval_s and now - self._last_stats >= self.stats_interval_s:
            self._last_stats = now
            self._emit_runtime(E.GRAPH_STATS, self.stats(brief=True), self._order[0], (0, 0))
        return moved

    @property
    def done(self) -> bool:
        return all(s.ended for s in self._sources) or self._stop.is_set() or self.fatal is not None

    def request_stop(self) -> None:
        """Ask the loop to stop at the next chunk boundary (thread-safe)."""
        self._stop.set()
        self.notify.set()

    def run(self) -> dict[str, Any]:
        """Run until every source ends, ``duration`` is reached or :meth:`request_stop`.

        Ctrl-C stops cleanly (flush, stop). Returns :meth:`stats`.
        """
        self.start()
        interrupted = False
        try:
            while not self.done:
                moved = self.step()
                if not moved and not self.done:
                    self._idle_wait()
        except KeyboardInterrupt:
            interrupted = True
        except GraphFatal as exc:
            self.fatal = str(exc)
            self._emit_runtime(E.GRAPH_STATE, E.SourceState("fatal", str(exc)), self._order[0], (0, 0))
            self.finish()
            raise
        except BaseException:
            self.finish(flush=False)
            raise
        self.finish()
        st = self.stats()
        st["interrupted"] = interrupted
        return st

    def _idle_wait(self) -> None:
        now = time.monotonic()
        timeout = 0.05
        dues = [s.next_due for s in self._sources if not s.ended and not s.live and s.next_due > now]
        if dues:
            timeout = min(timeout, max(0.0, min(dues) - now))
        if any(s.live and not s.ended for s in self._sources):
            self.notify.wait(timeout)
            self.notify.clear()
            # let live sources know time passed (watchdogs)
        elif timeout > 0:
            time.sleep(timeout)

    def finish(self, flush: bool = True) -> None:
        """Flush every block (in topological order), stop them, close event sinks."""
        if self._finished or not self._started:
            return
        self._finished = True
        try:
            if flush:
                for node in self._order:
                    self._flush_node(node)
        finally:
            for node in self._order:
                self._safe_stop(node)
            self.state = "fatal" if self.fatal else "stopped"
            self._emit_runtime(E.GRAPH_STATS, self.stats(), self._order[0], (0, 0))
            self._emit_runtime(E.GRAPH_STATE, E.SourceState(self.state, self.fatal or ""), self._order[0], (0, 0))
            self.bus.close()

    def _flush_node(self, node: Node) -> None:
        if node.kind == SOURCE:
            self._end_source(node, "stopped")
            return
        blk = node.block
        ctx = node.ctx
        ctx.position = node.in_index + node.fill_shift
        out_tags: list[Tag] = []
        t0 = _perf()
        try:
            if node.kind == WINDOW:
                wb = node.wbuf
                wblk: WindowBlock = blk  # type: ignore[assignment]
                assert wb is not None
                if wblk.pad_end:
                    wb.append(np.zeros((wblk.pad_end, wb.buf.shape[1]), wb.buf.dtype), real=False)
                ys: list[np.ndarray | None] = []
                k = wb.count()
                if k:
                    ys.append(wblk.work_windows(wb.frames(k), wb.pos, ctx))
                    wb.consume(k)
                covered = wblk.window - wblk.hop if wb.emitted else wb.pad_start
                if wblk.flush_partial and wb.n > covered and (wb.real > 0):
                    wb.append(np.zeros((wblk.window - wb.n, wb.buf.shape[1]), wb.buf.dtype), real=False)
                    ys.append(wblk.work_windows(wb.frames(1), wb.pos, ctx))
                    wb.consume(1)
                tail = blk.flush(ctx)
                if tail is not None:
                    ys.append(tail)
                parts = [a for a in ys if a is not None]
                y = np.concatenate(parts) if parts else None
            else:
                y = blk.flush(ctx)
        except Exception as exc:
            if blk.on_error == ErrorPolicy.RAISE:
                raise BlockError(node.name, (node.in_index, node.in_index), exc) from exc
            self._emit_runtime(E.BLOCK_ERROR, E.BlockErrorInfo(type(exc).__name__, str(exc), "flush", traceback.format_exc(limit=8), 1), node,
                               (node.in_index, node.in_index))  # fmt: skip
            y = None
        node.m.busy_ns += _perf() - t0
        if node.kind == SINK:
            return
        self._emit_output(node, y, out_tags, [], final=True)
        if node.kind == RATE and not node.length_checked:
            node.length_checked = True
            r = blk.ratio  # type: ignore[attr-defined]
            err = float(node.out_index - node.in_index * r)
            node.m.length_error = err
            if abs(err) > blk.length_slack + 1e-9:  # type: ignore[attr-defined]
                log.warning("%s: produced %d items for %d in (ratio %s): off by %.1f", node.name, node.out_index, node.in_index, r, err)

    def _safe_stop(self, node: Node) -> None:
        try:
            node.block.stop()
        except Exception:
            log.exception("%s: stop() raised", node.name)

    # ------------------------------------------------------------------ results
    def metrics(self, name: str) -> Any:
        return self._nodes[name].m

    def stats(self, brief: bool = False) -> dict[str, Any]:
        """A snapshot: RT factor total and per block, counters, latencies (:func:`~streamkit.core.run_stats.runner_stats`)."""
        return runner_stats(self, brief)


def _off(t: Tag) -> int:
    return t.offset


# re-exported: the names this module has always offered
from streamkit.core.multi_runner import MultiRunner, ReadyFlag  # noqa: E402

__all__ = ["MultiRunner", "ReadyFlag", "Runner", "FreeRun", "Paced", "RealTime", "TagMapper", "WindowBuffer", "EventBus", "EventSink", "SourceRead",
           "round_half_up"]  # fmt: skip
