"""Resample: exact ratio, libsoxr reference, alignment, tags through the rate change, long-run length."""

from __future__ import annotations

from collections.abc import Mapping
from fractions import Fraction
from math import floor
from typing import Any

import numpy as np
import pytest
import soxr
from hypothesis import given, settings
from hypothesis import strategies as st

from streamkit.core.block import ErrorPolicy, Sink, Source, SourceRead
from streamkit.core.context import Context
from streamkit.core.errors import ConfigError
from streamkit.core.graph import Graph
from streamkit.core.runtime import Runner
from streamkit.core.tags import GAP, TIME, Gap, GapCause, TimeAnchor
from streamkit.core.types import Chunk, StreamSpec, Tag
from streamkit.dsp import Resample
from streamkit.dsp.resample import soxr_lag_items
from streamkit.testing import assert_chunking_invariant, assert_tags_at, run_block

KIWI = Fraction("12001.188")  # KiwiSDR's advertised rate: Fraction(3000297, 250)
RATES = [(KIWI, 8000), (8000, 16000), (44100, 8000), (16000, 8000), (48000, 44100)]
rng = np.random.default_rng(0)


def rhu(x: Fraction) -> int:
    """round_half_up, the runtime's tag rounding."""
    return floor(x + Fraction(1, 2))


def _ctx(block: Resample, spec: StreamSpec) -> Context:
    outs = block.negotiate({"in": spec})
    return Context(block, "test", {"in": spec}, outs, lambda *a: None)


def test_instance():
    Resample(to_hz=16_000).reset()


@pytest.mark.parametrize("bad", [0, -8000, "abc", float("nan"), None, True])
def test_rejects_bad_rate(bad):
    with pytest.raises(ConfigError):
        Resample(to_hz=bad)


def test_rejects_bad_quality_and_dtype():
    with pytest.raises(ConfigError):
        Resample(to_hz=8000, quality="XQ")
    with pytest.raises(ConfigError):
        run_block(Resample(to_hz=8000), np.zeros((100, 1), np.complex64), rate=16000)


def test_ratio_is_exact():
    rs = Resample(to_hz=8000)
    rs.negotiate({"in": StreamSpec(12001.188)})
    assert rs.ratio == Fraction(8000) / Fraction(3000297, 250) == Fraction(2_000_000, 3_000_297)
    assert rs.delay == 0
    # any exact rational form of to_hz
    assert Resample(to_hz=12001.188).to_hz == Resample(to_hz="12001.188").to_hz == Fraction(3000297, 250)
    out = Resample(to_hz="48000000/1001").negotiate({"in": StreamSpec(48000)})["out"]
    assert out.rate == Fraction(48_000_000, 1001)


@pytest.mark.parametrize("fin,fout", RATES)
@pytest.mark.parametrize("channels", [1, 3])
def test_matches_soxr_oneshot(fin, fout, channels):
    # the independent reference: libsoxr's one-shot call on the whole signal; measured bit-identical
    x = rng.standard_normal((6_000, channels)).astype(np.float32)
    y = run_block(Resample(to_hz=fout), x, rate=fin, sizes="random", mean_size=300).samples
    ref = soxr.resample(x, float(fin), float(fout), quality="HQ")
    np.testing.assert_array_equal(y, ref)


@pytest.mark.parametrize("quality", ["QQ", "LQ", "MQ", "VHQ"])
def test_matches_soxr_oneshot_other_qualities(quality):
    x = rng.standard_normal((4_000, 2)).astype(np.float32)
    y = run_block(Resample(to_hz=8000, quality=quality.lower()), x, rate=KIWI, sizes=101).samples
    np.testing.assert_array_equal(y, soxr.resample(x, float(KIWI), 8000.0, quality=quality))


