"""HF SSB channel simulator: clean 8 kHz speech in, KiwiSDR-like received audio out, time-aligned.

Usable offline (:func:`simulate`, for corpus generation) and as a streaming block
(:class:`HFChannel`, registry name ``data.hf_channel``). Both run the same frame engine
(:class:`_Engine`, fixed frames of :data:`FRAME` samples on the absolute sample grid), so the
block's output is **bit-identical** to ``simulate(..., apply_rate_offset=False)`` for any chunking.

Signal chain (everything at 8 kHz; the radio part in complex baseband)::

    clean x ── [TX compressor] ── SSB filter (LSB, 300-2700 Hz) ──┬─ path 1 (-delay/2) × g1[n] ─┐
                                                                  └─ path 2 (+delay/2) × g2[n] ─┴─ × mistune
      + band noise + atmospheric impulses + heterodyne carriers + interferer (own SSB + fading + offset)
      ── RX filter (LSB, 300-2700 Hz) ── Kiwi/CuteSDR AGC ── Re{} ── clip ±1
      ── [sampling-rate offset: resample by (1 + ppm·1e-6), centred]          (offline only)

Conventions (choices, documented):

* **LSB in baseband.** The transmitted baseband signal is the *conjugate* analytic signal of the
  band-limited audio: audio frequency ``f`` sits at baseband ``-f``. The SSB filter is a complex
  FIR, ``h(t) = 2·h_lp(t)·exp(-j2π·1500·t/fs)`` (``h_lp`` a Kaiser-windowed sinc, -6 dB edges
  at 250/2750 Hz, so 300-2700 Hz is passband within 1 dB and < 120 Hz / > 2880 Hz is > 50 dB
  down): this *is* the filter method of an SSB exciter, and ``Re{x * h} = x`` band-passed.
  Demodulation is ``Re{·}`` of the RX-filtered baseband (the same filter with gain 1).
* **Audio-frequency sign.** ``mistune_hz > 0`` raises every received audio frequency by
  ``mistune_hz`` (a voice sounds higher); heterodyne ``freq_hz`` and ``interferer_offset_hz``
  are audio frequencies as heard.
* **Fading (Watterson, ITU-R F.1487).** Two equal-power paths (power 1/2 each, mean total gain 1),
  each tap a complex Gaussian process with a Gaussian Doppler spectrum of standard deviation
  ``doppler_hz / 2`` (F.1487 / CCIR 520 define the "frequency spread" as twice the standard
  deviation of the Doppler power spectrum). Each tap is a sum of ``K = 32`` complex sinusoids with
  Gaussian-distributed frequencies and uniform phases (Monte-Carlo sum-of-sinusoids), evaluated by
  closed formula at absolute grid points every ``M`` samples and linearly interpolated: chunk-
  and frame-independent. Tap correlation ``R(τ) = exp(-2π²σ²τ²)``; the envelope-power
  correlation ``exp(-4π²σ²τ²)`` falls to 1/e at ``τ = 1/(2πσ) = 1/(π·doppler_hz)``.
  The paths sit at ``∓delay_ms/2`` around the reference time (fractional delays built into the
  two SSB FIRs), so the channel's mean delay is zero and labels computed on the clean signal fit.
* **Level and SNR.** ``speech_level_db`` is the *active level* (10·log10 of the mean square, full
  scale ±1) of the band-limited transmitted audio ``Re{x_c * h_tx}`` (after TX compression):
  the mean power of the 20 ms frames whose power exceeds ``L1·10^(-15.9/10)``, where ``L1`` is the
  mean power of frames above ``max - 50 dB`` (a two-step P.56-like rule). ``None`` means "measure
  it from the clean input" (offline); the resolved value is recorded in ``SimResult.params``.
  ``snr_db`` is the **mean** (fading-averaged) speech-to-noise ratio at the receiver, in the
  300-2700 Hz RX passband, in the demodulated audio before the AGC: active speech level over the
  power of the RX-filtered Gaussian noise. (Paths have mean total power 1, so the received mean
  speech level equals the transmitted one; a deep fade lowers the short-term SNR, as on air.)
  Impulse, carrier and interferer levels are also in dB relative to the active speech level.
* **AGC** (:func:`_agc_kernel`): the CuteSDR algorithm the KiwiSDR uses (agc.cpp): log10 of
  ``max(|I|,|Q|)`` of the RX-filtered baseband, 18 ms sliding peak, an attack averager (rise
  ``attack_ms``, fall 2.5×attack_ms; CuteSDR 2 ms / 5 ms) and a decay averager (rise
  0.3·decay_ms, fall decay_ms; or, with ``hang_ms > 0``, hold for ``hang_ms`` then release with
  50 ms), the larger of the two sets the gain: below the knee a fixed gain, above it
  ``10^(target_db/20)·10^(mag·(slope/100 - 1))``; the signal goes through a 15 ms delay line
  (look-ahead), which this module compensates together with the FIR delays. The knee is
  ``speech_level_db + threshold_db``. So the AGC pumps: a loud marker or speech burst drops the
  gain within milliseconds and the noise floor then recovers with ``decay_ms``.
  Kiwi defaults (kiwiclient/streamkit ``SET agc``): AGC on, hang off, slope 6, decay 1000 ms.
* **Randomness.** Each component draws from its own ``numpy`` Generator seeded by
  ``SeedSequence([seed, component_id(, frame)])``: changing one component's parameters never
  changes another's draws, and noise/impulses are generated per fixed frame of the absolute
  sample grid, so they do not depend on chunking.
* **Sampling-rate offset (offline only).** A KiwiSDR really samples at e.g. 12001.188 Hz while a
  recorder assumes 12000 Hz (+99 ppm; the paper corrected 56 ppm). :func:`simulate` resamples the
  8 kHz result by ``1 + rate_offset_ppm·1e-6`` with libsoxr (HQ) and keeps the *centre* of the
  file aligned (integer shift ``round(n·ε/2)``): the misalignment runs linearly from
  ``+n·ε/2`` samples (output early) at the start to ``-n·ε/2`` (late) at the end, i.e.
  ``|ppm|·1e-6·T/2``: 3.0 ms at 100 ppm on a 60 s file, < 10 ms for ``T < 2e4/|ppm|`` s (200 s at
  100 ppm). Output length == input length. The streaming block leaves this step out: a SyncBlock
  cannot change the item count, and a live graph fed by a real Kiwi carries its real offset.

Speed: ``python -c "from streamkit.data.hf_channel import _bench; print(_bench())"`` (x real time
on 60 s with every component on, best of 5): ~500x on one core (taskset -c 0), ~650x without the
interferer. (Not a ``__main__`` entry point: run as a script, the numba cache would import the
module a second time and register the block twice.)
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, ClassVar

import numba as nb
import numpy as np
import scipy.fft as sfft
import soxr
from scipy.signal import oaconvolve

from streamkit.core.block import GapPolicy, RateBlock
from streamkit.core.context import Context
from streamkit.core.errors import ConfigError
from streamkit.core.registry import register
from streamkit.core.tags import Gap
from streamkit.core.types import StreamSpec

__all__ = [
    "AgcParams",
    "ChannelParams",
    "FRAME",
    "HFChannel",
    "PROFILES",
    "RATE",
    "SimResult",
    "active_level_db",
    "simulate",
]

#: the simulator's (and the corpus') sample rate
RATE = 8000
#: engine frame (samples): noise/impulse seeding grid and FFT-convolution block
FRAME = 4096

#: ITU-R F.1487 (ex CCIR 520) Watterson test conditions: (differential delay ms, frequency spread Hz)
#: for two equal-power Rayleigh paths with Gaussian Doppler spectra. Mid-latitude values are the
#: ones used by default (the paper's receivers are in central Europe); low/high-latitude and the
#: "flutter" condition are listed for completeness. "none" is a single unit path (no fading).
PROFILES: dict[str, tuple[float, float]] = {
    "none": (0.0, 0.0),
    "quiet": (0.5, 0.1),  # mid-latitude quiet
    "moderate": (1.0, 0.5),  # mid-latitude moderate
    "disturbed": (2.0, 1.0),  # mid-latitude disturbed
    "disturbed_nvis": (7.0, 1.0),  # mid-latitude disturbed, near-vertical incidence
    "low_quiet": (0.5, 0.5),
    "low_moderate": (2.0, 1.5),
    "low_disturbed": (6.0, 10.0),
    "high_quiet": (1.0, 0.5),
    "high_moderate": (3.0, 10.0),
    "high_disturbed": (7.0, 30.0),
    "flutter": (0.5, 10.0),
}

#: nominal active speech level used when nothing better is known (ITU-T P.56 -26 dBov)
NOMINAL_SPEECH_LEVEL_DB = -26.0

# component ids for the per-component random streams (never renumber: recorded corpora depend on them)
_C_FADE1, _C_FADE2, _C_NOISE, _C_IMPULSE, _C_CARRIER, _C_INTERF_FADE = 1, 2, 3, 4, 5, 6

_SSB_F0 = 1500.0  # centre of the SSB passband (Hz)
_SSB_HALF = 1250.0  # lowpass prototype cutoff: -6 dB at 1500 ± 1250 = 250 / 2750 Hz
_FIR_LEN = 241  # Kaiser window length of the SSB FIRs (30 ms)
_FIR_BETA = 7.0
_SOS_K = 32  # sinusoids per fading tap
_AGC_DELAY_S = 0.015  # CuteSDR DELAY_TIMECONST
_AGC_WINDOW_S = 0.018  # CuteSDR WINDOW_TIMECONST
_AGC_RELEASE_S = 0.05  # CuteSDR RELEASE_TIMECONST (after hang)
_AGC_MIN = 1e-8  # CuteSDR MIN_CONSTANT (log floor: -160 dB)
_COMP_ATTACK_S = 0.001
_COMP_RELEASE_S = 0.15


# ------------------------------------------------------------------------------------------------
# parameters
# ------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class AgcParams:
    """Receiver AGC (CuteSDR/KiwiSDR algorithm, see the module docstring).

    Attributes:
        attack_ms: attack averager rise time constant (CuteSDR: 2 ms); fall = 2.5 × this.
        hang_ms: 0 = Kiwi default (exponential decay); > 0 = hold the level this long after the
            last rise, then release with 50 ms.
        decay_ms: decay averager fall time constant (rise = 0.3 ×); Kiwi default 1000 ms.
        threshold_db: knee, dB relative to the active speech level (compared with the 18 ms peak
            of max(|I|,|Q|)). Below it the gain is fixed (maximum); put it a few dB above the
            noise floor (i.e. near ``-snr_db``) to get the Kiwi's noise pumping.
        slope_db: Kiwi "slope" (output rises ``slope/100`` dB per dB above the knee); default 6.
        target_db: output scale above the knee (CuteSDR AGC_OUTSCALE 0.7 = -3.1 dB).
    """

    attack_ms: float = 2.0
    hang_ms: float = 0.0
    decay_ms: float = 1000.0
    threshold_db: float = -30.0
    slope_db: float = 6.0
    target_db: float = -3.1

    def validate(self) -> None:
        for k in ("attack_ms", "decay_ms"):
            v = getattr(self, k)
            if not (math.isfinite(v) and v > 0):
                raise ConfigError(f"agc.{k} must be > 0, got {v!r}")
        for k in ("hang_ms", "threshold_db", "slope_db", "target_db"):
            if not math.isfinite(getattr(self, k)):
                raise ConfigError(f"agc.{k} must be finite")
        if self.hang_ms < 0:
            raise ConfigError(f"agc.hang_ms must be >= 0, got {self.hang_ms!r}")


@dataclass(frozen=True)
class ChannelParams:
    """Every parameter of one simulated reception (JSON round trip: ``to_dict``/``from_dict``).

    Attributes:
        profile: label of the propagation condition (a :data:`PROFILES` key or "custom");
            ``delay_ms``/``doppler_hz`` are what the simulator uses. "none" = one unit path.
        delay_ms: differential delay between the two Watterson paths (ms).
        doppler_hz: frequency spread = 2σ of the Gaussian Doppler spectrum of each path (Hz).
        snr_db: mean speech-to-noise ratio in the 300-2700 Hz RX band (see module doc); None = no noise.
        speech_level_db: active level of the transmitted band-limited audio (dB re full-scale
            power); None = measure it from the input (offline only; the block then uses -26 dB).
        mistune_hz: receiver mistuning as heard (+ = audio shifted up).
        tx_compression_db: None = off; else the TX speech processor's maximum gain on quiet audio
            (fast-attack/slow-release limiter referred to full scale ±1 = PEP, plus a clipper).
        agc: receiver AGC, or None for a fixed gain of ``manual_gain_db``.
        manual_gain_db: audio gain when ``agc`` is None.
        impulse_rate_hz: mean rate of atmospheric impulses (Poisson); 0 = none.
        impulse_db: median impulse peak after the RX filter, dB re active speech RMS (log-normal
            spread, σ = 0.8 neper).
        carriers: heterodynes ``((freq_hz, level_db), ...)``: steady tones at audio ``freq_hz``
            (before the RX filter), ``level_db`` re active speech level.
        interferer_db: active level of the interfering (adjacent-channel) speech, dB re the wanted
            speech, before the RX filter (the part outside the passband is then removed).
        interferer_offset_hz: frequency offset of the interferer's audio as heard.
        rate_offset_ppm: receiver sampling-clock error (offline :func:`simulate` only).
        seed: root of all random streams.
    """

    profile: str = "moderate"
    delay_ms: float = 1.0
    doppler_hz: float = 0.5
    snr_db: float | None = 20.0
    speech_level_db: float | None = None
    mistune_hz: float = 0.0
    tx_compression_db: float | None = None
    agc: AgcParams | None = field(default_factory=AgcParams)
    manual_gain_db: float = 0.0
    impulse_rate_hz: float = 0.0
    impulse_db: float = 0.0
    carriers: tuple[tuple[float, float], ...] = ()
    interferer_db: float = -10.0
    interferer_offset_hz: float = 0.0
    rate_offset_ppm: float = 0.0
    seed: int = 0

    def __post_init__(self) -> None:
        # normalise containers so equality and hashing survive a JSON round trip
        object.__setattr__(self, "carriers", tuple((float(f), float(lv)) for f, lv in self.carriers))
        if isinstance(self.agc, Mapping):
            object.__setattr__(self, "agc", AgcParams(**self.agc))
        self.validate()

    def validate(self) -> None:
        """Raise ConfigError on an impossible parameter."""
        if self.profile not in PROFILES and self.profile != "custom":
            raise ConfigError(f"profile must be one of {sorted(PROFILES)} or 'custom', got {self.profile!r}")
        for k in ("delay_ms", "doppler_hz", "mistune_hz", "manual_gain_db", "impulse_rate_hz", "impulse_db", "interferer_db",
                  "interferer_offset_hz", "rate_offset_ppm"):  # fmt: skip
            v = getattr(self, k)
            if not isinstance(v, (int, float)) or not math.isfinite(v):
                raise ConfigError(f"{k} must be a finite number, got {v!r}")
        for k in ("snr_db", "speech_level_db", "tx_compression_db"):
            v = getattr(self, k)
            if v is not None and (not isinstance(v, (int, float)) or not math.isfinite(v)):
                raise ConfigError(f"{k} must be a finite number or None, got {v!r}")
        if self.delay_ms < 0 or self.delay_ms > 20:
            raise ConfigError(f"delay_ms must be in [0, 20], got {self.delay_ms}")
        if self.doppler_hz < 0 or self.doppler_hz > 100:
            raise ConfigError(f"doppler_hz must be in [0, 100], got {self.doppler_hz}")
        if abs(self.mistune_hz) > 1000:
            raise ConfigError(f"|mistune_hz| must be <= 1000, got {self.mistune_hz}")
        if self.impulse_rate_hz < 0 or self.impulse_rate_hz > 1000:
            raise ConfigError(f"impulse_rate_hz must be in [0, 1000], got {self.impulse_rate_hz}")
        if self.tx_compression_db is not None and not 0 <= self.tx_compression_db <= 40:
            raise ConfigError(f"tx_compression_db must be None or in [0, 40], got {self.tx_compression_db}")
        if abs(self.rate_offset_ppm) > 2000:
            raise ConfigError(f"|rate_offset_ppm| must be <= 2000, got {self.rate_offset_ppm}")
        for f, lv in self.carriers:
            if not (math.isfinite(f) and math.isfinite(lv) and abs(f) < RATE / 2):
                raise ConfigError(f"carrier ({f}, {lv}): freq must be finite and < {RATE / 2} Hz, level finite")
        if isinstance(self.seed, bool) or not isinstance(self.seed, (int, np.integer)) or self.seed < 0:
            raise ConfigError(f"seed must be an int >= 0, got {self.seed!r}")
        if self.agc is not None:
            if not isinstance(self.agc, AgcParams):
                raise ConfigError(f"agc must be AgcParams, a dict or None, got {self.agc!r}")
            self.agc.validate()

    # -- JSON ------------------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-able dict (``json.dumps(p.to_dict())`` works; ``from_dict`` inverts it)."""
        d = dataclasses.asdict(self)
        d["carriers"] = [list(c) for c in self.carriers]
        d["seed"] = int(self.seed)
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ChannelParams:
        d = dict(d)
        unknown = set(d) - {f.name for f in dataclasses.fields(cls)}
        if unknown:
            raise ConfigError(f"ChannelParams: unknown field(s) {sorted(unknown)}")
        if d.get("agc") is not None and not isinstance(d["agc"], AgcParams):
            d["agc"] = AgcParams(**d["agc"])
        if "carriers" in d:
            d["carriers"] = tuple(tuple(c) for c in d["carriers"])
        return cls(**d)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)

    @classmethod
    def from_json(cls, s: str) -> ChannelParams:
        return cls.from_dict(json.loads(s))

    def replace(self, **changes: Any) -> ChannelParams:
        return dataclasses.replace(self, **changes)

    # -- per-file conditions -------------------------------------------------------------------------
    @classmethod
    def random(cls, rng: np.random.Generator, severity: float = 0.5) -> ChannelParams:
        """Draw one file's channel conditions.

        ``severity`` in [0, 1] moves every distribution from benign to hostile (0.5 = a mix meant
        to resemble the ham_radio database: mean STOI ≈ 0.6, SDR < 0 dB; calibrate with the corpus).
        Distributions (each group from its own child stream of ``rng``, so adding a group later
        does not change the others):

        * profile: quiet / moderate / disturbed with weights (0.5(1-s)+0.1, 0.4, 0.5s+0.1); delay and
          spread = F.1487 mid-latitude values × log-uniform jitter in [0.7, 1.4] each.
        * snr_db ~ N(22 - 24 s, 6) clipped to [-10, 40].
        * mistune_hz: with p = 0.7 - 0.4 s ~ N(0, 2) (GPS-locked Kiwi on the right dial frequency, as in
          the ham_radio database), else ~ N(0, 10 + 30 s) (tens of Hz: hand-tuned, or the
          database's later frequency-offset set), clipped to ±100.
        * tx_compression_db: off with p = 0.5, else U(3, 15).
        * AGC (Kiwi-like): attack U(1.5, 3) ms; hang off with p = 0.8 else U(200, 1000) ms; decay
          log-U(300, 3000) ms (Kiwi default 1000); threshold = noise floor + U(10, 25) dB
          (i.e. ``-snr_db + U(10, 25)`` re speech; the knee acts on 18 ms peaks, ~10 dB above
          the noise RMS, so the AGC is active on speech and in part of the files pumps the noise
          in pauses; this range sets the corpus SDR, calibrated against the paper's Table 1);
          slope U(0, 10); target U(-6, -1) dB.
        * impulses: with p = 0.3 + 0.4 s, rate log-U(0.2, 20) /s and level U(-10, 10) + 10 s dB.
        * heterodynes: Poisson(0.2 + 1.3 s) tones, freq U(200, 3000) Hz, level U(-35, -5) + 10 s dB.
        * interferer (used only if the caller passes one): level U(-25, 0) + 10 s dB, offset
          U(-2800, 2800) Hz (mostly adjacent: part of its band falls outside the passband).
        * rate_offset_ppm ~ U(40, 110) (Kiwi 12001.188/12000 = +99 ppm; the paper measured 56 ppm).
        * seed: a fresh 63-bit integer.
        """
        s = float(np.clip(severity, 0.0, 1.0))
        base = int(rng.integers(0, 2**63 - 1))
        g = [np.random.default_rng(np.random.SeedSequence([base, i])) for i in range(10)]
        w = np.array([0.5 * (1 - s) + 0.1, 0.4, 0.5 * s + 0.1])
        profile = ["quiet", "moderate", "disturbed"][int(g[0].choice(3, p=w / w.sum()))]
        d0, f0 = PROFILES[profile]
        jit = np.exp(g[0].uniform(np.log(0.7), np.log(1.4), 2))
        snr = float(np.clip(g[1].normal(22 - 24 * s, 6), -10, 40))
        # a GPS-locked Kiwi on the right dial frequency is within a few Hz (the ham_radio database);
        # a hand-tuned or off-frequency station is tens of Hz off (its later "eval_shift" set)
        mist = float(np.clip(g[2].normal(0, 2.0) if g[2].random() < 0.7 - 0.4 * s else g[2].normal(0, 10 + 30 * s), -100, 100))
        comp = None if g[3].random() < 0.5 else float(g[3].uniform(3, 15))
        agc = AgcParams(
            attack_ms=float(g[4].uniform(1.5, 3)),
            hang_ms=0.0 if g[4].random() < 0.8 else float(g[4].uniform(200, 1000)),
            decay_ms=float(np.exp(g[4].uniform(np.log(300), np.log(3000)))),
            # knee 10-25 dB above the noise RMS (was U(-3, 12), which put the corpus SDR at -11.5 dB):
            # calibrated so that `streamkit corpus hf --hours 2 --seed 1` lands near the paper's
            # Table 1 (numbers in streamkit.data.hf_corpus, next to GAP_S)
            threshold_db=float(-snr + g[4].uniform(10, 25)),
            slope_db=float(g[4].uniform(0, 10)),
            target_db=float(g[4].uniform(-6, -1)),
        )
        if g[5].random() < 0.3 + 0.4 * s:
            imp_rate = float(np.exp(g[5].uniform(np.log(0.2), np.log(20))))
            imp_db = float(g[5].uniform(-10, 10) + 10 * s)
        else:
            imp_rate, imp_db = 0.0, 0.0
        nc = int(g[6].poisson(0.2 + 1.3 * s))
        carriers = tuple((float(g[6].uniform(200, 3000)), float(g[6].uniform(-35, -5) + 10 * s)) for _ in range(nc))
        return cls(
            profile=profile,
            delay_ms=round(float(d0 * jit[0]), 4),
            doppler_hz=round(float(f0 * jit[1]), 4),
            snr_db=snr,
            mistune_hz=mist,
            tx_compression_db=comp,
            agc=agc,
            impulse_rate_hz=imp_rate,
            impulse_db=imp_db,
            carriers=carriers,
            interferer_db=float(g[7].uniform(-25, 0) + 10 * s),
            interferer_offset_hz=float(g[7].uniform(-2800, 2800)),
            rate_offset_ppm=float(g[8].uniform(40, 110)),
            seed=int(g[9].integers(0, 2**63 - 1)),
        )


