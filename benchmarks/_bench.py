"""Helpers shared by the benchmarks (``sad_dnn_speed.py``, ``sed_stream.py``, ``rnnt_loss.py``, ``rnnt_step.py``, and the result
files of ``sed_table1.py``, ``sed_post_tune.py``, ``rnnt_lid_offline.py``)."""

from __future__ import annotations

import gc
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from streamkit.core.block import ErrorPolicy
from streamkit.core.graph import Graph
from streamkit.core.runtime import Runner
from streamkit.io.outputs import write_text


def read_fixed(path: str, rate: int, n: int) -> np.ndarray:
    """A file at ``rate`` Hz, mixed to mono, cut or repeated to ``n`` samples (float32); a wrong rate exits."""
    import soundfile as sf

    x, sr = sf.read(path, dtype="float32", always_2d=True)
    if sr != rate:
        raise SystemExit(f"{path}: {sr} Hz, need {rate}")
    x = x.mean(axis=1)
    return np.resize(x, n).astype(np.float32) if len(x) < n else x[:n].copy()


def run_block_stats(g: Graph, chunk: int, name: str) -> dict[str, Any]:
    """Run ``g`` once in FreeRun with the garbage collector off; the runtime statistics of block ``name``."""
    gc.collect()
    gc.disable()
    try:
        st = Runner(g, chunk=chunk, keep_events=False, threaded_events=False, stats_interval_s=0, error_policy=ErrorPolicy.RAISE).run()
    finally:
        gc.enable()
    return st["blocks"][name]


def best_of(fn: Callable[[], Any], repeat: int) -> float:
    """Best wall time in seconds of ``repeat`` calls of ``fn`` (one untimed warm-up call; gc off while timing).

    The machine is shared: the minimum is the figure least disturbed by other load.
    """
    fn()
    best = float("inf")
    for _ in range(repeat):
        gc.collect()
        gc.disable()
        try:
            t0 = time.perf_counter()
            fn()
            best = min(best, time.perf_counter() - t0)
        finally:
            gc.enable()
    return best


def write_result(path: str | Path, result: dict[str, Any]) -> int:
    """Write a benchmark's result JSON (parents created), say so on stderr by file name only; returns 0 (the exit code)."""
    out = Path(path)
    write_text(out, json.dumps(result, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {out.name}", file=sys.stderr)
    return 0
