"""HF SAD corpus generator (espeak-ng + HF channel). Needs espeak-ng: CI installs it; no skip."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from streamkit.cli.corpus import add_hf_arguments as add_corpus_arguments
from streamkit.cli.corpus import run_hf as run_from_args
from streamkit.data import tts
from streamkit.data.hf_channel import ChannelParams, simulate
from streamkit.data.hf_corpus import SPLITS, clean_labels, corpus_table, file_metrics, generate, received_speech
from streamkit.eval.rttm import read_rttm_intervals

RATE = 8000


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    tts.require_espeak()  # fails (not skips) with the apt-get hint when espeak-ng is missing
    out = tmp_path_factory.mktemp("hfc") / "a"
    man = generate(out, hours=0.02, seed=1)
    return out, man


def _labels(out: Path, split: str, fid: str) -> dict:
    return json.loads((out / split / "labels" / f"{fid}.json").read_text(encoding="utf-8"))


def test_missing_espeak_has_apt_hint(monkeypatch: pytest.MonkeyPatch) -> None:
    tts.require_espeak.cache_clear()
    monkeypatch.setattr(tts.shutil, "which", lambda name: None)
    try:
        with pytest.raises(tts.EspeakMissingError, match="apt-get install espeak-ng"):
            tts.synthesize("hello", "en-us")
    finally:
        monkeypatch.undo()
        tts.require_espeak.cache_clear()


def test_tts_voices_and_synthesis() -> None:
    voices = tts.list_voices()
    assert len(voices) >= 100
    assert len({v.language for v in voices}) >= 10
    x = tts.synthesize("hello world, this is a test.", "en-us+f2", rate_wpm=170, pitch=60)
    assert x.dtype == np.float32 and 0.8 * RATE < len(x) < 3 * RATE
    assert 0.1 < np.abs(x).max() <= 1.0
    text = tts.random_text(np.random.default_rng(0), "hi", 12)
    assert len(text.split()) == 12 and text.endswith(".")


def test_clean_labels_merge_and_specks() -> None:
    x = np.zeros(4 * RATE, np.float32)
    t = np.arange(4 * RATE) / RATE
    tone = (0.5 * np.sin(2 * np.pi * 300 * t)).astype(np.float32)
    for a, b in [(0.50, 1.00), (1.15, 1.50), (1.80, 2.20), (3.00, 3.02)]:  # 150 ms gap, 300 ms gap, 20 ms speck
        x[int(a * RATE) : int(b * RATE)] = tone[int(a * RATE) : int(b * RATE)]
    iv = clean_labels(x)
    assert len(iv) == 2
    assert abs(iv[0, 0] - 0.5 * RATE) <= 2 and abs(iv[0, 1] - 1.5 * RATE) <= 2
    assert abs(iv[1, 0] - 1.8 * RATE) <= 2 and abs(iv[1, 1] - 2.2 * RATE) <= 2


def test_sdr_uses_received_speech_as_target() -> None:
    """SDR target = AGC gain × received speech component (through the clock-offset step): a clean
    channel scores high although fading, mistuning and the clock offset misalign it with the clean
    track (SI-SDR re clean stays low); noise lowers it."""
    t = np.arange(20 * RATE) / RATE
    x = (0.3 * np.sin(2 * np.pi * 700 * t) * (np.sin(2 * np.pi * 0.25 * t) > 0)).astype(np.float32)
    p = ChannelParams(profile="moderate", snr_db=None, mistune_hz=7.0, rate_offset_ppm=99.0, seed=4)
    sdr = {}
    for snr in (None, 10.0, 0.0):
        sim = simulate(x, p.replace(snr_db=snr), diagnostics=True)
        m = file_metrics(x, sim.received, target=received_speech(sim, len(x)), stoi=False)
        sdr[snr] = m["sdr_db"]
        if snr is None:
            assert m["sdr_db"] > 30 and m["si_sdr_db"] < 0
    assert sdr[None] > sdr[10.0] + 10 > sdr[0.0] + 10


def test_files_labels_and_rttm(corpus: tuple[Path, dict]) -> None:
    out, man = corpus
    assert set(man["files"]) == set(SPLITS)
    total = speech = 0
    for split, files in man["files"].items():
        assert files
        for f in files:
            fid = f["id"]
            lab = _labels(out, split, fid)
            n = lab["n_samples"]
            assert n == f["n_samples"] and 40 * RATE < n < 240 * RATE  # layout: 5 × 1-8 s + 4 × 12-38 s + 2 × 8-22 s
            rx, sr = sf.read(out / split / "audio" / f"{fid}.wav", dtype="float32")
            cl, _ = sf.read(out / split / "clean" / f"{fid}.wav", dtype="float32")
            assert sr == RATE and len(rx) == n and len(cl) == n and np.all(np.isfinite(rx))
            iv = np.asarray(lab["intervals"], np.int64)
            assert iv.ndim == 2 and len(iv) >= 5
            assert iv.min() >= 0 and iv.max() <= n and np.all(iv[:, 1] > iv[:, 0])
            assert np.all(iv[1:, 0] - iv[:-1, 1] > 1600)  # pauses <= 200 ms were merged
            rttm = read_rttm_intervals(out / split / "rttm" / f"{fid}.rttm", RATE)
            assert list(rttm) == [fid]
            np.testing.assert_array_equal(rttm[fid], iv)  # sample-exact
            assert lab["speech_samples"] == int((iv[:, 1] - iv[:, 0]).sum())
            # labels line up with the TTS segments placed in the clean track
            segs = lab["segments"]
            assert len(segs) == 5
            for s in segs:
                assert 0.5 * RATE <= s["stop"] - s["start"] <= 8 * RATE and s["text"]
                inside = iv[(iv[:, 0] >= s["start"]) & (iv[:, 1] <= s["stop"])]
                assert len(inside) >= 1
                assert inside[0, 0] - s["start"] < 0.05 * RATE and s["stop"] - inside[-1, 1] < 0.05 * RATE
            covered = sum(int(((iv[:, 0] >= s["start"]) & (iv[:, 1] <= s["stop"])).sum()) for s in segs)
            assert covered == len(iv)  # no label outside the segments
            gaps = np.ones(n, bool)
            for s in segs:
                gaps[s["start"] : s["stop"]] = False
            assert np.all(cl[gaps] == 0)  # silence between segments is silent in the clean track
            # recomputing the labels from the stored clean track gives the same intervals
            np.testing.assert_array_equal(clean_labels(cl), iv)
            ch = lab["channel"]
            assert ch["speech_level_db"] is not None and "snr_db" in ch
            assert lab["voice"] in man["voices"][split]
            m = lab["metrics"]
            assert 0 <= m["stoi"] <= 1 and -40 < m["sdr_db"] < 40 and np.isfinite(m["si_sdr_db"])
            total += n
            speech += lab["speech_samples"]
    assert 5 <= 100 * speech / total <= 25  # calibrated to ~13.5 % (paper: close to 13 %); 0.02 h is 3-4 files


def test_voices_disjoint(corpus: tuple[Path, dict]) -> None:
    _, man = corpus
    sets = [set(man["voices"][s]) for s in SPLITS]
    assert all(sets)
    for i in range(3):
        for j in range(i + 1, 3):
            assert not sets[i] & sets[j]
    for s in SPLITS:
        assert {f["voice"] for f in man["files"][s]} <= sets[SPLITS.index(s)]


def test_deterministic(corpus: tuple[Path, dict], tmp_path: Path) -> None:
    out, man = corpus
    man2 = generate(tmp_path / "b", hours=0.02, seed=1)
    assert man2 == man
    assert (tmp_path / "b" / "manifest.json").read_bytes() == (out / "manifest.json").read_bytes()
    fid = man["files"]["train"][0]["id"]
    for sub, ext in [("audio", "wav"), ("clean", "wav"), ("labels", "json"), ("rttm", "rttm")]:
        assert (tmp_path / "b" / "train" / sub / f"{fid}.{ext}").read_bytes() == (out / "train" / sub / f"{fid}.{ext}").read_bytes()


def test_table_and_cli(corpus: tuple[Path, dict], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out, _ = corpus
    table = corpus_table(out)
    lines = table.splitlines()
    assert "speech %" in lines[0] and "STOI" in lines[0] and len(lines) == 2 + 3
    import argparse

    ns = add_corpus_arguments(argparse.ArgumentParser()).parse_args(
        ["--out", str(tmp_path / "c"), "--hours", "0.001", "--seed", "3", "--splits", "1", "0", "0", "--no-metrics"]
    )
    assert run_from_args(ns) == 0
    text = capsys.readouterr().out
    assert "train" in text and "n/a" in text and "dev" not in text
    assert len(json.loads((tmp_path / "c" / "manifest.json").read_text())["files"]["train"]) == 1


def test_interference_is_unlabelled_concurrent_speaker(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--interference 1: every file gets a concurrent speaker; clean track and labels are unchanged."""
    kw = {"hours": 0.001, "seed": 4, "splits": (1, 0, 0), "metrics": False}
    m0 = generate(tmp_path / "no", **kw)
    m1 = generate(tmp_path / "yes", interference=1.0, **kw)
    assert "--interference 1" in m1["command"] and "--interference" not in m0["command"]
    fid = m0["files"]["train"][0]["id"]
    for sub, ext in [("clean", "wav"), ("rttm", "rttm")]:
        assert (tmp_path / "no" / "train" / sub / f"{fid}.{ext}").read_bytes() == (tmp_path / "yes" / "train" / sub / f"{fid}.{ext}").read_bytes()
    l0, l1 = _labels(tmp_path / "no", "train", fid), _labels(tmp_path / "yes", "train", fid)
    assert l0["intervals"] == l1["intervals"] and l0["interferer"] is None
    itf = l1["interferer"]
    assert itf["voice"] != l1["voice"] and len(itf["intervals"]) >= 1
    a0, _ = sf.read(str(tmp_path / "no" / "train" / "audio" / f"{fid}.wav"))
    a1, _ = sf.read(str(tmp_path / "yes" / "train" / "audio" / f"{fid}.wav"))
    assert a0.shape == a1.shape and not np.array_equal(a0, a1)
    with pytest.raises(ValueError, match="interference"):
        generate(tmp_path / "bad", interference=1.5, **kw)
    import argparse

    ns = add_corpus_arguments(argparse.ArgumentParser()).parse_args(["--out", str(tmp_path / "c"), "--interference", "2"])
    assert run_from_args(ns) == 2
    assert "--interference" in capsys.readouterr().err
