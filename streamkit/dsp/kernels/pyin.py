"""Kernels of pYIN (probabilistic YIN) with a fixed-lag Viterbi, for streaming predominant f0.

Our own implementation (MIT) after M. Mauch and S. Dixon, "pYIN: a fundamental frequency estimator
using probabilistic threshold distributions", ICASSP 2014. Per frame of ``F`` samples (window
``W = F // 2``, lags ``tau_min..tau_max``):

1. YIN difference ``d(tau) = sum_{j<W} (x_j - x_{j+tau})^2`` and its cumulative mean normalised
   form ``d'(tau) = d(tau) * tau / sum_{k=1..tau} d(k)`` (``d'(0) = 1``). The streaming path
   computes it for a batch of frames through the FFT (:func:`yin_cmnd_batch`, numpy; each row
   independent of the batch); :func:`yin_cmnd` is the direct sum, the reference in the tests.
2. A prior over 100 absolute thresholds ``s_i = 0.01 .. 1.00`` (beta distribution, mean 0.1 by
   default, as in the paper): for each threshold the *first* local minimum of ``d'`` below it
   receives the threshold's prior mass; if none is below, the global minimum receives
   ``p_abs = 0.01`` times that mass. Each trough is refined by parabolic interpolation, so a frame
   yields at most ``MAX_CAND`` candidates (cents re 55 Hz, probability); their sum is the frame's
   voiced probability ``pv``.
3. An HMM over ``2 N`` states: ``N`` pitch bins (``bins_per_semitone`` per semitone from
   ``fmin``) voiced, and the same ``N`` unvoiced. Observation: a voiced bin gets the probability
   of the candidates falling into it; every unvoiced state gets ``(1 - pv) / N``. Transition: a
   triangular band of ``+-max_step`` bins between pitches, times ``1 - p_switch`` within a voicing
   class and ``p_switch`` across.
4. Viterbi in the log domain with a **fixed lag** ``L`` frames: after frame ``t`` the best path is
   traced back ``L`` steps and frame ``t - L`` is decided (its state is final from then on); the
   last ``L`` frames are decided at the end of the stream by the full traceback. The output
   therefore depends only on the frames, not on how the signal was chunked.

The decided f0 of a voiced frame is the most probable candidate within one bin of the decided bin
(the bin centre if there is none), so the quantisation of the bins does not limit the accuracy.

The other kernels are ``@njit(cache=True, nogil=True)`` and keep their state in explicit arrays:

* ``ring_c`` / ``ring_p`` (L + 1, MAX_CAND): candidates (cents, probability) of the last frames;
  ``ring_pv`` (L + 1,): their voiced probabilities;
* ``psi`` (L + 1, 2 N) int32: back pointers of the last frames;
* ``delta`` (2 N,): log score of the best path into each state (normalised to max 0);
* ``scal`` (2,) int64: frames seen, frames decided.
"""

from __future__ import annotations

import math

import numba as nb
import numpy as np

_JIT = {"cache": True, "nogil": True, "error_model": "numpy"}

#: most candidates (troughs) kept per frame
MAX_CAND = 8
#: number of absolute thresholds of the prior (0.01 .. 1.00)
N_THRESH = 100
#: log probability floor (log of zero)
LOG_FLOOR = -1e30
#: the reference of the cents scale: 55 Hz (A1)
REF_HZ = 55.0


def hz_to_cents(f: np.ndarray | float) -> np.ndarray | float:
    """Cents above 55 Hz."""
    return 1200.0 * np.log2(np.asarray(f, dtype=np.float64) / REF_HZ)


def cents_to_hz(c: np.ndarray | float) -> np.ndarray | float:
    """Hz of cents above 55 Hz."""
    return REF_HZ * 2.0 ** (np.asarray(c, dtype=np.float64) / 1200.0)


