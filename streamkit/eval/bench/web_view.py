"""The live view's cost: server CPU per viewed station and bytes per second per station per viewer.

A station is the monitor's pipeline on the built-in demo signal: ``io.demo_signal`` (12001.188 Hz,
RealTime, a 512-item dropout every ``--dropouts`` s) -> ``dsp.resample`` 8 kHz -> ``dsp.level`` ->
``web.tap`` (attached by :class:`~streamkit.web.attach.LiveView` with ``tap="level"``); all stations
run on one :class:`~streamkit.core.runtime.MultiRunner` in this process, as ``streamkit monitor``
runs them. The viewers are WebSocket clients in a SEPARATE process (``--viewers-child``, one
thread each) that read and decode every frame and count its bytes by type: waterfall rows, JSON
(events, status, hello/end) and audio; viewer 0 also listens to station 0 (audio is sent only to a
viewer that listens).

For each point of the grid (stations x viewers, and each station count once WITHOUT the live view,
the engine alone) the graphs run ``--warmup`` s, then a window of ``--seconds`` s is measured:

* server CPU = the web server thread's CPU time (``pthread_getcpuclockid``) + the ``web.tap``
  blocks' busy time (the runtime's per-block ``busy_ns``), divided by the station-seconds of stream
  the window advanced: % of one core per viewed station (every viewer watches every station);
* bytes per second per station per viewer (WebSocket payload + frame headers, no TCP/IP): rows,
  JSON, their total; the listener's audio separately;
* this process's CPU (``time.process_time``: the engine, and with the view the tap and the server;
  the viewers are in their own process) per station-second, with and without the view: the view's
  overhead as a ratio against the engine;
* delivery: rows received per viewer / rows the taps made in the window, frames dropped and rows
  missed by the server's per-viewer bookkeeping (a viewer that cannot keep up loses frames).

Peer, offline from the rows the 10-station point produced: a hand-rolled encoding of the same
content (each row a JSON text message with its dB values as a list of floats, full precision and
rounded to 0.1 dB) against the binary uint8 rows frame (quantisation + :func:`frames.encode_rows`):
bytes/s per station per viewer and encode CPU.

    python benchmarks/web_view.py [--stations 1,10,100] [--viewers 1,5] [--seconds 20] [--warmup 3]

Writes benchmarks/results/web_view.json (or ``--out``).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from collections import Counter
from typing import Any

import numpy as np

from streamkit.eval.bench import RESULTS, machine_info, write_result

CPU_GOAL_PCT = 1.0  # % of one core per viewed station
BYTES_GOAL = 20_000  # bytes/s per station per viewer (waterfall + events; audio only while listening)
LISTEN_STATION = 0


# ------------------------------------------------------------------------------------- pure helpers
def ws_header_bytes(payload: int) -> int:
    """Bytes of an unmasked server-to-client WebSocket frame header for a payload of ``payload`` bytes."""
    return 2 if payload < 126 else 4 if payload < 65536 else 10


def naive_row_json(station: int, t_s: float, lost_s: float, db: np.ndarray, decimals: int | None = None) -> str:
    """A hand-rolled viewer's waterfall row: one JSON text message, the dB values as a list of floats."""
    vals = (np.round(db.astype(np.float64), decimals) if decimals is not None else db).tolist()  # float64: "-63.5", not float32's digits
    return json.dumps({"type": "row", "station": station, "t": t_s, "lost_s": lost_s, "db": vals})


def quantise(db: np.ndarray, floor_db: float = -130.0, ceil_db: float = -10.0) -> np.ndarray:
    """dB values to the live view's bytes (what :class:`~streamkit.web.spectrogram.WaterfallRows` sends)."""
    return np.clip((db - floor_db) * (255.0 / (ceil_db - floor_db)), 0.0, 255.0).astype(np.uint8)


