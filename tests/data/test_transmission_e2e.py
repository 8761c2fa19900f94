"""End to end through our own stack: a transmission played by the KiwiSDR emulator with a clock
offset and a delay, through a mild HF channel, recorded by ``streamkit monitor --record``, aligned
by ``streamkit align``; compared with the truth."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from streamkit import cli
from streamkit.data.hf_channel import ChannelParams, simulate
from streamkit.data.transmission import Utterance, build, speech_intervals, write_transmission
from streamkit.io.kiwi_emulator import EmulatorThread, add_emulator_arguments, config_from_args
from streamkit.io.kiwi_signal_file import FilePlayback

RATE = 12001.188  # the emulator's true rate
PPM = 40.0  # the transmitter's clock, fast
DELAY = 0.3  # the file starts 0.3 s into the connection
SENTENCES = ("The quick brown fox jumps over the lazy dog.", "Radio signals travel far at night.", "Please confirm the time of the next broadcast.")


def _speech() -> list[Utterance]:
    tts = pytest.importorskip("streamkit.data.tts")
    try:
        tts.require_espeak()
    except tts.EspeakMissingError:
        pytest.skip("espeak-ng is not installed")
    out = []
    for i, text in enumerate(SENTENCES):
        x = 0.5 * tts.synthesize(text, "en", out_rate=8000)
        out.append(Utterance(f"s{i}", x.astype(np.float32), speech_intervals(x, 8000)))
    return out


def test_play_spec_parses_ppm_and_delay(tmp_path: Path) -> None:
    sf.write(tmp_path / "a.wav", np.zeros(800, dtype=np.float32), 8000)
    p = argparse.ArgumentParser()
    add_emulator_arguments(p)
    cfg = config_from_args(p.parse_args(["--no-default-stations", "--play", f"7100:{tmp_path / 'a.wav'}:40:0.3"]))
    fn = cfg.signals[7100.0]
    assert isinstance(fn, FilePlayback) and fn.ppm == 40.0 and fn.delay_s == 0.3 and fn.file_rate == 8000.0
    with pytest.raises(ValueError, match="no such file"):
        config_from_args(p.parse_args(["--play", f"7100:{tmp_path / 'nope.wav'}"]))


def test_playback_is_exact_per_index() -> None:
    x = np.sin(2 * np.pi * 440 * np.arange(8000) / 8000)
    pb = FilePlayback(x, 8000, ppm=100.0, delay_s=0.1)
    whole = pb(6000, 0, RATE, False)
    parts = np.concatenate([pb(1000, 0, RATE, False), pb(2500, 1000, RATE, False), pb(2500, 3500, RATE, False)])
    np.testing.assert_array_equal(whole, parts)
    assert np.all(whole[: int(0.1 * RATE) - 40] == 0)  # silent before the delay


def test_emulator_monitor_align_recovers_the_parallel_corpus(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    tx, sched = build(_speech(), 8000, per_sequence=2, gap_s=(0.5, 0.5))
    write_transmission(tmp_path / "tx.wav", tx, sched)
    chan = ChannelParams(profile="quiet", delay_ms=0.5, doppler_hz=0.1, snr_db=20.0, seed=3)
    rx8 = simulate(tx, chan, apply_rate_offset=False).received
    sf.write(tmp_path / "onair.wav", rx8, 8000, subtype="FLOAT")

    p = argparse.ArgumentParser()
    add_emulator_arguments(p)
    cfg = config_from_args(
        p.parse_args(["--no-default-stations", "--port", "0", "--speed", "10", "--play", f"7100:{tmp_path / 'onair.wav'}:{PPM}:{DELAY}"])
    )
    duration = round(sched.samples / 8000 * (1 - PPM * 1e-6) + DELAY + 1.0, 1)
    with EmulatorThread(config=cfg) as t:
        rc = cli.main(["monitor", "--station", f"127.0.0.1:{t.port}:7100:lsb", "--record", str(tmp_path / "rec"), "--events", str(tmp_path / "ev"),
                       "--duration", str(duration), "--quiet"])  # fmt: skip
    assert rc == 0, capsys.readouterr()
    (wav,) = (tmp_path / "rec").glob("*.wav")
    capsys.readouterr()
    rc = cli.main(
        ["align", "--reference", str(tmp_path / "tx.json"), "--received", str(wav), "--out", str(tmp_path / "out"), "--nominal-rate", "12000"]
    )
    out = capsys.readouterr().out
    assert rc == 0, out
    rep = json.loads((tmp_path / "out" / "report.json").read_text())
    # truth: reference sample k is heard at emulator sample RATE * (DELAY + k / (8000 (1 + PPM)))
    true_sro = (RATE / 12000 / (1 + PPM * 1e-6) - 1) * 1e6  # 59.0 ppm against a nominal 12 kHz
    # Each marker is located within about half the channel's differential delay (two fading paths at
    # -+0.25 ms around the mean, whichever is stronger at that moment pulls the peak), so over the
    # span of the markers the slope is good to (0.5 ms + 0.1 ms) / span.
    span_s = (sched.markers[-1].start - sched.markers[0].start) / 8000
    assert rep["clock"]["sro_ppm"] == pytest.approx(true_sro, abs=0.6e-3 / span_s * 1e6)
    assert [s["status"] for s in rep["sequences"]] == ["accepted", "accepted"]
    errors_ms = []
    for seq in rep["sequences"]:
        for uid, j in seq["rx_starts"].items():
            u = next(u for q in sched.sequences for u in q if u.id == uid)
            errors_ms.append((j - RATE * (DELAY + u.start / (8000 * (1 + PPM * 1e-6)))) / RATE * 1e3)
    assert len(errors_ms) == 3
    assert max(abs(e) for e in errors_ms) < 0.5, errors_ms  # the 0.5 ms alignment-median goal, met by every utterance
    aligned, _ = sf.read(tmp_path / "out" / "audio" / f"{sched.sequences[0][0].id}.wav")
    clean, _ = sf.read(tmp_path / "out" / "clean" / f"{sched.sequences[0][0].id}.wav")
    assert aligned.shape == clean.shape
