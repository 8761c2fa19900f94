"""``corpus transmission`` + ``align``: the schedule, the sanity checks, SRO and delay recovery, CLI errors."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from streamkit.cli import main
from streamkit.data.alignment import AlignOptions, align
from streamkit.data.transmission import Utterance, build, load_schedule, speech_intervals, write_transmission
from streamkit.dsp.align.clock import interpolate

FS = 8000
RX = 12000.0


def _utterances(n: int, seed: int = 0) -> list[Utterance]:
    """Speech-like stand-ins: band-limited noise bursts with syllable-rate envelopes, 1.2-2 s."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        m = int(rng.uniform(1.2, 2.0) * FS)
        spec = np.fft.rfft(rng.standard_normal(m))
        f = np.fft.rfftfreq(m, 1 / FS)
        spec[(f < 300) | (f > 3000)] = 0
        x = np.fft.irfft(spec, m)
        env = 0.5 + 0.5 * np.sin(2 * np.pi * 4.0 * np.arange(m) / FS + rng.uniform(0, 6))
        x = (0.2 * x / np.std(x) * env).astype(np.float32)
        out.append(Utterance(f"u{i}", x, speech_intervals(x, FS)))
    return out


def _transmission(n_seq: int, per: int = 2) -> tuple[np.ndarray, object]:
    return build(_utterances(n_seq * per), FS, per_sequence=per, gap_s=(0.5, 0.5))


def _receive(tx: np.ndarray, ppm_rx: float, delay_s: float, noise: float = 0.01, seed: int = 0) -> tuple[np.ndarray, float]:
    """The reception at a nominal 12 kHz whose clock is ``ppm_rx`` fast: rx[j] = tx((j / RX_true - delay) * FS)."""
    rx_true = RX * (1 + ppm_rx * 1e-6)
    n = int((tx.size / FS + delay_s + 1) * rx_true)
    pos = (np.arange(n) / rx_true - delay_s) * FS
    y = interpolate(tx, pos, ratio=FS / rx_true).astype(np.float64)
    y += noise * np.random.default_rng(seed).standard_normal(n)
    return y, rx_true


def _truth(start: int, ppm_rx: float, delay_s: float) -> float:
    return (delay_s + start / FS) * RX * (1 + ppm_rx * 1e-6)


def test_schedule_layout_and_round_trip(tmp_path: Path) -> None:
    tx, sched = _transmission(2)
    m = sched.markers
    assert [x.id for x in m] == [0, 1, 2]
    first = sched.sequences[0][0]
    assert first.start == m[0].start + 4 * FS + 5 * FS  # marker, 5 s silence
    last = sched.sequences[0][-1]
    assert m[1].start == last.start + last.samples + int(0.5 * FS) + FS  # utterance gap, 1 s after the sequence
    paths = write_transmission(tmp_path / "tx.wav", tx, sched)
    back, audio = load_schedule(paths["schedule"])
    assert back.markers == sched.markers and back.sequences == sched.sequences
    assert audio == tmp_path / "tx.wav"
    assert "SPEAKER tx 1" in paths["rttm"].read_text()


def test_align_recovers_sro_and_delay() -> None:
    tx, sched = _transmission(2)
    rx, _ = _receive(tx, 56.0, 0.3)
    res = align(sched, tx, rx, RX)
    clock = res.report["clock"]
    assert clock["sro_ppm"] == pytest.approx(56.0, abs=1.0)
    assert all(s["status"] == "accepted" for s in res.report["sequences"])
    for seq in res.report["sequences"]:
        for uid, j in seq["rx_starts"].items():
            u = next(u for q in sched.sequences for u in q if u.id == uid)
            assert abs(j - _truth(u.start, 56.0, 0.3)) / RX * 1e3 < 0.1  # ms
    y, clean = res.utterances[sched.sequences[1][0].id]
    assert y.shape == clean.shape
    assert np.corrcoef(y, clean)[0, 1] > 0.99


def test_missing_marker_rejects_its_two_sequences() -> None:
    tx, sched = _transmission(3)
    rx, rx_true = _receive(tx, 0.0, 0.2)
    j = int(_truth(sched.markers[1].start, 0.0, 0.2))
    rx[j : j + int(4 * rx_true)] = 0.01 * np.random.default_rng(5).standard_normal(int(4 * rx_true))
    res = align(sched, tx, rx, RX)
    st = [s["status"] for s in res.report["sequences"]]
    assert st == ["rejected", "rejected", "accepted"]
    assert res.report["sequences"][0]["reasons"] == ["marker 1 missing"]
    assert res.report["markers"][1]["status"] == "missing"


