"""The frame engine of the HF channel simulator (:class:`ChannelEngine`: the whole chain on fixed frames of
the absolute sample grid) and the offline simulation on it (:func:`simulate`); the streaming block
:class:`streamkit.data.hf_channel.HFChannel` runs the same engine."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import soxr

from streamkit.data.hf_channel_params import NOMINAL_SPEECH_LEVEL_DB, RATE, ChannelParams
from streamkit.data.hf_channel_stages import (
    AGC_DELAY_S,
    AGC_RELEASE_S,
    AGC_WINDOW_S,
    C_CARRIER,
    C_FADE1,
    C_FADE2,
    C_IMPULSE,
    C_INTERF_FADE,
    C_NOISE,
    COMP_ATTACK_S,
    COMP_RELEASE_S,
    FIR_LEN,
    FRAME,
    Fading,
    OlsFir,
    Rotator,
    active_level_db,
    agc_kernel,
    bandpassed,
    check_finite,
    compress_kernel,
    interp_mac,
    ssb_fir,
)

__all__ = ["ChannelEngine", "SimResult", "resolve_speech_level", "simulate"]


class ChannelEngine:
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
        self.comp_a = (1 - math.exp(-1 / (fs * COMP_ATTACK_S)), 1 - math.exp(-1 / (fs * COMP_RELEASE_S)))
        self.comp_state = np.zeros(1)
        single = p.profile == "none"
        half = 0.0 if single else p.delay_ms * 1e-3 * fs / 2
        pad = int(math.ceil(half))
        shifts = [0.0] if single else [-half, half]
        grid = 32 if p.doppler_hz <= 5 else 8
        self.tx = [OlsFir(ssb_fir(s, pad, 2.0), FRAME, False) for s in shifts]
        if single:
            self.fades: list[Fading] | None = None
        else:
            self.fades = [Fading(p.seed, c, p.doppler_hz, 0.5, grid) for c in (C_FADE1, C_FADE2)]
        h_rx = ssb_fir(0.0, 0, 1.0)
        self.rx = OlsFir(h_rx, FRAME, True)
        self.tx_delay = (FIR_LEN + 2 * pad - 1) // 2
        # --- noise, impulses, carriers
        self.noise_sigma = 0.0
        if p.snr_db is not None:
            pn = ps / 10 ** (p.snr_db / 10)
            self.noise_sigma = math.sqrt(2 * pn / float(np.sum(np.abs(h_rx) ** 2)) / 2)  # per real/imag part
        self.imp_med = 10 ** (p.impulse_db / 20) * math.sqrt(ps) / float(np.max(np.abs(h_rx)))
        crng = np.random.default_rng(np.random.SeedSequence([p.seed, C_CARRIER]))
        self.carriers = [(Rotator(f), math.sqrt(2 * ps) * 10 ** (lv / 20) * np.exp(1j * float(crng.uniform(0, 2 * np.pi))))
                         for f, lv in p.carriers]  # fmt: skip
        self.mistune = Rotator(p.mistune_hz) if p.mistune_hz != 0 else None
        # --- interferer: own SSB filter (no path shift), own flat Rayleigh fading, offset, level
        self.interf: np.ndarray | None = None
        if interferer is not None:
            itf = np.asarray(interferer, dtype=np.float64).reshape(-1)
            check_finite(itf, "interferer")
            lvl = active_level_db(bandpassed(itf))
            if lvl is not None:
                self.interf = itf
                self.interf_gain = 10 ** ((p.interferer_db + self.level_db - lvl) / 20)
                self.interf_tx = OlsFir(ssb_fir(0.0, pad, 2.0), FRAME, False)
                self.interf_fade = None if single or p.doppler_hz == 0 else Fading(p.seed, C_INTERF_FADE, p.doppler_hz, 1.0, grid)
                self.interf_rot = Rotator(p.interferer_offset_hz) if p.interferer_offset_hz != 0 else None
        # --- AGC
        a = p.agc
        self.agc_delay = int(fs * AGC_DELAY_S)
        self.agc_on = a is not None
        if a is not None:
            knee = (self.level_db + a.threshold_db) / 20
            slope = a.slope_db / 100
            outscale = 10 ** (a.target_db / 20)
            self.agc_args = (
                True, 1.0, knee, slope, outscale * 10 ** (knee * (slope - 1)), outscale,
                1 - math.exp(-1 / (fs * a.attack_ms * 1e-3)), 1 - math.exp(-1 / (fs * a.attack_ms * 2.5e-3)),
                1 - math.exp(-1 / (fs * a.decay_ms * 0.3e-3)),
                1 - math.exp(-1 / (fs * (AGC_RELEASE_S if a.hang_ms > 0 else a.decay_ms * 1e-3))),
                int(round(fs * a.hang_ms * 1e-3)), a.hang_ms > 0,
            )  # fmt: skip
        else:
            self.agc_args = (False, 10 ** (p.manual_gain_db / 20), 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0, False)
        self.agc_st = np.array([-5.0, -5.0, -8.0, 0.0, 0.0, 0.0])  # CuteSDR initial averager values
        self.agc_mag = np.full(int(fs * AGC_WINDOW_S), -8.0)
        self.agc_dl = np.zeros(self.agc_delay, dtype=np.complex128)
        #: total delay engine output vs clean input, in samples
        self.delay = self.tx_delay + (FIR_LEN - 1) // 2 + self.agc_delay
        self.k = 0
        self.diag = diagnostics
        if diagnostics:
            self.rx_s = OlsFir(h_rx, FRAME, True)
            self.rx_n = OlsFir(h_rx, FRAME, True)
            self.rx_o = OlsFir(h_rx, FRAME, True)
            self.dg: dict[str, list[np.ndarray]] = {"speech": [], "noise": [], "other": [], "gain": []}

    def process(self, x: np.ndarray) -> np.ndarray:
        """One frame of FRAME clean samples (float, finite) -> FRAME samples of audio (float32)."""
        p, F = self.p, FRAME
        k = self.k
        self.k += 1
        n0 = k * F
        xc = compress_kernel(x, self.comp_g, self.comp_a[0], self.comp_a[1], self.comp_state) if self.comp else np.asarray(x, np.float64)
        # fading paths
        if self.fades is None:
            sig = self.tx[0](xc)
        else:
            sig = np.zeros(F, np.complex128)
            for tx, fd in zip(self.tx, self.fades):
                interp_mac(fd.grid(n0), fd.M, tx(xc), sig)
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
                interp_mac(self.interf_fade.grid(n0) * self.interf_gain, self.interf_fade.M, it, other)
            else:
                other += it * self.interf_gain
        # heterodynes
        for rot, amp in self.carriers:
            other += amp * rot.frame(n0)
        # atmospheric impulses
        if p.impulse_rate_hz > 0:
            rng = np.random.default_rng(np.random.SeedSequence([p.seed, C_IMPULSE, k]))
            cnt = int(rng.poisson(p.impulse_rate_hz * F / RATE))
            if cnt:
                pos = rng.integers(0, F, cnt)
                amp = self.imp_med * np.exp(0.8 * rng.standard_normal(cnt)) * np.exp(2j * np.pi * rng.random(cnt))
                np.add.at(other, pos, amp)
        # band noise (white complex Gaussian, shaped by the RX filter)
        if self.noise_sigma > 0:
            rng = np.random.default_rng(np.random.SeedSequence([p.seed, C_NOISE, k]))
            w = rng.standard_normal(2 * F).view(np.complex128) * self.noise_sigma
        else:
            w = None
        tot = sig + other if w is None else sig + other + w
        r = self.rx(tot)
        gain = np.empty(F) if self.diag else np.empty(0)
        y = agc_kernel(r, *self.agc_args, self.agc_st, self.agc_mag, self.agc_dl, gain)
        if self.diag:
            self.dg["speech"].append(self.rx_s(sig).real)
            self.dg["noise"].append(self.rx_n(w if w is not None else np.zeros(F, np.complex128)).real)
            self.dg["other"].append(self.rx_o(other).real)
            self.dg["gain"].append(gain)
        return y


@dataclass
class SimResult:
    """What :func:`simulate` returns.

    Attributes:
        received: float32 (n,) at 8 kHz, same length as the input, time-aligned (see :mod:`streamkit.data.hf_channel`).
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


def resolve_speech_level(clean: np.ndarray, params: ChannelParams) -> ChannelParams:
    """``params`` with ``speech_level_db`` measured from ``clean`` (what :func:`simulate` does when
    it is None: the active level of the TX-compressed, band-passed audio; nominal for silence);
    unchanged when it is already set."""
    if params.speech_level_db is not None:
        return params
    x = np.asarray(clean, np.float64)
    if params.tx_compression_db is not None:
        g = 10 ** (params.tx_compression_db / 20)
        ca = (1 - math.exp(-1 / (RATE * COMP_ATTACK_S)), 1 - math.exp(-1 / (RATE * COMP_RELEASE_S)))
        x = compress_kernel(x, g, ca[0], ca[1], np.zeros(1))
    lvl = active_level_db(bandpassed(x))
    return params.replace(speech_level_db=NOMINAL_SPEECH_LEVEL_DB if lvl is None else round(lvl, 6))


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
    check_finite(x, "clean")
    x = x.astype(np.float64)
    n = x.shape[0]
    p = resolve_speech_level(x, params)
    eng = ChannelEngine(p, interferer, diagnostics)
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
