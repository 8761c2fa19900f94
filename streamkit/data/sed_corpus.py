"""Soundscape corpus for sound event detection in the DCASE 2019 task 4 layout, with its domain gap.

``streamkit corpus sed --out DIR [--clips-synthetic N ...] [--seed S] [--jobs N] [--rate 16000]``

Clips of 10 s hold 1-3 events (distinct classes, P = 0.40 / 0.35 / 0.25; onsets uniform, so events
may overlap) of the task's 10 classes (:mod:`streamkit.data.sed_sources`: procedural synthesis,
espeak-ng for speech) over a background. Five subsets, as the task:

==============  =======  ==============================================================
subset          domain   labels (``<subset>/labels.tsv``, DCASE format)
==============  =======  ==============================================================
synthetic       synth    strong: ``filename onset offset event_label``
weak            real     weak: ``filename event_labels`` (comma-separated clip tags)
unlabelled      real     none: ``filename``
validation      real     strong (for scoring only)
eval            real     strong (for scoring only)
==============  =======  ==============================================================

*Synthetic domain* (like Scaper mixes of isolated clean sounds): dry events over a plain
stationary white or pink background at -45..-35 dBFS, event SNR 6-30 dB (event RMS over its span
re background RMS, as DESED), the clip scaled down only if its peak would exceed 0.9.

*Real domain* (what recordings add): one room per clip with a statistical RIR (direct path, 4-12
early reflections in 2-40 ms, exponentially decaying noise tail with frequency-dependent RT60
0.2-0.9 s, direct-to-reverberant ratio drawn per event, -4..+10 dB; our own model, which avoids the
pyroomacoustics dependency and its build), backgrounds made of coloured noise (spectral slope
f^-0..f^-2) with slow level modulation (0.05-0.5 Hz), speech-shaped babble (p 0.5) and mains hum
50/60 Hz with harmonics (p 0.5), event SNR 0-25 dB, microphone colouration (high-pass 50-250 Hz,
three random peaking EQs of ±8 dB, low-pass 4.5-7.8 kHz), level variation (clip RMS -42..-14
dBFS) and mild clipping (p 0.3: soft clip at 30-80 % of the peak; always hard clip at full scale).

*Wide domain gap* (``--domain-gap wide``; the default ``standard`` is the corpus above, unchanged
clip for clip): the real domain also differs in *what* sounds, as DESED's recorded clips differ from
its isolated Freesound events. Every real event's source is shifted (resampled so that its
frequencies and tempo scale by r, log-uniform in 0.7-1.4: another dog, another motor; see
:func:`streamkit.data.sed_sources.shift_source`), and each real clip holds 0-3 non-target sounds
(P = 0.2 / 0.4 / 0.3 / 0.1; knock, typing, footsteps, music, door, traffic; 0.5-5 s, SNR as the
events, in the same room) that carry no label. Synthetic clips are the same in both modes. These
draws use their own random stream, so everything else (classes, backgrounds, rooms, microphones,
levels) is drawn as in the standard corpus.

Labels are the dry event's extent (from its first to its last audible 10 ms frame, see
:func:`streamkit.data.sed_sources.trim_event`), in seconds with millisecond resolution (onsets are
drawn on a 1 ms grid; reverberant tails in the real domain run past the offset, as annotators of
real recordings also mark the source, not the room).

Rate: 16 kHz by default, as the DCASE 2020+ baselines (128 mel bins, hop 256): it keeps the
classes' energy (everything here is below 8 kHz) at 36 % of the samples of 44.1 kHz, so
features and the CRNN run faster on a CPU.

Layout of ``DIR``::

    manifest.json                  command, seed, rate, counts, per-class event counts per subset, espeak-ng version
    <subset>/audio/<id>.wav        PCM_16 mono
    <subset>/labels.tsv            DCASE-format labels (see above)
    <subset>/meta.json             the generator's record of every clip: events with class, seed, onset,
                                   offset, SNR and drawn parameters, background and channel parameters.
                                   It holds the strong truth of the weak/unlabelled clips: for analysis
                                   only, a trainer must not read it.

Every clip has its own random stream (``SeedSequence([seed, subset, index])``), so the corpus is
identical for any ``--jobs``; it depends on the seed, the rate and the espeak-ng version only
(the counts of one subset do not change the clips of another).
"""

