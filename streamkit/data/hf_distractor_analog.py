"""Analogue and natural HF non-speech signals as an SSB receiver hears them (audio, 300-3000 Hz).

Same contract as :mod:`streamkit.data.hf_distractor_digital`: ``gen(n, rng, rate=8000,
**overrides) -> (audio float64 (n,), info dict)``, nominal amplitude, every random parameter
drawn from ``rng`` unless given.

* :func:`am_music`: an AM broadcast station playing music (synthetic: chords, melody and bass with
  harmonics and note onsets, drums; or the caller's own samples, ``music=``), 5 kHz audio
  bandwidth, received on SSB either near zero beat (``demod``: the music itself, slightly
  shifted) or off-tune (``beat``: the carrier as a whistle plus one sideband shifted up by it).
* :func:`carriers`: 1-4 steady or slowly drifting carriers/heterodynes, some with hum modulation,
  some keyed on and off (tune-up carriers).
* :func:`radar`: over-the-horizon radar: FMCW sweeps at 10-60 sweeps/s crossing the passband
  (a chirp per sweep: "clicks"/buzz), or pulse trains.
* :func:`qrn`: lightning crashes: clusters of decaying broadband impulses on a crackle of small
  ones, band-limited by the receiver.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from scipy.signal import hilbert, oaconvolve

from streamkit.data.hf_distractor_dsp import bandlimit, fm, keyed_envelope, ramp, random_walk, times

__all__ = ["am_music", "carriers", "qrn", "radar", "synth_music"]

Info = dict[str, Any]


def _draw(kw: dict[str, Any], key: str, fn: Any) -> Any:
    return kw[key] if key in kw else fn()


# ------------------------------------------------------------------------------------- music
#: chord progressions in scale degrees (semitones above the key's root of each chord, major/minor)
PROGRESSIONS = (((0, "M"), (7, "M"), (9, "m"), (5, "M")), ((0, "M"), (5, "M"), (7, "M"), (0, "M")),
                ((9, "m"), (5, "M"), (0, "M"), (7, "M")), ((0, "m"), (8, "M"), (3, "M"), (10, "M")))  # fmt: skip
SCALE = (0, 2, 4, 7, 9, 12, 14, 16)  # major pentatonic over two octaves


def _note(f0: float, dur: int, rate: int, harmonics: int, tilt: float, decay_s: float, attack_s: float = 0.01) -> np.ndarray:
    t = np.arange(dur) / rate
    h = np.arange(1, harmonics + 1)
    h = h[h * f0 < 0.45 * rate]
    if h.size == 0:
        return np.zeros(dur)
    tone = (np.sin(2 * np.pi * f0 * np.outer(t, h)) * (h**-tilt)).sum(axis=1)
    env = np.minimum(t / attack_s, 1.0) * np.exp(-t / decay_s)
    r = min(dur, int(0.01 * rate))
    env[dur - r :] *= np.linspace(1, 0, r)
    return tone * env


def synth_music(n: int, rng: np.random.Generator, rate: int = 8000) -> tuple[np.ndarray, Info]:
    """A synthetic music-like signal: tempo 70-160 BPM, a 4-chord progression (one chord per bar,
    harmonic-rich tones re-struck on beats), a pentatonic melody with vibrato, a bass line, and
    drums (kick, snare, hi-hat) on a 4/4 pattern."""
    bpm = float(rng.uniform(70, 160))
    beat = 60.0 / bpm
    root = 110.0 * 2 ** (int(rng.integers(0, 12)) / 12)
    prog = PROGRESSIONS[int(rng.integers(len(PROGRESSIONS)))]
    x = np.zeros(n + int((4 * beat + 1) * rate))  # the last beat starts before n and rings up to 2 beats
    nb = int(math.ceil(n / rate / beat)) + 1
    harm = int(rng.integers(4, 10))
    tilt = float(rng.uniform(0.8, 1.8))
    for b in range(nb):
        i = int(b * beat * rate)
        deg, q = prog[(b // 4) % len(prog)]
        third = 4 if q == "M" else 3
        if b % 2 == 0:  # chord re-struck every other beat
            for iv in (0, third, 7):
                f = 2 * root * 2 ** ((deg + iv) / 12)
                s = _note(f, int(2 * beat * rate), rate, harm, tilt, 2 * beat) * 0.25
                x[i : i + s.size] += s
        bass = _note(root * 2 ** (deg / 12) / 2 * (1 if b % 2 == 0 else 1.5), int(beat * rate), rate, 6, 1.0, beat) * 0.5
        x[i : i + bass.size] += bass
        # melody: one or two notes per beat, random walk on the pentatonic scale
        for h in range(int(rng.integers(1, 3))):
            j = i + int(h * beat / 2 * rate)
            f = 4 * root * 2 ** ((deg + SCALE[int(rng.integers(len(SCALE)))]) / 12)
            d = int(beat / 2 * rate * rng.uniform(0.7, 1.0))
            t = np.arange(d) / rate
            vib = 1 + 0.006 * np.sin(2 * np.pi * 5.5 * t)
            ph = 2 * np.pi * np.cumsum(f * vib) / rate
            m = (np.sin(ph) + 0.5 * np.sin(2 * ph) + 0.25 * np.sin(3 * ph)) * np.minimum(t / 0.02, 1) * np.exp(-t / beat)
            x[j : j + d] += 0.4 * m
        # drums
        if b % 2 == 0:
            d = int(0.25 * rate)
            t = np.arange(d) / rate
            x[i : i + d] += 0.9 * np.sin(2 * np.pi * np.cumsum(50 + 100 * np.exp(-t / 0.03)) / rate) * np.exp(-t / 0.08)
        else:
            d = int(0.2 * rate)
            t = np.arange(d) / rate
            x[i : i + d] += (0.5 * rng.standard_normal(d) + 0.3 * np.sin(2 * np.pi * 190 * t)) * np.exp(-t / 0.05)
        for h in (0, 1):
            j = i + int(h * beat / 2 * rate)
            d = int(0.04 * rate)
            hat = np.diff(rng.standard_normal(d + 1)) * np.exp(-np.arange(d) / rate / 0.01)
            x[j : j + d] += 0.15 * hat
    return x[:n], {"bpm": round(bpm, 1), "root_hz": round(root, 2), "harmonics": harm}


def am_music(n: int, rng: np.random.Generator, rate: int = 8000, **kw: Any) -> tuple[np.ndarray, Info]:
    """A broadcast AM station with music, heard on SSB. ``music`` (float array at ``rate``, tiled
    or cut to ``n``) replaces the synthetic music. The programme is low-passed to 5 kHz (at 8 kHz
    the Nyquist limit is lower anyway) and compressed like a broadcast processor; modulation
    depth 30-90 %. ``tuning`` "demod": the carrier is within 0-40 Hz of zero beat (below the
    passband: heard is the programme shifted up by that offset); "beat": the carrier falls at
    300-1500 Hz (a steady whistle) with the upper sideband above it."""
    mus = kw.get("music")
    if mus is not None:
        m = np.asarray(mus, np.float64).reshape(-1)
        if m.size == 0 or not np.all(np.isfinite(m)):
            raise ValueError("music must be a non-empty finite array")
        m = np.tile(m, -(-n // m.size))[:n]
        minfo: Info = {"source": "caller"}
    else:
        m, minfo = synth_music(n, rng, rate)
        minfo["source"] = "synthetic"
    m = m - m.mean()
    w = int(0.05 * rate)
    env = np.sqrt(np.maximum(oaconvolve(m * m, np.ones(w) / w)[w // 2 : w // 2 + n], 0.0)) + 1e-9
    m = m / (env**0.6)  # broadcast-style compression (more loudness, less dynamics)
    m = m / max(float(np.abs(m).max()), 1e-9)
    depth = float(_draw(kw, "depth", lambda: rng.uniform(0.3, 0.9)))
    tuning = str(_draw(kw, "tuning", lambda: "beat" if rng.random() < 0.5 else "demod"))
    fb = float(_draw(kw, "carrier_hz", lambda: rng.uniform(300, 1500) if tuning == "beat" else rng.uniform(0, 40)))
    t = times(n, rate)
    usb = np.real(hilbert(m) * np.exp(2j * np.pi * fb * t))  # one sideband, shifted up by the carrier offset
    x = depth / 2 * usb + np.cos(2 * np.pi * fb * t + rng.uniform(0, 2 * np.pi))
    x = bandlimit(x, rate, 200.0, 3400.0) * ramp(n, int(0.01 * rate))
    return x, {**minfo, "depth": round(depth, 3), "tuning": tuning, "carrier_hz": round(fb, 2)}


# ----------------------------------------------------------------------------------- carriers
def carriers(n: int, rng: np.random.Generator, rate: int = 8000, **kw: Any) -> tuple[np.ndarray, Info]:
    """1-4 carriers (``count``): each at 300-2900 Hz, level -15..0 dB, a linear drift (up to
    ±3 Hz/s, most much less) and a slow wander; 25 % carry 50/60/100/120 Hz hum modulation, 25 %
    are switched on and off (tune-up carriers, 0.5-5 s on)."""
    k = int(_draw(kw, "count", lambda: rng.choice([1, 1, 1, 2, 2, 3, 4])))
    t = times(n, rate)
    x = np.zeros(n)
    info = []
    for c in range(k):
        f = float(kw["freqs"][c]) if "freqs" in kw else float(rng.uniform(300, 2900))
        lvl = float(rng.uniform(-15, 0)) if c else 0.0
        drift = float(rng.normal(0, 1.0) if rng.random() < 0.4 else rng.normal(0, 0.05))
        drift = float(np.clip(drift, -3, 3)) if "drift_hz_s" not in kw else float(kw["drift_hz_s"])
        freq = f + drift * t + random_walk(rng, n, rate, 0.5, 0.2 if "drift_hz_s" not in kw else 0.0)
        a = np.ones(n)
        hum = rng.random() < 0.25 and "freqs" not in kw
        if hum:
            a = a * (1 + rng.uniform(0.1, 0.5) * np.sin(2 * np.pi * float(rng.choice([50, 60, 100, 120])) * t))
        keyed = rng.random() < 0.25 and "freqs" not in kw
        if keyed:
            on = np.zeros(n)
            pos = 0.0
            while pos < n / rate:
                d = rng.uniform(0.5, 5.0)
                if rng.random() < 0.6:
                    on[int(pos * rate) : int((pos + d) * rate)] = 1.0
                pos += d
            a = a * keyed_envelope(on, 0.005, rate)
        x += 10 ** (lvl / 20) * a * fm(freq, rate, rng.uniform(0, 2 * np.pi))
        info.append({"freq_hz": round(f, 2), "rel_db": round(lvl, 2), "drift_hz_s": round(drift, 3), "hum": bool(hum), "keyed": bool(keyed)})
    return x * ramp(n, int(0.005 * rate)), {"carriers": info}


# -------------------------------------------------------------------------------------- radar
def _band_gate(f: np.ndarray, lo: float = 150.0, hi: float = 3850.0, edge: float = 150.0) -> np.ndarray:
    """1 inside [lo + edge, hi - edge], raised-cosine to 0 at ``lo``/``hi``: what of a sweep the passband lets through."""
    u = np.clip(np.minimum(f - lo, hi - f) / edge, 0.0, 1.0)
    return 0.5 * (1 - np.cos(np.pi * u))


def radar(n: int, rng: np.random.Generator, rate: int = 8000, **kw: Any) -> tuple[np.ndarray, Info]:
    """Over-the-horizon radar. ``variant`` "fmcw" (70 %): linear sweeps of ``bandwidth_hz``
    (5-40 kHz) repeated ``sweeps_s`` (10-60) times a second; each sweep crosses the audio band
    during ``3.7 kHz / bandwidth`` of its period (a short chirp, heard as a click or buzz).
    "pulsed": ``sweeps_s`` pulses per second of 0.2-2 ms chirped carrier bursts, sometimes in groups."""
    kind = str(_draw(kw, "variant", lambda: "fmcw" if rng.random() < 0.7 else "pulsed"))
    rep = float(_draw(kw, "sweeps_s", lambda: rng.uniform(10, 60)))
    hi = 0.48 * rate
    if kind == "fmcw":
        bw = float(_draw(kw, "bandwidth_hz", lambda: math.exp(rng.uniform(math.log(5000), math.log(40000)))))
        bw = max(bw, hi + 600)
        off = float(_draw(kw, "offset_hz", lambda: rng.uniform(200, bw - hi - 200)))
        up = bool(_draw(kw, "up", lambda: rng.random() < 0.8))
        ph0 = float(rng.uniform(0, 1))
        u = (times(n, rate) * rep + ph0) % 1.0
        f = -off + bw * (u if up else 1 - u)
        x = _band_gate(f, hi=hi) * fm(f, rate)
        info: Info = {"variant": kind, "sweeps_s": round(rep, 3), "bandwidth_hz": round(bw, 1), "offset_hz": round(off, 1), "up": up,
                      "phase": round(ph0, 4)}  # fmt: skip
    else:
        width = float(_draw(kw, "pulse_ms", lambda: rng.uniform(0.2, 2.0))) * 1e-3
        group = int(_draw(kw, "group", lambda: rng.choice([1, 1, 2, 4])))
        w = max(4, int(width * rate))
        tt = np.arange(w) / rate
        sweep = float(rng.uniform(0, 3000))
        pulse = np.sin(2 * np.pi * (rng.uniform(500, 2500) * tt + sweep / (2 * width) * tt**2)) * np.hanning(w)
        x = np.zeros(n + w * (group * 3 + 1))
        k = 0.0
        while k * rate / rep < n:
            for g in range(group):
                i = int((k / rep + g * 3 * width) * rate)
                x[i : i + w] += pulse
            k += 1
        x = bandlimit(x[:n], rate)
        info = {"variant": kind, "sweeps_s": round(rep, 3), "pulse_ms": round(width * 1e3, 3), "group": group}
    return x, info


# ---------------------------------------------------------------------------------------- QRN
def qrn(n: int, rng: np.random.Generator, rate: int = 8000, **kw: Any) -> tuple[np.ndarray, Info]:
    """Atmospheric noise from lightning: crashes at ``crash_rate`` (0.2-3 /s, Poisson), each a
    cluster of 3-30 strokes over 50-600 ms with decaying, log-normal amplitudes and a short noisy
    tail, on a background crackle of small impulses (5-50 /s); band-limited 300-3000 Hz (the
    receiver's filter rings on each impulse)."""
    cr = float(_draw(kw, "crash_rate", lambda: math.exp(rng.uniform(math.log(0.2), math.log(3.0)))))
    bg = float(_draw(kw, "crackle_rate", lambda: rng.uniform(5, 50)))
    T = n / rate
    imp = np.zeros(n)
    nc = max(1, int(rng.poisson(cr * T)))
    crash_t = np.sort(rng.uniform(0, T, nc))
    for tc in crash_t:
        k = int(rng.integers(3, 31))
        dur = rng.uniform(0.05, 0.6)
        ts = tc + np.sort(rng.exponential(dur / 3, k))
        a = np.exp(rng.normal(0, 0.8, k)) * np.exp(-(ts - tc) / dur)
        idx = (ts * rate).astype(np.int64)
        ok = idx < n
        np.add.at(imp, idx[ok], a[ok] * rng.choice([-1.0, 1.0], int(ok.sum())))
        # the crash's rumble: a short burst of decaying noise
        d = int(rng.uniform(0.02, 0.15) * rate)
        i0 = int(tc * rate)
        m = min(d, n - i0)
        if m > 0:
            imp[i0 : i0 + m] += 0.05 * rng.standard_normal(m) * np.exp(-np.arange(m) / (0.3 * d))
    nb = int(rng.poisson(bg * T))
    ib = rng.integers(0, n, nb)
    np.add.at(imp, ib, 0.05 * np.exp(rng.normal(0, 0.6, nb)) * rng.choice([-1.0, 1.0], nb))
    x = bandlimit(imp, rate)
    return x, {
        "crash_rate": round(cr, 3),
        "crashes": int(nc),
        "crackle_rate": round(bg, 2),
        "crash_times_s": [round(float(v), 3) for v in crash_t[:50]],
    }
