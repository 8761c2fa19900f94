"""Kernels of the statistical SAD: minimum-statistics noise PSD, multi-stage Wiener, LPC, scores.

All functions are ``@njit(cache=True, nogil=True, error_model="numpy")`` (see ``_JIT``), work in float64 and keep their state in
explicit arrays updated in place, so a stream processed in batches of any size is bit-identical
to one batch (the recursions run frame by frame, sums run over bins in a fixed order).

Minimum statistics (R. Martin, IEEE TSAP 9(5), 2001, with the bias table of Martin 2006, as in
VOICEBOX ``estnoisem``). VOICEBOX gives the constants as time constants
(Martin's originals are for a 16 ms hop); every smoothing factor is re-derived for our hop
``dt = 0.032 s`` as ``alpha = exp(-dt / tau)``:

==================  ==================  =========================  ==========================
constant            tau / rule          Martin (16 ms hop)         here (32 ms hop)
==================  ==================  =========================  ==========================
alpha_max           0.392 s             0.96                       exp(-.032/.392)  = 0.9216
a_c (alpha_c LP)    0.0449 s            0.7                        exp(-.032/.0449) = 0.4903
alpha_min,high      0.0133 s            0.3                        exp(-.032/.0133) = 0.0902
SNR exponent        -dt / 0.064 s       -0.25                      -0.5
beta_max            0.0717 s            0.8                        exp(-.032/.0717) = 0.6400
Q_eq,min / max      2 / 14 (frames)     2 / 14                     2 / 14 (unchanged)
a_v                 2.12                2.12                       2.12
window D = U*V      U = 8 sub-windows   8 x 12 = 96 fr = 1.536 s   8 x 4 = 32 fr = 1.024 s
max noise slope     47/31.4/15.7/4.1    x per V*dt (12*16 ms):     10**(dB/s * V*dt / 10),
                    dB/s                8 / 4 / 2 / 1.2            V*dt = 0.128 s:
                                                                   4.00 / 2.52 / 1.59 / 1.13
slope thresholds    on mean Q^-1        0.03/0.05/0.06/inf         same
M(D), M(V)          Martin 2006 table   M(96)=0.876, M(12)=0.635   M(32)=0.770, M(4)=0.412
==================  ==================  =========================  ==========================

The window is shorter than Martin's 1.536 s because the KiwiSDR AGC moves the noise level
quickly (HF paper §3.1: "the observation window ... has to be kept small"); VOICEBOX's lower
limit V >= 4 frames then fixes 8 x 4 = 1.024 s (CHOICE; tune on dev). After a noise *rise* the
estimate follows within about D + V frames (the old minimum must leave the ring of U sub-window
minima), i.e. ~1.15 s; a *fall* is followed within a sub-window (~0.13 s).

State layout of one tracker (one Wiener stage), ``K`` bins:

* ``vec`` (8, K): rows P (smoothed power), x (noise estimate sigma^2), P-bar, P2-bar, pminu
  (noise floor), actmin (running minimum), actminsub (sub-window minimum), lminflag (0/1).
* ``buf`` (U, K): ring of sub-window minima.
* ``scal`` (4,): alpha_c, sub-window counter, ring index, frames seen (0 = not started).
* ``par`` (21,): see :func:`minstat_params`.
"""

from __future__ import annotations

import math

import numba as nb
import numpy as np

#: LLVM fast-math flags of the kernels: contraction, reassociation and reciprocals, but no
#: "no NaN / no inf" assumptions (the minima start at +inf). Deterministic for a given build, so
#: batch size never changes a result.
_FM = {"contract", "reassoc", "arcp", "nsz"}

#: jit options of every kernel. ``error_model="numpy"``: a float division by zero gives inf/NaN
#: instead of a Python ZeroDivisionError; the check numba inserts otherwise sits in every per-bin
#: loop and stops LLVM from vectorising them (the kernels floor every divisor, so no division by
#: zero happens). Measured on the statistical-SAD kernel: 11.3 -> 3.4 us per frame.
_JIT = {"cache": True, "nogil": True, "fastmath": _FM, "error_model": "numpy"}

#: Martin 2006, Table 5 (as in VOICEBOX ``mhvals``): (D, M(D)); linear interpolation in sqrt(D)
_MH_TABLE = np.array(
    [(1, 0.0), (2, 0.26), (5, 0.48), (8, 0.58), (10, 0.61), (15, 0.668), (20, 0.705), (30, 0.762), (40, 0.8), (60, 0.841),
     (80, 0.865), (120, 0.89), (140, 0.9), (160, 0.91), (180, 0.92), (220, 0.93), (260, 0.935), (300, 0.94)]
)  # fmt: skip