def test_weak_marker_is_found_where_the_schedule_puts_it() -> None:
    """A marker buried in noise (score ~0.24, under the global 0.3) is found in the window the other markers predict."""
    tx, sched = _transmission(3)
    rx, rx_true = _receive(tx, 30.0, 0.2)
    j = int(_truth(sched.markers[1].start, 30.0, 0.2))
    n = int(4 * rx_true)
    rx[j - 2000 : j + n + 2000] += 1.3 * np.random.default_rng(7).standard_normal(n + 4000)
    res = align(sched, tx, rx, RX)
    m = res.report["markers"][1]
    assert m["status"] == "ok" and m["search"] == "guided"
    assert 0.2 <= m["score"] < 0.3
    assert abs(m["rx_position"] - _truth(sched.markers[1].start, 30.0, 0.2)) / RX * 1e3 < 0.5  # ms
    assert [s["status"] for s in res.report["sequences"]] == ["accepted"] * 3


def _bury_marker(tx: np.ndarray, sched: object, level: float, keep: bool) -> np.ndarray:
    """The reception (+30 ppm, 0.2 s) with marker 1 under white noise of std ``level`` (or replaced by it)."""
    rx, rx_true = _receive(tx, 30.0, 0.2)
    j = int(_truth(sched.markers[1].start, 30.0, 0.2))
    n = int(4 * rx_true)
    if not keep:
        rx[j : j + n] = 0.0
    rx[j - 2000 : j + n + 2000] += level * np.random.default_rng(7).standard_normal(n + 4000)
    return rx


def test_matched_filter_finds_a_marker_the_mask_misses() -> None:
    """Marker 1 about -11 dB under noise in its band: its mask scores under 0.2 in the predicted
    window, the symbols' matched filter still finds it there, to a fraction of a ms."""
    tx, sched = _transmission(3)
    res = align(sched, tx, _bury_marker(tx, sched, 2.0, keep=True), RX)
    m = res.report["markers"][1]
    assert m["status"] == "ok" and m["search"] == "guided, matched filter"
    assert m["score"] < 0.2 and m["quality"] >= 0.15
    assert abs(m["rx_position"] - _truth(sched.markers[1].start, 30.0, 0.2)) / RX * 1e3 < 0.5  # ms
    assert [s["status"] for s in res.report["sequences"]] == ["accepted"] * 3


def test_weak_markers_confirmed_by_the_matched_filter_anchor_the_search() -> None:
    """Every marker under noise, its mask under the global 0.3 everywhere: two of them, confirmed by
    the matched filter where their masks peak and agreeing with the schedule, anchor the search."""
    tx, sched = _transmission(3)
    rx, rx_true = _receive(tx, 30.0, 0.2)
    n = int(4 * rx_true)
    for k, m in enumerate(sched.markers):
        j = int(_truth(m.start, 30.0, 0.2))
        rx[j - 2000 : j + n + 2000] += 1.4 * np.random.default_rng(20 + k).standard_normal(n + 4000)
    res = align(sched, tx, rx, RX)
    marks = res.report["markers"]
    assert all(m["score"] < 0.3 and m["status"] == "ok" for m in marks)
    assert [m["search"] for m in marks[:2]] == ["global, matched filter"] * 2
    for m, slot in zip(marks, sched.markers):
        assert abs(m["rx_position"] - _truth(slot.start, 30.0, 0.2)) / RX * 1e3 < 0.5  # ms
    assert [s["status"] for s in res.report["sequences"]] == ["accepted"] * 3


@pytest.mark.parametrize("level", [0.5, 2.0])
def test_matched_filter_accepts_no_marker_in_noise(level: float) -> None:
    """Where the schedule puts marker 1 there is only noise: no marker is accepted there."""
    tx, sched = _transmission(3)
    res = align(sched, tx, _bury_marker(tx, sched, level, keep=False), RX)
    assert res.report["markers"][1]["status"] == "missing"
    assert [s["status"] for s in res.report["sequences"]] == ["rejected", "rejected", "accepted"]


def test_lost_samples_put_a_marker_off_schedule() -> None:
    tx, sched = _transmission(4)
    rx, _ = _receive(tx, 0.0, 0.2)
    cut = int(_truth(sched.sequences[3][0].start, 0.0, 0.2))
    rx = np.concatenate([rx[:cut], rx[cut + 2048 :]])  # a frame lost inside sequence 3
    res = align(sched, tx, rx, RX)
    assert [s["status"] for s in res.report["sequences"]] == ["accepted"] * 3 + ["rejected"]
    assert res.report["markers"][4]["status"] == "off schedule"


