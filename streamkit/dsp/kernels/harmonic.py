"""Kernel of the statistical SAD's harmonicity / pitch-consistency gate (after the paper's stages).

Voiced speech has a harmonic spectrum: a comb of several harmonics of f0 (70-400 Hz) standing
above the spectrum between them, and its f0 moves all the time (intonation, jitter, every
syllable). The everyday non-speech sounds the stage is meant to reject differ:

* tones, carriers, CW, FSK (RTTY, FT8) have one or two lines: no comb;
* multi-carrier modems (OFDM, FDMDV) fill the band between their carriers (each carrier is
  modulated at about the carrier spacing): no comb standing above its gaps within 64 ms;
* noise has no comb;
* music is harmonic but holds its notes: the comb stays where it was.

Per frame (the stat SAD's own 64 ms / 32 ms frames, its periodogram ``y2`` of bins ``0..K-1``,
``df = 7.8125`` Hz):

1. ``L[k] = ln(y2[lo + 2k] + y2[lo + 2k + 1] + floor)``: the log power of pairs of bins (the
   1024-point FFT of a 512-sample window oversamples the spectrum twice; 15.6 Hz per pair, still
   4.5 pairs per harmonic at f0 = 70 Hz) over 300-3000 Hz (``lo..hi-1``, a multiple of 4 bins);
2. the cepstrum of that band: ``C(q) = sum_k w[k] (L[k] - mean L) exp(-2 pi i q k / NC)``, ``w`` a
   Hann taper, ``NC = 256``. A comb of harmonics spaced ``f0`` makes ``L`` periodic with period
   ``f0 / (2 df)`` pairs, a peak of ``|C|`` at ``q = NC 2 df / f0`` (f0 in 70-400 Hz: ``q`` in
   ``qlo..qhi`` = 10..58). ``|C|`` does not depend on a shift of the whole comb (SSB mistuning);
3. harmonicity ``rho = max_q |C(q)| / mean_q |C(q)|`` over ``qlo..qhi``: about 2.2 for noise, tones,
   FSK and modems (no comb: ``|C|`` is smooth or random over ``q``), 3-9 for voiced speech (the more
   harmonics, the sharper the peak);
4. steadiness ``sigma = Re<Cbar, C> / (|Cbar| |C|)`` over ``qlo..qhi``, ``Cbar`` an exponential
   average of the past frames' ``C`` (time constant ``REF_TAU_S``, before this frame joins it):
   near 1 when the comb stays where it was (held notes, carriers), near 0 when it moves (speech:
   a 2 % change of f0 moves the 15th harmonic by 30 % of the spacing);
5. voicing evidence ``v = sigmoid((rho - rho0) / RHO_W) * sigmoid((sigma0 - sigma) / SIGMA_W)``;
6. ``H <- a_h H + (1 - a_h) v`` (time constant ``tau_h``): the share of recent frames that were
   voiced speech (unvoiced sounds and short pauses inside speech keep the gate open);
7. gate ``g = min(1, H / h_full)``, weighted by ``w = sigmoid((snr - snr0) / SNR_W_DB)``:
   ``g' = 1 - w (1 - g)``; ``snr`` is the band level over its floor (a tracker that falls with
   ``FLOOR_FALL_TAU_S``, rises ``FLOOR_RISE_DB_S`` and ignores digital silence). Only a sound well
   above the floor has to show its harmonics: in low-SNR speech (HF) they are often buried, and
   their absence says nothing. The stat SAD's frame score is multiplied by ``g'`` before the vote.

Every recursion runs frame by frame on explicit state (``hst``), so a stream in any chunking
gives bit-identical gates; the gate depends only on the periodograms, so the numba and C
backends of the stat SAD share this kernel and get identical gate values.
"""

from __future__ import annotations

import math

import numba as nb
import numpy as np

from streamkit.dsp.kernels.minstat import _JIT, half_fft, real_dft_bin, rfft_tables

