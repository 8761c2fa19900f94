"""ConsoleSink: plain lines and summary for logs, a rich panel for terminals, never a crash."""

from __future__ import annotations

import io
import re

import numpy as np
import pytest

from streamkit.core import events as E
from streamkit.core.block import SyncBlock
from streamkit.core.errors import ConfigError
from streamkit.core.events import Event
from streamkit.core.graph import Graph
from streamkit.core.runtime import Runner
from streamkit.io import CollectSink, ConsoleSink, DemoSignal, format_event, format_summary


class Boom(SyncBlock):
    """Fails on one chunk so that a block.error event shows up."""

    def __init__(self, *, name=None):
        super().__init__(name=name)
        self.n = 0

    def work(self, x, ctx):
        self.n += 1
        if self.n == 5:
            raise ZeroDivisionError("chunk five")
        return x


def run_demo(console, duration_s=6.0, stats_interval_s=0.0, boom=False):
    g = Graph("st1")
    src = g.add(DemoSignal(duration_s=duration_s, seed=1, dropouts=2.0, utc_ns=1_700_000_000 * 10**9), name="src")
    sink = g.add(CollectSink(), name="k")
    if boom:
        g.chain(src, g.add(Boom(), name="boom"), sink)
    else:
        g.connect(src, sink)
    g.subscribe(console)
    return Runner(g, stats_interval_s=stats_interval_s).run()


def ev(kind, payload, seq=0, span=(10, 10), t=1_700_000_000 * 10**9):
    return Event(kind, "st1", "src", "src.out", span, t, t, t, seq, payload)


def test_instance():
    ConsoleSink()
    with pytest.raises(ConfigError):
        ConsoleSink(mode="fancy")
    with pytest.raises(ConfigError):
        ConsoleSink(plain_interval_s=0)


def test_file_is_not_a_graph_parameter():
    assert ConsoleSink(file=io.StringIO(), mode="plain").params() == {"mode": "plain"}


def test_plain_mode_prints_events_and_a_summary():
    out = io.StringIO()
    st = run_demo(ConsoleSink(file=out, mode="plain"), boom=True)
    text = out.getvalue()
    all_gaps = [line for line in text.splitlines() if re.match(r"^\d\d:\d\d:\d\d\.\d{3}  stream\.gap", line)]
    gap_lines = [line for line in all_gaps if "seq_gap" in line]
    assert len(gap_lines) == 2
    assert len(all_gaps) == 3 and any("block_error" in line for line in all_gaps)  # the failed chunk is a filled gap too
    assert "512 items lost (seq_gap)" in gap_lines[0] and "22:13:2" in gap_lines[0]  # UTC time of the gap, readable
    assert "block.error" in text and "ZeroDivisionError: chunk five" in text
    assert "stream.end" in text and "graph.state" in text
    # the summary: per-block table, totals, gaps by cause, events by kind
    summary = text[text.index("== summary: graph st1") :]
    for name in ("src", "boom", "k"):
        assert re.search(rf"^\s+{name}\s+[\d.-]+\s+\d+", summary, re.M), name
    assert "gaps:            3 (block_error 1, seq_gap 2)" in summary
    assert re.search(r"RT factor:\s+\d+\.\d+", summary)
    assert "stream.gap 3" in summary and "block.error 1" in summary
    assert st["gaps"] == 3


def test_plain_mode_stats_lines_are_rate_limited():
    out = io.StringIO()
    run_demo(ConsoleSink(file=out, mode="plain", plain_interval_s=3600), stats_interval_s=0.0001)
    assert out.getvalue().count("[stats]") == 1  # the first one only, then at most one per hour
    out = io.StringIO()
    s = ConsoleSink(file=out, mode="plain", plain_interval_s=0.001)
    s.open("g")
    for i in range(3):
        s.handle(ev(E.GRAPH_STATS, {"stream_s": 1.0 + i, "rtf_total": 0.01, "gaps": 1, "gaps_by_cause": {"xrun": 1}, "xruns": 1,
                                    "blocks": {"a": {"rtf": 0.01, "errors": 0}, "b": {"rtf": 0.2, "errors": 0}}}))  # fmt: skip
        import time

        time.sleep(0.002)
    lines = [line for line in out.getvalue().splitlines() if line.startswith("[stats]")]
    assert len(lines) == 3 and "max b 0.2000" in lines[0] and "xruns=1" in lines[0] and "gaps=1 (xrun 1)" in lines[0]


def test_quiet_kinds_are_counted_not_printed():
    out = io.StringIO()
    run_demo(ConsoleSink(file=out, mode="plain", quiet_kinds=("stream.gap", "graph.*")))
    text = out.getvalue()
    body = text[: text.index("== summary")]
    assert "stream.gap" not in body and "graph.state" not in body
    assert "seq_gap 2" in text[text.index("== summary") :]


def test_line_flood_is_suppressed_and_reported():
    out = io.StringIO()
    s = ConsoleSink(file=out, mode="plain", max_lines_per_s=5)
    s.open("g")
    for i in range(100):
        s.handle(ev(E.STREAM_XRUN, E.XrunInfo("input_overflow", i + 1), seq=i))
    s.close()
    text = out.getvalue()
    assert 3 <= text.count("stream.xrun") <= 8
    assert "console lines suppressed" in text


