"""The runtime's contract: indices, tags through rate changes, windows, gap and error policies,
overload, negotiation, events, pacing."""

from __future__ import annotations

import threading
import time
from fractions import Fraction

import numpy as np
import pytest

from streamkit.core import events as E
from streamkit.core import tags as T
from streamkit.core.block import ErrorPolicy, EventSink, GapPolicy, RateBlock, Sink, Source, SourceRead, SyncBlock, WindowBlock
from streamkit.core.clock import FreeRun, Paced
from streamkit.core.errors import BlockError, ConfigError, GraphFatal
from streamkit.core.graph import Graph
from streamkit.core.ring import SampleRing
from streamkit.core.runtime import Runner, TagMapper, round_half_up
from streamkit.core.tags import FormatChange, Gap, GapCause, TimeAnchor
from streamkit.core.types import StreamSpec, Tag
from streamkit.dsp.passthrough import Gain, PassThrough
from streamkit.io.collect import CollectSink, VectorSource
from streamkit.testing import assert_chunking_invariant, run_block

RATE = 16000
rng = np.random.default_rng(1)


# ---------------------------------------------------------------- test blocks
class Decimate2(RateBlock):
    """Keep items at even absolute indices (a stream-exact 2:1 decimator)."""

    def negotiate(self, inputs):
        self.ratio = Fraction(1, 2)
        self.delay = Fraction(0)
        s = inputs["in"]
        return {"out": s.replace(rate=s.rate / 2)}

    def start(self, ctx):
        self._phase = 0

    def work(self, x, ctx):
        y = x[self._phase :: 2]
        self._phase = (self._phase - x.shape[0]) % 2
        return y

    def reset(self, cause=None):
        self._phase = 0


class FrameEnergy(WindowBlock):
    """Mean square over windows of 8, hop 4, not centred."""

    def __init__(self, *, window=8, hop=4, center=False, name=None):
        super().__init__(name=name)
        self.window, self.hop = window, hop
        self.pad_start = window // 2 if center else 0
        self.flush_partial = center

    def negotiate(self, inputs):
        s = inputs["in"]
        return {"out": StreamSpec(s.rate / self.hop, 1, np.float32)}

    def work_windows(self, frames, start, ctx):
        assert not frames.flags.writeable
        return (frames.astype(np.float32) ** 2).mean(axis=(1, 2))[:, None]


class Recorder(SyncBlock):
    """Pass-through that records the positions it was called at and its resets."""

    on_gap = GapPolicy.RESET

    def __init__(self, *, name=None):
        super().__init__(name=name)
        self.calls = []
        self.resets = []

    def work(self, x, ctx):
        self.calls.append((ctx.position, x.shape[0], x[:, 0].copy()))
        return x

    def reset(self, cause=None):
        self.resets.append(cause)


class Failing(SyncBlock):
    def __init__(self, *, fail_at=(), every=False, name=None):
        super().__init__(name=name)
        self.fail_at = set(fail_at)
        self.every = every
        self.resets = 0

    def work(self, x, ctx):
        if self.every or any(ctx.position <= f < ctx.position + x.shape[0] for f in self.fail_at):
            raise ValueError(f"boom at {ctx.position}")
        return x * 2

    def reset(self, cause=None):
        self.resets += 1


class Emitter(SyncBlock):
    emits = ("test.mark",)

    def __init__(self, *, every=100, kind="test.mark", name=None):
        super().__init__(name=name)
        self.every = every
        self.kind = kind

    def work(self, x, ctx):
        a = ctx.position
        for i in range(a, a + x.shape[0]):
            if i % self.every == 0:
                ctx.emit(self.kind, {"i": i}, span=(i, i + 1))
        return x


def noise(n, ch=1):
    return rng.standard_normal((n, ch)).astype(np.float32)


