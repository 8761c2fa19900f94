"""KiwiSDR client capacity: CPU per station and the largest number of stations one core sustains.

Each station is the monitor's pipeline without detectors: ``KiwiSource -> Resample(8 kHz)`` in its
own graph, all graphs on one :class:`~streamkit.core.runtime.MultiRunner` (one scheduler thread),
all WebSockets on the shared asyncio loop thread, all in THIS process. The server is the KiwiSDR
emulator (``python -m streamkit.io.kiwi_emulator``) started as SEPARATE processes, paced at real
time (12001.188 Hz). On a machine with >= 2 cores this process is pinned to core 0 and the
emulator processes to core 1, so "CPU of the client" is one core's worth of work.

The emulator refuses ``--rx-chans`` above 64 (``EmulatorConfig.validate``); the benchmark probes
that limit and starts ``ceil(N / limit)`` emulator processes (all on core 1), spreading the
stations over them. If the limit is raised, one process serves every station.

Measurements, for each N of the sweep (each point starts fresh emulators and fresh graphs):

* connect all N stations, wait until every one streams, then ``--warmup`` s;
* over a steady-state window of ``--seconds`` s: this process's CPU time (``os.times``, all
  threads; also per thread from ``/proc/self/task``: the asyncio loop, the scheduler, the
  sampling main thread) and the emulators' CPU (``/proc/<pid>/stat``);
* per station: items delivered at 8 kHz after resampling (count and, sampled every 0.25 s,
  the least-squares delivery rate), OVERLOAD / SEQ_GAP / RECONNECT gaps, reconnects, the
  hand-off ring's backlog.

A point is **sustained** when every station delivered >= 99.5 % of T x rate items, zero OVERLOAD
gaps, zero SEQ_GAP gaps, zero reconnects over the whole run, and this process used < 95 % of one
core. Items arrive a whole frame at a time (2048 samples = 170.7 ms for ADPCM, 1365 items at
8 kHz), so a raw count over a fixed 20 s window is off by up to one frame (0.85 %) for a perfectly
healthy station. The delivery test is therefore: the rate measured from the first to the last
chunk the resampler received inside the window (edges on frame arrivals, logged by a Resample
subclass at under 1 us per frame) >= 99.5 % of the server's rate; the resampler's output count
>= 99.5 % of T x 8000 less one frame and libsoxr's hold-back (~926 items); and the last chunk no
older than two frame periods + 0.5 s at the window end (no stall). If the emulators used >= 90 %
of their core the point is marked emulator-bound: a failure there is not a client limit.

(c) with ``--kiwirecorder DIR`` (a kiwiclient checkout, never part of this repository): K
kiwirecorder.py processes, one station each, recording to WAV files in a temporary directory,
pinned to core 0 like this process; their CPU over the same kind of window, as % of one core
per station, compared with streamkit's per-station figure at the same number of stations.

``--profile N`` instead runs N stations with timing wrappers (per-frame cost of websocket
receive + protocol parse, ADPCM decode, ring write, runner step, source read, resample) and
then a cProfile pass over both threads, and prints a per-frame cost breakdown.

    python benchmarks/kiwi_stations.py [--sweep 50,100,200,250,300,400] [--seconds 20] [--warmup 5]
        [--no-compression] [--kiwirecorder KIWICLIENT_DIR [--kr-procs 8]] [--profile 200]

Writes benchmarks/results/kiwi_stations.json (or ``--out``).
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import json
import os
import pstats
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]

from streamkit.core.clock import RealTime  # noqa: E402
from streamkit.core.graph import Graph  # noqa: E402
from streamkit.core.ring import SampleRing  # noqa: E402
from streamkit.core.runtime import MultiRunner, Runner  # noqa: E402
from streamkit.dsp.resample import Resample, soxr_lag_items  # noqa: E402
from streamkit.eval.bench import machine_info  # noqa: E402
from streamkit.eval.bench.emulators import Emulator, emulator_channel_limit, emulators, pin, pin_self, proc_times, thread_cpu  # noqa: E402,F401
from streamkit.io.kiwi_source import KiwiLoop, KiwiSource  # noqa: E402
from streamkit.io.outputs import write_text  # noqa: E402
from streamkit.protocols import kiwi_client  # noqa: E402
from streamkit.protocols.adpcm import AdpcmDecoder  # noqa: E402
from streamkit.protocols.kiwi_client import KiwiClientProtocol  # noqa: E402

TRUE_RATE = 12001.188
OUT_RATE = 8000
SAMPLES_PER_FRAME = {True: 2048, False: 512}  # ADPCM, PCM
# Dial frequencies, cycled over the stations: the emulator's default stations at 10000 kHz (a
# 1 kHz tone) and 7074 kHz (tone + noise), and 5000 kHz (only the noise floor). The client's cost
# does not depend on the audio content (ADPCM decoding and libsoxr do the same work for any
# signal), but the emulator's does: its speech-like stations (7100, 14200 kHz) cost ~300 us per
# frame to synthesise whenever its shared signal cache misses, which made the emulator, not the
# client, saturate at 400 stations. --freqs 7100,14200,7074,10000,5000 restores the full mix.
FREQS: tuple[float, ...] = (10000.0, 7074.0, 5000.0)
DELIVERY_MIN = 0.995
SOXR_LAG_OUT = soxr_lag_items(TRUE_RATE, OUT_RATE, "HQ") * OUT_RATE / TRUE_RATE  # ~926 items at 8 kHz
CLIENT_CPU_MAX = 0.95
EMULATOR_SATURATED = 0.90


# ---------------------------------------------------------------------------------------- helpers
def station_graph(i: int, port: int, compression: bool) -> Graph:
    """Station i: KiwiSource -> Resample(8 kHz), like the monitor's graph without level/detectors."""
    g = Graph(f"st{i:04d}")
    kiwi = g.add(LoggedKiwiSource(host="127.0.0.1", port=port, freq_khz=FREQS[i % len(FREQS)], mode="lsb", compression=compression,
                            user=f"bench{i}", max_retries=None), name="kiwi")  # fmt: skip
    rs = g.add(TimedResample(to_hz=OUT_RATE), name="rs")
    g.chain(kiwi, rs)
    return g


