"""Sliding-window SED block ``models.sed``, its offline twin ``sed_file`` and ``streamkit sed``.

A tiny randomly initialised CRNN (16 mel bins, 3 conv layers, GRU 1 x 8) on the real front end
(16 kHz, n_fft 2048, hop 256, time pooling 4), windows of 3 s every 0.5 s so the tests stay fast.
Random weights give flat probabilities, so the thresholds are set per class from the probabilities
of the test signal itself (quantiles), which yields several events per class.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
import soundfile as sf
import torch

from streamkit.core.errors import ConfigError, ModelError
from streamkit.core.graph import Graph
from streamkit.core.registry import lookup
from streamkit.core.tags import Gap, GapCause
from streamkit.eval.sed import read_strong_tsv
from streamkit.models import sed_stream as ss
from streamkit.models.sed_crnn import SedConfig, SedModel, frame_span, log_mel, receptive_field, save_model
from streamkit.models.sed_engine import SedEngine
from streamkit.models.sed_offline import sed_file
from streamkit.models.sed_settings import default_weights
from streamkit.models.sed_stream import SedBlock
from streamkit.testing import assert_chunking_invariant, run_block

torch.set_num_threads(1)

RATE = 16000
W, H = 3.0, 0.5
CLASSES = ("a", "b", "c", "d")


def tiny_cfg() -> SedConfig:
    return SedConfig(n_mels=16, n_classes=4, classes=CLASSES, channels=(4, 8, 8), pool_time=(2, 2, 1), pool_freq=(2, 2, 4), rnn_hidden=8,
                     rnn_layers=1, dropout=0.0, domain_hidden=8)  # fmt: skip


@pytest.fixture(scope="module")
def model() -> SedModel:
    torch.manual_seed(0)
    m = SedModel(tiny_cfg())
    with torch.no_grad():  # non-trivial batch-norm statistics, so that edges and context matter
        for mod in m.modules():
            if isinstance(mod, torch.nn.BatchNorm2d):
                mod.running_mean.normal_(0, 0.5)
                mod.running_var.uniform_(0.5, 2.0)
    return m.eval()


@pytest.fixture(scope="module")
def weights(model: SedModel, tmp_path_factory: pytest.TempPathFactory) -> str:
    return str(save_model(tmp_path_factory.mktemp("sed") / "tiny_sed.pt", model))


def signal(seconds: float, seed: int = 0) -> np.ndarray:
    """Noise with bursts of tones and loud noise, so the probabilities move."""
    rng = np.random.default_rng(seed)
    n = int(round(seconds * RATE))
    t = np.arange(n) / RATE
    x = rng.standard_normal(n) * 0.01
    for _ in range(int(seconds * 1.5)):
        a = int(rng.integers(0, max(n - 1, 1)))
        b = min(n, a + int(rng.integers(RATE // 5, RATE)))
        f = rng.uniform(200, 4000)
        x[a:b] += (0.3 * np.sin(2 * np.pi * f * t[a:b]) + rng.standard_normal(b - a) * rng.uniform(0, 0.3)) * rng.uniform(0.2, 1.0)
    return x.astype(np.float32)


X = signal(7.3)  # not a multiple of H, longer than W


@pytest.fixture(scope="module")
def post(model: SedModel) -> dict:
    """Per-class thresholds from quantiles of the signal's own smoothed probabilities."""
    r = sed_file(X, model, W, H)
    return {
        "threshold_high": [float(v) for v in np.quantile(r.smoothed, 0.7, axis=0)],
        "threshold_low": [float(v) for v in np.quantile(r.smoothed, 0.45, axis=0)],
        "median_s": 0.2,
    }


def block(weights: str, post: dict, **kw) -> SedBlock:
    return SedBlock(weights=weights, window_s=W, hop_s=H, emit_frames=True, **{**post, **kw})


def frames_of(run) -> np.ndarray:
    evs = run.events_of(ss.SED_FRAMES)
    return np.array([r for e in evs for r in e.payload.probs], dtype=np.float32).reshape(-1, len(CLASSES))


