"""JsonlEventSink: every line parses, order is kept, the subscription filters kinds, files are durable."""

from __future__ import annotations

import json

import numpy as np
import pytest

from streamkit.core.errors import ConfigError
from streamkit.core.events import Event, event_to_dict
from streamkit.core.graph import Graph
from streamkit.core.runtime import Runner
from streamkit.io import CollectSink, DemoSignal, JsonlEventSink, read_events


def demo_graph(path, kinds=None, name="st1", **sink_kw):
    g = Graph(name)
    g.add(DemoSignal(duration_s=8.0, seed=1, dropouts=2.0, utc_ns=10**18), name="src")
    g.add(CollectSink(), name="k")
    g.connect("src", "k")
    sink = g.subscribe(JsonlEventSink(path=str(path), **sink_kw), kinds=kinds)
    return g, sink


def ev(seq, kind="user.thing", payload=None):
    return Event(kind, "s", "b", "b.out", (seq, seq + 1), None, None, 0, seq, payload)


def test_instance():
    JsonlEventSink(path="x.jsonl")
    with pytest.raises(ConfigError):
        JsonlEventSink(path="")


def test_every_runtime_event_is_one_parsable_line_in_order(tmp_path):
    p = tmp_path / "ev.jsonl"
    g, sink = demo_graph(p)
    r = Runner(g, keep_events=True, stats_interval_s=0)  # threaded event delivery, as in production
    r.run()
    lines = p.read_text().splitlines()
    recs = [json.loads(line) for line in lines]
    assert len(recs) == len(r.events) == sink.written
    assert [d["seq"] for d in recs] == sorted(d["seq"] for d in recs)  # delivered in order
    assert recs == [json.loads(json.dumps(event_to_dict(e))) for e in r.events]
    gaps = [d for d in recs if d["kind"] == "stream.gap"]
    assert len(gaps) == 3 and all(d["payload"]["cause"] == "seq_gap" and d["payload"]["lost"] == 512 for d in gaps)
    assert all(d["span"][0] == d["span"][1] and d["t_start_ns"] is not None for d in gaps)
    assert recs[-1]["kind"] == "graph.state" and recs[-1]["payload"]["state"] == "stopped"


def test_subscription_kinds_filter(tmp_path):
    p = tmp_path / "gaps.jsonl"
    g, _ = demo_graph(p, kinds=("stream.gap", "stream.end"))
    Runner(g, stats_interval_s=0.001).run()
    kinds = [d["kind"] for d in read_events(p)]
    assert kinds == ["stream.gap"] * 3 + ["stream.end"]


def test_graph_name_in_path_and_parent_directories(tmp_path):
    g, sink = demo_graph(tmp_path / "events" / "{graph}" / "ev.jsonl", kinds=("stream.gap",), name="k7abc")
    Runner(g, stats_interval_s=0).run()
    p = tmp_path / "events" / "k7abc" / "ev.jsonl"
    assert sink.resolved_path == str(p)
    assert len(read_events(p)) == 3


def test_append_by_default_and_truncate_on_request(tmp_path):
    p = tmp_path / "ev.jsonl"
    for _ in range(2):
        g, _ = demo_graph(p, kinds=("stream.gap",))
        Runner(g, stats_interval_s=0).run()
    assert len(read_events(p)) == 6
    g, _ = demo_graph(p, kinds=("stream.gap",), append=False)
    Runner(g, stats_interval_s=0).run()
    assert len(read_events(p)) == 3


def test_lines_reach_the_file_before_close(tmp_path):
    p = tmp_path / "live.jsonl"
    s = JsonlEventSink(path=str(p))
    s.open("g")
    s.handle(ev(0))
    s.handle(ev(1, payload={"x": np.float32(1.5), "bad": float("nan")}))
    recs = read_events(p)  # the sink is still open: the lines are already there (line-buffered)
    assert [d["seq"] for d in recs] == [0, 1]
    assert recs[1]["payload"] == {"x": 1.5, "bad": None}  # strict JSON: NaN becomes null
    s.close()
    s.close()  # idempotent
    with pytest.raises(RuntimeError):
        s.handle(ev(2))


def test_read_events_tolerates_a_torn_last_line(tmp_path):
    p = tmp_path / "torn.jsonl"
    p.write_text('{"seq": 0}\n{"seq": 1}\n{"seq": 2, "ki')
    assert [d["seq"] for d in read_events(p)] == [0, 1]


def test_unopenable_path_is_a_config_error(tmp_path):
    blocker = tmp_path / "f"
    blocker.write_text("")
    s = JsonlEventSink(path=str(blocker / "x.jsonl"))
    with pytest.raises(ConfigError, match="cannot open"):
        s.open("g")


def test_graph_file_round_trip(tmp_path):
    g, _ = demo_graph(tmp_path / "x.jsonl", kinds=("stream.*",))
    spec = g.to_spec()
    assert spec["events"] == [{"sink": {"type": "io.jsonl_events", "path": str(tmp_path / "x.jsonl")}, "kinds": ["stream.*"]}]
    g2 = Graph.from_spec(spec)
    Runner(g2, stats_interval_s=0).run()
    assert {d["kind"] for d in read_events(tmp_path / "x.jsonl")} == {"stream.gap", "stream.end"}
