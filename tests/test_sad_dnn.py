"""CNN-GRU SAD: streaming == offline, training lowers the loss, weight files, graph after Resample."""

from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
import torch

from streamkit.core.block import ErrorPolicy
from streamkit.core.errors import ConfigError, ModelError, StreamkitError
from streamkit.core.graph import Graph
from streamkit.core.registry import lookup
from streamkit.core.runtime import Runner
from streamkit.core.tags import SPEECH
from streamkit.io.collect import CollectSink, VectorSource
from streamkit.models.sad_dnn import (
    HOP,
    WIN,
    SadDnn,
    SadDnnConfig,
    dnn_raw_scores,
    dnn_scores,
    features,
    frame_targets,
    load_weights,
    save_weights,
)
from streamkit.models.sad_dnn_block import SadDnnBlock
from streamkit.testing import BlockRun, run_block

RATE = 8000
TOL = 1e-5  # scores: streaming vs offline (torch may sum a conv in another order for another frame count)


def _signal(seconds: float = 3.0, seed: int = 0, gap: tuple[float, float] = (0.2, 0.7)) -> tuple[np.ndarray, np.ndarray]:
    """Noise with harmonic bursts (a crude voiced-speech stand-in) and its speech mask."""
    rng = np.random.default_rng(seed)
    n = int(seconds * RATE)
    x = rng.standard_normal(n) * 0.01
    m = np.zeros(n, bool)
    t = np.arange(n) / RATE
    pos = int(0.4 * RATE)
    while pos < n - RATE // 4:
        ln = int(rng.uniform(0.2, 0.6) * RATE)
        f0 = rng.uniform(100, 220)
        seg = sum(np.sin(2 * np.pi * k * f0 * t[pos : pos + ln]) / k for k in range(1, 12))
        x[pos : pos + ln] += 0.2 * seg * np.hanning(len(seg))
        m[pos : pos + ln] = True
        pos += ln + int(rng.uniform(*gap) * RATE)
    return x.astype(np.float32), m


def _random_model(cfg: SadDnnConfig | None = None, seed: int = 0) -> SadDnn:
    torch.manual_seed(seed)
    m = SadDnn(cfg or SadDnnConfig())
    with torch.no_grad():
        for bn in m.bns:  # non-trivial BN statistics so that folding matters
            bn.running_mean.uniform_(-0.3, 0.3)
            bn.running_var.uniform_(0.5, 2.0)
            bn.weight.uniform_(0.5, 1.5)
            bn.bias.uniform_(-0.2, 0.2)
    return m.eval()