class LoggedKiwiSource(KiwiSource):
    """KiwiSource that keeps the reasons of its retries (state changes are rare: no per-frame cost)."""

    def _state(self, state: str, detail: str = "", retry_in: float | None = None, attempt: int = 0) -> None:
        if state in ("retrying", "fatal"):
            self.__dict__.setdefault("retry_log", []).append(f"{time.strftime('%H:%M:%S')} {state}: {detail}")
        super()._state(state, detail, retry_in, attempt)


class TimedResample(Resample):
    """Resample that logs (time, input items, output items) of each work call while ``log`` is a list.

    Work is called once per chunk that reaches the block (about once per Kiwi frame), so the log
    costs well under a microsecond per frame and nothing on the scheduler's empty polls.
    """

    log: list[tuple[float, int, int]] | None = None

    def work(self, x: np.ndarray, ctx: Any) -> np.ndarray:
        y = super().work(x, ctx)
        log = self.log
        if log is not None:
            log.append((time.monotonic(), x.shape[0], 0 if y is None else y.shape[0]))
        return y


def delivery_rate(log: list[tuple[float, int, int]]) -> tuple[float, float]:
    """(input items per second between the first and the last chunk of the window, time of the last).

    Measured from chunk to chunk, so the window edges fall on frame arrivals: a station that
    keeps up gives the server's rate to within arrival jitter / window, whatever the phase of
    its 170 ms frames relative to the window (a raw count over a fixed window is off by up to
    one frame, 0.85 % of 20 s of ADPCM).
    """
    if len(log) < 2 or log[-1][0] <= log[0][0]:
        return float("nan"), (log[-1][0] if log else float("nan"))
    items = sum(n for _, n, _ in log[1:])
    return items / (log[-1][0] - log[0][0]), log[-1][0]


# ------------------------------------------------------------------------ the previous scheduler
class PollAllMultiRunner(MultiRunner):
    """The scheduler streamkit shipped before the ready queue (``--scheduler poll-all``), kept here
    to measure the difference: every runner is stepped whenever any live source signals (one
    shared Event), so each arriving frame costs N runner steps."""

    def __init__(self, runners: list[Runner]) -> None:
        super().__init__(runners)
        for r in self.runners:
            r.notify = self.notify

    def run(self) -> dict[str, dict[str, Any]]:
        for r in self.runners:
            r.start()
        active = set(self.runners)
        try:
            while active and not self._stop.is_set():
                moved = False
                for r in list(active):
                    moved = self._step(r, active) or moved
                if not moved and active:
                    self.notify.wait(0.05)
                    self.notify.clear()
        finally:
            for r in list(active):
                r.finish()
        return {r.graph.name: r.stats() for r in self.runners}


# ---------------------------------------------------------------------------------- instrumentation
class Acc:
    __slots__ = ("ns", "calls", "hits")

    def __init__(self) -> None:
        self.ns = 0
        self.calls = 0
        self.hits = 0


class Instruments:
    """Wrappers around the per-frame functions (profile mode only).

    The functions called about once per frame (receive_message, the decoders, the ring write,
    the resampler) are timed in the calling thread's CPU time (``time.thread_time_ns``, ~0.5 us
    per reading): wall-clock timing would also count GIL hand-overs and preemption, which are
    large when both client threads share one core (a numba ``nogil`` kernel or libsoxr drops the
    GIL, and taking it back can wait for the other thread's switch interval). ``Runner.step``,
    called on every poll, is only counted (steps, and steps that moved items): its cost is the
    scheduler thread's CPU minus the resampler's.
    """

    PER_FRAME = ("receive_message", "decode_adpcm", "decode_pcm", "ring_write", "resample")

    def __init__(self) -> None:
        self.acc = {k: Acc() for k in (*self.PER_FRAME, "runner_step")}
        self._undo: list[Callable[[], None]] = []
        self.sched_action: Callable[[], None] | None = None
        self.active = False

    def _wrap(self, cls: Any, name: str, key: str, static: bool = False) -> None:
        """Time ``cls.name`` (a class's method, or a module's function) while active."""
        orig_attr = cls.__dict__[name]
        orig = orig_attr.__func__ if static else orig_attr
        acc = self.acc[key]
        clock = time.thread_time_ns
        inst = self

        def wrapper(*a: Any, **k: Any) -> Any:
            if not inst.active:
                return orig(*a, **k)
            t0 = clock()
            r = orig(*a, **k)
            acc.ns += clock() - t0
            acc.calls += 1
            return r

        setattr(cls, name, staticmethod(wrapper) if static else wrapper)
        self._undo.append(lambda: setattr(cls, name, orig_attr))

    def install(self) -> None:
        self._wrap(KiwiClientProtocol, "receive_message", "receive_message")
        self._wrap(AdpcmDecoder, "decode", "decode_adpcm")
        self._wrap(kiwi_client, "pcm_to_float", "decode_pcm")  # the client calls it through its module
        self._wrap(SampleRing, "write", "ring_write")
        self._wrap(Resample, "work", "resample")
        # Runner.step: counted, and it runs scheduler-thread actions (cProfile enable/disable)
        orig_step = Runner.__dict__["step"]
        acc = self.acc["runner_step"]
        inst = self

        def step(self_: Runner) -> bool:
            act = inst.sched_action
            if act is not None:
                inst.sched_action = None
                act()
            r = orig_step(self_)
            if inst.active:
                acc.calls += 1
                if r:
                    acc.hits += 1
            return r  # type: ignore[no-any-return]

        Runner.step = step  # type: ignore[method-assign]
        self._undo.append(lambda: setattr(Runner, "step", orig_step))

    def uninstall(self) -> None:
        for u in reversed(self._undo):
            u()
        self._undo.clear()

    def reset(self) -> None:
        for a in self.acc.values():
            a.ns = a.calls = a.hits = 0


