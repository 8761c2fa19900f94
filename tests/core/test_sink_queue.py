"""Sinks that may fall behind (consoles) get their own bounded queue: they never hold up the event files."""

from __future__ import annotations

import io
import json
import threading
import time

from streamkit.core import events as E
from streamkit.core.block import EventSink
from streamkit.core.clock import RealTime
from streamkit.core.events import Event
from streamkit.core.graph import Graph
from streamkit.core.runtime import Runner
from streamkit.core.sink_queue import SinkQueue
from streamkit.io import CollectSink, ConsoleSink, DemoSignal, JsonlEventSink

HANG_S = 60


class BlockingOut(io.TextIOBase):
    """A terminal that stopped reading: every write blocks until ``release`` is set."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()

    def write(self, s: str) -> int:
        self.entered.set()
        self.release.wait(HANG_S * 2)
        return len(s)

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return False


def test_a_blocked_console_never_stalls_the_event_file_and_the_run_ends(tmp_path):
    out = BlockingOut()
    path = tmp_path / "ev.jsonl"
    g = Graph("st1")
    src = g.add(DemoSignal(duration_s=3.0, seed=1, dropouts=1.0), name="src")
    g.connect(src, g.add(CollectSink(), name="k"))
    g.subscribe(JsonlEventSink(path=str(path)))
    console = ConsoleSink(file=out, mode="plain")
    console.close_timeout_s = 1.0
    g.subscribe(console)
    result: dict = {}
    t = threading.Thread(target=lambda: result.update(Runner(g, RealTime(), stats_interval_s=0.2).run()), daemon=True)
    try:
        t.start()
        assert out.entered.wait(HANG_S)  # the console is now stuck in its first write
        lines = lambda: len(path.read_text().splitlines()) if path.exists() else 0  # noqa: E731
        n_blocked = lines()
        grew = False
        deadline = time.monotonic() + HANG_S
        while t.is_alive() and not grew and time.monotonic() < deadline:  # the file keeps receiving events while the console is stuck
            grew = lines() > n_blocked
            time.sleep(0.02)
        t.join(HANG_S)
        assert grew and not t.is_alive(), "the run did not end while its console was blocked"
        assert not out.release.is_set()
        recs = [json.loads(x) for x in path.read_text().splitlines()]
        assert recs[-1]["kind"] == "graph.state" and recs[-1]["payload"]["state"] == "stopped"
        assert sum(r["kind"] == "stream.gap" for r in recs) == 2 and sum(r["kind"] == "graph.stats" for r in recs) >= 5
        # the events the console never showed are counted, and it is named as left behind
        assert result["event_sinks_left_behind"] == ["io.console"]
        assert result["events_dropped_by_sink"]["io.console"] > 0
    finally:
        out.release.set()


class Gate(EventSink):
    """Records events; blocks in handle() until opened."""

    may_drop = True

    def __init__(self) -> None:
        self.gate = threading.Event()
        self.got: list[str] = []
        self.closed = 0

    def handle(self, event: Event) -> None:
        self.gate.wait(HANG_S)
        self.got.append(event.kind)

    def close(self) -> None:
        self.closed += 1


def ev(kind: str, seq: int) -> Event:
    return Event(kind, "g", "src", "src.out", (seq, seq), None, None, 0, seq, None)


def test_a_full_queue_drops_the_oldest_partial_events_first_and_counts_them():
    sink = Gate()
    q = SinkQueue(sink, "g", maxlen=4)
    q.start()
    q.put(ev("vad.segment", 0))  # taken by the thread, which then blocks on the gate
    for _ in range(1000):
        if not q.q:
            break
        time.sleep(0.01)
    kinds = ["vad.segment", E.LEVEL, "stream.gap", E.LEVEL, "asr.final", "asr.partial", "stream.end"]
    for i, k in enumerate(kinds, 1):
        q.put(ev(k, i))
    sink.gate.set()
    assert q.close(HANG_S)
    assert q.dropped == 3 and not q.left_behind
    assert sink.got == ["vad.segment", "vad.segment", "stream.gap", "asr.final", "stream.end"] and sink.closed == 1


def test_a_sink_shared_by_graphs_is_waited_for_once_by_the_last_to_close():
    sink = Gate()  # blocked for good
    a, b = SinkQueue(sink, "a"), SinkQueue(sink, "b")
    a.start()
    b.start()
    a.put(ev("vad.segment", 0))
    b.put(ev("vad.segment", 0))
    b.put(ev("vad.segment", 1))
    assert a.close(HANG_S)  # not the last: returns at once, the scheduler thread goes on with graph b
    assert not b.close(0.2)  # the last: waits for both, gives up, counts what was never delivered
    assert a.left_behind and b.left_behind and a.dropped + b.dropped >= 1
    sink.gate.set()
