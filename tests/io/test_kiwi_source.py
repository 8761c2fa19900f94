"""KiwiSource against the loopback emulator: audio bit-exact, gaps counted, every fault handled."""

from __future__ import annotations

import numpy as np
import pytest

from streamkit.core import events as E
from streamkit.core import tags as T
from streamkit.core.clock import RealTime
from streamkit.core.errors import ConfigError
from streamkit.core.graph import Graph
from streamkit.core.runtime import Runner
from streamkit.core.tags import GapCause
from streamkit.dsp.resample import Resample
from streamkit.io.collect import CollectSink
from streamkit.io.kiwi_emulator import EmulatorThread
from streamkit.io.kiwi_source import Fatal, KiwiSource, Retry, backoff, classify, parse_station, station_name
from streamkit.protocols.kiwi_events import Terminal, TerminalKind

RATE = 12001.188


@pytest.fixture
def emu():
    t = EmulatorThread(speed=8.0)
    t.start()
    yield t
    t.stop()


def run_source(port, *, duration=2.0, faults=None, emu=None, resample=False, **kw):
    if faults and emu is not None:
        emu.call(lambda: emu.emulator.set_faults(spec=faults))
    params = dict(host="127.0.0.1", port=port, freq_khz=7100, mode="lsb", backoff_initial_s=0.05, backoff_cap_s=0.2, stall_s=1.0)
    params.update(kw)
    g = Graph("kiwi-test")
    src = g.add(KiwiSource(**params), name="kiwi")
    sink = g.add(CollectSink(), name="k")
    if resample:
        g.chain(src, g.add(Resample(to_hz=8000), name="rs"), sink)
    else:
        g.connect(src, sink)
    r = Runner(g, RealTime(), duration=duration, keep_events=True, threaded_events=False, stats_interval_s=0)
    st = r.run()
    return sink, r, st, src


def states(r):
    return [(e.payload.state, e.payload.detail) for e in r.events if e.kind == E.SOURCE_STATE]


def sent_frames(emu):
    logs = emu.call(lambda: list(emu.emulator.connections))
    return logs


def test_parse_station_and_name():
    assert parse_station("kiwi.example.org:8073:7100:lsb") == {"host": "kiwi.example.org", "port": 8073, "freq_khz": 7100.0, "mode": "lsb"}
    assert parse_station("h:7100.5") == {"host": "h", "port": 8073, "freq_khz": 7100.5, "mode": "lsb"}
    assert parse_station("h:7100:usb")["mode"] == "usb"
    with pytest.raises(ConfigError):
        parse_station("h:x:7100:lsb")
    with pytest.raises(ConfigError):
        parse_station("justhost")
    assert station_name({"host": "h.x", "port": 8073, "freq_khz": 7100.0, "mode": "lsb"}) == "h.x-8073-7100lsb"


def test_config_rejections():
    with pytest.raises(ConfigError, match="unknown KiwiSDR mode"):
        KiwiSource(host="h", mode="fm2")
    with pytest.raises(ConfigError, match="needs host"):
        KiwiSource()
    with pytest.raises(ConfigError, match="no TLS"):
        KiwiSource(url="wss://h:8073")
    with pytest.raises(ConfigError, match="HF range"):
        KiwiSource(host="h", freq_khz=-1)


def test_classify_and_backoff():
    assert isinstance(classify(Terminal(TerminalKind.BADP, False, "bad password")), Fatal)
    r = classify(Terminal(TerminalKind.TOO_BUSY, True, "busy", retry_after=15.0))
    assert isinstance(r, Retry) and r.min_delay == 15.0
    assert isinstance(classify(ConnectionRefusedError("refused")), Retry)
    d = backoff(1.0, factor=2.0, cap=5.0, jitter=0.0)
    assert [next(d) for _ in range(5)] == [1.0, 2.0, 4.0, 5.0, 5.0]


