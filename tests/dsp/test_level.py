"""LevelMeter: exact interval grid, numpy reference, chunking-invariant events, flush."""

from __future__ import annotations

from fractions import Fraction
from math import floor

import numpy as np
import pytest

from streamkit.core.errors import ConfigError
from streamkit.core.events import LEVEL, LevelInfo
from streamkit.core.tags import Gap, GapCause
from streamkit.dsp import LevelMeter
from streamkit.testing import assert_chunking_invariant, assert_tags_at, run_block

RATE = 16_000
KIWI = Fraction("12001.188")
rng = np.random.default_rng(0)


def bounds(n: int, rate: Fraction, interval: Fraction) -> list[int]:
    """round_half_up(k * interval * rate) up to n, then n (the partial interval flushed)."""
    step = Fraction(rate) * interval
    b, k = [0], 1
    while floor(k * step + Fraction(1, 2)) <= n:
        b.append(floor(k * step + Fraction(1, 2)))
        k += 1
    if b[-1] < n:
        b.append(n)
    return b


def ref_levels(x: np.ndarray, b: list[int]) -> list[tuple[tuple[int, int], float, float]]:
    out = []
    for lo, hi in zip(b[:-1], b[1:], strict=True):
        seg = x[lo:hi].astype(np.float64)
        out.append(((lo, hi), 10 * np.log10(np.mean(seg**2)), 20 * np.log10(np.abs(seg).max())))
    return out


def test_instance():
    LevelMeter().reset()


@pytest.mark.parametrize("bad", [0, -0.1, "x", None, float("nan")])
def test_rejects_bad_interval(bad):
    with pytest.raises(ConfigError):
        LevelMeter(interval_s=bad)


def test_rejects_interval_below_one_item_and_non_float32():
    with pytest.raises(ConfigError):
        run_block(LevelMeter(interval_s=1e-5), np.zeros((100, 1), np.float32), rate=RATE)
    with pytest.raises(ConfigError):
        run_block(LevelMeter(), np.zeros((100, 1), np.complex64), rate=RATE)


@pytest.mark.parametrize("rate,interval", [(RATE, "0.1"), (KIWI, "0.1"), (8000, "0.0333"), (44100, "1/7")])
def test_matches_numpy_reference(rate, interval):
    n = 30_011
    x = (rng.standard_normal((n, 2)) * np.array([0.01, 0.3])).astype(np.float32)
    out = run_block(LevelMeter(interval_s=interval), x, rate=rate, sizes="random", mean_size=500)
    evs = out.events_of(LEVEL)
    ref = ref_levels(x, bounds(n, Fraction(rate), Fraction(interval)))
    assert [e.span for e in evs] == [r[0] for r in ref]
    np.testing.assert_allclose([e.payload.rms_dbfs for e in evs], [r[1] for r in ref], atol=1e-9)
    np.testing.assert_allclose([e.payload.peak_dbfs for e in evs], [r[2] for r in ref], atol=1e-9)


def test_interval_grid_is_exact_at_odd_rates():
    # 0.1 s at 12001.188 Hz is 1200.1188 items: spans of 1200 and 1201 with no drift
    n = 1_200_200  # 100 s (1200118.8 items) and a bit
    out = run_block(LevelMeter(), np.zeros((n, 1), np.float32), rate=KIWI, sizes=4_801)
    spans = [e.span for e in out.events_of(LEVEL)]
    assert spans[-1][1] == n and len(spans) == 1_001  # 1000 full intervals + the flushed rest
    assert spans[999][1] == 1_200_119 == floor(KIWI * 100 + Fraction(1, 2))  # the 1000th interval ends at 100 s
    assert {hi - lo for lo, hi in spans[:-1]} == {1_200, 1_201}


