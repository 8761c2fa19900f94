"""A singing-voice synthesiser with per-singer identity, for singer-identification corpora.

No singing corpus can be downloaded here, so ``streamkit corpus singers`` (:mod:`streamkit.data.singers_corpus`)
sings its own. :func:`sing` renders one recording of one singer (:class:`SingerProfile`) and
returns the audio with its ground truth: the f0 track every 10 ms (cents re 55 Hz, NaN where
unvoiced), the voicing, the phrases with their notes and planted motifs.

What a singer is (:meth:`SingerProfile.random`, all drawn from the singer's own seed):

* **Timbre.** Five formants per vowel (a reference set for /a e i o u/) scaled by the singer's
  vocal-tract length (``vtl_scale``: higher formants for a shorter tract), with a personal offset
  per formant (±6 %) and bandwidth scale; a glottal source of Rosenberg pulses (the singer's open
  quotient and opening/closing skew; the band-limited harmonic spectrum of the pulse derivative,
  so no aliasing) with an extra spectral tilt; breathiness (aspiration noise pulsed with the
  glottal cycle, shaped by the singer's neutral-vowel formants); jitter (relative f0 noise per
  1 ms) and shimmer (amplitude noise per 5 ms).
* **Pitch habits.** Vibrato rate (4.5-7.5 Hz) and depth (20-120 cents), its onset delay and the
  shortest note that gets it; slides between notes (portamento, 30-150 ms raised-cosine); a
  scoop from below into each phrase; a slow pitch drift.
* **Melody habits** (:mod:`streamkit.data.singing_melody`): mode (Phrygian or its flamenco
  variant), register (tonic), tempo, phrase starts and step preferences, personal motifs and how
  often they come, melisma and turn rates, breath lengths.

The f0 truth is the intended contour (notes, slides, scoops, vibrato, drift); jitter is
cycle-level noise around it and is not part of it. Frame ``i`` is centred at ``i * 10 ms``.
Voiced frames are those inside a phrase (phrases are legato: no unvoiced consonants).

Options of :func:`sing`: a guitar-like accompaniment (:func:`guitar`, Karplus-Strong plucks of
the Andalusian cadence chords in the breaths and under final notes) and a channel: ``room``
(the statistical room impulse response of the SED corpus, RT60 0.3-1.2 s) or ``hf`` (the HF SSB
channel simulator at 8 kHz, resampled back; its mistuning is set to 0 so the harmonics stay
harmonic and the f0 truth stays true).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import signal

from streamkit.data.singing_melody import MODES, Phrase, compose, random_motif

__all__ = [
    "CHANNELS",
    "FORMANTS",
    "FRAME_S",
    "RATE",
    "SingerProfile",
    "Song",
    "apply_channel",
    "glottal_harmonics",
    "guitar",
    "render_voice",
    "sing",
]

RATE = 16000
FRAME_S = 0.01  # truth frames
CTRL = 1000  # Hz: the f0 contour's control rate
AMP_HOP = 80  # samples (5 ms) between harmonic amplitude frames
CHANNELS = ("none", "room", "hf")
#: reference formants (Hz) of a tract with vtl_scale 1 (an adult male singer), F1..F5
FORMANTS: dict[str, tuple[float, ...]] = {
    "a": (730.0, 1090.0, 2440.0, 3400.0, 4300.0),
    "e": (530.0, 1840.0, 2480.0, 3400.0, 4300.0),
    "i": (300.0, 2290.0, 3010.0, 3500.0, 4300.0),
    "o": (570.0, 840.0, 2410.0, 3400.0, 4300.0),
    "u": (320.0, 870.0, 2240.0, 3400.0, 4300.0),
}
BANDWIDTHS = (80.0, 90.0, 120.0, 150.0, 200.0)


def _u(rng: np.random.Generator, lo: float, hi: float) -> float:
    return float(rng.uniform(lo, hi))


@dataclass
class SingerProfile:
    """Everything that makes one synthetic singer (see the module docstring); :meth:`random` draws one."""

    singer: str
    sex: str
    tonic_midi: float
    vtl_scale: float
    formant_offsets: tuple[float, ...]
    bw_scale: float
    open_quotient: float
    skew: float
    tilt_db_oct: float
    breathiness: float
    jitter: float
    shimmer: float
    vibrato_rate_hz: float
    vibrato_depth_cents: float
    vibrato_delay_s: float
    vibrato_min_note_s: float
    slide_s: float
    scoop_cents: float
    drift_cents: float
    note_s: float
    turn_note_s: float
    melisma_rate: float
    turn_rate: float
    motif_rate: float
    motifs: list[dict[str, Any]]
    start_degrees: tuple[int, ...]
    step_p: tuple[float, ...]
    range_degrees: int
    final_hold: tuple[float, float]
    breath_s: tuple[float, float]
    mode: str

    @classmethod
    def random(cls, rng: np.random.Generator, singer: str) -> SingerProfile:
        """Draw a singer. Half are low voices (tonic MIDI 50-56, vtl_scale 0.9-1.05), half high
        (tonic 57-63, vtl_scale 1.08-1.25)."""
        low = bool(rng.random() < 0.5)
        step_p = rng.dirichlet(np.array([1.0, 5.0, 1.2, 4.0, 1.5, 0.5]) * 4)
        fh = _u(rng, 1.0, 2.0)
        br = _u(rng, 0.5, 1.0)
        return cls(
            singer=singer,
            sex="low" if low else "high",
            tonic_midi=float(rng.integers(50, 57) if low else rng.integers(57, 64)),
            vtl_scale=_u(rng, 0.9, 1.05) if low else _u(rng, 1.08, 1.25),
            formant_offsets=tuple(round(float(v), 4) for v in rng.uniform(0.94, 1.06, 5)),
            bw_scale=_u(rng, 0.8, 1.5),
            open_quotient=_u(rng, 0.4, 0.8),
            skew=_u(rng, 1.5, 4.0),
            tilt_db_oct=_u(rng, -4.0, 2.0),
            breathiness=_u(rng, 0.01, 0.2),
            jitter=_u(rng, 0.002, 0.01),
            shimmer=_u(rng, 0.02, 0.1),
            vibrato_rate_hz=_u(rng, 4.5, 7.5),
            vibrato_depth_cents=_u(rng, 20.0, 120.0),
            vibrato_delay_s=_u(rng, 0.1, 0.4),
            vibrato_min_note_s=_u(rng, 0.3, 0.6),
            slide_s=_u(rng, 0.03, 0.15),
            scoop_cents=_u(rng, 0.0, 150.0),
            drift_cents=_u(rng, 3.0, 20.0),
            note_s=_u(rng, 0.2, 0.45),
            turn_note_s=_u(rng, 0.05, 0.09),
            melisma_rate=_u(rng, 0.1, 0.5),
            turn_rate=_u(rng, 0.05, 0.35),
            motif_rate=_u(rng, 0.4, 0.95),
            motifs=[random_motif(rng) for _ in range(3)],
            start_degrees=tuple(int(v) for v in rng.choice([3, 4, 5], size=2)),
            step_p=tuple(float(v) for v in step_p),
            range_degrees=int(rng.integers(5, 9)),
            final_hold=(fh, fh + _u(rng, 0.5, 2.0)),
            breath_s=(br, br + _u(rng, 0.5, 1.5)),
            mode=str(rng.choice(list(MODES))),
        )

    def record(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def formants(self, vowel: str) -> np.ndarray:
        """This singer's F1..F5 (Hz) of ``vowel``."""
        return np.asarray(FORMANTS[vowel]) * self.vtl_scale * np.asarray(self.formant_offsets)