def reference_windows(model: SedModel, x: np.ndarray, window_s: float, hop_s: float):
    """The definition's windows, computed independently: the CNN over the whole signal (``K`` output
    frames), then per window ``m`` covering frames ``[a, e)`` the BiGRU and Ft; yields ``(m, a, e, K, Ft's output)``."""
    cfg = model.cfg
    with torch.inference_mode():
        cnn = model.frontend(log_mel(torch.from_numpy(x), cfg)[None])[0]
        K = cnn.shape[0]
        F = cfg.hop * cfg.time_pool
        lf = math.ceil(int(round(window_s * RATE)) / F)
        hs = int(round(hop_s * RATE))
        m = 0
        while (m * hs) // F < K:
            a = (m * hs) // F
            e = min(a + lf, K)
            yield m, a, e, K, model.ft(model.F.backend(cnn[None, a:e]))
            m += 1


def reference_probs(model: SedModel, x: np.ndarray, window_s: float, hop_s: float, gate=None) -> np.ndarray:
    """The block's frame probabilities by definition: the mean per frame over the windows covering it.

    ``gate``: each window's frame probabilities are first gated by its clip probabilities: its own, or
    for the windows the stream can only run at its end (their audio and look-ahead not all there),
    those of the first of them."""
    from streamkit.models.sed_post import clip_gate

    need = SedEngine(model, window_s=window_s, hop_s=hop_s)._need_samples  # audio a window needs to run before the end
    final_clip = None
    acc = cnt = None
    for m, a, e, K, o in reference_windows(model, x, window_s, hop_s):
        if acc is None:
            acc, cnt = np.zeros((K, model.cfg.n_classes)), np.zeros(K)
        p = o["frame"][0].numpy()
        if gate is not None:
            clip = o["clip"][0].numpy()
            if need(m) > x.shape[0]:
                final_clip = clip if final_clip is None else final_clip
                clip = final_clip
            p = clip_gate(p, clip, gate)
        acc[a:e] += p
        cnt[a:e] += 1
    return acc / cnt[:, None]


def det_key(d) -> tuple:
    return (d.label, d.onset, d.offset, round(d.confidence, 12), round(d.peak, 12), d.open_start, d.open_end)


# ------------------------------------------------------------------------------------------------


def test_instance_and_registry():
    assert lookup("models.sed") is SedBlock
    b = SedBlock(weights="x.pt")
    assert b.params() == {"weights": "x.pt"}
    # the default model's geometry: 10 s / 1 s windows, 7-frame median, 384 ms CNN look-ahead
    assert b.algorithmic_latency() == 1024 * (157 + 3) + 256 * (24 - 1) + 2048 - 896 == 170880


def test_module_constants_match_the_model():
    cfg = SedConfig()
    assert (ss.RATE, ss.N_FFT, ss.HOP, ss.TIME_POOL) == (cfg.rate, cfg.n_fft, cfg.hop, cfg.time_pool)
    assert (ss.RF_BEFORE, ss.RF_AFTER) == receptive_field(cfg)


@pytest.mark.parametrize(
    "kw",
    [
        {"hop_s": 0.01},  # shorter than a frame
        {"window_s": 2.0, "hop_s": 3.0},  # frames skipped
        {"window_s": 0.0},
        {"threshold_high": 0.2, "threshold_low": 0.5},
        {"threshold_high": 1.5},
        {"median_s": -1},
        {"median_s": []},
        {"threads": 0},
        {"weights": ""},
    ],
)
def test_rejects_bad_config(kw):
    with pytest.raises(ConfigError):
        SedBlock(**{"weights": "x.pt", **kw})


def test_per_class_parameters_are_checked_against_the_model(model):
    with pytest.raises(ConfigError, match="unknown classes"):
        SedEngine(model, threshold_high={"dog": 0.5})
    with pytest.raises(ConfigError, match="4 classes"):
        SedEngine(model, median_s=[0.1, 0.2])
    e = SedEngine(model, median_s={"a": 0.0, "b": 0.7}, threshold_high=[0.5, 0.6, 0.7, 0.8])
    assert e.geo.median_half == (0, 5, 3, 3)  # missing classes get the default 0.45 s = 7 frames
    assert e.high.tolist() == [0.5, 0.6, 0.7, 0.8]