# ---------------------------------------------------------------------------------------- one point
def run_point(
    n: int,
    compression: bool,
    seconds: float,
    warmup: float,
    limit: int,
    client_cpu: int | None,
    emu_cpu: int | None,
    stats_interval: float,
    instruments: Instruments | None = None,
    cprofile: bool = False,
    quiet: bool = False,
    timing: bool = True,
    scheduler: str = "multi",
) -> dict[str, Any]:
    """Run n stations for warmup + seconds; return the window's figures."""
    spf = SAMPLES_PER_FRAME[compression]
    frame_out = spf * OUT_RATE / TRUE_RATE
    t_setup0 = time.monotonic()
    with emulators(n, limit, emu_cpu) as emus:
        ports = [e.port for e in emus]
        graphs = [station_graph(i, ports[i % len(ports)], compression) for i in range(n)]  # type: ignore[arg-type]
        runners = [Runner(g, RealTime(), stats_interval_s=stats_interval) for g in graphs]
        mr = PollAllMultiRunner(runners) if scheduler == "poll-all" else MultiRunner(runners)
        sched_err: list[BaseException] = []
        sched_tid: list[int] = []

        def sched() -> None:
            sched_tid.append(threading.get_native_id())
            try:
                mr.run()
            except BaseException as exc:  # reported, never silent
                sched_err.append(exc)

        th = threading.Thread(target=sched, name="streamkit-scheduler", daemon=True)
        th.start()
        try:
            kiwis: list[KiwiSource] = [r.graph.blocks["kiwi"] for r in runners]  # type: ignore[misc]
            # 1. wait until every station streams
            t0 = time.monotonic()
            while time.monotonic() - t0 < 90:
                if sched_err:
                    raise RuntimeError(f"scheduler failed: {sched_err[0]!r}")
                if all(k.stats.get("frames", 0) > 0 for k in kiwis):
                    break
                time.sleep(0.2)
            connect_s = time.monotonic() - t0
            streaming = sum(1 for k in kiwis if k.stats.get("frames", 0) > 0)
            time.sleep(warmup)
            loop_tid = KiwiLoop.get().thread.native_id
            main_tid = threading.get_native_id()

            prof_loop = prof_sched = None
            if cprofile:
                # thread CPU time, not wall time: an idle epoll wait must not count
                prof_loop, prof_sched = cProfile.Profile(time.thread_time), cProfile.Profile(time.thread_time)
                KiwiLoop.get().loop.call_soon_threadsafe(prof_loop.enable)
                if instruments is not None:
                    instruments.sched_action = prof_sched.enable
            if instruments is not None and timing:
                instruments.reset()
                instruments.active = True

            def snapshot() -> dict[str, Any]:
                ot = os.times()
                return {
                    "wall": time.monotonic(),
                    "user": ot.user,
                    "system": ot.system,
                    "threads": {
                        "asyncio loop": thread_cpu(loop_tid),
                        "scheduler": thread_cpu(sched_tid[0] if sched_tid else None),
                        "main (sampling)": thread_cpu(main_tid),
                    },  # fmt: skip
                    "emulators": [e.cpu_s() for e in emus],
                    "st": [
                        {
                            "rs": r.metrics("rs").items_out,
                            "src": r.metrics("kiwi").items_out,
                            "frames": k.stats.get("frames", 0),
                            "connects": k.stats.get("connects", 0),
                            "lost": k.stats.get("lost_samples", 0),
                            "violations": k.stats.get("violations", 0),
                            "gaps": dict(r.gaps_by_cause),
                            "ring_overloads": k._ring.overload_events if k._ring is not None else 0,
                            "backlog": k._ring.available if k._ring is not None else 0,
                        }
                        for r, k in zip(runners, kiwis)
                    ],
                }

            rss: list[TimedResample] = [r.graph.blocks["rs"] for r in runners]  # type: ignore[misc]
            for rs in rss:
                rs.log = []
            a = snapshot()
            time.sleep(seconds)
            b = snapshot()
            logs = []
            for rs in rss:
                logs.append(rs.log or [])
                rs.log = None
            if instruments is not None:
                instruments.active = False
            prof_text: dict[str, Any] = {}
            if cprofile and prof_loop is not None and prof_sched is not None:
                done = threading.Event()
                KiwiLoop.get().loop.call_soon_threadsafe(lambda: (prof_loop.disable(), done.set()))
                done.wait(5)
                sdone = threading.Event()
                if instruments is not None:
                    instruments.sched_action = lambda: (prof_sched.disable(), sdone.set())
                sdone.wait(5)
                prof_text = {"asyncio loop": prof_loop, "scheduler": prof_sched}
        finally:
            mr.request_stop()
            th.join(60)
        emu_lines = [line for e in emus for line in e.notable]
        emu_alive = [e.proc.poll() is None for e in emus]

    # ------------------------------------------------------------------ figures
    T = b["wall"] - a["wall"]
    cpu = (b["user"] + b["system"]) - (a["user"] + a["system"])
    user = b["user"] - a["user"]
    system = b["system"] - a["system"]
    threads = {k: b["threads"][k] - a["threads"][k] for k in a["threads"]}
    emu_cpu_s = sum(bb - aa for aa, bb in zip(a["emulators"], b["emulators"]))
    stations = []
    lag_out = SOXR_LAG_OUT  # output items libsoxr may hold back at either end of the window
    for i, (sa, sb, log) in enumerate(zip(a["st"], b["st"], logs)):
        d_rs = sb["rs"] - sa["rs"]
        gaps = {k: sb["gaps"].get(k, 0) - sa["gaps"].get(k, 0) for k in set(sa["gaps"]) | set(sb["gaps"])}
        rate_in, t_last = delivery_rate(log)
        st = {
            "station": i,
            "items_8k": d_rs,
            "items_frac": d_rs / (T * OUT_RATE),
            "rate_frac": rate_in / TRUE_RATE,
            "last_delivery_age_s": b["wall"] - t_last,
            "frames": sb["frames"] - sa["frames"],
            "overload": gaps.get("overload", 0) + (sb["ring_overloads"] - sa["ring_overloads"]),
            "seq_gap": gaps.get("seq_gap", 0) or (1 if sb["lost"] > sa["lost"] else 0),
            "reconnects": max(0, sb["connects"] - 1) + gaps.get("reconnect", 0),
            "violations": sb["violations"] - sa["violations"],
            "backlog_s": sb["backlog"] / TRUE_RATE,
            "retry_log": list(getattr(kiwis[i], "retry_log", []))[:3],
        }
        st["ok"] = (
            st["rate_frac"] >= DELIVERY_MIN
            and st["items_8k"] >= DELIVERY_MIN * T * OUT_RATE - frame_out - lag_out
            and st["last_delivery_age_s"] <= 2 * spf / TRUE_RATE + 0.5
            and st["overload"] == 0
            and st["seq_gap"] == 0
            and st["reconnects"] == 0
        )
        stations.append(st)
    frames = sum(s["frames"] for s in stations)
    client_frac = cpu / T
    emu_frac = emu_cpu_s / T
    failing = [s for s in stations if not s["ok"]]
    res: dict[str, Any] = {
        "n": n,
        "compression": compression,
        "scheduler": "PollAllMultiRunner (previous)" if scheduler == "poll-all" else "MultiRunner (ready queue)",
        "window_s": T,
        "warmup_s": warmup,
        "connect_s": connect_s,
        "setup_to_end_s": time.monotonic() - t_setup0,
        "stations_streaming_at_start": streaming,
        "emulator_processes": len(ports),
        "emulators_alive_at_end": all(emu_alive),
        "client_cpu_frac": client_frac,
        "client_user_frac": user / T,
        "client_system_frac": system / T,
        "client_cpu_pct_per_station": 100.0 * client_frac / n,
        "threads_cpu_frac": {k: v / T for k, v in threads.items()},
        "emulator_cpu_frac": emu_frac,
        "emulator_saturated": emu_frac >= EMULATOR_SATURATED,
        "frames": frames,
        "frames_per_s": frames / T,
        "client_us_per_frame": cpu / frames * 1e6 if frames else None,
        "min_items_frac": min(s["items_frac"] for s in stations),
        "min_rate_frac": min(s["rate_frac"] for s in stations),
        "overload_gaps": sum(s["overload"] for s in stations),
        "seq_gaps": sum(s["seq_gap"] for s in stations),
        "reconnects": sum(s["reconnects"] for s in stations),
        "violations": sum(s["violations"] for s in stations),
        "retry_reasons": [f"station {s['station']}: {r}" for s in stations for r in s["retry_log"]][:8],
        "max_backlog_s": max(s["backlog_s"] for s in stations),
        "stations_failing": len(failing),
        "scheduler_error": repr(sched_err[0]) if sched_err else None,
        "emulator_log_notable": emu_lines[-8:],
    }
    res["sustained"] = not failing and client_frac < CLIENT_CPU_MAX and not sched_err and streaming == n
    if res["sustained"]:
        res["verdict"] = "sustained" + (" (but the emulator saturated: its pacing is not reliable)" if res["emulator_saturated"] else "")
    elif res["emulator_saturated"]:
        res["verdict"] = "NOT sustained - emulator saturated (server-bound, not a client limit)"
    elif client_frac >= CLIENT_CPU_MAX:
        res["verdict"] = "NOT sustained - client CPU >= 95% of one core"
    else:
        why = []
        if streaming < n:
            why.append(f"only {streaming}/{n} stations streamed")
        if res["overload_gaps"]:
            why.append("OVERLOAD gaps")
        if res["seq_gaps"]:
            why.append("SEQ_GAP gaps")
        if res["reconnects"]:
            why.append("reconnects")
        if failing and not why:
            why.append(f"{len(failing)} stations delivered < 99.5%")
        res["verdict"] = "NOT sustained - " + ", ".join(why or ["?"])
    res["worst_stations"] = sorted(stations, key=lambda s: (s["ok"], s["rate_frac"]))[:3]
    if instruments is not None and timing:
        res["breakdown"] = breakdown(instruments, res, compression)
    if prof_text:
        res["cprofile"] = {k: cprofile_summary(p, frames) for k, p in prof_text.items()}
    if not quiet:
        print(f"  N={n:4d} {'ADPCM' if compression else 'PCM  '} client {100 * client_frac:5.1f}% of a core "
              f"({res['client_cpu_pct_per_station']:.3f}%/station), emulator {100 * emu_frac:5.1f}%, "
              f"min delivery rate {100 * res['min_rate_frac']:.2f}% (count {100 * res['min_items_frac']:.2f}%), "
              f"gaps ovl/seq {res['overload_gaps']}/{res['seq_gaps']}, reconnects {res['reconnects']}, "
              f"backlog max {res['max_backlog_s']:.2f} s -> {res['verdict']}", flush=True)  # fmt: skip
    return res


