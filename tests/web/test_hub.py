"""The hub: bounded rings, per-viewer cursors, late joiners, losses counted, audio split at gaps."""

from __future__ import annotations

import json

import numpy as np

from streamkit.core import events as E
from streamkit.core.events import Event
from streamkit.web import frames
from streamkit.web.hub import LiveHub, Viewer, get_hub


def ev(kind, payload, stream="st", seq=0, t=None):
    return Event(kind, stream, "blk", "blk.out", (0, 0), t, t, 1_000 + seq, seq, payload)


def add_rows(feed, n, t0=0.0, bins=256):
    feed.add_rows([(t0 + i / 10, 0.0, False, None, bytes([i % 256]) * bins) for i in range(n)])


def binary_rows(out):
    rows = []
    for f in out:
        if isinstance(f, bytes) and f[0] == frames.ROWS:
            rows += frames.decode(f)[1]
    return rows


def test_a_late_viewer_gets_the_last_60_s_of_waterfall_and_the_last_200_events():
    hub = LiveHub(history_s=60, rows_per_s=10, events_on_join=200)
    f = hub.station("st", freq_khz=7100, mode="lsb")
    add_rows(f, 1000)
    for i in range(300):
        hub.events_sink.handle(ev("vad.segment", {"detector": "energy"}, seq=i, t=i * 10**9))
    v = Viewer(hub)
    out = v.join()
    hello = json.loads(out[0])
    assert hello["type"] == "hello" and hello["stations"][0]["freq_khz"] == 7100 and hello["bins"] == 256
    rows = binary_rows(out)
    assert len(rows) == 600 and rows[0].t_s == 40.0 and rows[-1].t_s == 99.9  # the newest 60 s
    evs = [m for m in out if isinstance(m, str) and json.loads(m)["type"] == "events"]
    items = json.loads(evs[0])["items"]
    assert len(items) == 200 and items[0]["seq"] == 100 and items[-1]["seq"] == 299
    assert json.loads(out[-1])["type"] == "status"
    assert v.poll() == []  # nothing new


def test_a_viewer_that_falls_behind_loses_the_oldest_rows_and_is_told():
    hub = LiveHub(history_s=10, rows_per_s=10)
    f = hub.station("st")
    v = Viewer(hub)
    v.join()
    add_rows(f, 30)
    assert len(binary_rows(v.poll())) == 30
    add_rows(f, 130)  # the ring holds 100
    assert len(binary_rows(v.poll())) == 100
    assert v.stats.missed_rows == 30
    st = json.loads(v.status())
    assert st["viewer"]["missed_rows"] == 30
    other = Viewer(hub)  # another viewer is not affected by the first one's losses
    other.join()
    assert other.stats.missed_rows == 0


def test_unwatched_stations_are_not_sent_nor_counted_as_missed():
    hub = LiveHub(history_s=1)
    a, b = hub.station("a"), hub.station("b")
    v = Viewer(hub)
    v.join()
    v.set_watch([1])
    add_rows(a, 50)
    add_rows(b, 5)
    out = v.poll()
    assert {frames.decode(f)[0] for f in out if isinstance(f, bytes)} == {1}
    assert v.stats.missed_rows == 0


def test_status_only_events_update_the_status_and_stay_out_of_the_log():
    hub = LiveHub()
    s = hub.events_sink
    s.handle(ev(E.SOURCE_STATE, E.SourceState("retrying", "connection refused", 2.5, 3), stream="k"))
    s.handle(ev(E.LEVEL, {"rms_dbfs": float("-inf"), "peak_dbfs": -3.0}, stream="k"))
    s.handle(ev("kiwi.smeter", {"dbm": -73.5}, stream="k"))
    s.handle(ev("asr.final", {"text": "hello <b>there</b>", "lang": "en", "confidence": 0.9}, stream="k"))
    s.handle(ev("sed.detection", {"label": "Dog", "confidence": 0.8}, stream="k", t=5 * 10**9))
    st = json.loads(Viewer(hub).status())["stations"][0]  # valid JSON: -inf became null
    assert st["state"] == "reconnecting" and st["detail"] == "connection refused" and st["retry_in_s"] == 2.5
    assert st["level_dbfs"] is None and st["smeter_dbm"] == -73.5
    assert st["lang"] == "en" and st["text"] == "hello <b>there</b>" and st["classes"] == {"Dog": 5.0}
    kinds = [d["kind"] for d in hub.events_log()]
    assert kinds == [E.SOURCE_STATE, "asr.final", "sed.detection"]
    s.handle(ev(E.SOURCE_STATE, E.SourceState("open", "ws://x"), stream="k"))
    assert json.loads(Viewer(hub).status())["stations"][0]["state"] == "streaming"


def test_audio_goes_only_to_the_listener_split_at_gaps():
    hub = LiveHub()
    f = hub.station("st")
    listener, other = Viewer(hub), Viewer(hub)
    listener.join()
    other.join()
    listener.set_listen(0)
    x = np.linspace(-0.5, 0.5, 160, dtype=np.float32)
    f.add_audio(0, 8000.0, x)
    f.add_audio(160, 8000.0, x)
    f.add_audio(320, 8000.0, x, lost_s=0.171, gap=True)  # a gap: 0.171 s lost before item 320
    f.add_audio(480, 8000.0, x)
    got = [frames.decode(m) for m in listener.poll() if isinstance(m, bytes)]
    assert [(a.start, a.samples.size, a.gap) for a in got] == [(0, 320, False), (320, 320, True)]
    assert got[1].lost_s == np.float32(0.171)
    assert got[0].samples[0] == -16384 and got[0].samples[159] == 16384
    assert not [m for m in other.poll() if isinstance(m, bytes)]
    listener.set_listen(None)
    f.add_audio(640, 8000.0, x)
    assert not [m for m in listener.poll() if isinstance(m, bytes)]


def test_listening_starts_near_now_not_seconds_ago():
    hub = LiveHub()
    f = hub.station("st")
    for i in range(100):  # 2 s of 20 ms chunks
        f.add_audio(i * 160, 8000.0, np.zeros(160, np.float32))
    v = Viewer(hub)
    v.join()
    v.set_listen(0)
    got = [frames.decode(m) for m in v.poll() if isinstance(m, bytes)]
    assert sum(a.samples.size for a in got) == 3200  # 0.4 s of pre-buffer
    v.set_listen(7)  # no such station: ignored
    assert v.listen is None


def test_hubs_are_found_by_id():
    hub = LiveHub()
    assert get_hub(hub.id) is hub
    try:
        get_hub("nope")
    except KeyError as exc:
        assert "no live hub" in str(exc)
    else:
        raise AssertionError("expected KeyError")


def test_the_stations_status_is_made_once_for_all_viewers_until_it_changes():
    hub = LiveHub()
    hub.events_sink.handle(ev("kiwi.smeter", {"dbm": -70.0}, stream="k"))
    a = hub.stations_status()
    assert hub.stations_status() is a  # nothing changed: the same text for every viewer
    v1, v2 = json.loads(Viewer(hub).status()), json.loads(Viewer(hub).status())
    assert v1["stations"] == v2["stations"] and v1["stations"][0]["smeter_dbm"] == -70.0
    hub.events_sink.handle(ev("kiwi.smeter", {"dbm": -60.0}, stream="k"))
    assert json.loads(hub.stations_status())[0]["smeter_dbm"] == -60.0
