/*
 * The statistical SAD's per-frame kernel (HF paper Fig. 5) in plain C99: the same algorithm, the
 * same parameter vectors and the same caller-owned state arrays as the numba kernels of
 * streamkit/dsp/kernels/minstat.py (stat_sad_batch, minstat_frame), so that state can move
 * between the two backends in the middle of a stream.
 *
 * Per frame of a periodogram y2[j][0..K-1] (float64, finite, >= 0):
 *
 *   1. P = y2 + floor;
 *   2. S Wiener stages: sigma = minimum statistics (Martin 2001, VOICEBOX estnoisem, constants in
 *      ms_par, see minstat.py) of P; G^2 = max((1 - gamma_s sigma / P)^2, G_min^2) (G^2 = G_min^2
 *      when 1 - gamma_s sigma / P <= 0); P <- G^2 P;
 *   3. highpass weight P <- hp_w P; 4. 1st-order LPC a1 = r1 / r0, smoothed;
 *   5. band energies 10 log10(a1bar^2 sum_b P + eps), smoothed; 6. noise / speech level trackers;
 *   7. adaptive threshold, sigmoid band scores, the need-th largest is the frame score.
 *
 * Memory layout (all C-contiguous, row-major, float64 unless said otherwise):
 *   y2 (k, K); gammas (S); hp_w, lpc_w, lpc_c (K); bands (B, 2) int64 [lo, hi) bin ranges;
 *   cfg (SK_N_CFG); ms_vec (S, 8, K); ms_buf (S, U, K); ms_scal (S, 4); ms_par (SK_N_PAR);
 *   fst (2 + 3 B); scores (k).
 *
 * Not bit-exact with numba: the numba kernels are compiled with LLVM fast-math flags (contract,
 * reassoc, arcp), so LLVM may vectorise the bin sums in another order, fuse multiply-adds and
 * replace divisions by reciprocal multiplications; this file is compiled without them. The two
 * agree to rounding (about 1e-15 relative per frame); the recursions carry such differences
 * forward without amplifying them much (see tests/test_stat_sad_native.py for the tolerance).
 *
 * min/max follow Python's min()/max() (the first argument wins unless the second is strictly
 * smaller/larger), as in the numba source.
 *
 * Loaded through ctypes by streamkit/native.py; no Python C-API. Returns 0, or a negative code
 * for shapes/parameters that do not fit (nothing is written then).
 */

#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#if defined(_WIN32)
#define SK_EXPORT __declspec(dllexport)
#elif defined(__GNUC__)
#define SK_EXPORT __attribute__((visibility("default")))
#else
#define SK_EXPORT
#endif

/* version of this file's exported signatures (streamkit.native.STAT_SAD_ABI_VERSION) */
#define SK_STAT_SAD_ABI 2

/* indices into ms_par (minstat.py: _AMAX ...) */
enum { MP_AMAX, MP_ACA, MP_AMINH, MP_SNREXP, MP_BMAX, MP_QIMAX, MP_QIMIN, MP_AV, MP_ND, MP_NV, MP_MD, MP_MV, MP_NU,
       MP_NSM = 13, MP_QITH = 17, SK_N_PAR = 21 };
/* rows of one tracker's vec (8, K) */
enum { V_P, V_X, V_PB, V_PB2, V_PMINU, V_ACTMIN, V_ACTMINSUB, V_LMIN };
/* indices into cfg (minstat.py: C_GMIN2 ...) */
enum { C_GMIN2, C_FLOOR, C_EPS, C_A_LPC, C_A_E, C_A_ND, C_RISE, C_FALL, C_KAPPA, C_DMIN, C_SCALE, C_NEED, C_WARM, SK_N_CFG };
/* feature state fst */
enum { F_START, F_A1, F_BANDS };

SK_EXPORT int sk_stat_sad_abi_version(void) { return SK_STAT_SAD_ABI; }

