"""ToneSource, NoiseSource and DemoSignal: references, properties, gaps, chunking invariance."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

from streamkit.core import events as E
from streamkit.core import tags as T
from streamkit.core.errors import ConfigError
from streamkit.core.graph import Graph
from streamkit.core.runtime import Runner
from streamkit.core.tags import GapCause, TimeAnchor
from streamkit.io import CollectSink, DemoSignal, NoiseSource, ToneSource
from streamkit.io.synthetic import BLOCK, KIWI_RATE


def drain(src, sizes, limit=10**9):
    """Read ``src`` to its end (or ``limit`` items) with read sizes cycling through ``sizes``."""
    rng = np.random.default_rng(1)
    src.start(None)
    parts, tags = [], []
    k = 0
    total = 0
    while total < limit:
        s = sizes[k % len(sizes)]
        k += 1
        n = int(rng.integers(1, 400)) if s == "random" else int(s)
        r = src.read(min(n, limit - total), None)
        if r is None:
            break
        parts.append(r.samples)
        tags.extend(r.tags)
        total += r.samples.shape[0]
        if r.end:
            break
    return np.concatenate(parts), tags


def run_graph(src, chunk=None, **kw):
    g = Graph("t")
    g.add(src, name="src")
    sink = g.add(CollectSink(), name="sink")
    g.connect("src", "sink")
    r = Runner(g, chunk=chunk, keep_events=True, threaded_events=False, stats_interval_s=0, **kw)
    st = r.run()
    return sink, r, st


def rms_db(x):
    return 20 * np.log10(np.sqrt(np.mean(np.asarray(x, np.float64) ** 2)))


# ------------------------------------------------------------------------------------ ToneSource
def test_instance():
    ToneSource(rate=8000)
    NoiseSource(rate=8000)
    DemoSignal()


@pytest.mark.parametrize(
    "kw",
    [
        {"rate": 8000, "freq_hz": 4000},  # at Nyquist
        {"rate": 8000, "freq_hz": -1},
        {"rate": 8000, "amplitude": 0},
        {"rate": 8000, "duration_s": 0},
        {"rate": 8000, "channels": 0},
        {"rate": -8000},
    ],
)
def test_tone_rejects_bad_config(kw):
    with pytest.raises(ConfigError):
        ToneSource(**kw)


def test_tone_matches_exact_reference_at_odd_rate():
    rate = KIWI_RATE
    src = ToneSource(rate=rate, freq_hz=1234.5, amplitude=0.25, duration_s=2.0)
    y, _ = drain(src, [1000])
    n = np.arange(y.shape[0])
    step = Fraction("1234.5") / rate  # cycles per item, exact
    cyc = np.array([float((int(i) * step) % 1) for i in n])
    np.testing.assert_allclose(y[:, 0], 0.25 * np.sin(2 * np.pi * cyc), atol=2e-7)
    assert y.shape == (int(round(2.0 * float(rate))), 1)


def test_tone_stays_phase_exact_after_days():
    # block k of a stream that has run for ~3 days at 48 kHz still has the exact phase
    src = ToneSource(rate=48000, freq_hz=997.0, amplitude=1.0)
    k = (3 * 86400 * 48000) // BLOCK
    blk = src._make_block(k)[:, 0]
    i = k * BLOCK + np.arange(16)
    ref = np.sin(2 * np.pi * np.array([float((int(v) * Fraction(997, 48000)) % 1) for v in i]))
    np.testing.assert_allclose(blk[:16], ref, atol=2e-7)


def test_tone_multichannel_and_spec():
    src = ToneSource(rate=16000, freq_hz=440, channels=3, duration_s=0.1)
    spec = src.negotiate({})["out"]
    assert spec.rate == Fraction(16000) and spec.channels == 3 and spec.dtype == np.float32
    y, _ = drain(src, [333])
    assert y.shape == (1600, 3)
    assert np.array_equal(y[:, 0], y[:, 1]) and np.array_equal(y[:, 0], y[:, 2])


def test_tone_chunking_invariance():
    ref, _ = drain(ToneSource(rate=11025, freq_hz=300, duration_s=1.0), [11025])
    for sizes in ([1], [7], [160], ["random"], [BLOCK + 1, 3]):
        y, _ = drain(ToneSource(rate=11025, freq_hz=300, duration_s=1.0), sizes)
        assert np.array_equal(y, ref), sizes


# ------------------------------------------------------------------------------------ NoiseSource
def test_noise_level_and_seed():
    y, _ = drain(NoiseSource(rate=8000, level_dbfs=-26.0, seed=5, duration_s=10.0), [1000])
    assert abs(rms_db(y) - (-26.0)) < 0.1
    y2, _ = drain(NoiseSource(rate=8000, level_dbfs=-26.0, seed=5, duration_s=10.0), ["random"])
    y3, _ = drain(NoiseSource(rate=8000, level_dbfs=-26.0, seed=6, duration_s=10.0), [1000])
    assert np.array_equal(y, y2)
    assert not np.array_equal(y, y3)


def test_noise_channels_independent():
    y, _ = drain(NoiseSource(rate=8000, channels=2, duration_s=5.0), [512])
    c = np.corrcoef(y.T)[0, 1]
    assert abs(c) < 0.05


def test_noise_rejects_bad_config():
    with pytest.raises(ConfigError):
        NoiseSource(rate=8000, seed=-1)
    with pytest.raises(ConfigError):
        NoiseSource(rate=8000, level_dbfs=float("nan"))


def test_utc_anchor_at_zero_when_given():
    _, tags = drain(NoiseSource(rate=8000, duration_s=0.1, utc_ns=123), [100])
    assert [(t.offset, t.key, t.value) for t in tags] == [(0, T.TIME, TimeAnchor(123, "synthetic"))]


# ------------------------------------------------------------------------------------ DemoSignal
def test_demo_default_rate_is_kiwi_rate_exactly():
    spec = DemoSignal().negotiate({})["out"]
    assert spec.rate == Fraction(3000297, 250) == KIWI_RATE
    assert spec.channels == 1 and spec.dtype == np.float32


@pytest.mark.parametrize(
    "kw",
    [
        {"dropouts": 0},
        {"dropouts": 1.0, "dropout_items": 20000},
        {"burst_s": (4, 1)},
        {"pause_s": (0, 1)},
        {"burst_s": "long"},
        {"noise_dbfs": 3},
        {"seed": -2},
        {"rate": 1000},
    ],
)
def test_demo_rejects_bad_config(kw):
    with pytest.raises(ConfigError):
        DemoSignal(**kw)


def test_demo_truth_schedule_follows_parameters():
    d = DemoSignal(duration_s=120.0, seed=3)
    bursts = d.bursts
    assert d.truth == [(b.start_s, min(b.end_s, 120.0)) for b in bursts]
    assert len(bursts) >= 10
    assert bursts[0].start_s >= 2.0  # starts with noise only
    prev_end = 0.0
    for b in bursts:
        assert 1.0 <= b.end_s - b.start_s <= 4.0
        assert 2.0 <= b.start_s - prev_end <= 6.0
        prev_end = b.end_s
    assert all(b.start_s < 120.0 for b in bursts)
    # the same seed gives the same schedule, another seed another one
    assert DemoSignal(duration_s=120.0, seed=3).bursts == bursts
    assert DemoSignal(duration_s=120.0, seed=4).truth != d.truth


def test_demo_bursts_stand_out_of_the_noise_floor():
    d = DemoSignal(duration_s=40.0, seed=2, noise_dbfs=-45.0, speech_dbfs=-20.0, utc_ns=0)
    y, _ = drain(d, [4000])
    x = y[:, 0]
    inside = np.zeros(x.shape[0], bool)
    for a, b in d.truth_items():
        inside[a:b] = True
        assert rms_db(x[a:b]) > -45.0 + 15.0  # each burst is clearly louder than the floor
    assert abs(rms_db(x[~inside]) - (-45.0)) < 1.0  # outside the bursts: the noise floor only
    assert np.abs(x).max() < 1.0


def test_demo_noise_is_band_limited():
    d = DemoSignal(duration_s=20.0, seed=1, utc_ns=0, speech_dbfs=-80.0)  # (almost) noise only
    x, _ = drain(d, [4096])
    spec = np.abs(np.fft.rfft(x[:, 0] * np.hanning(x.shape[0]))) ** 2
    f = np.fft.rfftfreq(x.shape[0], 1 / float(KIWI_RATE))
    band = spec[(f > 400) & (f < 2800)].mean()
    assert spec[f < 60].mean() < band * 1e-3
    assert spec[f > 4500].mean() < band * 1e-3


def test_demo_dropouts_skip_items_and_tag_the_next_one():
    rate = KIWI_RATE
    clean = DemoSignal(duration_s=13.0, seed=7, utc_ns=10**18)
    lossy = DemoSignal(duration_s=13.0, seed=7, utc_ns=10**18, dropouts=4.0, dropout_items=512)
    ref, _ = drain(clean, [5000])
    y, tags = drain(lossy, [5000])
    starts = [int(round(j * 4.0 * float(rate))) for j in (1, 2, 3)]
    keep = np.ones(ref.shape[0], bool)
    for a in starts:
        keep[a : a + 512] = False
    assert np.array_equal(y, ref[keep])  # exactly the clean signal with the lost packets cut out
    gaps = [t for t in tags if t.key == T.GAP]
    want_offsets = [a - 512 * j for j, a in enumerate(starts)]
    assert [t.offset for t in gaps] == want_offsets
    assert all(t.value.lost == 512 and t.value.cause == GapCause.SEQ_GAP for t in gaps)
    anchors = [t for t in tags if t.key == T.TIME]
    assert [t.offset for t in anchors] == [0, *want_offsets]
    for t, a in zip(anchors[1:], starts, strict=True):  # fresh anchors re-time the items after each loss
        assert t.value.utc_ns == 10**18 + int(Fraction((a + 512) * 10**9) / rate)  # time of the first item after the loss
    assert lossy.truth_items()[0][0] == clean.truth_items()[0][0] - 512 * sum(a < clean.truth_items()[0][0] for a in starts)


def test_demo_gaps_become_events_and_counters_in_the_runner():
    src = DemoSignal(duration_s=10.0, seed=1, dropouts=3.0)
    sink, r, st = run_graph(src)
    gaps = r.events and [e for e in r.events if e.kind == E.STREAM_GAP]
    assert len(gaps) == 3 and all(e.payload.cause == "seq_gap" and e.payload.lost == 512 for e in gaps)
    assert st["gaps_by_cause"] == {"seq_gap": 3} and st["dropped_items"] == 3 * 512
    assert sink.samples.shape[0] == int(round(10.0 * float(KIWI_RATE))) - 3 * 512


def test_demo_chunking_invariance_direct():
    def make():
        return DemoSignal(duration_s=6.0, seed=11, dropouts=1.7, dropout_items=300, utc_ns=5)

    ref, ref_tags = drain(make(), [10**7])
    for sizes in ([1], [7], [160], ["random"], [BLOCK, 1, BLOCK - 1], [299, 301]):
        y, tags = drain(make(), sizes)
        assert np.array_equal(y, ref), sizes
        assert tags == ref_tags, sizes


def test_demo_chunking_invariance_through_the_runner():
    outs = []
    for chunk in (1, 97, 240, 100_000):
        sink, _, _ = run_graph(DemoSignal(duration_s=2.0, seed=4, dropouts=0.5, dropout_items=100, utc_ns=0), chunk=chunk)
        outs.append((sink.samples, [(t.offset, t.key, t.value) for t in sink.tags]))
    for s, tg in outs[1:]:
        assert np.array_equal(s, outs[0][0])
        assert tg == outs[0][1]


def test_demo_endless_stream_grows_its_truth():
    d = DemoSignal(seed=9, utc_ns=0)
    y, _ = drain(d, [4096], limit=int(60 * float(KIWI_RATE)))
    assert y.shape[0] == int(60 * float(KIWI_RATE))
    assert d.truth and d.truth[-1][1] > 60.0  # scheduled ahead of what was read
    ref = DemoSignal(duration_s=60.0, seed=9)
    assert ref.bursts == [b for b in d.bursts if b.start_s < 60.0]


def test_demo_restart_replays_the_same_signal():
    d = DemoSignal(duration_s=3.0, seed=1, utc_ns=0, dropouts=1.0)
    a, ta = drain(d, [1000])
    b, tb = drain(d, [333])  # drain() calls start() again
    assert np.array_equal(a, b) and ta == tb


def test_graph_file_round_trip():
    g = Graph("demo")
    g.add(DemoSignal(duration_s=1.0, seed=2, dropouts=0.4), name="src")
    g.add(CollectSink(), name="k")
    g.connect("src", "k")
    spec = g.to_spec()
    assert spec["blocks"]["src"] == {"type": "io.demo_signal", "duration_s": 1.0, "seed": 2, "dropouts": 0.4}
    g2 = Graph.from_spec(spec)
    st = Runner(g2, stats_interval_s=0).run()
    assert st["gaps_by_cause"] == {"seq_gap": 2}
    assert math.isclose(st["stream_s"], (round(float(KIWI_RATE)) - 2 * 512) / float(KIWI_RATE), rel_tol=1e-3)
