"""MicSource with the scripted FakeSoundDevice: order, xruns, overload, anchors, errors, devices."""

from __future__ import annotations

import sys
import threading
import time
from fractions import Fraction
from types import SimpleNamespace

import numpy as np
import pytest

from streamkit.core import events as E
from streamkit.core import tags as T
from streamkit.core.block import SyncBlock
from streamkit.core.clock import RealTime
from streamkit.core.context import Context
from streamkit.core.errors import ConfigError, SourceError
from streamkit.core.graph import Graph
from streamkit.core.runtime import Runner
from streamkit.core.tags import GapCause
from streamkit.io import CollectSink, MicSource, format_devices, list_devices
from streamkit.io import mic_source as mic_mod
from streamkit.testing import FakeSoundDevice
from streamkit.testing.fake_sounddevice import FakeCallbackFlags

RATE = 8000


def ramp(a, b, ch=1):
    x = np.arange(a, b, dtype=np.float32)
    return np.repeat(x[:, None], ch, axis=1) + np.arange(ch, dtype=np.float32)[None, :] * 0.5


def direct(src):
    """Start ``src`` outside a graph; returns its context and the events it emitted."""
    spec = src.negotiate({})["out"]
    events = []
    ctx = Context(src, "t", {}, {"out": spec}, lambda c, kind, payload, span, port: events.append((kind, payload)), notify=threading.Event())
    src.start(ctx)
    return ctx, events


def read_all(src, ctx):
    parts, tags = [], []
    while True:
        r = src.read(1 << 30, ctx)
        if r is None or (r.samples.shape[0] == 0 and not r.tags):
            break
        parts.append(r.samples)
        tags.extend(r.tags)
    return (np.concatenate(parts) if parts else np.zeros((0, 1), np.float32)), tags


class NoTouch:
    """A backend that fails the test if anything is looked up on it."""

    def __getattr__(self, name):
        raise AssertionError(f"backend.{name} used")


# ------------------------------------------------------------------------------------ config
def test_instance():
    MicSource(backend=FakeSoundDevice())


@pytest.mark.parametrize(
    "kw",
    [{"channels": 0}, {"latency": "medium"}, {"latency": -1.0}, {"buffer_s": 0}, {"blocksize": -1}, {"device": 1.5}, {"anchor_every_s": 0}],
)
def test_rejects_bad_config(kw):
    with pytest.raises(ConfigError):
        MicSource(**kw)


def test_backend_is_not_a_graph_parameter():
    src = MicSource(rate=16000, device="usb", backend=FakeSoundDevice())
    assert src.params() == {"rate": 16000, "device": "usb"}
    g = Graph("g")
    g.add(src, name="mic")
    g.add(CollectSink(), name="k")
    g.connect("mic", "k")
    assert g.to_spec()["blocks"]["mic"] == {"type": "io.mic", "rate": 16000, "device": "usb"}


def test_negotiate_with_explicit_rate_does_not_touch_the_device():
    spec = MicSource(rate="12001.188", channels=2, backend=NoTouch()).negotiate({})["out"]
    assert spec.rate == Fraction(3000297, 250) and spec.channels == 2 and spec.dtype == np.float32


def test_negotiate_without_rate_asks_the_device():
    fake = FakeSoundDevice(devices=[{"name": "USB Audio", "index": 0, "hostapi": 0, "max_input_channels": 1,
                                     "max_output_channels": 0, "default_samplerate": 44100.0}])  # fmt: skip
    assert MicSource(backend=fake).negotiate({})["out"].rate == Fraction(44100)
    assert not fake.streams  # asked, not opened


# ------------------------------------------------------------------------------------ data path
def test_samples_arrive_in_order_with_any_block_size():
    fake = FakeSoundDevice()
    src = MicSource(rate=RATE, channels=2, backend=fake)
    ctx, events = direct(src)
    st = fake.streams[0]
    assert st.active and st.samplerate == RATE and st.channels == 2 and st.blocksize == 0 and st.latency == pytest.approx(0.0929)
    pos, got = 0, []
    for n in (1, 160, 7, 512, 33, 1000):
        st.feed(ramp(pos, pos + n, 2))
        pos += n
        if n % 2:  # read now and then, not after every callback
            got.append(read_all(src, ctx)[0])
    got.append(read_all(src, ctx)[0])
    y = np.concatenate(got)
    np.testing.assert_array_equal(y, ramp(0, pos, 2))
    assert src.counters()["callbacks"] == 6 and src.counters()["frames"] == pos
    assert events[0][0] == E.SOURCE_STATE and events[0][1].state == "open" and "92.9 ms" in events[0][1].detail
    src.stop()
    assert st.closed


