"""Start-up order: every block of every graph starts (models loaded, kernels compiled) before any
source starts or is read, so that a live stream never flows into a graph that is still compiling."""

from __future__ import annotations

import numpy as np
import pytest

from streamkit.core.block import Sink, Source, SourceRead, SyncBlock
from streamkit.core.clock import FreeRun
from streamkit.core.errors import ConfigError
from streamkit.core.graph import Graph
from streamkit.core.runtime import MultiRunner, Runner
from streamkit.core.types import StreamSpec

RATE = 8000


class Log:
    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []


class RecSource(Source):
    def __init__(self, *, log: Log, n: int = 400, name: str | None = None) -> None:
        super().__init__(name=name)
        self.log = log
        self.n = n
        self.sent = 0

    def negotiate(self, inputs):
        return {"out": StreamSpec(RATE, 1, np.float32)}

    def start(self, ctx):
        self.log.calls.append(("start", self.name))
        self.sent = 0

    def read(self, max_items, ctx):
        self.log.calls.append(("read", self.name))
        if self.sent >= self.n:
            return None
        k = min(max_items, self.n - self.sent)
        self.sent += k
        return SourceRead(np.zeros((k, 1), np.float32))


class RecBlock(SyncBlock):
    def __init__(self, *, log: Log, fail: bool = False, name: str | None = None) -> None:
        super().__init__(name=name)
        self.log = log
        self.fail = fail
        self.stopped = False

    def start(self, ctx):
        self.log.calls.append(("start", self.name))
        if self.fail:
            raise ConfigError(f"{self.name}: cannot load its model")

    def work(self, x, ctx):
        return x

    def stop(self):
        self.stopped = True


class RecSink(Sink):
    def __init__(self, *, log: Log, name: str | None = None) -> None:
        super().__init__(name=name)
        self.log = log

    def start(self, ctx):
        self.log.calls.append(("start", self.name))

    def consume(self, chunk, ctx):
        pass


def station(log: Log, tag: str, fail: bool = False) -> Graph:
    """src -> a -> b -> sink, with a second branch src -> c (fan-out), block names prefixed by ``tag``."""
    g = Graph(tag)
    src = g.add(RecSource(log=log), name=f"{tag}_src")
    a = g.add(RecBlock(log=log), name=f"{tag}_a")
    b = g.add(RecBlock(log=log, fail=fail), name=f"{tag}_b")
    g.chain(src, a, b, g.add(RecSink(log=log), name=f"{tag}_sink"))
    g.connect(src, g.add(RecBlock(log=log), name=f"{tag}_c"))
    return g


def first(calls: list[tuple[str, str]], what: str, pred) -> int:
    return next(i for i, (w, n) in enumerate(calls) if w == what and pred(n))


def last(calls: list[tuple[str, str]], what: str, pred) -> int:
    return max(i for i, (w, n) in enumerate(calls) if w == what and pred(n))


def test_runner_starts_every_block_before_its_source():
    log = Log()
    Runner(station(log, "g"), FreeRun(), stats_interval_s=0, threaded_events=False).run()
    is_src = lambda n: n.endswith("_src")  # noqa: E731
    not_src = lambda n: not n.endswith("_src")  # noqa: E731
    assert {n for w, n in log.calls if w == "start"} == {"g_src", "g_a", "g_b", "g_sink", "g_c"}
    assert last(log.calls, "start", not_src) < first(log.calls, "start", is_src) < first(log.calls, "read", is_src)


def test_multirunner_starts_every_block_of_every_graph_before_any_source():
    log = Log()
    runners = [Runner(station(log, f"s{i}"), FreeRun(), stats_interval_s=0, threaded_events=False) for i in range(3)]
    MultiRunner(runners).run()
    is_src = lambda n: n.endswith("_src")  # noqa: E731
    not_src = lambda n: not n.endswith("_src")  # noqa: E731
    starts = [n for w, n in log.calls if w == "start"]
    assert len(starts) == 15
    assert last(log.calls, "start", not_src) < first(log.calls, "start", is_src)
    assert last(log.calls, "start", is_src) < first(log.calls, "read", is_src)


def test_a_block_failing_to_start_stops_the_others_and_no_source_ever_starts():
    log = Log()
    graphs = [station(log, "s0"), station(log, "s1", fail=True), station(log, "s2")]
    runners = [Runner(g, FreeRun(), stats_interval_s=0, threaded_events=False) for g in graphs]
    with pytest.raises(ConfigError, match="cannot load its model"):
        MultiRunner(runners).run()
    assert not any(w == "start" and n.endswith("_src") for w, n in log.calls)
    assert not any(w == "read" for w, _ in log.calls)
    blocks = {name: b for g in graphs for name, b in g.blocks.items()}
    started = [n for w, n in log.calls if w == "start" and isinstance(blocks[n], RecBlock)]
    assert "s0_a" in started and all(blocks[n].stopped for n in started if not blocks[n].fail)
    assert not any(w == "start" and n.startswith("s2") for w, n in log.calls)  # s2 never got to start


def test_runner_start_failure_stops_what_started():
    log = Log()
    g = station(log, "g", fail=True)
    with pytest.raises(ConfigError):
        Runner(g, FreeRun(), stats_interval_s=0, threaded_events=False).start()
    assert g.blocks["g_a"].stopped and not any(n == "g_src" for _, n in log.calls)