# ---------------------------------------------------------------- basics
def test_sync_chain_output_metrics_and_rtf():
    x = noise(16000)
    g = Graph("t")
    src = g.add(VectorSource(samples=x, rate=RATE, sizes=160), name="src")
    a = g.add(Gain(gain=2.0), name="a")
    b = g.add(Gain(gain=0.25), name="b")
    sink = g.add(CollectSink(), name="sink")
    g.chain(src, a, b, sink)
    st = Runner(g, stats_interval_s=0).run()
    np.testing.assert_allclose(sink.samples, x * 0.5, rtol=1e-6)
    assert sink.starts == list(range(0, 16000, 160))
    ma = st["blocks"]["a"]
    assert ma["calls"] == 100 and ma["items_in"] == 16000 and ma["items_out"] == 16000
    assert ma["rtf"] is not None and ma["rtf"] > 0 and st["rtf_total"] > 0
    assert abs(st["stream_s"] - 1.0) < 1e-9


def test_fan_out_delivers_same_chunks_to_each_branch():
    x = noise(3000)
    g = Graph("t")
    src = g.add(VectorSource(samples=x, rate=RATE, sizes=100), name="src")
    s1, s2 = g.add(CollectSink(), name="s1"), g.add(CollectSink(), name="s2")
    g.connect(src, s1)
    g.connect(src, s2)
    Runner(g, stats_interval_s=0).run()
    assert np.array_equal(s1.samples, x) and np.array_equal(s2.samples, x)


def test_output_chunks_are_read_only():
    class Mutator(SyncBlock):
        def work(self, x, ctx):
            x[0, 0] = 1.0
            return x

    with pytest.raises(BlockError) as ei:
        run_block(Mutator(), noise(100), rate=RATE)
    assert isinstance(ei.value.cause, ValueError) and "read-only" in str(ei.value.cause)


# ---------------------------------------------------------------- rate blocks and tags
def test_round_half_up_and_tag_mapper():
    assert round_half_up(Fraction(5, 2)) == 3 and round_half_up(Fraction(-1, 2)) == 0
    m = TagMapper(Fraction(2000000, 3000297), Fraction(0))
    i = 43_204_276  # one hour at 12001.188 Hz
    assert m.map(i) == int(Fraction(i) * Fraction(2000000, 3000297) + Fraction(1, 2))


def test_rate_block_moves_tags_exactly_and_is_chunking_invariant():
    x = np.arange(1001, dtype=np.float32)[:, None]
    tags = [(0, "user:a", 0), (3, "user:b", 3), (500, "user:c", 500), (999, "user:d", 999)]
    ref = assert_chunking_invariant(Decimate2, x, rate=RATE, tags=tags)
    assert np.array_equal(ref.samples[:, 0], np.arange(0, 1001, 2, dtype=np.float32))
    got = {t.key: t.offset for t in ref.tags if t.key.startswith("user:")}
    assert got == {"user:a": 0, "user:b": 2, "user:c": 250, "user:d": 500}  # round_half_up(i/2)


def test_window_block_gets_every_window_once_any_chunking():
    x = noise(1003)
    ref = assert_chunking_invariant(FrameEnergy, x, rate=RATE)
    k = (1003 - 8) // 4 + 1
    offline = np.array([np.mean(x[j * 4 : j * 4 + 8] ** 2) for j in range(k)], np.float32)
    np.testing.assert_allclose(ref.samples[:, 0], offline, rtol=1e-6)


def test_centred_window_block_pads_and_flushes_like_scipy_boundary():
    x = noise(100)
    r = run_block(FrameEnergy(center=True), x, rate=RATE, sizes=7)
    padded = np.concatenate([np.zeros((4, 1), np.float32), x, np.zeros((8, 1), np.float32)])
    n_frames = int(np.ceil((100 + 4 - 8) / 4)) + 1  # scipy padded=True after boundary padding
    offline = np.array([np.mean(padded[j * 4 : j * 4 + 8] ** 2) for j in range(n_frames)], np.float32)
    np.testing.assert_allclose(r.samples[:, 0], offline, rtol=1e-6)


