"""STFT / ISTFT: equal to scipy.signal.stft / istft of the whole signal, for any chunking.

Tolerances: both blocks compute in float64 and round once to complex64 / float32 at the output;
scipy (run here on float64) is the reference. Measured max error relative to the largest
magnitude: ~5e-8 (STFT), ~3e-8 (ISTFT), i.e. the output dtype's rounding; the tests allow 1e-6.
Streaming versus one chunk is bit-exact (per-frame FFTs do not depend on the batch, and the
overlap-add sums each sample's frames in frame order).
"""

from __future__ import annotations

import warnings
from fractions import Fraction
from math import floor

import numpy as np
import pytest
import scipy.signal as ss
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from streamkit.core.block import ErrorPolicy
from streamkit.core.errors import ConfigError
from streamkit.core.graph import Graph
from streamkit.core.runtime import Runner
from streamkit.core.tags import GAP, Gap, GapCause
from streamkit.core.types import StreamSpec
from streamkit.dsp import ISTFT, STFT
from streamkit.io.collect import CollectSink, VectorSource
from streamkit.testing import assert_chunking_invariant, assert_tags_at, run_block

RATE = 16_000
REL = 1e-6  # see the module docstring
rng = np.random.default_rng(0)

# (n_fft, hop, window, center): even/odd frames, 50/75 % overlap, hop > n_fft/2, no overlap
CONFIGS = [
    (256, 128, "hann", True),
    (256, 64, "hann", True),
    (255, 100, "hamming", True),
    (64, 48, "hann", True),
    (64, 64, "boxcar", True),
    (9, 5, ("kaiser", 8.0), True),
    (128, 32, "blackman", False),
    (100, 30, "hann", False),
]


def scipy_stft(x: np.ndarray, n: int, hop: int, window, center: bool) -> np.ndarray:
    """scipy's STFT of (samples, channels) as (frames, channels * n_freq), channel-major."""
    _, _, z = ss.stft(x.T.astype(np.float64), RATE, window=window, nperseg=n, noverlap=n - hop,
                      boundary="zeros" if center else None, padded=center)  # fmt: skip
    return z.transpose(2, 0, 1).reshape(z.shape[2], -1)


