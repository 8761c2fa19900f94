"""``streamkit monitor --ray`` on a simulated two-node Ray cluster on this machine (``ray.cluster_utils.Cluster``).

The cluster is module-scoped: a head node without CPUs (it runs the driver and Ray's services) and
two worker nodes of 2 logical CPUs each, so that two shards of 1 CPU spread one per node and a
shard whose node is removed has a place on the other. Every test is bounded (``timeout``); the
file keeps to about two minutes. Stations are the loopback KiwiSDR emulator's.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from pathlib import Path

import pytest

from streamkit.distributed.webfeed import DriverWeb
from streamkit.io.jsonl_events import read_events
from streamkit.web.attach import LiveView

ray = pytest.importorskip("ray")
cluster_utils = pytest.importorskip("ray.cluster_utils")

pytestmark = pytest.mark.cluster

MB = 1024 * 1024
NODE = {"num_cpus": 2, "object_store_memory": 80 * MB}
# a removed node is noticed within a few seconds, not Ray's default ~30 s
SYSTEM_CONFIG = {"health_check_initial_delay_ms": 0, "health_check_period_ms": 500, "health_check_failure_threshold": 4}


@pytest.fixture(scope="module")
def cluster():
    c = cluster_utils.Cluster(initialize_head=True, head_node_args={"num_cpus": 0, "object_store_memory": 80 * MB, "include_dashboard": False,
                                                                    "_system_config": SYSTEM_CONFIG})  # fmt: skip
    workers = [c.add_node(**NODE) for _ in range(2)]
    c.wait_for_nodes()
    from streamkit.distributed.ray_cluster import connect

    connect(c.address)
    yield c, workers
    if ray.is_initialized():
        ray.shutdown()
    c.shutdown()


@pytest.fixture
def refusing_emulator():
    """An emulator that refuses every connection with a bad-password answer (``badp``)."""
    from streamkit.io.kiwi_emulator import EmulatorThread

    emu = EmulatorThread()
    port = emu.start()
    emu.call(lambda: emu.emulator.set_faults(spec="badp=1"))
    yield port
    emu.stop()


def _supervisor(specs, tmp_path, duration, **kw):
    from streamkit.distributed.ledger import DriverSinks
    from streamkit.distributed.monitor import station_tasks
    from streamkit.distributed.ray_cluster import ClusterSupervisor

    tasks = station_tasks(specs, duration=duration, stall_s=5.0)
    sinks = DriverSinks([t.name for t in tasks], tmp_path / "events")
    sup = ClusterSupervisor(tasks, sinks, shard_size=2, poll_s=0.2, dead_after_s=30.0, **kw)
    return sup, sinks


def _stream_check(path: Path) -> list[dict]:
    """A station's driver-side JSONL: sequence numbers strictly increasing, source spans never going back."""
    evs = read_events(path)
    seqs = [e["seq"] for e in evs]
    assert seqs == sorted(set(seqs)), "sequence numbers repeat or go back"
    src = [e["span"][0] for e in evs if e["port"] == "kiwi.out" and not e["kind"].startswith("graph.")]  # graph.* are at span 0
    assert src == sorted(src), "source spans go back (an event duplicated or a restart not rebased)"
    return evs


@pytest.mark.timeout(90)
def test_stations_spread_over_the_nodes_and_every_event_reaches_the_driver(cluster, emulator, tmp_path):
    c, workers = cluster
    specs = [f"127.0.0.1:{emulator}:{7000 + k}:lsb" for k in range(4)]
    sup, sinks = _supervisor(specs, tmp_path, duration=3.0)
    sinks.open()
    sup.start()
    try:
        sup.run(timeout=60)
    finally:
        sup.shutdown()
        sinks.close()
    rep = sup.report()
    nodes = {sh["where"]["node_id"] for sh in rep["shards"]}
    assert nodes == {w.node_id for w in workers}  # two shards, one on each worker node
    for name, st in rep["stations"].items():
        assert st["state"] == "stopped" and st["fatal"] is None
        assert st["delivered"] == round(3.0 * st["rate"]) and st["lost"] == 0 and st["restarts"] == 0
        evs = _stream_check(tmp_path / "events" / f"{name}.jsonl")
        assert len(evs) == st["events"] and st["events_dropped"] == 0
        assert [e["payload"]["items"] for e in evs if e["kind"] == "stream.end"] == [st["delivered"]]