/* One frame of Martin's recursion on yft (K), state in place (minstat.py: minstat_frame). */
static void minstat_frame(const double *yft, int64_t K, double *vec, double *buf, double *scal, const double *par,
                          double *qeqi, unsigned char *kmod)
{
    double *p = vec + V_P * K, *x = vec + V_X * K, *pb = vec + V_PB * K, *pb2 = vec + V_PB2 * K;
    double *pminu = vec + V_PMINU * K, *actmin = vec + V_ACTMIN * K, *actminsub = vec + V_ACTMINSUB * K;
    double *lmf = vec + V_LMIN * K;
    const int64_t nu = (int64_t)par[MP_NU];
    const double nv = par[MP_NV];
    const double t = scal[3] + 1.0;
    int64_t k, u;
    scal[3] = t;
    if (t == 1.0) { /* initialise from the first frame, then process it like any other */
        for (k = 0; k < K; k++) {
            double y = yft[k];
            p[k] = y;
            x[k] = y;
            pb[k] = y;
            pb2[k] = y * y;
            pminu[k] = y;
            actmin[k] = INFINITY;
            actminsub[k] = INFINITY;
            lmf[k] = 0.0;
        }
        for (k = 0; k < nu * K; k++) buf[k] = INFINITY;
        scal[0] = 1.0;
        scal[1] = nv;
        scal[2] = 0.0;
    }
    double sp = 0.0, sy = 0.0, sx = 0.0;
    for (k = 0; k < K; k++) {
        sp += p[k];
        sy += yft[k];
        sx += x[k];
    }
    /* (9), (10): correction factor */
    const double r = sp / sy - 1.0;
    const double acb = 1.0 / (1.0 + r * r);
    const double aca = par[MP_ACA];
    const double ac = aca * scal[0] + (1.0 - aca) * (aca > acb ? aca : acb);
    scal[0] = ac;
    /* (11), (12): optimal smoothing factor with its lower limit */
    const double snr = pow(sp / sx, par[MP_SNREXP]);
    const double lower = snr < par[MP_AMINH] ? snr : par[MP_AMINH];
    const double amax = par[MP_AMAX], bmax = par[MP_BMAX], qimax = par[MP_QIMAX];
    const double qimin = par[MP_QIMIN] / t;
    double qsum = 0.0;
    for (k = 0; k < K; k++) {
        const double q = p[k] / x[k] - 1.0;
        double ah = amax * ac / (1.0 + q * q);
        if (ah < lower) ah = lower;
        const double pk = ah * p[k] + (1.0 - ah) * yft[k];
        p[k] = pk;
        const double a2 = ah * ah;
        const double b = bmax < a2 ? bmax : a2;
        pb[k] = b * pb[k] + (1.0 - b) * pk;
        pb2[k] = b * pb2[k] + (1.0 - b) * pk * pk;
        double qi = (pb2[k] - pb[k] * pb[k]) / (2.0 * x[k] * x[k]);
        if (qi > qimax) qi = qimax;
        if (qi < qimin) qi = qimin;
        qeqi[k] = qi;
        qsum += qi;
    }
    const double qiav = qsum / (double)K;
    const double bc = 1.0 + par[MP_AV] * sqrt(qiav);
    const double nd = par[MP_ND], md = par[MP_MD], mv = par[MP_MV];
    for (k = 0; k < K; k++) {
        const double iq = 1.0 / qeqi[k];
        const double bmind = 1.0 + 2.0 * (nd - 1.0) * (1.0 - md) / (iq - 2.0 * md);
        const double bminv = 1.0 + 2.0 * (nv - 1.0) * (1.0 - mv) / (iq - 2.0 * mv);
        const double v = bc * p[k] * bmind;
        const unsigned char km = v < actmin[k];
        kmod[k] = km;
        if (km) {
            actmin[k] = v;
            actminsub[k] = bc * p[k] * bminv;
        }
    }
    double subwc = scal[1];
    if (subwc > 1.0 && subwc < nv) { /* inside a sub-window: allow a local minimum */
        for (k = 0; k < K; k++) {
            if (kmod[k]) lmf[k] = 1.0;
            if (actminsub[k] < pminu[k]) pminu[k] = actminsub[k];
            x[k] = pminu[k];
        }
    } else if (subwc >= nv) { /* end of a sub-window: buffer switch */
        int64_t ib = ((int64_t)scal[2] + 1) % nu;
        scal[2] = (double)ib;
        double nsm = par[MP_NSM + 3];
        for (int i = 0; i < 4; i++) {
            if (qiav < par[MP_QITH + i]) {
                nsm = par[MP_NSM + i];
                break;
            }
        }
        for (k = 0; k < K; k++) {
            buf[ib * K + k] = actmin[k];
            double m = buf[k];
            for (u = 1; u < nu; u++)
                if (buf[u * K + k] < m) m = buf[u * K + k];
            pminu[k] = m;
            if (lmf[k] != 0.0 && !kmod[k] && actminsub[k] < nsm * m && actminsub[k] > m) {
                pminu[k] = actminsub[k];
                for (u = 0; u < nu; u++) buf[u * K + k] = actminsub[k];
            }
            lmf[k] = 0.0;
            actmin[k] = INFINITY;
        }
        subwc = 0.0;
    }
    scal[1] = subwc + 1.0;
}

/*
 * Soft speech scores of k frames (minstat.py: stat_sad_batch). U is the number of sub-windows
 * (ms_buf's middle dimension); it must equal ms_par[MP_NU].
 */