def threshold_prior(mean: float = 0.1, concentration: float = 20.0) -> np.ndarray:
    """Prior mass of the thresholds ``0.01 .. 1.00``: a beta distribution with the given mean
    (``alpha = mean * concentration``, ``beta = (1 - mean) * concentration``; (2, 18) by default)."""
    from scipy.stats import beta

    edges = np.linspace(0.0, 1.0, N_THRESH + 1)
    cdf = beta.cdf(edges, mean * concentration, (1.0 - mean) * concentration)
    return np.diff(cdf).astype(np.float64)


def log_transition(n_bins: int, max_step: int) -> np.ndarray:
    """log of the triangular pitch transition band: row ``k`` is the weight of a step of
    ``k - max_step`` bins, normalised (near the ends of the range the band is cut, not renormalised)."""
    w = (max_step + 1 - np.abs(np.arange(-max_step, max_step + 1))).astype(np.float64)
    return np.log(w / w.sum())


@nb.njit(**_JIT)
def yin_cmnd(frame: np.ndarray, w: int, tau_max: int, out: np.ndarray) -> None:
    """Cumulative mean normalised difference of ``frame`` for lags ``0..tau_max`` into ``out``."""
    out[0] = 1.0
    acc = 0.0
    for tau in range(1, tau_max + 1):
        s = 0.0
        for j in range(w):
            d = frame[j] - frame[j + tau]
            s += d * d
        acc += s
        out[tau] = s * tau / acc if acc > 0.0 else 1.0


def yin_cmnd_batch(frames: np.ndarray, w: int, tau_max: int) -> np.ndarray:
    """:func:`yin_cmnd` of every row of ``frames`` (k, F) at once, through the FFT: ``d(tau) =
    e_0 + e_tau - 2 r(tau)`` with the window energies from a cumulative sum and the cross term
    ``r`` from one real FFT per frame (O(F log F) instead of O(w tau_max)). Each row's result
    depends on that row alone, so batching does not change it."""
    k, f = frames.shape
    n = 1 << int(math.ceil(math.log2(f + w)))
    cross = np.fft.irfft(np.conj(np.fft.rfft(frames[:, :w], n)) * np.fft.rfft(frames, n), n)[:, : tau_max + 1]
    sq = np.concatenate([np.zeros((k, 1)), np.cumsum(frames * frames, axis=1)], axis=1)
    tau = np.arange(tau_max + 1)
    d = np.maximum(sq[:, w : w + 1] + (sq[:, tau + w] - sq[:, tau]) - 2.0 * cross, 0.0)
    d[:, 0] = 0.0
    acc = np.cumsum(d, axis=1)
    out = np.ones((k, tau_max + 1))
    with np.errstate(divide="ignore", invalid="ignore"):
        out[:, 1:] = np.where(acc[:, 1:] > 0.0, d[:, 1:] * tau[1:] / acc[:, 1:], 1.0)
    return out