def breakdown(ins: Instruments, res: dict[str, Any], compression: bool) -> dict[str, Any]:
    """Per-frame CPU costs (us) from the wrappers and the per-thread CPU (/proc, 10 ms ticks)."""
    frames = max(1, res["frames"])
    T = res["window_s"]
    us = {k: a.ns / 1e3 / frames for k, a in ins.acc.items()}
    loop_us = res["threads_cpu_frac"]["asyncio loop"] * T * 1e6 / frames
    sched_us = res["threads_cpu_frac"]["scheduler"] * T * 1e6 / frames
    decode = us["decode_adpcm"] if compression else us["decode_pcm"]
    step = ins.acc["runner_step"]
    steps_per_frame = step.calls / frames
    steps_us = sched_us - us["resample"]
    rows = {
        "asyncio loop thread, total": loop_us,
        "  websocket recv + asyncio + KiwiSource session loop (the rest)": loop_us - us["receive_message"] - us["ring_write"],
        "  protocol parse (receive_message minus decode)": us["receive_message"] - decode,
        "  decode (AdpcmDecoder.decode: numba kernel + wrapper)" if compression else "  decode (PCM big-endian -> float32)": decode,
        "  ring write (SampleRing.write)": us["ring_write"],
        "scheduler thread, total": sched_us,
        f"  runner steps ({steps_per_frame:.1f} per frame, {100 * step.hits / max(1, step.calls):.1f}% moved items)": steps_us,
        "  resample (Resample.work: libsoxr)": us["resample"],
        "main thread (benchmark, sleeping)": res["threads_cpu_frac"]["main (sampling)"] * T * 1e6 / frames,
        "process total": res["client_us_per_frame"],
    }
    return {
        "us_per_frame_cpu": rows,
        "runner_steps_per_frame": steps_per_frame,
        "productive_step_fraction": (step.hits / step.calls) if step.calls else None,
        "us_per_runner_step": steps_us / steps_per_frame if steps_per_frame else None,
        "calls": {k: a.calls for k, a in ins.acc.items()},
    }


