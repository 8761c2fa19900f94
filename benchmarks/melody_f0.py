"""Predominant f0 (dsp.melody, pYIN) on synthetic vibrato singing with a known f0, against plain YIN.

Signals (16 kHz, ``--seconds`` each, ``--voices`` voices): phrases of held notes on a Phrygian
scale with portamento between notes, vibrato (5-7 Hz, +-30..80 cents, a different habit per
voice), jitter; a glottal-like source (harmonics with a -12 dB/octave tilt and a little
aspiration noise) through three vowel formants; phrases separated by 0.3-0.8 s rests; white
noise added at each SNR of ``--snr`` (dB re the voiced signal's power). Truth: f0 per 10 ms row
(voiced where the voice sounds).

Metrics per extractor and SNR (voiced = rows voiced in the truth):

* RPA: raw pitch accuracy, share of truly voiced rows whose estimate is within 50 cents of the
  truth (the estimate's pitch counted whatever its voicing decision, as in MIREX);
* cents error: mean and median |error| over the rows voiced in both;
* voicing recall (truly voiced rows called voiced) and false alarm (truly unvoiced rows called voiced);
* RT factor: wall time / audio duration, one thread, best of ``--repeat``.

Peer: plain YIN (de Cheveigné and Kawahara 2002) on the same frames: absolute threshold 0.1, first
trough below it, parabolic refinement, voiced iff a trough is below the threshold; no HMM (the
same FFT-based YIN function as pYIN; the trough search is a Python loop). There is
no other MIT pitch tracker installed offline (librosa's pyin is not a dependency).

    python benchmarks/melody_f0.py [--seconds 20] [--voices 4] [--snr 40 20 10 5] [--repeat 3]

Writes benchmarks/results/melody_f0.json.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

import numpy as np
from scipy.signal import lfilter

from streamkit.dsp.kernels.pyin import cents_to_hz, hz_to_cents, yin_cmnd_batch
from streamkit.dsp.melody import FRAME, HOP, PAD, RATE, _Framer, melody_f0
from streamkit.eval.bench import RESULTS, best_of, machine_info, write_result

PHRYGIAN = np.array([0, 100, 300, 500, 700, 800, 1000, 1200])  # E Phrygian steps in cents
VOWELS = [(730, 1090, 2440), (270, 2290, 3010), (300, 870, 2240), (530, 1840, 2480), (570, 840, 2410)]


def synth_voice(seconds: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(signal, true f0 per 10 ms row; 0 = unvoiced)."""
    rng = np.random.default_rng(seed)
    n = int(seconds * RATE)
    f0 = np.zeros(n)
    base = float(hz_to_cents(rng.uniform(140, 330)))  # register of the voice
    vib_rate, vib_depth = rng.uniform(5.0, 7.0), rng.uniform(30, 80)
    i = int(rng.uniform(0.2, 0.5) * RATE)
    while i < n:
        notes = base + PHRYGIAN[rng.integers(0, 8, size=rng.integers(3, 8))]
        durs = (rng.uniform(0.15, 0.7, size=notes.size) * RATE).astype(int)
        c = np.concatenate([np.full(d, nt) for nt, d in zip(notes, durs, strict=True)])
        glide = int(0.04 * RATE)  # portamento
        c = np.convolve(np.r_[np.full(glide, c[0]), c, np.full(glide, c[-1])], np.ones(glide) / glide, mode="same")[glide:-glide]
        t = np.arange(c.size) / RATE
        onset = np.minimum(1.0, t / 0.25)  # vibrato grows in after the onset
        c = c + vib_depth * onset * np.sin(2 * np.pi * vib_rate * t + rng.uniform(0, 6.3))
        c = c + np.cumsum(rng.standard_normal(c.size)) * 0.02  # jitter (slow random walk, cents)
        m = min(c.size, n - i)
        f0[i : i + m] = cents_to_hz(c[:m])
        i += m + int(rng.uniform(0.3, 0.8) * RATE)
    voiced = f0 > 0
    ph = 2 * np.pi * np.cumsum(f0) / RATE
    src = np.zeros(n)
    for k in range(1, 30):
        ok = voiced & (k * f0 < RATE / 2 - 200)
        src += np.where(ok, np.sin(k * ph) / k**2, 0.0)
    src += voiced * 0.02 * rng.standard_normal(n)  # aspiration
    formants = VOWELS[seed % len(VOWELS)]
    y = np.zeros(n)
    for fc, gain in zip(formants, (1.0, 0.5, 0.25), strict=True):
        r = np.exp(-np.pi * 80.0 / RATE)
        a = [1.0, -2 * r * np.cos(2 * np.pi * fc / RATE), r * r]
        y += gain * lfilter([1.0 - r], a, src)
    y *= 0.3 / np.sqrt(np.mean(y[voiced] ** 2))
    rows = np.arange(-(-n // HOP)) * HOP
    return y, f0[rows]


def add_noise(y: np.ndarray, truth: np.ndarray, snr_db: float, seed: int) -> np.ndarray:
    p = np.mean(y[np.repeat(truth > 0, HOP)[: y.size]] ** 2)
    return (y + np.sqrt(p / 10 ** (snr_db / 10)) * np.random.default_rng(seed).standard_normal(y.size)).astype(np.float32)


def plain_yin(x: np.ndarray, threshold: float = 0.1, fmin: float = 65.0, fmax: float = 1050.0) -> np.ndarray:
    """Rows (cents, voiced) of plain YIN on the same frames as dsp.melody."""
    fr = _Framer()
    frames = np.concatenate([fr.push(np.asarray(x, np.float64)), fr.finish()])
    tmin, tmax = int(RATE // fmax), min(FRAME // 2 - 1, int(np.ceil(RATE / fmin)))
    out = np.zeros((frames.shape[0], 2))
    for j, d in enumerate(yin_cmnd_batch(frames, FRAME // 2, tmax + 1)):
        seg = d[tmin : tmax + 1]
        below = np.flatnonzero(seg[:-1] < threshold)
        voiced = below.size > 0
        if voiced:
            tau = tmin + below[0]
            while tau + 1 < tmax and d[tau + 1] < d[tau]:
                tau += 1
        else:
            tau = tmin + int(np.argmin(seg[:-1]))
        a, b, c = d[tau - 1], d[tau], d[tau + 1]
        den = a - 2 * b + c
        sh = float(np.clip(0.5 * (a - c) / den, -0.5, 0.5)) if den > 0 else 0.0
        out[j] = (float(hz_to_cents(RATE / (tau + sh))), float(voiced))
    return out


def score(est: np.ndarray, truth: np.ndarray) -> dict[str, float]:
    tv = truth > 0
    ev = est[:, 1] > 0
    tc = np.where(tv, hz_to_cents(np.where(tv, truth, 55.0)), 0.0)
    err = np.abs(est[:, 0] - tc)
    both = tv & ev
    return {
        "rpa_50c": float(np.mean(err[tv] <= 50)),
        "mean_cents_error": float(err[both].mean()) if both.any() else float("nan"),
        "median_cents_error": float(np.median(err[both])) if both.any() else float("nan"),
        "voicing_recall": float(ev[tv].mean()),
        "voicing_false_alarm": float(ev[~tv].mean()) if (~tv).any() else float("nan"),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--voices", type=int, default=4)
    ap.add_argument("--snr", type=float, nargs="+", default=[40.0, 20.0, 10.0, 5.0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--out", default=str(RESULTS / "melody_f0.json"))
    a = ap.parse_args(argv)
    voices = [synth_voice(a.seconds, seed) for seed in range(a.voices)]
    extractors: dict[str, Any] = {"pyin (dsp.melody)": melody_f0, "plain YIN (peer, no HMM)": plain_yin}
    rows = []
    for snr in a.snr:
        for name, fn in extractors.items():
            ests = [fn(add_noise(y, t, snr, 100 + k)) for k, (y, t) in enumerate(voices)]
            s = score(np.concatenate([e[:, :2] for e in ests]), np.concatenate([t for _, t in voices]))
            rows.append({"extractor": name, "snr_db": snr, **s})
    timing = {}
    x = add_noise(*voices[0], 20.0, 7)
    for name, fn in extractors.items():
        timing[name] = best_of(lambda fn=fn: fn(x), a.repeat) / a.seconds
    res = {"benchmark": "melody_f0", "command": " ".join(["python", "benchmarks/melody_f0.py", *(argv if argv is not None else sys.argv[1:])]),
           "machine": machine_info(), "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "seconds_per_voice": a.seconds,
           "voices": a.voices, "rate": RATE, "hop": HOP, "frame": FRAME, "pad": PAD, "rows": rows, "rt_factor": timing}  # fmt: skip
    print(f"{'extractor':28s} {'SNR':>5s} {'RPA50':>6s} {'mean c':>7s} {'med c':>6s} {'V rec':>6s} {'V FA':>6s}")
    for r in rows:
        print(f"{r['extractor']:28s} {r['snr_db']:5.0f} {r['rpa_50c']:6.3f} {r['mean_cents_error']:7.1f} {r['median_cents_error']:6.1f} "
              f"{r['voicing_recall']:6.3f} {r['voicing_false_alarm']:6.3f}")  # fmt: skip
    for name, rt in timing.items():
        print(f"RT factor {name}: {rt:.4f}")
    return write_result(a.out, res)


if __name__ == "__main__":
    raise SystemExit(main())