from __future__ import annotations

import json
import math
import os
import time
from pathlib import Path
from typing import Any

import numpy as np
from scipy import signal

from streamkit.data import sed_real
from streamkit.data.sed_real import RealClips
from streamkit.data.sed_sources import CLASSES, DISTRACTORS, draw_duration, render_distractor, render_event, shift_source
from streamkit.io.outputs import write_audio, write_text

__all__ = [
    "CLIP_S",
    "DEFAULT_COUNTS",
    "DOMAIN_GAPS",
    "FORMAT",
    "SUBSETS",
    "corpus_table",
    "generate",
    "make_clip",
]

FORMAT = "streamkit-sed-corpus/1"
CLIP_S = 10.0
#: subset -> (domain, label kind)
SUBSETS: dict[str, tuple[str, str]] = {
    "synthetic": ("synthetic", "strong"),
    "weak": ("real", "weak"),
    "unlabelled": ("real", "none"),
    "validation": ("real", "strong"),
    "eval": ("real", "strong"),
}
#: default sizes: the task's synthetic/weak sizes, unlabelled scaled down from 14412 for CPU training
DEFAULT_COUNTS: dict[str, int] = {"synthetic": 2000, "weak": 1500, "unlabelled": 4000, "validation": 500, "eval": 500}
N_EVENTS_P = (0.40, 0.35, 0.25)
#: ``--domain-gap`` choices (see the module docstring)
DOMAIN_GAPS = ("standard", "wide")
SHIFT_RANGE = (0.7, 1.4)  # wide: real-domain source shift r, log-uniform
N_DISTRACTORS_P = (0.2, 0.4, 0.3, 0.1)  # wide: 0-3 non-target sounds per real clip
DISTRACTOR_S = (0.5, 5.0)
SNR_DB = {"synthetic": (6.0, 30.0), "real": (0.0, 25.0)}
SHORT = {
    "Alarm_bell_ringing": "Alarm",
    "Blender": "Blend",
    "Cat": "Cat",
    "Dishes": "Dish",
    "Dog": "Dog",
    "Electric_shaver_toothbrush": "Shaver",
    "Frying": "Fry",
    "Running_water": "Water",
    "Speech": "Speech",
    "Vacuum_cleaner": "Vacuum",
}


# --------------------------------------------------------------------------------------------
# backgrounds, rooms, microphones
# --------------------------------------------------------------------------------------------


def _coloured(rng: np.random.Generator, n: int, slope: float) -> np.ndarray:
    """Noise with power spectrum ~ f^-slope (0 white, 1 pink, 2 brown), unit RMS."""
    spec = np.fft.rfft(rng.standard_normal(n))
    f = np.arange(spec.size, dtype=np.float64)
    f[0] = 1.0
    spec *= f ** (-slope / 2)
    spec[0] = 0.0
    x = np.fft.irfft(spec, n)
    return x / (np.std(x) + 1e-12)


def _slow(rng: np.random.Generator, n: int, rate: int, fc: float) -> np.ndarray:
    step = max(1, int(rate / (4 * fc)))
    k = n // step + 3
    return np.interp(np.arange(n) / step, np.arange(k), rng.standard_normal(k))