@nb.njit(**_JIT)
def frame_candidates(cmnd: np.ndarray, tau_min: int, tau_max: int, rate: float, prior: np.ndarray,
                     p_abs: float, cand_c: np.ndarray, cand_p: np.ndarray) -> int:  # fmt: skip
    """pYIN candidates of one frame: writes cents / probabilities, returns their number."""
    n_t = prior.shape[0]
    nc = 0
    # troughs: local minima of cmnd in [tau_min, tau_max - 1], in order of lag
    tr = np.empty(tau_max - tau_min + 1, dtype=np.int64)
    n_tr = 0
    g = -1
    for tau in range(tau_min, tau_max):
        v = cmnd[tau]
        if v < cmnd[tau - 1] and v <= cmnd[tau + 1]:
            tr[n_tr] = tau
            if g < 0 or v < cmnd[tr[g]]:
                g = n_tr
            n_tr += 1
    if n_tr == 0:
        return 0
    mass_of = np.zeros(n_tr)
    # threshold s_i = (i + 1) / n_t: its mass goes to the first trough below it, else (times
    # p_abs) to the global minimum
    for i in range(n_t):
        s = (i + 1) / n_t
        hit = -1
        for k in range(n_tr):
            if cmnd[tr[k]] < s:
                hit = k
                break
        if hit >= 0:
            mass_of[hit] += prior[i]
        else:
            mass_of[g] += p_abs * prior[i]
    for k in range(n_tr):
        tau = tr[k]
        mass = mass_of[k]
        if mass <= 0.0:
            continue
        # parabolic refinement of the trough
        a = cmnd[tau - 1]
        b = cmnd[tau]
        c = cmnd[tau + 1]
        den = a - 2.0 * b + c
        shift = 0.5 * (a - c) / den if den > 0.0 else 0.0
        if shift > 0.5:
            shift = 0.5
        elif shift < -0.5:
            shift = -0.5
        f = rate / (tau + shift)
        cents = 1200.0 * math.log2(f / 55.0)
        if nc < cand_c.shape[0]:
            cand_c[nc] = cents
            cand_p[nc] = mass
            nc += 1
        else:  # keep the most probable
            jmin = 0
            for j in range(1, nc):
                if cand_p[j] < cand_p[jmin]:
                    jmin = j
            if mass > cand_p[jmin]:
                cand_c[jmin] = cents
                cand_p[jmin] = mass
    return nc


@nb.njit(**_JIT)
def pyin_frames(cmnds: np.ndarray, par: np.ndarray, prior: np.ndarray, ltrans: np.ndarray,
                ring_c: np.ndarray, ring_p: np.ndarray, ring_pv: np.ndarray, psi: np.ndarray,
                delta: np.ndarray, scal: np.ndarray, newd: np.ndarray,
                out: np.ndarray) -> int:  # fmt: skip
    """Run ``k`` frames, given as their YIN functions (k, tau_max + 1) (:func:`yin_cmnd_batch`),
    through pYIN and the fixed-lag Viterbi.

    ``par``: rate, W, tau_min, tau_max, c_min (cents of bin 0), bins_per_cent, N, max_step,
    log(1 - p_switch), log(p_switch), p_abs, L. Writes one row (cents, voiced 0/1, pv) into
    ``out`` per decided frame, in order, and returns how many.
    """
    rate = par[0]
    tau_min = int(par[2])
    tau_max = int(par[3])
    c_min = par[4]
    bpc = par[5]
    n = int(par[6])
    ms = int(par[7])
    l_stay = par[8]
    l_sw = par[9]
    p_abs = par[10]
    lag = int(par[11])
    R = lag + 1
    n_out = 0
    obs = np.empty(n)
    cc = np.empty(ring_c.shape[1])
    cp = np.empty(ring_c.shape[1])
    for f in range(cmnds.shape[0]):
        t = scal[0]
        slot = t % R
        nc = frame_candidates(cmnds[f], tau_min, tau_max, rate, prior, p_abs, cc, cp)
        pv = 0.0
        for j in range(n):
            obs[j] = 0.0
        for j in range(ring_c.shape[1]):
            ring_c[slot, j] = 0.0
            ring_p[slot, j] = 0.0
        for j in range(nc):
            ring_c[slot, j] = cc[j]
            ring_p[slot, j] = cp[j]
            pv += cp[j]
            b = int(math.floor((cc[j] - c_min) * bpc + 0.5))
            if 0 <= b < n:
                obs[b] += cp[j]
        if pv > 1.0:
            pv = 1.0
        ring_pv[slot] = pv
        l_unv = math.log((1.0 - pv) / n) if pv < 1.0 else LOG_FLOOR
        if t == 0:
            for j in range(n):
                delta[j] = math.log(obs[j]) if obs[j] > 0.0 else LOG_FLOOR
                delta[n + j] = l_unv
                psi[slot, j] = j
                psi[slot, n + j] = n + j
        else:
            for j in range(n):
                # best predecessor of pitch j, voiced and unvoiced destination
                best_v = -1e300
                arg_v = j
                best_u = -1e300
                arg_u = n + j
                lo = j - ms if j - ms > 0 else 0
                hi = j + ms if j + ms < n - 1 else n - 1
                for i in range(lo, hi + 1):
                    lt = ltrans[i - j + ms]
                    va = delta[i] + lt + l_stay  # voiced i -> voiced j
                    if va > best_v:
                        best_v = va
                        arg_v = i
                    vb = delta[n + i] + lt + l_sw  # unvoiced i -> voiced j
                    if vb > best_v:
                        best_v = vb
                        arg_v = n + i
                    ua = delta[n + i] + lt + l_stay  # unvoiced i -> unvoiced j
                    if ua > best_u:
                        best_u = ua
                        arg_u = n + i
                    ub = delta[i] + lt + l_sw  # voiced i -> unvoiced j
                    if ub > best_u:
                        best_u = ub
                        arg_u = i
                lo_v = math.log(obs[j]) if obs[j] > 0.0 else LOG_FLOOR
                newd[j] = best_v + lo_v
                newd[n + j] = best_u + l_unv
                psi[slot, j] = arg_v
                psi[slot, n + j] = arg_u
            for j in range(2 * n):
                delta[j] = newd[j]
        # normalise
        mx = -1e300
        for j in range(2 * n):
            if delta[j] > mx:
                mx = delta[j]
        for j in range(2 * n):
            delta[j] -= mx
            if delta[j] < LOG_FLOOR:
                delta[j] = LOG_FLOOR
        scal[0] = t + 1
        if t >= lag:
            # trace back lag steps from the best state of frame t
            s = 0
            for j in range(1, 2 * n):
                if delta[j] > delta[s]:
                    s = j
            for k in range(lag):
                s = psi[(t - k) % R, s]
            _decide(t - lag, s, R, c_min, bpc, n, ring_c, ring_p, ring_pv, out, n_out)
            n_out += 1
            scal[1] = t - lag + 1
    return n_out