def cprofile_summary(p: cProfile.Profile, frames: int, top: int = 18) -> dict[str, Any]:
    """Self time grouped by area, and the top functions by self time (us per frame)."""
    st = pstats.Stats(p)
    groups: dict[str, float] = {}
    rows = []
    total = 0.0
    for (file, line, func), (_cc, nc, tt, _ct, _callers) in st.stats.items():  # type: ignore[attr-defined]
        total += tt
        f = file.replace("\\", "/")
        if "websockets" in f:
            g = "websockets (framing, recv)"
        elif "/asyncio/" in f:
            g = "asyncio (event loop, tasks, selectors)"
        elif f.endswith("kiwi_source.py"):
            g = "kiwi_source.py (session loop; read)"
        elif f.endswith("protocols/kiwi_client.py") or f.endswith("protocols/kiwi_frames.py") or f.endswith("protocols/adpcm.py"):
            g = "protocol + decode wrapper"
        elif f.endswith("core/ring.py"):
            g = "SampleRing"
        elif f.endswith("core/runtime.py"):
            g = "runtime (Runner/MultiRunner)"
        elif f.endswith("dsp/resample.py") or "soxr" in f:
            g = "resample"
        elif f.endswith("kiwi_stations.py"):
            g = "benchmark wrappers"
        elif file == "~":
            g = (
                f"builtins/C: {func.split(' ')[-1].strip('<>')}"
                if func.startswith("<built-in method") or func.startswith("<method")
                else "builtins/C"
            )
        else:
            g = "other Python"
        groups[g] = groups.get(g, 0.0) + tt
        rows.append((tt, nc, f"{Path(file).name}:{line}({func})"))
    rows.sort(reverse=True)
    frames = max(1, frames)
    merged: dict[str, float] = {}
    for g, v in groups.items():  # fold the many small builtin groups
        key = g if v / max(total, 1e-12) >= 0.02 or not g.startswith("builtins/C:") else "builtins/C (other)"
        merged[key] = merged.get(key, 0.0) + v
    return {
        "total_us_per_frame_profiled": total / frames * 1e6,
        "groups_us_per_frame": {g: v / frames * 1e6 for g, v in sorted(merged.items(), key=lambda kv: -kv[1])},
        "top_self_time": [{"us_per_frame": tt / frames * 1e6, "calls_per_frame": nc / frames, "function": name} for tt, nc, name in rows[:top]],
    }


