"""HF channel simulator: parameters, determinism, each component, alignment, streaming == offline."""

from __future__ import annotations

import json

import numpy as np
import pytest
from scipy.signal import fftconvolve, hilbert, welch

from streamkit.core.errors import ConfigError
from streamkit.data.hf_channel import (
    FRAME,
    PROFILES,
    RATE,
    AgcParams,
    ChannelParams,
    HFChannel,
    active_level_db,
    simulate,
)
from streamkit.testing import assert_chunking_invariant, run_block

# a clean, linear channel: one unit path, no noise, no AGC (gain 0 dB), no clock offset
LINEAR = ChannelParams(profile="none", delay_ms=0.0, doppler_hz=0.0, snr_db=None, agc=None, seed=1)


def tone(f: float, seconds: float, amp: float = 0.1) -> np.ndarray:
    t = np.arange(int(seconds * RATE)) / RATE
    return (amp * np.sin(2 * np.pi * f * t)).astype(np.float32)


def speechlike(seconds: float, seed: int = 0) -> np.ndarray:
    """Band-limited noise bursts (0.3-2 s) separated by silences: speech-like activity."""
    rng = np.random.default_rng(seed)
    n = int(seconds * RATE)
    x = np.zeros(n)
    i = int(0.5 * RATE)
    while i < n:
        m = int(rng.uniform(0.3, 2.0) * RATE)
        seg = rng.standard_normal(min(m, n - i))
        seg = np.convolve(seg, np.ones(3) / 3, mode="same")  # a little low-pass tilt
        x[i : i + seg.shape[0]] = seg * 0.05 * np.hanning(seg.shape[0]) ** 0.2
        i += m + int(rng.uniform(0.3, 1.5) * RATE)
    return x.astype(np.float32)


def power_at(y: np.ndarray, f: float) -> float:
    t = np.arange(y.shape[0]) / RATE
    return float(np.abs(np.mean(y * np.exp(-2j * np.pi * f * t))) ** 2)


def peak_freq(y: np.ndarray) -> float:
    w = np.hanning(y.shape[0])
    n = 1 << 20
    s = np.abs(np.fft.rfft(y * w, n))
    return float(np.argmax(s) * RATE / n)


# -- parameters -----------------------------------------------------------------------------------
def test_params_json_round_trip():
    p = ChannelParams(carriers=((1000.0, -10.0), (2222.5, -3.0)), tx_compression_db=6.0, agc=AgcParams(hang_ms=300.0), seed=5)
    q = ChannelParams.from_dict(json.loads(json.dumps(p.to_dict())))
    assert q == p
    assert ChannelParams.from_json(p.to_json()) == p
    r = ChannelParams.random(np.random.default_rng(3), severity=0.8)
    assert ChannelParams.from_json(r.to_json()) == r
    assert ChannelParams.from_dict(ChannelParams(agc=None).to_dict()).agc is None


def test_params_rejected():
    with pytest.raises(ConfigError):
        ChannelParams(profile="bogus")
    with pytest.raises(ConfigError):
        ChannelParams(snr_db=float("nan"))
    with pytest.raises(ConfigError):
        ChannelParams(agc=AgcParams(decay_ms=0))
    with pytest.raises(ConfigError):
        ChannelParams.from_dict({"snr": 3})
    with pytest.raises(ConfigError):
        HFChannel(params={"delay_ms": -1})


def test_random_params_follow_severity():
    rng = np.random.default_rng(0)
    mild = [ChannelParams.random(rng, severity=0.0) for _ in range(200)]
    hard = [ChannelParams.random(rng, severity=1.0) for _ in range(200)]
    assert np.mean([p.snr_db for p in mild]) > np.mean([p.snr_db for p in hard]) + 15
    assert sum(p.profile == "disturbed" for p in hard) > sum(p.profile == "disturbed" for p in mild)
    for p in mild + hard:
        d0, f0 = PROFILES[p.profile]
        assert 0.69 * d0 <= p.delay_ms <= 1.41 * d0 and 0.69 * f0 <= p.doppler_hz <= 1.41 * f0
        assert 40 <= p.rate_offset_ppm <= 110
    # the same generator state gives the same draw
    assert ChannelParams.random(np.random.default_rng(9)) == ChannelParams.random(np.random.default_rng(9))