def test_window_block_tags_go_to_the_frame_centred_on_them():
    x = noise(400)
    r = run_block(FrameEnergy(center=True), x, rate=RATE, sizes=33, tags=[(0, "user:a", 0), (41, "user:b", 0), (202, "user:c", 0)])
    got = {t.key: t.offset for t in r.tags if t.key.startswith("user:")}
    assert got == {"user:a": 0, "user:b": 10, "user:c": 51}  # round_half_up(i / hop)


# ---------------------------------------------------------------- gap policies
def test_reset_policy_splits_the_call_at_the_gap():
    x = np.arange(1000, dtype=np.float32)[:, None]
    blk = Recorder()
    gap = Gap(lost=5, cause=GapCause.SEQ_GAP)
    out = run_block(blk, x, rate=RATE, sizes=300, gaps=[(450, gap)])
    assert blk.resets == [gap]
    starts = [c[0] for c in blk.calls]
    assert 450 in starts and 300 in starts  # the chunk [300, 600) was split at 450
    for pos, n, vals in blk.calls:
        assert vals[0] == pos and not (pos < 450 < pos + n)
    assert np.array_equal(out.samples, x)
    assert [t.offset for t in out.tags if t.key == T.GAP] == [450]


def test_tags_added_before_a_gap_split_are_sent_once():
    """A call split at a gap (RESET) emits each part's added tags once, at their own offsets."""

    class Marker(PassThrough):
        on_gap = GapPolicy.RESET

        def work(self, x: np.ndarray, ctx) -> np.ndarray:
            ctx.add_tag(ctx.position, "user:call", int(ctx.position))
            return x

    x = np.arange(1000, dtype=np.float32)[:, None]
    out = run_block(Marker(), x, rate=RATE, sizes=300, gaps=[(450, Gap(lost=5, cause=GapCause.SEQ_GAP))])
    marks = [(t.offset, t.value) for t in out.tags if t.key == "user:call"]
    assert marks == [(0, 0), (300, 300), (450, 450), (600, 600), (900, 900)]


def test_zero_fill_policy_inserts_zeros_and_marks_them():
    class Filler(PassThrough):
        on_gap = GapPolicy.ZERO_FILL

    x = np.arange(1, 101, dtype=np.float32)[:, None]
    out = run_block(Filler(), x, rate=RATE, sizes=30, gaps=[(40, Gap(lost=7, cause=GapCause.SEQ_GAP))], tags=[(60, "user:m", 1)])
    y = out.samples[:, 0]
    assert len(y) == 107
    assert np.array_equal(y[:40], x[:40, 0]) and np.all(y[40:47] == 0) and np.array_equal(y[47:], x[40:, 0])
    gaps = [t for t in out.tags if t.key == T.GAP]
    assert len(gaps) == 1 and gaps[0].offset == 40 and gaps[0].value.filled and gaps[0].value.lost == 7
    assert [t.offset for t in out.tags if t.key == "user:m"] == [67]


def test_gap_from_source_becomes_event_and_counter():
    out = run_block(PassThrough(), noise(1000), rate=RATE, gaps=[(100, Gap(lost=30, cause=GapCause.SEQ_GAP)), (700, Gap(lost=None, cause=GapCause.XRUN))])
    gaps = out.events_of(E.STREAM_GAP)
    assert [(e.span[0], e.payload.cause, e.payload.lost) for e in gaps] == [(100, "seq_gap", 30), (700, "xrun", None)]
    assert len(out.events_of(E.STREAM_XRUN)) == 1
    assert out.stats["gaps_by_cause"] == {"seq_gap": 1, "xrun": 1} and out.stats["dropped_items"] == 30 and out.stats["xruns"] == 1


# ---------------------------------------------------------------- error policies
def test_raise_policy_names_block_and_span():
    with pytest.raises(BlockError) as ei:
        run_block(Failing(fail_at=[250]), noise(1000), rate=RATE, sizes=100)
    assert ei.value.block == "dut" and ei.value.span == (200, 300)
    assert "boom at 200" in str(ei.value)


