"""``streamkit sad`` / ``streamkit eval sad`` (streamkit.cli.files) on a tiny generated corpus."""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from streamkit.cli import files as sad_cli
from streamkit.eval import sad_systems as ss
from streamkit.eval.rttm import read_rttm, read_rttm_masks
from streamkit.eval.sad import score_mask

hf_corpus = pytest.importorskip("streamkit.data.hf_corpus")


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("hfcorpus")
    try:
        hf_corpus.generate(d, hours=0.02, seed=3, metrics=False)
    except Exception as exc:  # espeak-ng missing
        if "espeak" in str(exc).lower():
            pytest.skip(str(exc))
        raise
    return d


def _sad(argv: list[str]) -> int:
    return sad_cli.run_sad(sad_cli.add_sad_arguments(argparse.ArgumentParser()).parse_args(argv))


def _eval(argv: list[str]) -> int:
    return sad_cli.run_eval(sad_cli.add_eval_arguments(argparse.ArgumentParser()).parse_args(argv))


def test_sad_writes_rttm_within_file(corpus: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    assert _sad([str(corpus / "eval" / "audio"), "--system", "stat", "--out", str(out), "--scores"]) == 0
    wavs = sorted((corpus / "eval" / "audio").glob("*.wav"))
    assert wavs
    for w in wavs:
        dur = sf.info(str(w)).duration
        segs = read_rttm(out / f"{w.stem}.rttm")
        assert segs, "no speech found at all"
        assert all(s.file_id == w.stem and s.onset >= 0 and s.end <= dur + 1e-6 for s in segs)
        scores = np.load(out / f"{w.stem}.scores.npy")
        meta = json.loads((out / f"{w.stem}.scores.json").read_text())
        assert meta["rate"] == 8000 and meta["hop"] == 256 and meta["win"] == 512
        assert scores.dtype == np.float32 and len(scores) == (int(dur * 8000) - 512) // 256 + 1


def test_resampled_stereo_copy_gives_same_rttm(corpus: Path, tmp_path: Path) -> None:
    import soxr

    src = sorted((corpus / "eval" / "audio").glob("*.wav"))[0]
    x, rate = sf.read(str(src), dtype="float32")
    assert rate == 8000
    y = soxr.resample(x, 8000, 16000, quality="HQ")
    other = tmp_path / "in16k" / f"{src.stem}.wav"
    other.parent.mkdir()
    sf.write(str(other), np.stack([y, y], axis=1), 16000, subtype="FLOAT")
    for system in ("stat", "energy"):
        a, b = tmp_path / f"a_{system}", tmp_path / f"b_{system}"
        assert _sad([str(src), "--system", system, "--out", str(a)]) == 0
        assert _sad([str(other), "--system", system, "--out", str(b)]) == 0
        n = {src.stem: len(x)}
        ma = read_rttm_masks(a / f"{src.stem}.rttm", 8000, n)[src.stem]
        mb = read_rttm_masks(b / f"{src.stem}.rttm", 8000, n)[src.stem]
        assert ma.any()
        assert score_mask(ma, mb, 8000, collar_s=0.0).f1 > 0.95, system


def test_sad_bad_input(corpus: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert _sad([str(tmp_path / "missing.wav"), "--out", str(tmp_path / "o")]) == 2
    assert "path not found" in capsys.readouterr().err
    wav = sorted((corpus / "eval" / "audio").glob("*.wav"))[0]
    assert _sad([str(wav), "--system", "bogus", "--out", str(tmp_path / "o")]) == 2
    assert "unknown SAD system 'bogus'" in capsys.readouterr().err
    bad = tmp_path / "nan.wav"
    z = np.zeros(8000, np.float32)
    z[100] = np.nan
    sf.write(str(bad), z, 8000, subtype="FLOAT")
    assert _sad([str(bad), "--out", str(tmp_path / "o")]) == 1
    err = capsys.readouterr().err
    assert "nan.wav" in err and "NaN" in err


def test_energy_scores_shape_and_range() -> None:
    rng = np.random.default_rng(0)
    x = (0.01 * rng.standard_normal(8000 * 4)).astype(np.float32)
    x[16000:24000] += 0.3 * np.sin(2 * np.pi * 300 * np.arange(8000) / 8000).astype(np.float32)
    s, hop, win = ss.energy_scores(x)
    assert (hop, win) == (160, 160) and len(s) == len(x) // 160
    assert s.min() >= 0 and s.max() <= 1
    thr = ss.get_system("energy").threshold
    assert (s[100:150] > thr).all() and not (s[50:95] > thr).any()


def test_eval_sad_stat_energy(corpus: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "ev"
    assert _eval(["--system", "stat,energy", "--corpus", str(corpus), "--out", str(out)]) == 0
    table = capsys.readouterr().out
    assert "| stat | eval | dev-EER |" in table and "paper: statistical SAD" in table
    js = json.loads((out / "sad_eval.json").read_text())
    assert set(js["systems"]) == {"stat", "energy"}
    for name in ("stat", "energy"):
        for op in ("dev-EER", "dev-best-F1"):
            rows = [r for r in js["rows"] if r["system"] == name and r["dataset"] == "eval" and r["operating_point"] == op]
            assert len(rows) == 1
            assert rows[0]["f1"] is not None and math.isfinite(rows[0]["f1"])
            assert rows[0]["rt_factor"] is not None and rows[0]["rt_factor"] >= 0
    png = out / "roc_dev.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert (out / "sad_eval.md").read_text().count("| energy | eval |") >= 2


def test_eval_sad_usage_errors(corpus: Path, tmp_path: Path) -> None:
    assert _eval(["--system", "stat", "--corpus", str(tmp_path / "nope"), "--out", str(tmp_path)]) == 2
    assert _eval(["--system", "stat,webrtcvad", "--corpus", str(corpus), "--out", str(tmp_path)]) == 2
    assert _eval(["--system", "bogus", "--corpus", str(corpus), "--out", str(tmp_path)]) == 2


@pytest.mark.skipif("webrtcvad0" not in ss.SYSTEMS, reason="webrtcvad-wheels not installed")
def test_webrtcvad_binary_scores() -> None:
    x = np.zeros(8000, np.float32)
    s, hop, win = ss.get_system("webrtcvad2").score_file(x)
    assert (hop, win) == (240, 240) and len(s) == 8000 // 240
    assert set(np.unique(s)) <= {0.0, 1.0} and not s.any()


def test_sad_silence_and_clipping_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Silence-only and hard-clipped files run through every system without error; silence is no speech."""
    d = tmp_path / "in"
    d.mkdir()
    sf.write(str(d / "silence.wav"), np.zeros(8000 * 20, np.float32), 8000, subtype="FLOAT")
    rng = np.random.default_rng(5)
    t = np.arange(8000 * 20) / 8000
    clip = np.clip(40 * np.sin(2 * np.pi * 440 * t) * (rng.random(len(t)) > 0.5), -1, 1)
    sf.write(str(d / "clipped.wav"), clip.astype(np.float32), 16000, subtype="PCM_16")  # also a rate change
    for system in ss.available():
        out = tmp_path / system
        assert _sad([str(d), "--system", system, "--out", str(out)]) == 0, capsys.readouterr().err
        assert read_rttm(out / "silence.rttm") == [], system
        assert (out / "clipped.rttm").exists()


@pytest.mark.skipif("silero" not in ss.SYSTEMS, reason="silero-vad not installed")
def test_silero_scores(corpus: Path) -> None:
    import torch

    wav = sorted((corpus / "eval" / "audio").glob("*.wav"))[0]
    x = ss.load_audio(wav).x
    threads = torch.get_num_threads()
    s, hop, win = ss.get_system("silero").score_file(x)
    assert torch.get_num_threads() == threads  # restored
    assert (hop, win) == (256, 256) and len(s) == len(x) // 256 and s.dtype == np.float32
    assert 0 <= s.min() and s.max() <= 1
    s2, _, _ = ss.silero_scores(x)
    np.testing.assert_array_equal(s, s2)  # state reset between files: deterministic
    z, _, _ = ss.silero_scores(np.zeros(8000 * 5, np.float32))
    assert z.max() < 0.5


def test_dnn_system_missing_weights(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Without its weight file the dnn system is refused with the training hint, not a crash."""
    monkeypatch.setattr(ss, "_DNN_WEIGHTS", tmp_path / "none.pt")
    assert ss._dnn_threshold() is None
    monkeypatch.setattr(ss, "SYSTEMS", {k: v for k, v in ss.SYSTEMS.items() if k != "dnn"})
    with pytest.raises(ss.SystemUnavailable, match="train sad-dnn"):
        ss.get_system("dnn")


@pytest.mark.skipif("dnn" not in ss.SYSTEMS, reason="no shipped DNN SAD weights")
def test_dnn_scores_follow_the_block_threshold(corpus: Path) -> None:
    wav = sorted((corpus / "eval" / "audio").glob("*.wav"))[0]
    x = ss.load_audio(wav).x
    sysd = ss.get_system("dnn")
    s, hop, win = sysd.score_file(x)
    assert (hop, win) == (80, 200) and len(s) == (len(x) - 200) // 80 + 1
    assert 0 <= s.min() and s.max() <= 1 and (s > sysd.threshold).any()
