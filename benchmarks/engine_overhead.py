"""Engine overhead: a chain of 10 blocks at 10 ms chunks vs a hand-written loop calling the same functions.

For three per-block workloads (identity, a numpy gain, a 2nd-order IIR via scipy's sosfilt with
carried state), run 60 s of 16 kHz audio through

* ``engine``: VectorSource -> 10 SyncBlocks in a streamkit Graph, FreeRun, 160-item chunks;
* ``hand``: ``for chunk: for f in funcs: x = f(x)`` over the same 160-item slices,

and report the per-chunk overhead in microseconds, the overhead per block call and the ratio
engine / hand. Best of ``--repeat`` runs each (the machine is noisy; the minimum is the figure
least disturbed by other load). Targets: engine <= 1.2x the hand loop, overhead
<= 20 us per block call.

    python benchmarks/engine_overhead.py [--seconds 60] [--repeat 5]

Writes benchmarks/results/engine_overhead.json.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
from scipy.signal import butter, sosfilt

from streamkit.core.block import SyncBlock
from streamkit.core.clock import FreeRun
from streamkit.core.graph import Graph
from streamkit.core.runtime import Runner
from streamkit.eval.bench import machine_info
from streamkit.io.collect import VectorSource
from streamkit.io.outputs import write_text

RATE = 16000
CHUNK = 160  # 10 ms
N_BLOCKS = 10


class FnBlock(SyncBlock):
    """A SyncBlock whose work is a given function (the same object the hand loop calls)."""

    def __init__(self, *, fn, name=None):  # type: ignore[no-untyped-def]
        super().__init__(name=name)
        self.fn = fn

    def work(self, x, ctx):  # type: ignore[no-untyped-def]
        return self.fn(x)


def make_funcs(kind: str) -> list:
    if kind == "identity":
        return [lambda x: x for _ in range(N_BLOCKS)]
    if kind == "gain":
        g = np.float32(1.0001)
        return [lambda x, g=g: x * g for _ in range(N_BLOCKS)]
    if kind == "biquad":
        sos = butter(2, 100, "highpass", fs=RATE, output="sos")
        funcs = []
        for _ in range(N_BLOCKS):
            zi = np.zeros((sos.shape[0], 2, 1))

            def f(x, zi=zi, sos=sos):  # type: ignore[no-untyped-def]
                y, zi[:] = sosfilt(sos, x, axis=0, zi=zi)
                return y.astype(np.float32, copy=False)

            funcs.append(f)
        return funcs
    raise ValueError(kind)


def run_hand(x: np.ndarray, funcs: list) -> float:
    t0 = time.perf_counter()
    n = x.shape[0]
    for i in range(0, n, CHUNK):
        y = x[i : i + CHUNK]
        for f in funcs:
            y = f(y)
    return time.perf_counter() - t0


def run_engine(x: np.ndarray, funcs: list) -> tuple[float, dict]:
    g = Graph("overhead")
    blocks = [g.add(VectorSource(samples=x, rate=RATE, sizes=CHUNK), name="src")]
    for k, f in enumerate(funcs):
        blocks.append(g.add(FnBlock(fn=f), name=f"b{k}"))
    g.chain(*blocks)
    r = Runner(g, FreeRun(), chunk=CHUNK, stats_interval_s=0)
    r.start()  # negotiation + start() are set-up, not per-chunk cost
    t0 = time.perf_counter()
    while not r.done:
        r.step()
    dt = time.perf_counter() - t0
    r.finish()
    return dt, r.stats()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--out", default=str(Path(__file__).parent / "results" / "engine_overhead.json"))
    a = ap.parse_args()
    x = np.random.default_rng(0).standard_normal((int(a.seconds * RATE), 1)).astype(np.float32)
    x.flags.writeable = False
    n_chunks = -(-x.shape[0] // CHUNK)
    rows = []
    for kind in ("identity", "gain", "biquad"):
        hand, eng, busy = [], [], []
        for _ in range(a.repeat):
            funcs = make_funcs(kind)
            hand.append(run_hand(x, funcs))
            funcs = make_funcs(kind)
            dt, st = run_engine(x, funcs)
            eng.append(dt)
            busy.append(sum(b["busy_ms"] for n, b in st["blocks"].items() if n != "src") / 1e3)
        h, e = min(hand), min(eng)
        over_chunk_us = (e - h) / n_chunks * 1e6
        rows.append(
            {
                "workload": kind,
                "hand_s": h,
                "engine_s": e,
                "ratio": e / h,
                "hand_us_per_chunk": h / n_chunks * 1e6,
                "engine_us_per_chunk": e / n_chunks * 1e6,
                "overhead_us_per_chunk": over_chunk_us,
                "overhead_us_per_block_call": over_chunk_us / (N_BLOCKS + 1),  # 10 blocks + the source read
                "engine_rt_factor": e / a.seconds,
                "engine_blocks_busy_s": min(busy),
                "meets_ratio_target_1.2x": e / h <= 1.2,
                "meets_overhead_target_20us": over_chunk_us / (N_BLOCKS + 1) <= 20.0,
            }
        )
    print(f"engine overhead: {N_BLOCKS} blocks, {CHUNK}-item (10 ms) chunks, {a.seconds:g} s of {RATE} Hz audio, best of {a.repeat}")
    hdr = f"{'workload':<10} {'hand us/chunk':>14} {'engine us/chunk':>16} {'overhead us/chunk':>18} {'us/block call':>14} {'ratio':>7} {'<=1.2x':>7} {'<=20us':>7}"
    print(hdr)
    for r in rows:
        print(
            f"{r['workload']:<10} {r['hand_us_per_chunk']:>14.2f} {r['engine_us_per_chunk']:>16.2f} {r['overhead_us_per_chunk']:>18.2f} "
            f"{r['overhead_us_per_block_call']:>14.2f} {r['ratio']:>7.2f} {str(r['meets_ratio_target_1.2x']):>7} {str(r['meets_overhead_target_20us']):>7}"
        )
    mi = machine_info()
    print(f"machine: {mi.get('cpu', '?')}, {mi['cpu_count']} cores, Python {mi['python']}, numpy {mi['numpy']}")
    out = Path(a.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    write_text(out, json.dumps({"benchmark": "engine_overhead", "seconds": a.seconds, "chunk_items": CHUNK, "rate": RATE, "blocks": N_BLOCKS,
                               "repeat": a.repeat, "rows": rows, "machine": mi,
                               "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                               "command": "python benchmarks/engine_overhead.py"}, indent=2))  # fmt: skip
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