def _background(rng: np.random.Generator, n: int, rate: int, domain: str) -> tuple[np.ndarray, dict[str, Any]]:
    if domain == "synthetic":
        slope = float(rng.choice([0.0, 1.0]))
        return _coloured(rng, n, slope), {"slope": slope}
    slope = float(rng.uniform(0.0, 2.0))
    mod_f, mod_db = float(rng.uniform(0.05, 0.5)), float(rng.uniform(1.0, 6.0))
    x = _coloured(rng, n, slope) * 10 ** (mod_db / 20 * _slow(rng, n, rate, mod_f))
    info: dict[str, Any] = {"slope": round(slope, 3), "mod_hz": round(mod_f, 3), "mod_db": round(mod_db, 2), "babble_db": None, "hum_hz": None}
    if rng.random() < 0.5:  # babble: speech-shaped noise, 3-6 talkers with syllable-rate envelopes
        sos = signal.butter(2, [200 / (rate / 2), min(3000, 0.45 * rate) / (rate / 2)], btype="band", output="sos")
        b = np.zeros(n)
        for _ in range(int(rng.integers(3, 7))):
            env = np.maximum(_slow(rng, n, rate, float(rng.uniform(3, 6))), 0) * (_slow(rng, n, rate, 0.3) > -0.3)
            b += signal.sosfilt(sos, _coloured(rng, n, 1.0)) * env
        b /= np.std(b) + 1e-12
        db = float(rng.uniform(-10, 0))
        x = x + b * 10 ** (db / 20)
        info["babble_db"] = round(db, 2)
    if rng.random() < 0.5:  # mains hum
        f0 = float(rng.choice([50.0, 60.0]))
        t = np.arange(n) / rate
        h = sum(rng.uniform(0, 1) / k * np.sin(2 * np.pi * f0 * k * t + rng.uniform(0, 6.3)) for k in range(1, 9))
        h = h / (np.std(h) + 1e-12)
        db = float(rng.uniform(-25, -8))
        x = x + h * 10 ** (db / 20)
        info["hum_hz"], info["hum_db"] = f0, round(db, 2)
    return x / (np.std(x) + 1e-12), info


def _rir(rng: np.random.Generator, rate: int, rt60: float, drr_db: float) -> np.ndarray:
    """Statistical RIR: direct path 1 at sample 0, early reflections, exponentially decaying
    noise tail with frequency-dependent RT60 (bands <500, 500-2k, 2k-4k, >4k Hz: ×1.2, 1, 0.8, 0.6),
    scaled so that direct / (everything else) energy = ``drr_db``."""
    n = int(min(1.2 * rt60, 1.0) * rate)
    t = np.arange(n) / rate
    edges = [0.0, 500.0, 2000.0, 4000.0, rate / 2]
    tail = np.zeros(n)
    for i, fac in enumerate((1.2, 1.0, 0.8, 0.6)):
        lo, hi = edges[i], min(edges[i + 1], 0.49 * rate)
        if hi <= lo:
            continue
        nyq = rate / 2
        if lo == 0:
            sos = signal.butter(4, hi / nyq, btype="low", output="sos")
        elif edges[i + 1] >= rate / 2:
            sos = signal.butter(4, lo / nyq, btype="high", output="sos")
        else:
            sos = signal.butter(4, [lo / nyq, hi / nyq], btype="band", output="sos")
        tail += signal.sosfilt(sos, rng.standard_normal(n)) * np.exp(-6.9 * t / (rt60 * fac))
    start = int(rng.uniform(0.005, 0.02) * rate)
    tail[:start] = 0.0
    tail[start : start + int(0.005 * rate)] *= np.linspace(0, 1, len(tail[start : start + int(0.005 * rate)]))
    early = np.zeros(n)
    for _ in range(int(rng.integers(4, 13))):
        d = int(rng.uniform(0.002, 0.04) * rate)
        if d < n:
            early[d] += rng.choice([-1.0, 1.0]) * rng.uniform(0.2, 0.7) * math.exp(-d / rate / 0.03)
    rest = tail / (np.sqrt(np.sum(tail**2)) + 1e-12) + early / (np.sqrt(np.sum(early**2)) + 1e-12) * rng.uniform(0.3, 1.0)
    rest *= 10 ** (-drr_db / 20) / (np.sqrt(np.sum(rest**2)) + 1e-12)
    rest[0] = 1.0
    return rest


