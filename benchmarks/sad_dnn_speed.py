"""RT factor of the CNN-GRU SAD block (``models.sad_dnn``) streaming in 100 ms chunks on one thread.

For each CNN backend of the block (numba kernels, torch eager, TorchScript) the block runs in a
graph ``VectorSource -> models.sad_dnn -> CollectSink`` in FreeRun with 800-sample (100 ms)
chunks at 8 kHz and ``torch.set_num_threads(1)``; the figure is the block's own busy time
(runtime statistics, first call excluded) over the stream duration, best of ``--repeat`` runs
(the machine is shared; the minimum is the least disturbed figure). The audio is a corpus file
when ``--audio`` is given, else noise with harmonic bursts. Also the engine alone
(:class:`streamkit.models.sad_dnn.SadDnnStream`, no runtime) and the offline scorer
(:func:`streamkit.models.sad_dnn.dnn_raw_scores`, whole signal in one call).

Target: RT factor <= 0.003 single thread (the paper's PyTorch figure: 0.0119).
Algorithmic latency: 1540 samples = 192.5 ms (half window, 6 conv frames, 12 vote frames).

    python benchmarks/sad_dnn_speed.py [--seconds 60] [--repeat 5] [--weights PATH] [--audio WAV]

Writes benchmarks/results/sad_dnn_speed.json.
"""

from __future__ import annotations

import argparse
import gc
import json
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from streamkit.core.graph import Graph
from streamkit.eval.bench import machine_info, read_fixed, run_block_stats
from streamkit.io.collect import CollectSink, VectorSource
from streamkit.io.outputs import write_text
from streamkit.models.sad_dnn import BACKENDS, DEFAULT_WEIGHTS, SadDnnStream, dnn_raw_scores, load_weights, n_params
from streamkit.models.sad_dnn_block import SadDnnBlock

RATE = 8000
CHUNK = 800  # 100 ms
TARGET = 0.003


def _audio(seconds: float, path: str | None) -> np.ndarray:
    if path:
        return read_fixed(path, RATE, int(seconds * RATE))
    rng = np.random.default_rng(0)
    n = int(seconds * RATE)
    x = rng.standard_normal(n) * 0.02
    t = np.arange(n) / RATE
    for s0 in range(0, n - RATE, 3 * RATE):
        seg = slice(s0, s0 + RATE)
        x[seg] += 0.2 * sum(np.sin(2 * np.pi * k * 150 * t[seg]) / k for k in range(1, 10))
    return x.astype(np.float32)


def block_rtf(x: np.ndarray, weights: str, backend: str) -> dict[str, Any]:
    g = Graph("bench")
    src = g.add(VectorSource(samples=x, rate=RATE, sizes=CHUNK), name="src")
    b = g.add(SadDnnBlock(weights=weights, backend=backend, threads=1), name="sad")
    sink = g.add(CollectSink(), name="sink")
    g.connect(src, b)
    g.connect(b, sink)
    bs = run_block_stats(g, CHUNK, "sad")
    return {"rtf": bs["rtf"], "calls": bs["calls"], "max_call_ms": bs["max_call_ms"], "start_ms": bs["start_ms"], "items_out": bs["items_out"]}


def engine_rtf(x: np.ndarray, loaded: Any, backend: str) -> float:
    st = SadDnnStream(loaded, backend=backend)
    st.push(x[: RATE // 2])
    st.flush()
    gc.collect()
    gc.disable()
    try:
        t0 = time.perf_counter()
        for i in range(0, len(x), CHUNK):
            st.push(x[i : i + CHUNK])
        st.flush()
        dt = time.perf_counter() - t0
    finally:
        gc.enable()
    return dt / (len(x) / RATE)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--weights", default=str(DEFAULT_WEIGHTS))
    ap.add_argument("--audio", default=None, help="8 kHz WAV to stream (default: synthetic)")
    ap.add_argument("--out", default=str(Path(__file__).parent / "results" / "sad_dnn_speed.json"))
    a = ap.parse_args()
    torch.set_num_threads(1)
    loaded = load_weights(a.weights)
    x = _audio(a.seconds, a.audio)
    rows: list[dict[str, Any]] = []
    for be in BACKENDS:
        runs = [block_rtf(x, a.weights, be) for _ in range(a.repeat)]
        eng = min(engine_rtf(x, loaded, be) for _ in range(a.repeat))
        best = min(runs, key=lambda r: r["rtf"])
        rows.append({"backend": be, "block_rtf": best["rtf"], "block_rtf_median": float(np.median([r["rtf"] for r in runs])), "engine_rtf": eng,
                     "max_call_ms": best["max_call_ms"], "start_ms": best["start_ms"], "calls": best["calls"]})  # fmt: skip
    off = []
    for _ in range(a.repeat):
        t0 = time.perf_counter()
        dnn_raw_scores(x, weights=loaded, threads=1)
        off.append((time.perf_counter() - t0) / (len(x) / RATE))
    lat = SadDnnBlock().algorithmic_latency()
    fastest = min(rows, key=lambda r: r["block_rtf"])
    print(f"models.sad_dnn, {a.seconds:g} s of audio in {CHUNK}-sample (100 ms) chunks, 1 thread, best of {a.repeat}; "
          f"{n_params(loaded.model)} parameters, config {loaded.cfg.to_dict()}")  # fmt: skip
    print(f"{'backend':<8} {'block RT':>10} {'(median)':>10} {'engine RT':>10} {'max call ms':>12} {'start ms':>9}")
    for r in rows:
        print(
            f"{r['backend']:<8} {r['block_rtf']:>10.5f} {r['block_rtf_median']:>10.5f} {r['engine_rtf']:>10.5f} {r['max_call_ms']:>12.2f} {r['start_ms']:>9.0f}"
        )
    print(f"offline dnn_raw_scores (whole signal, numba): RT {min(off):.5f}")
    print(f"algorithmic latency {lat} samples = {lat / RATE * 1000:.1f} ms; target RT <= {TARGET} (paper PyTorch: 0.0119); "
          f"fastest backend: {fastest['backend']} ({'meets' if fastest['block_rtf'] <= TARGET else 'MISSES'} the target)")  # fmt: skip
    res = {
        "benchmark": "sad_dnn_speed",
        "chunk_samples": CHUNK,
        "rate": RATE,
        "seconds": a.seconds,
        "repeat": a.repeat,
        "threads": 1,
        "audio": Path(a.audio).name if a.audio else "synthetic noise + harmonic bursts",  # no machine paths in results
        "weights": Path(a.weights).name if a.weights else None,
        "config": loaded.cfg.to_dict(),
        "parameters": n_params(loaded.model),
        "rows": rows,
        "offline_rtf": min(off),
        "latency_samples": lat,
        "latency_ms": lat / RATE * 1000,
        "target_rtf": TARGET,
        "fastest_backend": fastest["backend"],
        "machine": machine_info(),
        "note": "block RT = the block's busy time (runtime stats, first call excluded) / stream time; engine RT = SadDnnStream alone; "
        "best of repeat runs on a shared 2-core machine",
        "created": time.strftime("%Y-%m-%d %H:%M:%S"),
    }
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    write_text(Path(a.out), json.dumps(res, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {a.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