def test_level_updates_feed_the_stats_line_and_the_meter():
    out = io.StringIO()
    s = ConsoleSink(file=out, mode="plain", plain_interval_s=0.0001)
    s.open("g")
    s.handle(ev(E.LEVEL, E.LevelInfo(-32.5, -12.0)))
    s.handle(ev(E.GRAPH_STATS, {"stream_s": 2.0, "rtf_total": 0.1}))
    s.close()
    text = out.getvalue()
    assert "level.update" not in text.split("[stats]")[0]  # quiet by default
    assert "level=-32.5 dBFS" in text


def test_auto_mode_uses_plain_when_not_a_tty():
    out = io.StringIO()
    s = ConsoleSink(file=out)
    run_demo(s)
    assert s.active_mode == "plain" and "== summary" in out.getvalue()


def test_rich_mode_renders_into_a_stringio_console():
    out = io.StringIO()
    s = ConsoleSink(file=out, mode="rich", width=110)
    run_demo(s, stats_interval_s=0.001, boom=True)
    text = out.getvalue()
    assert s.active_mode == "rich"
    assert "streamkit" in text and "summary: graph st1" in text
    assert "stream.gap" in text and "seq_gap" in text
    assert "first call ms" in text and "boom" in text


def test_rich_panel_renders_every_part():
    from rich.console import Console

    s = ConsoleSink(file=io.StringIO(), mode="rich", width=100)
    s.open("st1")
    try:
        s.handle(ev(E.GRAPH_STATS, {"graph": "st1", "mode": "realtime", "state": "running", "stream_s": 83.4, "wall_s": 83.5,
                                    "rtf_total": 0.7, "gaps": 2, "gaps_by_cause": {"xrun": 1, "overload": 1}, "xruns": 1,
                                    "reconnects": 1, "dropped_items": 512,
                                    "blocks": {"mic": {"rtf": 0.001, "errors": 0}, "asr": {"rtf": 0.69, "errors": 3}}}))  # fmt: skip
        s.handle(ev(E.LEVEL, E.LevelInfo(-20.0, -3.0)))
        s.handle(ev(E.STREAM_XRUN, E.XrunInfo("input_overflow", 1)))
        s.handle(ev(E.BLOCK_ERROR, E.BlockErrorInfo("ValueError", "bad window", "reset", "Traceback...", 1)))
        s.handle(ev("asr.final", {"text": "cq cq de k7abc", "lang": "en", "conf": 0.93}))
        rec = Console(file=io.StringIO(), width=100, force_terminal=True, color_system=None)
        rec.print(s._render())
        text = rec.file.getvalue()
    finally:
        s.close()
    assert "00:01:23.4" in text and "RT factor 0.7000" in text
    assert "xruns 1" in text and "reconnects 1" in text and "overload 1" in text
    assert "rms  -20.0 dBFS" in text and "█" in text
    assert "asr" in text and "0.6900" in text
    assert "cq cq de k7abc" in text and "ValueError: bad window" in text


def test_format_event_handles_any_payload():
    assert '"hello" lang=en' in format_event(ev("asr.final", {"text": "hello", "lang": "en"}))
    assert "energy 1.00-2.50 s score 0.90" in format_event(ev("vad.segment", E.ActivitySegment("energy", 0.9, 1.0, 2.5)))
    assert "retry in 4.2 s" in format_event(ev(E.SOURCE_STATE, E.SourceState("retrying", "too busy", 4.2, 2)))
    assert "[3, 9)" in format_event(ev("x.y", None, span=(3, 9)))
    assert "--:--:--" in format_event(Event("x.y", "s", "b", "p", (0, 0), None, None, None, 0, object()))  # type: ignore[arg-type]
    long = format_event(ev("x.y", {"k": "v" * 500}), width=80)
    assert len(long) == 80


def test_format_summary_without_full_stats():
    text = format_summary({"graph": "g", "gaps": 1, "gaps_by_cause": {"xrun": 1}}, {"stream.xrun": 1})
    assert "graph g" in text and "xrun 1" in text and "stream.xrun 1" in text


def test_summary_falls_back_to_own_counters_when_stats_are_not_subscribed():
    out = io.StringIO()
    g = Graph("st2")
    g.add(DemoSignal(duration_s=5.0, seed=1, dropouts=2.0), name="src")
    g.add(CollectSink(), name="k")
    g.connect("src", "k")
    g.subscribe(ConsoleSink(file=out, mode="plain"), kinds=("stream.*",))
    Runner(g, stats_interval_s=0).run()
    text = out.getvalue()
    assert "== summary: graph st2" in text and "seq_gap 2" in text and "stream.gap 2" in text


def test_closed_output_never_raises():
    out = io.StringIO()
    s = ConsoleSink(file=out, mode="plain")
    s.open("g")
    out.close()
    s.handle(ev(E.STREAM_XRUN, E.XrunInfo("input_overflow", 1)))
    s.close()
    assert np.isfinite(1.0)
