"""The statistical SAD's harmonicity / pitch-consistency gate (``harmonic_gate``): the physics
(voiced speech keeps its score; tones, FSK, a multi-carrier modem comb, held chords and noise
get a low harmonic score), bit-exact streaming, configuration."""

from __future__ import annotations

import numpy as np
import pytest

from streamkit.core.errors import ConfigError
from streamkit.dsp.kernels.harmonic import harmonic_gate, harmonic_setup, harmonic_state
from streamkit.dsp.stat_sad import DECISION_DEFAULTS, HOP, WIN, StatSAD, harmonic_features, stat_sad_scores
from streamkit.testing import assert_chunking_invariant, run_block
from streamkit.testing.signals import speechlike

RATE = 8000
SECONDS = 10.0
GATE = {"harmonic_gate": True}  # with the defaults' gate parameters
PAPER = {"harmonic_gate": False}  # the paper's stages alone
THR = DECISION_DEFAULTS["threshold"]
PAPER_THR = 0.185  # the paper pipeline's threshold (its dev-EER threshold)
RHO, SIGMA, V, G = range(4)  # columns of harmonic_features


def _t() -> np.ndarray:
    return np.arange(int(SECONDS * RATE)) / RATE


LEAD_S = 2.0  # noise alone before each signal (the gate acts on sounds well above the band's floor)


def _norm(y: np.ndarray, rng: np.random.Generator, snr_db: float = 20.0) -> np.ndarray:
    """``y`` at 20 dB over white noise, after ``LEAD_S`` of the noise alone."""
    y = np.concatenate([np.zeros(int(LEAD_S * RATE)), 0.1 * y / np.std(y)])
    return (y + 0.1 * 10 ** (-snr_db / 20) * rng.standard_normal(y.shape[0])).astype(np.float32)


def tone(rng: np.random.Generator) -> np.ndarray:
    return _norm(np.sin(2 * np.pi * 1000.0 * _t()), rng)


def fsk(rng: np.random.Generator) -> np.ndarray:
    """RTTY: two tones 170 Hz apart, 45.45 Bd, phase-continuous."""
    t = _t()
    bits = rng.integers(0, 2, int(SECONDS * 45.45) + 2)
    f = np.where(bits[(t * 45.45).astype(int)] == 1, 1085.0, 915.0)
    return _norm(np.sin(2 * np.pi * np.cumsum(f) / RATE), rng)


def multicarrier(rng: np.random.Generator, carriers: int = 20, spacing: float = 62.5, baud: float = 62.5, f1: float = 600.0) -> np.ndarray:
    """OFDM-like modem: ``carriers`` QPSK carriers ``spacing`` Hz apart, new phases every symbol."""
    t = _t()
    sym = (t * baud).astype(int)
    y = np.zeros(t.shape[0])
    for c in range(carriers):
        ph = rng.integers(0, 4, sym[-1] + 1) * (np.pi / 2)
        y += np.cos(2 * np.pi * (f1 + c * spacing) * t + ph[sym])
    return _norm(y, rng)


def chords(rng: np.random.Generator, hold_s: float = 0.8, snr_db: float = 20.0) -> np.ndarray:
    """Held triads (C, Am, F) of harmonic notes, each chord held ``hold_s``."""
    t = _t()
    triads = [(261.6, 329.6, 392.0), (220.0, 261.6, 329.6), (174.6, 220.0, 261.6)]
    y = np.zeros(t.shape[0])
    for k, a in enumerate(np.arange(0.0, SECONDS, hold_s)):
        m = (t >= a) & (t < a + hold_s)
        for f in triads[k % 3]:
            for h in range(1, 8):
                y[m] += np.sin(2 * np.pi * f * h * t[m]) / h
    return _norm(y, rng, snr_db)


def noise(rng: np.random.Generator) -> np.ndarray:
    return (0.05 * rng.standard_normal(int((LEAD_S + SECONDS) * RATE))).astype(np.float32)


def voiced(rng: np.random.Generator) -> np.ndarray:
    """Continuous speech-like voicing (harmonic comb, gliding f0, syllable AM) at 20 dB SNR."""
    return _norm(speechlike(int(SECONDS * RATE), rng, rate=RATE), rng)


DISTRACTORS = {"tone": tone, "fsk": fsk, "ofdm20": multicarrier, "chords": chords, "noise": noise}


def settled(a: np.ndarray) -> np.ndarray:
    return a[round((LEAD_S + 1.0) * RATE / HOP) :]  # the signal after its first second (the gate's averages settle)


# -- physics ------------------------------------------------------------------------------------------


def test_voiced_speech_is_harmonic_and_keeps_its_score():
    x = voiced(np.random.default_rng(1))
    f = settled(harmonic_features(x))
    assert np.median(f[:, RHO]) > 4.0  # a sharp cepstral peak: many harmonics
    assert np.median(f[:, SIGMA]) < 0.3  # the comb moves (f0 glides)
    assert f[:, V].mean() > 0.5
    assert f[:, G].mean() > 0.95
    off, _, _ = stat_sad_scores(x, **PAPER)
    on, _, _ = stat_sad_scores(x, **GATE)
    s_off, s_on = settled(off), settled(on)
    assert np.mean(s_off > PAPER_THR) > 0.7
    assert np.mean(s_on > THR) >= np.mean(s_off > PAPER_THR) - 0.02


