"""The singing-voice synthesiser (streamkit.data.singing) and ``streamkit corpus singers``."""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from streamkit.cli import main
from streamkit.data.singers_corpus import plan, profile
from streamkit.data.singing import FRAME_S, SingerProfile, sing
from streamkit.data.singing_melody import Note, Phrase, compose


def _singer(i: int) -> SingerProfile:
    return SingerProfile.random(np.random.default_rng(100 + i), f"T{i}")


def test_deterministic_for_a_seed() -> None:
    p = _singer(0)
    a, b = sing(p, 7, 8.0, accompaniment=True, channel="room"), sing(p, 7, 8.0, accompaniment=True, channel="room")
    assert np.array_equal(a.audio, b.audio) and np.array_equal(a.f0_cents, b.f0_cents, equal_nan=True)
    assert [ph.record() for ph in a.phrases] == [ph.record() for ph in b.phrases]
    c = sing(p, 8, 8.0, accompaniment=True, channel="room")
    assert not np.array_equal(a.audio[: len(c.audio)], c.audio[: len(a.audio)])
    assert _singer(0) == p  # profiles too


def test_steady_note_pitch_matches_truth_within_cents() -> None:
    p = dataclasses.replace(_singer(1), vibrato_depth_cents=0.0, jitter=0.0, drift_cents=0.0, scoop_cents=0.0)
    song = sing(p, 1, 3.0, phrases=[Phrase([Note(0.5, 2.5, 57.3, "a")])])  # 220 Hz + 30 cents
    x = song.audio[int(1.0 * song.rate) : int(2.0 * song.rate)].astype(np.float64)
    spec = np.abs(np.fft.rfft(x * np.hanning(len(x)), 1 << 19))
    f = np.fft.rfftfreq(1 << 19, 1 / song.rate)
    truth = float(np.nanmedian(song.f0_hz[100:200]))
    band = (f > truth * 0.9) & (f < truth * 1.1)
    k = int(np.flatnonzero(band)[np.argmax(spec[band])])
    a, b, c = np.log(spec[k - 1 : k + 2])
    peak = f[k] + 0.5 * (a - c) / (a - 2 * b + c) * (f[1] - f[0])
    assert abs(1200 * np.log2(peak / truth)) < 2.0
    assert abs(1200 * np.log2(truth / (440 * 2 ** ((57.3 - 69) / 12)))) < 0.5


def _acf_f0(x: np.ndarray, rate: int, t: float, guess_hz: float) -> float:
    """f0 at time t by the autocorrelation of a 40 ms window, searched within ±2 semitones of the guess."""
    n = int(0.04 * rate)
    i = int(t * rate) - n // 2
    w = x[i : i + n].astype(np.float64) * np.hanning(n)
    r = np.fft.irfft(np.abs(np.fft.rfft(w, 4 * n)) ** 2)[:n]
    lo, hi = int(rate / (guess_hz * 2 ** (2 / 12))), int(rate / (guess_hz * 2 ** (-2 / 12))) + 1
    k = lo + int(np.argmax(r[lo:hi]))
    a, b, c = r[k - 1 : k + 2]
    return rate / (k + 0.5 * (a - c) / (a - 2 * b + c))


def test_f0_truth_matches_the_audio_of_a_whole_recording() -> None:
    song = sing(_singer(2), 3, 15.0)
    hz = song.f0_hz
    frames = [i for i in range(5, len(hz) - 5) if song.voiced[i - 4 : i + 5].all()]
    assert len(frames) > 500
    err = np.array([1200 * np.log2(_acf_f0(song.audio, song.rate, i * FRAME_S, hz[i]) / hz[i]) for i in frames[::3]])
    assert np.median(np.abs(err)) < 10.0 and np.percentile(np.abs(err), 90) < 30.0
    assert not song.voiced[:20].any()  # silence before the first phrase is unvoiced
    assert np.all(np.isnan(song.f0_cents[~song.voiced]))


def _envelope(song_audio: np.ndarray, voiced: np.ndarray) -> np.ndarray:
    """Cepstrally smoothed long-term log spectrum of the voiced frames (timbre, not pitch)."""
    n = 1024
    frames = [song_audio[i * 160 : i * 160 + n] for i in np.flatnonzero(voiced) if i * 160 + n <= len(song_audio)]
    ltas = np.mean([np.abs(np.fft.rfft(f * np.hanning(n))) ** 2 for f in frames], axis=0)
    cep = np.fft.irfft(np.log(ltas + 1e-12))
    return cep[1:20]


