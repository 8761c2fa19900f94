"""dsp.mono: the channels' mean (float64, rounded once) or one channel; tags and gaps pass at the same
offsets, any chunking gives the same items; the SED example graph (file -> mono -> resample -> models.sed)
gives the detections of the offline path on a stereo file."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from streamkit.core.errors import ConfigError
from streamkit.core.tags import GAP, Gap, GapCause
from streamkit.core.types import StreamSpec
from streamkit.dsp.passthrough import Mono
from streamkit.testing import assert_chunking_invariant, run_block

RATE = 16000
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "graphs" / "sed_file.yaml"


def stereo(n: int = 5000, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((n, 3)).astype(np.float32)


def test_mean_or_one_channel():
    x = stereo()
    r = run_block(Mono(), x, rate=RATE, sizes=333)
    want = x.mean(axis=1, dtype=np.float64).astype(np.float32)
    assert r.samples.shape == (x.shape[0], 1) and r.samples.dtype == np.float32
    np.testing.assert_array_equal(r.samples[:, 0], want)
    assert not np.array_equal(want, x.mean(axis=1))  # float32 accumulation rounds otherwise: the test can tell
    np.testing.assert_array_equal(run_block(Mono(channel=2), x, rate=RATE).samples[:, 0], x[:, 2])
    one = x[:, :1]
    np.testing.assert_array_equal(run_block(Mono(), one, rate=RATE).samples, one)  # mono passes unchanged


def test_tags_gaps_and_chunking():
    x = stereo(9000, 1)
    gap = Gap(lost=480, cause=GapCause.RECONNECT)
    r = assert_chunking_invariant(Mono, x, rate=RATE, sizes=("all", 1, 7, 1000, "random"), tags=[(1234, "user:mark", 1)], gaps=[(4000, gap)])
    assert [t.offset for t in r.tags if t.key == GAP] == [4000] and [t.offset for t in r.tags if t.key == "user:mark"] == [1234]
    assert_chunking_invariant(lambda: Mono(channel=1), x, rate=RATE, sizes=("all", 3, "random"), gaps=[(4000, gap)])


def test_errors():
    for bad in (-1, 1.0, "0", True):
        with pytest.raises(ConfigError, match="channel index"):
            Mono(channel=bad)
    with pytest.raises(ConfigError, match="channel 2 does not exist: the input has 2"):
        Mono(channel=2).negotiate({"in": StreamSpec(RATE, 2, np.dtype(np.float32))})
    with pytest.raises(ConfigError, match="float32"):
        Mono().negotiate({"in": StreamSpec(RATE, 2, np.dtype(np.complex64))})
    assert Mono().negotiate({"in": StreamSpec(RATE, 4, np.dtype(np.float32))})["out"] == StreamSpec(RATE, 1, np.dtype(np.float32))


def test_sed_example_graph_equals_the_offline_path(tmp_path):
    """examples/graphs/sed_file.yaml on a stereo file: the detections of sed_file on the same samples
    (the beeping tones are alarms to the shipped model, so there is something to compare)."""
    import soundfile as sf

    from streamkit import Graph, Runner
    from streamkit.core.graph import load_spec_file
    from streamkit.models import SED_WEIGHTS
    from streamkit.models.sed_offline import sed_file

    rng = np.random.default_rng(0)
    n = 14 * RATE
    t = np.arange(n) / RATE
    x = 0.01 * rng.standard_normal(n)
    for a, b, f in ((2, 5, 2500), (8, 11, 900)):
        m = (t >= a) & (t < b)
        x[m] += 0.3 * np.sin(2 * np.pi * f * t[m]) * (np.sin(2 * np.pi * 4 * t[m]) > 0)
    st = np.stack([x, 0.3 * x[::-1]], 1).astype(np.float32)
    path = tmp_path / "stereo.wav"
    sf.write(path, st, RATE, subtype="FLOAT")
    spec = load_spec_file(EXAMPLE)
    assert spec["chain"] == ["src", "mono", "rs", "sed"]
    spec["blocks"]["src"]["path"] = str(path)
    spec["events"] = []  # the example's JSONL sink writes into the working directory
    g = Graph.from_spec(spec)
    r = Runner(g, keep_events=True, threaded_events=False, stats_interval_s=0)
    r.run()
    got = [(e.payload.label, e.payload.onset, e.payload.offset) for e in r.events if e.kind == "sed.detection"]
    want = [(d.label, d.onset, d.offset) for d in sed_file(st, SED_WEIGHTS, rate=RATE).detections]
    assert [lab for lab, _, _ in want] == ["Alarm_bell_ringing"] * 2 and got == want