@pytest.mark.parametrize("fin,fout", RATES)
def test_tone_keeps_frequency_and_phase(fin, fout):
    # a tone resampled with exact time alignment is the same tone sampled at the new rate:
    # fit A*sin + B*cos at the input frequency on the output grid; a wrong rate leaves a large
    # residual, a time offset shows up as a phase error
    fin_f, fout_f = float(fin), float(fout)
    f0 = 0.11 * min(fin_f, fout_f)
    n = int(fin_f)  # 1 s
    x = np.sin(2 * np.pi * f0 * np.arange(n) / fin_f + 0.3).astype(np.float32)
    y = run_block(Resample(to_hz=fout), x, rate=fin, sizes=997).samples[:, 0].astype(np.float64)
    m = np.arange(y.shape[0])[200:-200]  # away from the edges
    basis = np.stack([np.sin(2 * np.pi * f0 * m / fout_f), np.cos(2 * np.pi * f0 * m / fout_f)], axis=1)
    (a, b), *_ = np.linalg.lstsq(basis, y[m], rcond=None)
    resid = y[m] - basis @ np.array([a, b])
    assert np.sqrt(np.mean(resid**2)) < 1e-5  # measured ~1.5e-7
    assert abs(np.hypot(a, b) - 1.0) < 1e-5
    shift_out_items = (np.arctan2(b, a) - 0.3) / (2 * np.pi * f0) * fout_f
    assert abs(shift_out_items) < 1e-4  # time-aligned (measured |shift| <= 4e-7 items): no group delay to declare


@pytest.mark.parametrize("fin,fout", RATES)
def test_impulse_lands_at_index_times_ratio(fin, fout):
    r = Fraction(fout) / Fraction(fin)
    n = 8_000
    offs = [i for i in (1234, 3001, 5555, 7000) if abs((i * r) % 1 - Fraction(1, 2)) > Fraction(1, 10)]
    for i in offs:
        x = np.zeros((n, 1), np.float32)
        x[i] = 1.0
        y = run_block(Resample(to_hz=fout), x, rate=fin, sizes=160).samples[:, 0]
        assert int(np.argmax(y)) == rhu(i * r), (i, float(i * r))


def test_chunking_invariance():
    # bit-exact: libsoxr's streaming output does not depend on the chunking (measured)
    x = rng.standard_normal((2_500, 2)).astype(np.float32)
    for fin, fout in [(KIWI, 8000), (8000, 16000)]:
        assert_chunking_invariant(
            lambda fout=fout: Resample(to_hz=fout), x, rate=fin, sizes=("all", 1, 7, 160, "random"),
            tags=[(0, "user:a", 0), (777, "user:b", 1), (2_499, "user:c", 2)],
        )  # fmt: skip


@pytest.mark.parametrize("fin,fout", [(KIWI, 8000), (8000, 16000), (44100, 8000)])
def test_tags_at_remapped_offsets(fin, fout):
    r = Fraction(fout) / Fraction(fin)
    n = 20_000
    offs = [0, 1, 2, 3, 99, 100, 101, 4_567, 12_001, 15_999, n - 2, n - 1]
    x = rng.standard_normal((n, 1)).astype(np.float32) * 0.1
    for sizes in (n, 160, "random"):
        out = run_block(Resample(to_hz=fout), x, rate=fin, sizes=sizes, tags=[(i, "user:mark", i) for i in offs])
        # a tag whose exact position is past the last output item sits on the last one
        last = out.samples.shape[0] - 1
        assert_tags_at(out, {"user:mark": [min(rhu(i * r), last) for i in offs], TIME: [0]})
        assert [t.value for t in out.tags if t.key == "user:mark"] == offs


@pytest.mark.parametrize("fin,fout,q", [(KIWI, 8000, "HQ"), (8000, 16000, "VHQ"), (44100, 8000, "MQ"), (16000, 8000, "LQ"), (44100, 8000, "QQ")])
def test_flush_drains_to_exact_length(fin, fout, q):
    r = Fraction(fout) / Fraction(fin)
    for n in (1, 999, 10_007):
        x = rng.standard_normal((n, 2)).astype(np.float32)
        out = run_block(Resample(to_hz=fout, quality=q), x, rate=fin, sizes=256)
        assert abs(out.samples.shape[0] - n * r) <= 1, (n, out.samples.shape[0], float(n * r))
        st = out.stats["blocks"]["dut"]
        assert (st["items_in"], st["items_out"]) == (n, out.samples.shape[0])