def bin_centre_db(levels: bytes) -> np.ndarray:
    """The float32 dB values at the centres of a quantised row's steps (:func:`quantise` gives the row back)."""
    from streamkit.web.spectrogram import dequantise

    return dequantise(np.frombuffer(levels, np.uint8) + 0.5).astype(np.float32)


def point_figures(n: int, v: int, window: dict[str, Any], viewers: list[dict[str, Any]] | None) -> dict[str, Any]:
    """Per-point figures from the parent's window deltas and each viewer's counters over the same window.

    ``window``: ``wall_s``, ``station_s`` (stream seconds advanced, summed over stations), ``proc_s``,
    ``server_s``, ``tap_s``, ``rows_made`` (over all stations); ``viewers``: per viewer, byte counts by type
    (``rows``, ``json``, ``audio``; ``*_frames``) and ``rows_n``; None without the live view.
    """
    st_s = max(window["station_s"], 1e-9)
    out: dict[str, Any] = {"stations": n, "viewers": v, "wall_s": window["wall_s"], "realtime": window["station_s"] / (n * window["wall_s"]),
                           "process_cpu_pct_per_station": 100.0 * window["proc_s"] / st_s}  # fmt: skip
    if viewers is None:
        return out
    web_s = window["server_s"] + window["tap_s"]
    t = window["wall_s"]
    rows_b = sum(c["rows"] + c["rows_frames_hdr"] for c in viewers)
    json_b = sum(c["json"] + c["json_frames_hdr"] for c in viewers)
    per = n * v * t
    listener = viewers[0]
    out.update(
        server_cpu_pct_per_station=100.0 * web_s / st_s,
        server_thread_cpu_pct_per_station=100.0 * window["server_s"] / st_s,
        tap_cpu_pct_per_station=100.0 * window["tap_s"] / st_s,
        rows_Bps=rows_b / per,
        json_Bps=json_b / per,
        total_Bps=(rows_b + json_b) / per,
        json_by_type_Bps={
            k: sum(c["json_by_type"].get(k, 0) for c in viewers) / per for k in sorted({k for c in viewers for k in c["json_by_type"]})
        },
        listen_audio_Bps=(listener["audio"] + listener["audio_frames_hdr"]) / t,
        rows_delivered=min(c["rows_n"] for c in viewers) / window["rows_made"] if window["rows_made"] else None,
    )
    out["cpu_goal_met"] = out["server_cpu_pct_per_station"] <= CPU_GOAL_PCT
    out["bytes_goal_met"] = out["total_Bps"] <= BYTES_GOAL
    return out


def peer_figures(rows: list[tuple[int, float, float, np.ndarray]], rows_per_s: float, repeat: int = 3) -> dict[str, Any]:
    """Encode the same rows (station, t_s, lost_s, float dB) as binary frames and as naive JSON; bytes and CPU per row.

    Each row is one message, as the server sends it at 10 rows/s and a 0.1 s tick. Times are the best of ``repeat``.
    """
    from streamkit.web import frames

    def binary() -> int:
        return sum(len(frames.encode_rows(s, [(t, lost, lost > 0, None, quantise(db).tobytes())], db.size)) for s, t, lost, db in rows)

    def naive(decimals: int | None) -> Any:
        return lambda: sum(len(naive_row_json(s, t, lost, db, decimals)) for s, t, lost, db in rows)

    out: dict[str, Any] = {"rows": len(rows), "bins": int(rows[0][3].size) if rows else 0}
    for name, fn in (("binary_uint8", binary), ("json_float", naive(None)), ("json_0.1dB", naive(1))):
        best, size = float("inf"), 0
        for _ in range(repeat):
            t0 = time.process_time()
            size = fn()
            best = min(best, time.process_time() - t0)
        per_row = size / len(rows)
        per_row_header = per_row + ws_header_bytes(int(per_row))
        out[name] = {"bytes_per_row": per_row, "Bps_per_station_per_viewer": per_row_header * rows_per_s,
                     "encode_us_per_row": best / len(rows) * 1e6, "encode_cpu_pct_per_station_per_viewer": 100.0 * best / len(rows) * rows_per_s}  # fmt: skip
    b = out["binary_uint8"]["Bps_per_station_per_viewer"]
    for name in ("json_float", "json_0.1dB"):
        out[name]["bytes_vs_binary"] = out[name]["Bps_per_station_per_viewer"] / b
        out[name]["cpu_vs_binary"] = out[name]["encode_us_per_row"] / max(out["binary_uint8"]["encode_us_per_row"], 1e-9)
    return out


