"""Waterfall rows: level calibration, frequency axis, row timing at odd rates, chunking invariance."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from streamkit.web.spectrogram import WaterfallRows, dequantise


def rows_of(x, rate, chunk, **kw):
    w = WaterfallRows(rate, **kw)
    out = []
    for i in range(0, len(x), chunk):
        out += w.push(x[i : i + chunk], i)
    return out


def test_tone_shows_at_its_bin_at_its_level():
    rate, f = 8000, 1000.0
    t = np.arange(2 * rate) / rate
    x = (10 ** (-20 / 20) * np.sin(2 * np.pi * f * t)).astype(np.float32)  # a sine at -20 dBFS
    rows = rows_of(x, rate, 160)
    assert len(rows) == 20  # 10 rows/s
    levels = dequantise(rows[10][1])
    k = int(round(f / (rate / 2) * 256))
    assert int(np.argmax(levels)) in (k - 1, k, k + 1)
    assert levels.max() == pytest.approx(-20.0, abs=1.5)  # calibrated to a full-scale sine = 0 dB (Hann scalloping < 1.5 dB)
    assert np.median(levels) < -100  # far from the tone: the floor


def test_rows_follow_the_absolute_index_at_a_kiwisdr_rate():
    rate = Fraction(3000297, 250)  # 12001.188 Hz
    x = np.random.default_rng(0).normal(0, 0.01, 36004).astype(np.float32)
    rows = rows_of(x, rate, 512)
    ends = [e for e, _ in rows]
    assert ends == [int(np.floor(k * rate / 10)) for k in range(1, len(ends) + 1)]
    assert len(rows) == 30  # 36004 items: 3.0 s, the 30th row ends at item 36003


@pytest.mark.parametrize("chunk", [1, 7, 160, 1000, 5000])
def test_rows_do_not_depend_on_chunking(chunk):
    x = np.random.default_rng(1).normal(0, 0.1, 9000).astype(np.float32)
    ref = rows_of(x, 8000, 9000)
    got = rows_of(x, 8000, chunk)
    assert [e for e, _ in got] == [e for e, _ in ref]
    assert all(np.array_equal(a, b) for (_, a), (_, b) in zip(got, ref))


def test_a_stream_that_starts_late_and_bad_input():
    w = WaterfallRows(8000)
    rows = w.push(np.zeros(1000, np.float32), 123_400)  # a stream that does not start at 0 (a graph restarted)
    assert [e for e, _ in rows] == [124_000]
    with pytest.raises(ValueError, match="expected 124400"):
        w.push(np.zeros(10, np.float32), 130_000)
    for kw, why in [({"bins": 4}, "bins"), ({"rows_per_s": 0}, "rows_per_s"), ({"floor_db": 0, "ceil_db": -1}, "ceil_db")]:
        with pytest.raises(ValueError, match=why):
            WaterfallRows(8000, **kw)
    with pytest.raises(ValueError, match="rate"):
        WaterfallRows(0)