def test_geometry_and_frame_grid(model):
    g = SedEngine(model, window_s=W, hop_s=H).geo
    assert g.frame_hop == 1024 and g.win_frames == 47  # ceil(3 s / 64 ms)
    assert [g.window_start(m) for m in range(5)] == [0, 7, 15, 23, 31]  # 8000 / 1024 = 7.8 frames on average
    lo, hi = frame_span(np.arange(3), model.cfg)
    assert np.allclose(lo * RATE, g.frame_offset + g.frame_hop * np.arange(3))
    assert (g.ctx_before, g.ctx_after) == (8, 8)


def test_matches_independent_reference(model):
    r = sed_file(X, model, W, H)
    ref = reference_probs(model, X, W, H)
    assert r.probs.shape == ref.shape
    np.testing.assert_allclose(r.probs, ref, atol=2e-6)


def test_cache_on_and_off_agree(model, post):
    a = sed_file(X, model, W, H, cache=True, **post)
    b = sed_file(X, model, W, H, cache=False, **post)
    assert a.windows == b.windows
    np.testing.assert_allclose(a.probs, b.probs, atol=2e-6)
    assert [(d.label, d.onset, d.offset) for d in a.detections] == [(d.label, d.onset, d.offset) for d in b.detections]
    assert len(a.detections) >= 4


def test_cached_cnn_equals_whole_signal_cnn(model):
    eng = SedEngine(model, window_s=W, hop_s=H)
    x = signal(12.0, seed=3)
    with torch.inference_mode():
        whole = model.frontend(log_mel(torch.from_numpy(x), model.cfg)[None])[0]
    seen = 0
    for i in range(0, x.shape[0], 3000):
        eng.push(x[i : i + 3000])
        c0, c = eng._cnn0, eng._cnn
        np.testing.assert_allclose(c.numpy(), whole[c0 : c0 + c.shape[0]].numpy(), atol=1e-6)
        seen = max(seen, c0 + c.shape[0])
    assert seen > whole.shape[0] - 20


@pytest.mark.parametrize("median_s, hyst", [([0.0, 0.2, 0.45, 1.0], True), (0.45, False)])
def test_postprocessing_equals_sed_post(model, median_s, hyst):
    """The incremental median filter and hysteresis give what sed_post gives on the whole probability array."""
    from streamkit.models.sed_post import frames_to_events, median_filter, median_frames

    x = signal(14.0, seed=4)
    sm = sed_file(x, model, W, H, median_s=median_s).smoothed
    high = [float(v) for v in np.quantile(sm, 0.7, axis=0)]
    low = [float(v) for v in np.quantile(sm, 0.4, axis=0)] if hyst else None
    r = sed_file(x, model, W, H, median_s=median_s, threshold_high=high, threshold_low=low)
    med = [median_frames(m, 0.064) for m in np.broadcast_to(median_s, 4)]
    np.testing.assert_array_equal(r.smoothed.astype(np.float64), median_filter(r.probs, med))
    want = frames_to_events(r.probs, model.cfg, threshold=high, off_threshold=low, median=med, decimals=None)
    got = sorted(r.detections, key=lambda d: (d.onset, d.class_index, d.offset))
    assert [d.label for d in got] == [w[0] for w in want]
    np.testing.assert_allclose([(d.onset_s, d.offset_s) for d in got], [(on, off) for _, on, off, _ in want], atol=1e-12)
    np.testing.assert_allclose([d.confidence for d in got], [c for *_, c in want], rtol=1e-12)
    assert len(want) >= 8


def test_chunking_invariance(weights, post):
    ref = assert_chunking_invariant(lambda: block(weights, post), X, rate=RATE, sizes=("all", 7, 160, 3001, "random"))
    assert len(ref.events_of(ss.SED_DETECTION)) >= 4
    assert frames_of(ref).shape[0] > 100