@dataclass
class Song:
    """One rendered recording: ``audio`` (float32, peak < 1), ``rate``, the truth (``f0_cents`` per
    10 ms frame, NaN unvoiced; ``voiced``; ``phrases``), the ``profile`` and what was drawn (``info``)."""

    audio: np.ndarray
    rate: int
    f0_cents: np.ndarray
    voiced: np.ndarray
    phrases: list[Phrase]
    profile: SingerProfile
    info: dict[str, Any]

    @property
    def f0_hz(self) -> np.ndarray:
        return 55.0 * 2.0 ** (self.f0_cents / 1200.0)


def glottal_harmonics(open_quotient: float, skew: float, k: int) -> np.ndarray:
    """Complex amplitudes of harmonics 1..k of the Rosenberg pulse derivative (the glottal flow
    derivative, lip radiation included) with open quotient ``open_quotient`` (opening + closing
    phase, fraction of the period) and ``skew`` = opening / closing time; harmonic 1 has magnitude 1."""
    m = 4096
    tp = open_quotient * skew / (1 + skew)
    tn = open_quotient / (1 + skew)
    ph = np.arange(m) / m
    g = np.where(ph < tp, 0.5 * (1 - np.cos(np.pi * ph / tp)), 0.0)
    closing = (ph >= tp) & (ph < tp + tn)
    g[closing] = np.cos(0.5 * np.pi * (ph[closing] - tp) / tn)
    spec = np.fft.rfft(g)[1 : k + 1] * (1j * np.arange(1, k + 1))  # derivative
    return spec / (np.abs(spec[0]) + 1e-12)


