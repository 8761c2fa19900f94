"""FileSource: formats, odd rates, channels, segments, loops, errors, anchors, chunking invariance."""

from __future__ import annotations

import os
from fractions import Fraction

import numpy as np
import pytest
import soundfile as sf

from streamkit.core import events as E
from streamkit.core import tags as T
from streamkit.core.block import ErrorPolicy
from streamkit.core.errors import BlockError, ConfigError, SourceError
from streamkit.core.graph import Graph
from streamkit.core.runtime import Runner
from streamkit.io import CollectSink, FileSource
from streamkit.io import file_source as fs_mod

rng = np.random.default_rng(0)


def noise(n, ch):
    return np.clip(0.2 * rng.standard_normal((n, ch)), -0.99, 0.99).astype(np.float32)


def tones(n, ch, rate):
    t = np.arange(n)[:, None] / rate
    return (0.3 * np.sin(2 * np.pi * 440.0 * (np.arange(ch)[None, :] + 1) * t) + 0.02 * rng.standard_normal((n, ch))).astype(np.float32)


def write(tmp_path, name, x, rate, **kw):
    p = tmp_path / name
    sf.write(p, x, rate, **kw)
    return p


def drain(src, sizes):
    src.negotiate({})
    src.start(None)
    parts, tags, k = [], [], 0
    r2 = np.random.default_rng(3)
    while True:
        s = sizes[k % len(sizes)]
        k += 1
        r = src.read(int(r2.integers(1, 3000)) if s == "random" else s, None)
        if r is None:
            break
        parts.append(r.samples)
        tags.extend(r.tags)
        if r.end:
            break
    src.stop()
    return (np.concatenate(parts) if parts else np.zeros((0, 1), np.float32)), tags


def run_graph(src, **kw):
    g = Graph("t")
    g.add(src, name="src")
    sink = g.add(CollectSink(), name="sink")
    g.connect("src", "sink")
    r = Runner(g, keep_events=True, threaded_events=False, stats_interval_s=0, **kw)
    st = r.run()
    return sink, r, st


def test_instance():
    FileSource(path="x.wav")


@pytest.mark.parametrize("kw", [{"path": ""}, {"path": "a.wav", "start_s": -1}, {"path": "a.wav", "duration_s": 0}])
def test_rejects_bad_params(kw):
    with pytest.raises(ConfigError):
        FileSource(**kw)