def test_overflow_flags_become_xrun_gaps_at_the_right_offsets():
    fake = FakeSoundDevice()
    src = MicSource(rate=RATE, backend=fake)
    ctx, _ = direct(src)
    st = fake.streams[0]
    st.feed(ramp(0, 100))
    st.feed(ramp(100, 250), input_overflow=True)
    st.feed(ramp(250, 300))
    st.feed(ramp(300, 301), input_overflow=True)
    y, tags = read_all(src, ctx)
    np.testing.assert_array_equal(y, ramp(0, 301))
    gaps = [t for t in tags if t.key == T.GAP]
    assert [(t.offset, t.value.cause, t.value.lost) for t in gaps] == [(100, GapCause.XRUN, None), (300, GapCause.XRUN, None)]
    assert "input_overflow" in gaps[0].value.detail
    anchors = [t for t in tags if t.key == T.TIME]
    assert [t.offset for t in anchors] == [0, 100, 300]  # start, and a fresh anchor after every overflow
    assert all(t.value.source == "device" for t in anchors)
    assert src.overflows == 2


def test_device_anchor_maps_adc_time_to_utc():
    fake = FakeSoundDevice()
    src = MicSource(rate=RATE, backend=fake, anchor_every_s=0.05)  # 400 items
    ctx, _ = direct(src)
    st = fake.streams[0]
    before = time.time_ns()
    for i in range(10):
        st.feed(ramp(i * 100, (i + 1) * 100))
    after = time.time_ns()
    _, tags = read_all(src, ctx)
    anchors = [t for t in tags if t.key == T.TIME]
    assert [t.offset for t in anchors] == [0, 400, 800]  # periodic anchors
    # the fake reports currentTime = adc + 0.0929 s: item 0 was captured 92.9 ms before "now"
    a0 = anchors[0].value
    assert a0.source == "device"
    assert before - 92_900_000 - 5_000_000 <= a0.utc_ns <= after - 92_900_000 + 5_000_000


def test_host_anchor_when_the_device_reports_no_times():
    fake = FakeSoundDevice()
    src = MicSource(rate=RATE, backend=fake)
    ctx, _ = direct(src)
    now = time.time_ns()
    src._callback(ramp(0, 80), 80, SimpleNamespace(inputBufferAdcTime=0.0, currentTime=0.0), FakeCallbackFlags())
    _, tags = read_all(src, ctx)
    a = tags[0].value
    assert tags[0].key == T.TIME and a.source == "host" and a.uncertainty_ns > 0
    assert abs(a.utc_ns - (now - int((80 / RATE + 0.0929) * 1e9))) < 20_000_000


def test_runner_realtime_counts_xruns_and_emits_events():
    fake = FakeSoundDevice()
    g = Graph("mic")
    src = g.add(MicSource(rate=RATE, backend=fake), name="mic")
    sink = g.add(CollectSink(), name="k")
    g.connect(src, sink)
    r = Runner(g, mode=RealTime(), duration=0.5, keep_events=True, threaded_events=False, stats_interval_s=0)
    r.start()
    st = fake.streams[0]
    total = int(0.5 * RATE)

    def feed():
        for i in range(0, total, 160):
            st.feed(ramp(i, i + 160), input_overflow=i in (800, 2400))
            time.sleep(0.001)

    th = threading.Thread(target=feed)
    th.start()
    stats = r.run()
    th.join()
    np.testing.assert_array_equal(sink.samples, ramp(0, total))
    gaps = [t for t in sink.tags if t.key == T.GAP]
    assert [(t.offset, t.value.cause) for t in gaps] == [(800, GapCause.XRUN), (2400, GapCause.XRUN)]
    xr = [e for e in r.events if e.kind == E.STREAM_XRUN]
    assert [e.payload.count for e in xr] == [1, 2] and [e.span[0] for e in xr] == [800, 2400]
    assert stats["xruns"] == 2 and stats["gaps_by_cause"] == {"xrun": 2}
    assert [t.value.source for t in sink.tags if t.key == T.TIME][0] == "device"
    states = [e.payload.state for e in r.events if e.kind == E.SOURCE_STATE]
    assert states == ["open", "closed"]
    assert st.closed  # the runner's stop() closed the stream