def test_pcm_audio_is_bit_exact_and_rate_comes_from_the_server(emu):
    sink, r, st, src = run_source(emu.port, duration=1.5, compression=False, expected_rate=12000)
    logs = sent_frames(emu)
    sent = np.concatenate([f.decoded for f in logs[0].frames if f.status == "sent"]).astype(np.float32) / 32768.0
    got = sink.samples[:, 0]
    assert len(got) == round(1.5 * RATE)
    np.testing.assert_array_equal(got, sent[: len(got)])
    fmt = [t for t in sink.tags if t.key == T.FORMAT]
    assert fmt and fmt[0].offset == 0 and float(fmt[0].value.spec.rate) == RATE  # 12000 negotiated, 12001.188 announced
    assert [s for s, _ in states(r)][:3] == ["connecting", "open", "streaming"]
    assert any(t.key == T.TIME and t.value.source == "host" for t in sink.tags)


def test_adpcm_audio_matches_reference_decode_across_frames(emu):
    sink, r, st, src = run_source(emu.port, duration=1.0)
    logs = sent_frames(emu)
    ref = np.concatenate([f.decoded for f in logs[0].frames if f.status == "sent"]).astype(np.float32) / 32768.0
    got = sink.samples[:, 0]
    np.testing.assert_array_equal(got, ref[: len(got)])


def test_resampled_to_8k_follows_the_announced_rate(emu):
    sink, r, st, src = run_source(emu.port, duration=2.0, resample=True, expected_rate=12000)
    n_in = round(2.0 * RATE)
    assert abs(sink.samples.shape[0] - n_in * 8000 / RATE) <= 1.5
    assert st["blocks"]["rs"]["items_in"] == n_in


def test_sequence_gaps_become_counted_tags_and_events(emu):
    sink, r, st, src = run_source(emu.port, duration=2.0, faults="drop_every=5", compression=False, emu=emu)
    gaps = [t for t in sink.tags if t.key == T.GAP]
    assert gaps and all(t.value.cause == GapCause.SEQ_GAP and t.value.lost == 512 for t in gaps)
    # frames 5, 10, 15 ... are missing: the first gap is after frames 1-4, then every 4 frames
    assert [t.offset for t in gaps[:3]] == [4 * 512, 8 * 512, 12 * 512]
    logs = sent_frames(emu)
    sent = np.concatenate([f.decoded for f in logs[0].frames if f.status == "sent"]).astype(np.float32) / 32768.0
    np.testing.assert_array_equal(sink.samples[:, 0], sent[: sink.samples.shape[0]])  # no zero-fill
    ev = [e for e in r.events if e.kind == E.STREAM_GAP]
    assert len(ev) == len(gaps) and st["dropped_items"] == 512 * len(gaps)


def test_kick_is_final_with_one_clear_message(emu):
    sink, r, st, src = run_source(emu.port, duration=5.0, faults="kick=0.2", emu=emu)
    assert src.fatal_message and "kiwi_kick" in src.fatal_message
    assert ("fatal", src.fatal_message) in states(r)
    assert 0 < sink.samples.shape[0] < 5 * RATE


def test_bad_password_is_fatal(emu):
    sink, r, st, src = run_source(emu.port, duration=3.0, faults="badp=1", emu=emu)
    assert "badp" in (src.fatal_message or "")
    assert sink.samples.shape[0] == 0 and st["state"] == "stopped"


def test_too_busy_is_retried_then_gives_up(emu):
    quick = lambda cause: Retry("busy", 0.0) if isinstance(cause, Terminal) and cause.kind == TerminalKind.TOO_BUSY else classify(cause)  # noqa: E731
    sink, r, st, src = run_source(emu.port, duration=3.0, faults="too_busy", emu=emu, max_retries=2, classify_fn=quick)
    s = [x for x, _ in states(r)]
    assert s.count("retrying") == 2 and s[-2] == "fatal" or s[-1] == "fatal"
    assert "gave up after 3 attempts" in (src.fatal_message or "")