@pytest.mark.parametrize(
    "name,rate,ch,kw,exact",
    [
        ("a.wav", 11025, 1, {"subtype": "FLOAT"}, True),
        ("b.wav", 12001, 2, {"subtype": "FLOAT"}, True),
        ("c.wav", 44100, 4, {"subtype": "PCM_16"}, False),
        ("d.flac", 11025, 2, {}, False),
        ("e.flac", 22050, 1, {"subtype": "PCM_24"}, False),
        ("f.ogg", 11025, 2, {}, False),
        ("g.ogg", 16000, 1, {}, False),
    ],
)
def test_reads_formats_rates_and_channels(tmp_path, name, rate, ch, kw, exact):
    x = tones(rate // 2 + 123, ch, rate)
    p = write(tmp_path, name, x, rate, **kw)
    ref, ref_rate = sf.read(p, dtype="float32", always_2d=True)  # libsndfile's own decode is the reference
    assert ref_rate == rate
    src = FileSource(path=str(p))
    spec = src.negotiate({})["out"]
    assert spec.rate == Fraction(rate) and spec.channels == ch and spec.dtype == np.float32
    sink, _, st = run_graph(src)
    assert sink.samples.dtype == np.float32
    np.testing.assert_array_equal(sink.samples, ref)
    if exact:
        np.testing.assert_array_equal(sink.samples, x)
    elif name.endswith(".ogg"):  # lossy: the decode resembles the input
        for c in range(ch):
            assert np.corrcoef(sink.samples[:, c], x[:, c])[0, 1] > 0.9
    else:
        np.testing.assert_allclose(sink.samples, x, atol=2e-4)
    assert st["stream_s"] == pytest.approx(x.shape[0] / rate)


def test_read_decodes_exactly_max_items(tmp_path):
    p = write(tmp_path, "a.wav", noise(10_000, 2), 11025, subtype="FLOAT")
    src = FileSource(path=str(p))
    src.negotiate({})
    src.start(None)
    assert [src.read(n, None).samples.shape[0] for n in (1, 7, 2999, 20_000)] == [1, 7, 2999, 10_000 - 3007]
    assert src.read(10, None) is None


def test_chunking_invariance(tmp_path):
    p = write(tmp_path, "a.flac", noise(5_000, 2), 11025)
    ref, ref_tags = drain(FileSource(path=str(p), utc_ns=0), [5_000])
    for sizes in ([1], [7], [160], ["random"], [4095, 4097]):
        y, tags = drain(FileSource(path=str(p), utc_ns=0), sizes)
        assert np.array_equal(y, ref), sizes
        assert tags == ref_tags


def test_start_and_duration_cut_exact_segment(tmp_path):
    x = noise(20_000, 1)
    p = write(tmp_path, "a.wav", x, 8000, subtype="FLOAT")
    y, _ = drain(FileSource(path=str(p), start_s=0.5, duration_s=1.0), [777])
    assert np.array_equal(y, x[4000:12000])
    y, _ = drain(FileSource(path=str(p), start_s=2.0), [777])
    assert np.array_equal(y, x[16000:])


def test_loop_repeats_the_segment_without_gaps(tmp_path):
    x = noise(1000, 1)
    p = write(tmp_path, "a.wav", x, 8000, subtype="FLOAT")
    sink, _, st = run_graph(FileSource(path=str(p), start_s=0.025, loop=True), duration=1.0)
    seg = x[200:]
    assert sink.samples.shape[0] == 8000
    assert np.array_equal(sink.samples[:, 0], np.tile(seg[:, 0], 11)[:8000])
    assert st["gaps"] == 0


def test_missing_file_is_a_one_line_config_error(tmp_path):
    p = tmp_path / "nope.wav"
    with pytest.raises(ConfigError) as ei:
        FileSource(path=str(p)).negotiate({})
    msg = str(ei.value)
    assert str(p) in msg and "no such file" in msg and "\n" not in msg


def test_garbage_file_is_a_one_line_config_error_with_the_reason(tmp_path):
    p = tmp_path / "garbage.wav"
    p.write_bytes(b"this is not audio" * 100)
    with pytest.raises(ConfigError) as ei:
        FileSource(path=str(p)).negotiate({})
    msg = str(ei.value)
    assert str(p) in msg and "Format not recognised" in msg and "\n" not in msg
    # and the graph fails at build time, before any audio
    g = Graph("t")
    g.add(FileSource(path=str(p)), name="src")
    g.add(CollectSink(), name="k")
    g.connect("src", "k")
    with pytest.raises(ConfigError, match="garbage.wav"):
        g.build()


def test_directory_and_start_beyond_end_are_config_errors(tmp_path):
    with pytest.raises(ConfigError, match="directory"):
        FileSource(path=str(tmp_path)).negotiate({})
    p = write(tmp_path, "a.wav", noise(800, 1), 8000)
    with pytest.raises(ConfigError, match="beyond the end"):
        FileSource(path=str(p), start_s=0.1).negotiate({})


def test_time_anchor_from_mtime(tmp_path):
    p = write(tmp_path, "a.wav", noise(16000, 1), 8000)
    mtime_ns = 1_700_000_000 * 10**9
    os.utime(p, ns=(mtime_ns, mtime_ns))
    _, tags = drain(FileSource(path=str(p)), [1000])
    assert [(t.offset, t.key) for t in tags] == [(0, T.TIME)]
    a = tags[0].value
    assert a.source == "file" and a.utc_ns == mtime_ns - 2 * 10**9 and a.uncertainty_ns == 2 * 10**9
    _, tags = drain(FileSource(path=str(p), start_s=0.5), [1000])
    assert tags[0].value.utc_ns == mtime_ns - 2 * 10**9 + 5 * 10**8
    _, tags = drain(FileSource(path=str(p), utc_ns=42), [1000])
    assert tags[0].value.utc_ns == 42 and tags[0].value.uncertainty_ns == 0


def test_read_error_mid_file_delivers_what_was_read_then_raises(tmp_path, monkeypatch):
    x = noise(30_000, 1)
    p = write(tmp_path, "a.wav", x, 8000, subtype="FLOAT")
    src = FileSource(path=str(p))
    src.negotiate({})
    src.start(None)
    real_read = src._sf.read
    calls = {"n": 0}

    def flaky(frames, **kw):
        calls["n"] += 1
        if calls["n"] == 3:
            raise RuntimeError("Internal psf_fseek() failed.")
        return real_read(frames, **kw)

    monkeypatch.setattr(src._sf, "read", flaky)
    r = src.read(20_000, None)  # pieces of 8192: two succeed, the third fails
    assert r is not None and not r.end
    assert np.array_equal(r.samples, x[: 2 * fs_mod._PIECE])
    with pytest.raises(SourceError) as ei:
        src.read(1000, None)
    assert "a.wav" in str(ei.value) and "psf_fseek" in str(ei.value) and "2.048 s" in str(ei.value)
    assert src.read(1000, None) is None  # and the stream is over
    src.stop()


def test_truncated_flac_through_the_runner(tmp_path):
    x = noise(60_000, 1)
    p = write(tmp_path, "a.flac", x, 8000)
    ref, _ = sf.read(p, dtype="float32", always_2d=True)
    data = p.read_bytes()
    p.write_bytes(data[: len(data) // 2])
    # default policy: the error becomes a block.error event and the stream ends; no exception
    sink, r, st = run_graph(FileSource(path=str(p)))
    n = sink.samples.shape[0]
    assert 0 < n < 60_000
    np.testing.assert_array_equal(sink.samples, ref[:n])  # what was decoded before the error
    errors = [e for e in r.events if e.kind == E.BLOCK_ERROR]
    assert len(errors) == 1 and errors[0].payload.error == "SourceError" and "a.flac" in errors[0].payload.message
    assert [e.payload["reason"] for e in r.events if e.kind == E.STREAM_END][0].startswith("error")
    # tests force RAISE: then it is a BlockError naming the source
    with pytest.raises(BlockError, match="src"):
        run_graph(FileSource(path=str(p)), error_policy=ErrorPolicy.RAISE)


def test_paced_mode_reads_at_real_time_speed(tmp_path):
    import time

    p = write(tmp_path, "a.wav", noise(4000, 1), 8000)  # 0.5 s
    t0 = time.monotonic()
    from streamkit.core.clock import Paced

    sink, _, _ = run_graph(FileSource(path=str(p)), mode=Paced(speed=2.0))
    dt = time.monotonic() - t0
    assert sink.samples.shape[0] == 4000
    assert dt >= 0.2  # paced, never ahead: 0.5 s of audio at 2x cannot be read in under 0.25 s (load only slows it)


@pytest.mark.parametrize("chunk", [1000, 999, 8000, 100_000])
def test_stream_ends_whatever_the_chunk_size(tmp_path, chunk):
    x = noise(8000, 1)
    p = write(tmp_path, "a.wav", x, 8000, subtype="FLOAT")
    sink, r, _ = run_graph(FileSource(path=str(p), duration_s=0.75), chunk=chunk)
    assert np.array_equal(sink.samples, x[:6000])
    assert [e.payload["reason"] for e in r.events if e.kind == E.STREAM_END] == ["end of stream"]


@pytest.mark.parametrize("subtype", ["PCM_16", "FLOAT"])
def test_truncated_wav_is_processed_with_one_warning_saying_what_is_missing(tmp_path, caplog, subtype):
    """A WAV whose header says 8 s where 4 s are present (libsndfile opens it without a word)."""
    x = noise(8 * 8000, 1)
    p = write(tmp_path, "cut.wav", x, 8000, subtype=subtype)
    ref, _ = sf.read(p, dtype="float32", always_2d=True)
    bytes_per_frame = 2 if subtype == "PCM_16" else 4
    os.truncate(p, os.path.getsize(p) - 4 * 8000 * bytes_per_frame)
    with caplog.at_level("WARNING", logger="streamkit.io.file"):
        sink, r, st = run_graph(FileSource(path=str(p)))
    np.testing.assert_array_equal(sink.samples, ref[: 4 * 8000])  # what is there, all of it
    warn = [e for e in r.events if e.kind == E.SOURCE_STATE and e.payload.state == "warning"]
    assert len(warn) == 1 and "truncated" in warn[0].payload.detail and "4.000 s (32000 frames) missing" in warn[0].payload.detail
    assert "8.000 s" in warn[0].payload.detail
    assert [rec.getMessage() for rec in caplog.records if "truncated" in rec.getMessage()] == [warn[0].payload.detail]
    assert not any(e.kind == E.BLOCK_ERROR for e in r.events)


def test_complete_and_streamed_wavs_give_no_truncation_warning(tmp_path):
    from streamkit.io.wav_header import wav_truncation

    p = write(tmp_path, "ok.wav", noise(8000, 2), 8000)
    assert wav_truncation(p) is None
    sink, r, _ = run_graph(FileSource(path=str(p)))
    assert sink.samples.shape[0] == 8000 and not any(e.kind == E.SOURCE_STATE for e in r.events)
    # a header written for a pipe ("unknown length": 0xFFFFFFFF) is not a truncation
    data = bytearray(p.read_bytes())
    i = data.index(b"data")
    data[i + 4 : i + 8] = b"\xff\xff\xff\xff"
    p.write_bytes(bytes(data))
    assert wav_truncation(p) is None
    assert wav_truncation(tmp_path / "missing.wav") is None
