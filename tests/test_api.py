"""The one-call API (:mod:`streamkit.api`): the CLI's results on a file, the same on an array,
clear errors for bad input, the in-memory event collector, and the docstrings' examples."""

from __future__ import annotations

import doctest
import json
import math
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

import streamkit
from streamkit import api
from streamkit.cli import main
from streamkit.core.errors import ConfigError, StreamkitError
from streamkit.eval.rttm import read_rttm_intervals
from streamkit.eval.sed import read_strong_tsv
from tests.dsp.test_stat_sad import make

ROOT = Path(__file__).resolve().parents[1]
needs_espeak = pytest.mark.skipif(shutil.which("espeak-ng") is None, reason="espeak-ng not installed")


@pytest.fixture(scope="module")
def audio(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    """20 s of speech-like bursts in pink noise at 16 kHz, stereo (two different mixes), as float32
    and 16-bit files and arrays."""
    import soxr

    d = tmp_path_factory.mktemp("api")
    x, _ = make(20.0, 10.0, "pink", seed=3, level=0.1)
    y = soxr.resample(x, 8000, 16000, quality="HQ").astype(np.float32)
    st = np.stack([y, 0.5 * y], axis=1)
    f32 = d / "f32.wav"
    sf.write(str(f32), st, 16000, subtype="FLOAT")
    i16 = np.round(np.clip(st, -1, 1 - 1 / 32768) * 32768).astype(np.int16)
    p16 = d / "i16.wav"
    sf.write(str(p16), i16, 16000, subtype="PCM_16")
    return {"dir": d, "f32": f32, "i16": p16, "x": st, "x16": i16}


def _rttm(out: Path, stem: str) -> list[tuple[int, int]]:
    return [tuple(v) for v in read_rttm_intervals(out / f"{stem}.rttm", 8000).get(stem, np.zeros((0, 2))).tolist()]


def _samples(segs: list[api.Segment]) -> list[tuple[int, int]]:
    return [(round(s.start * 8000), round(s.end * 8000)) for s in segs]


# ------------------------------------------------------------------------------------------------
# detect_speech
# ------------------------------------------------------------------------------------------------


def test_detect_speech_equals_python_m_streamkit_sad(audio: dict, tmp_path: Path) -> None:
    """The RTTM that ``python -m streamkit sad`` writes for a file is what detect_speech returns."""
    out = tmp_path / "rttm"
    p = subprocess.run([sys.executable, "-m", "streamkit", "sad", str(audio["f32"]), "--out", str(out)], cwd=ROOT, capture_output=True,
                       text=True, timeout=300)  # fmt: skip
    assert p.returncode == 0, p.stderr
    ref = _rttm(out, "f32")
    segs = streamkit.detect_speech(audio["f32"])
    assert len(ref) >= 3
    assert _samples(segs) == ref
    assert all(0 < s.score <= 1 and s.start < s.end for s in segs)
    assert [tuple(s) for s in segs] == [(s.start, s.end) for s in segs]  # unpacks as (start, end)


@pytest.mark.parametrize("system", ["stat", "dnn"])
def test_detect_speech_array_equals_file_equals_cli(audio: dict, tmp_path: Path, system: str) -> None:
    assert main(["sad", str(audio["i16"]), "--system", system, "--out", str(tmp_path)]) == 0
    ref = _rttm(tmp_path, "i16")
    assert ref
    from_file = api.detect_speech(str(audio["i16"]), system=system)
    assert _samples(from_file) == ref
    # the int16 samples as an array, and as the float32 libsndfile reads from the file
    assert api.detect_speech(audio["x16"], rate=16000, system=system) == from_file
    assert api.detect_speech(audio["x16"].astype(np.float32) / 32768, 16000, system=system) == from_file
    # float64, and any rate given as a float
    assert api.detect_speech(audio["x16"].astype(np.float64) / 32768, 16000.0, system=system) == from_file


def test_detect_speech_threshold_and_torch_tensor(audio: dict) -> None:
    import torch

    x = audio["x"]
    ref = api.detect_speech(x, 16000)
    assert api.detect_speech(torch.from_numpy(x), 16000) == ref
    strict = api.detect_speech(x, 16000, threshold=0.95)
    assert sum(s.end - s.start for s in strict) < sum(s.end - s.start for s in ref)


def test_stat_path_does_not_import_torch() -> None:
    """``import streamkit`` and the statistical SAD leave torch unloaded."""
    code = ("import sys, numpy as np, streamkit\n"
            "assert 'torch' not in sys.modules, 'import streamkit'\n"
            "x = np.random.default_rng(0).standard_normal(16000).astype('float32') * 0.01\n"
            "streamkit.detect_speech(x, rate=8000)\n"
            "print('torch' in sys.modules)\n")  # fmt: skip
    p = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "False"


# ------------------------------------------------------------------------------------------------
# transcribe
# ------------------------------------------------------------------------------------------------


def test_transcribe_equals_cli_json(audio: dict, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from tests.models.test_rnnt_stream import make_model

    w = make_model(tmp_path)
    f = audio["f32"]
    assert main(["transcribe", str(f), "--weights", w, "--json", "--beam", "2"]) == 0
    ref = [json.loads(ln) for ln in capsys.readouterr().out.splitlines() if ln.strip()]
    assert ref
    got = api.transcribe(f, weights=w, beam=2)
    assert [(u.start, u.end, u.lang, u.confidence, u.text) for u in got] == [
        (o["start_s"], o["end_s"], o["lang"], o["confidence"], o["text"]) for o in ref
    ]
    assert [list(u.words) for u in got] == [[(d["word"], d["start_s"], d["end_s"]) for d in o["words"]] for o in ref]
    assert [dict(u.lid) for u in got] == [o["lid"] for o in ref]
    start, end, lang, conf, text = got[0]
    assert (start, lang, text) == (got[0].start, got[0].lang, got[0].text)
    # the same samples as an array (stereo, 16 kHz)
    assert api.transcribe(audio["x"], 16000, weights=w, beam=2) == got
    # no SAD: one stream
    one = api.transcribe(audio["x"], 16000, weights=w, beam=1, sad="none", max_utterance_s=60)
    assert len(one) == 1 and one[0].start == 0.0


# ------------------------------------------------------------------------------------------------
# detect_events
# ------------------------------------------------------------------------------------------------


@needs_espeak
def test_detect_events_equals_cli_tsv(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from streamkit.data.tts import synthesize

    s = synthesize("The weather station reports light rain and a north wind this afternoon.", "en-us", out_rate=22050)
    rng = np.random.default_rng(1)
    x = np.concatenate([np.zeros(22050), s, np.zeros(22050)]).astype(np.float32)
    x = x + np.float32(0.003) * rng.standard_normal(x.size).astype(np.float32)
    f = tmp_path / "speech.wav"
    sf.write(str(f), x, 22050, subtype="FLOAT")
    assert main(["sed", str(f), "-q"]) == 0
    ref = read_strong_tsv(capsys.readouterr().out.splitlines(), classes=None)["speech.wav"]
    got = streamkit.detect_events(f)
    assert any(e.label == "Speech" for e in got)
    assert sorted((round(e.onset, 3), round(e.offset, 3), e.label) for e in got) == sorted((e.onset, e.offset, e.event_label) for e in ref)
    assert all(0 < e.confidence <= e.peak <= 1 for e in got)
    onset, offset, label, conf = got[0]
    assert (onset, label) == (got[0].onset, got[0].label)
    assert api.detect_events(x, 22050) == got


# ------------------------------------------------------------------------------------------------
# errors
# ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "audio_in, rate, match",
    [
        (np.array([0.0, np.nan, 0.1], np.float32), 8000, "NaN or inf samples \\(1 of 3\\)"),
        (np.array([0.0, np.inf]), 8000, "NaN or inf"),
        (np.zeros(0, np.float32), 8000, "no samples"),
        (np.zeros((0, 2), np.float32), 8000, "no samples"),
        (np.zeros((2, 8000), np.float32), 8000, "looks like \\(channels, n\\).*audio.T"),
        (np.zeros((10, 2, 2), np.float32), 8000, "\\(n,\\) or \\(n, channels\\)"),
        (np.zeros(8000, np.float32), None, "needs its sample rate"),
        (np.zeros(8000, np.float32), 0, "positive number"),
        (np.zeros(8000, np.float32), math.nan, "positive number"),
        (np.zeros(8000, np.float32), "8000", "positive number"),
        (np.zeros(8000, np.int32), 8000, "float .* or int16, got dtype int32"),
        ([0.0] * 8000, 8000, "file path or an array"),
    ],
)
def test_bad_arrays_are_config_errors(audio_in: object, rate: object, match: str) -> None:
    for fn in (api.detect_speech, api.detect_events):
        with pytest.raises(ConfigError, match=match):
            fn(audio_in, rate)


def test_bad_calls(tmp_path: Path, audio: dict) -> None:
    with pytest.raises(ConfigError, match="system must be one of stat, stat-c, dnn, got 'energy'"):
        api.detect_speech(audio["x"], 16000, system="energy")
    with pytest.raises(ConfigError, match="threshold must be a finite number"):
        api.detect_speech(audio["x"], 16000, threshold=math.nan)
    with pytest.raises(ConfigError, match="rate is for arrays"):
        api.detect_speech(audio["f32"], 16000)
    with pytest.raises(FileNotFoundError, match="missing.wav"):
        api.detect_speech(tmp_path / "missing.wav")
    bad = tmp_path / "bad.wav"
    bad.write_bytes(b"not audio at all" * 10)
    with pytest.raises(StreamkitError, match="bad.wav"):
        api.detect_speech(bad)
    with pytest.raises(StreamkitError, match="bad.wav"):
        api.detect_events(bad)
    with pytest.raises(ConfigError, match="sad must be one of stat, none"):
        api.transcribe(audio["x"], 16000, sad="energy")
    with pytest.raises(ConfigError, match="word_penalty needs a lexicon"):
        api.transcribe(audio["x"], 16000, word_penalty=1.0)
    with pytest.raises(ConfigError, match="beam"):
        api.transcribe(audio["x"], 16000, beam=0)
    with pytest.raises(ConfigError, match="no RNN-T weights"):
        api.transcribe(audio["x"], 16000, weights=tmp_path / "none.pt")
    with pytest.raises(ConfigError, match="lid_prior"):
        api.transcribe(audio["x"], 16000, lid_prior="en=-1")
    with pytest.raises(ConfigError, match="post must be one of"):
        api.detect_events(audio["x"], 16000, post="best")


# ------------------------------------------------------------------------------------------------
# graphs
# ------------------------------------------------------------------------------------------------


def test_collect_and_event_collector() -> None:
    from streamkit import Graph, Runner
    from streamkit.dsp import StatSAD
    from streamkit.io import DemoSignal, EventCollector

    g = Graph("demo")
    g.chain(g.add(DemoSignal(rate=8000, duration_s=12, seed=1), name="demo"), g.add(StatSAD(), name="sad"))
    events = streamkit.collect(g, ["vad.*"])
    assert [e.kind for e in events] == ["vad.segment", "vad.segment"]
    assert g.subscriptions == []  # the collector leaves the graph as it was
    every = streamkit.collect(g)
    assert {"vad.segment", "graph.stats"} <= {e.kind for e in every}
    assert [e.seq for e in every] == sorted(e.seq for e in every)
    # the sink itself, with the runner's own event thread; a second run starts an empty list
    c = g.subscribe(EventCollector(), ["vad.segment"])
    Runner(g, stats_interval_s=0).run()
    assert [e.span for e in c.events] == [e.span for e in events]
    assert [p.start_s for p in c.payloads("vad.segment")] == [e.payload.start_s for e in events]
    Runner(g, stats_interval_s=0).run()
    assert len(c.of("vad.segment")) == 2


def test_lazy_exports() -> None:
    for name in ("detect_speech", "transcribe", "detect_events", "collect", "Segment", "Utterance", "SoundEvent", "EventCollector"):
        assert name in streamkit.__all__ and name in dir(streamkit)
        assert getattr(streamkit, name) is getattr(api, name)
    with pytest.raises(AttributeError):
        streamkit.no_such_name  # noqa: B018


# ------------------------------------------------------------------------------------------------
# the docstrings' examples
# ------------------------------------------------------------------------------------------------


@needs_espeak
@pytest.mark.parametrize("name", ["streamkit.api", "streamkit.api.detect_speech", "streamkit.api.transcribe", "streamkit.api.detect_events",
                                  "streamkit.api.collect"])  # fmt: skip
def test_docstring_examples(name: str) -> None:
    tests = {t.name: t for t in doctest.DocTestFinder().find(api) if t.examples}
    assert set(tests) >= {
        "streamkit.api",
        "streamkit.api.detect_speech",
        "streamkit.api.transcribe",
        "streamkit.api.detect_events",
        "streamkit.api.collect",
    }
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    runner.run(tests[name])
    assert runner.failures == 0 and runner.tries == len(tests[name].examples), f"{name}: see the doctest report above"
