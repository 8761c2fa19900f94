"""``streamkit sad`` streams a file through the graph's blocks: bounded reads, the block's segments
(CLI RTTM == a graph's ``vad.segment`` events), the same frame scores as the whole-signal functions."""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from streamkit.cli import files as sad_cli
from streamkit.core.graph import Graph
from streamkit.core.runtime import Runner
from streamkit.dsp.stat_sad import StatSAD, stat_sad_scores
from streamkit.eval import sad_stream
from streamkit.eval import sad_systems as ss
from streamkit.eval.rttm import mask_to_intervals, read_rttm_intervals
from streamkit.eval.sad import frames_to_samples
from streamkit.io.file_source import FileSource
from tests.dsp.test_stat_sad import make

RATE = 8000


def _sad(argv: list[str]) -> int:
    return sad_cli.run_sad(sad_cli.add_sad_arguments(argparse.ArgumentParser()).parse_args(argv))


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A 40 s mono 8 kHz file, and the same audio as 16 kHz stereo."""
    import soxr

    d = tmp_path_factory.mktemp("sadstream")
    x, _ = make(40.0, 10.0, "pink", seed=5, level=0.1)
    a = d / "a.wav"
    sf.write(str(a), x, RATE, subtype="FLOAT")
    y = soxr.resample(x, RATE, 16000, quality="HQ")
    b = d / "b.wav"
    sf.write(str(b), np.stack([y, y], axis=1), 16000, subtype="FLOAT")
    return {"a": a, "b": b}


def graph_segments(path: Path) -> list[tuple[int, int]]:
    """``vad.segment`` spans of the graph io.file -> [mono] -> [resample] -> dsp.stat_sad."""
    from streamkit.dsp.passthrough import Mono
    from streamkit.dsp.resample import Resample

    info = sf.info(str(path))
    g = Graph("g")
    chain = [g.add(FileSource(path=str(path)), name="f")]
    if info.channels > 1:
        chain.append(g.add(Mono(), name="m"))
    if info.samplerate != RATE:
        chain.append(g.add(Resample(to_hz=RATE), name="r"))
    chain.append(g.add(StatSAD(), name="sad"))
    g.chain(*chain)
    r = Runner(g, keep_events=True, threaded_events=False, stats_interval_s=0)
    r.run()
    return [tuple(e.span) for e in r.events if e.kind == "vad.segment"]


@pytest.mark.parametrize("which", ["a", "b"])
def test_cli_rttm_equals_graph_segments(files: dict[str, Path], tmp_path: Path, which: str) -> None:
    """One definition of a segment: the CLI's RTTM is the block's events in a graph (merged
    segments, not 64 ms frame fragments)."""
    f = files[which]
    assert _sad([str(f), "--system", "stat", "--out", str(tmp_path)]) == 0
    got = read_rttm_intervals(tmp_path / f"{f.stem}.rttm", RATE)[f.stem].tolist()
    ref = graph_segments(f)
    assert len(ref) >= 5
    assert [tuple(s) for s in got] == ref
    # the old fragments: score > threshold per frame, OR-ed onto the samples, with no hysteresis or vote
    x = ss.load_audio(f).x
    frag = mask_to_intervals(frames_to_samples(stat_sad_scores(x)[0] > StatSAD().threshold, 256, 512, len(x)))
    assert len(frag) > len(ref)


def test_cli_reads_the_file_in_bounded_chunks(files: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The file is never loaded whole: FileSource reads at most CHUNK_S of audio at a time."""
    reads: list[int] = []
    real_read = FileSource.read

    def read(self, max_items, ctx):  # type: ignore[no-untyped-def]
        r = real_read(self, max_items, ctx)
        reads.append(0 if r is None else r.samples.shape[0])
        return r

    def no_whole_file(*a, **k):  # type: ignore[no-untyped-def]
        raise AssertionError("load_audio called: the file was loaded whole")

    monkeypatch.setattr(FileSource, "read", read)
    monkeypatch.setattr(ss, "load_audio", no_whole_file)
    monkeypatch.setattr(sad_stream, "CHUNK_S", 0.25)
    systems = ["stat"] + (["dnn"] if "dnn" in ss.SYSTEMS else [])
    for system in systems:
        reads.clear()
        assert _sad([str(files["b"]), "--system", system, "--out", str(tmp_path / system)]) == 0
        assert max(reads) <= int(0.25 * 16000)
        assert sum(reads) == 40 * 16000 and len(reads) >= 160


def test_streamed_scores_equal_the_whole_signal_functions(files: dict[str, Path]) -> None:
    for f in files.values():
        x = ss.load_audio(f).x
        r = sad_stream.sad_file(f, "stat")
        assert r.n_samples == len(x)
        np.testing.assert_array_equal(r.scores, stat_sad_scores(x)[0])
        # the eval's stat system (no start-up re-scoring: its published figures) on the same samples
        old = sad_stream.STREAMED["stat"]
        try:
            sad_stream.STREAMED["stat"] = ("dsp.stat_sad", dict(ss.EVAL_STAT_PARAMS))
            np.testing.assert_array_equal(sad_stream.sad_file(f, "stat").scores, ss.get_system("stat").score_file(x)[0])
        finally:
            sad_stream.STREAMED["stat"] = old


@pytest.mark.skipif("dnn" not in ss.SYSTEMS, reason="no shipped DNN SAD weights")
def test_dnn_streamed_equals_the_whole_file_path(files: dict[str, Path], tmp_path: Path) -> None:
    """dnn: the streamed block gives the RTTM and scores the whole-file path gave (frames OR-ed)."""
    f = files["b"]
    sysd = ss.get_system("dnn")
    x = ss.load_audio(f).x
    s, hop, win = sysd.score_file(x)
    old = mask_to_intervals(frames_to_samples(s > sysd.threshold, hop, win, len(x)))
    r = sad_stream.sad_file(f, "dnn", sysd.threshold)
    np.testing.assert_array_equal(r.scores, s)
    np.testing.assert_array_equal(r.intervals, old)


def test_bad_files(tmp_path: Path) -> None:
    bad = tmp_path / "bad.wav"
    bad.write_bytes(b"RIFF not a wav")
    with pytest.raises(ss.AudioError, match="bad.wav.*cannot read audio"):
        sad_stream.sad_file(bad, "stat")
    nan = tmp_path / "nan.wav"
    z = np.zeros(3 * RATE, np.float32)
    z[5000] = np.nan
    sf.write(str(nan), z, RATE, subtype="FLOAT")
    with pytest.raises(ss.AudioError, match="nan.wav.*NaN"):
        sad_stream.sad_file(nan, "stat")