# ------------------------------------------------------------------------------------------------
# numba kernels (explicit state, updated in place: chunk-by-chunk == all at once)
# ------------------------------------------------------------------------------------------------
@nb.njit(cache=True, nogil=True)
def _compress_kernel(x: np.ndarray, gmax: float, a_att: float, a_rel: float, state: np.ndarray) -> np.ndarray:
    """TX speech processor: peak envelope (fast attack, slow release) -> gain min(gmax, 1/env) -> clip ±1.

    ``state[0]`` is the envelope. Full scale ±1 = transmitter PEP.
    """
    n = x.shape[0]
    y = np.empty(n, dtype=np.float64)
    env = state[0]
    for i in range(n):
        v = float(x[i])
        a = abs(v)
        if a > env:
            env += a_att * (a - env)
        else:
            env += a_rel * (a - env)
        g = gmax
        if env * gmax > 1.0:
            g = 1.0 / env
        v = v * g
        if v > 1.0:
            v = 1.0
        elif v < -1.0:
            v = -1.0
        y[i] = v
    state[0] = env
    return y


@nb.njit(cache=True, nogil=True)
def _agc_kernel(
    r: np.ndarray,
    on: bool,
    manual_gain: float,
    knee: float,
    gain_slope: float,
    fixed_gain: float,
    outscale: float,
    a_att_rise: float,
    a_att_fall: float,
    a_dec_rise: float,
    a_dec_fall: float,
    hang_time: int,
    use_hang: bool,
    st: np.ndarray,
    magbuf: np.ndarray,
    delaybuf: np.ndarray,
    gain_out: np.ndarray,
) -> np.ndarray:
    """CuteSDR/KiwiSDR AGC on complex baseband ``r``; returns ``Re{delayed r}·gain`` clipped to ±1.

    State: ``st = [attack_ave, decay_ave, peak, hang_timer, magbuf_pos, delay_ptr]`` (log10
    amplitudes / counters), ``magbuf`` (window of log magnitudes), ``delaybuf`` (delay line).
    ``gain_out`` (len(r) or 0) receives the per-sample gain when not empty.
    """
    n = r.shape[0]
    y = np.empty(n, dtype=np.float32)
    nd = delaybuf.shape[0]
    nw = magbuf.shape[0]
    att = st[0]
    dec = st[1]
    peak = st[2]
    hang = int(st[3])
    mpos = int(st[4])
    dptr = int(st[5])
    want_gain = gain_out.shape[0] == n
    for i in range(n):
        v = r[i]
        dl = delaybuf[dptr]
        delaybuf[dptr] = v
        dptr += 1
        if dptr >= nd:
            dptr = 0
        if on:
            mag = abs(v.real)
            mim = abs(v.imag)
            if mim > mag:
                mag = mim
            mag = math.log10(mag + _AGC_MIN)
            tmp = magbuf[mpos]
            magbuf[mpos] = mag
            mpos += 1
            if mpos >= nw:
                mpos = 0
            if mag > peak:
                peak = mag
            elif tmp == peak:
                peak = -8.0
                for j in range(nw):
                    if magbuf[j] > peak:
                        peak = magbuf[j]
            if peak > att:
                att = (1.0 - a_att_rise) * att + a_att_rise * peak
            else:
                att = (1.0 - a_att_fall) * att + a_att_fall * peak
            if peak > dec:
                dec = (1.0 - a_dec_rise) * dec + a_dec_rise * peak
                hang = 0
            elif use_hang and hang < hang_time:
                hang += 1
            else:
                dec = (1.0 - a_dec_fall) * dec + a_dec_fall * peak
            m = att if att > dec else dec
            if m <= knee:
                g = fixed_gain
            else:
                g = outscale * 10.0 ** (m * (gain_slope - 1.0))
        else:
            g = manual_gain
        o = dl.real * g
        if o > 1.0:
            o = 1.0
        elif o < -1.0:
            o = -1.0
        y[i] = o
        if want_gain:
            gain_out[i] = g
    st[0] = att
    st[1] = dec
    st[2] = peak
    st[3] = hang
    st[4] = mpos
    st[5] = dptr
    return y