def _envelope(freq: np.ndarray, formants: np.ndarray, bws: np.ndarray) -> np.ndarray:
    """Magnitude of a cascade of second-order resonances (unit gain at 0 Hz); ``formants`` and
    ``bws`` (frames, 5), ``freq`` (frames, k)."""
    h = np.ones_like(freq)
    for i in range(formants.shape[1]):
        f = formants[:, i : i + 1]
        b = bws[:, i : i + 1]
        h *= f**2 / np.sqrt((f**2 - freq**2) ** 2 + (freq * b) ** 2)
    return h


def _raised(a: float, b: float, n: int) -> np.ndarray:
    return a + (b - a) * 0.5 * (1 - np.cos(np.pi * np.arange(n) / max(n, 1)))


def _lowpass_noise(rng: np.random.Generator, n: int, rate: float, fc: float) -> np.ndarray:
    x = signal.sosfiltfilt(signal.butter(2, fc / (rate / 2), output="sos"), rng.standard_normal(n + 200))[100 : 100 + n]
    return x / (np.std(x) + 1e-12)


def _contour(phrases: list[Phrase], p: SingerProfile, rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """At the control rate: cents re 55 Hz (smooth truth), voicing, amplitude envelope, vowel index
    per control point (for the formants)."""
    cents = np.zeros(n)
    voiced = np.zeros(n, bool)
    amp = np.zeros(n)
    vow = np.zeros(n, np.int64)
    names = list(FORMANTS)
    for ph in phrases:
        a, b = int(round(ph.start * CTRL)), min(n, int(round(ph.end * CTRL)))
        voiced[a:b] = True
        level = _u(rng, 0.7, 1.0)
        for note in ph.notes:
            i, j = int(round(note.start * CTRL)), min(n, int(round(note.end * CTRL)))
            cents[i:j] = 100.0 * (note.midi - 33.0)  # MIDI 33 = A1 = 55 Hz
            vow[i:j] = names.index(note.vowel)
            amp[i:j] = level * _u(rng, 0.85, 1.15)
        for prev, nxt in zip(ph.notes, ph.notes[1:]):  # slides centred on the note boundaries
            s = min(p.slide_s * _u(rng, 0.7, 1.3), 0.4 * (prev.end - prev.start), 0.4 * (nxt.end - nxt.start))
            k = max(2, int(s * CTRL))
            c = int(round(prev.end * CTRL))
            lo, hi = max(a, c - k // 2), min(b, c - k // 2 + k)
            cents[lo:hi] = _raised(100.0 * (prev.midi - 33.0), 100.0 * (nxt.midi - 33.0), k)[: hi - lo]
        for note in ph.notes:  # vibrato on long notes, after the singer's delay, ramped in
            dur = note.end - note.start
            if dur < p.vibrato_min_note_s:
                continue
            i0 = int(round((note.start + p.vibrato_delay_s) * CTRL))
            j = min(n, int(round(note.end * CTRL)))
            if j - i0 < 10:
                continue
            t = np.arange(j - i0) / CTRL
            depth = p.vibrato_depth_cents * _u(rng, 0.8, 1.2)
            rate = p.vibrato_rate_hz * _u(rng, 0.93, 1.07)
            ramp = np.minimum(1.0, t / 0.15)
            cents[i0:j] += depth * ramp * np.sin(2 * np.pi * rate * t)
        k = max(2, int(0.08 * CTRL))  # the scoop into the phrase
        cents[a : a + k] -= _raised(p.scoop_cents, 0.0, k)[: len(cents[a : a + k])]
        env = np.ones(b - a)
        att, rel = min(int(0.05 * CTRL), (b - a) // 3), min(int(0.1 * CTRL), (b - a) // 3)
        env[:att] = np.linspace(0, 1, att)
        env[b - a - rel :] = np.linspace(1, 0, rel)
        amp[a:b] *= env
    cents += p.drift_cents * _lowpass_noise(rng, n, CTRL, 0.5)
    w = int(0.02 * CTRL)
    amp = np.convolve(amp, np.ones(w) / w, mode="same")
    return cents, voiced, amp, vow


def render_voice(
    phrases: list[Phrase], p: SingerProfile, rng: np.random.Generator, n: int, rate: int = RATE
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The dry voice (n samples, voiced RMS 0.1) and the truth at the control rate (cents, voicing)."""
    nc = int(math.ceil(n / rate * CTRL)) + 1
    cents, voiced, amp, vow = _contour(phrases, p, rng, nc)
    tc = np.arange(nc) / CTRL
    jit = 1.0 + p.jitter * rng.standard_normal(nc)
    f0 = 55.0 * 2.0 ** (cents / 1200.0) * jit
    ts = np.arange(n) / rate
    f0s = np.interp(ts, tc, f0)
    phase = 2 * np.pi * np.cumsum(f0s) / rate
    # harmonic amplitudes every AMP_HOP samples
    na = n // AMP_HOP + 2
    ta = np.arange(na) * AMP_HOP / rate
    f0a = np.interp(ta, tc, f0)
    kmax = int(0.48 * rate / max(float(np.min(f0a[np.interp(ta, tc, voiced.astype(float)) > 0.5], initial=1e9)), 60.0)) + 1
    kmax = max(1, min(kmax, int(0.48 * rate / 60.0)))
    form = np.stack([p.formants(v) for v in FORMANTS])[np.round(np.interp(ta, tc, vow)).astype(int)]
    form = signal.sosfiltfilt(signal.butter(1, 20.0 / (rate / AMP_HOP / 2), output="sos"), form, axis=0)  # vowel transitions ~40 ms
    bws = np.broadcast_to(np.asarray(BANDWIDTHS) * p.bw_scale, form.shape)
    kk = np.arange(1, kmax + 1)
    freq = f0a[:, None] * kk[None, :]
    src = glottal_harmonics(p.open_quotient, p.skew, kmax)
    mag = np.abs(src) * kk ** (p.tilt_db_oct / 6.02) * _envelope(freq, form, bws)
    mag *= np.clip((0.47 * rate - freq) / (0.04 * rate), 0.0, 1.0)  # fade harmonics out below Nyquist
    shim = np.clip(1.0 + p.shimmer * rng.standard_normal(na), 0.3, None)
    mag *= (np.interp(ta, tc, amp) * shim)[:, None]
    cphi, sphi = np.cos(np.angle(src)), np.sin(np.angle(src))
    y = np.zeros(n)
    on = np.interp(ts, tc, amp) > 0
    idx = np.flatnonzero(on)
    if idx.size:
        a, b = int(idx[0]), int(idx[-1]) + 1
        ph = phase[a:b]
        c1, s1 = np.cos(ph), np.sin(ph)
        ck, sk = c1.copy(), s1.copy()
        cprev, sprev = np.ones_like(ph), np.zeros_like(ph)
        tseg = ts[a:b]
        for i in range(kmax):
            ak = np.interp(tseg, ta, mag[:, i])
            y[a:b] += ak * (sk * cphi[i] + ck * sphi[i])  # sin(k phi + theta_k)
            ck, cprev = 2 * c1 * ck - cprev, ck
            sk, sprev = 2 * c1 * sk - sprev, sk
        # breathiness: aspiration noise pulsed with the glottal cycle, shaped by the neutral vowel
        noise = rng.standard_normal(b - a) * (0.6 + 0.4 * c1)
        for f, bw in zip(p.formants("a"), np.asarray(BANDWIDTHS) * p.bw_scale * 2):
            if f < 0.45 * rate:
                bb, aa = signal.iirpeak(f, f / bw, fs=rate)
                noise = noise + signal.lfilter(bb, aa, noise)
        noise = signal.sosfilt(signal.butter(2, 800.0, btype="high", fs=rate, output="sos"), noise)
        env = np.interp(tseg, tc, amp)
        noise *= env
        yv = y[a:b]
        ref = np.sqrt(np.mean(yv[env > 0.3] ** 2)) if np.any(env > 0.3) else 1.0
        y[a:b] = yv + noise * (p.breathiness * ref / (np.sqrt(np.mean(noise[env > 0.3] ** 2)) + 1e-12) if np.any(env > 0.3) else 0.0)
        y *= 0.1 / (ref + 1e-12)
    return y, cents, voiced


def guitar(phrases: list[Phrase], tonic_midi: float, n: int, rng: np.random.Generator, rate: int = RATE) -> np.ndarray:
    """Karplus-Strong plucks: the Andalusian cadence (iv-III-II-I chords of the mode of E,
    A minor - G - F - E on E) strummed in the breaths between phrases, and the I chord plucked
    softly under each phrase's final note. Unit-free (the caller sets the level)."""
    chords = {"iv": (5, 8, 12), "III": (3, 7, 10), "II": (1, 5, 8), "I": (0, 4, 7)}
    base = tonic_midi - 12
    y = np.zeros(n)

    def pluck(t: float, midi: float, gain: float) -> None:
        f = 440.0 * 2 ** ((midi - 69) / 12)
        d = max(2, int(round(rate / f - 0.5)))
        m = min(int(2.0 * rate), n - int(t * rate))
        if m <= 0:
            return
        x = np.zeros(m)
        x[:d] = rng.uniform(-1, 1, min(d, m))
        den = np.zeros(d + 2)
        den[0], den[d], den[d + 1] = 1.0, -0.498, -0.498
        s = int(t * rate)
        y[s : s + m] += gain * signal.lfilter([1.0], den, x)

    def strum(t: float, chord: tuple[int, ...], gain: float) -> None:
        for i, st in enumerate((chord[0] - 12,) + chord):
            pluck(t + i * _u(rng, 0.012, 0.03), base + st + 12 * (i > 2), gain * _u(rng, 0.7, 1.0))

    for ph, nxt in zip(phrases, [*phrases[1:], None]):
        strum(ph.notes[-1].start, chords["I"], 0.4)
        t, end = ph.end + 0.1, (nxt.start - 0.2) if nxt is not None else n / rate - 0.5
        k = 0
        while t < end - 0.3:
            strum(t, chords[("iv", "III", "II", "I")[k % 4]], 1.0)
            t += _u(rng, 0.4, 0.8)
            k += 1
    return y


def apply_channel(x: np.ndarray, kind: str, rng: np.random.Generator, rate: int = RATE, severity: float = 0.3) -> tuple[np.ndarray, dict[str, Any]]:
    """``none``, ``room`` (a statistical RIR, RT60 0.3-1.2 s, DRR 0-12 dB) or ``hf`` (the HF
    channel simulator at 8 kHz with ``severity``, mistuning 0, resampled back to ``rate``)."""
    if kind == "none":
        return x, {}
    if kind == "room":
        from streamkit.data.sed_corpus import _rir

        rt60, drr = _u(rng, 0.3, 1.2), _u(rng, 0.0, 12.0)
        return signal.fftconvolve(x, _rir(rng, rate, rt60, drr))[: len(x)], {"rt60_s": round(rt60, 3), "drr_db": round(drr, 2)}
    if kind == "hf":
        import soxr

        from streamkit.data.hf_channel_engine import simulate
        from streamkit.data.hf_channel_params import ChannelParams

        params = dataclasses.replace(ChannelParams.random(rng, severity), mistune_hz=0.0)
        x8 = soxr.resample(x.astype(np.float64), rate, 8000)
        peak = float(np.max(np.abs(x8))) or 1.0
        r = simulate(x8 / peak * 0.9, params)
        y = soxr.resample(r.received.astype(np.float64), 8000, rate)[: len(x)]
        return np.pad(y, (0, len(x) - len(y))), {"snr_db": round(float(r.params.snr_db), 2), "seed": int(r.params.seed), "severity": severity}
    raise ValueError(f"channel must be one of {', '.join(CHANNELS)}, got {kind!r}")


def sing(profile: SingerProfile, seed: int, duration_s: float, *, rate: int = RATE, transpose: int = 0, mode: str | None = None,
         accompaniment: bool = False, channel: str = "none", phrases: list[Phrase] | None = None) -> Song:  # fmt: skip
    """Render one recording of ``profile`` (deterministic in ``seed`` and the arguments): a melody
    from :func:`~streamkit.data.singing_melody.compose` (or the given ``phrases``), the voice,
    optional guitar (at -12..-4 dB re the voice), the channel, a level (peak 0.3-0.9)."""
    if channel not in CHANNELS:
        raise ValueError(f"channel must be one of {', '.join(CHANNELS)}, got {channel!r}")
    if mode is not None and mode not in MODES:
        raise ValueError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
    if duration_s <= 0:
        raise ValueError(f"duration must be > 0 s, got {duration_s:g}")
    rng = np.random.default_rng(np.random.SeedSequence([int(seed), 0]))
    if phrases is None:
        phrases = compose(profile, np.random.default_rng(np.random.SeedSequence([int(seed), 1])), duration_s, transpose=transpose, mode=mode)
    n = int(round(max(duration_s, phrases[-1].end + 0.5) * rate))
    voice, cents, voiced = render_voice(phrases, profile, rng, n, rate)
    info: dict[str, Any] = {"transpose": transpose, "mode": mode or profile.mode, "channel": channel}
    x = voice
    if accompaniment:
        g = guitar(phrases, profile.tonic_midi + transpose, n, np.random.default_rng(np.random.SeedSequence([int(seed), 2])), rate)
        db = _u(rng, -12.0, -4.0)
        x = x + g * (np.sqrt(np.mean(voice[voice != 0] ** 2)) / (np.sqrt(np.mean(g[g != 0] ** 2)) + 1e-12)) * 10 ** (db / 20)
        info["guitar_db"] = round(db, 2)
    x, info["channel_params"] = apply_channel(x, channel, np.random.default_rng(np.random.SeedSequence([int(seed), 3])), rate)
    peak = _u(rng, 0.3, 0.9)
    x = x * (peak / (float(np.max(np.abs(x))) + 1e-12))
    info["peak"] = round(peak, 3)
    nf = n // int(round(rate * FRAME_S))
    ic = np.round(np.arange(nf) * FRAME_S * CTRL).astype(int)
    v = voiced[ic]
    f0 = np.where(v, cents[ic], np.nan)
    return Song(x.astype(np.float32), rate, f0, v, phrases, profile, info)
