"""The C statistical SAD kernel (native/stat_sad.c via streamkit.native) against the numba kernel.

Not bit-exact: the numba kernels are compiled with LLVM fast-math flags (contract, reassoc, arcp:
vectorised bin sums in another order, fused multiply-adds, reciprocals), the C file without
them, so the two differ by float64 rounding (~1e-16 relative per operation). Through the
recursions (minimum statistics, level trackers) these differences stay tiny: the tests ask for
float64 scores within ``SCORE_ATOL = 1e-9`` on these 20 s signals (observed: about 1e-15) and
for identical frame decisions and segments at the default threshold. This is not a bound for any
signal: when a comparison inside the minimum tracker (``v < actmin``, the local-minimum test)
meets a near-tie, the two backends can take different branches and the scores then differ by up
to ~5e-6 for a few frames (seen on 300 s of io.demo_signal, 312 of 9374 frames above 1e-9,
decisions still identical; benchmarks/stat_sad_native.py checks that case at atol 1e-4).

These tests FAIL (they do not skip) when the library is not built, as tests/test_native.py does:
CI builds it with ``pip install -e .[test]``.
"""

from __future__ import annotations

import numpy as np
import pytest

from streamkit import native
from streamkit.core.errors import ConfigError
from streamkit.data.hf_channel import ChannelParams, simulate
from streamkit.dsp import stat_sad as ss
from streamkit.dsp.kernels import minstat
from streamkit.dsp.stat_sad import DECISION_DEFAULTS, StatSAD, harmonic_features, stat_sad_scores
from streamkit.testing import run_block

RATE = 8000
SCORE_ATOL = 1e-9  # float64 kernel scores (observed max difference ~1e-15)
STATE_RTOL = 1e-9  # tracker states, relative


def lib() -> None:
    if not native.stat_sad_available():
        pytest.fail(
            f"the native stat SAD kernel is not built ({native.load_error() or native._sad_error}). "
            "Build it with `pip install -e .` (needs a C compiler).",
            pytrace=False,
        )


# -- signals ---------------------------------------------------------------------------------------


def _speech(n: int, rng: np.random.Generator) -> np.ndarray:
    """Harmonic bursts (pitch glide, syllable AM) separated by pauses, about 40 % active."""
    t = np.arange(n) / RATE
    y = np.zeros(n)
    pos = int(1.5 * RATE)
    while pos < n - RATE:
        L = int(rng.uniform(0.8, 2.5) * RATE)
        tt = t[:L]
        f0 = rng.uniform(100, 220) * (1 + 0.1 * np.sin(2 * np.pi * 0.7 * tt))
        ph = 2 * np.pi * np.cumsum(f0) / RATE
        b = sum(np.sin(h * ph) / h for h in range(1, 25))
        am = 0.5 * (1 - np.cos(2 * np.pi * rng.uniform(3, 6) * tt))
        seg = (b * am)[: max(0, min(L, n - pos))]
        y[pos : pos + seg.shape[0]] = seg
        pos += L + int(rng.uniform(1.0, 3.0) * RATE)
    return 0.3 * y / max(np.max(np.abs(y)), 1e-9)


def signals() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(4)
    n = 20 * RATE
    white = (0.05 * rng.standard_normal(n)).astype(np.float32)
    clean = _speech(n, rng)
    hf = simulate(clean, ChannelParams.random(np.random.default_rng(11))).received
    noisy = (clean + 0.02 * rng.standard_normal(n)).astype(np.float32)
    t = np.arange(n) / RATE
    square = np.sign(np.sin(2 * np.pi * 300 * t)).astype(np.float32)
    clipped = np.clip(noisy * 50.0, -1.0, 1.0).astype(np.float32)
    silence = np.zeros(n, np.float32)
    return {"white": white, "hf_channel": hf.astype(np.float32), "speech+noise": noisy, "square": square, "clipped": clipped, "silence": silence}


SIGNALS = signals()