# ------------------------------------------------------------------------------------------------
# helpers
# ------------------------------------------------------------------------------------------------
def _ssb_fir(shift: float, pad: int, gain: float) -> np.ndarray:
    """Complex LSB band-pass FIR (300-2700 Hz as heard), centred at ``(len-1)/2 + shift`` samples.

    Length ``_FIR_LEN + 2*pad``; the Kaiser window and the sinc are evaluated at the fractional
    offset, so ``shift`` is a band-limited fractional delay built into the filter.
    """
    n = _FIR_LEN + 2 * pad
    c = (n - 1) / 2 + shift
    t = np.arange(n, dtype=np.float64) - c
    rw = (_FIR_LEN - 1) / 2
    u = np.clip(1.0 - (t / rw) ** 2, 0.0, None)
    w = np.i0(_FIR_BETA * np.sqrt(u)) / np.i0(_FIR_BETA)
    w[np.abs(t) > rw] = 0.0
    wc = 2 * _SSB_HALF / RATE
    lp = wc * np.sinc(wc * t) * w
    lp /= lp.sum()  # unit gain at the band centre
    return gain * lp * np.exp(-2j * np.pi * _SSB_F0 * t / RATE)


def _tx_real_fir() -> np.ndarray:
    """Real band-pass equal to Re{h_tx} for zero shift (``Re{x * h_tx} = x * Re{h_tx}``)."""
    return np.ascontiguousarray(_ssb_fir(0.0, 0, 2.0).real)