def test_connection_closed_mid_frame_reconnects_with_a_gap(emu):
    emu.call(lambda: emu.emulator.set_faults(spec="close_mid_frame=6"))
    sink, r, st, src = run_source(emu.port, duration=3.0, compression=False, max_retries=5)
    gaps = [t for t in sink.tags if t.key == T.GAP]
    assert any(t.value.cause == GapCause.RECONNECT for t in gaps)
    assert "retrying" in [x for x, _ in states(r)] and st["reconnects"] >= 1
    # every connection's sent audio arrives in order, nothing invented
    assert sink.samples.shape[0] == round(3.0 * RATE)
    assert any(t.key == T.TIME for t in sink.tags if t.offset > 0)  # a new anchor after the reconnect


def test_stall_triggers_watchdog_reconnect(emu):
    emu.call(lambda: emu.emulator.set_faults(spec="stall=0.3"))  # every connection goes silent after 0.3 s
    sink, r, st, src = run_source(emu.port, duration=4.0, stall_s=0.4)
    detail = " ".join(d for _, d in states(r))
    assert "stalled" in detail
    assert [x for x, _ in states(r)].count("retrying") >= 1
    assert any(t.key == T.GAP and t.value.cause == GapCause.RECONNECT for t in sink.tags)
    assert sink.samples.shape[0] == round(4.0 * RATE)  # the stream went on after the reconnects


def test_malformed_and_text_frames_are_counted_and_skipped(emu):
    emu.call(lambda: emu.emulator.set_faults(spec="malformed=3:truncated,6:bad_tag,9:text,12:odd_payload"))
    sink, r, st, src = run_source(emu.port, duration=1.5, compression=False)
    assert src.stats["violations"] >= 3
    warnings = [d for s, d in states(r) if s == "warning"]
    assert any("violation" in w for w in warnings)
    gaps = [t for t in sink.tags if t.key == T.GAP]
    assert sum(t.value.lost for t in gaps) >= 3 * 512  # the skipped frames are counted as lost


def test_absurd_sample_rate_is_fatal(emu):
    sink, r, st, src = run_source(emu.port, duration=2.0, faults="sample_rate=abc", emu=emu)
    assert src.fatal_message and "protocol_error" in src.fatal_message


def test_nothing_listening_retries_with_backoff_then_gives_up():
    sink, r, st, src = run_source(1, duration=2.0, max_retries=2, open_timeout_s=0.5)
    s = [x for x, _ in states(r)]
    assert s.count("connecting") == 3 and "fatal" in s
    assert sink.samples.shape[0] == 0


def test_iq_mode_gives_complex_samples_and_gps_anchors():
    with EmulatorThread(speed=8.0, gps_solution=0) as t:
        sink, r, st, src = run_source(t.port, duration=1.0, mode="iq", freq_khz=10000)
    assert sink.samples.dtype == np.complex64 and sink.samples.shape[0] == round(RATE)
    assert any(tg.key == T.TIME and tg.value.source == "gps" for tg in sink.tags)


def test_server_that_never_sends_audio_is_closed_by_the_watchdog():
    """A WebSocket server that accepts and then says nothing: the no-data watchdog ends each session."""
    import threading

    from websockets.sync.server import serve

    stop = threading.Event()

    def handler(ws):
        stop.wait(10)

    with serve(handler, "127.0.0.1", 0) as server:
        port = server.socket.getsockname()[1]
        th = threading.Thread(target=server.serve_forever, daemon=True)
        th.start()
        try:
            sink, r, st, src = run_source(port, duration=5.0, stall_s=0.3, max_retries=1)
        finally:
            stop.set()
            server.shutdown()
    s = states(r)
    assert [x for x, _ in s].count("open") == 2 and any("stalled" in d for _, d in s)
    assert "gave up after 2 attempts" in (src.fatal_message or "") and sink.samples.shape[0] == 0