@pytest.fixture(scope="module")
def weights(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A random model whose threshold sits at the median score of the test signal (many segments)."""
    p = tmp_path_factory.mktemp("w") / "rand.pt"
    m = _random_model()
    save_weights(p, m, threshold=0.5)
    s, _, _ = dnn_raw_scores(_signal()[0], weights=load_weights(p))
    save_weights(p, m, threshold=float(np.median(s)))
    return p


def test_folded_stream_equals_training_form(weights: Path) -> None:
    lw = load_weights(weights)
    x, _ = _signal()
    with torch.no_grad():
        ref = lw.model(torch.from_numpy(features(x, lw.cfg))[None])[0].numpy()
    s, hop, win = dnn_raw_scores(x, weights=lw)
    assert (hop, win) == (HOP, WIN) and s.shape == ref.shape == ((len(x) - WIN) // HOP + 1,)
    np.testing.assert_allclose(s, ref, atol=TOL)


def _run(block: SadDnnBlock, x: np.ndarray, size: int | str, gaps: tuple = ()) -> BlockRun:
    """VectorSource -> block -> CollectSink with the runner's chunk as large as the source's."""
    g = Graph("t")
    src = g.add(VectorSource(samples=x, rate=RATE, sizes=size, seed=3, mean_size=300, gaps=list(gaps)), name="src")
    g.add(block, name="dut")
    sink = g.add(CollectSink(), name="sink")
    g.connect(src, block)
    g.connect(block, sink)
    r = Runner(g, keep_events=True, threaded_events=False, stats_interval_s=0, error_policy=ErrorPolicy.RAISE, chunk=len(x))
    st = r.run()
    return BlockRun(sink.samples, list(sink.tags), r.events, st)


def _decisions(r: BlockRun) -> tuple[list, list]:
    return [(t.offset, t.value.start) for t in r.tags if t.key == SPEECH], [e.span for e in r.events_of("vad.segment")]


@pytest.mark.parametrize("backend", ["numba", "eager"])
def test_chunking_invariance(weights: Path, backend: str) -> None:
    """Chunks of 1, 37, 80, 1000 samples, random sizes and the whole file give the same output.

    numba backend: bit-exact (items, tags with their scores, events). Torch eager: decisions, tags
    and events identical, scores within TOL (torch's conv may sum in another order for another
    number of frames).
    """
    x, _ = _signal()
    sizes: list[int | str] = [len(x), 1, 37, 80, 1000, "random"] if backend == "numba" else [len(x), 37, 1000]
    runs = {s: _run(SadDnnBlock(weights=str(weights), backend=backend), x, s) for s in sizes}
    ref = runs[len(x)]
    off, _, _ = dnn_raw_scores(x, weights=load_weights(weights))
    assert ref.samples.shape == (off.shape[0], 1)
    if backend == "numba":
        np.testing.assert_array_equal(ref.samples[:, 0], off)
    else:
        np.testing.assert_allclose(ref.samples[:, 0], off, atol=TOL)
    tags, segs = _decisions(ref)
    assert len(segs) >= 3 and len(tags) == 2 * len(segs)
    for s, r in runs.items():
        assert _decisions(r) == (tags, segs), s
        if backend == "numba":
            np.testing.assert_array_equal(r.samples, ref.samples, err_msg=f"chunk size {s}")
            assert [(t.offset, t.value) for t in r.tags] == [(t.offset, t.value) for t in ref.tags], s
            assert [(e.span, e.payload) for e in r.events_of("vad.segment")] == [(e.span, e.payload) for e in ref.events_of("vad.segment")], s
        else:
            np.testing.assert_allclose(r.samples, ref.samples, atol=TOL, err_msg=f"chunk size {s}")
    # the vote as the offline rank filter: the block's speech starts == first frames of dnn_scores > threshold
    thr = load_weights(weights).threshold
    v, _, _ = dnn_scores(x, weights=load_weights(weights))
    d = (v > thr).astype(int)
    starts = [i for i in range(len(d)) if d[i] and (i == 0 or not d[i - 1])]
    assert [o for o, st in tags if st] == starts


def test_gap_resets_like_stat_sad(weights: Path) -> None:
    """A Gap tag resets the block (on_gap RESET): output restarts, open segments are closed, any chunking."""
    from streamkit.core.tags import Gap

    x, _ = _signal(4.0)
    gaps = ((16000, Gap(lost=800)),)
    # (chunks of 80 and 1000 put the gap on a chunk boundary. NB: when the runner splits a work
    # call at a gap it re-sends the first part's CUSTOM tags clamped to the second part's start,
    # core/runtime.py _emit_output shares out_tags between the parts; dsp.stat_sad shows it too)
    a = _run(SadDnnBlock(weights=str(weights)), x, 80, gaps)
    for size in (37, 1000):
        b = _run(SadDnnBlock(weights=str(weights)), x, size, gaps)
        np.testing.assert_array_equal(a.samples, b.samples)
        assert _decisions(a) == _decisions(b)
    # after the reset the block starts afresh: its scores are those of the second part alone
    tail, _, _ = dnn_raw_scores(x[16000:], weights=load_weights(weights))
    np.testing.assert_array_equal(a.samples[-len(tail) :, 0], tail)


def test_block_basics(weights: Path) -> None:
    b = SadDnnBlock(weights=str(weights))
    assert b.algorithmic_latency() == 100 + 18 * 80
    with pytest.raises(ConfigError, match="dsp.resample"):
        run_block(SadDnnBlock(weights=str(weights)), np.zeros(16000, np.float32), rate=16000)
    with pytest.raises(ConfigError):
        SadDnnBlock(vote_window=24)
    assert lookup("models.sad_dnn") is SadDnnBlock
    import streamkit.models.sad_dnn as sd
    import streamkit.models.sad_dnn_block as sb

    assert (sb.RATE, sb.WIN, sb.HOP, sb.BACKENDS) == (sd.RATE, sd.WIN, sd.HOP, sd.BACKENDS)


def test_nan_input_does_not_poison_state(weights: Path) -> None:
    x, _ = _signal()
    y = x.copy()
    y[5000:5100] = np.nan
    y[9000] = np.inf
    z = x.copy()
    z[5000:5100] = 0
    z[9000] = 0
    a = run_block(SadDnnBlock(weights=str(weights)), y, rate=RATE, sizes=160)
    b = run_block(SadDnnBlock(weights=str(weights)), z, rate=RATE, sizes=160)
    assert np.isfinite(a.samples).all()
    np.testing.assert_allclose(a.samples, b.samples, atol=TOL)


def test_after_resample_from_kiwi_rate(weights: Path) -> None:
    rate = Fraction("12001.188")
    x8, _ = _signal(2.0)
    import soxr

    x = soxr.resample(x8, 8000, float(rate)).astype(np.float32)
    g = Graph("t")
    src = g.add(VectorSource(samples=x, rate=rate, sizes=1201), name="src")
    rs = g.add(lookup("dsp.resample")(to_hz=8000), name="rs")
    sad = g.add(SadDnnBlock(weights=str(weights)), name="sad")
    sink = g.add(CollectSink(), name="sink")
    g.connect(src, rs)
    g.connect(rs, sad)
    g.connect(sad, sink)
    st = Runner(g, keep_events=True, threaded_events=False, stats_interval_s=0).run()
    n8 = st["blocks"]["rs"]["items_out"] if "blocks" in st else round(len(x) * 8000 / float(rate))
    assert abs(sink.samples.shape[0] - ((n8 - WIN) // HOP + 1)) <= 1
    assert np.isfinite(sink.samples).all()


def test_weight_files(tmp_path: Path, weights: Path) -> None:
    lw = load_weights(weights)
    p = tmp_path / "copy.pt"
    save_weights(p, lw.model, threshold=0.3)
    lw2 = load_weights(p)
    assert lw2.cfg == lw.cfg and lw2.threshold == 0.3
    for k, v in lw.model.state_dict().items():
        assert torch.equal(v, lw2.model.state_dict()[k])
    # corrupt file
    bad = tmp_path / "bad.pt"
    bad.write_bytes(p.read_bytes()[:300])
    with pytest.raises(ModelError, match="corrupt"):
        load_weights(bad)
    bad.write_bytes(b"not a torch file at all")
    with pytest.raises(ModelError, match="corrupt"):
        load_weights(bad)
    # the block reports it at start, as a StreamkitError
    with pytest.raises(StreamkitError, match="corrupt"):
        run_block(SadDnnBlock(weights=str(bad)), np.zeros(4000, np.float32), rate=RATE)
    # mismatched config: requested vs file, and a file whose weights do not fit its own config
    with pytest.raises(ModelError, match="does not match"):
        load_weights(p, expect={"gru_hidden": 32})
    obj = torch.load(p, weights_only=True)
    obj["config"]["gru_hidden"] = 32
    torch.save(obj, tmp_path / "mism.pt")
    with pytest.raises(ModelError, match="do not match their config"):
        load_weights(tmp_path / "mism.pt")
    obj["format"] = "something-else"
    torch.save(obj, tmp_path / "foreign.pt")
    with pytest.raises(ModelError, match="not a SAD-DNN weight file"):
        load_weights(tmp_path / "foreign.pt")
    with pytest.raises(ModelError, match="not found"):
        load_weights(tmp_path / "missing.pt")


def test_frame_targets() -> None:
    m = np.zeros(1000, bool)
    m[250] = True
    t = frame_targets(m, (1000 - WIN) // HOP + 1)
    # frame t covers [80 t, 80 t + 200): sample 250 lies in frames 1, 2, 3
    assert np.flatnonzero(t).tolist() == [1, 2, 3]


def _tiny_corpus(root: Path) -> None:
    """train/dev/eval with audio, clean, labels, rttm and a manifest, in the layout of `streamkit corpus hf`."""
    from streamkit.eval.rttm import write_rttm

    k = 0
    for split, nf in (("train", 3), ("dev", 1), ("eval", 1)):
        for sub in ("audio", "clean", "labels", "rttm"):
            (root / split / sub).mkdir(parents=True)
        for i in range(nf):
            k += 1
            fid = f"{split}_{i:05d}"
            x, m = _signal(16.0 if split == "train" else 8.0, seed=k, gap=(1.2, 2.0))  # gaps longer than 2 collars: scored non-speech
            clean = np.where(m, x, 0).astype(np.float32)
            sf.write(root / split / "audio" / f"{fid}.wav", x, RATE, subtype="PCM_16")
            sf.write(root / split / "clean" / f"{fid}.wav", clean, RATE, subtype="PCM_16")
            d = np.diff(np.r_[0, m.astype(int), 0])
            iv = np.stack([np.flatnonzero(d == 1), np.flatnonzero(d == -1)], 1)
            (root / split / "labels" / f"{fid}.json").write_text(json.dumps({"id": fid, "n_samples": len(x), "intervals": iv.tolist()}))
            write_rttm(root / split / "rttm" / f"{fid}.rttm", {fid: iv}, RATE)
    (root / "manifest.json").write_text(json.dumps({"command": "tiny test corpus", "seed": 0, "severity": 0.5}))


def test_training_lowers_loss(tmp_path: Path) -> None:
    from streamkit.models.train_sad_dnn import train

    _tiny_corpus(tmp_path / "c")
    losses: list[float] = []
    cfg = SadDnnConfig(channels=(2, 4, 4), gru_hidden=8)
    out = tmp_path / "w" / "m.pt"
    summary = train(tmp_path / "c", out, cfg=cfg, minutes=2, seed=1, batch=4, lr=1e-2, threads=1, eval_every=10, max_steps=20, quiet=True,
                    on_step=lambda s, loss: losses.append(loss))  # fmt: skip
    assert len(losses) == 20
    assert np.mean(losses[-5:]) < 0.85 * np.mean(losses[:5]), losses  # observed ~0.75
    h = summary["history"]
    assert summary["best_dev"] == min(e["dev_loss"] for e in h) and h[-1]["dev_loss"] < h[0]["dev_loss"]
    card = json.loads(out.with_suffix(".json").read_text())
    assert card["training"]["steps"] == 20 and card["parameters"] > 0 and "f1" in card["metrics"]["eval"]
    lw = load_weights(out)
    assert lw.cfg == cfg and 0 <= lw.threshold <= 1
    # --resume continues from the checkpoint: 3 more steps
    s2 = train(tmp_path / "c", out, cfg=cfg, minutes=2, seed=1, batch=4, lr=1e-2, threads=1, eval_every=10, max_steps=23, quiet=True, resume=True,
               finalize=False)  # fmt: skip
    assert s2["step"] == 23 and s2["runs"] == 2


def test_monitor_and_mic_wiring() -> None:
    """`--sad dnn|both|all` puts models.sad_dnn after the level meter (fan-out, like dsp.stat_sad)."""
    from streamkit.cli import build_parser
    from streamkit.cli.monitor import _sad_detectors
    from streamkit.io.kiwi_source import parse_station
    from streamkit.monitor import build_station_graph

    assert _sad_detectors("dnn") == ("dnn",) and _sad_detectors("all") == ("energy", "stat", "dnn") and _sad_detectors("both") == ("stat", "dnn")
    g = build_station_graph(parse_station("localhost:8073:7100:lsb"), detectors=("energy", "dnn"))
    assert isinstance(g.blocks["dnn_sad"], SadDnnBlock) and "vad" in g.blocks
    a = build_parser().parse_args(["mic", "--sad", "dnn"])
    assert a.sad == "dnn"
    with pytest.raises(SystemExit):
        build_parser().parse_args(["monitor", "--sad", "nope"])


def test_shipped_weights() -> None:
    """The packaged weights load with their card; small; scores on a short signal are finite."""
    from streamkit.models.sad_dnn import DEFAULT_WEIGHTS

    if not DEFAULT_WEIGHTS.is_file():
        pytest.skip("no shipped weights (train them with `streamkit train sad-dnn`)")
    lw = load_weights()
    assert DEFAULT_WEIGHTS.stat().st_size < 4_000_000
    card = json.loads(DEFAULT_WEIGHTS.with_suffix(".json").read_text())
    assert card["config"] == lw.cfg.to_dict() and abs(card["threshold"] - lw.threshold) < 1e-12
    s, _, _ = dnn_scores(_signal(2.0)[0])
    assert np.isfinite(s).all() and ((s > 0) & (s < 1)).all()