def test_flush_returns_what_soxr_held_back():
    spec = StreamSpec(KIWI, 1)
    rs = Resample(to_hz=8000)
    ctx = _ctx(rs, spec)
    rs.start(ctx)
    x = rng.standard_normal((3_000, 1)).astype(np.float32)
    body = rs.work(x, ctx)
    tail = rs.flush(ctx)
    assert tail is not None and tail.shape[0] > 100  # libsoxr holds back ~1 block of output
    np.testing.assert_array_equal(np.concatenate([body, tail]), soxr.resample(x, float(KIWI), 8000.0))


def test_declared_latency_covers_soxr_lag():
    # fed one item at a time, once input item i has gone in the output has reached input time
    # i - latency or later (output item j is input time j / ratio), and the bound is tight
    for fin, fout in [(KIWI, 8000), (8000, 16000), (44100, 8000)]:
        spec = StreamSpec(fin, 1)
        rs = Resample(to_hz=fout)
        ctx = _ctx(rs, spec)
        lat = rs.algorithmic_latency()
        assert lat == soxr_lag_items(float(fin), float(fout), "HQ") > 0
        rs.start(ctx)
        r = Fraction(fout) / Fraction(fin)
        produced, worst = 0, Fraction(0)
        one = np.zeros((1, 1), np.float32)
        for i in range(20 * lat):
            produced += rs.work(one, ctx).shape[0]
            if produced:
                worst = max(worst, i - (produced - 1) / r)
        assert lat - 1 / r - 2 <= worst <= lat, (lat, float(worst))
    assert {Resample(to_hz=16000).algorithmic_latency()} == {0}  # before negotiate: 0


def test_passthrough_when_rates_match():
    x = rng.standard_normal((1_000, 2)).astype(np.float32)
    rs = Resample(to_hz="16000")
    out = run_block(rs, x, rate=16000, sizes=77, tags=[(500, "user:m", 1)])
    np.testing.assert_array_equal(out.samples, x)
    assert rs.ratio == 1 and rs.passthrough and rs._rs is None and rs.algorithmic_latency() == 0
    assert_tags_at(out, {"user:m": [500]})


def test_gap_continues_without_reset():
    # on_gap CONTINUE: the audio is the same as without the gap, the Gap tag is remapped
    x = rng.standard_normal((6_000, 1)).astype(np.float32)
    r = Fraction(8000) / KIWI
    plain = run_block(Resample(to_hz=8000), x, rate=KIWI, sizes=160)
    gap = Gap(lost=480, cause=GapCause.SEQ_GAP)
    out = run_block(Resample(to_hz=8000), x, rate=KIWI, sizes=160, gaps=[(3_001, gap)], tags=[(3_001, TIME, TimeAnchor(10**18, "gps"))])
    np.testing.assert_array_equal(out.samples, plain.samples)
    assert_tags_at(out, {GAP: [rhu(3_001 * r)], TIME: [0, rhu(3_001 * r)]})
    assert [t.value for t in out.tags if t.key == TIME][1] == TimeAnchor(10**18, "gps")  # utc unchanged


def test_reset_clears_the_stream():
    spec = StreamSpec(44100, 2)
    x = rng.standard_normal((5_000, 2)).astype(np.float32)
    rs = Resample(to_hz=8000)
    ctx = _ctx(rs, spec)
    rs.start(ctx)
    rs.work(rng.standard_normal((7_000, 2)).astype(np.float32), ctx)
    rs.reset(Gap(cause=GapCause.BLOCK_ERROR))
    y = np.concatenate([rs.work(x, ctx), rs.flush(ctx)])
    np.testing.assert_array_equal(y, soxr.resample(x, 44100.0, 8000.0))


def test_set_params_rejected():
    rs = Resample(to_hz=8000)
    with pytest.raises(ConfigError):
        rs.apply_params({"to_hz": 16000})


# -- one hour of KiwiSDR audio: exact length, tags and anchors at the end --------------------------