#: VOICEBOX time constants (s) and plain constants, from which :func:`minstat_params` derives the factors
TAU_ALPHA_MAX = 0.392
TAU_ALPHA_C = 0.0449
TAU_ALPHA_MIN_HIGH = 0.0133
TAU_SNR_FALL = 0.064
TAU_BETA_MAX = 0.0717
QEQ_MIN = 2.0
QEQ_MAX = 14.0
A_V = 2.12
SLOPE_Q_THRESHOLDS = (0.03, 0.05, 0.06, math.inf)
SLOPE_DB_PER_S = (47.0, 31.4, 15.7, 4.1)

# indices into par
_AMAX, _ACA, _AMINH, _SNREXP, _BMAX, _QIMAX, _QIMIN, _AV, _ND, _NV, _MD, _MV, _NU = range(13)
_NSM = 13  # 4 slope factors
_QITH = 17  # 4 thresholds
N_PAR = 21

# rows of vec
_P, _X, _PB, _PB2, _PMINU, _ACTMIN, _ACTMINSUB, _LMIN = range(8)


def mh_value(d: float) -> float:
    """M(D) of Martin 2006 (Table 5), linear in sqrt(D) between entries (VOICEBOX ``mhvals``)."""
    t = _MH_TABLE
    if d >= t[-1, 0]:
        return float(t[-1, 1])
    i = int(np.searchsorted(t[:, 0], d))
    if t[i, 0] == d:
        return float(t[i, 1])
    qj, qi, q = math.sqrt(t[i - 1, 0]), math.sqrt(t[i, 0]), math.sqrt(d)
    return float(t[i, 1] + (q - qi) * (t[i - 1, 1] - t[i, 1]) / (qj - qi))


def minstat_params(hop_s: float, subwindows: int = 8, subwindow_frames: int = 4) -> np.ndarray:
    """The float64 parameter vector of the tracker for a frame hop of ``hop_s`` seconds."""
    u, v = int(subwindows), int(subwindow_frames)
    d = u * v
    par = np.zeros(N_PAR)
    par[_AMAX] = math.exp(-hop_s / TAU_ALPHA_MAX)
    par[_ACA] = math.exp(-hop_s / TAU_ALPHA_C)
    par[_AMINH] = math.exp(-hop_s / TAU_ALPHA_MIN_HIGH)
    par[_SNREXP] = -hop_s / TAU_SNR_FALL
    par[_BMAX] = math.exp(-hop_s / TAU_BETA_MAX)
    par[_QIMAX] = 1.0 / QEQ_MIN
    par[_QIMIN] = 1.0 / QEQ_MAX
    par[_AV] = A_V
    par[_ND] = d
    par[_NV] = v
    par[_MD] = mh_value(d)
    par[_MV] = mh_value(v)
    par[_NU] = u
    for i in range(4):
        par[_NSM + i] = 10.0 ** (SLOPE_DB_PER_S[i] * v * hop_s / 10.0)
        par[_QITH + i] = SLOPE_Q_THRESHOLDS[i]
    return par


