"""Chirp markers, their detection, the clock fit and GCC-PHAT (fast unit tests)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.signal import hilbert, resample_poly

from streamkit.dsp.align.clock import fit_clock, interpolate
from streamkit.dsp.align.detect import ScoreBank, SpecGrid, marker_mask, normalized_spectrogram, refine, score_curve
from streamkit.dsp.align.gcc import consistent_median, gcc_phat
from streamkit.dsp.markers import MAX_MARKERS, N_SYMBOLS, gold_codes, marker_code, marker_length, marker_waveform

FS = 8000


def test_gold_family_is_a_preferred_pair() -> None:
    g = gold_codes().astype(int) * 2 - 1
    assert g.shape == (129, 127)
    cc = {int(np.dot(g[0], np.roll(g[1], k))) for k in range(127)}
    assert cc <= {-17, -1, 15}  # three-valued cross-correlation of a preferred pair, degree 7


def test_marker_codes_coincide_on_few_symbols() -> None:
    def symbols(m: int) -> np.ndarray:
        up, start = marker_code(m)
        return up.astype(int) * 8 + start

    worst = 0
    for a in range(12):
        for b in range(12):
            for lag in range(-N_SYMBOLS + 1, N_SYMBOLS):
                if a == b and lag == 0:
                    continue
                x = symbols(a)[max(0, lag) : N_SYMBOLS + min(0, lag)]
                y = symbols(b)[max(0, -lag) : N_SYMBOLS + min(0, -lag)]
                worst = max(worst, int(np.sum(x == y)))
    assert worst <= 6


def test_markers_are_near_orthogonal_in_the_stft_domain() -> None:
    grid = SpecGrid.for_rate(FS)
    rng = np.random.default_rng(0)
    for m in range(4):
        x = np.zeros(FS * 10)
        x[FS * 3 : FS * 3 + marker_length(FS)] = marker_waveform(m, FS)
        x += 1e-4 * rng.standard_normal(x.size)
        pn = normalized_spectrogram(x, grid)
        for other in range(4):
            peak = float(score_curve(pn, marker_mask(other, grid)).max())
            if other == m:
                assert peak > 0.95
            else:
                assert peak < 0.4, (m, other, peak)


def test_score_bank_matches_the_direct_sum_for_every_mask() -> None:
    """One bank of the reception's spectra scores several masks exactly as the definition says."""
    grid = SpecGrid.for_rate(FS)
    rng = np.random.default_rng(3)
    x = 0.1 * rng.standard_normal(FS * 8)
    x[FS : FS + marker_length(FS)] += marker_waveform(1, FS)
    pn = normalized_spectrogram(x, grid)
    bank = ScoreBank(pn)
    for m in (1, 4):
        mask = marker_mask(m, grid)
        t = mask.shape[1]
        sc = bank.score(mask)
        assert sc.size == pn.shape[1] - t + 1
        for s in (0, 17, int(np.argmax(sc)), sc.size - 1):
            assert sc[s] == pytest.approx(float(np.sum(pn[:, s : s + t][mask])) / t, abs=1e-5)
    assert abs(int(np.argmax(bank.score(marker_mask(1, grid)))) * grid.hop - FS) <= grid.hop
    assert ScoreBank(pn[:, :10]).score(marker_mask(1, grid)).size == 0


def test_marker_renders_at_any_rate_with_exact_length() -> None:
    w = marker_waveform(5, 12001.188)
    assert w.size == marker_length(12001.188) == round(4 * 12001.188)
    assert np.max(np.abs(w)) == pytest.approx(0.5, abs=1e-6)
    with pytest.raises(ValueError):
        marker_waveform(MAX_MARKERS, FS)


@pytest.mark.parametrize("offset", [0, 12345, 40001])
def test_detection_is_sample_exact_on_a_clean_signal(offset: int) -> None:
    x = np.zeros(offset + marker_length(FS) + FS)
    x[offset : offset + marker_length(FS)] = marker_waveform(7, FS)
    grid = SpecGrid.for_rate(FS)
    sc = score_curve(normalized_spectrogram(x, grid), marker_mask(7, grid))
    coarse = int(np.argmax(sc)) * grid.hop
    assert abs(coarse - offset) <= grid.hop
    fine = refine(x, coarse, 7, FS, 2 * grid.hop)
    assert fine is not None and round(fine.position) == offset
    assert abs(fine.position - offset) < 0.05


