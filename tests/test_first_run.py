"""First run on a fresh install: with an empty numba cache every kernel compiles, and that must happen
before the stream flows (no ``overload`` gap). The cost of this test is that compilation: about a
minute of wall time (25 s of CPU) on a loaded 2-core machine."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from streamkit.io.jsonl_events import read_events

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.timeout(1200)
def test_monitor_with_an_empty_numba_cache_loses_nothing_to_overload(tmp_path):
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "numba-cache")}
    events = tmp_path / "events"
    r = subprocess.run([sys.executable, "-m", "streamkit", "monitor", "--duration", "6", "--sad", "both", "--quiet", "--events", str(events)],
                       cwd=ROOT, env=env, capture_output=True, text=True, timeout=1100)  # fmt: skip
    assert r.returncode == 0, r.stderr[-2000:]
    files = sorted(events.glob("*.jsonl"))
    assert len(files) == 3  # the emulator's three stations
    assert any((tmp_path / "numba-cache").rglob("*.nbi"))  # the kernels really were compiled into the new cache
    for f in files:
        evs = read_events(f)
        overload = [e["payload"] for e in evs if e["kind"] == "stream.gap" and e["payload"]["cause"] == "overload"]
        assert overload == [], f"{f.name}: {overload}"
        final = [e["payload"] for e in evs if e["kind"] == "graph.stats" and "first_call_ms" in e["payload"]]
        assert final and final[-1]["stream_s"] == pytest.approx(6.0, abs=0.05)
        assert final[-1]["gaps_by_cause"].get("overload", 0) == 0