# ------------------------------------------------------------------------------------ kiwirecorder
def run_kiwirecorder(kr_dir: Path, k: int, compression: bool, seconds: float, warmup: float, limit: int, client_cpu: int | None,
                     emu_cpu: int | None) -> dict[str, Any]:  # fmt: skip
    script = kr_dir / "kiwirecorder.py"
    if not script.is_file():
        raise SystemExit(f"--kiwirecorder {kr_dir}: no kiwirecorder.py there")
    tmp = Path(tempfile.mkdtemp(prefix="kr-bench-"))
    procs: list[subprocess.Popen[bytes]] = []
    cmds: list[list[str]] = []
    try:
        with emulators(k, limit, emu_cpu) as emus:
            ports = [e.port for e in emus]
            for i in range(k):
                cmd = [sys.executable, str(script), "-s", "127.0.0.1", "-p", str(ports[i % len(ports)]), "-f", f"{FREQS[i % len(FREQS)]:g}",
                       "-m", "lsb", "-d", str(tmp), "--fn", f"kr{i}", "-q", "--connect-retries=1", "--busy-retries=1",
                       f"--tlimit={int(warmup + seconds + 60)}"] + ([] if compression else ["--ncomp"])  # fmt: skip
                cmds.append(cmd)
                log = open(tmp / f"kr{i}.log", "wb")
                procs.append(subprocess.Popen(cmd, cwd=str(kr_dir), stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                              preexec_fn=pin(client_cpu), start_new_session=True))  # fmt: skip
                log.close()
            wavs = [tmp / f"kr{i}.wav" for i in range(k)]
            t0 = time.monotonic()
            while time.monotonic() - t0 < 60 and not all(w.exists() and w.stat().st_size > 44 for w in wavs):
                time.sleep(0.2)
            connect_s = time.monotonic() - t0
            time.sleep(warmup)

            def snap() -> tuple[float, list[float], list[int], list[float]]:
                cpu, sizes, emu = [], [], []
                for p, w in zip(procs, wavs):
                    try:
                        u, s = proc_times(p.pid)
                        cpu.append(u + s)
                    except OSError:
                        cpu.append(float("nan"))
                    sizes.append(w.stat().st_size if w.exists() else 0)
                emu = [e.cpu_s() for e in emus]
                return time.monotonic(), cpu, sizes, emu

            wa, ca, sa, ea = snap()
            time.sleep(seconds)
            wb, cb, sb, eb = snap()
            alive = [p.poll() is None for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(p.pid, signal.SIGTERM)
        for p in procs:
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(p.pid, signal.SIGKILL)
                p.wait(5)
        shutil.rmtree(tmp, ignore_errors=True)
    T = wb - wa
    per = [(b - a) / T for a, b in zip(ca, cb)]
    delivered = [((b - a) / 2) / (T * TRUE_RATE) for a, b in zip(sa, sb)]  # 16-bit mono WAV samples
    return {
        "processes": k,
        "compression": compression,
        "window_s": T,
        "connect_s": connect_s,
        "alive_at_end": all(alive),
        "cpu_frac_per_process": per,
        "cpu_pct_per_station_mean": 100.0 * float(np.nanmean(per)),
        "cpu_pct_per_station_min": 100.0 * float(np.nanmin(per)),
        "cpu_pct_per_station_max": 100.0 * float(np.nanmax(per)),
        "min_delivery_frac": min(delivered),
        "emulator_cpu_frac": sum(b - a for a, b in zip(ea, eb)) / T,
        "command_example": " ".join(["python", "kiwirecorder.py", *cmds[0][2:]]) if cmds else None,  # no machine paths in results
    }


# ---------------------------------------------------------------------------------------------- main
def print_breakdown(res: dict[str, Any]) -> None:
    bd = res["breakdown"]
    print(
        f"\nper-frame CPU breakdown, N={res['n']} {'ADPCM' if res['compression'] else 'PCM'}, {res['scheduler']} "
        f"({res['frames_per_s']:.0f} frames/s, client {100 * res['client_cpu_frac']:.1f}% of a core; each timed call adds ~1 us)"
    )
    for k, v in bd["us_per_frame_cpu"].items():
        print(f"  {k:<72} {v:9.1f} us/frame")
    if bd["us_per_runner_step"] is not None:
        print(f"  ({bd['us_per_runner_step']:.1f} us per runner step)")


def print_cprofile(res: dict[str, Any]) -> None:
    for thread, cp in res.get("cprofile", {}).items():
        print(f"\ncProfile, {thread} thread ({cp['total_us_per_frame_profiled']:.1f} us/frame under the profiler; relative shares matter):")
        for g, v in cp["groups_us_per_frame"].items():
            print(f"  {g:<50} {v:8.1f} us/frame  {100 * v / max(cp['total_us_per_frame_profiled'], 1e-9):5.1f}%")
        print("  top self time:")
        for r in cp["top_self_time"][:12]:
            print(f"    {r['us_per_frame']:7.2f} us/frame {r['calls_per_frame']:6.2f} calls/frame  {r['function']}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sweep", default="50,100,200,250,300,400", help="station counts of the capacity sweep (default 50,100,200,250,300,400)")
    ap.add_argument("--seconds", type=float, default=20.0, help="steady-state window per point, s (default 20)")
    ap.add_argument("--warmup", type=float, default=5.0, help="extra seconds after every station streams (default 5)")
    ap.add_argument("--no-compression", action="store_true", help="16-bit PCM instead of ADPCM (4x the frames)")
    ap.add_argument("--per-station-n", type=int, default=100, help="N whose CPU per station is the headline figure (default 100)")
    ap.add_argument("--keep-going", action="store_true", help="run every N even after two points in a row were not sustained")
    ap.add_argument("--freqs", default=None, help="comma-separated dial frequencies in kHz cycled over the stations (default 10000,7074,5000)")
    ap.add_argument("--stats-interval", type=float, default=1.0, help="Runner stats_interval_s, as in the monitor (default 1.0)")
    ap.add_argument(
        "--scheduler",
        choices=("multi", "poll-all"),
        default="multi",
        help="multi: the shipped MultiRunner with its ready queue (default); poll-all: the previous scheduler, for comparison",
    )
    ap.add_argument("--kiwirecorder", type=Path, default=None, help="kiwiclient checkout: also measure kiwirecorder.py as a peer")
    ap.add_argument("--kr-procs", type=int, default=8, help="kiwirecorder processes (one station each) for the peer (default 8)")
    ap.add_argument("--profile", type=int, default=None, metavar="N", help="instead of the sweep: per-frame cost breakdown at N stations")
    ap.add_argument("--no-cprofile", action="store_true", help="with --profile: skip the cProfile pass")
    ap.add_argument("--no-pin", action="store_true", help="do not pin this process to core 0 and the emulators to core 1")
    ap.add_argument("--out", default=None, help="result file (default benchmarks/results/kiwi_stations.json, or kiwi_stations_profile.json)")
    a = ap.parse_args()

    def on_term(signum: int, frame: Any) -> None:
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, on_term)
    global FREQS
    if a.freqs:
        FREQS = tuple(float(f) for f in a.freqs.split(",") if f.strip())
    ncpu = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    client_cpu = emu_cpu = None
    if not a.no_pin and ncpu >= 2 and hasattr(os, "sched_setaffinity"):
        cpus = sorted(os.sched_getaffinity(0))
        client_cpu, emu_cpu = cpus[0], cpus[1]
        pin_self(client_cpu)
    compression = not a.no_compression
    limit = emulator_channel_limit()
    mode = "ADPCM" if compression else "PCM"
    command = "python benchmarks/kiwi_stations.py " + " ".join(sys.argv[1:])
    mi = machine_info()
    sched_name = "the previous poll-all MultiRunner" if a.scheduler == "poll-all" else "one MultiRunner (ready queue)"
    print(f"KiwiSDR stations benchmark ({mode}): KiwiSource -> Resample(8 kHz) per station, {sched_name}; "
          f"client pinned to CPU {client_cpu}, emulator(s) to CPU {emu_cpu}; emulator --rx-chans limit {limit} "
          f"(-> ceil(N/{limit}) emulator processes); window {a.seconds:g} s after connect + {a.warmup:g} s")  # fmt: skip
    AdpcmDecoder().decode(b"\x00")  # JIT/cache warm before any timing
    out: dict[str, Any] = {
        "benchmark": "kiwi_stations",
        "mode": mode,
        "scheduler": "PollAllMultiRunner (the previous scheduler, in this file)" if a.scheduler == "poll-all" else "MultiRunner (ready queue)",
        "machine": mi,
        "client_cpu": client_cpu,
        "emulator_cpu": emu_cpu,
        "emulator_rx_chans_limit": limit,
        "emulator_command": f"python -m streamkit.io.kiwi_emulator --host 127.0.0.1 --port 0 --rx-chans <min({limit}, N/shards)>",
        "criteria": {
            "delivery": f"per station: rate from first to last chunk in the window >= {100 * DELIVERY_MIN}% of the server rate, and items out of "
            f"the resampler >= {100 * DELIVERY_MIN}% of T x {OUT_RATE} less one frame and libsoxr's hold-back; last chunk "
            "at most two frame periods + 0.5 s before the window end",
            "gaps": "zero OVERLOAD, zero SEQ_GAP",
            "reconnects": "zero over the whole run",
            "client_cpu": f"< {100 * CLIENT_CPU_MAX}% of one core",
            "emulator_saturated_at": f">= {100 * EMULATOR_SATURATED}% of its core",
        },
        "freqs_khz": list(FREQS),
        "seconds": a.seconds,
        "warmup": a.warmup,
        "command": command,
        "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    if a.profile is not None:
        ins = Instruments()
        ins.install()
        try:
            print(f"profile pass 1 (timing wrappers), N={a.profile}:")
            res = run_point(
                a.profile, compression, a.seconds, a.warmup, limit, client_cpu, emu_cpu, a.stats_interval, instruments=ins, scheduler=a.scheduler
            )
            print_breakdown(res)
            out["profile_wrappers"] = res
            if not a.no_cprofile:
                print(f"\nprofile pass 2 (cProfile on both threads), N={a.profile}:")
                res2 = run_point(a.profile, compression, min(a.seconds, 10.0), a.warmup, limit, client_cpu, emu_cpu, a.stats_interval,
                                 instruments=ins, cprofile=True, timing=False, scheduler=a.scheduler)  # fmt: skip
                print_cprofile(res2)
                out["profile_cprofile"] = {k: res2[k] for k in ("n", "window_s", "frames", "client_cpu_frac", "cprofile")}
        finally:
            ins.uninstall()
        path = Path(
            a.out
            or REPO
            / "benchmarks"
            / "results"
            / f"kiwi_stations_profile{'' if compression else '_pcm'}{'_pollall' if a.scheduler == 'poll-all' else ''}.json"
        )
        path.parent.mkdir(parents=True, exist_ok=True)
        write_text(path, json.dumps(out, indent=2, default=str))
        print(f"wrote {path}")
        return 0

    sweep = [int(x) for x in a.sweep.split(",") if x.strip()]
    points: list[dict[str, Any]] = []
    fails_in_row = 0
    print("capacity sweep:")
    for n in sweep:
        res = run_point(n, compression, a.seconds, a.warmup, limit, client_cpu, emu_cpu, a.stats_interval, scheduler=a.scheduler)
        points.append(res)
        fails_in_row = 0 if res["sustained"] else fails_in_row + 1
        if fails_in_row >= 2 and not a.keep_going:
            print("  (two points in a row not sustained: sweep stopped; --keep-going runs the rest)")
            break
    out["points"] = points
    sustained = [p["n"] for p in points if p["sustained"]]
    largest = max(sustained) if sustained else 0
    out["largest_sustained_n"] = largest
    out["meets_target_200"] = largest >= 200
    head = next((p for p in points if p["n"] == a.per_station_n), None)
    if head is None and not a.kiwirecorder:
        print(f"per-station point N={a.per_station_n} (not in the sweep):")
        head = run_point(a.per_station_n, compression, a.seconds, a.warmup, limit, client_cpu, emu_cpu, a.stats_interval, scheduler=a.scheduler)
        out["per_station_point"] = head
    out["cpu_pct_per_station"] = head["client_cpu_pct_per_station"] if head else None
    out["cpu_pct_per_station_n"] = a.per_station_n if head else None

    if a.kiwirecorder is not None:
        k = a.kr_procs
        print(f"peer: {k} kiwirecorder.py processes from {a.kiwirecorder} (one station each), and streamkit with N={k}:")
        sk_k = next((p for p in points if p["n"] == k), None)
        if sk_k is None:
            sk_k = run_point(k, compression, a.seconds, a.warmup, limit, client_cpu, emu_cpu, a.stats_interval, scheduler=a.scheduler)
        kr = run_kiwirecorder(a.kiwirecorder, k, compression, a.seconds, a.warmup, limit, client_cpu, emu_cpu)
        kr["streamkit_same_n"] = {x: sk_k[x] for x in ("n", "client_cpu_frac", "client_cpu_pct_per_station", "sustained")}
        kr["ratio_kiwirecorder_over_streamkit_same_n"] = kr["cpu_pct_per_station_mean"] / sk_k["client_cpu_pct_per_station"]
        if head is not None:
            kr["ratio_kiwirecorder_over_streamkit_headline"] = kr["cpu_pct_per_station_mean"] / head["client_cpu_pct_per_station"]
        out["kiwirecorder"] = kr
        print(f"  kiwirecorder: {kr['cpu_pct_per_station_mean']:.3f}% of a core per station (min {kr['cpu_pct_per_station_min']:.3f}, "
              f"max {kr['cpu_pct_per_station_max']:.3f}), min delivery {100 * kr['min_delivery_frac']:.1f}%, alive {kr['alive_at_end']}")  # fmt: skip

    # ------------------------------------------------------------------ table
    print(f"\n{'N':>5} {'client %core':>12} {'%/station':>10} {'us/frame':>9} {'loop %':>7} {'sched %':>8} {'emu %core':>10} "
          f"{'rate %':>7} {'count %':>7} {'ovl':>4} {'seq':>4} {'reconn':>6} {'backlog s':>9}  verdict")  # fmt: skip
    for p in points + ([out["per_station_point"]] if "per_station_point" in out else []):
        th = p["threads_cpu_frac"]
        print(f"{p['n']:>5} {100 * p['client_cpu_frac']:>12.1f} {p['client_cpu_pct_per_station']:>10.3f} {p['client_us_per_frame'] or 0:>9.1f} "
              f"{100 * th['asyncio loop']:>7.1f} {100 * th['scheduler']:>8.1f} {100 * p['emulator_cpu_frac']:>10.1f} "
              f"{100 * p['min_rate_frac']:>7.2f} {100 * p['min_items_frac']:>7.2f} {p['overload_gaps']:>4} {p['seq_gaps']:>4} "
              f"{p['reconnects']:>6} {p['max_backlog_s']:>9.2f}  {p['verdict']}")  # fmt: skip
    print(f"\nlargest N sustained ({mode}): {largest} (target >= 200: {'met' if largest >= 200 else 'NOT met'})")
    if head is not None:
        print(f"client CPU per station at N={head['n']}: {head['client_cpu_pct_per_station']:.3f}% of one core")
    if "kiwirecorder" in out:
        kr = out["kiwirecorder"]
        print(f"kiwirecorder per station: {kr['cpu_pct_per_station_mean']:.3f}% of one core; ratio kiwirecorder/streamkit at N={k}: "
              f"{kr['ratio_kiwirecorder_over_streamkit_same_n']:.2f}x" + (f", vs streamkit at N={head['n']}: {kr['ratio_kiwirecorder_over_streamkit_headline']:.2f}x" if head else ""))  # fmt: skip
    if any(p["emulator_saturated"] for p in points):
        print("NOTE: the emulator saturated its core at some points; those points measure the server, not the client.")
    print(f"machine: {mi.get('cpu', '?')}, {mi['cpu_count']} cores, Python {mi['python']}")
    path = Path(
        a.out or REPO / "benchmarks" / "results" / f"kiwi_stations{'' if compression else '_pcm'}{'_pollall' if a.scheduler == 'poll-all' else ''}.json"
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    write_text(path, json.dumps(out, indent=2, default=str))
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
