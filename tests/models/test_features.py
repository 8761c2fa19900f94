"""Log-mel features: filterbank definition, frame/stack arithmetic, chunking invariance."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from streamkit.models import features as F

torch.set_num_threads(1)


def signal(n: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    t = np.arange(n) / F.RATE
    return (0.3 * np.sin(2 * np.pi * 440 * t) + 0.05 * rng.standard_normal(n)).astype(np.float32)


def test_filterbank_htk_triangles():
    fb = F.mel_filterbank()
    assert fb.shape == (F.N_FFT // 2 + 1, F.N_MELS)
    assert np.all(fb >= 0) and np.all(fb.max(axis=0) > 0.5)  # no empty filter
    centres = F.mel_to_hz(np.linspace(F.hz_to_mel(F.F_MIN), F.hz_to_mel(F.F_MAX), F.N_MELS + 2))[1:-1]
    freqs = np.arange(fb.shape[0]) * F.RATE / F.N_FFT
    assert np.all(np.diff(centres) > 0)
    # each filter peaks at the bin nearest its centre, and is zero outside its two neighbours' centres
    assert np.all(np.abs(freqs[fb.argmax(axis=0)] - centres) <= F.RATE / F.N_FFT)
    assert abs(F.hz_to_mel(1000.0) - 1000.0) < 0.1  # HTK: 1000 Hz is ~1000 mel
    assert np.allclose(F.mel_to_hz(F.hz_to_mel([20.0, 4000.0])), [20.0, 4000.0])


def test_frame_and_stack_counts_and_layout():
    assert F.n_frames(199) == 0 and F.n_frames(200) == 1 and F.n_frames(279) == 1 and F.n_frames(280) == 2
    assert F.n_stacked(7) == 0 and F.n_stacked(8) == 1 and F.n_stacked(10) == 1 and F.n_stacked(11) == 2
    x = signal(8000)
    m = F.log_mel(x)
    assert m.shape == (F.n_frames(8000), 80) and m.dtype == torch.float32 and torch.isfinite(m).all()
    s = F.features(x)
    assert s.shape == (F.n_stacked(m.shape[0]), 640)
    # stacked vector k = frames 3k .. 3k+7, oldest first
    for k in (0, 5, s.shape[0] - 1):
        assert torch.equal(s[k], m[3 * k : 3 * k + 8].reshape(-1))
    assert F.features(np.zeros(100, np.float32)).shape == (0, 640)
    assert torch.allclose(F.log_mel(np.zeros(400)), torch.full((3, 80), np.log(F.LOG_FLOOR), dtype=torch.float64))


def test_log_mel_matches_numpy_reference():
    x = signal(1000, seed=3).astype(np.float64)
    win = 0.5 - 0.5 * np.cos(2 * np.pi * np.arange(F.WIN) / F.WIN)  # periodic Hann
    frames = np.stack([x[j * F.HOP : j * F.HOP + F.WIN] * win for j in range(F.n_frames(len(x)))])
    power = np.abs(np.fft.rfft(frames, n=F.N_FFT)) ** 2
    ref = np.log(np.maximum(power @ F.mel_filterbank(), F.LOG_FLOOR))
    assert np.allclose(F.log_mel(torch.from_numpy(x)).numpy(), ref, atol=1e-9)
    # a tone lands in the filter around its frequency
    tone = np.sin(2 * np.pi * 1000 * np.arange(2000) / F.RATE)
    centres = F.mel_to_hz(np.linspace(F.hz_to_mel(F.F_MIN), F.hz_to_mel(F.F_MAX), F.N_MELS + 2))[1:-1]
    assert abs(centres[int(F.log_mel(tone).mean(0).argmax())] - 1000) < 60


@pytest.mark.parametrize("chunk", [1, 37, 80, 1000, None])
def test_stream_chunking_invariance(chunk):
    x = signal(4321, seed=1)
    ref = F.features(x)
    st = F.LogMelStream()
    step = chunk or len(x)
    outs = [st.push(x[i : i + step]) for i in range(0, len(x), step)]
    got = torch.cat(outs)
    assert got.shape == ref.shape
    assert torch.allclose(got, ref, rtol=0, atol=1e-5), (got - ref).abs().max()
    assert st.stacked_out == ref.shape[0] and st.samples_in == len(x)
    assert st.end_sample() == (3 * (ref.shape[0] - 1) + 7) * F.HOP + F.WIN <= len(x)
    st.reset()
    assert torch.allclose(st.push(x), ref, atol=1e-5)


def test_stream_rejects_stereo():
    with pytest.raises(ValueError, match="mono"):
        F.LogMelStream().push(np.zeros((10, 2), np.float32))
