"""SampleRing: bounded, drop-oldest, counted, marks at exact delivered offsets."""

import threading

import numpy as np

from streamkit.core import tags as T
from streamkit.core.ring import SampleRing
from streamkit.core.tags import Gap, GapCause, TimeAnchor
from streamkit.core.types import StreamSpec

SPEC = StreamSpec(1000, 1, "float32")


def ramp(a, b):
    return np.arange(a, b, dtype=np.float32)


def test_fifo_without_loss():
    r = SampleRing(SPEC, 100)
    r.write(ramp(0, 30))
    r.write(ramp(30, 50))
    x, tags = r.read(1000)
    assert np.array_equal(x[:, 0], ramp(0, 50)) and tags == []
    assert r.dropped == 0 and r.delivered == 50


def test_overflow_drops_oldest_and_tags_the_loss():
    r = SampleRing(SPEC, 100)
    r.mark_anchor(TimeAnchor(1_000_000_000, "device"))
    r.write(ramp(0, 80))
    r.write(ramp(80, 150))  # 50 too many: items 0..49 dropped
    x, tags = r.read(1000)
    assert np.array_equal(x[:, 0], ramp(50, 150))
    gaps = [t for t in tags if t.key == T.GAP]
    assert len(gaps) == 1 and gaps[0].offset == 0
    assert gaps[0].value.cause == GapCause.OVERLOAD and gaps[0].value.lost == 50
    # the anchor is re-timed to the first surviving item: 50 items at 1 kHz = 50 ms later
    anchors = [t for t in tags if t.key == T.TIME]
    assert anchors and anchors[0].offset == 0 and anchors[0].value.utc_ns == 1_050_000_000
    assert r.dropped == 50


def test_write_larger_than_capacity_keeps_newest():
    r = SampleRing(SPEC, 10)
    r.write(ramp(0, 25))
    x, tags = r.read(100)
    assert np.array_equal(x[:, 0], ramp(15, 25))
    assert tags[0].value.lost == 15


def test_marks_land_at_delivered_offsets_after_drops():
    r = SampleRing(SPEC, 10)
    r.write(ramp(0, 10))
    x, _ = r.read(4)  # delivered 0..3
    r.write(ramp(10, 16))  # 12 items > 10: items 4, 5 dropped
    x1, tags1 = r.read(100)
    r.mark_gap(Gap(lost=7, cause=GapCause.XRUN))
    r.write(ramp(16, 18))  # items 16.. follow an xrun
    x2, tags2 = r.read(100)
    assert np.array_equal(np.concatenate([x1, x2])[:, 0], ramp(6, 18))
    offs = {(t.offset, t.value.cause, t.value.lost) for t in tags1 + tags2 if t.key == T.GAP}
    # overload gap at delivered index 4 (first item after the drop); xrun gap at item 16 = delivered 14
    assert offs == {(4, GapCause.OVERLOAD, 2), (14, GapCause.XRUN, 7)}


def test_threaded_producer_accounts_for_every_item():
    r = SampleRing(SPEC, 64)
    total = 20000
    got = []
    lost = 0

    def produce():
        for i in range(0, total, 100):
            r.write(ramp(i, i + 100))
        r.close()

    th = threading.Thread(target=produce)
    th.start()
    while not r.closed:
        x, tags = r.read(50)
        got.append(x[:, 0].copy())
        lost += sum(t.value.lost for t in tags if t.key == T.GAP)
    th.join()
    x, tags = r.read(10**6)
    got.append(x[:, 0])
    lost += sum(t.value.lost for t in tags if t.key == T.GAP)
    got = np.concatenate(got)
    assert len(got) + lost == total and r.dropped == lost
    assert np.all(np.diff(got) > 0)  # order kept; what arrives is a subsequence