def scipy_istft(frames: np.ndarray, n: int, hop: int, window, center: bool, channels: int) -> np.ndarray:
    z = frames.astype(np.complex128).reshape(frames.shape[0], channels, n // 2 + 1).transpose(1, 2, 0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # NOLA warning at the un-padded edges for center=False
        _, x = ss.istft(z, RATE, window=window, nperseg=n, noverlap=n - hop, boundary=center)
    return np.atleast_2d(x).T


def assert_rel_close(got: np.ndarray, ref: np.ndarray, rel: float = REL) -> None:
    assert got.shape == ref.shape
    np.testing.assert_allclose(got, ref, rtol=0, atol=rel * np.abs(ref).max())


def test_instance():
    STFT()
    ISTFT().reset()


@pytest.mark.parametrize(
    "kw",
    [dict(n_fft=1), dict(n_fft=64, hop=0), dict(n_fft=64, hop=65), dict(n_fft=64, hop=8, noverlap=56), dict(n_fft=64, noverlap=64),
     dict(n_fft=64, nperseg=128), dict(window="nope"), dict(scaling="energy"), dict(n_fft=2.5)],
)  # fmt: skip
def test_rejects_bad_config(kw):
    with pytest.raises(ConfigError):
        STFT(**kw)
    with pytest.raises(ConfigError):
        ISTFT(**kw)


def test_rejects_wrong_formats_and_nola():
    with pytest.raises(ConfigError):  # periodic Hann without overlap has zeros: not invertible
        ISTFT(n_fft=64, hop=64, window="hann")
    with pytest.raises(ConfigError):
        run_block(STFT(), np.zeros((1000, 1), np.complex64), rate=RATE)
    with pytest.raises(ConfigError):  # 100 channels is not a multiple of n_freq = 129
        run_block(ISTFT(n_fft=256), np.zeros((10, 100), np.complex64), rate=RATE)
    with pytest.raises(ConfigError):
        run_block(ISTFT(n_fft=256), np.zeros((10, 129), np.float32), rate=RATE)


def test_output_spec():
    out = STFT(n_fft=512, hop=160).negotiate({"in": StreamSpec(12001.188, 2)})["out"]
    assert out == StreamSpec(Fraction(3000297, 250) / 160, 2 * 257, np.dtype(np.complex64))
    back = ISTFT(n_fft=512, hop=160).negotiate({"in": out})["out"]
    assert back == StreamSpec(Fraction(3000297, 250), 2, np.dtype(np.float32))
    assert STFT(nperseg=256).hop == 128 and STFT(n_fft=255).hop == 128  # scipy's noverlap = n // 2


@pytest.mark.parametrize("n,hop,window,center", CONFIGS)
@pytest.mark.parametrize("channels", [1, 2])
def test_stft_matches_scipy(n, hop, window, center, channels):
    x = rng.standard_normal((3_001, channels)).astype(np.float32)
    out = run_block(STFT(n_fft=n, hop=hop, window=window, center=center), x, rate=RATE, sizes="random", mean_size=100)
    assert out.samples.dtype == np.complex64
    assert_rel_close(out.samples, scipy_stft(x, n, hop, window, center))


def test_stft_psd_scaling_matches_scipy():
    x = rng.standard_normal((2_000, 1)).astype(np.float32)
    out = run_block(STFT(n_fft=128, hop=32, scaling="psd"), x, rate=RATE, sizes=333).samples
    _, _, z = ss.stft(x[:, 0].astype(np.float64), RATE, nperseg=128, noverlap=96, scaling="psd")
    assert_rel_close(out, z.T)


@pytest.mark.parametrize("n,hop,window,center", CONFIGS)
def test_istft_matches_scipy(n, hop, window, center):
    # arbitrary frames (not a consistent STFT), so the normalisation and overlap-add are exercised
    ch = 2
    frames = (rng.standard_normal((60, ch * (n // 2 + 1))) + 1j * rng.standard_normal((60, ch * (n // 2 + 1)))).astype(np.complex64)
    out = run_block(ISTFT(n_fft=n, hop=hop, window=window, center=center), frames, rate=Fraction(RATE, hop), sizes="random", mean_size=3)
    assert out.samples.dtype == np.float32
    assert_rel_close(out.samples, scipy_istft(frames, n, hop, window, center, ch))


def test_tone_lands_in_its_bin():
    # spectrum scaling: a sine at a bin centre reads amplitude/2 in that bin, ~0 far from it
    n, hop, k0, amp = 256, 64, 20, 0.5
    t = np.arange(4 * RATE // 8)
    x = (amp * np.sin(2 * np.pi * k0 * t / n)).astype(np.float32)[:, None]
    mag = np.abs(run_block(STFT(n_fft=n, hop=hop), x, rate=RATE).samples[5:-5])
    assert (mag.argmax(axis=1) == k0).all()
    np.testing.assert_allclose(mag[:, k0], amp / 2, rtol=1e-4)
    assert mag[:, k0 + 3 :].max() < 1e-4 * amp


@pytest.mark.parametrize("n,hop,window", [(256, 128, "hann"), (255, 100, "hamming"), (64, 64, "boxcar"), (64, 48, "hann")])
def test_round_trip_reconstructs_input(n, hop, window):
    x = rng.standard_normal((5_003, 2)).astype(np.float32)
    g = Graph("rt")
    src = g.add(VectorSource(samples=x, rate=RATE, sizes="random", mean_size=90, tags=[(1_000, "user:m", 1)]), name="src")
    sink = CollectSink()
    g.chain(src, g.add(STFT(n_fft=n, hop=hop, window=window), name="stft"), g.add(ISTFT(n_fft=n, hop=hop, window=window), name="istft"),
            g.add(sink, name="sink"))  # fmt: skip
    Runner(g, threaded_events=False, stats_interval_s=0, error_policy=ErrorPolicy.RAISE).run()
    y = sink.samples
    assert y.shape[0] >= x.shape[0] and y.shape[0] - x.shape[0] < hop  # scipy's padded tail
    np.testing.assert_allclose(y[: x.shape[0]], x, atol=1e-5)
    np.testing.assert_allclose(y[x.shape[0] :], 0, atol=1e-5)
    # a tag goes to its frame (round(i/hop)) and back to that frame's centre sample
    j = floor(Fraction(1_000 + n // 2, hop) - Fraction(n, 2 * hop) + Fraction(1, 2))
    expect = floor((j + Fraction(n - 2 * (n // 2), 2 * hop)) * hop + Fraction(1, 2))
    assert [t.offset for t in sink.tags if t.key == "user:m"] == [expect]
    assert abs(expect - 1_000) <= hop // 2 + 1


def test_stft_chunking_invariance():  # bit-exact
    x = rng.standard_normal((2_000, 2)).astype(np.float32)
    for n, hop, window, center in [(256, 64, "hann", True), (255, 100, "hamming", True), (100, 30, "hann", False)]:
        assert_chunking_invariant(lambda n=n, hop=hop, w=window, c=center: STFT(n_fft=n, hop=hop, window=w, center=c), x, rate=RATE,
                                  sizes=("all", 1, 7, 160, "random"), tags=[(0, "user:a", 0), (999, "user:b", 1), (1_999, "user:c", 2)])  # fmt: skip


def test_istft_chunking_invariance():  # bit-exact
    for n, hop in [(256, 64), (64, 48), (64, 64)]:
        window = "boxcar" if hop == n else "hann"
        frames = (rng.standard_normal((80, n // 2 + 1)) + 1j * rng.standard_normal((80, n // 2 + 1))).astype(np.complex64)
        assert_chunking_invariant(lambda n=n, hop=hop, w=window: ISTFT(n_fft=n, hop=hop, window=w), frames, rate=Fraction(RATE, hop),
                                  sizes=("all", 1, 7, 160, "random"), tags=[(0, "user:a", 0), (41, "user:b", 1), (79, "user:c", 2)])  # fmt: skip


def test_stft_tags_go_to_the_centred_frame():
    n, hop = 256, 100
    offs = [0, 49, 50, 51, 149, 150, 151, 2_345, 2_999]
    out = run_block(STFT(n_fft=n, hop=hop), np.zeros((3_000, 1), np.float32), rate=RATE, sizes=77, tags=[(i, "user:m", i) for i in offs])
    # even n_fft, centred: frame j is centred on input j*hop, so i -> round_half_up(i / hop)
    assert_tags_at(out, {"user:m": [floor(Fraction(i, hop) + Fraction(1, 2)) for i in offs]})


def test_istft_tags_go_to_the_frame_centre():
    n, hop = 256, 64
    frames = np.zeros((50, n // 2 + 1), np.complex64)
    offs = [0, 1, 17, 48]
    out = run_block(ISTFT(n_fft=n, hop=hop), frames, rate=Fraction(RATE, hop), sizes=3, tags=[(j, "user:m", j) for j in offs])
    assert_tags_at(out, {"user:m": [j * hop for j in offs]})


def test_flush_emits_tail_frames_and_samples():
    # scipy's padded=True adds a partial last frame; boundary=True drops n//2 samples at the end
    n, hop = 256, 96
    for length in (1_000, 1_024, 1_111):
        x = rng.standard_normal((length, 1)).astype(np.float32)
        frames = run_block(STFT(n_fft=n, hop=hop), x, rate=RATE, sizes=length).samples
        ref = scipy_stft(x, n, hop, "hann", True)
        assert frames.shape == ref.shape
        assert_rel_close(frames[-3:], ref[-3:])
        back = run_block(ISTFT(n_fft=n, hop=hop), frames, rate=Fraction(RATE, hop), sizes=frames.shape[0])
        assert back.samples.shape == scipy_istft(frames, n, hop, "hann", True, 1).shape


def test_istft_flush_and_reset_on_block_level():
    from streamkit.core.context import Context

    n, hop = 128, 32
    spec = StreamSpec(Fraction(RATE, hop), n // 2 + 1, np.complex64)
    blk = ISTFT(n_fft=n, hop=hop)
    ctx = Context(blk, "t", {"in": spec}, blk.negotiate({"in": spec}), lambda *a: None)
    blk.start(ctx)
    frames = (rng.standard_normal((20, n // 2 + 1)) + 1j * rng.standard_normal((20, n // 2 + 1))).astype(np.complex64)
    body = blk.work(frames, ctx)
    assert body.shape[0] == 20 * hop - n // 2  # all but the trimmed head is final already
    tail = blk.flush(ctx)
    assert tail is not None and tail.shape[0] == n - hop - n // 2
    assert_rel_close(np.concatenate([body, tail]), scipy_istft(frames, n, hop, "hann", True, 1))
    blk.work(frames[:7], ctx)
    blk.reset(Gap(cause=GapCause.BLOCK_ERROR))
    again = np.concatenate([blk.work(frames, ctx), blk.flush(ctx)])
    np.testing.assert_array_equal(again, np.concatenate([body, tail]))


def test_gap_does_not_break_the_frame_grid():
    # on_gap CONTINUE: the transform is linear and the index contiguous, so frames (and the
    # reconstruction) are as without the gap; the Gap tag moves to its frame
    x = rng.standard_normal((3_000, 1)).astype(np.float32)
    gap = Gap(lost=160, cause=GapCause.SEQ_GAP)
    plain = run_block(STFT(n_fft=256, hop=64), x, rate=RATE, sizes=100)
    out = run_block(STFT(n_fft=256, hop=64), x, rate=RATE, sizes=100, gaps=[(1_500, gap)])
    np.testing.assert_array_equal(out.samples, plain.samples)
    assert_tags_at(out, {GAP: [floor(Fraction(1_500, 64) + Fraction(1, 2))]})
    back = run_block(ISTFT(n_fft=256, hop=64), out.samples, rate=Fraction(RATE, 64), sizes=5, gaps=[(23, gap)])
    np.testing.assert_allclose(back.samples[:3_000], x, atol=1e-5)
    assert_tags_at(back, {GAP: [23 * 64]})


def test_latency():
    assert STFT(n_fft=256, hop=64).algorithmic_latency() == 128
    assert ISTFT(n_fft=256, hop=64).algorithmic_latency() == 2
    assert ISTFT(n_fft=64, hop=64, window="boxcar").algorithmic_latency() == 1


@settings(max_examples=30, deadline=None)
@given(n=st.integers(2, 300), hop_frac=st.floats(0.05, 1.0), length=st.integers(1, 3_000), center=st.booleans(), seed=st.integers(0, 2**16))
def test_stft_istft_match_scipy_for_any_layout(n, hop_frac, length, center, seed):
    hop = max(1, min(n, int(round(n * hop_frac))))
    assume(length >= n)  # scipy shrinks nperseg for shorter inputs (documented difference)
    x = np.random.default_rng(seed).standard_normal((length, 1)).astype(np.float32)
    frames = run_block(STFT(n_fft=n, hop=hop, center=center), x, rate=RATE, sizes="random", mean_size=50, seed=seed).samples
    assert_rel_close(frames, scipy_stft(x, n, hop, "hann", center))
    if ss.check_NOLA("hann", n, n - hop):
        back = run_block(ISTFT(n_fft=n, hop=hop, center=center), frames, rate=Fraction(RATE, hop), sizes="random", mean_size=4, seed=seed)
        assert_rel_close(back.samples, scipy_istft(frames, n, hop, "hann", center, 1))