def test_singers_differ_more_than_recordings_of_one_singer() -> None:
    env = {}
    for s in range(3):
        for r in range(2):
            song = sing(_singer(s), 10 * s + r, 12.0, transpose=r - 1)
            env[(s, r)] = _envelope(song.audio, song.voiced)
    within = [np.linalg.norm(env[(s, 0)] - env[(s, 1)]) for s in range(3)]
    between = [np.linalg.norm(env[(s, r)] - env[(t, q)]) for s in range(3) for t in range(s + 1, 3) for r in range(2) for q in range(2)]
    assert np.mean(between) > 2.0 * np.mean(within), (within, between)


def test_compose_plants_the_singers_motifs() -> None:
    p = _singer(3)
    phrases = compose(p, np.random.default_rng(0), 60.0)
    found = 0
    for ph in phrases:
        for k, a, b in ph.motifs:
            steps = np.diff([n.midi for n in ph.notes[a : b + 1]])
            assert len(steps) == len(p.motifs[k]["steps"]) and all(n.kind == "motif" for n in ph.notes[a : b + 1])
            assert np.all(np.sign(steps) == np.sign(p.motifs[k]["steps"]))  # degree steps keep their direction
            found += 1
        assert all(x.end == pytest.approx(y.start) for x, y in zip(ph.notes, ph.notes[1:]))  # legato
        assert ph.notes[-1].kind == "cadence"
    assert found >= 3


def test_split_is_by_recording_and_unknown_singers_only_in_test() -> None:
    recs = plan(6, 0.5, 4, unknown=2)
    ids = [r["id"] for r in recs]
    assert len(ids) == len(set(ids))  # each recording in exactly one split
    known = {r["singer"] for r in recs if r["known"]}
    for s in known:
        assert {r["split"] for r in recs if r["singer"] == s} == {"train", "dev", "test"}
    assert {r["split"] for r in recs if not r["known"]} == {"test"} and len({r["singer"] for r in recs if not r["known"]}) == 2
    # a singer's profile and recordings do not depend on how many singers there are
    assert profile(4, 1, 0) == profile(4, 1, 0) and [r for r in plan(3, 0.5, 4, unknown=2) if r["singer"] == "S001"][0]["seed"] == recs[0]["seed"]


@pytest.mark.parametrize(
    "args, msg",
    [
        (["--singers", "1"], "--singers must be >= 2"),
        (["--hours", "0"], "--hours must be > 0"),
        (["--accompaniment", "1.5"], "--accompaniment must be a probability"),
        (["--jobs", "0"], "--jobs must be >= 1"),
        (["--unknown", "-1"], "--unknown must be >= 0"),
    ],
)
def test_cli_bad_arguments(tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], msg: str) -> None:
    assert main(["corpus", "singers", "--out", str(tmp_path / "o"), "--hours", "0.01", *args]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and msg in err and "\n" not in err
    assert not (tmp_path / "o" / "manifest.json").exists()


def test_cli_output_path_not_a_regular_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "o"
    (out / "manifest.json").mkdir(parents=True)
    assert main(["corpus", "singers", "--out", str(out), "--singers", "2", "--hours", "0.01"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "not a regular file" in err and "\n" not in err
    assert not (out / "audio").exists()  # refused before anything was written
    f = tmp_path / "file"
    f.write_text("x")
    assert main(["corpus", "singers", "--out", str(f), "--singers", "2", "--hours", "0.01"]) == 2
    assert "not a directory" in capsys.readouterr().err


def test_tiny_corpus_end_to_end(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "c"
    assert main(["corpus", "singers", "--out", str(out), "--singers", "2", "--hours", "0.01", "--unknown", "1", "--seed", "5",
                 "--accompaniment", "0.5", "--channel", "hf"]) == 0  # fmt: skip
    table = capsys.readouterr().out
    assert "split by recording" in table and "train" in table
    man = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    assert man["splits"]["test"]["unknown_singers"] == ["U001"] and man["splits"]["train"]["unknown_singers"] == []
    rows = [line.split("\t") for line in (out / "recordings.tsv").read_text(encoding="utf-8").splitlines()[1:]]
    assert len(rows) == 3 * 2 + 1 == sum(s["recordings"] for s in man["splits"].values())
    for rid, split, singer, *_ in rows:
        info = sf.info(str(out / "audio" / f"{rid}.wav"))
        assert info.samplerate == 16000 and info.subtype == "PCM_16"
        truth = json.loads((out / "truth" / f"{rid}.json").read_text(encoding="utf-8"))
        assert truth["split"] == split and truth["singer"] == singer and truth["channel"] == "hf"
        assert len(truth["f0_cents"]) == int(info.frames / 160) and any(v is not None for v in truth["f0_cents"])
        assert truth["phrases"] and truth["render"]["channel_params"]["snr_db"] is not None
    assert set(json.loads((out / "singers.json").read_text(encoding="utf-8"))) == {"S001", "S002", "U001"}
    assert os.path.getsize(out / "audio" / f"{rows[0][0]}.wav") > 16000 * 2 * 15