def _peak_sos(f: float, gain_db: float, q: float, rate: int) -> np.ndarray:
    """RBJ peaking EQ biquad as one SOS row."""
    a = 10 ** (gain_db / 40)
    w = 2 * math.pi * f / rate
    al = math.sin(w) / (2 * q)
    b = [1 + al * a, -2 * math.cos(w), 1 - al * a]
    den = [1 + al / a, -2 * math.cos(w), 1 - al / a]
    return np.array([[b[0] / den[0], b[1] / den[0], b[2] / den[0], 1.0, den[1] / den[0], den[2] / den[0]]])


def _mic(rng: np.random.Generator, rate: int) -> dict[str, Any]:
    hp = float(rng.uniform(50, 250))
    lp = float(min(rng.uniform(4500, 7800), 0.45 * rate))
    eq = [
        (float(math.exp(rng.uniform(math.log(150), math.log(min(6000, 0.4 * rate))))), float(rng.uniform(-8, 8)), float(rng.uniform(0.7, 3)))
        for _ in range(3)
    ]
    return {"highpass_hz": round(hp, 1), "lowpass_hz": round(lp, 1), "eq": [[round(f, 1), round(g, 2), round(q, 2)] for f, g, q in eq]}


def _apply_mic(x: np.ndarray, mic: dict[str, Any], rate: int) -> np.ndarray:
    nyq = rate / 2
    sos = [
        signal.butter(2, mic["highpass_hz"] / nyq, btype="high", output="sos"),
        signal.butter(4, mic["lowpass_hz"] / nyq, btype="low", output="sos"),
    ]
    sos += [_peak_sos(f, g, q, rate) for f, g, q in mic["eq"]]
    return signal.sosfilt(np.vstack(sos), x)


# --------------------------------------------------------------------------------------------
# one clip
# --------------------------------------------------------------------------------------------


def _to_i16(x: np.ndarray) -> np.ndarray:
    return np.clip(np.round(np.asarray(x, np.float64) * 32767), -32768, 32767).astype(np.int16)


def _place_at_random(rng: np.random.Generator, y: np.ndarray, snr_db: float, n: int, rate: int) -> tuple[np.ndarray, dict[str, float]] | None:
    """Place a dry sound (RMS 1) at a random onset on a 1 ms grid, at ``snr_db``: the full-length
    array and its ``onset``/``offset`` in seconds; None when nothing of it is left."""
    ms = rate / 1000
    y = y[: n - int(ms)]  # leave room for a 1 ms grid onset
    if y.size == 0:
        return None
    onset_ms = int(rng.integers(0, int((n - y.size) / ms) + 1))
    at = int(round(onset_ms * ms))
    full = np.zeros(n)
    full[at : at + y.size] = y.astype(np.float64) * 10 ** (snr_db / 20)
    return full, {"onset": round(onset_ms / 1000, 3), "offset": round((at + y.size) / rate, 3)}