def active_level_db(x: np.ndarray, rate: int = RATE) -> float | None:
    """Active level (dB re full-scale power) of ``x``: two-step P.56-like rule on 20 ms frames.

    Frames above ``max - 50 dB`` give ``L1``; the level is the mean power of frames above
    ``L1 - 15.9 dB``. Returns None for an all-zero signal.
    """
    x = np.asarray(x, dtype=np.float64)
    fl = int(0.02 * rate)
    nf = x.shape[0] // fl
    if nf == 0:
        p = np.array([np.mean(x**2)]) if x.size else np.zeros(1)
    else:
        p = np.mean(x[: nf * fl].reshape(nf, fl) ** 2, axis=1)
    pmax = float(p.max())
    if pmax <= 0:
        return None
    l1 = float(p[p >= pmax * 1e-5].mean())
    act = p[p >= l1 * 10 ** (-1.59)]
    return float(10 * np.log10(act.mean()))


def _bandpassed(x: np.ndarray) -> np.ndarray:
    """``x`` through the (zero-phase-aligned) SSB band-pass, same length (for level measurement)."""
    h = _tx_real_fir()
    d = (h.shape[0] - 1) // 2
    return oaconvolve(np.asarray(x, np.float64), h)[d : d + x.shape[0]]


def _check_finite(x: np.ndarray, what: str) -> None:
    bad = ~np.isfinite(x)
    if bad.any():
        i = int(np.argmax(bad))
        raise ValueError(f"{what} contains {int(bad.sum())} non-finite sample(s) (NaN or inf); first at index {i} ({x[i]!r})")


