"""The live view of a cluster run without Ray: shards (:class:`ShardWorker`, in-process) feeding a driver's hub.

Rows are computed in the shard and cross to the driver in its polls; audio only for a station a
viewer listens to; a driver that does not poll makes the shard drop rows (counted), never wait;
a restarted shard's station resumes with its reconnect gap on the first row, no row twice.
"""

from __future__ import annotations

import dataclasses
import time

import pytest

from streamkit.distributed.monitor import station_tasks
from streamkit.distributed.shard import ShardWorker
from streamkit.distributed.webfeed import DriverWeb
from streamkit.web.attach import LiveView
from streamkit.web.hub import Viewer

pytestmark = pytest.mark.timeout(60)

WEB = {"bins": 256, "rows_per_s": 10.0}


def _tasks(port, n, duration):
    return station_tasks([f"127.0.0.1:{port}:{7000 + k}:lsb" for k in range(n)], duration=duration, stall_s=5.0)


def _driver(tasks):
    view = LiveView("127.0.0.1:0")
    web = DriverWeb(view)
    for t in tasks:
        web.station(t.name)
    return view, web


def _poll_until_done(shard, web, listen=(), poll_s=0.2, bound_s=30.0):
    replies = []
    t_end = time.monotonic() + bound_s
    while time.monotonic() < t_end:
        r = shard.poll(1000, list(listen))
        replies.append(r)
        if r["web"]:
            web.feed(r["web"])
        if r["finished"]:
            break
        time.sleep(poll_s)
    shard.stop(10)
    last = shard.poll(1000, list(listen))
    if last["web"]:
        web.feed(last["web"])
    return replies + [last]


def test_rows_cross_from_the_shard_and_audio_only_for_the_station_listened_to(emulator):
    tasks = _tasks(emulator, 2, duration=2.0)
    view, web = _driver(tasks)
    shard = ShardWorker(0, tasks, {"web": WEB})
    replies = _poll_until_done(shard, web, listen=[tasks[0].name])
    audio = {t.name: sum(a[2].size for r in replies for a in (r["web"] or {}).get(t.name, {}).get("audio", [])) for t in tasks}
    for t in tasks:
        f = view.hub.feed(t.name)
        assert abs(f.rows.last - 20) <= 1 and web.rows[t.name] == f.rows.last  # 10 rows/s for 2 s, every one shipped
        assert f.rate == 8000.0 and all(len(r[4]) == 256 and not r[2] for r in f.rows.items)
        assert t.name not in web.rows_dropped
    assert audio[tasks[1].name] == 0  # nobody listens to it: no audio crossed
    assert audio[tasks[0].name] > 0.8 * 2 * 8000  # the listened station: its audio, from when the listening began
    # a viewer of the driver's hub sees the rows the shard computed, as from a single process's tap
    v = Viewer(view.hub)
    frames = v.join()
    assert sum(isinstance(fr, bytes) for fr in frames) == 2 and v.stats.missed_rows == 0
    assert web.bytes == sum(web.rows.values()) * (256 + 24) + sum(audio.values()) * 2


def test_a_driver_that_does_not_poll_makes_the_shard_drop_rows_never_wait(emulator):
    tasks = _tasks(emulator, 2, duration=2.0)
    view, web = _driver(tasks)
    shard = ShardWorker(0, tasks, {"web": {**WEB, "backlog_s": 0.5}})  # rings of 5 rows per station
    assert shard.finished.wait(30)  # the driver is away the whole run
    shard.stop(10)
    r = shard.poll(1000, [tasks[0].name])
    web.feed(r["web"])
    st = shard.poll(1000)["status"]  # the status of the end
    for t in tasks:
        f = view.hub.feed(t.name)
        assert f.rows.last == 5 and web.rows_dropped[t.name] >= 14  # the newest 5 rows came; the rest was counted
        assert f.status["rows_dropped"] == web.rows_dropped[t.name]
        assert st[t.name]["items"]["kiwi"] == round(2.0 * st[t.name]["rate"])  # the audio was never held up
    assert '"rows_dropped": ' in view.hub.stations_status()  # the page's status shows it


def test_a_restarted_shard_resumes_the_rows_after_a_reconnect_gap(emulator):
    from streamkit.distributed.ledger import StationLedger

    tasks = _tasks(emulator, 1, duration=None)
    view, web = _driver(tasks)
    led = StationLedger(tasks[0])
    shard = ShardWorker(0, tasks, {"web": WEB})
    t_end = time.monotonic() + 30
    while time.monotonic() < t_end and web.rows[tasks[0].name] < 15:
        r = shard.poll(1000)
        web.feed(r["web"] or {})
        for ev in r["events"]:
            led.note(ev)
        for st in r["status"].values():
            led.update(st)
        time.sleep(0.2)
    shard.stop(10)  # the shard "dies": what it did not ship is lost, its last status is not taken
    before = web.rows[tasks[0].name]
    time.sleep(1.0)  # the outage
    task = led.resume()
    shard2 = ShardWorker(0, [dataclasses.replace(task, duration=1.5)], {"web": WEB})
    _poll_until_done(shard2, web)
    f = view.hub.feed(tasks[0].name)
    rows = list(f.rows.items)
    assert len(rows) > before + 10
    times = [r[0] for r in rows]
    assert times == sorted(times) and len(set(times)) == len(times)  # no row twice, none back in time
    gaps = [(i, r) for i, r in enumerate(rows) if r[2]]
    assert [(i, r[3]) for i, r in gaps] == [(before, "reconnect")]  # the first row of the resumed run carries it
    lost_s = gaps[0][1][1]
    # the gap covers the hole between the last row shipped and the first resumed one
    assert lost_s >= 1.0 and abs((times[before] - times[before - 1]) - (lost_s + 0.1)) <= 0.6, (lost_s, times[before] - times[before - 1])