def test_slow_consumer_drops_oldest_into_an_exact_overload_gap():
    fake = FakeSoundDevice()
    src = MicSource(rate=RATE, backend=fake, buffer_s=0.1)  # ring of 800 items
    ctx, _ = direct(src)
    st = fake.streams[0]
    for i in range(0, 2000, 100):  # 2000 items arrive while nobody reads
        st.feed(ramp(i, i + 100))
    r = src.read(1 << 30, ctx)
    np.testing.assert_array_equal(r.samples, ramp(1200, 2000))  # the newest 800 survive
    gaps = [t for t in r.tags if t.key == T.GAP]
    assert [(t.offset, t.value.cause, t.value.lost) for t in gaps] == [(0, GapCause.OVERLOAD, 1200)]
    anchor = [t for t in r.tags if t.key == T.TIME][0]
    assert anchor.offset == 0 and anchor.value.source == "device"  # re-timed to the first surviving item
    assert src.counters()["dropped"] == 1200
    st.feed(ramp(2000, 2100))
    r = src.read(1 << 30, ctx)
    assert not [t for t in r.tags if t.key == T.GAP] and r.samples[0, 0] == 2000


def test_slow_graph_in_realtime_loses_exactly_what_the_gaps_say():
    class Slow(SyncBlock):
        def work(self, x, ctx):
            time.sleep(0.01)
            return x

    fake = FakeSoundDevice()
    g = Graph("mic")
    src = g.add(MicSource(rate=RATE, backend=fake, buffer_s=0.025), name="mic")  # 200 items: two unread feeds overflow it
    sink = g.add(CollectSink(), name="k")
    g.chain(src, g.add(Slow(), name="slow"), sink)
    r = Runner(g, mode=RealTime(), keep_events=True, threaded_events=False, stats_interval_s=0)
    r.start()
    st = fake.streams[0]
    total = 8000

    def feed():
        for i in range(0, total, 200):
            st.feed(ramp(i, i + 200))
            time.sleep(0.002)
        time.sleep(0.05)
        r.request_stop()

    th = threading.Thread(target=feed)
    th.start()
    stats = r.run()
    th.join()
    got = sink.samples[:, 0]
    lost = sum(t.value.lost for t in sink.tags if t.key == T.GAP)
    assert all(t.value.cause == GapCause.OVERLOAD for t in sink.tags if t.key == T.GAP)
    assert lost > 0 and stats["dropped_items"] == lost
    assert np.all(np.diff(got) > 0)  # in order, oldest dropped
    assert src.counters()["frames"] == total
    # every item up to the last one delivered was either delivered or counted in a gap: nothing vanishes silently
    assert got.shape[0] + lost == int(got[-1]) + 1


def test_wait_wakes_on_data_and_times_out_without():
    fake = FakeSoundDevice()
    src = MicSource(rate=RATE, backend=fake)
    ctx, _ = direct(src)
    t0 = time.monotonic()
    assert src.wait(0.05) is False
    assert time.monotonic() - t0 >= 0.04
    threading.Timer(0.02, lambda: fake.streams[0].feed(ramp(0, 10))).start()
    t0 = time.monotonic()
    assert src.wait(60.0) is True
    assert time.monotonic() - t0 < 60.0  # woken by the data, not by the (hang-guard) timeout
    assert src.read(100, ctx).samples.shape[0] == 10


def test_callback_failure_never_raises_into_portaudio_but_surfaces_on_read():
    fake = FakeSoundDevice()
    src = MicSource(rate=RATE, backend=fake)
    ctx, _ = direct(src)
    fake.streams[0].feed(ramp(0, 10, ch=3))  # 3 channels into a mono ring: the copy fails
    with pytest.raises(SourceError, match="callback failed"):
        src.read(100, ctx)


def test_stop_closes_and_read_drains_then_ends():
    fake = FakeSoundDevice()
    src = MicSource(rate=RATE, backend=fake)
    ctx, _ = direct(src)
    fake.streams[0].feed(ramp(0, 50))
    src.stop()
    assert fake.streams[0].closed
    r = src.read(100, ctx)
    assert r.samples.shape[0] == 50
    assert src.read(100, ctx) is None


# ------------------------------------------------------------------------------------ errors
def test_missing_default_device_is_a_clear_config_error():
    src = MicSource(backend=FakeSoundDevice(devices=[]))
    with pytest.raises(ConfigError, match="no default input device"):
        src.negotiate({})


def test_unknown_device_name_is_a_clear_config_error():
    src = MicSource(device="Focusrite", rate=RATE, backend=FakeSoundDevice())
    src.negotiate({})  # rate given: nothing is checked yet
    with pytest.raises(ConfigError) as ei:
        src.start(None)
    assert "'Focusrite'" in str(ei.value) and "streamkit devices" in str(ei.value) and "\n" not in str(ei.value)