def test_detection_under_noise_and_mistuning() -> None:
    rng = np.random.default_rng(1)
    offset = 20000
    x = np.zeros(FS * 12)
    x[offset : offset + marker_length(FS)] = marker_waveform(2, FS)
    n = np.arange(x.size)
    x = np.real(hilbert(x) * np.exp(2j * np.pi * 15.0 * n / FS))  # received 15 Hz high
    x += rng.standard_normal(x.size) * 0.5  # about -6 dB SNR over the whole band
    grid = SpecGrid.for_rate(FS)
    sc = score_curve(normalized_spectrogram(x, grid), marker_mask(2, grid))
    s = int(np.argmax(sc))
    assert sc[s] > 0.3 > float(np.median(sc))
    fine = refine(x, s * grid.hop, 2, FS, 2 * grid.hop)
    assert fine is not None
    assert abs(fine.position - offset) < 1.0
    assert fine.freq_offset_hz == pytest.approx(15.0, abs=1.5)


def test_sro_estimated_from_marker_positions_on_a_resampled_signal() -> None:
    """+56 ppm: the reception's clock is fast; markers 60 s apart give the ratio to < 0.5 ppm."""
    starts = [0, 60 * FS, 120 * FS]
    x = np.zeros(125 * FS)
    for i, s in enumerate(starts):
        x[s : s + marker_length(FS)] = marker_waveform(i, FS)
    ratio_true = 1.0 + 56e-6
    rx = interpolate(x, np.arange(int(x.size * ratio_true)) / ratio_true)  # rx[j] = x(j / ratio): marker k lands at j = k * ratio
    grid = SpecGrid.for_rate(FS)
    pn = normalized_spectrogram(rx, grid)
    found = []
    for i in range(len(starts)):
        c = int(np.argmax(score_curve(pn, marker_mask(i, grid)))) * grid.hop
        fine = refine(rx, c, i, FS, 2 * grid.hop)
        assert fine is not None
        found.append(fine.position)
    clock = fit_clock(starts, found, nominal_ratio=1.0, tol=8.0)
    assert clock is not None and len(clock.inliers) == 3
    assert clock.sro_ppm(1.0) == pytest.approx(56.0, abs=0.5)


def test_clock_fit_rejects_an_off_schedule_marker() -> None:
    k = np.array([0, 100000, 200000, 300000, 400000])
    j = 500.0 + 1.5 * k
    j[2] += 2048  # a lost frame before this marker
    clock = fit_clock(k, j, nominal_ratio=1.5, tol=10.0)
    assert clock is not None
    assert clock.inliers == (0, 1, 3, 4)
    assert clock.ratio == pytest.approx(1.5, rel=1e-6)


def test_interpolate_reads_a_sine_between_samples() -> None:
    t = np.arange(6000)
    x = np.sin(2 * np.pi * 440 * t / 12000)
    pos = 100.25 + np.arange(3000) * 1.5
    y = interpolate(x, pos, ratio=1.5)
    assert np.max(np.abs(y[20:-20] - np.sin(2 * np.pi * 440 * pos[20:-20] / 12000))) < 1e-4


def test_gcc_phat_finds_a_known_shift() -> None:
    rng = np.random.default_rng(3)
    s = rng.standard_normal(8000)
    y = interpolate(s, np.arange(8000) - 37.4)  # y[n] = s[n - 37.4]
    r = gcc_phat(s, y, FS, max_delay=128)
    assert r.delay == pytest.approx(37.4, abs=0.1)
    r = gcc_phat(y, s, FS, max_delay=128)
    assert r.delay == pytest.approx(-37.4, abs=0.1)
    with pytest.raises(ValueError):
        gcc_phat([], s, FS, max_delay=10)


def test_resample_poly_rate_conversion_keeps_positions() -> None:
    """The coarse 12 kHz -> 8 kHz step maps reception sample j to j * 2 / 3 (no delay)."""
    x = np.zeros(12000 * 8)
    x[30000 : 30000 + marker_length(12000)] = marker_waveform(1, 12000)
    y = resample_poly(x, 2, 3)
    grid = SpecGrid.for_rate(FS)
    c = int(np.argmax(score_curve(normalized_spectrogram(y, grid), marker_mask(1, grid)))) * grid.hop
    fine = refine(y, c, 1, FS, 2 * grid.hop)
    assert fine is not None and fine.position == pytest.approx(20000.0, abs=0.1)


def test_gcc_median_applied_only_when_segments_agree() -> None:
    kw = {"limit": 128.0, "min_segments": 2, "max_spread": 0.4}
    assert consistent_median([3.1, 3.3, 3.2], **kw) == (3.2, None)
    assert consistent_median([3.1, 3.3], **kw)[1] is None
    med, why = consistent_median([-5.0, 5.2], **kw)  # two segments 10 samples apart: one of them is wrong
    assert med == pytest.approx(0.1) and why is not None and "disagree" in why
    assert "fewer than 2" in (consistent_median([3.0], **kw)[1] or "")
    assert consistent_median([], **kw)[1] == "no speech segment"
    assert "limit" in (consistent_median([200.0, 200.1], **kw)[1] or "")