def test_reset_policy_outputs_tagged_zeros_and_continues():
    x = noise(1000)
    blk = Failing(fail_at=[250])
    out = run_block(blk, x, rate=RATE, sizes=100, error_policy=ErrorPolicy.RESET)
    y = out.samples
    assert y.shape == x.shape
    np.testing.assert_array_equal(y[200:300], 0)
    np.testing.assert_allclose(y[:200], 2 * x[:200])
    np.testing.assert_allclose(y[300:], 2 * x[300:])
    gaps = [t for t in out.tags if t.key == T.GAP]
    assert [(t.offset, t.value.cause, t.value.lost, t.value.filled) for t in gaps] == [(200, GapCause.BLOCK_ERROR, 100, True)]
    errs = out.events_of(E.BLOCK_ERROR)
    assert len(errs) == 1 and errs[0].span == (200, 300) and "boom" in errs[0].payload.message and "Traceback" in errs[0].payload.traceback
    assert blk.resets == 1 and out.stats["blocks"]["dut"]["errors"] == 1


def test_bypass_policy_passes_input_through():
    x = noise(500)
    blk = Failing(fail_at=[120])
    blk.on_error = ErrorPolicy.BYPASS
    out = run_block(blk, x, rate=RATE, sizes=100, error_policy=None)
    np.testing.assert_array_equal(out.samples[100:200], x[100:200])
    np.testing.assert_allclose(out.samples[200:], 2 * x[200:])


def test_too_many_consecutive_errors_is_fatal():
    g = Graph("t")
    g.chain(g.add(VectorSource(samples=noise(5000), rate=RATE, sizes=100), name="src"), g.add(Failing(every=True), name="f"), g.add(CollectSink(), name="k"))
    r = Runner(g, max_consecutive_errors=5, stats_interval_s=0, keep_events=True, threaded_events=False)
    with pytest.raises(GraphFatal, match="5 times in a row"):
        r.run()
    assert r.state == "fatal" and sum(e.kind == E.BLOCK_ERROR for e in r.events) == 5


def test_undeclared_event_kind_is_an_error():
    with pytest.raises(BlockError) as ei:
        run_block(Emitter(kind="test.other"), noise(300), rate=RATE)
    assert isinstance(ei.value.cause, ConfigError)


# ---------------------------------------------------------------- events
def test_events_carry_spans_times_and_increasing_seq():
    x = noise(1000)
    out = run_block(Emitter(every=250), x, rate=RATE, sizes=64)
    marks = out.events_of("test.mark")
    assert [e.span for e in marks] == [(0, 1), (250, 251), (500, 501), (750, 751)]
    assert [e.t_start_ns for e in marks] == [int(round(i * 1e9 / RATE)) for i in (0, 250, 500, 750)]  # anchor utc 0
    seqs = [e.seq for e in out.events]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)
    assert all(e.stream == "test" and e.source == "dut" for e in marks)


def test_slow_event_sink_never_blocks_the_data_path():
    # the sink is stuck in its first event until the data path has moved all 20000 items (2000
    # events): if the data path waited for the sink, it could not get there (until the hang guard)
    released = threading.Event()

    class Stuck(EventSink):
        def __init__(self):
            self.n = 0

        def handle(self, event):
            released.wait(60)
            self.n += 1

    class Probe(SyncBlock):
        def __init__(self, *, name=None):
            super().__init__(name=name)
            self.seen = 0
            self.sink_done_at_end = None

        def work(self, x, ctx):
            self.seen += x.shape[0]
            if self.seen == 20000:
                self.sink_done_at_end = stuck.n
                released.set()
            return x

    g = Graph("t")
    probe = g.add(Probe(), name="probe")
    g.chain(g.add(VectorSource(samples=noise(20000), rate=RATE, sizes=16), name="src"), g.add(Emitter(every=10), name="e"), probe)
    stuck = g.subscribe(Stuck(), kinds=["test.*"])
    r = Runner(g, event_queue=50, stats_interval_s=0)
    st = r.run()
    assert probe.sink_done_at_end == 0  # every item and event went through while the sink had handled none
    assert st["events"]["test.mark"] == 2000
    assert st["events_dropped"] > 0 and stuck.n + st["events_dropped"] >= 2000 - 50  # bounded queue, counted drops


