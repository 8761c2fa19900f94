"""WavSink: round trips, odd rates, IQ, clipping, and the sidecar that lists gaps and anchors."""

from __future__ import annotations

import json
from fractions import Fraction

import numpy as np
import pytest
import soundfile as sf

from streamkit.core.errors import ConfigError
from streamkit.core.graph import Graph
from streamkit.core.runtime import Runner
from streamkit.core.tags import Gap, GapCause
from streamkit.io import DemoSignal, FileSource, VectorSource, WavSink, read_sidecar
from streamkit.io.synthetic import KIWI_RATE

rng = np.random.default_rng(0)


def record(x, rate, path, sizes=500, gaps=(), tags=(), utc_ns=7, **kw):
    g = Graph("rec")
    g.add(VectorSource(samples=x, rate=rate, sizes=sizes, gaps=gaps, tags=tags, utc_ns=utc_ns), name="src")
    w = g.add(WavSink(path=str(path), **kw), name="wav")
    g.connect("src", "wav")
    st = Runner(g, stats_interval_s=0).run()
    return w, st


def test_instance():
    WavSink(path="x.wav")


@pytest.mark.parametrize(
    "kw",
    [{"path": ""}, {"path": "a.wav", "subtype": "ULAW"}, {"path": "a.mp4"}, {"path": "a.flac", "subtype": "FLOAT"}],
)
def test_rejects_bad_config(kw):
    with pytest.raises(ConfigError):
        WavSink(**kw)


def test_float_round_trip_is_exact_at_the_kiwi_rate(tmp_path):
    x = (0.3 * rng.standard_normal((12_345, 1))).astype(np.float32)
    p = tmp_path / "a.wav"
    record(x, KIWI_RATE, p, subtype="FLOAT")
    y, file_rate = sf.read(p, dtype="float32", always_2d=True)
    assert file_rate == 12001  # int(round(12001.188)), as kiwirecorder writes it
    np.testing.assert_array_equal(y, x)
    side = read_sidecar(p)
    assert side["rate"] == Fraction(3000297, 250) and side["file_rate"] == 12001
    assert side["items"] == 12_345 and side["channels"] == 1 and side["layout"] == "audio" and side["subtype"] == "FLOAT"
    # the sidecar is plain JSON with the rate as an exact string
    assert json.loads((tmp_path / "a.wav.json").read_text())["rate"] == "3000297/250"


def test_pcm16_round_trip_multichannel(tmp_path):
    x = np.clip(0.3 * rng.standard_normal((5000, 3)), -0.9, 0.9).astype(np.float32)
    p = tmp_path / "b.wav"
    record(x, 44100, p)
    info = sf.info(p)
    assert info.subtype == "PCM_16" and info.channels == 3 and info.samplerate == 44100
    y, _ = sf.read(p, dtype="float32", always_2d=True)
    np.testing.assert_allclose(y, x, atol=1.0 / 32768)


def test_pcm_clips_and_counts_out_of_range_values(tmp_path):
    x = np.array([0.5, 1.5, -2.0, 0.25, 1.0], np.float32)[:, None]
    p = tmp_path / "c.wav"
    w, _ = record(x, 8000, p)
    y, _ = sf.read(p, dtype="float32", always_2d=True)
    assert y[1, 0] == pytest.approx(1.0, abs=1e-4) and y[2, 0] == -1.0  # clipped, not wrapped
    assert read_sidecar(p)["clipped"] == 2


def test_iq_is_written_as_two_channels(tmp_path):
    z = (rng.standard_normal(3000) + 1j * rng.standard_normal(3000)).astype(np.complex64) * 0.2
    p = tmp_path / "iq.wav"
    record(z[:, None], 12000, p, subtype="FLOAT")
    y, _ = sf.read(p, dtype="float32", always_2d=True)
    assert y.shape == (3000, 2)
    np.testing.assert_array_equal(y[:, 0], z.real)
    np.testing.assert_array_equal(y[:, 1], z.imag)
    side = read_sidecar(p)
    assert side["layout"] == "iq" and side["channels"] == 1 and side["file_channels"] == 2 and side["dtype"] == "complex64"


def test_sidecar_lists_every_gap_and_anchor(tmp_path):
    x = np.zeros((4000, 1), np.float32)
    gaps = [(1000, Gap(lost=512, cause=GapCause.SEQ_GAP)), (2500, Gap(lost=None, cause=GapCause.XRUN, detail="input_overflow"))]
    p = tmp_path / "d" / "e" / "rec.wav"  # parent directories are created
    record(x, 8000, p, gaps=gaps, sizes=333)
    side = read_sidecar(p)
    assert side["items"] == 4000 and side["gaps"] == 2 and side["lost_items"] == 512
    assert side["tags"] == [
        {"offset": 0, "key": "sk:time", "utc_ns": 7, "source": "synthetic", "uncertainty_ns": 0},
        {"offset": 1000, "key": "sk:gap", "cause": "seq_gap", "lost": 512, "filled": False, "detail": ""},
        {"offset": 2500, "key": "sk:gap", "cause": "xrun", "lost": None, "filled": False, "detail": "input_overflow"},
    ]