def test_out_of_order_marker_is_rejected() -> None:
    tx, sched = _transmission(3)
    tx2 = tx.copy()
    m1, m2 = sched.markers[1].start, sched.markers[2].start
    n = 4 * FS
    seg1, seg2 = tx[m1 : m1 + n].copy(), tx[m2 : m2 + n].copy()
    tx2[m1 : m1 + n], tx2[m2 : m2 + n] = seg2, seg1  # markers 1 and 2 swapped on air
    rx, _ = _receive(tx2, 0.0, 0.2)
    res = align(sched, tx, rx, RX)
    statuses = {m["id"]: m["status"] for m in res.report["markers"]}
    assert statuses[0] == "ok" and statuses[3] == "ok"
    assert {statuses[1], statuses[2]} <= {"out of order", "off schedule"} and "out of order" in (statuses[1], statuses[2])
    assert all(s["status"] == "rejected" for s in res.report["sequences"])


def test_recording_gap_from_the_sidecar_rejects_the_sequence() -> None:
    tx, sched = _transmission(2)
    rx, _ = _receive(tx, 0.0, 0.2)
    at = int(_truth(sched.sequences[1][0].start, 0.0, 0.2))
    res = align(sched, tx, rx, RX, gaps=[(at, 0)], options=AlignOptions())
    assert [s["status"] for s in res.report["sequences"]] == ["accepted", "rejected"]
    assert "recording gap" in res.report["sequences"][1]["reasons"][0]


# --------------------------------------------------------------------------- CLI
def _write_utts(d: Path) -> None:
    d.mkdir()
    for u in _utterances(4):
        sf.write(d / f"{u.name}.wav", u.audio, FS)


def test_cli_transmission_then_align(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _write_utts(tmp_path / "utt")
    assert (
        main(
            [
                "corpus",
                "transmission",
                "--utterances",
                str(tmp_path / "utt"),
                "--out",
                str(tmp_path / "tx.wav"),
                "--per-sequence",
                "2",
                "--gap",
                "0.5",
            ]
        )
        == 0
    )
    tx, _ = sf.read(tmp_path / "tx.wav", dtype="float32")
    rx, _ = _receive(tx, 40.0, 0.1)
    sf.write(tmp_path / "rx.wav", rx.astype(np.float32), 12000, subtype="FLOAT")
    capsys.readouterr()
    assert main(["align", "--reference", str(tmp_path / "tx.json"), "--received", str(tmp_path / "rx.wav"), "--out", str(tmp_path / "out")]) == 0
    out = capsys.readouterr().out
    assert "markers: 3/3 ok" in out and "sequences: 2/2 accepted" in out
    rep = json.loads((tmp_path / "out" / "report.json").read_text())
    assert rep["clock"]["sro_ppm"] == pytest.approx(40.0, abs=1.0)
    assert len(list((tmp_path / "out" / "audio").glob("*.wav"))) == 4
    assert len(list((tmp_path / "out" / "clean").glob("*.wav"))) == 4
    assert (tmp_path / "out" / "labels.rttm").read_text().count("SPEAKER") >= 4


@pytest.mark.parametrize(
    "case",
    ["missing_reference", "missing_received", "corrupt_wav", "wrong_shape_json", "not_json", "bad_speech"],
)
def test_cli_bad_input_is_one_line_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str) -> None:
    tx, sched = _transmission(1)
    paths = write_transmission(tmp_path / "tx.wav", tx, sched)
    ref, rx = paths["schedule"], tmp_path / "rx.wav"
    sf.write(rx, tx, FS)
    if case == "missing_reference":
        ref = tmp_path / "nope.json"
    elif case == "missing_received":
        rx = tmp_path / "nope.wav"
    elif case == "corrupt_wav":
        rx.write_bytes(b"RIFF\x00\x00\x00\x00WAVEjunk")
    elif case == "wrong_shape_json":
        ref.write_text(
            json.dumps({"format": "streamkit-transmission/1", "rate": 8000, "samples": 1, "audio": "tx.wav", "markers": [], "sequences": []})
        )
    elif case == "not_json":
        ref.write_text("{nope")
    elif case == "bad_speech":
        d = json.loads(ref.read_text())
        d["sequences"][0]["utterances"][0]["speech"] = [[1, "x"]]
        ref.write_text(json.dumps(d))
    capsys.readouterr()
    assert main(["align", "--reference", str(ref), "--received", str(rx), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("streamkit: error: ")
    assert not (tmp_path / "out" / "report.json").exists()


def test_cli_transmission_bad_directory(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "empty").mkdir()
    assert main(["corpus", "transmission", "--utterances", str(tmp_path / "empty"), "--out", str(tmp_path / "tx.wav")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no .wav or .flac file" in err[0]
