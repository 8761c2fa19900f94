"""Recording a KiwiSDR at the rate its server reports (GPS-corrected 11999.028 / 12001.188 Hz, a wide
channel's 20250.3 Hz), and across a reconnect to a server reporting another rate."""

from __future__ import annotations

import threading
import time
from fractions import Fraction

import pytest
import soundfile as sf

from streamkit import cli
from streamkit.core.clock import RealTime
from streamkit.core.graph import Graph
from streamkit.core.runtime import Runner
from streamkit.io.jsonl_events import read_events
from streamkit.io.kiwi_emulator import EmulatorThread
from streamkit.io.kiwi_source import KiwiSource
from streamkit.io.wav_sink import WavSink, read_sidecar


@pytest.mark.parametrize("rate", ["11999.028", "12001.188", "20250.3"])
def test_monitor_records_at_the_rate_the_server_reports(tmp_path, rate, capsys):
    rec, ev = tmp_path / "rec", tmp_path / "ev"
    with EmulatorThread(sample_rate=float(rate), speed=4.0) as t:
        rc = cli.main(
            ["monitor", "--station", f"127.0.0.1:{t.port}:7100:lsb", "--record", str(rec), "--events", str(ev), "--duration", "2", "--quiet"]
        )
    assert rc == 0, capsys.readouterr()
    (wav,) = rec.glob("*.wav")
    info = sf.info(wav)
    side = read_sidecar(wav)
    assert info.samplerate == round(float(rate)) and side["rate"] == Fraction(rate) and side["file_rate"] == info.samplerate
    assert info.frames == side["items"] == round(2 * float(rate))  # 2 s of stream delivered; losses are reported apart
    lost = sum(e["payload"]["lost"] or 0 for e in read_events(next(ev.glob("*.jsonl"))) if e["kind"] == "stream.gap")
    assert side["lost_items"] == lost
    assert side["next"] is None


def test_a_reconnect_to_another_rate_goes_on_in_a_new_file(tmp_path):
    """The server closes after 8 frames (of 2048 samples); the client reconnects and now hears 11999.028 Hz."""
    p = tmp_path / "st.wav"
    with EmulatorThread(speed=2.0) as t:
        t.call(lambda: t.emulator.set_faults(spec="max_frames=8"))
        g = Graph("st")
        kiwi = g.add(KiwiSource(host="127.0.0.1", port=t.port, freq_khz=7100, mode="lsb", backoff_initial_s=0.05, backoff_cap_s=0.2), name="kiwi")
        wav = g.add(WavSink(path=str(p)), name="wav")
        g.connect(kiwi, wav)
        r = Runner(g, RealTime(), duration=3.0, keep_events=True, stats_interval_s=0)
        out: dict = {}
        th = threading.Thread(target=lambda: out.setdefault("st", r.run()), daemon=True)
        th.start()
        deadline = time.monotonic() + 60
        while wav.items == 0 and th.is_alive() and time.monotonic() < deadline:  # the first connection's rate is known
            time.sleep(0.01)
        t.call(lambda: t.emulator.set_faults(spec="sample_rate=11999.028"))
        th.join(timeout=60)
    assert not th.is_alive() and out["st"]["state"] == "stopped" and not out["st"]["fatal"]
    s0, s1 = read_sidecar(p), read_sidecar(tmp_path / "st.1.wav")
    assert s0["rate"] == Fraction("12001.188") and s0["next"] == "st.1.wav" and sf.info(p).samplerate == 12001
    assert s1["rate"] == Fraction("11999.028") and s1["previous"] == "st.wav" and sf.info(tmp_path / "st.1.wav").samplerate == 11999
    assert s1["stream_offset"] == s0["items"] and sf.info(p).frames == s0["items"] and sf.info(tmp_path / "st.1.wav").frames == s1["items"]
    split = [e for e in r.events if e.kind == "record.file"]
    assert len(split) == 1 and split[0].payload["previous"] == str(p) and "11999" in split[0].payload["reason"]
