"""Highpass: Butterworth SOS in a numba kernel == scipy.signal.sosfilt, streaming, multichannel."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.signal import butter, sosfilt

from streamkit.core.context import Context
from streamkit.core.errors import ConfigError
from streamkit.core.tags import Gap, GapCause
from streamkit.core.types import StreamSpec
from streamkit.dsp import Highpass
from streamkit.dsp.kernels.biquad import sos_filter
from streamkit.testing import assert_chunking_invariant, assert_tags_at, run_block

RATE = 16_000
rng = np.random.default_rng(0)


def test_instance():
    Highpass().reset()  # reset before start is a no-op


@pytest.mark.parametrize("kw", [dict(cutoff_hz=0), dict(cutoff_hz=-5), dict(cutoff_hz="x"), dict(cutoff_hz=float("inf")),
                                dict(order=0), dict(order=2.5), dict(order=True), dict(order=33)])  # fmt: skip
def test_rejects_bad_params(kw):
    with pytest.raises(ConfigError):
        Highpass(**kw)


def test_rejects_cutoff_at_or_above_nyquist_and_non_float32():
    for fc in (8_000, 9_000):
        with pytest.raises(ConfigError):
            run_block(Highpass(cutoff_hz=fc), np.zeros((100, 1), np.float32), rate=RATE)
    with pytest.raises(ConfigError):
        run_block(Highpass(), np.zeros((100, 1), np.complex64), rate=RATE)


@pytest.mark.parametrize("order,fc", [(4, 100.0), (1, 20.0), (5, 3_000.0), (8, 300.0)])
def test_matches_scipy_sosfilt(order, fc):
    # computed in float64 like sosfilt; the only difference is the float32 output rounding
    x = rng.standard_normal((4_000, 3)).astype(np.float32)
    y = run_block(Highpass(cutoff_hz=fc, order=order), x, rate=RATE, sizes="random", mean_size=200).samples
    ref = sosfilt(butter(order, fc, "highpass", fs=RATE, output="sos"), x.astype(np.float64), axis=0)
    assert y.dtype == np.float32
    np.testing.assert_allclose(y, ref, rtol=1e-6, atol=1e-7 * np.abs(ref).max())


def test_kernel_state_matches_sosfilt_zi():
    sos = butter(4, 200, "highpass", fs=RATE, output="sos")
    x = rng.standard_normal((500, 2))
    zi = np.zeros((sos.shape[0], 2, 2))
    y1 = sos_filter(x[:300].astype(np.float32), sos, zi)
    _, zf = sosfilt(sos, x[:300].astype(np.float32).astype(np.float64), axis=0, zi=np.zeros((sos.shape[0], 2, 2)))
    np.testing.assert_allclose(zi, zf, rtol=1e-12, atol=1e-12)
    assert y1.shape == (300, 2)


def test_removes_dc_and_keeps_tone():
    t = np.arange(2 * RATE) / RATE
    x = (0.5 + 0.1 * np.sin(2 * np.pi * 1_000 * t)).astype(np.float32)[:, None]
    y = run_block(Highpass(cutoff_hz=100), x, rate=RATE).samples[RATE:, 0]  # after settling
    assert abs(y.mean()) < 1e-4
    assert np.isclose(y.std() * np.sqrt(2), 0.1, rtol=1e-3)


def test_minus_3db_at_cutoff_and_24db_per_octave():
    t = np.arange(2 * RATE) / RATE

    def gain(f: float) -> float:
        x = np.sin(2 * np.pi * f * t).astype(np.float32)[:, None]
        y = run_block(Highpass(cutoff_hz=400, order=4), x, rate=RATE).samples[RATE:, 0]
        return float(y.std() * np.sqrt(2))

    assert 20 * np.log10(gain(400)) == pytest.approx(-3.01, abs=0.05)
    assert 20 * np.log10(gain(100)) == pytest.approx(10 * np.log10(1 / (1 + 4.0**8)), abs=0.1)  # 2 octaves down: ~-48 dB


def test_chunking_invariance():  # bit-exact: the float64 state carries over exactly
    x = rng.standard_normal((3_000, 2)).astype(np.float32)
    assert_chunking_invariant(lambda: Highpass(cutoff_hz=150), x, rate=RATE, sizes=("all", 1, 7, 160, "random"),
                              tags=[(0, "user:a", 0), (1_234, "user:b", 1)])  # fmt: skip


def test_tags_keep_their_offsets():
    out = run_block(
        Highpass(), np.zeros((1_000, 1), np.float32), rate=RATE, sizes=64, tags=[(0, "user:m", 0), (123, "user:m", 1), (999, "user:m", 2)]
    )
    assert_tags_at(out, {"user:m": [0, 123, 999]})


def test_state_resets_after_gap():
    x = np.ones((2_000, 2), np.float32) + rng.standard_normal((2_000, 2)).astype(np.float32)
    gap = Gap(lost=80, cause=GapCause.OVERLOAD)
    out = run_block(Highpass(cutoff_hz=100), x, rate=RATE, sizes=300, gaps=[(1_000, gap)])
    fresh = run_block(Highpass(cutoff_hz=100), x[1_000:], rate=RATE).samples
    np.testing.assert_array_equal(out.samples[1_000:], fresh)
    whole = run_block(Highpass(cutoff_hz=100), x, rate=RATE).samples
    np.testing.assert_array_equal(out.samples[:1_000], whole[:1_000])
    assert not np.array_equal(out.samples[1_000:], whole[1_000:])  # the policy matters here


def test_non_contiguous_input_is_handled():
    spec = StreamSpec(RATE, 2)
    hp = Highpass(cutoff_hz=100)
    ctx = Context(hp, "t", {"in": spec}, hp.negotiate({"in": spec}), lambda *a: None)
    hp.start(ctx)
    x = rng.standard_normal((2, 500)).astype(np.float32).T  # F-ordered (500, 2)
    x.flags.writeable = False
    y = hp.work(x, ctx)
    ref = sosfilt(butter(4, 100, "highpass", fs=RATE, output="sos"), x.astype(np.float64), axis=0)
    np.testing.assert_allclose(y, ref, rtol=1e-6, atol=1e-6)
    assert all(sig[0].layout == "C" for sig in sos_filter.signatures)  # no 'A'-layout compile on the data path
    with pytest.raises(ValueError):  # shapes are checked before any memory is touched
        sos_filter(np.zeros((10, 3), np.float32), hp._sos, hp._zi)


def test_set_params_redesigns():
    spec = StreamSpec(RATE, 1)
    hp = Highpass(cutoff_hz=100)
    ctx = Context(hp, "t", {"in": spec}, hp.negotiate({"in": spec}), lambda *a: None)
    hp.start(ctx)
    hp.apply_params({"cutoff_hz": 1_000})
    np.testing.assert_allclose(hp._sos, butter(4, 1_000, "highpass", fs=RATE, output="sos"))
    hp.apply_params({"order": 6})
    assert hp._sos.shape == (3, 6) and hp._zi.shape == (3, 2, 1)
    with pytest.raises(ConfigError):
        hp.apply_params({"cutoff_hz": 8_000})
    with pytest.raises(ConfigError):
        hp.apply_params({"gain": 2})