# ---------------------------------------------------------------- negotiation and topology
class NeedsRate(SyncBlock):
    def __init__(self, *, rate=8000, name=None):
        super().__init__(name=name)
        self.rate = rate
        self.started = False

    def negotiate(self, inputs):
        if inputs["in"].rate != self.rate:
            raise ConfigError(f"needs {self.rate} Hz, got {inputs['in'].rate}")
        return {"out": inputs["in"]}

    def start(self, ctx):
        self.started = True

    def work(self, x, ctx):
        return x


def test_rate_mismatch_is_config_error_naming_both_blocks_before_audio():
    g = Graph("t")
    src = g.add(VectorSource(samples=noise(100), rate=12000), name="kiwi")
    blk = g.add(NeedsRate(rate=8000), name="vad")
    g.connect(src, blk)
    with pytest.raises(ConfigError, match=r"kiwi -> vad: needs 8000 Hz, got 12000"):
        Runner(g).run()
    assert not blk.started


@pytest.mark.parametrize(
    "wire, msg",
    [
        (lambda g, a, b, c: (g.connect(a, c), g.connect(b, c)), "already fed by"),
        (lambda g, a, b, c: g.connect(a, b), "has no input connected"),
        (lambda g, a, b, c: (g.connect(a, b), g.connect(b, c), g.connect(c, a)), "has no input, cannot be fed by c"),
    ],
)
def test_topology_errors(wire, msg):
    g = Graph("t")
    a = g.add(VectorSource(samples=noise(10), rate=RATE), name="a")
    b = g.add(PassThrough(), name="b")
    c = g.add(PassThrough(), name="c")
    wire(g, a, b, c)
    with pytest.raises(ConfigError, match=msg):
        g.build()


def test_cycle_without_source_is_rejected():
    g = Graph("t")
    b, c = g.add(PassThrough(), name="b"), g.add(PassThrough(), name="c")
    g.connect(b, c)
    g.connect(c, b)
    with pytest.raises(ConfigError, match="cycle"):
        g.build()


def test_sink_cannot_feed_and_duplicate_names_rejected():
    g = Graph("t")
    k = g.add(CollectSink(), name="k")
    with pytest.raises(ConfigError):
        g.add(PassThrough(), name="k")
    g.add(VectorSource(samples=noise(10), rate=RATE), name="s")
    g.connect("s", k)
    g.connect(k, g.add(PassThrough(), name="p"))
    with pytest.raises(ConfigError, match="has no output"):
        g.build()


# ---------------------------------------------------------------- overload of a live source
class LiveRingSource(Source):
    """A live source whose producer we drive by hand."""

    live = True

    def __init__(self, *, capacity=1000, name=None):
        super().__init__(name=name)
        self.capacity = capacity

    def negotiate(self, inputs):
        return {"out": StreamSpec(RATE, 1, np.float32)}

    def start(self, ctx):
        self.ring = SampleRing(ctx.output_spec(), self.capacity, notify=ctx.notify)

    def read(self, max_items, ctx):
        if self.ring.closed:
            return None
        x, tags = self.ring.read(max_items)
        return SourceRead(x, tags)

    def wait(self, timeout):
        return True