def test_known_levels():
    t = np.arange(RATE) / RATE
    sine = np.sin(2 * np.pi * 1_000 * t).astype(np.float32)[:, None]  # full scale
    ev = run_block(LevelMeter(interval_s=0.5), sine, rate=RATE).events_of(LEVEL)
    assert len(ev) == 2
    for e in ev:
        assert e.payload.rms_dbfs == pytest.approx(-3.0103, abs=1e-3)
        assert e.payload.peak_dbfs == pytest.approx(0.0, abs=1e-3)
    silent = run_block(LevelMeter(), np.zeros((1_600, 1), np.float32), rate=RATE).events_of(LEVEL)[0].payload
    assert silent == LevelInfo(rms_dbfs=-200.0, peak_dbfs=-200.0)
    half = run_block(LevelMeter(), np.full((1_600, 1), 0.5, np.float32), rate=RATE).events_of(LEVEL)[0].payload
    assert half.rms_dbfs == pytest.approx(-6.0206, abs=1e-4) and half.peak_dbfs == pytest.approx(-6.0206, abs=1e-4)


def test_audio_passes_through_unchanged_with_tags():
    x = rng.standard_normal((5_000, 3)).astype(np.float32)
    out = run_block(LevelMeter(), x, rate=RATE, sizes=333, tags=[(7, "user:m", 0), (4_999, "user:m", 1)])
    np.testing.assert_array_equal(out.samples, x)
    assert_tags_at(out, {"user:m": [7, 4_999]})


def test_chunking_invariance():  # bit-exact events: each interval is measured on the same array
    x = rng.standard_normal((6_000, 2)).astype(np.float32)
    r = assert_chunking_invariant(lambda: LevelMeter(interval_s="0.05"), x, rate=KIWI, sizes=("all", 1, 7, 160, "random"))
    assert len(r.events_of(LEVEL)) == 10


def test_flush_emits_the_partial_interval():
    x = rng.standard_normal((2_500, 1)).astype(np.float32)
    ev = run_block(LevelMeter(), x, rate=RATE, sizes=100).events_of(LEVEL)
    assert [e.span for e in ev] == [(0, 1_600), (1_600, 2_500)]
    assert ev[-1].payload.rms_dbfs == pytest.approx(10 * np.log10(np.mean(x[1_600:].astype(np.float64) ** 2)), abs=1e-9)
    assert run_block(LevelMeter(), x[:1_600], rate=RATE).events_of(LEVEL)[-1].span == (0, 1_600)  # nothing left to flush


def test_gap_keeps_the_grid():
    # on_gap CONTINUE: intervals stay on the contiguous index; a gap inside one changes nothing
    x = rng.standard_normal((5_000, 1)).astype(np.float32)
    plain = run_block(LevelMeter(), x, rate=RATE, sizes=256).events_of(LEVEL)
    gapped = run_block(LevelMeter(), x, rate=RATE, sizes=256, gaps=[(2_000, Gap(lost=1_000, cause=GapCause.RECONNECT))]).events_of(LEVEL)
    assert [(e.span, e.payload) for e in gapped] == [(e.span, e.payload) for e in plain]


def test_set_params_changes_the_interval_from_the_current_one():
    from streamkit.core.context import Context
    from streamkit.core.types import StreamSpec

    got: list[tuple[int, int]] = []
    spec = StreamSpec(RATE, 1)
    lm = LevelMeter(interval_s=0.1)
    ctx = Context(lm, "t", {"in": spec}, lm.negotiate({"in": spec}), lambda c, kind, payload, span, port: got.append(span))
    lm.start(ctx)
    x = np.ones((4_000, 1), np.float32)
    lm.work(x, ctx)  # intervals (0, 1600), (1600, 3200); 800 items into the third
    lm.apply_params({"interval_s": "0.05"})
    ctx.position = 4_000
    lm.work(x, ctx)
    assert got == [(0, 1_600), (1_600, 3_200), (3_200, 4_000), (4_000, 4_800), (4_800, 5_600), (5_600, 6_400), (6_400, 7_200), (7_200, 8_000)]
    with pytest.raises(ConfigError):
        lm.apply_params({"interval_s": 1e-6})
    with pytest.raises(ConfigError):
        lm.apply_params({"gain": 1})