SK_EXPORT int sk_stat_sad_batch(const double *y2, int64_t k, int64_t K, const double *gammas, int64_t S,
                                const double *hp_w, const double *lpc_w, const double *lpc_c, const int64_t *bands,
                                int64_t B, const double *cfg, double *ms_vec, double *ms_buf, int64_t U,
                                double *ms_scal, const double *ms_par, double *fst, double *scores)
{
    if (k < 0 || K < 1 || S < 1 || B < 1 || U < 1 || (int64_t)ms_par[MP_NU] != U) return -1;
    const int need = (int)cfg[C_NEED];
    if (need < 1 || need > B) return -2;
    for (int64_t b = 0; b < B; b++)
        if (bands[2 * b] < 0 || bands[2 * b + 1] > K || bands[2 * b] >= bands[2 * b + 1]) return -3;
    if (k == 0) return 0;
    double *P = (double *)malloc((size_t)(2 * K + B) * sizeof(double));
    unsigned char *kmod = (unsigned char *)malloc((size_t)K);
    if (!P || !kmod) {
        free(P);
        free(kmod);
        return -4;
    }
    double *qeqi = P + K, *bs = P + 2 * K;
    const double gmin2 = cfg[C_GMIN2], floor_ = cfg[C_FLOOR], eps = cfg[C_EPS], a_lpc = cfg[C_A_LPC];
    const double a_e = cfg[C_A_E], a_nd = cfg[C_A_ND], rise = cfg[C_RISE], fall = cfg[C_FALL];
    const double kappa = cfg[C_KAPPA], dmin = cfg[C_DMIN], scale = cfg[C_SCALE];
    for (int64_t j = 0; j < k; j++) {
        const double *yj = y2 + j * K;
        int64_t i;
        for (i = 0; i < K; i++) P[i] = yj[i] + floor_;
        for (int64_t s = 0; s < S; s++) {
            double *vec = ms_vec + s * 8 * K;
            minstat_frame(P, K, vec, ms_buf + s * U * K, ms_scal + s * 4, ms_par, qeqi, kmod);
            const double g = gammas[s];
            const double *xs = vec + V_X * K;
            for (i = 0; i < K; i++) {
                const double w = 1.0 - g * xs[i] / P[i];
                double w2 = w > 0.0 ? w * w : 0.0;
                if (w2 < gmin2 || w <= 0.0) w2 = gmin2;
                P[i] = w2 * P[i];
            }
        }
        double r0 = 0.0, r1 = 0.0;
        for (i = 0; i < K; i++) {
            const double ph = hp_w[i] * P[i];
            P[i] = ph;
            r0 += ph * lpc_w[i];
            r1 += ph * lpc_c[i];
        }
        const double a1 = r0 > 0.0 ? r1 / r0 : 0.0;
        const double seen = fst[F_START];
        const int first = seen == 0.0;
        const int warm = seen < cfg[C_WARM];
        if (first)
            fst[F_A1] = a1;
        else
            fst[F_A1] = a_lpc * fst[F_A1] + (1.0 - a_lpc) * a1;
        const double wl = fst[F_A1] * fst[F_A1];
        for (int64_t b = 0; b < B; b++) {
            double e = 0.0;
            for (i = bands[2 * b]; i < bands[2 * b + 1]; i++) e += P[i];
            e = 10.0 * log10(wl * e + eps);
            double *o = fst + F_BANDS + 3 * b;
            double eb, nb, sb;
            if (first) {
                eb = nb = sb = e;
            } else if (warm) { /* start-up: both level trackers follow the smoothed energy */
                eb = a_e * o[0] + (1.0 - a_e) * e;
                nb = sb = eb;
            } else {
                eb = a_e * o[0] + (1.0 - a_e) * e;
                nb = o[1];
                if (eb < nb) {
                    nb = a_nd * nb + (1.0 - a_nd) * eb;
                } else {
                    const double up = nb + rise;
                    nb = eb < up ? eb : up;
                }
                sb = o[2];
                if (eb > sb) {
                    sb = eb;
                } else {
                    const double dn = sb - fall;
                    sb = nb > dn ? nb : dn;
                }
            }
            o[0] = eb;
            o[1] = nb;
            o[2] = sb;
            const double marg = kappa * (sb - nb);
            const double theta = nb + (marg > dmin ? marg : dmin);
            double m = (eb - theta) / scale;
            if (m > 50.0)
                m = 50.0;
            else if (m < -50.0)
                m = -50.0;
            bs[b] = 1.0 / (1.0 + exp(-m));
        }
        fst[F_START] = seen + 1.0;
        /* need-th largest band score: partial selection by repeated max */
        for (int r = 0; r < need; r++) {
            int64_t im = r;
            for (int64_t b = r + 1; b < B; b++)
                if (bs[b] > bs[im]) im = b;
            const double tmp = bs[r];
            bs[r] = bs[im];
            bs[im] = tmp;
        }
        scores[j] = bs[need - 1];
    }
    free(P);
    free(kmod);
    return 0;
}