NC = 256  #: cepstrum length (the band's pairs of bins zero-padded)
BAND_HZ = (300.0, 3000.0)  #: the band whose harmonics count (the SSB voice band)
F0_HZ = (70.0, 400.0)  #: f0 range of speech
REF_TAU_S = 0.5  #: time constant of the reference cepstrum Cbar of the steadiness
RHO_W = 0.25  #: sigmoid width of the harmonicity
SIGMA_W = 0.1  #: sigmoid width of the steadiness
LOG_FLOOR = 1e-12  #: added to y2 before the log (silence stays finite)
FLOOR_RISE_DB_S = 0.05  #: rise of the band-level floor tracker (the stat SAD's noise_rise_db_s)
FLOOR_FALL_TAU_S = 0.5  #: fall of the floor tracker towards lower frames (the stat SAD's noise_fall_tau_s)
SILENCE_DB = -90.0  #: band power (dB) below which a frame is digital silence: the floor ignores it
SNR_W_DB = 2.0  #: sigmoid width of the SNR weight
#: mean |C| below which the log spectrum counts as flat (rounding residue; a real comb gives ~1-100)
FLAT_C = 1e-6

# parameter vector ``hpar``
H_LO, H_HI, H_QLO, H_QHI, H_RHO0, H_SIG0, H_A_REF, H_A_H, H_FULL, H_SNR0, H_RISE, H_A_FALL = range(12)
N_HPAR = 12
# state ``hst``: [H, frames seen, band-level floor (dB), 1 once the floor is set] + Cbar re (nq) + Cbar im (nq)
HS_H, HS_SEEN, HS_FLOOR, HS_FSET = 0, 1, 2, 3
HS_C = 4


