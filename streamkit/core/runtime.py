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
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
import traceback
from collections import Counter, deque
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
    TagPolicy,
    WindowBlock,
)
from streamkit.core.clock import FreeRun, Mode, Paced, RealTime
from streamkit.core.context import Context
from streamkit.core.errors import BlockError, ConfigError, GraphFatal
from streamkit.core.events import Event, kind_matches
from streamkit.core.graph import Graph, Subscription
from streamkit.core.metrics import LatencyStats
from streamkit.core.sink_queue import SinkQueue, drop_victim
from streamkit.core.tags import Gap, GapCause, ParamChange, TimeAnchor
from streamkit.core.types import Chunk, StreamSpec, Tag

log = logging.getLogger("streamkit.runtime")

_perf = time.perf_counter_ns
_HALF = Fraction(1, 2)

SOURCE, SYNC, RATE, WINDOW, SINK = range(5)


def round_half_up(x: Fraction) -> int:
    return floor(x + _HALF)


class TagMapper:
    """Moves tags through a rate change: input ``i`` -> output ``round_half_up((i - in_base + delay) * ratio) + out_base``.

    Re-based after a reset so that the mapping restarts where the output actually is.
    Tags are held until the output reaches their offset (a resampler's output lags its input).
    """

    __slots__ = ("ratio", "delay", "in_base", "out_base", "pending")

    def __init__(self, ratio: Fraction, delay: Fraction) -> None:
        self.ratio = Fraction(ratio)
        self.delay = Fraction(delay)
        self.in_base = 0
        self.out_base = 0
        self.pending: deque[Tag] = deque()

    def map(self, offset: int) -> int:
        return self.out_base + round_half_up((Fraction(offset - self.in_base) + self.delay) * self.ratio)

    def rebase(self, in_index: int, out_index: int) -> None:
        self.in_base = in_index
        self.out_base = out_index

    def add(self, tag: Tag) -> None:
        self.pending.append(Tag(max(self.map(tag.offset), self.out_base), tag.key, tag.value))

    def take(self, out_start: int, out_stop: int, final: bool = False) -> list[Tag]:
        res: list[Tag] = []
        p = self.pending
        last = max(out_start, out_stop - 1)
        while p and (final or p[0].offset < out_stop):
            t = p.popleft()
            off = t.offset
            if off < out_start:
                off = out_start
            elif final and off > last:
                off = last
            res.append(t if off == t.offset else Tag(off, t.key, t.value))
        return res


class WindowBuffer:
    """The runtime-owned history of a :class:`WindowBlock`."""

    __slots__ = ("window", "hop", "pad_start", "buf", "n", "pos", "real", "emitted")

    def __init__(self, window: int, hop: int, channels: int, dtype: np.dtype, pad_start: int, first_index: int = 0) -> None:
        self.window = window
        self.hop = hop
        self.pad_start = pad_start
        self.buf = np.zeros((max(2 * window, 1024), channels), dtype=dtype)
        self.n = pad_start
        self.pos = first_index - pad_start  # input index of buf[0] (negative inside the padding)
        self.real = 0
        self.emitted = 0

    def reset(self, index: int) -> None:
        self.buf[: self.pad_start] = 0
        self.n = self.pad_start
        self.pos = index - self.pad_start
        self.real = 0
        self.emitted = 0

    def append(self, x: np.ndarray, real: bool = True) -> None:
        m = x.shape[0]
        need = self.n + m
        if need > self.buf.shape[0]:
            nb = np.zeros((max(need, 2 * self.buf.shape[0]), self.buf.shape[1]), dtype=self.buf.dtype)
            nb[: self.n] = self.buf[: self.n]
            self.buf = nb
        self.buf[self.n : need] = x
        self.n = need
        if real:
            self.real += m

    def count(self) -> int:
        return (self.n - self.window) // self.hop + 1 if self.n >= self.window else 0

    def frames(self, k: int) -> np.ndarray:
        # the ndarray constructor on the (C-contiguous) buffer: the same read-only strided view as
        # numpy's as_strided, at a quarter of its cost (it is made on every call of a window block)
        s0, s1 = self.buf.strides
        v = np.ndarray((k, self.window, self.buf.shape[1]), self.buf.dtype, buffer=self.buf, strides=(self.hop * s0, s0, s1))
        v.flags.writeable = False
        return v

    def consume(self, k: int) -> None:
        adv = k * self.hop
        rest = self.n - adv
        if rest > 0:
            self.buf[:rest] = self.buf[adv : self.n]
        self.n = max(rest, 0)
        self.pos += adv
        self.emitted += k


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


