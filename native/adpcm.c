/*
 * IMA/DVI ADPCM (4 bits per sample) with the KiwiSDR SND packing, in plain C99.
 *
 * Written from the prose of shared/kiwisdr-protocol.md section 3.1 (the same description
 * streamkit/protocols/adpcm.py follows); no code copied from anywhere.
 *
 *   * State: int32_t state[2] = {index, prev}; index is the step-table index (0..88), prev the
 *     last reconstructed sample (int16 range). Both start at 0 and are updated in place, so a
 *     stream decoded in pieces gives exactly the samples of decoding it at once (section 3.2: the
 *     Kiwi carries the state across SND frames for the whole connection).
 *   * Packing: two samples per byte, the EARLIER sample in the LOW nibble.
 *   * Decoding a 4-bit code c with step = STEP[index]:
 *         diff = step>>3 (+ step>>2 if c&1) (+ step>>1 if c&2) (+ step if c&4); negate if c&8;
 *         prev = clamp(prev + diff, -32768, 32767); index = clamp(index + ADJ[c&7], 0, 88).
 *   * Encoding x: d = x - prev (code |= 8 and d = -d when negative); then code |= 4 if d >= step
 *     (d -= step), code |= 2 if d >= step>>1 (d -= step>>1), code |= 1 if d >= step>>2; the state
 *     is then updated by DECODING the code just made, so the encoder tracks a decoder exactly.
 *
 * Loaded through ctypes by streamkit/native.py (no Python C-API here). The functions validate
 * nothing but clamp an out-of-range incoming state into range, so that a bad state can never
 * index outside the step table.
 */

#include <stddef.h>
#include <stdint.h>

#if defined(_WIN32)
#define SK_EXPORT __declspec(dllexport)
#elif defined(__GNUC__)
#define SK_EXPORT __attribute__((visibility("default")))
#else
#define SK_EXPORT
#endif

#define SK_INDEX_MAX 88

static const int32_t sk_step[SK_INDEX_MAX + 1] = {
    7,     8,     9,     10,    11,    12,    13,    14,    16,    17,    19,    21,    23,
    25,    28,    31,    34,    37,    41,    45,    50,    55,    60,    66,    73,    80,
    88,    97,    107,   118,   130,   143,   157,   173,   190,   209,   230,   253,   279,
    307,   337,   371,   408,   449,   494,   544,   598,   658,   724,   796,   876,   963,
    1060,  1166,  1282,  1411,  1552,  1707,  1878,  2066,  2272,  2499,  2749,  3024,  3327,
    3660,  4026,  4428,  4871,  5358,  5894,  6484,  7132,  7845,  8630,  9493,  10442, 11487,
    12635, 13899, 15289, 16818, 18500, 20350, 22385, 24623, 27086, 29794, 32767};

/* index adjustment for the magnitude bits (code & 7); the sign bit does not matter */
static const int32_t sk_adjust[8] = {-1, -1, -1, -1, 2, 4, 6, 8};

static inline int32_t sk_clamp_index(int32_t i)
{
    return i < 0 ? 0 : (i > SK_INDEX_MAX ? SK_INDEX_MAX : i);
}

static inline int32_t sk_clamp16(int32_t v)
{
    return v < -32768 ? -32768 : (v > 32767 ? 32767 : v);
}

/*
 * Decoding is table-driven: for every (index, code) pair, the signed difference the code adds to
 * prev and the next index are precomputed from the rules above (sk_build_tables), so a sample
 * costs two loads, an add and a clamp. The tables are keyed by k = index * 16 + code, and
 * sk_next holds the next index already multiplied by 16.
 */
static int32_t sk_diff[(SK_INDEX_MAX + 1) * 16];
static uint16_t sk_next[(SK_INDEX_MAX + 1) * 16];
static volatile int sk_tables_ready = 0;

