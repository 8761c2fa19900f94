"""Graph and station names used in file names stay inside the directory they are meant for."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from streamkit import cli
from streamkit.core.graph import Graph
from streamkit.io.filenames import safe_filename
from streamkit.io.jsonl_events import JsonlEventSink, read_events
from streamkit.monitor import build_station_graph

EVIL = ["../../x", "..", ".", "", "a/../../b", "/etc/passwd", "..\\..\\x", "x\x00y", "a\nb", "sta tion:1", "ünï"]


@pytest.mark.parametrize("name", EVIL)
def test_safe_filename_is_one_component_inside_its_directory(tmp_path, name):
    s = safe_filename(name)
    assert s and "/" not in s and "\\" not in s and not s.startswith(".") and s.isprintable() and s.isascii()
    p = (tmp_path / f"{s}.jsonl").resolve()
    assert p.parent == tmp_path.resolve()


@pytest.mark.parametrize("name", ["demo", "127.0.0.1-8073-7100lsb", "kiwi.example.org-8073-14200usb", "demo-signal"])
def test_safe_names_are_unchanged(name):
    assert safe_filename(name) == name


def test_safe_filename_bounds_the_length():
    assert len(safe_filename("x" * 5000)) == 200 and len(safe_filename("." * 5000)) == 200


def files_under(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()}


def test_jsonl_sink_graph_placeholder_cannot_leave_the_directory(tmp_path):
    ev = tmp_path / "a" / "b" / "events"
    sink = JsonlEventSink(path=str(ev / "{graph}.jsonl"))
    sink.open("../../x")
    sink.close()
    assert Path(sink.resolved_path).resolve().parent == ev.resolve()
    assert files_under(tmp_path) == {"a/b/events/_.._.._x.jsonl"}


def test_run_with_a_graph_named_up_the_tree_writes_its_events_in_the_events_dir(tmp_path, monkeypatch):
    spec = tmp_path / "g.yaml"
    spec.write_text('name: "../../x"\nblocks:\n  src: {type: io.demo_signal, duration_s: 0.5}\n  lvl: {type: dsp.level}\nchain: [src, lvl]\n')
    work = tmp_path / "w" / "v"
    work.mkdir(parents=True)
    monkeypatch.chdir(work)
    assert cli.main(["run", str(spec), "--events", "ev", "--quiet"]) == 0
    assert files_under(tmp_path / "w") == {"v/ev/_.._.._x.jsonl"}
    assert read_events(work / "ev" / "_.._.._x.jsonl")


def test_monitor_station_names_are_sanitised_in_event_and_record_paths(tmp_path):
    g = build_station_graph({"host": "127.0.0.1", "port": 8073, "freq_khz": 7100, "mode": "lsb"}, name="../../x",
                            events_dir=tmp_path / "ev", record_dir=tmp_path / "rec")  # fmt: skip
    wav = g.blocks["wav"]
    assert Path(wav.path).parent == tmp_path / "rec" and Path(wav.path).name == "_.._.._x.wav"
    (sub,) = [s.sink for s in g.subscriptions if isinstance(s.sink, JsonlEventSink)]
    assert Path(sub.path).parent == tmp_path / "ev" and Path(sub.path).name == "_.._.._x.jsonl"
    assert g.name == "../../x"  # the station keeps its name on the console and in the events


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX paths")
def test_the_demo_graph_name_still_gives_the_same_file(tmp_path):
    g = Graph("demo-signal")
    sink = JsonlEventSink(path=os.path.join(tmp_path, "{graph}.jsonl"))
    sink.open(g.name)
    sink.close()
    assert files_under(tmp_path) == {"demo-signal.jsonl"}