def test_live_overload_drops_oldest_into_counted_tagged_gap():
    g = Graph("t")
    src = g.add(LiveRingSource(capacity=1000), name="mic")
    sink = g.add(CollectSink(), name="k")
    g.connect(src, sink)
    r = Runner(g, keep_events=True, threaded_events=False, stats_interval_s=0)
    r.start()
    src.ring.write(np.arange(0, 3000, dtype=np.float32))  # graph not running yet: 2000 too many
    r.step()
    src.ring.write(np.arange(3000, 3500, dtype=np.float32))
    src.ring.close()
    st = r.run()
    assert np.array_equal(sink.samples[:, 0], np.arange(2000, 3500, dtype=np.float32))
    gaps = [t for t in sink.tags if t.key == T.GAP]
    assert [(t.offset, t.value.cause, t.value.lost) for t in gaps] == [(0, GapCause.OVERLOAD, 2000)]
    assert st["dropped_items"] == 2000 and st["gaps_by_cause"] == {"overload": 1}
    assert [e.payload.lost for e in r.events if e.kind == E.STREAM_GAP] == [2000]


def test_live_source_with_slow_graph_never_blocks_producer():
    # the graph is stuck in its first work() call until the producer has written everything: if a
    # write waited on the graph, the producer could not finish (until the hang guard)
    released = threading.Event()

    class Stuck(SyncBlock):
        def __init__(self, *, name=None):
            super().__init__(name=name)
            self.done = 0

        def work(self, x, ctx):
            released.wait(60)
            self.done += 1
            return x

    g = Graph("t")
    src = g.add(LiveRingSource(capacity=800), name="mic")
    sink = g.add(CollectSink(), name="k")
    stuck = g.add(Stuck(), name="slow")
    g.chain(src, stuck, sink)
    r = Runner(g, stats_interval_s=0)
    r.start()
    total = 16000
    graph_done_at_end = []

    def produce():
        for i in range(0, total, 160):  # 10 ms blocks, as fast as possible
            src.ring.write(np.arange(i, i + 160, dtype=np.float32))
            time.sleep(0.001)
        graph_done_at_end.append(stuck.done)
        released.set()
        src.ring.close()

    th = threading.Thread(target=produce)
    th.start()
    st = r.run()
    th.join()
    got = sink.samples[:, 0]
    lost = sum(t.value.lost for t in sink.tags if t.key == T.GAP)
    assert lost > 0 and len(got) + lost == total and st["dropped_items"] == lost
    assert np.all(np.diff(got) > 0)
    assert graph_done_at_end == [0]  # the producer's writes are copies, never a wait on the graph


# ---------------------------------------------------------------- modes, duration, params, format change
def test_paced_mode_releases_audio_at_the_requested_speed():
    g = Graph("t")
    g.chain(g.add(VectorSource(samples=noise(8000), rate=RATE, sizes=10**9), name="src"), g.add(CollectSink(), name="k"))
    t0 = time.monotonic()
    Runner(g, Paced(2.0), chunk_s=0.05, stats_interval_s=0).run()
    assert time.monotonic() - t0 >= 0.2  # 0.5 s of audio at 2x cannot finish in under 0.25 s (a lower bound: load only slows it)


def test_duration_stops_an_endless_source_exactly():
    class Endless(Source):
        def negotiate(self, inputs):
            return {"out": StreamSpec(RATE, 1, np.float32)}

        def read(self, max_items, ctx):
            return SourceRead(np.ones((max_items, 1), np.float32))

    g = Graph("t")
    sink = g.add(CollectSink(), name="k")
    g.connect(g.add(Endless(), name="src"), sink)
    st = Runner(g, FreeRun(), duration=1.2345, chunk_s=0.1, stats_interval_s=0).run()
    assert sink.samples.shape[0] == round(1.2345 * RATE) and abs(st["stream_s"] - 1.2345) < 1 / RATE


