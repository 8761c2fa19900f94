"""The singer-ID paper's CRNN and residual BLSTM: features, shapes, training, weight files, CLI, block."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
import torch

from streamkit.cli import main
from streamkit.core.errors import ModelError
from streamkit.data.singing import SingerProfile, sing
from streamkit.models.singer_embed import SingerEmbedder
from streamkit.models.singer_nets import (
    FEATURES,
    MODELS,
    NetConfig,
    NetEmbedder,
    SingerNet,
    clip_features,
    feature_dim,
    load_embedder,
    n_params,
    pool_stats,
)
from streamkit.train.singer_nets import train_net


@pytest.fixture(autouse=True)
def _one_thread() -> None:
    torch.set_num_threads(1)


@pytest.mark.parametrize("kind", FEATURES)
def test_clip_features_shape_and_level_invariance(kind: str) -> None:
    rng = np.random.default_rng(0)
    x = rng.normal(0, 0.1, 16000) + 0.3 * np.sin(2 * np.pi * 220 * np.arange(16000) / 16000)
    f = clip_features(x, kind)
    assert f.shape == (100, feature_dim(kind)) and f.dtype == np.float32
    np.testing.assert_allclose(clip_features(10 * x, kind), f, atol=1e-3)  # the recording level drops out
    assert clip_features(x[:100], kind).shape == (0, feature_dim(kind))
    with pytest.raises(ValueError, match="features must be one of"):
        clip_features(x, "cqt")


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("kind", FEATURES)
def test_forward_shapes(model: str, kind: str) -> None:
    net = SingerNet(NetConfig(model=model, features=kind, n_classes=5)).eval()
    assert 10_000 < n_params(net) < 100_000  # small: tens of thousands of parameters
    x = torch.randn(3, 120, feature_dim(kind))
    lengths = torch.tensor([120, 37, 10])
    x[1, 37:] = 0.0  # padding is zeros (pad_batch)
    x[2, 10:] = 0.0
    with torch.no_grad():
        assert net(x, lengths).shape == (3, 5)
        e = net.embed(x, lengths)
        assert e.shape == (3, 64)
        # padding does not change an item's embedding
        alone = net.embed(x[1:2, :37], torch.tensor([37]))
    np.testing.assert_allclose(alone.numpy(), e[1:2].numpy(), atol=1e-4)


def test_pool_stats_masks_padding() -> None:
    h = torch.tensor([[[1.0], [3.0], [100.0]]])
    np.testing.assert_allclose(pool_stats(h, torch.tensor([2])).numpy(), [[2.0, 1.0]], atol=1e-3)


def test_config_errors() -> None:
    with pytest.raises(ValueError, match="model must be one of"):
        NetConfig(model="resnet50")
    with pytest.raises(ValueError, match="features must be one of"):
        NetConfig(features="cqt")


def _fixture_clips(n: int = 24) -> tuple[list[np.ndarray], np.ndarray]:
    """Two 'singers': feature sequences with a different spectral shape, random lengths."""
    rng = np.random.default_rng(1)
    feats, labels = [], []
    for i in range(n):
        c = i % 2
        t = int(rng.integers(15, 60))
        base = np.linspace(-1, 1, 40) * (1 if c else -1)
        feats.append((base + rng.normal(0, 1.0, (t, 40))).astype(np.float32))
        labels.append(c)
    return feats, np.array(labels)


@pytest.mark.parametrize("model", MODELS)
def test_training_lowers_the_loss(model: str, tmp_path: Path) -> None:
    data = _fixture_clips()
    emb, hist = train_net(NetConfig(model=model, features="mel", n_classes=2), data, data, epochs=4, batch=8, seed=0)
    assert hist[-1]["loss"] < hist[0]["loss"]
    assert max(h["dev_clip_accuracy"] for h in hist) > 0.75
    # the weight file round-trips: same embeddings (float16 storage: to 1e-2)
    p = emb.save(tmp_path / "n.pt")
    back = NetEmbedder.load(p)
    e1 = emb.embed_features([(f - emb.mu) / emb.sd for f in data[0][:4]])
    e2 = back.embed_features([(f - back.mu) / back.sd for f in data[0][:4]])
    assert e1.shape == (4, 64)
    np.testing.assert_allclose(np.linalg.norm(e1, axis=1), 1.0, atol=1e-6)
    np.testing.assert_allclose(e2, e1, atol=2e-2)


def test_load_embedder_dispatch_and_errors(tmp_path: Path) -> None:
    emb, _ = train_net(NetConfig(model="crnn", features="mfcc", n_classes=2), _fixture_clips(8), epochs=1, batch=8)
    p = emb.save(tmp_path / "n.pt")
    assert isinstance(load_embedder("motif", p), NetEmbedder)
    with pytest.raises(ValueError, match="motif clips"):
        load_embedder("clip", p)
    bad = tmp_path / "bad.pt"
    bad.write_bytes(b"junk")
    with pytest.raises(ModelError, match="corrupt"):
        load_embedder("motif", bad)
    assert isinstance(load_embedder("clip"), SingerEmbedder)  # clip mode: the shipped pooled embedding
    assert isinstance(load_embedder("motif"), NetEmbedder)  # motif mode: the shipped net
    assert load_embedder("motif").dim == 64 and load_embedder("motif").meta["thresholds"]["motif"] > 0


@pytest.mark.parametrize(("args", "msg"), [
    (["--model", "resnet"], "--model must be one of embed, crnn, blstm"),
    (["--features", "cqt"], "--features must be one of mel, mfcc, stft"),
    (["--model", "embed", "--features", "mfcc"], "needs --model crnn or blstm"),
    (["--model", "crnn", "--out", "x.npz"], "must end in .pt"),
    (["--model", "blstm", "--epochs", "0"], "--epochs must be in"),
    (["--segments"], "--segments is for --model crnn or blstm"),
])  # fmt: skip
def test_train_cli_errors(args: list[str], msg: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["train", "singer-id", "--corpus", str(tmp_path), *args]) == 2
    err = capsys.readouterr().err
    assert msg in err and err.count("\n") == 1


def _song(singer: str, seed: int, dur: float = 14.0) -> np.ndarray:
    p = SingerProfile.random(np.random.default_rng(int(singer[1:]) * 7919), singer)
    return sing(p, seed, dur).audio.astype(np.float64)


def test_block_emits_singer_id_with_a_net(tmp_path: Path) -> None:
    from streamkit.dsp.melody import melody_f0
    from streamkit.models.singer_embed import read_audio
    from streamkit.models.singer_id_block import SINGER_ID, SingerIdBlock
    from streamkit.testing import run_block
    from streamkit.train.singer_nets import motif_clip_audio

    files: dict[str, list[Path]] = {}
    feats, labels = [], []
    for k, s in enumerate(("S1", "S2")):
        for j in range(2):
            x = _song(s, 200 + j)
            p = tmp_path / f"{s}_{j}.wav"
            sf.write(p, x, 16000, subtype="PCM_16")
            files.setdefault(s, []).append(p)
            x = read_audio(p)
            clips = [a for a in motif_clip_audio(x, melody_f0(x)) if len(a) >= 1600] or [x[i : i + 16000] for i in range(0, len(x) - 16000, 16000)]
            feats += [clip_features(a, "mel") for a in clips]
            labels += [k] * len(clips)
    emb, _ = train_net(NetConfig(model="blstm", features="mel", n_classes=2), (feats, np.array(labels)), epochs=2, batch=8)
    emb.meta["thresholds"] = {"motif": 0.0}
    w = emb.save(tmp_path / "net.pt")
    g = tmp_path / "g.json"
    for s in ("S1", "S2"):
        assert main(["singers", "enroll", s, *map(str, files[s]), "--gallery", str(g), "--weights", str(w)]) == 0
    x = read_audio(files["S2"][1]).astype(np.float32)[:, None]
    run = run_block(SingerIdBlock(gallery=str(g), weights=str(w), every_s=3.0, window_s=8.0), x, rate=16000, sizes=320)
    ev = run.events_of(SINGER_ID)
    assert ev and all(e.payload.best in ("S1", "S2") and -1.0 <= e.payload.confidence <= 1.0 for e in ev)
    np.testing.assert_array_equal(run.samples, x)
    # a gallery enrolled with the pooled transform does not fit the net: a clear error
    from streamkit.core.errors import ConfigError
    from streamkit.models.singer_embed import WEIGHTS

    g2 = tmp_path / "g2.json"
    assert main(["singers", "enroll", "S1", str(files["S1"][0]), "--gallery", str(g2), "--weights", str(WEIGHTS)]) == 0
    with pytest.raises(ConfigError, match="64"):
        SingerIdBlock(gallery=str(g2), weights=str(w))


def test_segments_are_voiced_one_second_windows() -> None:
    from streamkit.train.singer_nets import segment_audio

    x = np.arange(35 * 16000 // 10, dtype=np.float64)  # 3.5 s
    rows = np.zeros((350, 3))
    rows[:100, 1] = 1.0  # 1st second voiced
    rows[100:140, 1] = 1.0  # 2nd: 0.4 s voiced (left out)
    rows[200:260, 1] = 1.0  # 3rd: 0.6 s voiced
    segs = segment_audio(x, rows)
    assert [s[0] for s in segs] == [0.0, 32000.0] and all(len(s) == 16000 for s in segs)