def test_block_equals_offline(weights, model, post):
    run = run_block(block(weights, post), X, rate=RATE, sizes=1234)
    off = sed_file(X, model, W, H, **post)
    np.testing.assert_array_equal(frames_of(run), off.probs)
    got = [e.payload for e in run.events_of(ss.SED_DETECTION)]
    assert [det_key(d) for d in got] == [det_key(d) for d in off.detections]
    for e, d in zip(run.events_of(ss.SED_DETECTION), got):
        assert e.span == (d.onset, d.offset)
        assert d.onset_s == d.onset / RATE and d.offset_s == d.offset / RATE
    # emitted once final, in order of their offsets
    offs = [d.offset for d in got]
    assert offs == sorted(offs)
    assert run.stats["blocks"]["dut"]["rtf"] is not None


@pytest.mark.parametrize("seconds", [0.1, 0.2, 1.3, 3.0, 3.37, 5.0])
def test_short_and_odd_lengths(model, weights, seconds):
    x = signal(seconds, seed=7)
    r = sed_file(x, model, W, H, threshold_high=0.0, threshold_low=0.0)
    K = ((x.shape[0] - 2048) // 256 + 1) // 4 if x.shape[0] >= 2048 else 0
    assert r.probs.shape == (K, 4)
    if K == 0:
        assert r.detections == []
        return
    np.testing.assert_allclose(r.probs, reference_probs(model, x, W, H), atol=2e-6)
    # thresholds 0: one event per class covering every frame
    assert [(d.label, d.onset, d.offset, d.open_start, d.open_end) for d in r.detections] == [(c, 896, 896 + 1024 * K, True, True) for c in CLASSES]
    run = run_block(SedBlock(weights=weights, window_s=W, hop_s=H, emit_frames=True, threshold_high=0.0, threshold_low=0.0), x, rate=RATE)
    np.testing.assert_array_equal(frames_of(run), r.probs)


def test_no_overlap_window_equals_hop(model):
    x = signal(7.0, seed=2)
    r = sed_file(x, model, 2.0, 2.0)
    np.testing.assert_allclose(r.probs, reference_probs(model, x, 2.0, 2.0), atol=2e-6)


def test_gap_ends_segment(weights, model):
    x = signal(9.0, seed=5)
    g = 5 * RATE + 123
    gap = Gap(lost=4000, cause=GapCause.XRUN)
    kw = dict(weights=weights, window_s=W, hop_s=H, emit_frames=True, threshold_high=0.0, threshold_low=0.0)
    run = run_block(SedBlock(**kw), x, rate=RATE, sizes=1000, gaps=[(g, gap)])
    dets = [e.payload for e in run.events_of(ss.SED_DETECTION)]
    # one event per class and segment, cut at the gap, flagged on both sides
    k1 = ((g - 2048) // 256 + 1) // 4
    k2 = ((x.shape[0] - g - 2048) // 256 + 1) // 4
    assert [(d.label, d.onset, d.offset) for d in dets] == [(c, 896, 896 + 1024 * k1) for c in CLASSES] + [
        (c, g + 896, g + 896 + 1024 * k2) for c in CLASSES
    ]
    assert all(d.open_end and d.gap_after == gap and d.gap_before is None for d in dets[:4])
    assert all(d.open_start and d.gap_before == gap and d.gap_after is None for d in dets[4:])
    # each segment is processed as its own stream: probabilities as the offline function on each part
    a, b = sed_file(x[:g], model, W, H), sed_file(x[g:], model, W, H)
    np.testing.assert_array_equal(frames_of(run), np.concatenate([a.probs, b.probs]))
    origins = sorted({e.payload.origin for e in run.events_of(ss.SED_FRAMES)})
    assert origins == [0, g]
    # chunking invariant with the gap too
    assert_chunking_invariant(lambda: SedBlock(**kw), x, rate=RATE, sizes=("all", 777), gaps=[(g, gap)])


def test_gap_with_real_thresholds(weights, model, post):
    g = 4 * RATE
    run = run_block(block(weights, post), X, rate=RATE, sizes=500, gaps=[(g, Gap(lost=None, cause=GapCause.RECONNECT))])
    a, b = sed_file(X[:g], model, W, H, **post), sed_file(X[g:], model, W, H, **post)
    want = [det_key(d) for d in a.detections] + [(d.label, d.onset + g, d.offset + g, *det_key(d)[3:]) for d in b.detections]
    assert [det_key(e.payload) for e in run.events_of(ss.SED_DETECTION)] == want


def test_nonfinite_input_replaced(weights, post):
    x = X.copy()
    x[1000:1100] = np.nan
    y = X.copy()
    y[1000:1100] = 0.0
    b = block(weights, post)
    r1 = run_block(b, x, rate=RATE)
    r2 = run_block(block(weights, post), y, rate=RATE)
    np.testing.assert_array_equal(frames_of(r1), frames_of(r2))
    assert b.nonfinite_samples == 100


def test_wrong_rate_is_refused(weights):
    with pytest.raises(ConfigError, match="16000 Hz.*resample"):
        run_block(SedBlock(weights=weights), X[:8000], rate=8000)
    with pytest.raises(ConfigError, match="mono"):
        run_block(SedBlock(weights=weights), np.zeros((1000, 2), np.float32), rate=RATE)


def test_corrupt_or_missing_weights(tmp_path):
    bad = tmp_path / "bad.pt"
    bad.write_bytes(b"not a torch file")
    with pytest.raises(ModelError, match="corrupt"):
        run_block(SedBlock(weights=str(bad)), X[:RATE], rate=RATE)
    with pytest.raises(ModelError, match="not found"):
        run_block(SedBlock(weights=str(tmp_path / "none.pt")), X[:RATE], rate=RATE)
    with pytest.raises(ModelError, match="corrupt"):
        sed_file(X[:RATE], str(bad))


def test_no_shipped_weights_is_a_clear_error(monkeypatch, tmp_path):
    import streamkit.models as sm

    monkeypatch.delattr(sm, "SED_WEIGHTS", raising=False)
    with pytest.raises(ConfigError, match="no shipped SED weights.*--weights"):
        default_weights()
    g = Graph("t")
    from streamkit.io.collect import VectorSource

    src = g.add(VectorSource(samples=X[:RATE], rate=RATE), name="src")
    sed = g.add(SedBlock(), name="sed")
    g.connect(src, sed)
    with pytest.raises(ConfigError, match="no shipped SED weights"):
        g.build()
    from streamkit.cli import main

    wav = tmp_path / "a.wav"
    sf.write(wav, X[:RATE], RATE)
    assert main(["sed", str(wav)]) == 2


def test_latency_after_start_uses_the_model(weights, post):
    b = block(weights, post)
    run_block(b, X[:RATE], rate=RATE)
    g = b._geo
    assert b.algorithmic_latency() == g.frame_hop * (g.win_frames + max(g.median_half)) + 256 * (8 - 1) + 2048 - 896


def test_cli_writes_dcase_tsv(tmp_path, weights, model, post):
    from streamkit.cli import main

    d = tmp_path / "audio"
    (d / "sub").mkdir(parents=True)
    x1 = signal(6.2, seed=11)
    stereo = np.stack([x1, x1 * 0.5], axis=1)
    sf.write(d / "one.wav", stereo, RATE, subtype="FLOAT")
    x2 = signal(4.1, seed=12)
    sf.write(d / "sub" / "two.flac", x2, 22050)  # resampled to 16 kHz
    out = tmp_path / "det.tsv"
    args = ["sed", str(d), "--out", str(out), "--weights", weights, "--window", str(W), "--hop", str(H), "--median", "0.2",
            "--high", "0.0", "--low", "0.0", "-q", "--block-s", "1.7"]  # fmt: skip
    assert main(args) == 0
    text = out.read_text(encoding="utf-8")
    assert text.splitlines()[0] == "filename\tonset\toffset\tevent_label"
    ev = read_strong_tsv(out, classes=CLASSES)
    assert sorted(ev) == ["one.wav", "sub/two.flac"]
    k1 = ((x1.shape[0] - 2048) // 256 + 1) // 4
    assert [(e.event_label, e.onset, e.offset) for e in ev["one.wav"]] == [(c, 0.056, round((896 + 1024 * k1) / RATE, 3)) for c in CLASSES]
    n2 = int(math.ceil(x2.shape[0] * Fraction(RATE, 22050)))  # soxr's output length
    k2 = ((n2 - 2048) // 256 + 1) // 4
    assert [(e.event_label, e.onset, e.offset) for e in ev["sub/two.flac"]] == [(c, 0.056, round((896 + 1024 * k2) / RATE, 3)) for c in CLASSES]
    # with real thresholds: the same detections as the offline function on the mono mix
    out2 = tmp_path / "det2.tsv"
    assert main(["sed", str(d / "one.wav"), "--out", str(out2), "--weights", weights, "--window", str(W), "--hop", str(H), "--median", "0.2",
                 "--high", "0.55", "--low", "0.5", "-q"]) == 0  # fmt: skip
    off = sed_file(stereo, model, W, H, median_s=0.2, threshold_high=0.55, threshold_low=0.5)
    got = read_strong_tsv(out2, classes=CLASSES)["one.wav"]
    assert [(e.event_label, e.onset, e.offset) for e in got] == sorted(
        [(d.label, round(d.onset_s, 3), round(d.offset_s, 3)) for d in off.detections], key=lambda t: (t[1], t[0], t[2])
    )


def test_cli_usage_errors(tmp_path, weights):
    from streamkit.cli import main

    assert main(["sed", str(tmp_path / "missing.wav"), "--weights", weights]) == 2
    (tmp_path / "empty").mkdir()
    assert main(["sed", str(tmp_path / "empty"), "--weights", weights]) == 2
    wav = tmp_path / "a.wav"
    sf.write(wav, X[:RATE], RATE)
    assert main(["sed", str(wav), "--weights", weights, "--hop", "20"]) == 2
    bad = tmp_path / "bad.wav"
    bad.write_bytes(b"RIFF....garbage")
    assert main(["sed", str(wav), str(bad), "--weights", weights, "-q", "--out", str(tmp_path / "o.tsv")]) == 1
    assert "a.wav" in read_strong_tsv(tmp_path / "o.tsv", classes=CLASSES)


def _tuned_weights(model, post, tmp_path, **override):
    """A copy of the tiny weights whose meta carries a per-class tuned setting (as `streamkit train sed-post` writes it)."""
    thr = dict(zip(CLASSES, post["threshold_high"]))
    med = dict(zip(CLASSES, (0.0, 0.2, 0.45, 1.0)))
    meta = {"post_tuned": {"median_s": med, "threshold": thr, **override}}
    return str(save_model(tmp_path / "tuned.pt", model, meta=meta)), med, thr


def test_post_tuned_takes_the_weight_files_setting(tmp_path, model, weights, post):
    """post='tuned' (and 'auto' on a file with a setting) equals post='fixed' with the file's per-class values,
    in the block, sed_file and the CLI; 'auto' with values given, or on a file without a setting, is 'fixed'."""
    from streamkit.cli import main

    tw, med, thr = _tuned_weights(model, post, tmp_path)
    fixed = sed_file(X, model, W, H, median_s=med, threshold_high=thr)
    assert len(fixed.detections) >= 3
    want = [det_key(d) for d in fixed.detections]
    assert [det_key(d) for d in sed_file(X, tw, W, H, post="tuned").detections] == want
    assert [det_key(d) for d in sed_file(X, tw, W, H).detections] == want  # auto
    plain = [det_key(d) for d in sed_file(X, model, W, H, median_s=0.45, threshold_high=0.5).detections]
    assert plain != want
    assert [det_key(d) for d in sed_file(X, tw, W, H, threshold_high=0.5).detections] == plain  # auto with a value given: fixed
    assert [det_key(d) for d in sed_file(X, tw, W, H, post="fixed").detections] == plain
    for kw, used in ((dict(post="tuned"), "tuned"), ({}, "tuned"), (dict(post="fixed"), "fixed")):
        b = SedBlock(weights=tw, window_s=W, hop_s=H, **kw)
        run = run_block(b, X, rate=RATE, sizes=999)
        assert b.post_used == used
        assert [det_key(e.payload) for e in run.events_of(ss.SED_DETECTION)] == (want if used == "tuned" else plain)
    b = SedBlock(weights=weights, window_s=W, hop_s=H)
    run_block(b, X[:RATE], rate=RATE)
    assert b.post_used == "fixed"  # no setting in the file
    # the weights load when the graph is built, so the declared latency already has the tuned windows (the longest: 1 s)
    from streamkit.io.collect import VectorSource

    lat = {}
    for kw in ({}, dict(post="fixed")):
        g = Graph("t")
        src = g.add(VectorSource(samples=X[:RATE], rate=RATE), name="src")
        blk = g.add(SedBlock(weights=tw, window_s=W, hop_s=H, **kw), name="sed")
        g.connect(src, blk)
        lat[blk.post_used] = g.build().latency_items["sed"]
        run_block(blk, X[:RATE], rate=RATE)
        assert blk.algorithmic_latency() == lat[blk.post_used]
    geo = blk._geo
    from streamkit.models.sed_post import median_frames

    assert lat["tuned"] - lat["fixed"] == geo.frame_hop * (median_frames(1.0, 0.064) // 2 - median_frames(0.45, 0.064) // 2) > 0
    wav = tmp_path / "x.wav"
    sf.write(wav, X, RATE, subtype="FLOAT")
    for extra in (["--post", "tuned"], []):
        out = tmp_path / "t.tsv"
        assert main(["sed", str(wav), "--out", str(out), "--weights", tw, "--window", str(W), "--hop", str(H), "-q", *extra]) == 0
        got = read_strong_tsv(out, classes=CLASSES)["x.wav"]
        assert [(e.event_label, e.onset, e.offset) for e in got] == sorted(
            [(d.label, round(d.onset_s, 3), round(d.offset_s, 3)) for d in fixed.detections], key=lambda t: (t[1], t[0], t[2])
        )


def test_post_tuned_errors(tmp_path, model, weights, post, capsys):
    from streamkit.cli import main

    with pytest.raises(ConfigError, match="post must be one of"):
        SedBlock(weights=weights, post="best")
    with pytest.raises(ConfigError, match="leave median_s / threshold_high unset"):
        SedBlock(weights=weights, post="tuned", median_s=0.2)
    with pytest.raises(ConfigError, match="no tuned post-processing"):
        sed_file(X[:RATE], weights, W, H, post="tuned")
    with pytest.raises(ConfigError, match="no tuned post-processing"):
        run_block(SedBlock(weights=weights, window_s=W, hop_s=H, post="tuned"), X[:RATE], rate=RATE)
    bad, _m, thr = _tuned_weights(model, post, tmp_path, threshold={**dict(zip(CLASSES, post["threshold_high"])), "a": 1.5})
    with pytest.raises(ConfigError, match=r"\['threshold'\]\['a'\] = 1.5 is out of range"):
        sed_file(X[:RATE], bad, W, H)
    with pytest.raises(ConfigError, match="leave median_s / threshold_high unset"):
        sed_file(X[:RATE], bad, W, H, post="tuned", median_s=0.2)
    (tmp_path / "m").mkdir()
    missing, _m, _t = _tuned_weights(model, post, tmp_path / "m", median_s={"a": 0.1})
    with pytest.raises(ConfigError, match="each of the model's classes"):
        sed_file(X[:RATE], missing, W, H, post="tuned")
    wav = tmp_path / "x.wav"
    sf.write(wav, X[:RATE], RATE)
    capsys.readouterr()
    assert main(["sed", str(wav), "--weights", weights, "--post", "tuned", "-q"]) == 2
    assert "no tuned post-processing" in capsys.readouterr().err
    tw = str(tmp_path / "tuned.pt")
    _tuned_weights(model, post, tmp_path)
    assert main(["sed", str(wav), "--weights", tw, "--post", "tuned", "--high", "0.4", "-q"]) == 2
    assert "drop --median / --high" in capsys.readouterr().err


def _clip_probs(model: SedModel, x: np.ndarray) -> np.ndarray:
    """Clip probabilities of every window of X (to pick gates that cut some windows and keep others)."""
    return np.array([o["clip"][0].numpy() for *_, o in reference_windows(model, x, W, H)])


def test_clip_gate_in_the_stream(tmp_path, model, weights, post):
    """clip_gate: each window's frames are gated by its own clip probabilities before averaging (the
    definition, computed independently); any chunking gives the same; 0 changes nothing; the tuned
    file's gates are used with post='tuned', an explicit value wins, and a bad one is refused."""
    from streamkit.cli import main

    clips = _clip_probs(model, X)
    gate = [float(v) for v in np.median(clips, axis=0)]  # about half the windows of each class gated
    r = sed_file(X, model, W, H, clip_gate=gate)
    want = reference_probs(model, X, W, H, gate=gate)
    np.testing.assert_allclose(r.probs, want, atol=2e-6)
    ungated = sed_file(X, model, W, H)
    assert not np.allclose(r.probs, ungated.probs)
    assert np.all(r.probs <= ungated.probs + 1e-6)  # gating only removes
    np.testing.assert_array_equal(sed_file(X, model, W, H, clip_gate=0.0).probs, ungated.probs)
    kw = dict(post, clip_gate=gate)
    ref = assert_chunking_invariant(lambda: block(weights, kw), X, rate=RATE, sizes=("all", 160, 3001, "random"))
    np.testing.assert_array_equal(frames_of(ref), sed_file(X, model, W, H, **kw).probs)
    # the tuned file's per-class gates
    tw, med, thr = _tuned_weights(model, post, tmp_path, clip_gate=dict(zip(CLASSES, gate)))
    fixed = sed_file(X, model, W, H, median_s=med, threshold_high=thr, clip_gate=gate)
    assert [det_key(d) for d in sed_file(X, tw, W, H, post="tuned").detections] == [det_key(d) for d in fixed.detections]
    b = SedBlock(weights=tw, window_s=W, hop_s=H)
    assert b.clip_gates_used is None  # not built yet
    run = run_block(b, X, rate=RATE, sizes=999)
    assert [det_key(e.payload) for e in run.events_of(ss.SED_DETECTION)] == [det_key(d) for d in fixed.detections]
    assert b.clip_gates_used == {c: round(float(np.float32(v)), 6) for c, v in zip(CLASSES, gate)}
    # fixed post-processing does not take the file's gates; an explicit gate wins over them
    plain = sed_file(X, model, W, H, median_s=0.45, threshold_high=0.5)
    assert [det_key(d) for d in sed_file(X, tw, W, H, post="fixed").detections] == [det_key(d) for d in plain.detections]
    np.testing.assert_array_equal(sed_file(X, tw, W, H, post="tuned", clip_gate=0.0).probs, ungated.probs)
    wav = tmp_path / "x.wav"
    sf.write(wav, X, RATE, subtype="FLOAT")
    out = tmp_path / "g.tsv"
    assert main(["sed", str(wav), "--out", str(out), "--weights", tw, "--window", str(W), "--hop", str(H), "-q"]) == 0
    got = read_strong_tsv(out, classes=CLASSES)["x.wav"]
    assert [(e.event_label, e.onset, e.offset) for e in got] == sorted(
        [(d.label, round(d.onset_s, 3), round(d.offset_s, 3)) for d in fixed.detections], key=lambda t: (t[1], t[0], t[2])
    )
    assert main(["sed", str(wav), "--out", str(out), "--weights", tw, "--window", str(W), "--hop", str(H), "-q", "--clip-gate", "1.5"]) == 2
    for bad in (1.5, -0.1, [0.5, 0.5]):
        with pytest.raises(ConfigError, match="clip_gate"):
            SedEngine(model, clip_gate=bad)
    with pytest.raises(ConfigError, match="clip_gate"):
        SedBlock(weights=weights, clip_gate=2.0)
    (tmp_path / "b").mkdir()
    badw, _m, _t = _tuned_weights(model, post, tmp_path / "b", clip_gate={"a": 0.5})
    with pytest.raises(ConfigError, match="clip_gate"):
        sed_file(X[:RATE], badw, W, H)
