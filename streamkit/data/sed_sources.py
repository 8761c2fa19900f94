"""Procedural sound-event sources for the SED corpus (the 10 classes of DCASE 2019 task 4).

Every non-speech class is synthesised from numpy noise, oscillators and filters; speech is
espeak-ng (:mod:`streamkit.data.tts`). No recordings are shipped or read: no Debian/PyPI package
with recordings of these classes under a licence compatible with MIT redistribution of derived
audio was found (``sound-theme-freedesktop`` has a few bells/alarms, but under mixed GPL/CC-BY-SA
terms, and is not installed here), so the corpus is fully synthetic and reproducible from a seed.

One line per class (each event draws its own pitch, duration and timbre, so a class is a family of
sounds, learnable but not a single template):

* ``Speech``: espeak-ng, a random voice (language + variant), rate 120-220 wpm, pitch 20-80, random
  words of the voice's language, cut to the drawn length at a fade.
* ``Dog``: 1-5 barks of 80-250 ms: harmonic bursts (f0 250-700 Hz, falling 20-40 %) with a noisy
  attack, two random formants (500-1500 / 1500-3500 Hz), 100-350 ms apart.
* ``Cat``: 1-2 meows of 0.4-1.2 s: harmonic tone, f0 400-1000 Hz rising then falling, a formant
  sweeping up then down ("mi-a-ow"), slight vibrato and breath noise.
* ``Alarm_bell_ringing``: one of three families: struck bell (inharmonic partials 1, 2.0, 2.76,
  5.40, 8.93 × 300-1200 Hz, exponential decay, 1-6 strikes), electronic beeper (square wave
  1-4 kHz, on/off pattern), phone ring (two tones, 15-25 Hz trill, ring/pause cadence).
* ``Dishes``: 3-25 clinks at random times: 2-5 damped high modes (1.5-7.5 kHz, 20-250 ms decay)
  excited by a click, plus short clatter noise bursts.
* ``Frying``: sizzle: high-passed noise (1.5-4 kHz corner) with slow level drift plus a dense
  Poisson crackle of tiny clicks (50-400 per second).
* ``Blender``: motor harmonics (f0 70-220 Hz, 10-25 harmonics with a random spectral tilt, rpm
  wobble) plus band noise, chopped by the load at 2-8 Hz, run-up and run-down ramps.
* ``Running_water``: low-passed pink-ish noise (rush) plus bubbles: hundreds of short rising sine
  chirps (300-3000 Hz) per second with random amplitudes.
* ``Vacuum_cleaner``: broadband noise through a resonant band (300-2000 Hz) plus a high motor whine
  (700-2500 Hz, 2-4 harmonics) and slow suction modulation; soft start and stop.
* ``Electric_shaver_toothbrush``: buzz: pulse train (90-300 Hz) rich in harmonics through a
  band-pass (1-5 kHz), amplitude modulated at 0.5-3 Hz by skin/tooth contact, plus rattle noise.

Non-target sounds (:func:`render_distractor`, the ``wide`` domain gap of the corpus: real recordings
hold sounds outside the ten classes, which the synthetic mixes never show):

* ``knock``: 2-6 low thumps (damped 80-250 Hz modes plus a noise click), 0.1-0.3 s apart.
* ``typing``: keyboard clicks: 6-14 per second, band-passed noise bursts of 5-15 ms at 1.5-6 kHz.
* ``footsteps``: heel-toe pairs of low-passed noise thumps at 1.4-2.4 steps per second.
* ``music``: a melody of plucked notes (2-6 harmonics with an exponential decay) on a random major
  or minor scale at 80-160 beats per minute, with a bass note every bar.
* ``door``: a creak (a 20-60 Hz pulse train through a 600-2500 Hz resonance, sweeping) and a slam.
* ``traffic``: a passing vehicle: low-passed noise with engine harmonics (25-60 Hz) and a Doppler
  glide, the level rising and falling over the event.

Real-domain source shift (:func:`shift_source`, also ``wide``): a real event is resampled so that
its frequencies scale by r and its tempo by r (another dog, another blender motor, another voice).

Determinism: :func:`render_event` depends only on (class, seed, target duration, rate) and the
espeak-ng version (speech), so an event can be regenerated from its recorded parameters.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
from scipy import signal

__all__ = ["CLASSES", "DISTRACTORS", "DURATION_S", "draw_duration", "render_distractor", "render_event", "shift_source", "trim_event"]

#: the DCASE 2019 task 4 classes (label strings as in DESED)
CLASSES: tuple[str, ...] = (
    "Alarm_bell_ringing",
    "Blender",
    "Cat",
    "Dishes",
    "Dog",
    "Electric_shaver_toothbrush",
    "Frying",
    "Running_water",
    "Speech",
    "Vacuum_cleaner",
)

#: target event duration range per class, seconds (short transients vs long stationary sounds)
DURATION_S: dict[str, tuple[float, float]] = {
    "Alarm_bell_ringing": (1.0, 6.0),
    "Blender": (2.0, 8.0),
    "Cat": (0.5, 2.5),
    "Dishes": (0.3, 3.0),
    "Dog": (0.3, 2.5),
    "Electric_shaver_toothbrush": (1.5, 8.0),
    "Frying": (3.0, 10.0),
    "Running_water": (2.0, 10.0),
    "Speech": (1.0, 5.0),
    "Vacuum_cleaner": (3.0, 10.0),
}

_TRIM_DB = -45.0  # trim_event: 10 ms frames this far below the loudest are silence at the edges


def draw_duration(rng: np.random.Generator, cls: str) -> float:
    lo, hi = DURATION_S[cls]
    return float(rng.uniform(lo, hi))


# --------------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------------


def _ramp(n: int, attack: int, release: int) -> np.ndarray:
    e = np.ones(n)
    a, r = min(attack, n // 2), min(release, n // 2)
    if a > 0:
        e[:a] = np.linspace(0.0, 1.0, a, endpoint=False)
    if r > 0:
        e[n - r :] = np.linspace(1.0, 0.0, r)
    return e


def _bp(x: np.ndarray, lo: float, hi: float, rate: int, order: int = 2) -> np.ndarray:
    nyq = rate / 2
    lo, hi = max(lo, 20.0), min(hi, 0.95 * nyq)
    if hi <= lo * 1.05:
        hi = min(lo * 1.3, 0.97 * nyq)
    sos = signal.butter(order, [lo / nyq, hi / nyq], btype="band", output="sos")
    return signal.sosfilt(sos, x)


def _hp(x: np.ndarray, fc: float, rate: int, order: int = 2) -> np.ndarray:
    return signal.sosfilt(signal.butter(order, min(fc, 0.45 * rate) / (rate / 2), btype="high", output="sos"), x)


def _lp(x: np.ndarray, fc: float, rate: int, order: int = 2) -> np.ndarray:
    return signal.sosfilt(signal.butter(order, min(fc, 0.45 * rate) / (rate / 2), btype="low", output="sos"), x)


def _harmonics(f0: np.ndarray, rate: int, n_harm: int, tilt_db: float, rng: np.random.Generator) -> np.ndarray:
    """Sum of harmonics of the f0 track (Hz per sample), amplitude k^(tilt/6.02), random phases, band-limited."""
    phase = 2 * np.pi * np.cumsum(f0) / rate
    out = np.zeros_like(phase)
    fmax = float(np.max(f0))
    for k in range(1, n_harm + 1):
        if k * fmax >= 0.45 * rate:
            break
        out += (k ** (tilt_db / 6.02)) * np.sin(k * phase + rng.uniform(0, 2 * np.pi))
    return out


def _smooth_noise(rng: np.random.Generator, n: int, rate: int, fc: float) -> np.ndarray:
    """Slow random control signal (unit std) with bandwidth ~fc Hz."""
    step = max(1, int(rate / max(fc * 4, 1e-3)))
    k = n // step + 3
    pts = rng.standard_normal(k)
    return np.interp(np.arange(n) / step, np.arange(k), pts)


def _place(dst: np.ndarray, src: np.ndarray, at: int) -> None:
    if at >= len(dst):
        return
    m = min(len(src), len(dst) - at)
    dst[at : at + m] += src[:m]


def _formants(x: np.ndarray, rate: int, rng: np.random.Generator, bands: list[tuple[float, float]], q: float = 4.0) -> np.ndarray:
    y = np.zeros_like(x)
    for lo, hi in bands:
        fc = rng.uniform(lo, hi)
        y += rng.uniform(0.5, 1.0) * _bp(x, fc * (1 - 0.5 / q), fc * (1 + 0.5 / q), rate)
    return y


# --------------------------------------------------------------------------------------------
# classes (rng, rate, n samples target) -> (audio float64, info)
# --------------------------------------------------------------------------------------------


def _dog(rng: np.random.Generator, rate: int, n: int) -> tuple[np.ndarray, dict[str, Any]]:
    out = np.zeros(n)
    f0 = rng.uniform(250, 700)
    tilt = rng.uniform(-9, -3)
    bands = [(500, 1500), (1500, 3500)]
    fc = [rng.uniform(*b) for b in bands]
    pos, barks = 0, 0
    while pos < n and barks < 5:
        m = int(rng.uniform(0.08, 0.25) * rate)
        if pos + m > n and barks > 0:
            break
        m = min(m, n - pos)
        t = np.linspace(0, 1, m)
        track = f0 * rng.uniform(0.9, 1.1) * (1 - rng.uniform(0.2, 0.4) * t)
        h = _harmonics(track, rate, 20, tilt, rng)
        h += 0.5 * rng.standard_normal(m) * np.exp(-t * 8)
        y = sum(_bp(h, c * 0.8, c * 1.25, rate) for c in fc) + 0.3 * h
        env = (1 - np.exp(-t * 60)) * np.exp(-t * rng.uniform(2, 5))
        out[pos : pos + m] += y * env
        barks += 1
        pos += m + int(rng.uniform(0.1, 0.35) * rate)
    return out, {"f0_hz": round(f0, 1), "barks": barks}


def _cat(rng: np.random.Generator, rate: int, n: int) -> tuple[np.ndarray, dict[str, Any]]:
    out = np.zeros(n)
    f0 = rng.uniform(400, 1000)
    k = 1 if n < 1.2 * rate or rng.random() < 0.5 else 2
    pos = 0
    seg = n // k
    for _ in range(k):
        m = min(int(seg * rng.uniform(0.75, 1.0)), n - pos)
        if m < int(0.1 * rate):
            break
        t = np.linspace(0, 1, m)
        contour = 1 + rng.uniform(0.15, 0.5) * np.sin(np.pi * t ** rng.uniform(0.6, 1.2))
        vib = 1 + 0.02 * np.sin(2 * np.pi * rng.uniform(5, 8) * t * m / rate)
        track = f0 * contour * vib * rng.uniform(0.9, 1.1)
        h = _harmonics(track, rate, 12, rng.uniform(-10, -4), rng)
        # formant sweeping up then down: time-varying mix of two band-passed copies
        lo_f, hi_f = rng.uniform(700, 1200), rng.uniform(1800, 3200)
        a = _bp(h, lo_f * 0.75, lo_f * 1.3, rate)
        b = _bp(h, hi_f * 0.75, hi_f * 1.3, rate)
        w = np.sin(np.pi * t)
        y = (1 - w) * a + w * b + 0.15 * h + 0.05 * rng.standard_normal(m)
        out[pos : pos + m] += y * _ramp(m, int(0.04 * rate), int(0.12 * rate))
        pos += m + int(rng.uniform(0.05, 0.2) * rate)
        if pos >= n:
            break
    return out, {"f0_hz": round(f0, 1), "meows": k}


def _alarm(rng: np.random.Generator, rate: int, n: int) -> tuple[np.ndarray, dict[str, Any]]:
    kind = ("bell", "beeper", "phone")[int(rng.integers(3))]
    t = np.arange(n) / rate
    out = np.zeros(n)
    if kind == "bell":
        f = rng.uniform(300, 1200)
        ratios = np.array([1.0, 2.0, 2.76, 5.40, 8.93]) * (1 + rng.uniform(-0.03, 0.03, 5))
        decay = rng.uniform(1.5, 5.0)
        strikes = int(rng.integers(1, 7))
        period = n / strikes
        m = n
        tt = np.arange(m) / rate
        tone = sum(
            rng.uniform(0.2, 1.0) / (i + 1) ** 0.5 * np.sin(2 * np.pi * f * r * tt) * np.exp(-tt * decay * (1 + 0.6 * i))
            for i, r in enumerate(ratios)
            if f * r < 0.45 * rate
        )
        for s in range(strikes):
            _place(out, tone * rng.uniform(0.7, 1.0), int(s * period))
        info = {"kind": kind, "f_hz": round(f, 1), "strikes": strikes}
    elif kind == "beeper":
        f = rng.uniform(1000, 4000)
        sq = np.sign(np.sin(2 * np.pi * f * t))
        sq = _lp(sq, min(7000, 0.45 * rate), rate, 4)
        on, off = rng.uniform(0.05, 0.3), rng.uniform(0.05, 0.3)
        gate = ((t % (on + off)) < on).astype(float)
        gate = np.convolve(gate, np.ones(int(0.003 * rate)) / int(0.003 * rate), mode="same")
        out = sq * gate
        info = {"kind": kind, "f_hz": round(f, 1), "on_s": round(on, 3), "off_s": round(off, 3)}
    else:
        f1, f2 = rng.uniform(400, 1200), rng.uniform(1.15, 1.5)
        trill = rng.uniform(15, 25)
        tones = np.where(np.sin(2 * np.pi * trill * t) >= 0, np.sin(2 * np.pi * f1 * t), np.sin(2 * np.pi * f1 * f2 * t))
        ring, pause = rng.uniform(0.8, 2.0), rng.uniform(0.4, 2.0)
        gate = ((t % (ring + pause)) < ring).astype(float)
        gate = np.convolve(gate, np.ones(int(0.01 * rate)) / int(0.01 * rate), mode="same")
        out = tones * gate
        info = {"kind": kind, "f_hz": round(f1, 1), "ring_s": round(ring, 3)}
    return out * _ramp(n, int(0.002 * rate), int(0.02 * rate)), info


def _dishes(rng: np.random.Generator, rate: int, n: int) -> tuple[np.ndarray, dict[str, Any]]:
    out = np.zeros(n)
    clinks = int(rng.integers(3, 26)) if n > 0.5 * rate else int(rng.integers(1, 5))
    base = rng.uniform(1500, 4500)
    times = np.sort(rng.uniform(0, max(n - int(0.05 * rate), 1), clinks)).astype(int)
    times[0] = 0
    for at in times:
        m = int(rng.uniform(0.1, 0.4) * rate)
        tt = np.arange(m) / rate
        y = np.zeros(m)
        for _ in range(int(rng.integers(2, 6))):
            f = min(base * rng.uniform(0.6, 1.8), 0.45 * rate)
            y += rng.uniform(0.3, 1.0) * np.sin(2 * np.pi * f * tt + rng.uniform(0, 6.3)) * np.exp(-tt / rng.uniform(0.02, 0.25))
        y[: int(0.004 * rate)] += rng.standard_normal(int(0.004 * rate)) * 0.8  # the click
        if rng.random() < 0.3:  # clatter
            k = min(int(rng.uniform(0.02, 0.08) * rate), m)
            y[:k] += _hp(rng.standard_normal(k), 2000, rate) * np.exp(-np.arange(k) / (0.3 * k))
        _place(out, y * rng.uniform(0.3, 1.0), int(at))
    return out, {"clinks": clinks, "base_hz": round(base, 1)}


def _frying(rng: np.random.Generator, rate: int, n: int) -> tuple[np.ndarray, dict[str, Any]]:
    fc = rng.uniform(1500, 4000)
    hiss = _hp(rng.standard_normal(n), fc, rate, 3) * np.exp(0.3 * _smooth_noise(rng, n, rate, 0.5))
    dens = rng.uniform(50, 400)
    k = rng.poisson(dens * n / rate)
    clicks = np.zeros(n)
    clicks[rng.integers(0, n, k)] = rng.standard_normal(k) * rng.uniform(1, 6, k)
    clicks = _hp(clicks, 2500, rate, 2)
    y = rng.uniform(0.3, 0.8) * hiss + clicks * 0.5
    return y * _ramp(n, int(0.2 * rate), int(0.3 * rate)), {"hiss_hz": round(fc, 1), "crackle_per_s": round(dens, 1)}


def _blender(rng: np.random.Generator, rate: int, n: int) -> tuple[np.ndarray, dict[str, Any]]:
    f0 = rng.uniform(70, 220)
    ru = rng.uniform(0.1, 0.6)
    t = np.arange(n) / rate
    spin = np.minimum(1.0, 0.4 + 0.6 * t / ru) * (1 + 0.02 * _smooth_noise(rng, n, rate, 2))
    h = _harmonics(f0 * spin, rate, int(rng.integers(10, 26)), rng.uniform(-6, 0), rng)
    h /= np.std(h) + 1e-12
    noise = _bp(rng.standard_normal(n), rng.uniform(300, 800), rng.uniform(2000, 6000), rate)
    noise /= np.std(noise) + 1e-12
    chop_f = rng.uniform(2, 8)
    chop = 1 - rng.uniform(0.2, 0.6) * (0.5 + 0.5 * np.sin(2 * np.pi * chop_f * t + 0.5 * _smooth_noise(rng, n, rate, 1)))
    y = (h + rng.uniform(0.3, 1.0) * noise) * chop
    return y * _ramp(n, int(ru * rate), int(rng.uniform(0.1, 0.5) * rate)), {"f0_hz": round(f0, 1), "chop_hz": round(chop_f, 2)}


def _water(rng: np.random.Generator, rate: int, n: int) -> tuple[np.ndarray, dict[str, Any]]:
    white = rng.standard_normal(n)
    rush = _lp(np.cumsum(white) * 0.02 + white * 0.3, rng.uniform(1500, 5000), rate, 2)
    rush = _hp(rush, 100, rate)
    rush /= np.std(rush) + 1e-12
    dens = rng.uniform(100, 600)
    k = rng.poisson(dens * n / rate)
    bub = np.zeros(n)
    m = int(0.012 * rate)
    tt = np.arange(m) / rate
    fs = np.exp(rng.uniform(math.log(300), math.log(3000), k))
    for at, f, a in zip(rng.integers(0, max(n - m, 1), k), fs, rng.uniform(0.2, 1.0, k)):
        chirp = np.sin(2 * np.pi * f * tt * (1 + 30 * tt)) * np.exp(-tt / 0.004)
        _place(bub, a * chirp, int(at))
    bub /= np.std(bub) + 1e-12
    y = rng.uniform(0.4, 1.0) * rush + rng.uniform(0.3, 1.0) * bub
    y *= np.exp(0.15 * _smooth_noise(rng, n, rate, 1))
    return y * _ramp(n, int(0.15 * rate), int(0.3 * rate)), {"bubbles_per_s": round(dens, 1)}


def _vacuum(rng: np.random.Generator, rate: int, n: int) -> tuple[np.ndarray, dict[str, Any]]:
    t = np.arange(n) / rate
    fr = rng.uniform(300, 2000)
    body = _bp(rng.standard_normal(n), fr * 0.6, fr * 1.6, rate) + 0.4 * _hp(rng.standard_normal(n), 1000, rate)
    body /= np.std(body) + 1e-12
    fw = rng.uniform(700, 2500)
    up = rng.uniform(0.3, 1.0)
    spin = np.minimum(1.0, 0.5 + 0.5 * t / up) * (1 + 0.005 * _smooth_noise(rng, n, rate, 0.5))
    whine = _harmonics(fw * spin, rate, int(rng.integers(2, 5)), -6, rng)
    whine /= np.std(whine) + 1e-12
    y = body + rng.uniform(0.1, 0.6) * whine
    y *= 1 + rng.uniform(0.05, 0.3) * _smooth_noise(rng, n, rate, rng.uniform(0.3, 2))
    return y * _ramp(n, int(up * rate), int(rng.uniform(0.3, 1.0) * rate)), {"resonance_hz": round(fr, 1), "whine_hz": round(fw, 1)}


def _shaver(rng: np.random.Generator, rate: int, n: int) -> tuple[np.ndarray, dict[str, Any]]:
    f0 = rng.uniform(90, 300)
    t = np.arange(n) / rate
    duty = rng.uniform(0.1, 0.4)
    ph = (np.cumsum(f0 * (1 + 0.01 * _smooth_noise(rng, n, rate, 3))) / rate) % 1.0
    pulse = (ph < duty).astype(float) - duty
    buzz = _bp(pulse, rng.uniform(800, 2000), rng.uniform(3000, 6000), rate, 2)
    buzz /= np.std(buzz) + 1e-12
    rattle = _hp(rng.standard_normal(n), 3000, rate) * rng.uniform(0.05, 0.3)
    am_f = rng.uniform(0.5, 3)
    am = 1 - rng.uniform(0.2, 0.7) * (0.5 + 0.5 * np.sin(2 * np.pi * am_f * t + rng.uniform(0, 6.3)))
    return (buzz + rattle) * am * _ramp(n, int(0.05 * rate), int(0.05 * rate)), {"f0_hz": round(f0, 1), "contact_hz": round(am_f, 2)}


def _speech(rng: np.random.Generator, rate: int, n: int) -> tuple[np.ndarray, dict[str, Any]]:
    from streamkit.data.tts import list_voices, random_text, synthesize

    voices = list_voices()
    voice = voices[int(rng.integers(len(voices)))]
    wpm = int(rng.integers(120, 221))
    pitch = int(rng.integers(20, 81))
    n_words = int(math.ceil(n / rate * wpm / 60 * 1.3)) + 1
    text = random_text(rng, voice.text_language, n_words)
    y = synthesize(text, voice, rate_wpm=wpm, pitch=pitch, out_rate=rate).astype(np.float64)
    y = trim_event(y, rate)
    if len(y) > n:
        y = y[:n] * _ramp(n, 0, int(0.03 * rate))
    return y, {"voice": voice.name, "rate_wpm": wpm, "pitch": pitch}


_SYNTH: dict[str, Callable[[np.random.Generator, int, int], tuple[np.ndarray, dict[str, Any]]]] = {
    "Alarm_bell_ringing": _alarm,
    "Blender": _blender,
    "Cat": _cat,
    "Dishes": _dishes,
    "Dog": _dog,
    "Electric_shaver_toothbrush": _shaver,
    "Frying": _frying,
    "Running_water": _water,
    "Speech": _speech,
    "Vacuum_cleaner": _vacuum,
}


def trim_event(x: np.ndarray, rate: int, floor_db: float = _TRIM_DB) -> np.ndarray:
    """Cut leading/trailing 10 ms frames more than ``floor_db`` below the loudest frame."""
    fr = max(1, rate // 100)
    k = len(x) // fr
    if k == 0:
        return x[:0]
    e = np.sqrt(np.mean(np.asarray(x[: k * fr], np.float64).reshape(k, fr) ** 2, axis=1))
    if e.max() <= 0:
        return x[:0]
    act = np.flatnonzero(e > e.max() * 10 ** (floor_db / 20))
    return x[act[0] * fr : (act[-1] + 1) * fr]


def render_event(cls: str, seed: int, duration_s: float, rate: int) -> tuple[np.ndarray, dict[str, Any]]:
    """One dry event: float32 audio (trimmed to its audible extent, ≤ duration_s, RMS 1 over the
    extent) and the drawn parameters. Depends only on the arguments (and espeak-ng for speech)."""
    if cls not in _SYNTH:
        raise ValueError(f"unknown class {cls!r}; one of {', '.join(CLASSES)}")
    rng = np.random.default_rng(np.random.SeedSequence([int(seed), CLASSES.index(cls)]))
    n = max(int(duration_s * rate), int(0.05 * rate))
    y, info = _SYNTH[cls](rng, rate, n)
    return _trim_unit(np.asarray(y, np.float64)[:n], rate), info


def _trim_unit(y: np.ndarray, rate: int) -> np.ndarray:
    """Trimmed to its audible extent (:func:`trim_event`), RMS 1 over it, float32."""
    y = trim_event(y, rate)
    rms = float(np.sqrt(np.mean(y * y))) if y.size else 0.0
    if rms > 0:
        y = y / rms
    return y.astype(np.float32)


# --------------------------------------------------------------------------------------------
# non-target sounds and the source shift (the corpus's ``wide`` domain gap)
# --------------------------------------------------------------------------------------------


def _decaying(x: np.ndarray, rate: int, tau_s: float) -> np.ndarray:
    """``x`` under an exponential decay with time constant ``tau_s`` from its first sample."""
    return x * np.exp(-np.arange(len(x)) / rate / tau_s)


def _thump(rng: np.random.Generator, rate: int, f: float, decay_s: float) -> np.ndarray:
    m = int(max(0.05, 5 * decay_s) * rate)
    t = np.arange(m) / rate
    body = np.sin(2 * np.pi * f * t * (1 - 0.2 * t / t[-1])) * np.exp(-t / decay_s)
    click = _bp(rng.standard_normal(m), 500, 4000, rate) * np.exp(-t / 0.004) * rng.uniform(0.2, 0.8)
    return body + click


def _knock(rng: np.random.Generator, rate: int, n: int) -> tuple[np.ndarray, dict[str, Any]]:
    out = np.zeros(n)
    f = rng.uniform(80, 250)
    pos, k = 0, int(rng.integers(2, 7))
    for _ in range(k):
        _place(out, _thump(rng, rate, f * rng.uniform(0.95, 1.05), rng.uniform(0.01, 0.04)) * rng.uniform(0.6, 1.0), pos)
        pos += int(rng.uniform(0.1, 0.3) * rate)
    return out, {"knocks": k, "f_hz": round(f, 1)}


def _typing(rng: np.random.Generator, rate: int, n: int) -> tuple[np.ndarray, dict[str, Any]]:
    out = np.zeros(n)
    cps = rng.uniform(6, 14)
    lo = rng.uniform(1500, 3000)
    at = 0.0
    while at < n / rate:
        m = int(rng.uniform(0.005, 0.015) * rate)
        _place(out, _decaying(_bp(rng.standard_normal(m), lo, lo * rng.uniform(1.5, 2.0), rate), rate, 0.003) * rng.uniform(0.3, 1.0), int(at * rate))
        at += rng.exponential(1 / cps) + 0.03
    return out, {"clicks_per_s": round(cps, 2)}


def _footsteps(rng: np.random.Generator, rate: int, n: int) -> tuple[np.ndarray, dict[str, Any]]:
    out = np.zeros(n)
    sps = rng.uniform(1.4, 2.4)
    fc = rng.uniform(300, 1200)
    at = 0.0
    while at < n / rate:
        for part, gain in ((0, 1.0), (rng.uniform(0.04, 0.09), rng.uniform(0.3, 0.7))):
            _place(out, _decaying(_lp(rng.standard_normal(int(0.08 * rate)), fc, rate), rate, 0.015) * gain, int((at + part) * rate))
        at += (1 / sps) * rng.uniform(0.9, 1.1)
    return out, {"steps_per_s": round(sps, 2), "lowpass_hz": round(fc, 1)}


def _music(rng: np.random.Generator, rate: int, n: int) -> tuple[np.ndarray, dict[str, Any]]:
    out = np.zeros(n)
    steps = (0, 2, 4, 5, 7, 9, 11) if rng.random() < 0.5 else (0, 2, 3, 5, 7, 8, 10)
    root = rng.uniform(180, 400)
    bpm = rng.uniform(80, 160)
    beat = 60 / bpm
    n_harm = int(rng.integers(2, 7))
    decay = rng.uniform(0.15, 0.6)

    def note(f: float, dur: float) -> np.ndarray:
        m = int(dur * rate)
        tt = np.arange(m) / rate
        y = sum((0.6**k) * np.sin(2 * np.pi * f * (k + 1) * tt) for k in range(n_harm) if f * (k + 1) < 0.45 * rate)
        return np.asarray(y) * np.exp(-tt / decay) * _ramp(m, int(0.003 * rate), int(0.01 * rate))

    at, i = 0.0, 0
    while at < n / rate:
        deg = int(rng.integers(0, 14))
        f = root * 2 ** ((steps[deg % 7] + 12 * (deg // 7)) / 12)
        d = beat * float(rng.choice([0.5, 1.0, 1.0, 2.0]))
        _place(out, note(f, d), int(at * rate))
        if i % 4 == 0:
            _place(out, 0.7 * note(root / 2, 4 * beat), int(at * rate))
        at += d
        i += 1
    return out, {"root_hz": round(root, 1), "bpm": round(bpm, 1)}


def _door(rng: np.random.Generator, rate: int, n: int) -> tuple[np.ndarray, dict[str, Any]]:
    out = np.zeros(n)
    m = int(min(n, rate * rng.uniform(0.3, 1.2)))
    pr = np.cumsum(rng.uniform(20, 60) * (1 + 0.5 * _smooth_noise(rng, m, rate, 4))) / rate
    pulses = np.diff(np.floor(pr), prepend=0.0)
    fc = rng.uniform(600, 2500)
    creak = _bp(pulses, fc * 0.8, fc * 1.25, rate, 2) * _ramp(m, m // 4, m // 4)
    out[:m] += creak / (np.std(creak) + 1e-12) * 0.5
    slam = _thump(rng, rate, rng.uniform(60, 150), rng.uniform(0.03, 0.08))
    _place(out, slam / (np.max(np.abs(slam)) + 1e-12) * 3, m)
    return out, {"creak_hz": round(fc, 1)}


def _traffic(rng: np.random.Generator, rate: int, n: int) -> tuple[np.ndarray, dict[str, Any]]:
    t = np.arange(n) / rate
    f0 = rng.uniform(25, 60)
    glide = 1 + 0.06 * np.tanh((t - t[-1] / 2) * -3)
    engine = _harmonics(np.full(n, f0) * glide, rate, 8, -4, rng)
    rumble = _lp(rng.standard_normal(n), rng.uniform(400, 1500), rate, 2)
    y = engine / (np.std(engine) + 1e-12) * rng.uniform(0.3, 1.0) + rumble / (np.std(rumble) + 1e-12)
    env = np.exp(-(((t - t[-1] / 2) / (t[-1] / 4 + 1e-3)) ** 2))
    return y * env, {"engine_hz": round(f0, 1)}


_DISTRACT: dict[str, Callable[[np.random.Generator, int, int], tuple[np.ndarray, dict[str, Any]]]] = {
    "knock": _knock,
    "typing": _typing,
    "footsteps": _footsteps,
    "music": _music,
    "door": _door,
    "traffic": _traffic,
}
#: non-target sound kinds of the ``wide`` real domain
DISTRACTORS: tuple[str, ...] = tuple(_DISTRACT)


def render_distractor(kind: str, seed: int, duration_s: float, rate: int) -> tuple[np.ndarray, dict[str, Any]]:
    """One non-target sound as :func:`render_event` renders a class (trimmed, RMS 1)."""
    if kind not in _DISTRACT:
        raise ValueError(f"unknown non-target sound {kind!r}; one of {', '.join(DISTRACTORS)}")
    rng = np.random.default_rng(np.random.SeedSequence([int(seed), 100 + DISTRACTORS.index(kind)]))
    n = max(int(duration_s * rate), int(0.05 * rate))
    y, info = _DISTRACT[kind](rng, rate, n)
    return _trim_unit(np.asarray(y, np.float64)[:n], rate), info


def shift_source(y: np.ndarray, ratio: float, rate: int) -> np.ndarray:
    """Resample a dry event so that every frequency is multiplied by ``ratio`` (0.5-2) and its
    length divided by it, then trim it and set its RMS to 1 again (a different instance of the
    source: a bigger dog, a faster motor). ``ratio`` 1 returns the input."""
    if not 0.5 <= ratio <= 2.0:
        raise ValueError(f"source shift ratio must lie in [0.5, 2], got {ratio}")
    if ratio == 1.0 or y.size == 0:
        return y
    from fractions import Fraction

    fr = Fraction(1 / ratio).limit_denominator(64)
    return _trim_unit(signal.resample_poly(np.asarray(y, np.float64), fr.numerator, fr.denominator), rate)