static void sk_build_tables(void)
{
    int32_t index;
    uint32_t code;
    for (index = 0; index <= SK_INDEX_MAX; index++) {
        const int32_t step = sk_step[index];
        for (code = 0; code < 16u; code++) {
            int32_t diff = step >> 3;
            if (code & 1u)
                diff += step >> 2;
            if (code & 2u)
                diff += step >> 1;
            if (code & 4u)
                diff += step;
            if (code & 8u)
                diff = -diff;
            sk_diff[index * 16 + (int32_t)code] = diff;
            sk_next[index * 16 + (int32_t)code] = (uint16_t)(sk_clamp_index(index + sk_adjust[code & 7u]) * 16);
        }
    }
    sk_tables_ready = 1;
}

/*
 * Build the tables now. streamkit/native.py calls this once when it loads the library, before
 * any decode, so concurrent first calls (ctypes releases the GIL) never race on the build. The
 * kernels also build them on first use for other callers; the values written are always the
 * same.
 */
SK_EXPORT void sk_adpcm_init(void)
{
    if (!sk_tables_ready)
        sk_build_tables();
}

/* Quantise one sample against (k = index * 16, prev), update them, return the 4-bit code. */
static inline uint32_t sk_quantise(int32_t x, uint32_t *k, int32_t *prev)
{
    const int32_t step = sk_step[*k >> 4];
    int32_t d = x - *prev;
    uint32_t code = 0;
    uint32_t j;
    if (d < 0) {
        code = 8u;
        d = -d;
    }
    if (d >= step) {
        code |= 4u;
        d -= step;
    }
    if (d >= (step >> 1)) {
        code |= 2u;
        d -= step >> 1;
    }
    if (d >= (step >> 2))
        code |= 1u;
    /* update the state by decoding the code just made */
    j = *k | code;
    *prev = sk_clamp16(*prev + sk_diff[j]);
    *k = sk_next[j];
    return code;
}

/*
 * Decode nbytes ADPCM bytes into 2 * nbytes int16 samples (out must hold them).
 * state = {index, prev}: read at entry, written back at exit.
 */
SK_EXPORT void sk_adpcm_decode(const uint8_t *in, size_t nbytes, int16_t *out, int32_t *state)
{
    uint32_t k = (uint32_t)sk_clamp_index(state[0]) * 16u;
    int32_t prev = sk_clamp16(state[1]);
    size_t i;
    if (!sk_tables_ready)
        sk_build_tables();
    for (i = 0; i < nbytes; i++) {
        const uint32_t b = in[i];
        uint32_t j = k | (b & 0x0Fu); /* earlier sample: low nibble */
        prev = sk_clamp16(prev + sk_diff[j]);
        k = sk_next[j];
        out[2 * i] = (int16_t)prev;
        j = k | (b >> 4);
        prev = sk_clamp16(prev + sk_diff[j]);
        k = sk_next[j];
        out[2 * i + 1] = (int16_t)prev;
    }
    state[0] = (int32_t)(k >> 4);
    state[1] = prev;
}

/*
 * Encode n int16 samples into n / 2 ADPCM bytes (out must hold them); the earlier sample of
 * each pair goes in the low nibble. An odd trailing sample is ignored (the Python wrapper
 * rejects odd lengths). state = {index, prev}: read at entry, written back at exit.
 */
SK_EXPORT void sk_adpcm_encode(const int16_t *in, size_t n, uint8_t *out, int32_t *state)
{
    uint32_t k = (uint32_t)sk_clamp_index(state[0]) * 16u;
    int32_t prev = sk_clamp16(state[1]);
    size_t i;
    const size_t nbytes = n / 2;
    if (!sk_tables_ready)
        sk_build_tables();
    for (i = 0; i < nbytes; i++) {
        const uint32_t lo = sk_quantise(in[2 * i], &k, &prev);
        const uint32_t hi = sk_quantise(in[2 * i + 1], &k, &prev);
        out[i] = (uint8_t)(lo | (hi << 4));
    }
    state[0] = (int32_t)(k >> 4);
    state[1] = prev;
}

/* ABI version of this library, checked by streamkit/native.py. */
SK_EXPORT int sk_native_abi_version(void)
{
    return 1;
}