def minstat_state(n_bins: int, subwindows: int = 8) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Fresh (vec, buf, scal) for one tracker; the first frame initialises them."""
    return np.zeros((8, n_bins)), np.full((int(subwindows), n_bins), np.inf), np.zeros(4)


@nb.njit(**_JIT)
def minstat_frame(yft: np.ndarray, vec: np.ndarray, buf: np.ndarray, scal: np.ndarray, par: np.ndarray, qeqi: np.ndarray,
                  kmod: np.ndarray) -> None:  # fmt: skip
    """One frame of Martin's recursion on the periodogram ``yft`` (K,), state in place.

    ``qeqi`` (K,) float64 and ``kmod`` (K,) bool are scratch. The noise estimate is ``vec[1]``.
    ``yft`` must be finite and > 0 (the caller floors it).
    """
    K = yft.shape[0]
    p = vec[_P]
    x = vec[_X]
    pb = vec[_PB]
    pb2 = vec[_PB2]
    pminu = vec[_PMINU]
    actmin = vec[_ACTMIN]
    actminsub = vec[_ACTMINSUB]
    lmf = vec[_LMIN]
    nu = int(par[_NU])
    nv = par[_NV]
    t = scal[3] + 1.0
    scal[3] = t
    if t == 1.0:  # initialise from the first frame (VOICEBOX), then process it like any other
        for k in range(K):
            y = yft[k]
            p[k] = y
            x[k] = y
            pb[k] = y
            pb2[k] = y * y
            pminu[k] = y
            actmin[k] = np.inf
            actminsub[k] = np.inf
            lmf[k] = 0.0
        buf[:, :] = np.inf
        scal[0] = 1.0  # alpha_c
        scal[1] = nv  # sub-window counter: force a buffer switch on the first frame
        scal[2] = 0.0  # ring index
    sp = 0.0
    sy = 0.0
    sx = 0.0
    for k in range(K):
        sp += p[k]
        sy += yft[k]
        sx += x[k]
    # (9), (10): correction factor
    r = sp / sy - 1.0
    acb = 1.0 / (1.0 + r * r)
    aca = par[_ACA]
    ac = aca * scal[0] + (1.0 - aca) * max(acb, aca)
    scal[0] = ac
    # (11), (12): optimal smoothing factor with its lower limit
    lower = min(par[_AMINH], (sp / sx) ** par[_SNREXP])
    amax = par[_AMAX]
    bmax = par[_BMAX]
    qimax = par[_QIMAX]
    qimin = par[_QIMIN] / t
    qsum = 0.0
    for k in range(K):
        q = p[k] / x[k] - 1.0
        ah = amax * ac / (1.0 + q * q)
        if ah < lower:
            ah = lower
        pk = ah * p[k] + (1.0 - ah) * yft[k]
        p[k] = pk
        b = min(ah * ah, bmax)
        pb[k] = b * pb[k] + (1.0 - b) * pk
        pb2[k] = b * pb2[k] + (1.0 - b) * pk * pk
        qi = (pb2[k] - pb[k] * pb[k]) / (2.0 * x[k] * x[k])
        if qi > qimax:
            qi = qimax
        if qi < qimin:
            qi = qimin
        qeqi[k] = qi
        qsum += qi
    qiav = qsum / K
    bc = 1.0 + par[_AV] * math.sqrt(qiav)
    nd = par[_ND]
    md = par[_MD]
    mv = par[_MV]
    for k in range(K):
        iq = 1.0 / qeqi[k]
        bmind = 1.0 + 2.0 * (nd - 1.0) * (1.0 - md) / (iq - 2.0 * md)
        bminv = 1.0 + 2.0 * (nv - 1.0) * (1.0 - mv) / (iq - 2.0 * mv)
        v = bc * p[k] * bmind
        km = v < actmin[k]
        kmod[k] = km
        if km:
            actmin[k] = v
            actminsub[k] = bc * p[k] * bminv
    subwc = scal[1]
    if subwc > 1.0 and subwc < nv:  # inside a sub-window: allow a local minimum
        for k in range(K):
            if kmod[k]:
                lmf[k] = 1.0
            if actminsub[k] < pminu[k]:
                pminu[k] = actminsub[k]
            x[k] = pminu[k]
    elif subwc >= nv:  # end of a sub-window: buffer switch
        ib = int(scal[2])
        ib = (ib + 1) % nu
        scal[2] = ib
        nsm = par[_NSM + 3]
        for i in range(4):
            if qiav < par[_QITH + i]:
                nsm = par[_NSM + i]
                break
        for k in range(K):
            buf[ib, k] = actmin[k]
            m = buf[0, k]
            for u in range(1, nu):
                if buf[u, k] < m:
                    m = buf[u, k]
            pminu[k] = m
            if lmf[k] != 0.0 and not kmod[k] and actminsub[k] < nsm * m and actminsub[k] > m:
                pminu[k] = actminsub[k]
                for u in range(nu):
                    buf[u, k] = actminsub[k]
            lmf[k] = 0.0
            actmin[k] = np.inf
        subwc = 0.0
    scal[1] = subwc + 1.0


@nb.njit(**_JIT)
def minstat_track(y2: np.ndarray, vec: np.ndarray, buf: np.ndarray, scal: np.ndarray, par: np.ndarray, noise: np.ndarray) -> None:
    """Run the tracker over ``k`` frames ``y2`` (k, K) (> 0, finite); noise estimates into ``noise`` (k, K)."""
    k, K = y2.shape
    if vec.shape[0] != 8 or vec.shape[1] != K or buf.shape[0] != int(par[_NU]) or buf.shape[1] != K or scal.shape[0] != 4 or noise.shape != y2.shape:
        raise ValueError("minstat_track: state shapes do not fit y2")
    qeqi = np.empty(K)
    kmod = np.empty(K, dtype=np.bool_)
    for j in range(k):
        minstat_frame(y2[j], vec, buf, scal, par, qeqi, kmod)
        for i in range(K):
            noise[j, i] = vec[_X, i]


# -- the full per-frame pipeline ------------------------------------------------------------------

# indices into the pipeline parameter vector ``cfg``
C_GMIN2, C_FLOOR, C_EPS, C_A_LPC, C_A_E, C_A_ND, C_RISE, C_FALL, C_KAPPA, C_DMIN, C_SCALE, C_NEED, C_WARM = range(13)
N_CFG = 13
# feature state ``fst``: [frames seen, a1bar] + per band [e_bar, n, s]
F_START, F_A1 = 0, 1
F_BANDS = 2


@nb.njit(**_JIT)
def stat_sad_batch(y2: np.ndarray, gammas: np.ndarray, hp_w: np.ndarray, lpc_w: np.ndarray, lpc_c: np.ndarray, bands: np.ndarray, cfg: np.ndarray,
                   ms_vec: np.ndarray, ms_buf: np.ndarray, ms_scal: np.ndarray, ms_par: np.ndarray, fst: np.ndarray,
                   scores: np.ndarray) -> None:  # fmt: skip
    """Soft speech scores of ``k`` frames of periodograms ``y2`` (k, K), all state in place.

    Per frame:

    1. floor: Y = |X|^2 + floor (silence stays finite, no division by zero);
    2. stages s = 0..S-1: sigma_s = minstat(P_s); G_s = max(1 - gammas[s] * sigma_s / P_s, G_min);
       P_{s+1} = G_s^2 * P_s (power form of the paper's eq. (1));
    3. linear highpass as a spectral weight: P_h = hp_w * P_S;
    4. 1st-order LPC: a1 = r(1)/r(0) from P_h, r(m) = sum_k lpc_w[k] P_h[k] cos(m w_k) (``lpc_w``
       the DFT-symmetry weight: 1 at DC/Nyquist, 2 elsewhere; ``lpc_c = lpc_w * cos(w_k)``), smoothed
       a1bar <- a_lpc*a1bar + (1-a_lpc)*a1; the predictable part of the frame power,
       a1bar^2 * P_h, is kept (what a one-tap predictor cannot predict is removed);
    5. band energies e_b = 10 log10(a1bar^2 * sum_{k in b} P_h + eps), smoothed
       ebar_b <- a_e*ebar_b + (1-a_e)*e_b;
    6. trackers: noise n_b falls fast (n <- a_nd*n + (1-a_nd)*ebar when ebar < n) and rises slowly
       (n <- min(n + rise, ebar)); speech s_b = ebar if above, else max(s - fall, n);
    7. adaptive threshold theta_b = n_b + max(d_min, kappa*(s_b - n_b)); band score
       sigmoid((ebar_b - theta_b)/scale); the frame score is the ``need``-th largest band score
       (">= need bands above their threshold" <=> score > 0.5).

    Args:
        y2: (k, K) float64 periodograms (finite, >= 0) of bins 0..K-1 (K <= n_fft/2 + 1: the
            block passes the bins up to its top band edge only).
        gammas: (S,) over-subtraction factor of each stage.
        hp_w: (K,) highpass power weights; lpc_w, lpc_c: (K,) LPC weights (r(0), r(1)).
        bands: (B, 2) int64 bin ranges [lo, hi).
        cfg: (N_CFG,) float64, indices C_*.
        ms_vec, ms_buf, ms_scal: (S, 8, K), (S, U, K), (S, 4) tracker states; ms_par (N_PAR,).
        fst: (2 + 3B,) feature state.
        scores: (k,) output.
    """
    k, K = y2.shape
    S = gammas.shape[0]
    B = bands.shape[0]
    # numba does not bounds-check: a shape mismatch would corrupt memory
    if (
        hp_w.shape[0] != K
        or lpc_w.shape[0] != K
        or lpc_c.shape[0] != K
        or ms_vec.shape[0] != S
        or ms_vec.shape[1] != 8
        or ms_vec.shape[2] != K
        or ms_buf.shape[0] != S
        or ms_buf.shape[1] != int(ms_par[_NU])
        or ms_buf.shape[2] != K
        or ms_scal.shape[0] != S
        or ms_scal.shape[1] != 4
        or cfg.shape[0] != N_CFG
        or fst.shape[0] != F_BANDS + 3 * B
        or scores.shape[0] != k
        or bands.shape[1] != 2
        or int(cfg[C_NEED]) < 1
        or int(cfg[C_NEED]) > B
    ):
        raise ValueError("stat_sad_batch: state/parameter shapes do not fit y2")
    for b in range(B):
        if bands[b, 0] < 0 or bands[b, 1] > K or bands[b, 0] >= bands[b, 1]:
            raise ValueError("stat_sad_batch: band outside the bins of y2")
    gmin2 = cfg[C_GMIN2]
    floor = cfg[C_FLOOR]
    eps = cfg[C_EPS]
    a_lpc = cfg[C_A_LPC]
    a_e = cfg[C_A_E]
    a_nd = cfg[C_A_ND]
    rise = cfg[C_RISE]
    fall = cfg[C_FALL]
    kappa = cfg[C_KAPPA]
    dmin = cfg[C_DMIN]
    scale = cfg[C_SCALE]
    need = int(cfg[C_NEED])
    warm_n = cfg[C_WARM]
    P = np.empty(K)
    qeqi = np.empty(K)
    kmod = np.empty(K, dtype=np.bool_)
    bs = np.empty(B)
    for j in range(k):
        for i in range(K):
            P[i] = y2[j, i] + floor
        for s in range(S):
            vec = ms_vec[s]
            minstat_frame(P, vec, ms_buf[s], ms_scal[s], ms_par, qeqi, kmod)
            g = gammas[s]
            for i in range(K):
                w = 1.0 - g * vec[_X, i] / P[i]
                w2 = w * w if w > 0.0 else 0.0
                if w2 < gmin2 or w <= 0.0:
                    w2 = gmin2
                P[i] = w2 * P[i]
        r0 = 0.0
        r1 = 0.0
        for i in range(K):
            ph = hp_w[i] * P[i]
            P[i] = ph
            r0 += ph * lpc_w[i]
            r1 += ph * lpc_c[i]
        a1 = r1 / r0 if r0 > 0.0 else 0.0
        seen = fst[F_START]
        first = seen == 0.0
        warm = seen < warm_n
        if first:
            fst[F_A1] = a1
        else:
            fst[F_A1] = a_lpc * fst[F_A1] + (1.0 - a_lpc) * a1
        wl = fst[F_A1] * fst[F_A1]
        for b in range(B):
            e = 0.0
            for i in range(bands[b, 0], bands[b, 1]):
                e += P[i]
            e = 10.0 * math.log10(wl * e + eps)
            o = F_BANDS + 3 * b
            if first:
                eb = e
                nb_ = e
                sb = e
            elif warm:  # start-up: both level trackers follow the smoothed energy
                eb = a_e * fst[o] + (1.0 - a_e) * e
                nb_ = eb
                sb = eb
            else:
                eb = a_e * fst[o] + (1.0 - a_e) * e
                nb_ = fst[o + 1]
                if eb < nb_:
                    nb_ = a_nd * nb_ + (1.0 - a_nd) * eb
                else:
                    nb_ = min(nb_ + rise, eb)
                sb = fst[o + 2]
                if eb > sb:
                    sb = eb
                else:
                    sb = max(sb - fall, nb_)
            fst[o] = eb
            fst[o + 1] = nb_
            fst[o + 2] = sb
            theta = nb_ + max(dmin, kappa * (sb - nb_))
            m = (eb - theta) / scale
            if m > 50.0:
                m = 50.0
            elif m < -50.0:
                m = -50.0
            bs[b] = 1.0 / (1.0 + math.exp(-m))
        fst[F_START] = seen + 1.0
        # need-th largest band score (B is small: partial selection by repeated max)
        for r in range(need):
            im = r
            for b in range(r + 1, B):
                if bs[b] > bs[im]:
                    im = b
            tmp = bs[r]
            bs[r] = bs[im]
            bs[im] = tmp
        scores[j] = bs[need - 1]


@nb.njit(**_JIT)
def hysteresis(scores: np.ndarray, on: float, off: float, state: np.ndarray, out: np.ndarray) -> None:
    """Frame decisions: speech when score > ``on`` (after non-speech) or > ``off`` (after speech).

    ``state[0]`` is the previous decision (0/1), updated in place; decisions (0/1) go to ``out``.
    """
    d = state[0]
    for j in range(scores.shape[0]):
        s = scores[j]
        d = 1.0 if (s > on if d == 0.0 else s > off) else 0.0
        out[j] = d
    state[0] = d


# -- the streaming front end: sanitising, framing, window, FFT ---------------------------------------


def rfft_tables(n_fft: int, n_bins: int) -> tuple[np.ndarray, np.ndarray]:
    """Tables of :func:`rfft_power` for a real ``n_fft``-point DFT (power of 2): (rev, tw).

    ``rev`` (n_fft/2,) int64: bit reversal of the half-length complex FFT; ``tw`` (4, n_fft/2 + 1):
    rows cos/-sin of the half-length FFT's twiddles per stage (butterflies ``half`` apart use
    exp(-i pi j / half), j < half, stored at ``half + j``), then cos/-sin of the split twiddles
    exp(-2 pi i k / n_fft).
    """
    h = n_fft // 2
    if n_fft < 4 or n_fft & (n_fft - 1) or not 1 <= n_bins <= h + 1:
        raise ValueError(f"rfft_tables: n_fft must be a power of 2 >= 4 and 1 <= n_bins <= n_fft/2 + 1, got {n_fft}, {n_bins}")
    bits = h.bit_length() - 1
    rev = np.array([int(format(i, f"0{bits}b")[::-1], 2) if bits else 0 for i in range(h)], dtype=np.int64)
    tw = np.zeros((4, h + 1))
    half = 1
    while half < h:  # stage with butterflies ``half`` apart: twiddles j < half at [half + j]
        j = np.arange(half)
        tw[0, half : 2 * half] = np.cos(np.pi * j / half)
        tw[1, half : 2 * half] = -np.sin(np.pi * j / half)
        half *= 2
    k = np.arange(h + 1)
    tw[2] = np.cos(2 * np.pi * k / n_fft)
    tw[3] = -np.sin(2 * np.pi * k / n_fft)
    return rev, tw


@nb.njit(**_JIT)
def half_fft(v: np.ndarray, off: int, win: np.ndarray, rev: np.ndarray, tw: np.ndarray, zr: np.ndarray, zi: np.ndarray) -> None:
    """The half-length complex FFT of :func:`rfft_power` into ``zr``/``zi`` (n_fft/2,): the windowed,
    zero-padded frame ``v[off:off+W] * win`` (W = len(win), even) packed as z[m] = u[2m] + i u[2m+1]."""
    h = rev.shape[0]
    W = win.shape[0]
    for t in range(h):
        zr[t] = 0.0
        zi[t] = 0.0
    for t in range(W // 2):
        r = rev[t]
        zr[r] = v[off + 2 * t] * win[2 * t]
        zi[r] = v[off + 2 * t + 1] * win[2 * t + 1]
    for s in range(0, h - 1, 2):  # butterflies 1 apart: twiddle 1
        ar = zr[s]
        ai = zi[s]
        br = zr[s + 1]
        bi = zi[s + 1]
        zr[s] = ar + br
        zi[s] = ai + bi
        zr[s + 1] = ar - br
        zi[s + 1] = ai - bi
    half = 2
    while half < h:
        size = 2 * half
        for s in range(0, h, size):
            for j in range(half):
                wr = tw[0, half + j]
                wi = tw[1, half + j]
                a = s + j
                t = a + half
                xr = zr[t] * wr - zi[t] * wi
                xi = zr[t] * wi + zi[t] * wr
                zr[t] = zr[a] - xr
                zi[t] = zi[a] - xi
                zr[a] += xr
                zi[a] += xi
        half = size


@nb.njit(**_JIT)
def rfft_power(v: np.ndarray, off: int, win: np.ndarray, rev: np.ndarray, tw: np.ndarray, norm: float, zr: np.ndarray, zi: np.ndarray,
               out: np.ndarray) -> None:  # fmt: skip
    """``out[k] = |X[k]|^2 * norm``, k < len(out), X the ``2 * len(rev)``-point DFT of ``v[off:off+W] * win`` zero-padded.

    Radix-2 FFT of the half length on the packed sequence z[m] = u[2m] + i u[2m+1] (u the windowed,
    zero-padded frame; :func:`half_fft`), then the usual split into the real DFT. ``zr``, ``zi``
    (n_fft/2,) scratch.
    """
    half_fft(v, off, win, rev, tw, zr, zi)
    for k in range(out.shape[0]):
        xr, xi = real_dft_bin(zr, zi, tw, k)
        out[k] = (xr * xr + xi * xi) * norm


@nb.njit(**_JIT)
def real_dft_bin(zr: np.ndarray, zi: np.ndarray, tw: np.ndarray, k: int) -> tuple[float, float]:
    """Bin ``k`` (re, im) of the real DFT from the packed half-length FFT ``zr``/``zi`` of :func:`half_fft`."""
    h = zr.shape[0]
    a = k % h
    b = (h - k) % h
    er = 0.5 * (zr[a] + zr[b])
    ei = 0.5 * (zi[a] - zi[b])
    orr = 0.5 * (zi[a] + zi[b])
    oi = -0.5 * (zr[a] - zr[b])
    cr = tw[2, k]
    ci = tw[3, k]
    return er + cr * orr - ci * oi, ei + cr * oi + ci * orr


#: front-end state ``fe`` (int64): samples carried in ``sbuf`` (the start of the next frame on)
FE_CARRY = 0


def frames_needed(carry: int, n_new: int, win: int, hop: int) -> int:
    """Frames completed when ``n_new`` samples join ``carry`` carried ones."""
    n = carry + n_new
    return (n - win) // hop + 1 if n >= win else 0


@nb.njit(**_JIT)
def stat_sad_frames(x: np.ndarray, whole0: bool, hop_in: int, sbuf: np.ndarray, fe: np.ndarray, hop: int, win: np.ndarray, rev: np.ndarray,
                    tw: np.ndarray, norm: float, y2: np.ndarray) -> tuple[int, int]:  # fmt: skip
    """Append new samples, compute the periodograms of the completed frames into ``y2[:m]``.

    ``x`` (k, L, C): channel 0 of ``x[0, :]`` (when ``whole0``) and of the last ``hop_in`` items of
    every other row (of every row when not ``whole0``) are the new samples, in order: the layout
    of a WindowBlock's window batch, and of a plain signal as ``(1, n, 1)``. NaN/inf become 0.
    ``sbuf`` (>= carry + new) float64 holds the carried samples (``fe[FE_CARRY]``); frames of
    ``len(win)`` samples every ``hop``; ``y2`` (>= m, K). Returns (m, non-finite samples).
    """
    c = fe[FE_CARRY]
    k, L = x.shape[0], x.shape[1]
    bad = 0
    for j in range(k):
        a = 0 if (j == 0 and whole0) else L - hop_in
        for i in range(a, L):
            v = float(x[j, i, 0])
            if not math.isfinite(v):
                v = 0.0
                bad += 1
            sbuf[c] = v
            c += 1
    W = win.shape[0]
    m = (c - W) // hop + 1 if c >= W else 0
    K = y2.shape[1]
    h = rev.shape[0]
    zr = np.empty(h)
    zi = np.empty(h)
    for f in range(m):
        rfft_power(sbuf, f * hop, win, rev, tw, norm, zr, zi, y2[f, :K])
    adv = m * hop
    for i in range(c - adv):
        sbuf[i] = sbuf[adv + i]
    fe[FE_CARRY] = c - adv
    return m, bad


# -- decisions: hysteresis, centred vote, segment edges ------------------------------------------------

# decision parameters ``dpar``: on, off, vote_min, D (look-ahead = vote_window // 2)
DP_ON, DP_OFF, DP_VMIN, DP_D = range(4)
N_DPAR = 4
# decision state ``dst``: previous hysteresis decision, pending decisions, pending scores, segment
# open, its first frame, its score sum, frames output since the origin
DS_HYST, DS_NDEC, DS_NSC, DS_OPEN, DS_SEGA, DS_SUM, DS_NOUT = range(7)
N_DST = 7
# edge rows: [output frame index in this call, 1 = start / 0 = end, score, segment start frame, end frame]
N_EDGE = 5


def decision_capacity(dst: np.ndarray, k: int, look: int) -> int:
    """Pending-array length :func:`vote_decide` needs for ``k`` more frames."""
    return int(dst[DS_NDEC]) + k + 2 * look + 1


@nb.njit(**_JIT)
def vote_decide(scores: np.ndarray, final: bool, dpar: np.ndarray, dst: np.ndarray, pdec: np.ndarray, psc: np.ndarray, out: np.ndarray,
                edges: np.ndarray) -> tuple[int, int]:  # fmt: skip
    """Frame decisions of the block: hysteresis, the centred ">= vote_min of 2D+1" vote, segment edges.

    New frame ``scores`` join the pending ones (``pdec``/``psc``, counts in ``dst``); every frame whose
    look-ahead is complete (all pending ones when ``final``: the last decision is repeated D times
    at the right edge; the first one D times at the left edge) is decided: its score goes to
    ``out[i, 0]`` (float32) and segment starts/ends to ``edges`` rows. The segment's score sum runs
    frame by frame, so it does not depend on the batch sizes. Returns (frames out, edges).
    """
    on = dpar[DP_ON]
    off = dpar[DP_OFF]
    vmin = dpar[DP_VMIN]
    D = int(dpar[DP_D])
    nd = int(dst[DS_NDEC])
    ns = int(dst[DS_NSC])
    nout = int(dst[DS_NOUT])
    k = scores.shape[0]
    d = dst[DS_HYST]
    for j in range(k):
        s = scores[j]
        d = 1.0 if (s > on if d == 0.0 else s > off) else 0.0
        if j == 0 and nout == 0 and nd == 0:
            for _ in range(D):  # left edge
                pdec[nd] = d
                nd += 1
        pdec[nd] = d
        nd += 1
        psc[ns] = s
        ns += 1
    dst[DS_HYST] = d
    if final:
        if ns == 0:
            nd = 0
        else:
            last = pdec[nd - 1]
            for _ in range(D):  # right edge
                pdec[nd] = last
                nd += 1
        n = ns
    else:
        n = nd - 2 * D if nd > 2 * D else 0
    is_open = dst[DS_OPEN] != 0.0
    sega = dst[DS_SEGA]
    ssum = dst[DS_SUM]
    ne = 0
    votes = 0.0
    for i in range(2 * D):
        if i < nd:
            votes += pdec[i]
    for i in range(n):
        votes += pdec[i + 2 * D]
        sp = votes >= vmin
        votes -= pdec[i]
        if sp != is_open:
            if is_open:
                e = nout + i
                edges[ne, 0] = i
                edges[ne, 1] = 0.0
                edges[ne, 2] = ssum / max(e - sega, 1.0)
                edges[ne, 3] = sega
                edges[ne, 4] = e
                ne += 1
                is_open = False
                ssum = 0.0
            else:
                is_open = True
                sega = nout + i
                ssum = 0.0
                edges[ne, 0] = i
                edges[ne, 1] = 1.0
                edges[ne, 2] = psc[i]
                edges[ne, 3] = sega
                edges[ne, 4] = -1.0
                ne += 1
        if is_open:
            ssum += psc[i]
        out[i, 0] = psc[i]
    if final and is_open:
        e = nout + n
        edges[ne, 0] = n
        edges[ne, 1] = 0.0
        edges[ne, 2] = ssum / max(e - sega, 1.0)
        edges[ne, 3] = sega
        edges[ne, 4] = e
        ne += 1
        is_open = False
        ssum = 0.0
    if final:
        nd = 0
        ns = 0
    else:
        for i in range(nd - n):
            pdec[i] = pdec[n + i]
        for i in range(ns - n):
            psc[i] = psc[n + i]
        nd -= n
        ns -= n
    dst[DS_NDEC] = nd
    dst[DS_NSC] = ns
    dst[DS_OPEN] = 1.0 if is_open else 0.0
    dst[DS_SEGA] = sega
    dst[DS_SUM] = ssum
    dst[DS_NOUT] = nout + n
    return n, ne


@nb.njit(**_JIT)
def stat_sad_step(x: np.ndarray, whole0: bool, hop_in: int, sbuf: np.ndarray, fe: np.ndarray, hop: int, win: np.ndarray, rev: np.ndarray,
                  tw: np.ndarray, norm: float, y2: np.ndarray, scores: np.ndarray, gammas: np.ndarray, hp_w: np.ndarray, lpc_w: np.ndarray,
                  lpc_c: np.ndarray, bands: np.ndarray, cfg: np.ndarray, ms_vec: np.ndarray, ms_buf: np.ndarray, ms_scal: np.ndarray,
                  ms_par: np.ndarray, fst: np.ndarray, decide: bool, dpar: np.ndarray, dst: np.ndarray, pdec: np.ndarray, psc: np.ndarray,
                  out: np.ndarray, edges: np.ndarray) -> tuple[int, int, int, int]:  # fmt: skip
    """One streaming step of the numba backend in one call: :func:`stat_sad_frames`, :func:`stat_sad_batch`
    on the new frames (scores into ``scores[:m]``), then (``decide``) :func:`vote_decide`.

    Returns (frames analysed m, non-finite samples, frames out, edges).
    """
    m, bad = stat_sad_frames(x, whole0, hop_in, sbuf, fe, hop, win, rev, tw, norm, y2)
    if m:
        stat_sad_batch(y2[:m], gammas, hp_w, lpc_w, lpc_c, bands, cfg, ms_vec, ms_buf, ms_scal, ms_par, fst, scores[:m])
    n = 0
    ne = 0
    if decide:
        n, ne = vote_decide(scores[:m], False, dpar, dst, pdec, psc, out, edges)
    return m, bad, n, ne
