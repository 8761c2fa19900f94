"""KiwiSDR emulator pacing on a real event loop: lateness of real-time frames and the rate of speed 0.

The suite checks the pacing schedule with a fake clock (``tests/io/test_kiwi_emulator.py::TestPacing``);
this measures what it gives on this machine's loop, over loopback, with a client reading every frame:

* ``real time``: ``--frames`` 16-bit PCM frames (512 samples, 42.7 ms) at speed 1. Lateness of frame
  ``k`` = the loop time it was sent minus ``t_0 + k * 512 / rate`` (``t_0``: the first frame's send
  time); median, 95th percentile and maximum, and the schedule's slips (re-anchorings after a loop more
  than one frame late). No drift means the median stays a few ms whatever the run length.
* ``speed 0``: ``--fast-frames`` PCM frames at speed 0 (as fast as the client reads): wall time from
  the first to the last frame received, frames per second and x real time.

    python benchmarks/kiwi_pacing.py [--frames 240] [--fast-frames 4000]

Writes benchmarks/results/kiwi_pacing.json and prints a Markdown table.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _bench import write_result  # noqa: E402

from streamkit.core.machine import machine_info  # noqa: E402
from streamkit.io.kiwi_emulator import EmulatorConfig, KiwiEmulator  # noqa: E402
from streamkit.protocols.kiwi import AudioFrame, KiwiClientProtocol  # noqa: E402

RATE = 12001.188
OUT = Path(__file__).resolve().parent / "results" / "kiwi_pacing.json"


async def _receive(emu: KiwiEmulator, frames: int, timeout: float) -> tuple[int, float]:
    """Read ``frames`` audio frames from ``emu`` as a client; (frames got, seconds first -> last)."""
    from websockets.asyncio.client import connect

    proto = KiwiClientProtocol(7074.0, compression=False)
    got, t_first, t_last = 0, None, None
    async with connect(emu.url(1), compression=None, ping_interval=None, max_queue=None) as ws:
        proto.connection_made(time.monotonic())
        for cmd in proto.data_to_send():
            await ws.send(cmd)
        deadline = time.monotonic() + timeout
        while got < frames and time.monotonic() < deadline:
            msg = await asyncio.wait_for(ws.recv(), max(0.1, deadline - time.monotonic()))
            proto.receive_message(msg, time.monotonic())
            for cmd in proto.data_to_send():
                await ws.send(cmd)
            for ev in proto.events_received():
                if isinstance(ev, AudioFrame):
                    got += 1
                    t_last = time.monotonic()
                    t_first = t_first if t_first is not None else t_last
    return got, (t_last - t_first) if t_first is not None and t_last is not None else 0.0


async def real_time(frames: int) -> dict[str, Any]:
    async with KiwiEmulator(EmulatorConfig(speed=1.0, record_frames=frames + 10)) as emu:
        got, _ = await _receive(emu, frames, timeout=frames * 512 / RATE + 30.0)
        log = emu.connections[-1]
        t = np.array([f.t for f in log.frames[:got]])
    late_ms = (t - (t[0] + np.arange(len(t)) * 512 / RATE)) * 1e3
    return {
        "frames": int(got),
        "audio_s": round(got * 512 / RATE, 3),
        "lateness_ms": {
            "median": round(float(np.median(late_ms)), 3),
            "p95": round(float(np.percentile(late_ms, 95)), 3),
            "max": round(float(np.max(late_ms)), 3),
            "last": round(float(late_ms[-1]), 3),
        },
        "slips": int(log.slips),
    }


async def speed_zero(frames: int) -> dict[str, Any]:
    async with KiwiEmulator(EmulatorConfig(speed=0.0, record_frames=0)) as emu:
        got, wall = await _receive(emu, frames, timeout=120.0)
    audio_s = got * 512 / RATE
    return {
        "frames": int(got),
        "audio_s": round(audio_s, 3),
        "wall_s": round(wall, 3),
        "frames_per_s": round(got / wall, 1) if wall > 0 else None,
        "x_real_time": round(audio_s / wall, 1) if wall > 0 else None,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--frames", type=int, default=240, help="real-time PCM frames (default 240: 10.2 s)")
    ap.add_argument("--fast-frames", type=int, default=4000, help="speed-0 PCM frames (default 4000: 171 s of audio)")
    ap.add_argument("--out", default=str(OUT), help="result JSON (default benchmarks/results/kiwi_pacing.json)")
    a = ap.parse_args(argv)
    rt = asyncio.run(real_time(a.frames))
    fast = asyncio.run(speed_zero(a.fast_frames))
    mi = machine_info()
    print(f"KiwiSDR emulator pacing ({mi.get('cpu', '?')}, {mi['cpu_count']} CPUs, Python {mi['python']})\n")
    print("| run | frames | audio s | figures |")
    print("|---|---:|---:|---|")
    lat = rt["lateness_ms"]
    print(
        f"| real time (speed 1) | {rt['frames']} | {rt['audio_s']} | lateness median {lat['median']} ms, p95 {lat['p95']} ms, "
        f"max {lat['max']} ms, last {lat['last']} ms; {rt['slips']} slips |"
    )
    print(
        f"| speed 0 | {fast['frames']} | {fast['audio_s']} | {fast['wall_s']} s wall, {fast['frames_per_s']} frames/s, "
        f"{fast['x_real_time']}x real time |"
    )
    return write_result(a.out, {"benchmark": "kiwi_pacing", "machine": mi, "real_time": rt, "speed_zero": fast})


if __name__ == "__main__":
    sys.exit(main())
