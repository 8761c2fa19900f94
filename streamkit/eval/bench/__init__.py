"""What the scripts in ``benchmarks/`` share: the machine record, result files, timing and block statistics.

The scripts whose analysis the test suite checks keep it in this package (``streamkit.eval.bench.<script>``);
``benchmarks/<script>.py`` runs their ``main``. Result files go to ``benchmarks/results/`` of the source checkout
(:data:`RESULTS`), with the command, the machine (:func:`machine_info`) and the time of measurement.
"""

from __future__ import annotations

import gc
import json
import re
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from streamkit.core.machine import machine_info
from streamkit.io.outputs import write_text

if TYPE_CHECKING:
    from streamkit.core.graph import Graph

__all__ = ["REPO", "RESULTS", "best_of", "machine_info", "portable_paths", "read_fixed", "run_block_stats", "write_result"]

#: the source checkout (benchmarks are run from one, with streamkit installed editable)
REPO = Path(__file__).resolve().parents[3]
#: where the benchmarks write their results by default
RESULTS = REPO / "benchmarks" / "results"


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
    from streamkit.core.block import ErrorPolicy
    from streamkit.core.runtime import Runner

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


_ABS_PATH = re.compile(r"(?<![\w.~/])/[^\s=,;:'\"()]+")


def portable_paths(value: Any) -> Any:
    """``value`` with every absolute path in its strings made machine-independent: relative to the
    repository inside it, the file or directory name outside it (nested dicts and lists too)."""
    if isinstance(value, dict):
        return {k: portable_paths(v) for k, v in value.items()}
    if isinstance(value, list):
        return [portable_paths(v) for v in value]
    if not isinstance(value, str):
        return value

    def one(m: re.Match[str]) -> str:
        p = Path(m.group(0))
        try:
            return str(p.resolve().relative_to(REPO))
        except ValueError:
            return p.name or m.group(0)

    return _ABS_PATH.sub(one, value)


def write_result(path: str | Path, result: dict[str, Any]) -> int:
    """Write a benchmark's result JSON (parents created; absolute paths in it made portable by
    :func:`portable_paths`), say so on stderr by file name only; returns 0 (the exit code)."""
    out = Path(path)
    write_text(out, json.dumps(portable_paths(result), indent=1) + "\n", encoding="utf-8")
    print(f"wrote {out.name}", file=sys.stderr)
    return 0
