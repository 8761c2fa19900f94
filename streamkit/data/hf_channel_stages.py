"""The stages of the HF channel simulator (:mod:`streamkit.data.hf_channel`), each with its state explicit
so that frame by frame equals all at once: the TX compressor and the receiver AGC (numba kernels), the
SSB filters, the Watterson fading taps, frequency shifts (mistuning, carriers, the interferer's offset),
FFT overlap-save filtering, and the active speech level."""

from __future__ import annotations

import math

import numba as nb
import numpy as np
import scipy.fft as sfft
from scipy.signal import oaconvolve

from streamkit.data.hf_channel_params import RATE

__all__ = [
    "FRAME",
    "Fading",
    "OlsFir",
    "Rotator",
    "active_level_db",
    "agc_kernel",
    "bandpassed",
    "check_finite",
    "compress_kernel",
    "interp_mac",
    "ssb_fir",
    "tx_real_fir",
]

#: engine frame (samples): noise/impulse seeding grid and FFT-convolution block
FRAME = 4096

# component ids for the per-component random streams (never renumber: recorded corpora depend on them)
C_FADE1, C_FADE2, C_NOISE, C_IMPULSE, C_CARRIER, C_INTERF_FADE = 1, 2, 3, 4, 5, 6

_SSB_F0 = 1500.0  # centre of the SSB passband (Hz)
_SSB_HALF = 1250.0  # lowpass prototype cutoff: -6 dB at 1500 ± 1250 = 250 / 2750 Hz
FIR_LEN = 241  # Kaiser window length of the SSB FIRs (30 ms)
_FIR_BETA = 7.0
_SOS_K = 32  # sinusoids per fading tap
AGC_DELAY_S = 0.015  # CuteSDR DELAY_TIMECONST
AGC_WINDOW_S = 0.018  # CuteSDR WINDOW_TIMECONST
AGC_RELEASE_S = 0.05  # CuteSDR RELEASE_TIMECONST (after hang)
_AGC_MIN = 1e-8  # CuteSDR MIN_CONSTANT (log floor: -160 dB)
COMP_ATTACK_S = 0.001
COMP_RELEASE_S = 0.15


# ------------------------------------------------------------------------------------------------
# numba kernels (explicit state, updated in place: chunk-by-chunk == all at once)
# ------------------------------------------------------------------------------------------------
@nb.njit(cache=True, nogil=True)
def compress_kernel(x: np.ndarray, gmax: float, a_att: float, a_rel: float, state: np.ndarray) -> np.ndarray:
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
def agc_kernel(
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
def ssb_fir(shift: float, pad: int, gain: float) -> np.ndarray:
    """Complex LSB band-pass FIR (300-2700 Hz as heard), centred at ``(len-1)/2 + shift`` samples.

    Length ``FIR_LEN + 2*pad``; the Kaiser window and the sinc are evaluated at the fractional
    offset, so ``shift`` is a band-limited fractional delay built into the filter.
    """
    n = FIR_LEN + 2 * pad
    c = (n - 1) / 2 + shift
    t = np.arange(n, dtype=np.float64) - c
    rw = (FIR_LEN - 1) / 2
    u = np.clip(1.0 - (t / rw) ** 2, 0.0, None)
    w = np.i0(_FIR_BETA * np.sqrt(u)) / np.i0(_FIR_BETA)
    w[np.abs(t) > rw] = 0.0
    wc = 2 * _SSB_HALF / RATE
    lp = wc * np.sinc(wc * t) * w
    lp /= lp.sum()  # unit gain at the band centre
    return gain * lp * np.exp(-2j * np.pi * _SSB_F0 * t / RATE)


def tx_real_fir() -> np.ndarray:
    """Real band-pass equal to Re{h_tx} for zero shift (``Re{x * h_tx} = x * Re{h_tx}``)."""
    return np.ascontiguousarray(ssb_fir(0.0, 0, 2.0).real)


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


def bandpassed(x: np.ndarray) -> np.ndarray:
    """``x`` through the (zero-phase-aligned) SSB band-pass, same length (for level measurement)."""
    h = tx_real_fir()
    d = (h.shape[0] - 1) // 2
    return oaconvolve(np.asarray(x, np.float64), h)[d : d + x.shape[0]]


def check_finite(x: np.ndarray, what: str) -> None:
    bad = ~np.isfinite(x)
    if bad.any():
        i = int(np.argmax(bad))
        raise ValueError(f"{what} contains {int(bad.sum())} non-finite sample(s) (NaN or inf); first at index {i} ({x[i]!r})")


# ------------------------------------------------------------------------------------------------
# fixed-frame stages
# ------------------------------------------------------------------------------------------------
class Fading:
    """One Watterson tap: sum of K complex sinusoids, Gaussian frequencies (σ = spread/2).

    Evaluated at absolute grid points ``m·M`` as ``Σ a·exp(j(2π f_k t_m + φ_k))``: per frame, a
    start phasor per sinusoid (closed formula at the frame's first grid point) times a fixed
    table over the frame's grid points, then linear interpolation (:func:`interp_mac`).
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
def interp_mac(g: np.ndarray, M: int, p: np.ndarray, acc: np.ndarray) -> None:
    """``acc[r] += lerp(g, r / M) * p[r]``: linearly interpolated tap times path signal."""
    inv = 1.0 / M
    for r in range(p.shape[0]):
        j = r // M
        w = (r - j * M) * inv
        acc[r] += (g[j] * (1.0 - w) + g[j + 1] * w) * p[r]


class Rotator:
    """``exp(-j2π f n / fs)`` for absolute n, per frame: exact start phasor × fixed table."""

    def __init__(self, f: float) -> None:
        self.f = f
        self.tab = np.exp(-2j * np.pi * f * np.arange(FRAME) / RATE)

    def frame(self, n0: int) -> np.ndarray:
        return np.exp(-2j * np.pi * math.fmod(self.f * n0 / RATE, 1.0)) * self.tab


class OlsFir:
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