def test_demo_with_dropouts_recording_round_trips_through_file_source(tmp_path):
    p = tmp_path / "demo.wav"
    g = Graph("demo")
    src = g.add(DemoSignal(duration_s=5.0, seed=3, dropouts=2.0, utc_ns=10**18), name="src")
    g.add(WavSink(path=str(p), subtype="FLOAT"), name="wav")
    g.connect("src", "wav")
    st = Runner(g, stats_interval_s=0).run()
    side = read_sidecar(p)
    gap_offsets = [t["offset"] for t in side["tags"] if t["key"] == "sk:gap"]
    assert len(gap_offsets) == 2 and side["lost_items"] == 1024 == st["dropped_items"]
    anchors = [t for t in side["tags"] if t["key"] == "sk:time"]
    assert [a["offset"] for a in anchors] == [0, *gap_offsets]
    # and the recording plays back as the same items (at the file's integer rate)
    g2 = Graph("play")
    g2.add(FileSource(path=str(p)), name="f")
    from streamkit.io import CollectSink

    k = g2.add(CollectSink(), name="k")
    g2.connect("f", "k")
    Runner(g2, stats_interval_s=0).run()
    ref = DemoSignal(duration_s=5.0, seed=3, dropouts=2.0, utc_ns=10**18)
    ref.start(None)
    np.testing.assert_array_equal(k.samples, ref.read(10**9, None).samples)
    assert src.truth  # (the truth intervals go with the recording when a test needs them)


def test_flac_output(tmp_path):
    x = np.clip(0.2 * rng.standard_normal((3000, 2)), -0.9, 0.9).astype(np.float32)
    p = tmp_path / "f.flac"
    record(x, 11025, p, subtype="PCM_24")
    info = sf.info(p)
    assert info.format == "FLAC" and info.samplerate == 11025 and info.channels == 2
    y, _ = sf.read(p, dtype="float32", always_2d=True)
    np.testing.assert_allclose(y, x, atol=1e-6)


def test_unwritable_path_is_a_config_error(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(ConfigError, match="cannot create"):
        record(np.zeros((10, 1), np.float32), 8000, blocker / "sub" / "a.wav")


# ---------------------------------------------------------------- the format of the stream, not of the negotiation
def test_a_rate_announced_before_the_first_item_recreates_the_file_at_that_rate(tmp_path):
    from streamkit.core import tags as T
    from streamkit.core.tags import FormatChange
    from streamkit.core.types import StreamSpec

    true = Fraction("11999.028")
    x = (0.1 * rng.standard_normal((6000, 1))).astype(np.float32)
    p = tmp_path / "rec.wav"
    w, st = record(x, KIWI_RATE, p, tags=[(0, T.FORMAT, FormatChange(StreamSpec(true, 1, np.float32)))], subtype="FLOAT")
    assert st["state"] == "stopped" and not st["fatal"]
    info = sf.info(p)
    assert info.samplerate == 11999 and info.frames == 6000
    assert "11999.028" in sf.SoundFile(p).comment  # the exact rate, also in the header's LIST INFO
    side = read_sidecar(p)
    assert side["rate"] == true and side["file_rate"] == 11999 and side["items"] == 6000 and side["next"] is None
    assert not (tmp_path / "rec.1.wav").exists()


def test_a_rate_change_mid_stream_goes_on_in_a_new_file_with_an_event(tmp_path):
    from streamkit.core import events as E
    from streamkit.core import tags as T
    from streamkit.core.tags import FormatChange
    from streamkit.core.types import StreamSpec

    x = (0.1 * rng.standard_normal((9000, 1))).astype(np.float32)
    wide = Fraction("20250.3")
    p = tmp_path / "rec.wav"
    g = Graph("rec")
    g.add(VectorSource(samples=x, rate=KIWI_RATE, sizes=700, tags=[(4000, T.FORMAT, FormatChange(StreamSpec(wide, 1, np.float32)))],
                       gaps=[(6000, Gap(lost=300, cause=GapCause.RECONNECT))], utc_ns=7), name="src")  # fmt: skip
    g.add(WavSink(path=str(p), subtype="FLOAT"), name="wav")
    g.connect("src", "wav")
    r = Runner(g, stats_interval_s=0, keep_events=True, threaded_events=False)
    st = r.run()
    assert st["state"] == "stopped" and not st["fatal"]
    a, _ = sf.read(p, dtype="float32", always_2d=True)
    b, _ = sf.read(tmp_path / "rec.1.wav", dtype="float32", always_2d=True)
    np.testing.assert_array_equal(np.concatenate([a, b]), x)  # nothing lost, nothing added
    assert sf.info(p).samplerate == 12001 and sf.info(tmp_path / "rec.1.wav").samplerate == 20250
    s0, s1 = read_sidecar(p), read_sidecar(tmp_path / "rec.1.wav")
    assert s0["rate"] == Fraction("12001.188") and s0["items"] == 4000 and s0["next"] == "rec.1.wav" and s0["previous"] is None
    assert s1["rate"] == wide and s1["items"] == 5000 and s1["stream_offset"] == 4000 and s1["previous"] == "rec.wav" and s1["next"] is None
    assert [(t["offset"], t["lost"]) for t in s1["tags"] if t["key"] == "sk:gap"] == [(2000, 300)]  # offsets within the file
    ev = [e for e in r.events if e.kind == "record.file"]
    assert len(ev) == 1 and ev[0].span == (4000, 4000)
    assert ev[0].payload["path"] == str(tmp_path / "rec.1.wav") and ev[0].payload["rate"] == str(wide) and "12001.2 Hz to 20250.3 Hz" in ev[0].payload["reason"]
    assert not any(e.kind == E.BLOCK_ERROR for e in r.events)
