"""Non-speech HF signals (distractors) for the SAD corpus and its benchmarks.

What an SSB receiver (8 kHz audio, 300-3000 Hz passband) hears from the everyday non-speech
signals of an HF band: ``KINDS`` =

========== ==================================================================================
cw         Morse, 12-35 WPM, 400-900 Hz keyed tone (raised-cosine edges, chirp, drift, hand/keyer)
rtty       170 Hz FSK at 45.45 Bd, ITA2 start/5 bits/1.5 stop, continuous phase
psk31      31.25 Bd BPSK with cosine-shaped amplitude at phase reversals, varicode
ft8        8-FSK, 6.25 Hz / 0.16 s, 12.64 s transmissions in 15 s slots, several stations
ft4        4-FSK, 20.8 Hz / 0.048 s, 7.5 s slots
ofdm       FreeDV 700D / codec2 datac-like: 16-30 QPSK carriers, cyclic prefix, pilot symbols
sstv       Martin/Scottie/Robot 36 lines: 1200 Hz sync, 1500-2300 Hz scans of a smooth image
am_music   AM broadcast music (synthetic or the caller's samples), zero-beat or with carrier whistle
carriers   1-4 steady or drifting carriers/heterodynes (hum, tune-up keying)
radar      over-the-horizon radar: FMCW sweeps 10-60/s crossing the passband, or pulse trains
qrn        lightning crashes: clustered decaying broadband impulses on a crackle
========== ==================================================================================

(generators in :mod:`streamkit.data.hf_distractor_digital` and
:mod:`streamkit.data.hf_distractor_analog`; every random parameter is seeded from the caller's
``numpy`` Generator and recorded in the info dict.)

* :func:`distractor` ``(kind, n_samples, rng, rate=8000)``: the audio, at an active level of
  ``level_db`` (default -20 dBFS), peak ≤ 0.99; :func:`distractor_info` also returns the drawn
  parameters.
* :func:`nonspeech_file` ``(kind, seconds, rng, severity)``: a distractor through a random HF
  channel (``ChannelParams.random``), i.e. a received file with no speech at all (for
  false-alarm benchmarks per kind).
* For ``streamkit corpus hf --distractors P``: :func:`place_distractors` and
  :func:`distractor_track` (the transmitted distractor track of one file), :func:`simulate_mix`
  (speech + distractors through one channel, the channel's levels referred to the speech alone).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from streamkit.data.hf_channel_engine import resolve_speech_level, simulate
from streamkit.data.hf_channel_params import NOMINAL_SPEECH_LEVEL_DB, RATE, ChannelParams
from streamkit.data.hf_channel_stages import active_level_db, bandpassed
from streamkit.data.hf_distractor_analog import am_music, carriers, qrn, radar
from streamkit.data.hf_distractor_digital import cw, ft4, ft8, ofdm, psk31, rtty, sstv

__all__ = [
    "KINDS",
    "LEVEL_DB",
    "SEG_S",
    "distractor",
    "distractor_info",
    "distractor_track",
    "nonspeech_file",
    "place_distractors",
    "simulate_mix",
]

Generator = Callable[..., tuple[np.ndarray, dict[str, Any]]]

GENERATORS: dict[str, Generator] = {
    "cw": cw,
    "rtty": rtty,
    "psk31": psk31,
    "ft8": ft8,
    "ft4": ft4,
    "ofdm": ofdm,
    "sstv": sstv,
    "am_music": am_music,
    "carriers": carriers,
    "radar": radar,
    "qrn": qrn,
}
#: the distractor kinds, in a fixed order (the corpus draws them uniformly)
KINDS: tuple[str, ...] = tuple(GENERATORS)

SEG_S = (2.0, 20.0)  #: length of one distractor segment in the corpus (uniform)
LEVEL_DB = (-10.0, 6.0)  #: active level re the file's speech (uniform, dB)
SPEECH_MARGIN_S = 0.5  #: a distractor keeps this far from any speech interval
EDGE_MARGIN_S = 0.25  #: ... and from the file's start and end
PEAK = 0.99  #: no transmitted sample beyond this (the transmitter's PEP is ±1)


def distractor_info(kind: str, n_samples: int, rng: np.random.Generator, rate: int = RATE, **overrides: Any) -> tuple[np.ndarray, dict[str, Any]]:
    """``(audio, info)`` of one ``kind`` at its generator's nominal amplitude (float64, finite);
    ``overrides`` fix named random parameters (see each generator), ``info`` records them all.

    Raises:
        ValueError: unknown kind, negative length, rate below 8000 Hz.
    """
    if kind not in GENERATORS:
        raise ValueError(f"unknown distractor kind {kind!r}; known: {', '.join(KINDS)}")
    if int(n_samples) < 0:
        raise ValueError(f"n_samples must be >= 0, got {n_samples}")
    if int(rate) < RATE:
        raise ValueError(f"rate must be >= {RATE} Hz (the signals fill a 300-3000 Hz passband), got {rate}")
    n = int(n_samples)
    if n == 0:
        return np.zeros(0), {"kind": kind}
    x, info = GENERATORS[kind](n, rng, int(rate), **overrides)
    x = np.asarray(x, np.float64)
    if x.shape != (n,) or not np.all(np.isfinite(x)):
        raise RuntimeError(f"distractor {kind}: generator returned shape {x.shape} or non-finite samples")  # a bug, not bad input
    return x, {"kind": kind, **info}


def _scale(x: np.ndarray, level_db: float, rate: int, band: bool) -> tuple[np.ndarray, float | None]:
    """``x`` scaled to active level ``level_db`` (of the band-passed signal with ``band``), peak
    capped at :data:`PEAK`; returns the achieved level (None for silence)."""
    lvl = active_level_db(bandpassed(x) if band else x, rate)
    if lvl is None:
        return x * 0.0, None
    g = 10 ** ((level_db - lvl) / 20)
    pk = float(np.abs(x).max()) * g
    if pk > PEAK:
        g *= PEAK / pk
    return x * g, lvl + 20 * math.log10(g)


def distractor(kind: str, n_samples: int, rng: np.random.Generator, rate: int = RATE, *, level_db: float = -20.0, **overrides: Any) -> np.ndarray:
    """The audio of one non-speech HF signal ``kind`` (one of :data:`KINDS`), float32 ``(n,)``,
    at an active level (P.56-like, 20 ms frames) of ``level_db`` dBFS, lowered where needed so
    that no sample exceeds 0.99. Deterministic for a given ``rng`` state. ``am_music`` takes
    ``music=`` (real samples at ``rate``) instead of its synthetic music."""
    x, _ = distractor_info(kind, n_samples, rng, rate, **overrides)
    return _scale(x, level_db, int(rate), False)[0].astype(np.float32) if x.size else x.astype(np.float32)


# ------------------------------------------------------------------------------------ corpus
def place_distractors(rng: np.random.Generator, intervals: np.ndarray | Sequence[Sequence[int]], n: int, fraction: float,
                      rate: int = RATE) -> list[tuple[int, int]]:  # fmt: skip
    """Where a file's distractors go: each silence (the complement of the speech ``intervals``)
    that leaves at least 2 s after keeping :data:`SPEECH_MARGIN_S` from speech (and
    :data:`EDGE_MARGIN_S` from the file's ends) gets, with probability ``fraction``, one segment
    of U(2, min(20, room)) s at a uniform position. Half-open sample intervals, sorted."""
    iv = np.asarray(intervals, np.int64).reshape(-1, 2)
    bounds = [0, *iv.reshape(-1).tolist(), n]
    out = []
    sm, em, lo = int(SPEECH_MARGIN_S * rate), int(EDGE_MARGIN_S * rate), int(SEG_S[0] * rate)
    for a, b in zip(bounds[0::2], bounds[1::2]):
        a2 = a + (em if a == 0 else sm)
        b2 = b - (em if b == n else sm)
        room = b2 - a2
        if room < lo or rng.random() >= fraction:
            continue
        d = int(rng.uniform(SEG_S[0], min(SEG_S[1], room / rate)) * rate)
        s = a2 + int(rng.integers(0, room - d + 1))
        out.append((s, s + d))
    return out


def distractor_track(clean: np.ndarray, intervals: np.ndarray | Sequence[Sequence[int]], fraction: float, rng: np.random.Generator,
                     kinds: Sequence[str] = KINDS) -> tuple[np.ndarray, list[dict[str, Any]]]:  # fmt: skip
    """The transmitted distractor track of one corpus file (float64, ``len(clean)``, zero outside
    its segments) and one record per segment ``{start, stop, kind, level_db, params}``.

    Segments from :func:`place_distractors`; each a random kind from ``kinds`` at an active level
    of U(-10, +6) dB re the file's speech (both measured band-passed like the simulator's speech
    level; ``level_db`` records the achieved value after the 0.99 peak cap)."""
    x = np.asarray(clean, np.float64)
    n = x.shape[0]
    track = np.zeros(n)
    recs: list[dict[str, Any]] = []
    spl = active_level_db(bandpassed(x)) if n else None
    ref = NOMINAL_SPEECH_LEVEL_DB if spl is None else spl
    for a, b in place_distractors(rng, intervals, n, fraction):
        kind = kinds[int(rng.integers(len(kinds)))]
        rel = float(rng.uniform(*LEVEL_DB))
        d, info = distractor_info(kind, b - a, rng)
        d, lvl = _scale(d, ref + rel, RATE, True)
        if lvl is None:
            continue
        track[a:b] = d
        info.pop("kind")
        recs.append({"start": int(a), "stop": int(b), "kind": kind, "level_db": round(lvl - ref, 3), "params": info})
    return track, recs


def simulate_mix(clean: np.ndarray, distractors: np.ndarray | None, params: ChannelParams, interferer: np.ndarray | None = None, *,
                 diagnostics: bool = False) -> Any:  # fmt: skip
    """:func:`~streamkit.data.hf_channel.simulate` of ``clean + distractors`` (same length), with
    the speech level (and so the SNR, AGC knee, impulse and carrier levels) measured from
    ``clean`` alone, as without distractors. ``distractors`` None is plain ``simulate``."""
    c = np.asarray(clean)
    if distractors is None:
        return simulate(c, params, interferer, diagnostics=diagnostics)
    d = np.asarray(distractors)
    if d.shape != c.shape:
        raise ValueError(f"distractor track shape {d.shape} differs from the clean track's {c.shape}")
    p = resolve_speech_level(np.asarray(c, np.float64), params)
    return simulate(np.asarray(c, np.float64) + np.asarray(d, np.float64), p, interferer, diagnostics=diagnostics)


def nonspeech_file(kind: str, seconds: float, rng: np.random.Generator, severity: float = 0.5, **overrides: Any) -> np.ndarray:
    """A received file with no speech: ``seconds`` of ``kind`` through a random HF channel
    (``ChannelParams.random(rng, severity)``, levels referred to the nominal -26 dB speech level;
    the distractor's active level is that + U(-10, +6) dB), quantised to PCM_16 like the corpus;
    float32 at 8 kHz. Every sample is non-speech: a SAD's false alarms on it are its false-alarm rate."""
    if not (math.isfinite(seconds) and seconds > 0):
        raise ValueError(f"seconds must be > 0, got {seconds}")
    n = int(round(seconds * RATE))
    params = ChannelParams.random(rng, severity).replace(speech_level_db=NOMINAL_SPEECH_LEVEL_DB)
    rel = float(rng.uniform(*LEVEL_DB))
    d, _ = distractor_info(kind, n, rng, **overrides)
    d, _lvl = _scale(d, NOMINAL_SPEECH_LEVEL_DB + rel, RATE, True)
    y = simulate(d, params).received
    return (np.clip(np.round(np.asarray(y, np.float64) * 32767), -32768, 32767) / 32767).astype(np.float32)
