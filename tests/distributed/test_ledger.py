"""The driver's ledger and the shard's outbox without Ray: resume points, accounting, bounded outbox."""

from __future__ import annotations

from streamkit.core import events as E
from streamkit.core.events import Event
from streamkit.distributed.ledger import StationLedger
from streamkit.distributed.outbox import Outbox, StationSink
from streamkit.distributed.tasks import StationTask, plan_shards


def _ev(kind, port, span, seq, payload=None, stream="st"):
    return Event(kind, stream, port.split(".")[0], port, span, None, None, 0, seq, payload)


def test_resume_goes_on_after_the_furthest_event_the_driver_received():
    led = StationLedger(StationTask("st", {"host": "h"}, duration=10.0))
    led.update({"items": {"kiwi": 12000, "rs": 8000}, "source": "kiwi", "rate": 12000.0, "wall": 100.0, "seq": 40, "gap_lost": 0, "gaps": {}})
    # the status lags one poll: events past it already reached the driver, one with a gap
    led.note(_ev("level.update", "rs.out", (8000, 12000), 45))
    led.note(_ev(E.STREAM_GAP, "kiwi.out", (18000, 18000), 46, E.GapInfo("seq_gap", 512, False, 512, 1)))
    t = led.resume(now=101.0)
    assert t.incarnation == 1 and t.base == {"kiwi": 18000, "rs": 12000} and t.seq_base == 47
    assert t.resume_after_wall == 100.5  # the status's wall time moved on by the 6000 items received after it
    assert t.duration == 10.0 - 18000 / 12000.0
    assert led.delivered == 18000 and led.lost == 512


def test_a_resumed_run_is_shifted_onto_the_station_indices():
    box = Outbox(maxlen=2)
    t = StationTask("st", {}, 5.0).resumed(base={"kiwi": 1000, "rs": 700}, seq_base=50, resume_after_wall=1.0, duration=4.0)
    sink = StationSink(t, box)
    sink.handle(_ev(E.STREAM_GAP, "kiwi.out", (0, 0), 0, E.GapInfo("reconnect", 300, False, 300, 1)))
    sink.handle(_ev("level.update", "rs.out", (0, 400), 1))
    sink.handle(_ev("level.update", "rs.out", (400, 800), 2))  # the outbox is full: dropped, counted
    got = box.take(10)
    assert [(e.span, e.seq) for e in got] == [((1000, 1000), 50), ((700, 1100), 51)]
    assert box.dropped == {"st": 1} and sink.gap_lost == 300 and sink.gaps == {"reconnect": 1} and sink.last_seq == 52


def test_plan_shards_is_even_and_refuses_duplicates():
    tasks = [StationTask(f"s{i}", {}, None) for i in range(7)]
    assert [len(s) for s in plan_shards(tasks, 3)] == [3, 2, 2]
    assert "password" not in repr(StationTask("s", {"password": "secret"}, None)) and "secret" not in repr(StationTask("s", {"password": "secret"}, None))
    import pytest

    from streamkit.core.errors import ConfigError

    with pytest.raises(ConfigError, match="given twice"):
        plan_shards(tasks + tasks[:1], 3)