@pytest.mark.parametrize("name", sorted(DISTRACTORS))
def test_non_speech_gets_a_low_harmonic_score(name):
    x = DISTRACTORS[name](np.random.default_rng(2))
    f = settled(harmonic_features(x))
    assert np.median(f[:, RHO]) < 2.6, "no comb standing above its gaps"
    assert f[:, V].mean() < 0.25, "little voiced-speech evidence"
    if name in ("tone", "chords"):  # steady: the comb (or line) stays where it was
        assert np.median(f[:, SIGMA]) > 0.6
        assert f[:, G].mean() < 0.15
    elif name != "noise":  # (noise is the floor itself: there the gate does not judge)
        assert f[:, G].mean() < 0.5


def test_held_chords_are_speech_to_the_paper_stages_but_not_with_the_gate():
    """The regression the gate fixes: music with held notes passes the energy stages."""
    x = chords(np.random.default_rng(3))
    off, _, _ = stat_sad_scores(x, **PAPER)
    on, _, _ = stat_sad_scores(x, **GATE)
    assert np.mean(settled(off) > PAPER_THR) > 0.2
    assert np.mean(settled(on) > THR) < 0.05 and np.mean(settled(on) > PAPER_THR) < 0.05
    r = run_block(StatSAD(**GATE), x[:, None], rate=RATE, sizes=800)
    assert sum(e.span[1] - e.span[0] for e in r.events_of("vad.segment")) < 0.05 * x.shape[0]


def test_espeak_speech_keeps_its_score():
    tts = pytest.importorskip("streamkit.data.tts")
    try:
        tts.require_espeak()
    except Exception as exc:  # espeak-ng not installed here
        pytest.skip(str(exc))
    rng = np.random.default_rng(4)
    parts = []
    for voice in ("en", "de+f2", "fr+m3"):
        v = tts.Voice.parse(voice)
        s = tts.synthesize(tts.random_text(rng, v.text_language, 12), v)
        parts += [np.zeros(RATE), s / np.std(s)]
    y = np.concatenate(parts + [np.zeros(RATE)])
    x = (0.1 * y + 0.002 * rng.standard_normal(y.shape[0])).astype(np.float32)
    off, _, _ = stat_sad_scores(x, **PAPER)
    on, _, _ = stat_sad_scores(x, **GATE)
    sp = off > PAPER_THR
    assert sp.mean() > 0.3
    assert np.mean(on[sp] > THR) > 0.9  # the frames the paper's stages call speech stay speech


def test_silence_and_constant_spectrum_are_finite_without_comb():
    hpar, taper, rev, tw = harmonic_setup(RATE / 1024, 384, HOP / RATE, 3.0, 0.5, 0.5, 0.2, 10.0)
    for y2 in (np.zeros((20, 384)), np.ones((20, 384))):
        st = harmonic_state(hpar)
        sc = np.ones(20)
        feats = np.zeros((20, 4))
        harmonic_gate(y2, hpar, taper, rev, tw, st, sc, feats)
        assert np.all(np.isfinite(feats)) and np.all(np.isfinite(st)) and np.all(np.isfinite(sc))
        assert np.all(feats[:, RHO] == 0.0) and np.all(feats[:, V] < 0.01)


def test_gate_acts_only_well_above_the_floor():
    """A weak held chord (0 dB SNR) is not gated: without clear harmonics at that SNR,
    their absence says nothing; the same chord at 20 dB is."""
    weak = chords(np.random.default_rng(6), snr_db=0.0)
    strong = chords(np.random.default_rng(6), snr_db=20.0)
    assert settled(harmonic_features(weak))[:, G].mean() > 0.8
    assert settled(harmonic_features(strong))[:, G].mean() < 0.15


# -- streaming, configuration ---------------------------------------------------------------------------


def _mixed() -> np.ndarray:
    rng = np.random.default_rng(5)
    n = int(SECONDS * RATE)
    x = noise(rng).astype(np.float64)[:n]
    x[RATE : 4 * RATE] += voiced(rng)[int(LEAD_S * RATE) :][: 3 * RATE]
    x[5 * RATE : 8 * RATE] += chords(rng)[int(LEAD_S * RATE) :][: 3 * RATE]
    return x.astype(np.float32)


def test_chunking_invariance_with_the_gate():
    x = _mixed()
    r = assert_chunking_invariant(lambda: StatSAD(**GATE), x[:, None], rate=RATE, sizes=("all", 1, 7, 160, "random"))
    assert r.events_of("vad.segment")
    ref, hop, win = stat_sad_scores(x, **GATE)
    assert (hop, win) == (HOP, WIN)
    np.testing.assert_array_equal(r.samples[:, 0], ref)
    assert not np.array_equal(ref, stat_sad_scores(x, **PAPER)[0])  # the gate did something


@pytest.mark.parametrize(
    "kw",
    [{"harmonic_gate": "yes"}, {"harmonic_frac": 0.0}, {"harmonic_rho": 0.5}, {"harmonic_tau_s": -1.0},
     {"harmonic_gate": True, "bands_hz": ((100.0, 500.0),)}],
)  # fmt: skip
def test_rejects_bad_gate_params(kw):
    with pytest.raises(ConfigError):
        StatSAD(**kw)