def make_clip(seed: int, subset: str, index: int, rate: int = 16000, gap: str = "standard", real: RealClips | None = None) -> dict[str, Any]:
    """Everything about one clip: ``audio`` (int16, what the WAV holds), ``events`` (class, onset,
    offset, seeds and levels), ``background``/``room``/``mic``/``level`` parameters, and the
    components before the final gain: ``dry`` (one full-length array per event, the event as
    placed, before any room) and ``bg`` (the background). With ``gap="wide"`` a real clip also has
    ``distractors`` (non-target sounds: kind, seed, onset, offset, SNR) and ``distractor_dry``, and
    its events a ``shift`` ratio. With ``real`` (:mod:`streamkit.data.sed_real`) some events come from
    recorded clips (their ``params`` name the clip). Depends only on the arguments."""
    if gap not in DOMAIN_GAPS:
        raise ValueError(f"domain gap must be one of {', '.join(DOMAIN_GAPS)}, got {gap!r}")
    domain = SUBSETS[subset][0]
    si = list(SUBSETS).index(subset)
    rng = np.random.default_rng(np.random.SeedSequence([int(seed), si, int(index)]))
    wide = gap == "wide" and domain == "real"
    xr = np.random.default_rng(np.random.SeedSequence([int(seed), si, int(index), 1])) if wide else None
    rr = np.random.default_rng(np.random.SeedSequence([int(seed), si, int(index), 2]))  # real clips' own draws
    n = int(round(CLIP_S * rate))
    k = int(rng.choice(len(N_EVENTS_P), p=N_EVENTS_P)) + 1
    classes = [CLASSES[i] for i in rng.choice(len(CLASSES), size=k, replace=False)]
    events: list[dict[str, Any]] = []
    dry: list[np.ndarray] = []
    for cls in classes:
        ev_seed = int(rng.integers(2**31))
        dur = round(draw_duration(rng, cls), 3)
        snr = round(float(rng.uniform(*SNR_DB[domain])), 2)  # recorded as used: events regenerate exactly
        y, info = render_event(cls, ev_seed, dur, rate) if real is None else real.event(subset, cls, ev_seed, dur, rr, rate)
        shift = None
        if xr is not None:
            shift = round(math.exp(xr.uniform(math.log(SHIFT_RANGE[0]), math.log(SHIFT_RANGE[1]))), 4)
            y = shift_source(y, shift, rate)
        placed = _place_at_random(rng, y, snr, n, rate)
        if placed is None:
            continue
        full, span = placed
        dry.append(full)
        events.append(
            {
                "event_label": cls,
                **span,
                "seed": ev_seed,
                "duration_s": dur,
                "snr_db": snr,
                "params": info,
                **({} if shift is None else {"shift": shift}),
            }
        )
    distractors: list[dict[str, Any]] = []
    distractor_dry: list[np.ndarray] = []
    if xr is not None:
        for _ in range(int(xr.choice(len(N_DISTRACTORS_P), p=N_DISTRACTORS_P))):
            kind = DISTRACTORS[int(xr.integers(len(DISTRACTORS)))]
            d_seed = int(xr.integers(2**31))
            dur = round(float(xr.uniform(*DISTRACTOR_S)), 3)
            snr = round(float(xr.uniform(*SNR_DB[domain])), 2)
            y, info = render_distractor(kind, d_seed, dur, rate)
            placed = _place_at_random(xr, y, snr, n, rate)
            if placed is None:
                continue
            full, span = placed
            distractor_dry.append(full)
            distractors.append({"kind": kind, **span, "seed": d_seed, "duration_s": dur, "snr_db": snr, "params": info})
    bg, bg_info = _background(rng, n, rate, domain)
    rec: dict[str, Any] = {"domain": domain, "background": bg_info, "room": None, "mic": None}
    if domain == "synthetic":
        bg_dbfs = float(rng.uniform(-45, -35))
        gain = 10 ** (bg_dbfs / 20)
        mix = bg + sum(dry, np.zeros(n))
        peak = float(np.max(np.abs(mix))) * gain
        if peak > 0.9:
            gain *= 0.9 / peak
        out = mix * gain
        rec["level"] = {"background_dbfs": round(bg_dbfs, 2), "gain": gain}  # exact: the test rebuilds the mix
    else:
        rt60 = float(rng.uniform(0.2, 0.9))
        wet = np.zeros(n)
        drrs = []
        for d in dry:
            drr = float(rng.uniform(-4, 10))
            drrs.append(round(drr, 2))
            h = _rir(rng, rate, rt60, drr)
            wet += signal.fftconvolve(d, h)[:n]
        for d in distractor_dry:  # the same room, their own draws (xr): the standard clip stays as it was
            assert xr is not None
            wet += signal.fftconvolve(d, _rir(xr, rate, rt60, float(xr.uniform(-4, 10))))[:n]
        rec["room"] = {"rt60_s": round(rt60, 3), "drr_db": drrs}
        mic = _mic(rng, rate)
        rec["mic"] = mic
        mix = _apply_mic(bg + wet, mic, rate)
        rms_dbfs = float(rng.uniform(-42, -14))
        out = mix * (10 ** (rms_dbfs / 20) / (np.sqrt(np.mean(mix**2)) + 1e-12))
        clip_at = None
        if rng.random() < 0.3:
            clip_at = float(rng.uniform(0.3, 0.8))
            c = clip_at * float(np.max(np.abs(out)))
            out = c * np.tanh(out / c)
        rec["level"] = {"rms_dbfs": round(rms_dbfs, 2), "soft_clip": clip_at, "hard_clipped": int(np.sum(np.abs(out) > 1.0))}
        out = np.clip(out, -1.0, 1.0)
    if wide:
        rec["distractors"], rec["distractor_dry"] = distractors, distractor_dry
    return {"audio": _to_i16(out), "events": events, "dry": dry, "bg": bg, **rec}