def test_staged_params_apply_between_chunks_with_a_tag():
    class Stager(Source):
        def __init__(self, *, target, name=None):
            super().__init__(name=name)
            self.target = target
            self.k = 0

        def negotiate(self, inputs):
            return {"out": StreamSpec(RATE, 1, np.float32)}

        def read(self, max_items, ctx):
            self.k += 1
            if self.k == 3:
                self.target.set_params(gain=3.0)
            if self.k > 5:
                return None
            return SourceRead(np.ones((100, 1), np.float32))

    g = Graph("t")
    gain = Gain(gain=1.0)
    sink = g.add(CollectSink(), name="k")
    g.chain(g.add(Stager(target=gain), name="src"), g.add(gain, name="gain"), sink)
    Runner(g, stats_interval_s=0).run()
    y = sink.samples[:, 0]
    assert np.all(y[:200] == 1) and np.all(y[200:] == 3)
    pc = [t for t in sink.tags if t.key == T.PARAM]
    assert len(pc) == 1 and pc[0].offset == 200 and pc[0].value.changes == {"gain": 3.0}


def test_format_change_renegotiates_downstream():
    x = np.ones((2000, 1), np.float32)
    spec2 = StreamSpec(8000, 1, np.float32)
    g = Graph("t")
    src = g.add(VectorSource(samples=x, rate=RATE, sizes=500, tags=[(1000, T.FORMAT, FormatChange(spec2))]), name="src")
    dec = g.add(Decimate2(), name="dec")
    sink = g.add(CollectSink(), name="k")
    g.chain(src, dec, sink)
    r = Runner(g, keep_events=True, threaded_events=False, stats_interval_s=0)
    r.run()
    assert sink.samples.shape[0] == 1000
    fmt = [t for t in sink.tags if t.key == T.FORMAT]
    assert len(fmt) == 1 and fmt[0].offset == 500 and fmt[0].value.spec.rate == 4000
    assert sum(e.kind == E.STREAM_FORMAT for e in r.events) >= 2


def test_time_anchor_follows_a_rate_change():
    x = noise(4000)
    anchor = TimeAnchor(5_000_000_000, "gps")
    out = run_block(Decimate2(), x, rate=RATE, sizes=123, tags=[(3001, T.TIME, anchor)])
    t = [tg for tg in out.tags if tg.key == T.TIME and tg.value == anchor]
    assert len(t) == 1 and t[0].offset == round_half_up(Fraction(3001, 2))


def test_algorithmic_latency_summed_per_path():
    g = Graph("t")
    src = g.add(VectorSource(samples=noise(10), rate=RATE), name="src")
    w1 = g.add(FrameEnergy(window=160, hop=80), name="w1")
    g.connect(src, w1)
    lat = g.path_latency_s()
    assert lat["w1"] == pytest.approx(80 / RATE)
    assert "w1" in g.describe()


def test_sink_receives_chunks_with_tags():
    class TagSink(Sink):
        def __init__(self, *, name=None):
            super().__init__(name=name)
            self.seen = []

        def consume(self, chunk, ctx):
            self.seen.extend((t.offset, t.key) for t in chunk.tags)

    out = run_block(TagSink(), noise(100), rate=RATE, tags=[(50, "user:x", 1)])
    assert out.stats["blocks"]["dut"]["items_in"] == 100


def test_tag_offsets_within_chunks():
    # every tag delivered to a sink lies inside its chunk
    class Check(Sink):
        def consume(self, chunk, ctx):
            for t in chunk.tags:
                assert chunk.start <= t.offset < max(chunk.stop, chunk.start + 1)

    g = Graph("t")
    src = g.add(VectorSource(samples=noise(999), rate=RATE, sizes="random", tags=[(i, "user:t", i) for i in range(0, 999, 37)]), name="src")
    g.chain(src, g.add(Decimate2(), name="d"), g.add(Check(), name="c"))
    Runner(g, error_policy=ErrorPolicy.RAISE, stats_interval_s=0).run()
    assert Tag(0, "k") != Tag(1, "k")


