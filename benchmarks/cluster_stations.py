"""Stations on one process against stations on a (simulated) Ray cluster: CPU per station, Ray's overhead, delivery.

The same station pipeline in both set-ups: :func:`streamkit.monitor.build_station_graph` (``io.kiwi``
-> 8 kHz resampler -> level meter, plus ``--detectors``) run by a
:class:`~streamkit.distributed.shard.ShardWorker` (a MultiRunner of station graphs):

* **single**: one ShardWorker with every station, in this process, polled for its events like a
  driver does (events drained and counted every 0.25 s);
* **ray**: ``ray.cluster_utils.Cluster`` with a CPU-less head and ``--nodes`` worker nodes on this
  machine, the stations in ``--nodes`` shards (one Ray actor each), run by the
  :class:`~streamkit.distributed.ray_cluster.ClusterSupervisor` of ``streamkit monitor --ray``.

The servers are KiwiSDR emulator processes (``benchmarks/kiwi_stations.py``'s ``Emulator``; at most
64 channels each) on loopback, paced at real time. Each point streams ``--seconds`` s per station.

Per point: CPU seconds per station per stream second (``cpu %/station``: the station processes:
this process for single, the shard actors for ray; for ray also the driver and Ray's own daemons,
raylets, GCS, measured from ``/proc`` over the run), Ray's overhead ratio (ray total / single),
delivery (items delivered / (delivered + lost), all stations), gaps by cause, and **unaccounted**
items: per station, the stream its time anchors span (first to last item) less delivered and lost,
beyond one ADPCM frame (2048 items) of anchor jitter, summed over stations.

    python benchmarks/cluster_stations.py [--sweep 100,500,1000] [--seconds 20] [--nodes 2] [--detectors none|energy]

Writes benchmarks/results/cluster_stations.json (or ``--out``).
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

from streamkit.distributed.ledger import DriverSinks, StationLedger
from streamkit.distributed.monitor import station_tasks
from streamkit.distributed.shard import ShardWorker
from streamkit.eval.bench import machine_info, write_result
from streamkit.eval.bench.emulators import emulator_channel_limit, emulators, proc_times

REPO = Path(__file__).resolve().parents[1]
FRAME = 2048
FREQS = (10000.0, 7074.0, 5000.0)  # the emulator's cheap default signals (see kiwi_stations.py)


def _specs(n: int, ports: list[int]) -> list[str]:
    return [f"127.0.0.1:{ports[i % len(ports)]}:{FREQS[i % len(FREQS)] + (i // len(FREQS)) * 0.001:.3f}:lsb" for i in range(n)]


def _options(detectors: str) -> dict[str, Any]:
    return {"detectors": () if detectors == "none" else (detectors,), "stats_interval_s": 5.0}


def _station_figures(led: list[StationLedger]) -> dict[str, Any]:
    delivered = sum(x.delivered for x in led)
    lost = sum(x.lost for x in led)
    gaps: dict[str, int] = {}
    unaccounted, unknown = 0, 0
    for x in led:
        s = x.summary()
        for k, v in s["gaps_by_cause"].items():
            gaps[k] = gaps.get(k, 0) + v
        st = x.status or {}
        if st.get("t_first_ns") and st.get("t_last_ns") and x.rate and not x.task.incarnation:
            spanned = (st["t_last_ns"] - st["t_first_ns"]) / 1e9 * x.rate
            unaccounted += max(0, int(abs(spanned - x.delivered - x.lost)) - FRAME)
        else:
            unknown += 1
    return {"delivered": delivered, "lost": lost, "delivery_pct": 100.0 * delivered / max(1, delivered + lost), "gaps_by_cause": gaps,
            "unaccounted_items": unaccounted, "stations_without_anchors": unknown,
            "stations_finished": sum(x.done and not x.fatal for x in led), "fatal": sum(bool(x.fatal) for x in led)}  # fmt: skip


def run_single(specs: list[str], seconds: float, detectors: str, timeout: float) -> dict[str, Any]:
    tasks = station_tasks(specs, duration=seconds)
    led = {t.name: StationLedger(t) for t in tasks}
    c0, t0 = sum(proc_times()), time.monotonic()
    w = ShardWorker(0, tasks, _options(detectors))
    events = 0
    while not w.finished.wait(0.25) and time.monotonic() - t0 < timeout:
        r = w.poll(5000)
        events += len(r["events"])
    fin = w.stop()
    while True:
        r = w.poll(100000)
        events += len(r["events"])
        if not r["events"]:
            break
    wall, cpu = time.monotonic() - t0, sum(proc_times()) - c0
    for n, st in fin["status"].items():
        led[n].update(st, r["dropped"].get(n, 0))
    n = len(specs)
    return {"cpu_s": cpu, "wall_s": wall, "cpu_pct_per_station": 100.0 * cpu / n / seconds, "events": events, **_station_figures(list(led.values()))}


def _ray_daemons() -> list[int]:
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                cmd = Path(f"/proc/{d}/cmdline").read_bytes().split(b"\0")[0]
            except OSError:
                continue
            if cmd.endswith((b"raylet", b"gcs_server")) or b"dashboard" in cmd or b"log_monitor" in cmd or b"runtime_env" in cmd:
                out.append(int(d))
    return out


def _cpu_of(pids: list[int]) -> float:
    total = 0.0
    for p in pids:
        try:
            total += sum(proc_times(p))
        except OSError:
            pass
    return total


def run_ray(specs: list[str], seconds: float, detectors: str, nodes: int, timeout: float) -> dict[str, Any]:
    import ray
    from ray.cluster_utils import Cluster

    from streamkit.distributed.ray_cluster import ClusterSupervisor, connect

    mb = 1024 * 1024
    c = Cluster(initialize_head=True, head_node_args={"num_cpus": 0, "object_store_memory": 100 * mb, "include_dashboard": False})
    try:
        for _ in range(nodes):
            c.add_node(num_cpus=1, object_store_memory=100 * mb)
        c.wait_for_nodes()
        connect(c.address)
        tasks = station_tasks(specs, duration=seconds)
        sinks = DriverSinks([t.name for t in tasks], None)
        sup = ClusterSupervisor(tasks, sinks, options=_options(detectors), shard_size=-(-len(specs) // nodes), cpus_per_shard=1.0,
                                dead_after_s=60.0)  # fmt: skip
        daemons = _ray_daemons()
        d0, c0, t0 = _cpu_of(daemons), sum(proc_times()), time.monotonic()
        sup.start()
        th = threading.Thread(target=sup.run, kwargs={"timeout": timeout}, daemon=True)
        th.start()
        th.join(timeout + 30)
        sup.shutdown()
        wall = time.monotonic() - t0
        driver_cpu, daemon_cpu = sum(proc_times()) - c0, _cpu_of(daemons) - d0
        rep = sup.report()
        shard_cpu = sum(s["cpu_s"] for s in rep["shards"])
        n = len(specs)
        total = shard_cpu + driver_cpu + daemon_cpu
        nodes_used = len({(s["where"] or {}).get("node_id") for s in rep["shards"]})
        return {"cpu_s": total, "shard_cpu_s": shard_cpu, "driver_cpu_s": driver_cpu, "ray_daemons_cpu_s": daemon_cpu, "wall_s": wall,
                "cpu_pct_per_station": 100.0 * total / n / seconds, "shard_cpu_pct_per_station": 100.0 * shard_cpu / n / seconds,
                "events": sum(x.events for x in sup.ledgers.values()), "events_dropped": sum(x.summary()["events_dropped"] for x in sup.ledgers.values()),
                "restarts": rep["restarts"], "nodes_used": nodes_used, **_station_figures(list(sup.ledgers.values()))}  # fmt: skip
    finally:
        if ray.is_initialized():
            ray.shutdown()
        c.shutdown()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sweep", default="100,500,1000")
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--nodes", type=int, default=2)
    ap.add_argument("--detectors", choices=["none", "energy"], default="none")
    ap.add_argument("--out", default=str(REPO / "benchmarks" / "results" / "cluster_stations.json"))
    a = ap.parse_args()
    limit = emulator_channel_limit()
    points = []
    print(f"{'N':>6} {'set-up':>7} {'cpu %/st':>9} {'shard %/st':>10} {'ratio':>6} {'delivery %':>10} {'gaps':>24} {'unacc.':>10} {'emu %':>6} {'wall s':>7}")
    for n in [int(x) for x in a.sweep.split(",") if x.strip()]:
        timeout = a.seconds * 4 + 60
        row: dict[str, Any] = {"stations": n}
        for mode in ("single", "ray"):
            with emulators(n, limit, None) as emus:
                specs = _specs(n, [e.wait_ready() for e in emus])
                e0 = sum(e.cpu_s() for e in emus)
                r = run_single(specs, a.seconds, a.detectors, timeout) if mode == "single" else run_ray(specs, a.seconds, a.detectors, a.nodes, timeout)
                r["emulators"] = len(emus)
                r["emulator_cpu_s"] = sum(e.cpu_s() for e in emus) - e0
                # the emulators share this machine's cores: when they cannot keep real time, the stream the anchors
                # span holds items the servers never sent, and "unaccounted" measures the servers, not the client
                r["machine_cpu_pct_used_by_emulators"] = 100.0 * r["emulator_cpu_s"] / r["wall_s"] / (os.cpu_count() or 1)
            row[mode] = r
            ratio = r["cpu_pct_per_station"] / row["single"]["cpu_pct_per_station"] if mode == "ray" else 1.0
            print(f"{n:>6} {mode:>7} {r['cpu_pct_per_station']:>9.3f} {r.get('shard_cpu_pct_per_station', r['cpu_pct_per_station']):>10.3f} "
                  f"{ratio:>6.2f} {r['delivery_pct']:>10.3f} {str(r['gaps_by_cause']):>24} {r['unaccounted_items']:>10} "
                  f"{r['machine_cpu_pct_used_by_emulators']:>6.1f} {r['wall_s']:>7.1f}", flush=True)  # fmt: skip
        row["ray_overhead_ratio"] = row["ray"]["cpu_pct_per_station"] / row["single"]["cpu_pct_per_station"]
        row["ray_shard_ratio"] = row["ray"]["shard_cpu_pct_per_station"] / row["single"]["cpu_pct_per_station"]
        points.append(row)
        _write(a, points)  # after every point: an interrupted sweep keeps what it measured
    return 0


def _write(a: argparse.Namespace, points: list[dict[str, Any]]) -> None:
    res = {"benchmark": "cluster_stations", "machine": machine_info(), "seconds": a.seconds, "nodes": a.nodes, "detectors": a.detectors,
           "pipeline": "io.kiwi -> dsp.resample(8 kHz) -> dsp.level" + ("" if a.detectors == "none" else f" -> {a.detectors} detector"),
           "goal": "ray cpu/station <= 1.2 x single; 1000 stations on 2 nodes: >= 99.5 % delivery, 0 unaccounted", "points": points}  # fmt: skip
    write_result(a.out, res)


if __name__ == "__main__":
    sys.exit(main())