def periodograms(x: np.ndarray) -> tuple[np.ndarray, ss._Analyzer]:
    an = ss._Analyzer(ss._check_analysis({}))
    m = (x.shape[0] - ss.WIN) // ss.HOP + 1
    xf = x.astype(np.float64)
    fr = np.lib.stride_tricks.as_strided(xf, shape=(m, ss.WIN), strides=(ss.HOP * 8, 8), writeable=False)
    X = np.fft.rfft(fr * an.win, n=ss.N_FFT, axis=1)[:, : an.K]
    return np.ascontiguousarray((X.real**2 + X.imag**2) * an.norm), an


def run_kernel(fn, y2: np.ndarray, an: ss._Analyzer, state: dict | None = None) -> tuple[np.ndarray, dict]:
    if state is None:
        an.reset()
        state = {"ms_vec": an.ms_vec, "ms_buf": an.ms_buf, "ms_scal": an.ms_scal, "fst": an.fst}
    sc = np.empty(y2.shape[0])
    fn(y2, an.gammas, an.hp_w, an.lpc_w, an.lpc_c, an.bands, an.cfg, state["ms_vec"], state["ms_buf"], state["ms_scal"], an.ms_par, state["fst"], sc)
    return sc, state


def copy_state(st: dict) -> dict:
    return {k: v.copy() for k, v in st.items()}


# -- the kernel -----------------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(SIGNALS))
def test_kernel_scores_and_state_match(name):
    lib()
    y2, an = periodograms(SIGNALS[name])
    s_nb, st_nb = run_kernel(minstat.stat_sad_batch, y2, an)
    st_nb = copy_state(st_nb)
    s_c, st_c = run_kernel(native.stat_sad_batch, y2, an)
    assert np.all(np.isfinite(s_c))
    np.testing.assert_allclose(s_c, s_nb, rtol=0, atol=SCORE_ATOL)
    for k in st_nb:
        a, b = st_c[k], st_nb[k]
        fin = np.isfinite(b)
        np.testing.assert_array_equal(np.isfinite(a), fin, err_msg=k)
        np.testing.assert_allclose(a[fin], b[fin], rtol=STATE_RTOL, atol=1e-300, err_msg=k)


def test_state_is_interchangeable():
    """numba for the first part, C for the rest (and the reverse) == numba throughout."""
    lib()
    y2, an = periodograms(SIGNALS["hf_channel"])
    ref, _ = run_kernel(minstat.stat_sad_batch, y2, an)
    h = y2.shape[0] // 3
    for first, second in ((minstat.stat_sad_batch, native.stat_sad_batch), (native.stat_sad_batch, minstat.stat_sad_batch)):
        a, st = run_kernel(first, y2[:h], an)
        b, _ = run_kernel(second, np.ascontiguousarray(y2[h:]), an, st)
        np.testing.assert_allclose(np.concatenate([a, b]), ref, rtol=0, atol=SCORE_ATOL)


def test_c_kernel_chunking_is_bit_exact():
    lib()
    y2, an = periodograms(SIGNALS["speech+noise"])
    ref, _ = run_kernel(native.stat_sad_batch, y2, an)
    parts, st = [], None
    for a in range(0, y2.shape[0], 7):
        s, st = run_kernel(native.stat_sad_batch, np.ascontiguousarray(y2[a : a + 7]), an, st)
        parts.append(s)
    np.testing.assert_array_equal(np.concatenate(parts), ref)