class _Node:
    __slots__ = (
        "name", "block", "ctx", "kind", "children", "in_spec", "out_spec", "in_index", "out_index",
        "mapper", "wbuf", "fill_shift", "consecutive_errors", "ended", "rate_in", "work",
        "forward", "limit", "t0", "next_due", "m", "first_done", "length_checked", "live",
    )  # fmt: skip

    def __init__(self, name: str, block: Block, ctx: Context, kind: int) -> None:
        self.name = name
        self.block = block
        self.ctx = ctx
        self.kind = kind
        self.children: list[_Node] = []
        self.in_spec: StreamSpec | None = ctx.in_specs.get("in")
        self.out_spec: StreamSpec | None = ctx.out_specs.get("out")
        self.in_index = 0
        self.out_index = 0
        self.mapper: TagMapper | None = None
        self.wbuf: WindowBuffer | None = None
        self.fill_shift = 0
        self.consecutive_errors = 0
        self.ended = False
        self.rate_in = float(self.in_spec.rate) if self.in_spec is not None else (float(self.out_spec.rate) if self.out_spec else 0.0)
        self.work: Any = None
        self.forward = block.tag_policy == TagPolicy.FORWARD
        self.limit: int | None = None
        self.t0 = 0.0
        self.next_due = 0.0
        self.m = ctx.metrics
        self.first_done = False
        self.length_checked = False
        self.live = bool(getattr(block, "live", False))


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
        self._nodes: dict[str, _Node] = {}
        self._sources: list[_Node] = []
        self._order: list[_Node] = []
        self._stop = threading.Event()
        self.notify = notify or threading.Event()
        self._prepared = False
        self._bus_open = False
        self._started = False
        self._up: list[_Node] = []  # blocks whose start() returned, in start order
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
            node = _Node(name, blk, ctx, kind)
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

    def _start_nodes(self, nodes: list[_Node]) -> None:
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

    def _setup_node(self, node: _Node) -> None:
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

    def _emit_runtime(self, kind: str, payload: Any, node: _Node, span: tuple[int, int], port: str | None = None) -> None:
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
    def _push(self, node: _Node, start: int, x: np.ndarray, tags: tuple[Tag, ...] | list[Tag]) -> None:
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

    def _push_general(self, node: _Node, start: int, x: np.ndarray, tags: tuple[Tag, ...]) -> None:
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

    def _apply_gap_policy(self, node: _Node, seg_start: int, seg_x: np.ndarray, seg_tags: list[Tag], gap: Gap,
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
        # RESET (or a fill too large / of unknown length). A block that holds items back (a delay
        # line, a look-ahead) hands them on first through ``drain(ctx)``: loss is what the source
        # lost, never what a block was holding at the gap.
        drain = getattr(blk, "drain", None)
        if drain is not None and node.kind == RATE:
            node.ctx.position = node.in_index + node.fill_shift
            t0 = _perf()
            y = drain(node.ctx)
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

    def _work_segment(self, node: _Node, start: int, x: np.ndarray, tags: list[Tag], out_tags: list[Tag], filled: int) -> None:
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
            self._count_call(node, dt, n)
        m.items_in += n
        node.in_index += n - filled
        self._emit_output(node, y, out_tags, extra)

    def _emit_output(self, node: _Node, y: np.ndarray | None, out_tags: list[Tag], extra: list[Tag], final: bool = False) -> None:
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

    def _consume(self, node: _Node, start: int, x: np.ndarray, tags: tuple[Tag, ...]) -> None:
        m = node.m
        n = x.shape[0]
        node.ctx.position = start
        t0 = _perf()
        try:
            node.block.consume(Chunk(start, x, tags), node.ctx)  # type: ignore[attr-defined]
            node.consecutive_errors = 0
        except Exception as exc:
            self._failed(node, exc, start, x, n)
        self._count_call(node, _perf() - t0, n)
        m.items_in += n
        node.in_index += n

    @staticmethod
    def _count_call(node: _Node, dt: int, n: int) -> None:
        """Account one call: the first call with items is the warm-up, kept apart from busy time.
        (The SyncBlock fast path in :meth:`_push` does the same inline.)"""
        m = node.m
        if not node.first_done and n:
            node.first_done = True
            m.first_call_ns = dt
            m.first_call_items = n
        else:
            m.busy_ns += dt
            if dt > m.max_call_ns:
                m.max_call_ns = dt
        m.calls += 1

    def _after_failure(self, node: _Node, n: int, y: np.ndarray | None, extra: list[Tag]) -> None:
        node.in_index += n
        node.m.items_in += n
        self._emit_output(node, y, [], extra)

    def _failed(self, node: _Node, exc: Exception, start: int, x: np.ndarray, n: int) -> tuple[np.ndarray | None, list[Tag]]:
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

    def _renegotiate(self, node: _Node, spec: StreamSpec) -> None:
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

    # ------------------------------------------------------------------ sources
    def _read_source(self, node: _Node, now: float) -> bool:
        """Read one chunk from a source if the mode allows; returns True if items moved."""
        blk: Source = node.block  # type: ignore[assignment]
        spec = node.out_spec
        assert spec is not None
        rate = float(spec.rate)
        chunk = self.chunk or max(1, int(round(self.chunk_s * rate)))
        want = chunk
        if node.limit is not None:
            want = min(want, node.limit - node.out_index)
            if want <= 0:
                self._end_source(node, "duration reached")
                return False
        if not node.live and not isinstance(self.mode, FreeRun):
            speed = self.mode.speed
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
            self._failed(node, exc, node.out_index, np.zeros((0, 1)), 0)
            self._end_source(node, f"error: {exc}")
            return False
        dt = _perf() - t0
        if r is None:
            self._end_source(node, "end of stream")
            return False
        x = r.samples
        n = x.shape[0]
        if n or r.tags:
            if x.ndim == 1:
                x = x.reshape(n, 1)
            if x.dtype != spec.dtype or x.shape[1] != spec.channels:
                if x.shape[1] != spec.channels:
                    raise BlockError(node.name, (node.out_index, node.out_index + n), ValueError(f"source produced {x.shape[1]} channels, spec says {spec.channels}"))
                x = x.astype(spec.dtype)
            m = node.m
            self._count_call(node, dt, n)
            m.items_out += n
            m.items_in += n
            self._ingest_mono = time.monotonic_ns()
            tags = sorted(r.tags, key=_off)
            if node.out_index == 0 and not any(t.key == T.TIME and t.offset == 0 for t in tags):
                tags.insert(0, Tag(0, T.TIME, TimeAnchor(self._t_start_wall, "host" if node.live else "synthetic")))
            # split at format changes so that each FormatChange starts a chunk
            cuts = sorted({t.offset for t in tags if t.key == T.FORMAT and t.offset > node.out_index})
            pieces = []
            lo = node.out_index
            for c in cuts + [node.out_index + n]:
                pieces.append((lo, x[lo - node.out_index : c - node.out_index], [t for t in tags if lo <= t.offset < c or (c == node.out_index + n and t.offset >= c)]))
                lo = c
            base = node.out_index
            for p_start, p_x, p_tags in pieces:
                self._source_tags(node, p_tags)
                if p_x.flags.writeable:
                    p_x.flags.writeable = False
                node.out_index = p_start + p_x.shape[0]
                for ch in node.children:
                    self._push(ch, p_start, p_x, p_tags)
            node.out_index = base + n
            node.in_index = node.out_index
        if r.end:
            self._end_source(node, "end of stream")
        return bool(n > 0)

    def _source_tags(self, node: _Node, tags: list[Tag]) -> None:
        # anchors first, so that a gap event is timed by the fresh anchor at its offset
        tags = sorted(tags, key=lambda t: (t.offset, t.key != T.TIME))
        for t in tags:
            if t.key == T.TIME:
                node.ctx.anchors.add(t.offset, t.value)
            elif t.key == T.GAP:
                g: Gap = t.value
                self.gap_count += 1
                self.gaps_by_cause[g.cause.value if isinstance(g.cause, GapCause) else str(g.cause)] += 1
                if g.lost:
                    self.dropped_items += g.lost
                if g.cause == GapCause.RECONNECT:
                    self.reconnects += 1
                self._emit_runtime(E.STREAM_GAP, E.GapInfo(g.cause.value if isinstance(g.cause, GapCause) else str(g.cause), g.lost, g.filled,
                                   self.dropped_items, self.gap_count, g.detail), node, (t.offset, t.offset))  # fmt: skip
                if g.cause == GapCause.XRUN:
                    self.xruns += 1
                    self._emit_runtime(E.STREAM_XRUN, E.XrunInfo(g.detail or "input_overflow", self.xruns), node, (t.offset, t.offset))
            elif t.key == T.FORMAT:
                spec: StreamSpec = t.value.spec
                old_rate = float(node.out_spec.rate) if node.out_spec is not None else float(spec.rate)
                node.out_spec = spec
                node.ctx.out_specs = {"out": spec}
                node.ctx.anchors.set_rate(spec.rate)
                node.rate_in = float(spec.rate)
                if self.duration is not None:  # the limit is in seconds of stream: recount at the new rate
                    elapsed = t.offset / old_rate
                    node.limit = t.offset + int(round((self.duration - elapsed) * float(spec.rate)))
                self._emit_runtime(E.STREAM_FORMAT, {"spec": spec.to_dict()}, node, (t.offset, t.offset))

    def _end_source(self, node: _Node, reason: str) -> None:
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
                moved = self._read_source(s, now) or moved
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

    def _flush_node(self, node: _Node) -> None:
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

    def _safe_stop(self, node: _Node) -> None:
        try:
            node.block.stop()
        except Exception:
            log.exception("%s: stop() raised", node.name)

    # ------------------------------------------------------------------ results
    def metrics(self, name: str) -> Any:
        return self._nodes[name].m

    def stats(self, brief: bool = False) -> dict[str, Any]:
        """A snapshot: RT factor total and per block, counters, latencies."""
        src_s = {s.name: (s.out_index / float(s.out_spec.rate) if s.out_spec else 0.0) for s in self._sources}
        audio_s = max(src_s.values()) if src_s else 0.0
        blocks: dict[str, Any] = {}
        busy = 0
        busy_first = 0
        for node in self._order:
            m = node.m
            busy += m.busy_ns
            busy_first += m.first_call_ns
            blocks[node.name] = m.to_dict(node.rate_in) if not brief else {"rtf": m.rtf(node.rate_in), "errors": m.errors}
        wall = time.monotonic() - self._t_start_mono if self._t_start_mono else 0.0
        st: dict[str, Any] = {
            "graph": self.graph.name,
            "mode": self.mode.name,
            "state": self.state,
            "stream_s": audio_s,
            "wall_s": wall,
            "rtf_total": (busy / 1e9) / audio_s if audio_s > 0 else None,
            "gaps": self.gap_count,
            "gaps_by_cause": dict(self.gaps_by_cause),
            "dropped_items": self.dropped_items,
            "xruns": self.xruns,
            "reconnects": self.reconnects,
            "blocks": blocks,
        }
        if not brief:
            st["rtf_total_incl_first_call"] = ((busy + busy_first) / 1e9) / audio_s if audio_s > 0 else None
            st["first_call_ms"] = {n.name: n.m.first_call_ns / 1e6 for n in self._order}
            st["start_ms"] = {n.name: n.m.start_ns / 1e6 for n in self._order}
            st["source_s"] = src_s
            st["events"] = dict(self.event_counts)
            st["events_dropped"] = self.bus.dropped
            if self.bus.sink_dropped:
                st["events_dropped_by_sink"] = self.bus.sink_dropped
            if self.bus.sinks_left_behind:
                st["event_sinks_left_behind"] = self.bus.sinks_left_behind
            st["latency_ms"] = {k: v.summary() for k, v in self.latency.items()}
            st["processing_latency_ms"] = {k: v.summary() for k, v in self.proc_latency.items()}
            st["algorithmic_latency_s"] = self.graph.path_latency_s()
            st["fatal"] = self.fatal
        return st


class ReadyFlag:
    """A runner's ``notify`` under a :class:`MultiRunner`: ``set()`` (called by a live source's
    producer after each write) queues the runner as ready and wakes the scheduler. Duck-types the
    ``threading.Event`` methods sources use (set, clear, wait, is_set)."""

    __slots__ = ("runner", "ready", "shared")

    def __init__(self, runner: Runner, ready: deque[Runner], shared: threading.Event) -> None:
        self.runner, self.ready, self.shared = runner, ready, shared

    def set(self) -> None:
        self.ready.append(self.runner)  # deque.append is atomic: safe from any producer thread
        self.shared.set()

    def is_set(self) -> bool:
        return self.shared.is_set()

    def clear(self) -> None:
        self.shared.clear()

    def wait(self, timeout: float | None = None) -> bool:
        return self.shared.wait(timeout)


class MultiRunner:
    """Runs many graphs (one per station) on one scheduler thread.

    A graph whose sources are all live is stepped only when one of its sources signalled new items
    (its :class:`ReadyFlag` queued it), plus once every ``sweep_s`` for statistics, watchdog-driven
    ends and stop requests; graphs with file or paced sources are stepped every round. Stepping
    every graph whenever any source signals would cost N steps per arriving frame, i.e. O(N^2) per
    second: benchmarks/kiwi_stations.py measured 89 % of a core for 200 KiwiSDR stations that way
    and 35 % with the ready queue. A graph that fails (GraphFatal, a block error under RAISE) is
    finished and reported in ``failures``; the others go on.
    """

    def __init__(self, runners: list[Runner], sweep_s: float = 0.25) -> None:
        self.runners = list(runners)
        self.notify = threading.Event()
        self.ready: deque[Runner] = deque()
        self.sweep_s = sweep_s
        for r in self.runners:
            if r._started:
                raise ConfigError(f"graph {r.graph.name!r}: start it through the MultiRunner, not before")
            r.notify = ReadyFlag(r, self.ready, self.notify)  # type: ignore[assignment]
        self.failures: dict[str, str] = {}
        self._stop = threading.Event()

    def request_stop(self) -> None:
        self._stop.set()
        self.notify.set()

    def _step(self, r: Runner, active: set[Runner]) -> bool:
        try:
            moved = r.step()
        except (GraphFatal, BlockError) as exc:
            self.failures[r.graph.name] = str(exc)
            r.fatal = str(exc)
            r.finish(flush=False)
            active.discard(r)
            return False
        if r.done:
            r.finish()
            active.discard(r)
        return moved

    def run(self) -> dict[str, dict[str, Any]]:
        # every block of every graph starts (models loaded, kernels compiled) before any source does:
        # a station streaming while another graph compiles would overflow its ring
        try:
            for r in self.runners:
                r.prepare()
            for r in self.runners:
                r.start()
        except BaseException:
            for r in self.runners:
                r.abort()
                r.finish(flush=False)
            raise
        active = set(self.runners)
        polled = [r for r in self.runners if any(not s.live for s in r._sources)]
        last_sweep = 0.0
        try:
            while active and not self._stop.is_set():
                now = time.monotonic()
                moved = False
                if now - last_sweep >= self.sweep_s:
                    last_sweep = now
                    self.ready.clear()
                    for r in list(active):
                        moved = self._step(r, active) or moved
                else:
                    seen: set[Runner] = set()
                    while self.ready:
                        r = self.ready.popleft()
                        if r in active and r not in seen:
                            seen.add(r)
                            moved = self._step(r, active) or moved
                    for r in polled:
                        if r in active and r not in seen:
                            moved = self._step(r, active) or moved
                if moved or self.ready or not active:
                    continue
                timeout = max(0.0, self.sweep_s - (time.monotonic() - last_sweep))
                now = time.monotonic()
                dues = [s.next_due for r in polled if r in active for s in r._sources if not s.ended and not s.live and s.next_due > now]
                if dues:
                    timeout = min(timeout, max(0.0, min(dues) - now))
                self.notify.wait(timeout)
                self.notify.clear()
        finally:
            for r in list(active):
                r.finish()
        return {r.graph.name: r.stats() for r in self.runners}


def _off(t: Tag) -> int:
    return t.offset


def replace_offset(t: Tag, delta: int) -> Tag:
    return Tag(t.offset + delta, t.key, t.value) if delta else t


__all__ = ["MultiRunner", "ReadyFlag", "Runner", "FreeRun", "Paced", "RealTime", "TagMapper", "WindowBuffer", "EventBus", "EventSink", "SourceRead"]