class _Zeros(Source):
    """Zeros (one impulse) in big chunks, with tags; cheap enough for an hour of audio."""

    def __init__(self, *, n: int, rate: Any, tags: list[Tag], impulse: int, name: str | None = None) -> None:
        super().__init__(name=name)
        self.n, self.rate, self.tag_list, self.impulse = n, Fraction(rate), sorted(tags, key=lambda t: t.offset), impulse
        self.pos = 0
        self.zeros = np.zeros((0, 1), np.float32)

    def negotiate(self, inputs: Mapping[str, StreamSpec]) -> dict[str, StreamSpec]:
        return {"out": StreamSpec(self.rate, 1)}

    def read(self, max_items: int, ctx: Context) -> SourceRead | None:
        if self.pos >= self.n:
            return None
        lo, hi = self.pos, min(self.pos + max_items, self.n)
        self.pos = hi
        if self.zeros.shape[0] < hi - lo:
            self.zeros = np.zeros((hi - lo, 1), np.float32)
            self.zeros.flags.writeable = False
        x = self.zeros[: hi - lo]
        if lo <= self.impulse < hi:
            x = x.copy()
            x[self.impulse - lo] = 1.0
        return SourceRead(x, [t for t in self.tag_list if lo <= t.offset < hi], end=hi >= self.n)


class _Tail(Sink):
    """Counts items, keeps tags and the items from ``keep_from`` on."""

    def __init__(self, *, keep_from: int, name: str | None = None) -> None:
        super().__init__(name=name)
        self.keep_from, self.count, self.tags, self.parts = keep_from, 0, [], []

    def consume(self, chunk: Chunk, ctx: Context) -> None:
        self.count += len(chunk)
        self.tags.extend(chunk.tags)
        if chunk.stop > self.keep_from:
            self.parts.append((chunk.start, np.array(chunk.samples[:, 0])))


def test_one_hour_kiwi_to_8k_length_tags_and_anchors():
    n = 43_204_277  # 3600 s at 12001.188 Hz, rounded up to whole items
    r = Fraction(8000) / KIWI
    marks = [n - 1, n - 2, n - 777, n - 8_000, n - 123_457, n // 2]
    anchor_at = n - 5_001
    impulse = n - 9_999
    assert abs((impulse * r) % 1 - Fraction(1, 2)) > Fraction(1, 10)
    tags = [Tag(i, "user:mark", i) for i in marks] + [Tag(anchor_at, TIME, TimeAnchor(1_700_000_000_000_000_000, "gps"))]
    g = Graph("hour")
    src = g.add(_Zeros(n=n, rate=KIWI, tags=tags, impulse=impulse), name="src")
    rs = g.add(Resample(to_hz=8000), name="rs")
    sink = g.add(_Tail(keep_from=rhu(impulse * r) - 10), name="sink")
    g.chain(src, rs, sink)
    Runner(g, chunk=720_071, threaded_events=False, stats_interval_s=0, error_policy=ErrorPolicy.RAISE).run()  # ~60 s chunks
    assert abs(sink.count - n * r) <= 1, (sink.count, float(n * r))
    got = {t.value: t.offset for t in sink.tags if t.key == "user:mark"}
    assert got == {i: rhu(i * r) for i in marks}
    anchors = [(t.offset, t.value) for t in sink.tags if t.key == TIME]
    assert anchors[-1] == (rhu(anchor_at * r), TimeAnchor(1_700_000_000_000_000_000, "gps"))
    start, y = sink.parts[0][0], np.concatenate([p for _, p in sink.parts])
    assert start + int(np.argmax(y)) == rhu(impulse * r)  # the audio is where the tags say


@settings(max_examples=25, deadline=None)
@given(
    fin=st.sampled_from([8000, 11025, 16000, 22050, 44100, 48000, KIWI, Fraction(48_000_000, 1001)]),
    fout=st.sampled_from([8000, 12000, 16000, 24000, 44100]),
    n=st.integers(1, 9_000),
    frac=st.lists(st.floats(0, 1, exclude_max=True), min_size=1, max_size=5),
)
def test_length_and_tags_for_any_rates(fin, fout, n, frac):
    r = Fraction(fout) / Fraction(fin)
    offs = sorted({int(f * n) for f in frac})
    x = np.zeros((n, 1), np.float32)
    out = run_block(Resample(to_hz=fout), x, rate=fin, sizes="random", mean_size=500, tags=[(i, "user:m", i) for i in offs])
    assert abs(out.samples.shape[0] - n * r) <= 1
    last = max(out.samples.shape[0] - 1, 0)
    assert out.tag_offsets("user:m") == [min(rhu(i * r), last) for i in offs]
