"""The parameters of the HF channel simulator (:mod:`streamkit.data.hf_channel`): the receiver AGC
(:class:`AgcParams`), one reception's conditions (:class:`ChannelParams`, with the per-file random draw
of a corpus), and the Watterson propagation profiles (:data:`PROFILES`)."""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from streamkit.core.errors import ConfigError

__all__ = ["NOMINAL_SPEECH_LEVEL_DB", "PROFILES", "RATE", "AgcParams", "ChannelParams"]

#: the simulator's (and the corpus') sample rate
RATE = 8000

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


@dataclass(frozen=True)
class AgcParams:
    """Receiver AGC (CuteSDR/KiwiSDR algorithm, see :mod:`streamkit.data.hf_channel`).

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
        snr_db: mean speech-to-noise ratio in the 300-2700 Hz RX band (see :mod:`streamkit.data.hf_channel`); None = no noise.
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