# ------------------------------------------------------------------------------------------------
# the frame engine shared by simulate() and the block
# ------------------------------------------------------------------------------------------------
class _Fading:
    """One Watterson tap: sum of K complex sinusoids, Gaussian frequencies (σ = spread/2).

    Evaluated at absolute grid points ``m·M`` as ``Σ a·exp(j(2π f_k t_m + φ_k))``: per frame, a
    start phasor per sinusoid (closed formula at the frame's first grid point) times a fixed
    table over the frame's grid points, then linear interpolation (:func:`_interp_mac`).
    """

    def __init__(self, seed: int, comp: int, spread_hz: float, power: float, grid: int) -> None:
        rng = np.random.default_rng(np.random.SeedSequence([seed, comp]))
        self.f = rng.normal(0.0, spread_hz / 2.0, _SOS_K) if spread_hz > 0 else np.zeros(_SOS_K)
        self.phi = rng.uniform(0.0, 2 * np.pi, _SOS_K)
        self.a = math.sqrt(power / _SOS_K)
        self.M = grid
        self.tab = np.exp(2j * np.pi * np.outer(self.f, np.arange(FRAME // grid + 1) * (grid / RATE)))

    def grid(self, start: int) -> np.ndarray:
        """Tap values at the FRAME/M + 1 grid points from absolute sample ``start`` (a grid point)."""
        t0 = (start // self.M) * (self.M / RATE)
        ph = self.a * np.exp(1j * (2 * np.pi * np.mod(self.f * t0, 1.0) + self.phi))
        return (ph[:, None] * self.tab).sum(axis=0)  # (not @: BLAS threading costs more than the math)


@nb.njit(cache=True, nogil=True)
def _interp_mac(g: np.ndarray, M: int, p: np.ndarray, acc: np.ndarray) -> None:
    """``acc[r] += lerp(g, r / M) * p[r]``: linearly interpolated tap times path signal."""
    inv = 1.0 / M
    for r in range(p.shape[0]):
        j = r // M
        w = (r - j * M) * inv
        acc[r] += (g[j] * (1.0 - w) + g[j + 1] * w) * p[r]


class _Rot:
    """``exp(-j2π f n / fs)`` for absolute n, per frame: exact start phasor × fixed table."""

    def __init__(self, f: float) -> None:
        self.f = f
        self.tab = np.exp(-2j * np.pi * f * np.arange(FRAME) / RATE)

    def frame(self, n0: int) -> np.ndarray:
        return np.exp(-2j * np.pi * math.fmod(self.f * n0 / RATE, 1.0)) * self.tab


class _OlsFir:
    """FFT overlap-save FIR on fixed frames, with the history as explicit state."""

    def __init__(self, h: np.ndarray, frame: int, complex_in: bool) -> None:
        self.L = h.shape[0]
        self.N = sfft.next_fast_len(frame + self.L - 1)
        self.H = sfft.fft(h, self.N)
        self.hist = np.zeros(self.L - 1, dtype=np.complex128 if complex_in else np.float64)

    def __call__(self, x: np.ndarray) -> np.ndarray:
        buf = np.concatenate((self.hist, x))
        self.hist = buf[buf.shape[0] - (self.L - 1) :].copy()
        y = sfft.ifft(sfft.fft(buf, self.N) * self.H)
        return y[self.L - 1 : self.L - 1 + x.shape[0]]


class _Engine:
    """The whole channel on fixed frames of FRAME samples (absolute frame index ``k``).

    Engine output ``a[n]`` corresponds to clean input ``x[n - delay]``: callers drop the first
    ``delay`` samples. Everything random is a function of (seed, component, absolute index).
    """

    def __init__(self, p: ChannelParams, interferer: np.ndarray | None, diagnostics: bool = False) -> None:
        self.p = p
        fs = RATE
        self.level_db = p.speech_level_db if p.speech_level_db is not None else NOMINAL_SPEECH_LEVEL_DB
        ps = 10 ** (self.level_db / 10)
        # --- TX: compressor + SSB filters with the two path delays built in
        self.comp = p.tx_compression_db is not None
        self.comp_g = 10 ** ((p.tx_compression_db or 0.0) / 20)
        self.comp_a = (1 - math.exp(-1 / (fs * _COMP_ATTACK_S)), 1 - math.exp(-1 / (fs * _COMP_RELEASE_S)))
        self.comp_state = np.zeros(1)
        single = p.profile == "none"
        half = 0.0 if single else p.delay_ms * 1e-3 * fs / 2
        pad = int(math.ceil(half))
        shifts = [0.0] if single else [-half, half]
        grid = 32 if p.doppler_hz <= 5 else 8
        self.tx = [_OlsFir(_ssb_fir(s, pad, 2.0), FRAME, False) for s in shifts]
        if single:
            self.fades: list[_Fading] | None = None
        else:
            self.fades = [_Fading(p.seed, c, p.doppler_hz, 0.5, grid) for c in (_C_FADE1, _C_FADE2)]
        h_rx = _ssb_fir(0.0, 0, 1.0)
        self.rx = _OlsFir(h_rx, FRAME, True)
        self.tx_delay = (_FIR_LEN + 2 * pad - 1) // 2
        # --- noise, impulses, carriers
        self.noise_sigma = 0.0
        if p.snr_db is not None:
            pn = ps / 10 ** (p.snr_db / 10)
            self.noise_sigma = math.sqrt(2 * pn / float(np.sum(np.abs(h_rx) ** 2)) / 2)  # per real/imag part
        self.imp_med = 10 ** (p.impulse_db / 20) * math.sqrt(ps) / float(np.max(np.abs(h_rx)))
        crng = np.random.default_rng(np.random.SeedSequence([p.seed, _C_CARRIER]))
        self.carriers = [(_Rot(f), math.sqrt(2 * ps) * 10 ** (lv / 20) * np.exp(1j * float(crng.uniform(0, 2 * np.pi))))
                         for f, lv in p.carriers]  # fmt: skip
        self.mistune = _Rot(p.mistune_hz) if p.mistune_hz != 0 else None
        # --- interferer: own SSB filter (no path shift), own flat Rayleigh fading, offset, level
        self.interf: np.ndarray | None = None
        if interferer is not None:
            itf = np.asarray(interferer, dtype=np.float64).reshape(-1)
            _check_finite(itf, "interferer")
            lvl = active_level_db(_bandpassed(itf))
            if lvl is not None:
                self.interf = itf
                self.interf_gain = 10 ** ((p.interferer_db + self.level_db - lvl) / 20)
                self.interf_tx = _OlsFir(_ssb_fir(0.0, pad, 2.0), FRAME, False)
                self.interf_fade = None if single or p.doppler_hz == 0 else _Fading(p.seed, _C_INTERF_FADE, p.doppler_hz, 1.0, grid)
                self.interf_rot = _Rot(p.interferer_offset_hz) if p.interferer_offset_hz != 0 else None
        # --- AGC
        a = p.agc
        self.agc_delay = int(fs * _AGC_DELAY_S)
        self.agc_on = a is not None
        if a is not None:
            knee = (self.level_db + a.threshold_db) / 20
            slope = a.slope_db / 100
            outscale = 10 ** (a.target_db / 20)
            self.agc_args = (
                True, 1.0, knee, slope, outscale * 10 ** (knee * (slope - 1)), outscale,
                1 - math.exp(-1 / (fs * a.attack_ms * 1e-3)), 1 - math.exp(-1 / (fs * a.attack_ms * 2.5e-3)),
                1 - math.exp(-1 / (fs * a.decay_ms * 0.3e-3)),
                1 - math.exp(-1 / (fs * (_AGC_RELEASE_S if a.hang_ms > 0 else a.decay_ms * 1e-3))),
                int(round(fs * a.hang_ms * 1e-3)), a.hang_ms > 0,
            )  # fmt: skip
        else:
            self.agc_args = (False, 10 ** (p.manual_gain_db / 20), 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0, False)
        self.agc_st = np.array([-5.0, -5.0, -8.0, 0.0, 0.0, 0.0])  # CuteSDR initial averager values
        self.agc_mag = np.full(int(fs * _AGC_WINDOW_S), -8.0)
        self.agc_dl = np.zeros(self.agc_delay, dtype=np.complex128)
        #: total delay engine output vs clean input, in samples
        self.delay = self.tx_delay + (_FIR_LEN - 1) // 2 + self.agc_delay
        self.k = 0
        self.diag = diagnostics
        if diagnostics:
            self.rx_s = _OlsFir(h_rx, FRAME, True)
            self.rx_n = _OlsFir(h_rx, FRAME, True)
            self.rx_o = _OlsFir(h_rx, FRAME, True)
            self.dg: dict[str, list[np.ndarray]] = {"speech": [], "noise": [], "other": [], "gain": []}

    def process(self, x: np.ndarray) -> np.ndarray:
        """One frame of FRAME clean samples (float, finite) -> FRAME samples of audio (float32)."""
        p, F = self.p, FRAME
        k = self.k
        self.k += 1
        n0 = k * F
        xc = _compress_kernel(x, self.comp_g, self.comp_a[0], self.comp_a[1], self.comp_state) if self.comp else np.asarray(x, np.float64)
        # fading paths
        if self.fades is None:
            sig = self.tx[0](xc)
        else:
            sig = np.zeros(F, np.complex128)
            for tx, fd in zip(self.tx, self.fades):
                _interp_mac(fd.grid(n0), fd.M, tx(xc), sig)
        if self.mistune is not None:
            sig *= self.mistune.frame(n0)
        other = np.zeros(F, dtype=np.complex128)
        # interferer
        if self.interf is not None:
            seg = np.zeros(F)
            if n0 < self.interf.shape[0]:
                part = self.interf[n0 : n0 + F]
                seg[: part.shape[0]] = part
            it = self.interf_tx(seg)
            if self.interf_rot is not None:
                it *= self.interf_rot.frame(n0)
            if self.interf_fade is not None:
                _interp_mac(self.interf_fade.grid(n0) * self.interf_gain, self.interf_fade.M, it, other)
            else:
                other += it * self.interf_gain
        # heterodynes
        for rot, amp in self.carriers:
            other += amp * rot.frame(n0)
        # atmospheric impulses
        if p.impulse_rate_hz > 0:
            rng = np.random.default_rng(np.random.SeedSequence([p.seed, _C_IMPULSE, k]))
            cnt = int(rng.poisson(p.impulse_rate_hz * F / RATE))
            if cnt:
                pos = rng.integers(0, F, cnt)
                amp = self.imp_med * np.exp(0.8 * rng.standard_normal(cnt)) * np.exp(2j * np.pi * rng.random(cnt))
                np.add.at(other, pos, amp)
        # band noise (white complex Gaussian, shaped by the RX filter)
        if self.noise_sigma > 0:
            rng = np.random.default_rng(np.random.SeedSequence([p.seed, _C_NOISE, k]))
            w = rng.standard_normal(2 * F).view(np.complex128) * self.noise_sigma
        else:
            w = None
        tot = sig + other if w is None else sig + other + w
        r = self.rx(tot)
        gain = np.empty(F) if self.diag else np.empty(0)
        y = _agc_kernel(r, *self.agc_args, self.agc_st, self.agc_mag, self.agc_dl, gain)
        if self.diag:
            self.dg["speech"].append(self.rx_s(sig).real)
            self.dg["noise"].append(self.rx_n(w if w is not None else np.zeros(F, np.complex128)).real)
            self.dg["other"].append(self.rx_o(other).real)
            self.dg["gain"].append(gain)
        return y


# ------------------------------------------------------------------------------------------------
# offline
# ------------------------------------------------------------------------------------------------
@dataclass
class SimResult:
    """What :func:`simulate` returns.

    Attributes:
        received: float32 (n,) at 8 kHz, same length as the input, time-aligned (see module doc).
        params: the parameters with ``speech_level_db`` resolved (feed these to :class:`HFChannel`
            to reproduce ``received`` without the rate offset).
        diagnostics: with ``diagnostics=True``: ``speech``, ``noise``, ``other`` (impulses +
            carriers + interferer): RX-filtered demodulated components *before* the AGC, and
            ``gain`` (AGC gain), all aligned with the output before the rate-offset step
            (``received ≈ clip(gain·(speech + noise + other))`` when rate_offset_ppm == 0);
            ``delay`` (compensated engine delay, samples), ``sro_shift`` (samples dropped/added
            at the start by the centred rate-offset step).
    """

    received: np.ndarray
    params: ChannelParams
    diagnostics: dict[str, Any] | None = None


def simulate(
    clean: np.ndarray,
    params: ChannelParams,
    interferer: np.ndarray | None = None,
    *,
    diagnostics: bool = False,
    apply_rate_offset: bool = True,
) -> SimResult:
    """Pass clean 8 kHz audio through the HF channel.

    Args:
        clean: (n,) or (n, 1) real audio at 8000 Hz, full scale ±1 (= transmitter PEP).
        params: the channel; ``speech_level_db=None`` is measured from ``clean``.
        interferer: optional real 8 kHz audio of an interfering station, starting at sample 0
            (zero after its end, truncated beyond n). Never labelled: it is noise to a SAD.
        diagnostics: also return the pre-AGC components and the AGC gain (slower).
        apply_rate_offset: False skips the sampling-rate-offset step (what the block computes).

    Returns:
        :class:`SimResult` with ``received`` float32 (n,).

    Raises:
        ValueError: non-finite samples in ``clean`` or ``interferer``, or a bad shape.
    """
    x = np.asarray(clean)
    if x.ndim == 2 and x.shape[1] == 1:
        x = x[:, 0]
    if x.ndim != 1:
        raise ValueError(f"clean must be mono (n,) or (n, 1), got shape {np.shape(clean)}")
    if not np.issubdtype(x.dtype, np.floating):
        raise ValueError(f"clean must be floating point audio, got {x.dtype}")
    _check_finite(x, "clean")
    x = x.astype(np.float64)
    n = x.shape[0]
    p = params
    if p.speech_level_db is None:
        xc = x
        if p.tx_compression_db is not None:
            g = 10 ** (p.tx_compression_db / 20)
            ca = (1 - math.exp(-1 / (RATE * _COMP_ATTACK_S)), 1 - math.exp(-1 / (RATE * _COMP_RELEASE_S)))
            xc = _compress_kernel(x, g, ca[0], ca[1], np.zeros(1))
        lvl = active_level_db(_bandpassed(xc))
        p = p.replace(speech_level_db=NOMINAL_SPEECH_LEVEL_DB if lvl is None else round(lvl, 6))
    eng = _Engine(p, interferer, diagnostics)
    D = eng.delay
    nfr = -(-(n + D) // FRAME)
    xp = np.zeros(nfr * FRAME)
    xp[:n] = x
    a = np.concatenate([eng.process(xp[i * FRAME : (i + 1) * FRAME]) for i in range(nfr)]) if nfr else np.zeros(0, np.float32)
    y = a[D : D + n]
    diag: dict[str, Any] | None = None
    if diagnostics:
        dd = eng.agc_delay
        diag = {k: np.concatenate(v)[D - dd : D - dd + n] for k, v in eng.dg.items() if k != "gain"}
        diag["gain"] = np.concatenate(eng.dg["gain"])[D : D + n]
        diag["delay"] = D
        diag["sro_shift"] = 0
    if apply_rate_offset and p.rate_offset_ppm != 0 and n:
        eps = p.rate_offset_ppm * 1e-6
        z = soxr.resample(y, float(RATE), RATE * (1 + eps), quality="HQ")
        k0 = int(round(n * eps / 2))
        if k0 >= 0:
            z = z[k0 : k0 + n]
        else:
            z = np.concatenate((np.zeros(-k0, np.float32), z))[:n]
        y = np.zeros(n, np.float32)
        y[: z.shape[0]] = z[:n]
        if diag is not None:
            diag["sro_shift"] = k0
    return SimResult(np.ascontiguousarray(y, dtype=np.float32), p, diag)


# ------------------------------------------------------------------------------------------------
# streaming block
# ------------------------------------------------------------------------------------------------
@register("data.hf_channel")
class HFChannel(RateBlock):
    """HF SSB channel as a streaming block (the offline :func:`simulate` without the clock offset).

    Ports:
        in, out: float32 mono audio at 8000 Hz.
    Parameters:
        params: a :class:`ChannelParams` dict (``ChannelParams.to_dict()``). ``speech_level_db``
            None means the nominal -26 dB (a stream cannot be measured ahead); pass
            ``simulate(...).params`` to reproduce an offline run. ``rate_offset_ppm`` is ignored.
        interferer: optional interfering audio (array, 8 kHz) starting at item 0; not
            JSON-describable, so only for graphs built in Python.
    Output:
        ``out[i] == simulate(x, params, interferer, apply_rate_offset=False).received[i]``
        bit for bit, whatever the chunking (same frame engine, same absolute grid). Formally a
        :class:`RateBlock` with ``ratio = 1`` and ``delay = 0``: item ``i`` out is the channel at
        clean item ``i`` (time-aligned, tags keep their offsets), but it comes out with a lag
        (up to ``FRAME + delay`` ≈ 0.56 s) because the engine works on fixed frames and
        compensates the SSB filters' and the AGC look-ahead's delay; :meth:`flush` drains it, so
        total output == total input.
    Tags:
        Forwarded at the same offsets (ratio 1, delay 0); the runtime holds them until the output
        reaches them.
    Events:
        None.
    Latency:
        ``FRAME - 1 + delay`` items (frame buffering + compensated filter/AGC delay).
    State:
        Fading/noise index, FIR histories, compressor and AGC state, the input/output buffers;
        ``reset()`` restarts the engine from scratch (output after a reset is shorter by the lag
        it held). Gaps are ignored (``on_gap`` CONTINUE: the ionosphere does not reset).
        Non-finite input samples are replaced by 0 before they reach any state (counted in
        ``nonfinite_items``), so a NaN chunk never poisons the filters or the AGC.
    """

    on_gap: ClassVar[GapPolicy] = GapPolicy.CONTINUE

    def __init__(self, *, params: Mapping[str, Any] | None = None, interferer: Any = None, name: str | None = None) -> None:
        super().__init__(name=name)
        try:
            self.channel = ChannelParams.from_dict(params) if params is not None else ChannelParams()
        except TypeError as exc:
            raise ConfigError(f"bad params: {exc}") from None
        self.interferer = None if interferer is None else np.asarray(interferer, dtype=np.float64).reshape(-1)
        if self.interferer is not None and not np.all(np.isfinite(self.interferer)):
            raise ConfigError("interferer contains non-finite samples")
        self.ratio = Fraction(1)
        self.delay = Fraction(0)
        self.nonfinite_items = 0
        self._eng: _Engine | None = None

    def algorithmic_latency(self) -> int:
        return FRAME - 1 + _Engine(self.channel, None).delay

    def negotiate(self, inputs: Mapping[str, StreamSpec]) -> dict[str, StreamSpec]:
        spec = inputs["in"]
        if spec.dtype != np.float32:
            raise ConfigError(f"{self.name}: needs float32 audio, got {spec.dtype}")
        if spec.channels != 1:
            raise ConfigError(f"{self.name}: needs mono audio, got {spec.channels} channels")
        if spec.rate != RATE:
            raise ConfigError(f"{self.name}: needs {RATE} Hz audio, got {spec.rate} (resample first)")
        self.ratio = Fraction(1)
        self.delay = Fraction(0)
        return {"out": spec}

    def start(self, ctx: Context) -> None:
        self._restart()
        # JIT warm-up on scratch state (both kernels; the engine's own state is untouched)
        _compress_kernel(np.zeros(4), 1.0, 0.1, 0.1, np.zeros(1))
        e = self._eng
        assert e is not None
        _agc_kernel(np.zeros(4, np.complex128), *e.agc_args, e.agc_st.copy(), e.agc_mag.copy(), e.agc_dl.copy(), np.empty(0))

    def _restart(self) -> None:
        self._eng = _Engine(self.channel, self.interferer)
        self._inbuf = np.zeros(FRAME, np.float64)
        self._fill = 0
        self._skip = self._eng.delay  # engine output items still to drop
        self._n_in = 0
        self._n_out = 0

    def _run_frame(self) -> np.ndarray:
        assert self._eng is not None
        a = self._eng.process(self._inbuf.copy())
        self._fill = 0
        if self._skip:
            d = min(self._skip, a.shape[0])
            self._skip -= d
            a = a[d:]
        return a

    def work(self, x: np.ndarray, ctx: Context) -> np.ndarray:
        if self._eng is None:
            self._restart()
        v = np.asarray(x, dtype=np.float64).reshape(-1)
        bad = ~np.isfinite(v)
        if bad.any():
            self.nonfinite_items += int(bad.sum())
            v = np.where(bad, 0.0, v)
        self._n_in += v.shape[0]
        outs: list[np.ndarray] = []
        i = 0
        while i < v.shape[0]:
            take = min(FRAME - self._fill, v.shape[0] - i)
            self._inbuf[self._fill : self._fill + take] = v[i : i + take]
            self._fill += take
            i += take
            if self._fill == FRAME:
                outs.append(self._run_frame())
        y = np.concatenate(outs) if outs else np.zeros(0, np.float32)
        self._n_out += y.shape[0]
        return y.reshape(-1, 1)

    def reset(self, cause: Gap | None = None) -> None:
        if self._eng is not None:
            self._restart()

    def flush(self, ctx: Context) -> np.ndarray | None:
        if self._eng is None:
            return None
        outs: list[np.ndarray] = []
        while self._n_out < self._n_in:
            self._inbuf[self._fill :] = 0.0
            a = self._run_frame()
            a = a[: self._n_in - self._n_out]
            self._n_out += a.shape[0]
            outs.append(a)
        return np.concatenate(outs).reshape(-1, 1).astype(np.float32) if outs else None

    def stop(self) -> None:
        self._eng = None


# ------------------------------------------------------------------------------------------------
def _bench(seconds: float = 60.0, repeats: int = 5) -> dict[str, float]:
    """Time :func:`simulate` on ``seconds`` of speech-like audio with every component on."""
    import time

    rng = np.random.default_rng(1)
    n = int(seconds * RATE)
    x = (rng.standard_normal(n) * 0.1 * (np.sin(np.arange(n) / RATE * 2 * np.pi * 0.3) > 0)).astype(np.float32)
    itf = (rng.standard_normal(n) * 0.05).astype(np.float32)
    p = ChannelParams(profile="disturbed", delay_ms=2.0, doppler_hz=1.0, snr_db=5.0, mistune_hz=23.0, tx_compression_db=10.0,
                      impulse_rate_hz=5.0, impulse_db=6.0, carriers=((1234.0, -10.0),), interferer_db=-6, interferer_offset_hz=1800,
                      rate_offset_ppm=99.0, seed=7)  # fmt: skip
    simulate(x[:FRAME], p, itf[:FRAME])  # JIT / cache load
    best = {"all": 1e9, "no_interferer": 1e9}
    for _ in range(repeats):
        t0 = time.perf_counter()
        simulate(x, p, itf)
        best["all"] = min(best["all"], time.perf_counter() - t0)
        t0 = time.perf_counter()
        simulate(x, p)
        best["no_interferer"] = min(best["no_interferer"], time.perf_counter() - t0)
    return {k: seconds / v for k, v in best.items()}