def _make_clip(task: dict[str, Any]) -> dict[str, Any]:
    real = sed_real.cached(task["real"], task["real_fraction"]) if task.get("real") else None
    c = make_clip(task["seed"], task["subset"], task["index"], task["rate"], task["gap"], real)
    write_audio(Path(task["out"]) / task["subset"] / "audio" / f"{task['id']}.wav", c["audio"], task["rate"], subtype="PCM_16", durable=False)
    keys = ("events", "domain", "background", "room", "mic", "level") + (("distractors",) if "distractors" in c else ())
    return {"id": task["id"], **{k: c[k] for k in keys}}


# --------------------------------------------------------------------------------------------
# corpus
# --------------------------------------------------------------------------------------------


def _labels_tsv(kind: str, clips: list[dict[str, Any]]) -> str:
    if kind == "strong":
        lines = ["filename\tonset\toffset\tevent_label"]
        for c in clips:
            for e in sorted(c["events"], key=lambda e: (e["onset"], e["event_label"])):
                lines.append(f"{c['id']}.wav\t{e['onset']:.3f}\t{e['offset']:.3f}\t{e['event_label']}")
    elif kind == "weak":
        lines = ["filename\tevent_labels"]
        lines += [f"{c['id']}.wav\t{','.join(sorted({e['event_label'] for e in c['events']}))}" for c in clips]
    else:
        lines = ["filename"] + [f"{c['id']}.wav" for c in clips]
    return "\n".join(lines) + "\n"


