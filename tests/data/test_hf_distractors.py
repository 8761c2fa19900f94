"""Non-speech HF signals (streamkit.data.hf_distractors) and their use in `streamkit corpus hf`.

Each kind's physical signature is checked by analysing the audio (spectra, instantaneous
frequency, envelopes), not by re-running the generator; the drawn parameters come from the
returned info. The corpus tests need espeak-ng (CI installs it)."""

from __future__ import annotations

import argparse
import hashlib
import json
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
from scipy.signal import find_peaks, hilbert, welch

from streamkit.data.hf_distractors import KINDS, distractor, distractor_info, nonspeech_file, place_distractors, simulate_mix

RATE = 8000


def _runs(mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(starts, lengths) of the True runs of a boolean array."""
    d = np.diff(mask.astype(np.int8), prepend=np.int8(0), append=np.int8(0))
    a, b = np.flatnonzero(d == 1), np.flatnonzero(d == -1)
    return a, b - a


def _smooth(x: np.ndarray, ms: float) -> np.ndarray:
    k = max(1, int(ms * RATE / 1000))
    return np.convolve(x, np.ones(k) / k, mode="same")


def _inst_freq(x: np.ndarray, ms: float = 1.0) -> np.ndarray:
    z = hilbert(x)
    f = np.angle(z[1:] * np.conj(z[:-1])) * RATE / (2 * np.pi)
    return _smooth(np.concatenate((f[:1], f)), ms)


def _spectrum(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    X = np.abs(np.fft.rfft(x * np.hanning(len(x)))) ** 2
    return np.fft.rfftfreq(len(x), 1 / RATE), X


# ---------------------------------------------------------------------------------- per kind
@pytest.mark.parametrize("seed", range(4))
def test_cw_dit_length_matches_wpm(seed: int) -> None:
    """On/off keying whose shortest key-down (a dit) lasts 1.2/WPM s, dahs about 3 dits, tone at the drawn pitch."""
    x, info = distractor_info("cw", 20 * RATE, np.random.default_rng(seed))
    env = _smooth(np.abs(hilbert(x)), 2)
    _, on = _runs(env > 0.5 * env.max())
    on = on / RATE
    dit = 1.2 / info["wpm"]
    assert info["dit_s"] == pytest.approx(dit, rel=1e-3)
    short = on[on < 2 * dit]
    assert len(short) >= 10 and np.median(short) == pytest.approx(dit, rel=0.12)
    long = on[on >= 2 * dit]
    assert len(long) >= 5 and np.median(long) / np.median(short) == pytest.approx(info["dah_ratio"], rel=0.15)
    f, X = _spectrum(x)
    assert abs(f[np.argmax(X)] - info["tone_hz"]) < 15 and 400 <= info["tone_hz"] <= 900 and 12 <= info["wpm"] <= 35


def test_cw_machine_keying_exact_timing() -> None:
    x, info = distractor_info("cw", 15 * RATE, np.random.default_rng(5), wpm=20, hand=False, tone_hz=600, chirp_hz=0.0)
    env = _smooth(np.abs(hilbert(x)), 2)
    a, on = _runs(env > 0.5 * env.max())
    _, off = _runs(env <= 0.5 * env.max())
    dit = 0.06
    assert np.median(on[on < 2 * dit * RATE]) / RATE == pytest.approx(dit, rel=0.05)
    assert np.median(on[on >= 2 * dit * RATE]) / RATE == pytest.approx(3 * dit, rel=0.05)
    gaps = off[1:-1] / RATE  # inside the transmission: 1, 3 and 7 dits
    for k in (1, 3, 7):
        assert np.sum(np.abs(gaps / dit - k) < 0.25) >= 3


@pytest.mark.parametrize("seed", range(3))
def test_rtty_two_tones_170_hz_apart_22_ms_bits(seed: int) -> None:
    x, info = distractor_info("rtty", 12 * RATE, np.random.default_rng(seed))
    f, P = welch(x, RATE, nperseg=2048)
    p, _ = find_peaks(P, distance=int(50 / (f[1] - f[0])))
    top = np.sort(f[p[np.argsort(P[p])[-2:]]])
    # each lobe's centroid (continuous-phase FSK with h = 3.7 moves the raw peaks by a few Hz)
    c = np.array([np.average(f[np.abs(f - t) < 40], weights=P[np.abs(f - t) < 40]) for t in top])
    assert c[1] - c[0] == pytest.approx(170, abs=6)
    assert c == pytest.approx(sorted([info["mark_hz"], info["space_hz"]]), abs=4)
    assert P[(f > top[0] - 60) & (f < top[1] + 60)].sum() > 0.9 * P.sum()
    fi = _inst_freq(x, 2)
    mark = (fi > (info["mark_hz"] + info["space_hz"]) / 2) == (info["mark_hz"] > info["space_hz"])
    _, r1 = _runs(mark)
    _, r0 = _runs(~mark)
    runs = np.concatenate((r1, r0)) / RATE * 1000
    runs = runs[runs > 8]
    bit = 1000 / 45.45
    assert np.min(runs) == pytest.approx(bit, abs=2.5)
    # every run is a whole number of bits (or ends in a 1.5-bit stop): multiples of half a bit
    assert np.mean(np.abs(runs / (bit / 2) - np.round(runs / (bit / 2))) < 0.2) > 0.9


@pytest.mark.parametrize("seed", range(3))
def test_psk31_carrier_and_envelope_dips(seed: int) -> None:
    x, info = distractor_info("psk31", 10 * RATE, np.random.default_rng(seed))
    f, X = _spectrum(x)
    fc = info["carrier_hz"]
    assert abs(f[np.argmax(X)] - fc) < 20
    band = np.abs(f - fc) < 60
    assert X[band].sum() > 0.95 * X.sum()
    x = x[int((info["start_s"] + 0.05) * RATE) : -int(0.05 * RATE)]  # after the key-up before the start
    env = np.abs(hilbert(x))
    dips, _ = find_peaks(-env, height=-0.1 * np.percentile(env, 90), distance=int(0.02 * RATE))
    assert len(dips) > 20
    gaps = np.diff(dips) / RATE * 31.25  # in symbol periods
    assert np.mean(np.abs(gaps - np.round(gaps)) < 0.1) > 0.95 and np.min(np.round(gaps)) == 1


def _symbol_tones(x: np.ndarray, start_s: float, sym_s: float, n_sym: int) -> np.ndarray:
    """Peak frequency of the middle half of each symbol (zero-padded FFT, ~0.1 Hz grid)."""
    out = []
    for i in range(n_sym):
        a = int((start_s + (i + 0.25) * sym_s) * RATE)
        seg = x[a : a + int(sym_s / 2 * RATE)]
        X = np.abs(np.fft.rfft(seg * np.hanning(len(seg)), 1 << 16))
        out.append(np.argmax(X) * RATE / (1 << 16))
    return np.asarray(out)


def test_ft8_eight_tones_6_25_hz_apart() -> None:
    x, info = distractor_info("ft8", 15 * RATE, np.random.default_rng(1), stations=1, base_hz=1000.0, slot_phase_s=14.0)
    st = info["stations"][0]
    f = _symbol_tones(x, 15 - 14 + 0.5 + st["dt_s"], 0.16, 79)
    k = (f - 1000) / 6.25
    assert np.all(np.abs(k - np.round(k)) < 0.08)  # every symbol on the 6.25 Hz grid
    assert sorted(set(np.round(k).astype(int).tolist())) == list(range(8))  # eight tones
    for pos in (0, 36, 72):  # the Costas sync blocks
        assert np.round(k[pos : pos + 7]).astype(int).tolist() == [3, 1, 4, 0, 6, 5, 2]
    # one 12.64 s transmission starting ~0.5 s into the slot (the slot edge is 1 s into the segment)
    env = _smooth(np.abs(hilbert(x)), 20)
    a, ln = _runs(env > 0.5 * env.max())
    assert len(a) == 1 and ln[0] / RATE == pytest.approx(12.64, abs=0.1) and a[0] / RATE == pytest.approx(1.5, abs=0.7)
    assert info["stations"][0]["base_hz"] == 1000


def test_ft4_four_tones_20_8_hz_apart() -> None:
    x, info = distractor_info("ft4", 7 * RATE, np.random.default_rng(2), stations=1, base_hz=1500.0, slot_phase_s=7.0)
    f = _symbol_tones(x, 7.5 - 7.0 + 0.5 + info["stations"][0]["dt_s"], 0.048, 103)
    k = (f - 1500) / (12000 / 576)
    assert np.all(np.abs(k - np.round(k)) < 0.1)
    assert sorted(set(np.round(k).astype(int).tolist())) == list(range(4))


@pytest.mark.parametrize("seed", range(3))
def test_ofdm_equally_spaced_carriers_and_cyclic_prefix(seed: int) -> None:
    x, info = distractor_info("ofdm", 10 * RATE, np.random.default_rng(seed))
    # the cyclic prefix: the autocorrelation over lags 40-400 peaks at the useful symbol length N
    lags = np.arange(40, 400)
    r = np.array([x[:-lag] @ x[lag:] for lag in lags])
    N = int(lags[np.argmax(r)])
    assert N == round(RATE * info["ts"])
    # symbol-synchronous FFTs of the useful parts: energy in 16-30 adjacent bins (carriers 1/Ts apart), none elsewhere
    L = N + round(RATE * info["tcp"])
    s0 = info["start_sample"] + L  # skip the first symbol (its fade-in)
    P = np.mean([np.abs(np.fft.rfft(x[s + L - N : s + L])) ** 2 for s in range(s0, len(x) - 2 * L, L)], axis=0)
    on = np.flatnonzero(P > 0.1 * P.max())
    assert 16 <= len(on) <= 30 and np.all(np.diff(on) == 1)  # equally spaced carriers
    assert P[on].min() > 0.5 * P[on].max() and P.sum() - P[on].sum() < 1e-6 * P.sum()
    assert on[0] * RATE / N >= 300 and on[-1] * RATE / N <= 2850


@pytest.mark.parametrize("mode", ["martin1", "scottie1", "robot36"])
def test_sstv_1200_hz_sync_at_line_rate(mode: str) -> None:
    x, info = distractor_info("sstv", 8 * RATE, np.random.default_rng(3), mode=mode, vis=False)
    fi = _inst_freq(x, 0.5)
    a, ln = _runs(fi < 1300)
    starts = a[ln > 0.003 * RATE] / RATE
    assert len(starts) >= int(7 / info["line_s"]) - 1
    assert np.median(np.diff(starts)) == pytest.approx(info["line_s"], abs=0.001)
    video = fi[(fi >= 1300)]
    assert np.mean((video > 1450) & (video < 2350)) > 0.97  # luminance/chroma between black and white


def test_sstv_vis_header() -> None:
    x, info = distractor_info("sstv", 4 * RATE, np.random.default_rng(4), mode="martin1", vis=True)
    fi = _inst_freq(x, 2)
    assert np.median(fi[int(0.05 * RATE) : int(0.25 * RATE)]) == pytest.approx(1900, abs=10)  # leader tone
    assert info["header_s"] == pytest.approx(0.91)


def test_radar_fmcw_periodic_sweep() -> None:
    x, info = distractor_info(
        "radar", 3 * RATE, np.random.default_rng(0), variant="fmcw", sweeps_s=10.0, bandwidth_hz=8000.0, offset_hz=1000.0, up=True
    )
    env = _smooth(np.abs(hilbert(x)), 2)
    e = env - env.mean()
    lags = np.arange(int(0.02 * RATE), int(0.3 * RATE))
    r = np.array([e[:-lag] @ e[lag:] for lag in lags])
    assert lags[np.argmax(r)] / RATE == pytest.approx(0.1, abs=0.002)
    # within each burst the frequency rises at bandwidth x sweep rate = 80 kHz/s
    fi = _inst_freq(x, 0.5)
    a, ln = _runs(env > 0.8 * env.max())
    slopes = [np.polyfit(np.arange(m) / RATE, fi[s : s + m], 1)[0] for s, m in zip(a, ln) if m > 0.02 * RATE]
    assert len(slopes) >= 20 and np.median(slopes) == pytest.approx(80000, rel=0.1)


def test_radar_pulsed_repetition() -> None:
    x, info = distractor_info("radar", 2 * RATE, np.random.default_rng(1), variant="pulsed", sweeps_s=25.0, group=1)
    env = _smooth(np.abs(hilbert(x)), 1)
    p, _ = find_peaks(env, height=0.5 * env.max(), distance=int(0.01 * RATE))
    assert np.median(np.diff(p)) / RATE == pytest.approx(0.04, abs=0.001)


@pytest.mark.parametrize("seed", range(3))
def test_qrn_heavy_tailed_clustered_impulses(seed: int) -> None:
    x, info = distractor_info("qrn", 20 * RATE, np.random.default_rng(seed))
    s = x.std()
    kurt = np.mean((x - x.mean()) ** 4) / s**4
    assert kurt > 15  # Gaussian noise: 3
    assert np.mean(np.abs(x) > 6 * s) > 1e-3  # Gaussian: 2e-9
    env = _smooth(np.abs(x), 1)
    p, _ = find_peaks(env, height=10 * np.median(env), distance=int(0.002 * RATE))
    d = np.diff(p)
    assert len(p) > 10 and d.std() / d.mean() > 1.3  # clustered (Poisson: 1)
    f, P = welch(x, RATE, nperseg=512)
    assert P[(f > 300) & (f < 3000)].sum() > 0.95 * P.sum()  # broadband within the passband


def test_carriers_are_narrow_lines() -> None:
    x, info = distractor_info("carriers", 10 * RATE, np.random.default_rng(0), count=2, freqs=[700.0, 1900.0], drift_hz_s=0.0)
    f, X = _spectrum(x)
    near = (np.abs(f - 700) < 5) | (np.abs(f - 1900) < 5)
    assert X[near].sum() > 0.98 * X.sum()
    x2, info2 = distractor_info("carriers", 10 * RATE, np.random.default_rng(0), count=1, freqs=[1000.0], drift_hz_s=2.0)
    fi = _inst_freq(x2, 50)
    slope = np.polyfit(np.arange(len(fi))[RATE:-RATE] / RATE, fi[RATE:-RATE], 1)[0]
    assert slope == pytest.approx(2.0, abs=0.1)


def test_am_music_beat_carrier_and_rhythm() -> None:
    x, info = distractor_info("am_music", 12 * RATE, np.random.default_rng(0), tuning="beat", carrier_hz=800.0)
    f, X = _spectrum(x)
    assert abs(f[np.argmax(X)] - 800) < 1  # the carrier whistle
    assert X[(f > 300) & (f < 790)].sum() < 0.05 * X[f > 810].sum()  # one sideband, above the carrier
    y, info = distractor_info("am_music", 12 * RATE, np.random.default_rng(1), tuning="demod", carrier_hz=10.0)
    # note onsets: the onset strength repeats at the beat (or its half/double)
    e = np.sqrt(_smooth(y**2, 10)[:: int(0.01 * RATE)])
    on = np.maximum(np.diff(e), 0)
    on -= on.mean()
    r = np.correlate(on, on, "full")[len(on) - 1 :]
    beat = 60 / info["bpm"] * 100  # in 10 ms frames
    lag = np.argmax(r[int(0.2 * beat) : int(2.2 * beat)]) + int(0.2 * beat)
    assert min(abs(lag - k * beat) for k in (0.5, 1, 2)) < 3


def test_am_music_takes_real_samples() -> None:
    t = np.arange(3 * RATE) / RATE
    music = 0.3 * np.sin(2 * np.pi * 440 * t) + 0.2 * np.sin(2 * np.pi * 660 * t)
    x, info = distractor_info("am_music", 4 * RATE, np.random.default_rng(0), music=music, tuning="demod", carrier_hz=0.0)
    assert info["source"] == "caller"
    f, X = _spectrum(x)
    p, _ = find_peaks(X, height=0.1 * X.max())
    assert sorted(np.round(f[p]).tolist()) == pytest.approx([440, 660], abs=2)
    with pytest.raises(ValueError, match="music"):
        distractor("am_music", 100, np.random.default_rng(0), music=np.array([np.nan]))


@pytest.mark.parametrize("kind", KINDS)
def test_level_finite_no_clipping_deterministic(kind: str) -> None:
    from streamkit.data.hf_channel_stages import active_level_db

    for seed in range(3):
        n = int((2 + 6 * seed) * RATE)
        x = distractor(kind, n, np.random.default_rng(seed), level_db=-20)
        assert x.dtype == np.float32 and x.shape == (n,) and np.all(np.isfinite(x))
        assert np.abs(x).max() <= 0.99 + 1e-6
        lvl = active_level_db(x)
        assert lvl is not None and (lvl == pytest.approx(-20, abs=0.05) or np.abs(x).max() >= 0.99 - 1e-4)  # lower only when the peak cap binds
        np.testing.assert_array_equal(x, distractor(kind, n, np.random.default_rng(seed), level_db=-20))
        assert not np.array_equal(x, distractor(kind, n, np.random.default_rng(seed + 10), level_db=-20))
    assert distractor(kind, 0, np.random.default_rng(0)).shape == (0,)


def test_bad_arguments() -> None:
    with pytest.raises(ValueError, match="unknown distractor kind"):
        distractor("voice", 100, np.random.default_rng(0))
    with pytest.raises(ValueError, match="rate"):
        distractor("cw", 100, np.random.default_rng(0), rate=4000)
    with pytest.raises(ValueError, match="n_samples"):
        distractor("cw", -1, np.random.default_rng(0))
    with pytest.raises(ValueError, match="seconds"):
        nonspeech_file("cw", 0, np.random.default_rng(0))


def test_nonspeech_file_is_received_distractor() -> None:
    y = nonspeech_file("rtty", 6, np.random.default_rng(7), severity=0.3)
    assert y.dtype == np.float32 and y.shape == (6 * RATE,) and np.all(np.isfinite(y)) and np.abs(y).max() <= 1
    np.testing.assert_array_equal(y, nonspeech_file("rtty", 6, np.random.default_rng(7), severity=0.3))
    f, P = welch(y, RATE, nperseg=2048)
    assert P[(f > 300) & (f < 2800)].sum() > 0.9 * P.sum()  # through the SSB passband
    top = f[np.argmax(P)]
    assert 300 < top < 2800


def test_place_distractors_keeps_off_speech() -> None:
    n = 120 * RATE
    iv = np.array([[10 * RATE, 15 * RATE], [40 * RATE, 41 * RATE], [42 * RATE, 50 * RATE], [100 * RATE, 101 * RATE]])
    rng = np.random.default_rng(0)
    for _ in range(50):
        pl = place_distractors(rng, iv, n, 1.0)
        assert len(pl) == 4  # the 1 s pause between 41 and 42 s has no room
        for a, b in pl:
            assert 2 * RATE <= b - a <= 20 * RATE and a >= 0.25 * RATE and b <= n - 0.25 * RATE
            assert np.all((b + 0.5 * RATE <= iv[:, 0]) | (a >= iv[:, 1] + 0.5 * RATE))
    assert place_distractors(rng, iv, n, 0.0) == []


def test_simulate_mix_refers_levels_to_speech() -> None:
    from streamkit.data.hf_channel import ChannelParams, simulate

    t = np.arange(20 * RATE) / RATE
    clean = (0.3 * np.sin(2 * np.pi * 500 * t) * (t < 5)).astype(np.float32)
    d = np.zeros_like(clean)
    d[10 * RATE : 15 * RATE] = distractor("carriers", 5 * RATE, np.random.default_rng(0), level_db=-10)
    p = ChannelParams(snr_db=20.0, seed=3)
    a = simulate_mix(clean, d, p)
    b = simulate(clean, p)
    assert a.params.speech_level_db == b.params.speech_level_db  # not raised by the distractor
    np.testing.assert_array_equal(simulate_mix(clean, None, p).received, b.received)
    with pytest.raises(ValueError, match="shape"):
        simulate_mix(clean, d[:-1], p)


# ------------------------------------------------------------------------------------ corpus
#: SHA-256 of `generate(out, hours=0.01, seed=3, splits=(1, 0, 0), metrics=False)` made with the code
#: before distractors existed (espeak-ng 1.51): --distractors 0 must reproduce it byte for byte
BEFORE = {
    "manifest.json": "7dd19cb1af1c333e55299732f437146cbea24e67be0b64eaf8d25d22c7b5fa9a",
    "train/audio/train_00000.wav": "5901946f35aa24018d35bc2028533aa2885d70dd802db521d8bf5085d63df739",
    "train/clean/train_00000.wav": "68b512d225731e19e9b31a8f4b8c1b3cde489229c7e17510478483244e9e7968",
    "train/labels/train_00000.json": "227c39776384062e058967d6e1c4b0e24ed6aa9d11ea9165e2940be99ee5fde8",
    "train/rttm/train_00000.rttm": "a4795c5e697dce94c1b762894e4de03a2252595945928ab39b1e60002c06586d",
}
KW = {"hours": 0.01, "seed": 3, "splits": (1, 0, 0)}


@pytest.fixture(scope="module")
def corpora(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    from streamkit.data import tts
    from streamkit.data.hf_corpus import generate

    tts.require_espeak()
    root = tmp_path_factory.mktemp("hfd")
    generate(root / "p0", metrics=False, **KW)
    generate(root / "p1", metrics=True, distractors=1.0, **KW)
    return root / "p0", root / "p1"


def test_corpus_without_distractors_is_unchanged(corpora: tuple[Path, Path]) -> None:
    from streamkit.data.tts import espeak_version

    p0, _ = corpora
    got = {str(p.relative_to(p0)): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(p0.rglob("*")) if p.is_file()}
    assert espeak_version() == "1.51", "the reference hashes were made with espeak-ng 1.51"
    assert got == BEFORE


def test_corpus_distractors_labelled_nonspeech(corpora: tuple[Path, Path]) -> None:
    from streamkit.data.hf_corpus import corpus_table

    p0, p1 = corpora
    man = json.loads((p1 / "manifest.json").read_text())
    assert "--distractors 1" in man["command"] and man["distractors"] == 1.0
    fid = man["files"]["train"][0]["id"]
    d = p1 / "train"
    for sub, ext in [("clean", "wav"), ("rttm", "rttm")]:  # speech and its labels unchanged
        assert (d / sub / f"{fid}.{ext}").read_bytes() == (p0 / "train" / sub / f"{fid}.{ext}").read_bytes()
    lab = json.loads((d / "labels" / f"{fid}.json").read_text())
    lab0 = json.loads((p0 / "train" / "labels" / f"{fid}.json").read_text())
    assert lab["intervals"] == lab0["intervals"] and "distractors" not in lab0
    iv = np.asarray(lab["intervals"])
    ds = lab["distractors"]
    assert len(ds) >= 4  # every silence of a ~150 s file has room
    track, sr = sf.read(str(d / "distractors" / f"{fid}.wav"), dtype="float32")
    assert sr == RATE and track.shape == (lab["n_samples"],)
    inside = np.zeros(track.shape[0], bool)
    for r in ds:
        a, b = r["start"], r["stop"]
        assert r["kind"] in KINDS and -10.5 <= r["level_db"] <= 6.01 or r["kind"] == "qrn"
        assert 2 * RATE <= b - a <= 20 * RATE
        assert np.all((b + 0.5 * RATE <= iv[:, 0]) | (a >= iv[:, 1] + 0.5 * RATE))  # never overlaps speech
        assert np.any(track[a:b] != 0)
        inside[a:b] = True
    assert not np.any(track[~inside])
    a0, _ = sf.read(str(p0 / "train" / "audio" / f"{fid}.wav"))
    a1, _ = sf.read(str(d / "audio" / f"{fid}.wav"))
    assert a0.shape == a1.shape and not np.array_equal(a0, a1)
    assert np.isfinite(lab["metrics"]["sdr_db"]) and 0 <= lab["metrics"]["stoi"] <= 1
    assert man["files"]["train"][0]["distractor_samples"] == sum(r["stop"] - r["start"] for r in ds)
    assert "distr. %" in corpus_table(p1).splitlines()[0] and "distr. %" not in corpus_table(p0)


def test_trainer_adds_distractor_track(corpora: tuple[Path, Path]) -> None:
    from streamkit.data.hf_channel import ChannelParams
    from streamkit.models.train_sad_dnn import Corpus, _file_signal, _read, _to_pcm16

    _, p1 = corpora
    it = Corpus(p1, "train").items[0]
    got = _file_signal(it, 1, 0, 0, 0.5)
    rng = np.random.default_rng(np.random.SeedSequence([0, 2, 1, 0]))
    want = _to_pcm16(simulate_mix(_read(it["clean"]), _read(it["distractors"]), ChannelParams.random(rng, 0.5)).received)
    np.testing.assert_array_equal(got, want)
    plain = dict(it, distractors=it["distractors"].with_name("missing.wav"))
    assert not np.array_equal(_file_signal(plain, 1, 0, 0, 0.5), got)


def test_cli_distractors_option(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from streamkit.cli.corpus import add_hf_arguments, run_hf

    ns = add_hf_arguments(argparse.ArgumentParser()).parse_args(["--out", str(tmp_path / "c"), "--distractors", "1.5"])
    assert run_hf(ns) == 2
    assert "--distractors" in capsys.readouterr().err
    ns = add_hf_arguments(argparse.ArgumentParser()).parse_args(
        ["--out", str(tmp_path / "c"), "--hours", "0.001", "--seed", "3", "--splits", "1", "0", "0", "--no-metrics", "--distractors", "0.5"]
    )
    assert run_hf(ns) == 0
    assert "distr. %" in capsys.readouterr().out
    assert (tmp_path / "c" / "train" / "distractors").is_dir()


def test_cw_text_override() -> None:
    x, info = distractor_info("cw", 8 * RATE, np.random.default_rng(0), text="sos", wpm=20, hand=False)
    env = _smooth(np.abs(hilbert(x)), 2)
    _, on = _runs(env > 0.5 * env.max())
    assert np.round(on[:9] / RATE / 0.06).astype(int).tolist() == [1, 1, 1, 3, 3, 3, 1, 1, 1]  # ... --- ...
    with pytest.raises(ValueError, match="Morse"):
        distractor("cw", RATE, np.random.default_rng(0), text="###")


@pytest.mark.parametrize("kind", KINDS)
def test_any_length(kind: str) -> None:
    """Lengths from one sample to shorter than a kind's start delay or symbol: no error, finite audio."""
    for n in (1, 7, 100, 1044, int(0.3 * RATE)):
        for seed in range(3):
            x = distractor(kind, n, np.random.default_rng(seed))
            assert x.shape == (n,) and np.all(np.isfinite(x))


def test_am_music_slow_tempo_long_notes() -> None:
    """A slow tempo's last chord rings past the buffer end (was a broadcast error mid-corpus)."""
    r = np.random.default_rng(31)
    n = int(r.uniform(2, 20) * RATE)
    x, info = distractor_info("am_music", n, r)
    assert x.shape == (n,) and info["bpm"] < 80