@pytest.mark.timeout(120)
def test_a_killed_node_moves_its_shard_and_every_lost_sample_is_accounted(cluster, emulator, refusing_emulator, tmp_path):
    c, workers = cluster
    # shard 0: a station its server refuses + a good one; shard 1: two good ones
    specs = [f"127.0.0.1:{refusing_emulator}:7100:lsb"] + [f"127.0.0.1:{emulator}:{7200 + k}:lsb" for k in range(3)]
    duration = 8.0
    view = LiveView("127.0.0.1:0")  # the live view's rows too (no server, no viewer: the driver's hub alone)
    sup, sinks = _supervisor(specs, tmp_path, duration=duration, web=DriverWeb(view))
    sinks.open()
    sup.start()
    th = threading.Thread(target=sup.run, kwargs={"timeout": 90}, daemon=True)
    th.start()
    good = list(sup.ledgers)[1:]
    refused = list(sup.ledgers)[0]
    t_end = time.monotonic() + 60
    while time.monotonic() < t_end and not all(sup.ledgers[n].delivered > 2.5 * 12000 for n in good):
        time.sleep(0.1)
    victim_id = sup._where(sup.shards[0])["node_id"]
    victim = next(w for w in workers if w.node_id == victim_id)
    c.remove_node(victim)
    workers.remove(victim)
    th.join(100)
    try:
        assert not th.is_alive()
    finally:
        sup.shutdown()
        sinks.close()
        workers.append(c.add_node(**NODE))  # the next tests find two worker nodes again
    rep = sup.report()
    sh0 = rep["shards"][0]
    assert sh0["restarts"] == 1 and sh0["history"][0]["where"]["node_id"] == victim_id
    assert sh0["where"]["node_id"] != victim_id  # restarted on the node that is left
    # the refused station: ended once with its server's reason, not restarted with its shard
    r = rep["stations"][refused]
    assert r["state"] == "fatal" and "badp" in r["fatal"] and r["restarts"] == 0
    states = [e["payload"]["state"] for e in read_events(tmp_path / "events" / f"{refused}.jsonl") if e["kind"] == "source.state"]
    assert states.count("fatal") == 1 and states.count("connecting") == 1, states
    moved = sup.shards[0].names[1]
    for name in good:
        st = rep["stations"][name]
        assert st["state"] == "stopped" and st["delivered"] == round(duration * st["rate"])
        evs = _stream_check(tmp_path / "events" / f"{name}.jsonl")
        gaps = [e for e in evs if e["kind"] == "stream.gap"]
        if name != moved:
            assert st["restarts"] == 0 and st["lost"] == 0 and not gaps
            continue
        # the moved station: one reconnect gap, reported like a single process's, with the estimated loss
        assert st["restarts"] == 1 and st["gaps_by_cause"] == {"reconnect": 1}
        assert [(g["payload"]["cause"], g["payload"]["lost"]) for g in gaps] == [("reconnect", st["lost"])] and st["lost"] > 0
        # delivered + lost is the station's whole stream: its first sample to its last, in wall time
        t0 = min(e["t_start_ns"] for e in evs if e["port"] == "kiwi.out" and e["span"][0] == 0 and e["t_start_ns"])
        t1 = next(e["t_end_ns"] for e in evs if e["kind"] == "stream.end")
        expected = (t1 - t0) / 1e9 * st["rate"]
        assert abs(st["delivered"] + st["lost"] - expected) <= 0.5 * st["rate"], (st["delivered"], st["lost"], expected)
        # nothing of the dead run is counted twice: the resumed run starts after the last confirmed event
        assert gaps[0]["span"][0] <= st["delivered"]
    # the live view: every good station's rows, in time order, none twice; the moved one's outage is the
    # gap on the first row of its resumed run, with the loss its events report
    for name in good:
        rows = list(view.hub.feed(name).rows.items)
        times = [r[0] for r in rows]
        assert times == sorted(set(times)) and abs(len(rows) - 10 * duration) <= 5, (name, len(rows))
        want = [("reconnect", rep["stations"][name]["lost"] / rep["stations"][name]["rate"])] if name == moved else []
        got = [(r[3], r[1]) for r in rows if r[2]]
        assert [c for c, _ in got] == [c for c, _ in want] and all(abs(a - b) < 0.01 for (_, a), (_, b) in zip(got, want)), (got, want)


@pytest.mark.timeout(60)
def test_cli_monitor_ray(cluster, emulator, tmp_path, capsys):
    from streamkit.cli import main

    c, _ = cluster
    rc = main(["monitor", "--ray", c.address, "--station", f"127.0.0.1:{emulator}:7300:usb", "--station", f"127.0.0.1:{emulator}:7301:usb",
               "--duration", "2", "--events", str(tmp_path / "ev"), "--quiet", "--ray-shard-size", "1", "--web", "127.0.0.1:0"])  # fmt: skip
    out = capsys.readouterr().out
    assert rc == 0, out
    # --web with --ray: served on the driver, fed by both shards
    assert "live view: http://127.0.0.1:" in out and "waterfall row(s) from 2 of 2 station(s)" in out and "no row dropped" in out, out
    assert sorted(p.name for p in (tmp_path / "ev").iterdir()) == [f"127.0.0.1-{emulator}-7300usb.jsonl", f"127.0.0.1-{emulator}-7301usb.jsonl"]
    assert out.count(" 0 lost in 0 gap(s)") == 2, out