# ---------------------------------------------------------------------------------- viewer process
def viewers_child(url: str, n: int, listen: int) -> int:
    """``--viewers-child``: ``n`` viewers of ``url``; "ready" on stdout once all joined; a line on stdin
    snapshots the counters; at EOF print every snapshot as JSON."""
    from websockets.exceptions import ConnectionClosed
    from websockets.sync.client import connect

    from streamkit.web import frames

    counts = [Counter() for _ in range(n)]
    by_type: list[Counter[str]] = [Counter() for _ in range(n)]
    joined = threading.Semaphore(0)
    errors: list[str] = []

    def run(i: int) -> None:
        c, b = counts[i], by_type[i]
        try:
            with connect(url, open_timeout=60, max_size=None, max_queue=64) as ws:
                if i == 0 and listen >= 0:
                    ws.send(json.dumps({"listen": listen}))
                first = True
                while True:
                    try:
                        m = ws.recv(timeout=120)
                    except (ConnectionClosed, TimeoutError):
                        break
                    if isinstance(m, bytes):
                        parts = frames.split_batch(m)  # one tick's frames in one message: its overhead goes to the rows
                        c["rows"] += len(m) - sum(len(p) for p in parts)
                        c["rows_frames_hdr"] += ws_header_bytes(len(m))
                        for p in parts:
                            d = frames.decode(p)
                            kind = "rows" if isinstance(d, tuple) else "audio"
                            c[kind] += len(p)
                            if kind == "rows":
                                c["rows_n"] += len(d[1])
                            else:
                                c["audio_samples"] += d.samples.size
                    else:
                        j = json.loads(m)
                        size = len(m.encode())
                        c["json"] += size
                        c["json_frames_hdr"] += ws_header_bytes(size)
                        b[str(j.get("type"))] += size
                        if first:
                            first = False
                            joined.release()
        except Exception as exc:  # reported in the result, never silently
            errors.append(f"viewer {i}: {type(exc).__name__}: {exc}"[:300])
            joined.release()

    threads = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(n)]
    for t in threads:
        t.start()
    for _ in range(n):
        joined.acquire(timeout=60)
    print("ready", flush=True)
    snaps: list[list[dict[str, Any]]] = []
    cpu: list[float] = []
    for _line in sys.stdin:
        snaps.append([{**dict(c), "json_by_type": dict(b)} for c, b in zip(counts, by_type, strict=True)])
        cpu.append(time.process_time())
    for t in threads:
        t.join(30)
    print(json.dumps({"snapshots": snaps, "cpu_s": cpu, "errors": errors}), flush=True)
    return 0