def generate(
    out_dir: str | os.PathLike[str],
    counts: dict[str, int] | None = None,
    seed: int = 0,
    *,
    rate: int = 16000,
    jobs: int = 1,
    progress: Any = None,
    gap: str = "standard",
    real_clips: str | os.PathLike[str] | None = None,
    real_fraction: float = sed_real.DEFAULT_FRACTION,
) -> dict[str, Any]:
    """Write the corpus under ``out_dir``; returns (and writes) the manifest.

    ``counts`` maps subset -> clips (missing subsets: :data:`DEFAULT_COUNTS`; 0 skips a subset).
    ``progress(done, total, wall_seconds)`` is called after every clip. ``real_clips``: a ``streamkit
    corpus real`` root whose train/dev clips replace ``real_fraction`` of the events of their classes
    (:mod:`streamkit.data.sed_real`; its eval split is never read).

    Raises:
        ValueError: a negative count, an unknown subset, no clips at all, a rate below 8 kHz, an
            unknown domain gap, or unusable ``real_clips``.
        EspeakMissingError: espeak-ng is not installed (``apt-get install espeak-ng``).
    """
    from streamkit.data.tts import espeak_version, require_espeak

    cnt = dict(DEFAULT_COUNTS)
    for k, v in (counts or {}).items():
        if k not in SUBSETS:
            raise ValueError(f"unknown subset {k!r}; one of {', '.join(SUBSETS)}")
        cnt[k] = int(v)
    for k, v in cnt.items():
        if v < 0:
            raise ValueError(f"--clips-{k} must be >= 0, got {v}")
    if sum(cnt.values()) == 0:
        raise ValueError("no clips requested (all counts are 0)")
    if gap not in DOMAIN_GAPS:
        raise ValueError(f"--domain-gap must be one of {', '.join(DOMAIN_GAPS)}, got {gap!r}")
    if int(rate) != rate or rate < 8000 or rate % 100:
        raise ValueError(f"rate must be an integer multiple of 100 Hz, >= 8000, got {rate}")
    require_espeak()
    real = None if real_clips is None else sed_real.RealClips.load(real_clips, real_fraction)
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise ValueError(f"--out {out} exists and is not a directory")
    tasks = []
    for sub, n in cnt.items():
        if n <= 0:
            continue
        (out / sub / "audio").mkdir(parents=True, exist_ok=True)
        for i in range(n):
            task = {"seed": int(seed), "subset": sub, "index": i, "id": f"{sub}_{i:05d}", "rate": int(rate), "out": str(out), "gap": gap}
            tasks.append(task if real is None else {**task, "real": str(real.root), "real_fraction": real.fraction})
    t0 = time.perf_counter()
    results: list[dict[str, Any]] = []
    if jobs > 1:
        import multiprocessing as mp

        with mp.get_context("spawn").Pool(jobs) as pool:
            for r in pool.imap(_make_clip, tasks, chunksize=1):
                results.append(r)
                if progress:
                    progress(len(results), len(tasks), time.perf_counter() - t0)
    else:
        for t in tasks:
            results.append(_make_clip(t))
            if progress:
                progress(len(results), len(tasks), time.perf_counter() - t0)
    wall = time.perf_counter() - t0
    by_sub: dict[str, list[dict[str, Any]]] = {}
    for t, r in zip(tasks, results):
        by_sub.setdefault(t["subset"], []).append(r)
    subsets: dict[str, Any] = {}
    for sub, clips in by_sub.items():
        domain, kind = SUBSETS[sub]
        write_text(out / sub / "labels.tsv", _labels_tsv(kind, clips))
        write_text(out / sub / "meta.json", json.dumps(clips, indent=1))
        ev = {c: 0 for c in CLASSES}
        for c in clips:
            for e in c["events"]:
                ev[e["event_label"]] += 1
        subsets[sub] = {"domain": domain, "labels": kind, "clips": len(clips), "events": sum(ev.values()), "events_per_class": ev}
        if real is not None:
            subsets[sub]["real_events"] = sum("real_clip" in e["params"] for c in clips for e in c["events"])
    argv = " ".join(f"--clips-{k} {v}" for k, v in cnt.items())
    manifest = {
        "format": FORMAT,
        "command": f"streamkit corpus sed --out {out} {argv} --seed {seed} --rate {rate}"
        + ("" if gap == "standard" else f" --domain-gap {gap}")
        + ("" if real is None else f" --real-clips {real_clips} --real-fraction {real.fraction:g}"),
        "seed": int(seed),
        "rate": int(rate),
        "clip_s": CLIP_S,
        "domain_gap": gap,
        "classes": list(CLASSES),
        "counts": cnt,
        "espeak_ng": espeak_version(),
        "subsets": subsets,
        "wall_s": round(wall, 2),
    }
    if real is not None:
        manifest["real_clips"] = real.record()
    write_text(out / "manifest.json", json.dumps(manifest, indent=1))
    return manifest


def corpus_table(manifest: dict[str, Any]) -> str:
    """Per subset: domain, label kind, clips, hours, mean events per clip, events per class."""
    cols = ["subset", "domain", "labels", "clips", "hours", "ev/clip"] + [SHORT[c] for c in CLASSES]
    rows = []
    for sub, s in manifest["subsets"].items():
        rows.append(
            [
                sub,
                s["domain"],
                s["labels"],
                str(s["clips"]),
                f"{s['clips'] * manifest['clip_s'] / 3600:.3f}",
                f"{s['events'] / max(s['clips'], 1):.2f}",
            ]
            + [str(s["events_per_class"][c]) for c in CLASSES]
        )
    w = [max(len(c), *(len(r[i]) for r in rows)) for i, c in enumerate(cols)]
    lines = ["  ".join(c.rjust(w[i]) for i, c in enumerate(cols)), "  ".join("-" * x for x in w)]
    lines += ["  ".join(v.rjust(w[i]) for i, v in enumerate(r)) for r in rows]
    return "\n".join(lines)