# ---------------------------------------------------------------- many graphs on one thread
def test_multirunner_steps_live_graphs_when_ready_and_paced_graphs_every_round():
    from streamkit.core.runtime import MultiRunner, ReadyFlag

    graphs, sinks, runners = [], [], []
    for k in range(3):
        g = Graph(f"live{k}")
        src = g.add(LiveRingSource(capacity=100000), name="src")
        sink = g.add(CollectSink(), name="k")
        g.connect(src, sink)
        graphs.append(g)
        sinks.append(sink)
        runners.append(Runner(g, stats_interval_s=0))
    gf = Graph("file")
    fsink = gf.add(CollectSink(), name="k")
    gf.connect(gf.add(VectorSource(samples=noise(1600), rate=RATE, sizes=10**9), name="src"), fsink)
    runners.append(Runner(gf, Paced(4.0), chunk_s=0.01, stats_interval_s=0))
    mr = MultiRunner(runners, sweep_s=0.05)
    assert all(isinstance(r.notify, ReadyFlag) for r in runners)

    def produce():
        time.sleep(0.05)  # the runners start inside mr.run()
        for i in range(20):
            for k, g in enumerate(graphs):
                g.blocks["src"].ring.write(np.full(100, k * 1000 + i, np.float32))
            time.sleep(0.005)
        for g in graphs:
            g.blocks["src"].ring.close()

    th = threading.Thread(target=produce)
    th.start()
    stats = mr.run()
    th.join()
    for k, sink in enumerate(sinks):
        assert np.array_equal(sink.samples[:, 0], np.repeat(np.arange(20, dtype=np.float32) + k * 1000, 100))
    assert fsink.samples.shape[0] == 1600 and not mr.failures
    assert set(stats) == {"live0", "live1", "live2", "file"}


def test_multirunner_isolates_a_failing_graph():
    from streamkit.core.runtime import MultiRunner

    ok = Graph("ok")
    k_ok = ok.add(CollectSink(), name="k")
    ok.connect(ok.add(VectorSource(samples=noise(1000), rate=RATE, sizes=100), name="src"), k_ok)
    bad = Graph("bad")
    bad.chain(bad.add(VectorSource(samples=noise(1000), rate=RATE, sizes=100), name="src"), bad.add(Failing(fail_at=[500]), name="f"))
    mr = MultiRunner([Runner(ok, stats_interval_s=0), Runner(bad, stats_interval_s=0, error_policy=ErrorPolicy.RAISE)])
    mr.run()
    assert "bad" in mr.failures and "boom" in mr.failures["bad"]
    assert k_ok.samples.shape[0] == 1000


def test_gap_lost_is_counted_in_items_of_the_port_it_reaches():
    """``Gap.lost`` counts items of the port the tag is on: a rate change rescales it (2048 items at
    12001.188 Hz are 1365 items at 8000 Hz), so that what follows a resampler states the loss in its own items."""
    m = TagMapper(Fraction(2000000, 3000297), Fraction(0))
    m.add(Tag(4096, "sk:gap", Gap(lost=2048, cause=GapCause.SEQ_GAP)))
    m.add(Tag(5000, "sk:gap", Gap(lost=None, cause=GapCause.RECONNECT)))
    m.add(Tag(6000, "user:x", 7))
    got = m.take(0, 10_000)
    assert got[0].value.lost == round_half_up(Fraction(2048) * Fraction(2000000, 3000297)) == 1365
    assert got[0].value.cause == GapCause.SEQ_GAP and got[1].value.lost is None and got[2].value == 7
    # end to end: the demo signal's losses through dsp.resample reach the sink in 8 kHz items
    from streamkit.core.registry import lookup

    g = Graph("gaps")
    src = g.add(lookup("io.demo_signal")(duration_s=3.0, dropouts=1.0, dropout_items=1200, rate=12000), name="src")
    rs = g.add(lookup("dsp.resample")(to_hz=8000), name="rs")
    sink = g.add(CollectSink(), name="sink")
    g.chain(src, rs, sink)
    Runner(g, FreeRun()).run()
    gaps = [t.value for t in sink.tags if t.key == "sk:gap"]
    assert gaps and all(v.lost == 800 for v in gaps)