# -- determinism ----------------------------------------------------------------------------------
def test_determinism_and_seed():
    x = speechlike(3.0)
    p = ChannelParams.random(np.random.default_rng(1), severity=0.7)
    a = simulate(x, p).received
    b = simulate(x, p).received
    c = simulate(x, p.replace(seed=p.seed + 1)).received
    np.testing.assert_array_equal(a, b)
    assert a.dtype == np.float32 and a.shape == x.shape
    assert not np.allclose(a, c)


def test_component_streams_are_independent():
    """Changing the impulse parameters leaves the noise and fading draws unchanged."""
    x = speechlike(2.0)
    p = ChannelParams(profile="moderate", snr_db=10.0, agc=None, seed=3)
    base = simulate(x, p, diagnostics=True).diagnostics
    other = simulate(x, p.replace(impulse_rate_hz=20.0, impulse_db=10.0, carriers=((900.0, -5.0),)), diagnostics=True).diagnostics
    np.testing.assert_array_equal(base["noise"], other["noise"])
    np.testing.assert_array_equal(base["speech"], other["speech"])
    assert np.abs(other["other"]).max() > 0 and np.abs(base["other"]).max() == 0


# -- components -----------------------------------------------------------------------------------
def test_linear_channel_is_the_band_pass():
    """No fading, no noise, no AGC: output == input band-passed (unit gain, no delay)."""
    x = tone(1000.0, 2.0) + tone(1900.0, 2.0, 0.05)
    y = simulate(x, LINEAR).received
    mid = slice(RATE // 2, -RATE // 2)
    np.testing.assert_allclose(y[mid], x[mid], atol=2e-3)


def test_band_limit():
    p = LINEAR
    for f_in, f_out in ((1000.0, 120.0), (1000.0, 2950.0), (1000.0, 3600.0)):
        x = tone(f_in, 2.0) + tone(f_out, 2.0)
        y = simulate(x, p).received[RATE // 2 : -RATE // 2]
        assert 10 * np.log10(power_at(y, f_out) / power_at(y, f_in)) < -45, f_out
    for f in (300.0, 400.0, 2600.0, 2700.0):
        y = simulate(tone(f, 2.0), p).received[RATE // 2 : -RATE // 2]
        assert abs(10 * np.log10(power_at(y, f) / 0.0025)) < 1.0, f  # 0.1 amplitude -> |c|^2 = 0.0025


def test_static_channel_is_a_pure_complex_gain():
    """Zero delay spread and zero Doppler: the channel is one constant complex gain G."""
    x = speechlike(3.0, seed=4)
    p = LINEAR.replace(profile="custom", delay_ms=0.0, doppler_hz=0.0, seed=11)
    y = simulate(x, p).received.astype(np.float64)
    ref = simulate(x, LINEAR).received.astype(np.float64)  # the band-passed input
    h = np.imag(hilbert(ref))
    A = np.stack([ref, h], 1)[RATE:-RATE]
    coef, *_ = np.linalg.lstsq(A, y[RATE:-RATE], rcond=None)
    resid = y[RATE:-RATE] - A @ coef
    assert np.sum(resid**2) < 1e-4 * np.sum(y[RATE:-RATE] ** 2)
    assert 0.05 < np.hypot(*coef) < 3.0  # Rayleigh draw of |G|; mean power 1


def test_fading_envelope_time_scale():
    """A tone through Doppler spread 1 Hz: envelope-power correlation falls to 1/e at ~1/(pi*spread)."""
    widths = []
    for spread in (1.0, 0.25):
        w_seed = []
        for seed in range(4):
            p = ChannelParams(profile="custom", delay_ms=0.0, doppler_hz=spread, snr_db=None, agc=None, seed=seed)
            y = simulate(tone(1000.0, 120.0), p).received
            env = np.abs(hilbert(y.astype(np.float64)))[::40] ** 2  # 200 Hz envelope
            e = env - env.mean()
            ac = fftconvolve(e, e[::-1])[e.shape[0] - 1 :]
            ac /= ac[0]
            w_seed.append(np.argmax(ac < np.exp(-1)) * 40 / RATE)
        widths.append(np.median(w_seed))
        assert np.std(env) > 0.3 * np.mean(env)  # it really fades
    expected = 1 / (np.pi * 1.0)
    assert 0.6 * expected < widths[0] < 1.6 * expected, widths
    assert widths[1] > 2.5 * widths[0]


def test_mistuning_shifts_a_tone():
    for mist in (37.0, -25.0):
        y = simulate(tone(1000.0, 4.0), LINEAR.replace(mistune_hz=mist)).received
        assert abs(peak_freq(y[RATE:]) - (1000.0 + mist)) < 1.0


def test_snr_in_band():
    x = speechlike(20.0, seed=2)
    for snr in (0.0, 12.0, 30.0):
        r = simulate(x, LINEAR.replace(snr_db=snr, seed=5), diagnostics=True)
        d = r.diagnostics
        speech_db = active_level_db(d["speech"])
        noise_db = 10 * np.log10(np.mean(d["noise"].astype(np.float64) ** 2))
        assert abs(speech_db - noise_db - snr) < 1.0, (snr, speech_db - noise_db)
        # the received audio (AGC off) is the sum of the components
        np.testing.assert_allclose(r.received, d["speech"] + d["noise"], atol=1e-5)


def test_noise_is_band_limited():
    y = simulate(np.zeros(4 * RATE, np.float32), LINEAR.replace(snr_db=0.0, speech_level_db=-20.0)).received
    f, s = welch(y.astype(np.float64), fs=RATE, nperseg=1024)
    inband = s[(f > 400) & (f < 2600)].mean()
    assert s[f < 120].mean() < 1e-4 * inband and s[(f > 2950) & (f < 3900)].mean() < 1e-4 * inband


def test_agc_levels_and_noise_pumping():
    """Kiwi-style AGC: output level kept in range; a loud burst pumps the noise floor down."""
    agc = AgcParams(decay_ms=800.0, threshold_db=-20.0)  # knee 20 dB under speech, noise at -30 dB
    p = ChannelParams(profile="none", snr_db=30.0, speech_level_db=-30.0, agc=agc, seed=2)
    for amp in (0.003, 0.03, 0.3):
        x = tone(1000.0, 3.0, amp)
        y = simulate(x, p.replace(speech_level_db=None)).received[RATE:]
        lvl = 10 * np.log10(np.mean(y.astype(np.float64) ** 2))
        assert -12 < lvl < -3, (amp, lvl)
    x = np.zeros(8 * RATE, np.float32)
    x[2 * RATE : 3 * RATE] = tone(1000.0, 1.0, 0.3)  # loud marker, 20 dB over the speech level
    y = simulate(x, p).received.astype(np.float64)

    def lvl(a: float, b: float) -> float:
        return float(10 * np.log10(np.mean(y[int(a * RATE) : int(b * RATE)] ** 2)))

    before, after, later = lvl(1.0, 1.9), lvl(3.05, 3.3), lvl(6.5, 8.0)
    assert after < before - 10, (before, after)
    assert abs(later - before) < 3, (before, later)
    assert lvl(3.3, 3.8) > after + 2  # recovering with the decay time constant


def test_interferer_is_added():
    x = speechlike(3.0)
    itf = tone(700.0, 3.0, 0.05)
    p = LINEAR.replace(interferer_db=-6.0, interferer_offset_hz=200.0)
    r = simulate(x, p, itf, diagnostics=True)
    base = simulate(x, p).received
    assert power_at(r.diagnostics["other"], 900.0) > 0
    assert power_at(r.received, 900.0) > 100 * power_at(base, 900.0)
    # level: -6 dB re the wanted speech's active level (the interferer tone is all "active")
    lv = 10 * np.log10(np.mean(r.diagnostics["other"][RATE:-RATE].astype(np.float64) ** 2))
    assert abs(lv - (r.params.speech_level_db - 6.0)) < 1.0
    with pytest.raises(ValueError, match="interferer"):
        simulate(x, p, np.full(10, np.nan))


def test_impulses_and_carriers():
    x = np.zeros(4 * RATE, np.float32)
    p = LINEAR.replace(speech_level_db=-20.0, impulse_rate_hz=5.0, impulse_db=6.0, carriers=((1500.0, -10.0),))
    y = simulate(x, p).received.astype(np.float64)
    assert abs(10 * np.log10(2 * power_at(y, 1500.0)) - (-30.0)) < 0.5  # tone rms^2 = 2|c|^2
    y2 = simulate(x, p.replace(carriers=())).received
    peaks = np.sum(np.abs(y2) > 0.5 * 10 ** ((-20 + 6) / 20))
    assert peaks > 0


# -- alignment ------------------------------------------------------------------------------------
def test_time_aligned_in_quiet_conditions():
    x = speechlike(10.0, seed=7)
    p = ChannelParams(profile="quiet", delay_ms=0.5, doppler_hz=0.1, snr_db=20.0, seed=4)
    y = simulate(x, p).received.astype(np.float64)
    xc = fftconvolve(y, x[::-1].astype(np.float64))  # xc[k] = sum y[n] x[n - lag], lag = k - (n - 1)
    lags = np.arange(-x.shape[0] + 1, x.shape[0])
    sel = np.abs(lags) < 200
    env = np.abs(hilbert(xc[sel]))  # the LSB phase rotation moves energy into the Hilbert part
    assert abs(lags[sel][np.argmax(env)]) <= 2


def test_rate_offset_length_and_drift():
    rng = np.random.default_rng(0)
    x = (0.05 * rng.standard_normal(60 * RATE)).astype(np.float32)
    p = LINEAR.replace(rate_offset_ppm=100.0)
    y = simulate(x, p).received.astype(np.float64)
    assert y.shape == x.shape
    ref = simulate(x, p, apply_rate_offset=False).received.astype(np.float64)

    def lag(a: int) -> int:
        seg = slice(a, a + 2 * RATE)
        xc = np.correlate(ref[a - 100 : a + 2 * RATE + 100], y[seg], "valid")
        return int(100 - np.argmax(xc))  # > 0: output late (y[i] = ref[i - lag])

    start, end = lag(RATE), lag(57 * RATE)
    assert abs(start) < 0.010 * RATE and abs(end) < 0.010 * RATE  # < 10 ms everywhere
    assert abs((end - start) - 100e-6 * 56 * RATE) <= 2  # the drift is the clock error
    assert start < 0 < end  # centred: early at the start, late at the end


# -- streaming ------------------------------------------------------------------------------------
def test_block_matches_simulate_any_chunking():
    x = speechlike(1.6, seed=3)
    itf = tone(500.0, 1.0, 0.05)
    p = ChannelParams.random(np.random.default_rng(5), severity=1.0).replace(impulse_rate_hz=10.0)
    off = simulate(x, p, itf, apply_rate_offset=False)
    pd = off.params.to_dict()
    ref = assert_chunking_invariant(lambda: HFChannel(params=pd, interferer=itf), x[:, None], rate=RATE, sizes=("all", 1000, 1, 4096, "random"))
    np.testing.assert_array_equal(ref.samples[:, 0], off.received)


def test_block_tags_keep_offsets():
    x = speechlike(1.0)
    out = run_block(HFChannel(params=LINEAR.to_dict()), x[:, None], rate=RATE, sizes=333, tags=[(1234, "user:mark", 1)])
    assert out.tag_offsets("user:mark") == [1234]
    assert out.samples.shape == (x.shape[0], 1)


def test_nonfinite_input():
    x = speechlike(1.0)
    bad = x.copy()
    bad[1000:1010] = np.nan
    bad[2000] = np.inf
    with pytest.raises(ValueError, match="non-finite"):
        simulate(bad, LINEAR)
    # the block zeroes them before any state sees them: output == block on the zeroed input
    p = ChannelParams(snr_db=10.0, speech_level_db=-30.0, seed=3).to_dict()
    blk = HFChannel(params=p)
    y = run_block(blk, bad[:, None], rate=RATE, sizes=500).samples
    clean = bad.copy()
    clean[~np.isfinite(clean)] = 0
    y0 = run_block(HFChannel(params=p), clean[:, None], rate=RATE, sizes=500).samples
    assert np.all(np.isfinite(y))
    np.testing.assert_array_equal(y, y0)
    assert blk.nonfinite_items == 11


def test_block_rejects_bad_stream():
    with pytest.raises(ConfigError):
        run_block(HFChannel(), np.zeros((100, 1), np.float32), rate=16000)


def test_short_and_empty_inputs():
    assert simulate(np.zeros(0, np.float32), LINEAR).received.shape == (0,)
    assert simulate(np.zeros(10, np.float32), ChannelParams(seed=1)).received.shape == (10,)
    assert simulate(np.zeros((FRAME + 3, 1), np.float32), ChannelParams(rate_offset_ppm=-50.0)).received.shape == (FRAME + 3,)