def test_c_kernel_rejects_bad_arrays():
    lib()
    y2, an = periodograms(SIGNALS["white"][: 2 * RATE])
    an.reset()
    sc = np.empty(y2.shape[0])
    with pytest.raises(TypeError, match="ms_vec"):
        native.stat_sad_batch(y2, an.gammas, an.hp_w, an.lpc_w, an.lpc_c, an.bands, an.cfg, an.ms_vec[:, :, :-1].copy(), an.ms_buf, an.ms_scal,
                              an.ms_par, an.fst, sc)  # fmt: skip
    with pytest.raises(TypeError, match="y2"):
        native.stat_sad_batch(y2.astype(np.float32), an.gammas, an.hp_w, an.lpc_w, an.lpc_c, an.bands, an.cfg, an.ms_vec, an.ms_buf, an.ms_scal,
                              an.ms_par, an.fst, sc)  # fmt: skip
    bad = an.cfg.copy()
    bad[minstat.C_NEED] = 9
    with pytest.raises(ValueError, match="bands_needed"):
        native.stat_sad_batch(y2, an.gammas, an.hp_w, an.lpc_w, an.lpc_c, an.bands, bad, an.ms_vec, an.ms_buf, an.ms_scal, an.ms_par, an.fst, sc)


# -- the public API ---------------------------------------------------------------------------------


@pytest.mark.parametrize("gate", [False, True], ids=["paper", "harmonic_gate"])
@pytest.mark.parametrize("name", sorted(SIGNALS))
def test_offline_backends_same_decisions(name, gate):
    lib()
    x = SIGNALS[name]
    s_nb, hop, win = stat_sad_scores(x, harmonic_gate=gate)
    s_c, hop_c, win_c = stat_sad_scores(x, backend="c", harmonic_gate=gate)
    assert (hop, win) == (hop_c, win_c) and s_c.dtype == np.float32
    np.testing.assert_allclose(s_c, s_nb, rtol=0, atol=1e-6)  # float32 output: one ulp at most
    thr = DECISION_DEFAULTS["threshold"]
    np.testing.assert_array_equal(s_c > thr, s_nb > thr)


@pytest.mark.parametrize("gate", [False, True], ids=["paper", "harmonic_gate"])
@pytest.mark.parametrize("name", ["hf_channel", "speech+noise", "clipped"])
def test_block_backends_same_segments(name, gate):
    lib()
    x = SIGNALS[name][:, None]
    r_nb = run_block(StatSAD(harmonic_gate=gate), x, rate=RATE, sizes=800)
    r_c = run_block(StatSAD(backend="c", harmonic_gate=gate), x, rate=RATE, sizes=800)
    np.testing.assert_allclose(r_c.samples, r_nb.samples, rtol=0, atol=1e-6)
    assert [e.span for e in r_c.events_of("vad.segment")] == [e.span for e in r_nb.events_of("vad.segment")]
    assert [(t.offset, t.value.start) for t in r_c.tags] == [(t.offset, t.value.start) for t in r_nb.tags]


@pytest.mark.parametrize("name", sorted(SIGNALS))
def test_harmonic_gate_is_shared_by_both_backends(name):
    """The gate is one numba stage on the shared front end's periodograms: identical on both backends."""
    lib()
    f_nb = harmonic_features(SIGNALS[name])
    f_c = harmonic_features(SIGNALS[name], backend="c")
    assert f_nb.shape[1] == 4 and f_nb.shape[0] > 0
    np.testing.assert_array_equal(f_c, f_nb)


def test_unknown_backend():
    with pytest.raises(ConfigError, match="backend"):
        StatSAD(backend="cuda")
    with pytest.raises(ConfigError, match="backend"):
        stat_sad_scores(np.zeros(RATE, np.float32), backend="fortran")


def test_missing_library_gives_clear_error(monkeypatch):
    monkeypatch.setattr(native, "_sad_error", "_native.so: simulated: not built")
    assert not native.stat_sad_available()
    with pytest.raises(ConfigError, match=r"pip install -e \."):
        StatSAD(backend="c")
    with pytest.raises(ConfigError, match="simulated: not built"):
        stat_sad_scores(np.zeros(RATE, np.float32), backend="c")
    y2, an = periodograms(SIGNALS["white"][:RATE])
    with pytest.raises(native.NativeUnavailableError, match='backend="numba"'):
        run_kernel(native.stat_sad_batch, y2, an)
    StatSAD()  # the numba backend does not need the library