@nb.njit(**_JIT)
def _decide(fr: int, s: int, R: int, c_min: float, bpc: float, n: int, ring_c: np.ndarray,
            ring_p: np.ndarray, ring_pv: np.ndarray, out: np.ndarray, row: int) -> None:  # fmt: skip
    slot = fr % R
    b = s if s < n else s - n
    cents = c_min + b / bpc
    if s < n:
        best = -1.0
        for j in range(ring_c.shape[1]):
            p = ring_p[slot, j]
            if p > 0.0 and abs((ring_c[slot, j] - c_min) * bpc - b) <= 1.0 and p > best:
                best = p
                cents = ring_c[slot, j]
    out[row, 0] = cents
    out[row, 1] = 1.0 if s < n else 0.0
    out[row, 2] = ring_pv[slot]


@nb.njit(**_JIT)
def pyin_finish(par: np.ndarray, ring_c: np.ndarray, ring_p: np.ndarray, ring_pv: np.ndarray,
                psi: np.ndarray, delta: np.ndarray, scal: np.ndarray, out: np.ndarray) -> int:  # fmt: skip
    """Decide the frames still pending (full traceback from the best final state); returns how many."""
    c_min = par[4]
    bpc = par[5]
    n = int(par[6])
    R = int(par[11]) + 1
    t_end = scal[0]
    first = scal[1]
    m = t_end - first
    if m <= 0:
        return 0
    s = 0
    for j in range(1, 2 * n):
        if delta[j] > delta[s]:
            s = j
    states = np.empty(m, dtype=np.int64)
    for k in range(m):
        t = t_end - 1 - k
        states[m - 1 - k] = s
        s = psi[t % R, s]
    for k in range(m):
        _decide(first + k, states[k], R, c_min, bpc, n, ring_c, ring_p, ring_pv, out, k)
    scal[1] = t_end
    return m
