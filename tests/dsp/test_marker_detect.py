"""``dsp.marker_detect``: markers found live, at the exact sample, whatever the chunking."""

from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from streamkit.core.errors import ConfigError
from streamkit.core.registry import lookup
from streamkit.dsp.align.clock import interpolate
from streamkit.dsp.marker_detect import MARKER_FOUND, MarkerDetect
from streamkit.dsp.markers import marker_length, marker_waveform
from streamkit.testing import assert_chunking_invariant, run_block

RATE = Fraction(12001188, 1000)


def _stream(starts: dict[int, int], n: int, rate: float, noise: float = 0.05) -> np.ndarray:
    x = np.zeros(n)
    for mid, s in starts.items():
        x[s : s + marker_length(rate)] += marker_waveform(mid, rate)
    x += noise * np.random.default_rng(0).standard_normal(n)
    return x.astype(np.float32).reshape(-1, 1)


def test_registered() -> None:
    assert lookup("dsp.marker_detect") is MarkerDetect


def test_finds_markers_at_the_exact_sample_chunking_invariant() -> None:
    rate = float(RATE)
    starts = {1: 7000, 2: 90001}
    x = _stream(starts, 150000, rate)
    run = assert_chunking_invariant(lambda: MarkerDetect(markers=[0, 1, 2]), x, rate=RATE, sizes=("all", 160, 1031, "random"))
    found = [e.payload for e in run.events if e.kind == MARKER_FOUND]
    assert [f.marker_id for f in found] == [1, 2]
    for f in found:
        assert abs(f.sample - starts[f.marker_id]) < 0.5
        assert f.score > 0.6 and f.sro_ppm is None


def test_running_sro_against_a_reference(tmp_path: Path) -> None:
    """An 8 kHz schedule in a 12001.188 Hz stream holding (1 + 40e-6) x the nominal samples per
    reference sample: the running SRO reads +40 ppm once two markers are in."""
    ref_rate = 8000
    ref_starts = {0: 0, 1: 20 * ref_rate, 2: 40 * ref_rate}
    sched = {
        "format": "streamkit-transmission/1", "rate": ref_rate, "samples": 45 * ref_rate, "audio": "tx.wav",
        "markers": [{"id": i, "start": s} for i, s in ref_starts.items()], "sequences": [{"utterances": []}, {"utterances": []}],
    }  # fmt: skip
    (tmp_path / "tx.json").write_text(json.dumps(sched))
    tx = np.zeros(45 * ref_rate)
    for mid, s in ref_starts.items():
        tx[s : s + marker_length(ref_rate)] = marker_waveform(mid, ref_rate)
    rate = float(RATE)
    ratio = rate / ref_rate * (1 + 40e-6)
    n = int(tx.size * ratio) + 2000
    rx = interpolate(tx, (np.arange(n) - 1000) / ratio, ratio=1 / ratio).reshape(-1, 1)
    run = run_block(MarkerDetect(reference=str(tmp_path / "tx.json")), rx, rate=RATE, sizes=2048)
    found = [e.payload for e in run.events if e.kind == MARKER_FOUND]
    assert [f.marker_id for f in found] == [0, 1, 2]
    assert found[0].sro_ppm is None
    assert found[-1].sro_ppm == pytest.approx(40.0, abs=0.5)


def test_bad_parameters() -> None:
    with pytest.raises(ConfigError):
        MarkerDetect(markers=[-1])
    with pytest.raises(ConfigError):
        MarkerDetect(threshold=2.0)
    with pytest.raises(ConfigError):
        MarkerDetect(reference="/nonexistent/tx.json")