@pytest.mark.timeout(90)
def test_web_live_view_shows_every_station_of_every_node(cluster, emulator, tmp_path):
    """``monitor --ray --web``: a viewer of the driver's page gets rows of every station on both nodes,
    audio of the one it listens to; a stalled viewer beside it holds nothing up."""
    import socket

    from websockets.sync.client import connect as ws_connect

    from streamkit.distributed.monitor import run_cluster_monitor
    from streamkit.web.attach import LiveView
    from tests.web.ws_reader import WsTally

    c, workers = cluster
    specs = [f"127.0.0.1:{emulator}:{7400 + k}:lsb" for k in range(4)]
    view = LiveView("127.0.0.1:0")
    got = WsTally()
    conns = []

    def on_live(v):
        url = v.start(queue_frames=8, sndbuf_bytes=4096, write_buffer_bytes=4096)
        ws = url.replace("http://", "ws://").rstrip("/") + "/ws"
        raw = socket.socket()  # a viewer that never reads, listening to another station
        raw.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        raw.connect(("127.0.0.1", v.server.port))
        stalled = ws_connect(ws, sock=raw, max_queue=1, open_timeout=10).__enter__()
        stalled.send(json.dumps({"listen": 1}))
        good = ws_connect(ws, open_timeout=10, max_size=None).__enter__()
        good.send(json.dumps({"listen": 0}))
        conns.extend([stalled, good])
        th = threading.Thread(target=got.read, args=(good, 30.0), daemon=True)
        th.start()
        conns.append(th)

    duration = 4.0
    try:
        rep = run_cluster_monitor(specs, address=c.address, duration=duration, events_dir=str(tmp_path / "ev"), console=False,
                                  shard_size=2, live=view, on_live=on_live, timeout=60,
                                  supervisor_options={"poll_s": 0.2, "dead_after_s": 30.0})  # fmt: skip
        time.sleep(0.5)  # the last status
    finally:
        summary = view.close()
        conns[2].join(20)
        for ws in conns[:2]:
            ws.close()
    assert {sh["where"]["node_id"] for sh in rep["shards"]} == {w.node_id for w in workers}  # one shard on each node
    for k, (name, st) in enumerate(rep["stations"].items()):
        # the stalled viewer held nothing up: every station delivered its whole stream, no event or row dropped
        assert st["delivered"] == round(duration * st["rate"]) and st["events_dropped"] == 0 and st["web_rows_dropped"] == 0
        assert abs(got.rows[k] - 10 * duration) <= 2, (k, got.rows)  # 10 rows/s of every station reached the page
        assert view.hub.feed(name).rows.last == rep["web"]["rows"][name]
    assert set(got.audio) == {0} and got.audio[0] > 0.5 * duration * 8000  # audio of the station listened to, only
    assert rep["web"]["rows_dropped"] == {} and got.gap_rows == 0
    assert {"hello", "status", "end"} <= got.types and len(got.status["stations"]) == 4
    assert summary["viewers"] == 2 and summary["dropped_frames"] > 0  # the stalled viewer lost frames, counted


def _descendants(pid: int) -> set[tuple[int, str]]:
    """(pid, start time) of every process below ``pid`` (from /proc)."""
    children: dict[int, list[int]] = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                stat = Path(f"/proc/{d}/stat").read_text()
            except OSError:
                continue
            fields = stat.rsplit(")", 1)[1].split()
            children.setdefault(int(fields[1]), []).append(int(d))
    out, todo = set(), [pid]
    while todo:
        for ch in children.get(todo.pop(), []):
            out.add((ch, _start_time(ch)))
            todo.append(ch)
    return out


def _start_time(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    except OSError:
        return ""


@pytest.mark.timeout(60)
def test_shutdown_leaves_no_process(cluster):
    c, _ = cluster
    # Ray's own processes only: this pytest worker may have other children (a test file before this one)
    procs = {(p, st) for p, st in _descendants(os.getpid()) if "ray" in _cmdline(p)}
    assert any("raylet" in _cmdline(p) for p, _ in procs)
    ray.shutdown()
    c.shutdown()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        left = [p for p, st in procs if _start_time(p) == st and "zombie" not in _state(p)]
        if not left:
            break
        time.sleep(0.5)
    assert not left, [Path(f"/proc/{p}/cmdline").read_bytes()[:80] for p in left]


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
    except OSError:
        return ""


def _state(pid: int) -> str:
    try:
        return "zombie" if Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z" else "live"
    except OSError:
        return "zombie"


def test_without_ray_the_cli_names_the_extra(monkeypatch, capsys, tmp_path):
    from streamkit.cli import main

    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` raises ImportError
    rc = main(["monitor", "--ray", "--station", "127.0.0.1:1:7100:lsb", "--duration", "1", "--events", str(tmp_path), "--quiet"])
    err = capsys.readouterr().err
    assert rc != 0 and "pip install 'streamkit[cluster]'" in err, err
    assert json.dumps(err)  # one readable line, no traceback
    assert "Traceback" not in err