def test_output_only_device_is_rejected():
    with pytest.raises(ConfigError, match="has no input channels"):
        MicSource(device=1, backend=FakeSoundDevice()).negotiate({})
    with pytest.raises(ConfigError, match="3 requested"):
        MicSource(device="micro", channels=3, backend=FakeSoundDevice()).negotiate({})


def test_device_that_cannot_be_opened_is_a_retryable_source_error():
    fake = FakeSoundDevice(fail_open="Device unavailable [PaErrorCode -9985]")
    g = Graph("g")
    g.add(MicSource(rate=RATE, backend=fake), name="mic")
    g.add(CollectSink(), name="k")
    g.connect("mic", "k")
    with pytest.raises(SourceError) as ei:
        Runner(g).run()
    assert ei.value.retryable and "Fake Microphone" in str(ei.value) and "-9985" in str(ei.value)


def test_missing_portaudio_gives_the_install_hint(monkeypatch):
    class NoPortAudio:
        def find_spec(self, name, path=None, target=None):
            if name == "sounddevice":
                raise OSError("PortAudio library not found")
            return None

    monkeypatch.delitem(sys.modules, "sounddevice", raising=False)
    monkeypatch.setattr(sys, "meta_path", [NoPortAudio(), *sys.meta_path])
    with pytest.raises(ConfigError) as ei:
        MicSource().negotiate({})
    msg = str(ei.value)
    assert "PortAudio library not found" in msg and "apt-get install libportaudio2" in msg and "\n" not in msg
    with pytest.raises(ConfigError, match="libportaudio2"):
        list_devices()
    MicSource(rate=RATE).negotiate({})  # an explicit rate needs no PortAudio at build time


def test_real_sounddevice_without_devices_fails_cleanly():
    try:
        import sounddevice as sd
    except OSError:
        pytest.skip("PortAudio not installed")
    if any(d["max_input_channels"] > 0 for d in sd.query_devices()):
        pytest.skip("this machine has an input device")
    with pytest.raises(ConfigError, match="no default input device"):
        MicSource().negotiate({})
    assert isinstance(list_devices(), list)


# ------------------------------------------------------------------------------------ devices
def test_list_and_format_devices():
    fake = FakeSoundDevice()
    devs = list_devices(fake)
    assert [d["name"] for d in devs] == ["Fake Microphone", "Fake Speakers"]
    assert devs[0]["default_input"] and not devs[1]["default_input"]
    assert devs[0]["max_input_channels"] == 2 and devs[0]["default_samplerate"] == 48000.0
    text = format_devices(backend=fake)
    lines = text.splitlines()
    assert lines[1].startswith(">") and "Fake Microphone" in lines[1]
    assert "out only" in lines[2]
    assert "no audio devices" in format_devices([])


def test_portaudio_hint_constant():
    assert "apt-get install libportaudio2" in mic_mod.PORTAUDIO_HINT


def test_xrun_inside_items_dropped_for_overload_is_still_counted():
    # SampleRing discards an XRUN mark that falls inside items it drops; MicSource re-reports it
    fake = FakeSoundDevice()
    g = Graph("mic")
    src = g.add(MicSource(rate=RATE, backend=fake, buffer_s=0.1), name="mic")  # ring of 800 items
    sink = g.add(CollectSink(), name="k")
    g.connect(src, sink)
    r = Runner(g, mode=RealTime(), keep_events=True, threaded_events=False, stats_interval_s=0)
    r.start()
    st = fake.streams[0]
    st.feed(ramp(0, 500))
    st.feed(ramp(500, 1000), input_overflow=True)  # its mark at 500 is dropped with the oldest items
    st.feed(ramp(1000, 1600))
    r.step()
    st.feed(ramp(1600, 1700), input_overflow=True)  # an ordinary xrun afterwards
    r.step()
    r.request_stop()
    stats = r.run()
    np.testing.assert_array_equal(sink.samples, ramp(800, 1700))
    gaps = [(t.offset, t.value.cause, t.value.lost) for t in sink.tags if t.key == T.GAP]
    assert gaps == [(0, GapCause.OVERLOAD, 800), (0, GapCause.XRUN, None), (800, GapCause.XRUN, None)]
    assert stats["xruns"] == 2 == src.overflows
    assert stats["gaps_by_cause"] == {"overload": 1, "xrun": 2} and stats["dropped_items"] == 800