def harmonic_setup(
    df: float, n_bins: int, hop_s: float, rho0: float, sigma0: float, tau_h: float, h_full: float, snr0_db: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(hpar, taper, rev, tw) of :func:`harmonic_gate` for bins ``df`` Hz apart, ``n_bins`` bins available."""
    lo = int(round(BAND_HZ[0] / df))
    hi = min(int(round(BAND_HZ[1] / df)), n_bins)
    hi -= (hi - lo) % 4  # pairs of bins, and the packed FFT takes pairs of those
    if hi - lo < 32:
        raise ValueError(f"harmonic gate: the analysed bins ({n_bins} of {df} Hz) do not cover {BAND_HZ[0]}-{BAND_HZ[1]} Hz")
    qlo = int(math.floor(NC * 2 * df / F0_HZ[1]))
    qhi = int(math.ceil(NC * 2 * df / F0_HZ[0]))
    hpar = np.zeros(N_HPAR)
    hpar[H_LO], hpar[H_HI], hpar[H_QLO], hpar[H_QHI] = lo, hi, qlo, qhi
    hpar[H_RHO0] = rho0
    hpar[H_SIG0] = sigma0
    hpar[H_A_REF] = math.exp(-hop_s / REF_TAU_S)
    hpar[H_A_H] = math.exp(-hop_s / tau_h) if tau_h > 0 else 0.0
    hpar[H_FULL] = h_full
    hpar[H_SNR0] = snr0_db
    hpar[H_RISE] = FLOOR_RISE_DB_S * hop_s
    hpar[H_A_FALL] = math.exp(-hop_s / FLOOR_FALL_TAU_S)
    n = (hi - lo) // 2
    taper = np.ascontiguousarray(0.5 - 0.5 * np.cos(2 * np.pi * (np.arange(n) + 1) / (n + 1)))  # Hann without its zero end points
    rev, tw = rfft_tables(NC, NC // 2 + 1)
    return hpar, taper, rev, tw


def harmonic_state(hpar: np.ndarray) -> np.ndarray:
    """Fresh state of :func:`harmonic_gate` (gate closed, no reference comb)."""
    nq = int(hpar[H_QHI]) - int(hpar[H_QLO]) + 1
    return np.zeros(HS_C + 2 * nq)


@nb.njit(**_JIT)
def harmonic_gate(y2: np.ndarray, hpar: np.ndarray, taper: np.ndarray, rev: np.ndarray, tw: np.ndarray, hst: np.ndarray, scores: np.ndarray,
                  feats: np.ndarray) -> None:  # fmt: skip
    """Gate the frame ``scores`` (k,) in place by the harmonicity of the periodograms ``y2`` (k, K).

    ``feats`` (k, 4) or (0, 4): per frame rho, sigma, v, gate (filled when it has k rows).
    """
    k = y2.shape[0]
    lo = int(hpar[H_LO])
    hi = int(hpar[H_HI])
    qlo = int(hpar[H_QLO])
    qhi = int(hpar[H_QHI])
    nq = qhi - qlo + 1
    n = (hi - lo) // 2
    h = rev.shape[0]
    if (
        hi > y2.shape[1]
        or lo < 0
        or n != taper.shape[0]
        or 2 * h > NC
        or qhi >= h
        or hst.shape[0] != HS_C + 2 * nq
        or scores.shape[0] != k
        or (feats.shape[0] != 0 and feats.shape[0] != k)
    ):
        raise ValueError("harmonic_gate: state/parameter shapes do not fit y2")
    rho0 = hpar[H_RHO0]
    sig0 = hpar[H_SIG0]
    a_ref = hpar[H_A_REF]
    a_h = hpar[H_A_H]
    full = hpar[H_FULL]
    snr0 = hpar[H_SNR0]
    rise = hpar[H_RISE]
    a_fall = hpar[H_A_FALL]
    keep = feats.shape[0] == k
    L = np.empty(n)
    zr = np.empty(h)
    zi = np.empty(h)
    cr = np.empty(nq)
    ci = np.empty(nq)
    for j in range(k):
        mean = 0.0
        tot = 0.0
        for i in range(n):
            pw = y2[j, lo + 2 * i] + y2[j, lo + 2 * i + 1] + LOG_FLOOR
            tot += pw
            v = math.log(pw)
            L[i] = v
            mean += v
        mean /= n
        e_db = 10.0 * math.log10(tot)
        fl = hst[HS_FLOOR]
        if e_db < SILENCE_DB:  # digital silence: no level to compare with, the floor is kept
            snr = 0.0
        else:
            if hst[HS_FSET] == 0.0:
                fl = e_db
                hst[HS_FSET] = 1.0
            elif e_db < fl:
                fl = a_fall * fl + (1.0 - a_fall) * e_db
            else:
                fl = min(fl + rise, e_db)
            hst[HS_FLOOR] = fl
            snr = e_db - fl
        for i in range(n):
            L[i] -= mean
        half_fft(L, 0, taper, rev, tw, zr, zi)
        amax = 0.0
        asum = 0.0
        ee = 0.0
        er = 0.0
        dot = 0.0
        for q in range(qlo, qhi + 1):
            xr, xi = real_dft_bin(zr, zi, tw, q)
            qi = q - qlo
            cr[qi] = xr
            ci[qi] = xi
            p2 = xr * xr + xi * xi
            mag = math.sqrt(p2)
            asum += mag
            if mag > amax:
                amax = mag
            ee += p2
            br = hst[HS_C + qi]
            bi = hst[HS_C + nq + qi]
            er += br * br + bi * bi
            dot += br * xr + bi * xi
        rho = amax / (asum / nq) if asum > FLAT_C * nq else 0.0  # a flat spectrum (silence) has no comb
        sigma = dot / math.sqrt(ee * er) if ee * er > 1e-60 else 0.0
        for qi in range(nq):
            hst[HS_C + qi] = a_ref * hst[HS_C + qi] + (1.0 - a_ref) * cr[qi]
            hst[HS_C + nq + qi] = a_ref * hst[HS_C + nq + qi] + (1.0 - a_ref) * ci[qi]
        z1 = (rho - rho0) / RHO_W
        z2 = (sig0 - sigma) / SIGMA_W
        z1 = min(max(z1, -50.0), 50.0)
        z2 = min(max(z2, -50.0), 50.0)
        v = 1.0 / (1.0 + math.exp(-z1)) / (1.0 + math.exp(-z2))
        H = a_h * hst[HS_H] + (1.0 - a_h) * v
        hst[HS_H] = H
        hst[HS_SEEN] += 1.0
        g = H / full if full > 0.0 else 1.0
        if g > 1.0:
            g = 1.0
        zs = min(max((snr - snr0) / SNR_W_DB, -50.0), 50.0)
        g = 1.0 - (1.0 - g) / (1.0 + math.exp(-zs))  # the gate acts where harmonics would show
        scores[j] *= g
        if keep:
            feats[j, 0] = rho
            feats[j, 1] = sigma
            feats[j, 2] = v
            feats[j, 3] = g