def window_delta(a: list[dict[str, Any]], b: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per viewer: counters of snapshot ``b`` minus those of ``a`` (``json_by_type`` too)."""
    out = []
    for x, y in zip(a, b, strict=True):
        d: dict[str, Any] = {k: y.get(k, 0) - x.get(k, 0) for k in ("rows", "rows_frames_hdr", "rows_n", "json", "json_frames_hdr", "audio",
                                                                    "audio_frames_hdr", "audio_samples")}  # fmt: skip
        d["json_by_type"] = {k: y["json_by_type"].get(k, 0) - x["json_by_type"].get(k, 0) for k in y["json_by_type"]}
        out.append(d)
    return out


# ------------------------------------------------------------------------------------------ engine
def _thread_cpu(t: threading.Thread | None) -> float:
    if t is None or t.ident is None or not t.is_alive():
        return 0.0
    return time.clock_gettime(time.pthread_getcpuclockid(t.ident))


def run_point(n: int, v: int, *, web: bool, warmup: float, seconds: float, dropouts: float, peer_rows: list | None = None,
              server_options: dict[str, Any] | None = None) -> dict[str, Any]:  # fmt: skip
    """One point: ``n`` stations, with the live view and ``v`` viewers (or without the view); see the module docstring."""
    from streamkit.core.clock import RealTime
    from streamkit.core.graph import Graph
    from streamkit.core.registry import lookup
    from streamkit.core.runtime import MultiRunner, Runner
    from streamkit.web.attach import LiveView

    graphs = []
    for i in range(n):
        g = Graph(f"st{i:03d}")
        g.chain(g.add(lookup("io.demo_signal")(duration_s=None, dropouts=dropouts, seed=i), name="src"),
                g.add(lookup("dsp.resample")(to_hz=8000), name="rs"), g.add(lookup("dsp.level")(interval_s=0.5), name="level"))  # fmt: skip
        graphs.append(g)
    view = LiveView("127.0.0.1:0") if web else None
    for i, g in enumerate(graphs):
        if view is not None:
            view.attach(g, tap="level", freq_khz=7000.0 + i, mode="lsb")
    runners = [Runner(g, RealTime(), duration=None, stats_interval_s=1.0) for g in graphs]
    url = view.start(**(server_options or {})) if view is not None else None
    mr = MultiRunner(runners)
    result: dict[str, Any] = {}
    sched = threading.Thread(target=lambda: result.update(stats=mr.run()), name="bench-scheduler", daemon=True)
    load0 = os.getloadavg()
    sched.start()
    deadline = time.monotonic() + 120
    while any(r.state == "new" for r in runners) and sched.is_alive() and time.monotonic() < deadline:
        time.sleep(0.05)
    child = None
    if url is not None:
        ws = url.replace("http://", "ws://").rstrip("/") + "/ws"
        child = subprocess.Popen([sys.executable, "-m", "streamkit.eval.bench.web_view", "--viewers-child", ws, "--n", str(v), "--listen", str(LISTEN_STATION)],
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)  # fmt: skip
        assert child.stdout is not None and child.stdin is not None
        child.stdout.readline()  # "ready"
    web_thread = next((t for t in threading.enumerate() if t.name == "streamkit-web"), None)

    def snap() -> dict[str, Any]:
        return {"t": time.monotonic(), "proc": time.process_time(), "server": _thread_cpu(web_thread),
                "tap_ns": sum(r.metrics("web").busy_ns for r in runners) if web else 0,
                "stream_s": sum(r.stats(brief=True)["stream_s"] for r in runners),
                "rows": sum(f.rows.last for f in view.hub.feeds) if view is not None else 0}  # fmt: skip

    time.sleep(warmup)
    a = snap()
    if child is not None:
        child.stdin.write("mark\n")  # type: ignore[union-attr]
        child.stdin.flush()  # type: ignore[union-attr]
    time.sleep(seconds)
    b = snap()
    if child is not None:
        child.stdin.write("mark\n")  # type: ignore[union-attr]
        child.stdin.flush()  # type: ignore[union-attr]
    load1 = os.getloadavg()
    mr.request_stop()
    sched.join(60)
    summary = view.close("benchmark point finished") if view is not None else {}
    viewers = None
    child_errors: list[str] = []
    viewers_cpu_s = None
    if child is not None:
        out, _ = child.communicate(timeout=60)
        rep = json.loads(out.strip().splitlines()[-1])
        s0, s1 = rep["snapshots"][:2]
        viewers = window_delta(s0, s1)
        child_errors = rep["errors"]
        viewers_cpu_s = rep["cpu_s"][1] - rep["cpu_s"][0]
    window = {"wall_s": b["t"] - a["t"], "station_s": b["stream_s"] - a["stream_s"], "proc_s": b["proc"] - a["proc"],
              "server_s": b["server"] - a["server"], "tap_s": (b["tap_ns"] - a["tap_ns"]) / 1e9, "rows_made": b["rows"] - a["rows"]}  # fmt: skip
    fig = point_figures(n, v if web else 0, window, viewers)
    fig["window"] = window
    fig["loadavg_before"] = [round(x, 2) for x in load0]
    fig["loadavg_after"] = [round(x, 2) for x in load1]
    st = result.get("stats", {})
    fig["engine"] = {"gaps_by_cause": dict(sum((Counter(s.get("gaps_by_cause", {})) for s in st.values()), Counter())),
                     "events_dropped": sum(s.get("events_dropped", 0) for s in st.values()), "failures": dict(mr.failures)}  # fmt: skip
    if view is not None:
        fig["server_summary"] = summary
        fig["viewer_errors"] = child_errors
        fig["viewers_process_cpu_pct"] = 100.0 * viewers_cpu_s / window["wall_s"] if viewers_cpu_s is not None else None
        fig["listen_audio_s"] = viewers[0]["audio_samples"] / 8000 / window["wall_s"] if viewers else None
        if peer_rows is not None:
            for f in view.hub.feeds:
                peer_rows.extend((f.index, t, lost, bin_centre_db(lv)) for t, lost, _g, _c, lv in f.rows.items)
    return fig


# ------------------------------------------------------------------------------------------- report
def _mark(ok: bool | None) -> str:
    return "-" if ok is None else "pass" if ok else "MISS"


def print_tables(points: list[dict[str, Any]], peer: dict[str, Any]) -> None:
    base = {p["stations"]: p for p in points if p["viewers"] == 0}
    print(f"\nlive view cost (goals: <= {CPU_GOAL_PCT:g} % of one core per viewed station, <= {BYTES_GOAL / 1e3:g} kB/s per station per viewer)")
    print(f"{'stations':>8} {'viewers':>7} {'RT':>5} {'server CPU %/st':>15} {'goal':>5} {'rows B/s':>9} {'JSON B/s':>9} {'total B/s':>9} {'goal':>5}"
          f" {'listen audio B/s':>16} {'engine %/st':>11} {'+view %/st':>10} {'view/engine':>11} {'rows got':>8} {'dropped':>7} {'missed':>6}")  # fmt: skip
    for p in points:
        if p["viewers"] == 0:
            continue
        e = base.get(p["stations"])
        eng = e["process_cpu_pct_per_station"] if e else float("nan")
        s = p["server_summary"]
        print(f"{p['stations']:>8} {p['viewers']:>7} {p['realtime']:>5.2f} {p['server_cpu_pct_per_station']:>15.3f} {_mark(p['cpu_goal_met']):>5}"
              f" {p['rows_Bps']:>9.0f} {p['json_Bps']:>9.0f} {p['total_Bps']:>9.0f} {_mark(p['bytes_goal_met']):>5} {p['listen_audio_Bps']:>16.0f}"
              f" {eng:>11.3f} {p['process_cpu_pct_per_station']:>10.3f} {p['server_cpu_pct_per_station'] / eng:>10.2f}x"
              f" {100 * (p['rows_delivered'] or 0):>7.1f}% {s['dropped_frames']:>7} {s['missed_rows']:>6}")  # fmt: skip
    print(
        "engine alone (no live view): "
        + ", ".join(f"{n} st: {p['process_cpu_pct_per_station']:.3f} %/st (RT {p['realtime']:.2f})" for n, p in sorted(base.items()))
    )
    if peer:
        print(f"\npeer, offline from {peer['rows']} rows of {peer['bins']} bins (one message per row, per station per viewer at 10 rows/s):")
        print(f"{'encoding':<14} {'bytes/row':>9} {'B/s':>8} {'vs binary':>9} {'encode us/row':>13} {'CPU %':>7} {'vs binary':>9}")
        for k in ("binary_uint8", "json_float", "json_0.1dB"):
            r = peer[k]
            print(f"{k:<14} {r['bytes_per_row']:>9.0f} {r['Bps_per_station_per_viewer']:>8.0f} {r.get('bytes_vs_binary', 1.0):>8.1f}x"
                  f" {r['encode_us_per_row']:>13.1f} {r['encode_cpu_pct_per_station_per_viewer']:>7.3f} {r.get('cpu_vs_binary', 1.0):>8.1f}x")  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--stations", default="1,10,100", help="station counts (comma-separated)")
    ap.add_argument("--viewers", default="1,5", help="viewer counts (comma-separated)")
    ap.add_argument("--seconds", type=float, default=20.0, help="measured window per point")
    ap.add_argument("--warmup", type=float, default=3.0, help="seconds run before the window (excluded)")
    ap.add_argument("--dropouts", type=float, default=10.0, help="seconds between the demo signal's dropouts")
    ap.add_argument("--queue-frames", type=int, default=None, help="the server's per-viewer queue in frames (default: the server's default)")
    ap.add_argument("--out", default=str(RESULTS / "web_view.json"))
    ap.add_argument("--viewers-child", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--n", type=int, default=1, help=argparse.SUPPRESS)
    ap.add_argument("--listen", type=int, default=-1, help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.viewers_child:
        return viewers_child(a.viewers_child, a.n, a.listen)
    stations = [int(x) for x in a.stations.split(",")]
    viewers = [int(x) for x in a.viewers.split(",")]
    server_options = {"queue_frames": a.queue_frames} if a.queue_frames else {}
    t_start = time.monotonic()
    points, peer_rows = [], []
    peer_n = 10 if 10 in stations else stations[0]
    for n in stations:
        pts = [run_point(n, 0, web=False, warmup=a.warmup, seconds=a.seconds, dropouts=a.dropouts)]
        for v in viewers:
            keep = peer_rows if n == peer_n and v == viewers[0] else None
            pts.append(
                run_point(n, v, web=True, warmup=a.warmup, seconds=a.seconds, dropouts=a.dropouts, peer_rows=keep, server_options=server_options)
            )
        for p in pts:
            print(f"  {n} stations, {p['viewers']} viewers: RT {p['realtime']:.2f}, process CPU {p['process_cpu_pct_per_station']:.3f} %/station"
                  + (f", server {p['server_cpu_pct_per_station']:.3f} %/station, {p['total_Bps']:.0f} B/s per station per viewer" if p["viewers"] else ""),
                  flush=True)  # fmt: skip
        points.extend(pts)
    peer = peer_figures(peer_rows, 10.0) if peer_rows else {}
    print_tables(points, peer)
    mi = machine_info()
    print(f"\nmachine: {mi.get('cpu', '?')}, {mi['cpu_count']} cores, Python {mi['python']}; load average {os.getloadavg()[0]:.2f}")
    return write_result(a.out, {"benchmark": "web_view", "goals": {"server_cpu_pct_per_viewed_station": CPU_GOAL_PCT, "Bps_per_station_per_viewer": BYTES_GOAL},
                                "server_options": server_options, "seconds": a.seconds, "warmup_s": a.warmup, "dropouts_s": a.dropouts, "points": points, "peer": peer,
                                "run_s": time.monotonic() - t_start, "loadavg_end": [round(x, 2) for x in os.getloadavg()], "machine": mi,
                                "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                                "command": "python benchmarks/web_view.py " + " ".join(argv if argv is not None else sys.argv[1:])})  # fmt: skip


if __name__ == "__main__":
    raise SystemExit(main())
