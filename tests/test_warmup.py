"""Warm-up: a block's start() compiles every numba kernel its data path calls, for the array types
the runtime hands over (read-only chunks, strided window batches), so that no compilation happens
once the first frame of a stream has been read (a live stream would overflow its ring meanwhile)."""

from __future__ import annotations

import sys

import numpy as np
from numba.core.dispatcher import Dispatcher

from streamkit.core.clock import FreeRun
from streamkit.core.graph import Graph
from streamkit.core.registry import lookup
from streamkit.core.runtime import Runner
from streamkit.core.tags import Gap, GapCause
from streamkit.dsp.stft import STFT
from streamkit.io.collect import VectorSource

KIWI_RATE = "12001.188"


def speechlike(seconds: float, rate: float, seed: int = 0) -> np.ndarray:
    """Bursts of a gliding harmonic tone plus noise, 1.2 s on / 0.8 s off, over a noise floor."""
    rng = np.random.default_rng(seed)
    n = int(seconds * rate)
    t = np.arange(n) / rate
    f0 = 140 + 40 * np.sin(2 * np.pi * 3 * t)
    ph = 2 * np.pi * np.cumsum(f0) / rate
    voiced = sum(np.sin(k * ph) / k for k in range(1, 8))
    on = (t % 2.0) < 1.2
    x = 0.3 * voiced * on + 0.05 * rng.standard_normal(n) * on + 0.002 * rng.standard_normal(n)
    return x.astype(np.float32)


def signatures() -> dict[str, set[str]]:
    """Every compiled signature of every numba dispatcher in a loaded streamkit module."""
    out: dict[str, set[str]] = {}
    for name, mod in list(sys.modules.items()):
        if not name.startswith("streamkit") or mod is None:
            continue
        for attr, v in list(vars(mod).items()):
            if isinstance(v, Dispatcher):
                out[f"{name}.{attr}"] = {str(s) for s in v.signatures}
    return out


def station_like_graph() -> Graph:
    """The monitor's station graph (every detector with a numba kernel) on a file-like source at the
    Kiwi's rate, plus the other numba blocks (high-pass, STFT)."""
    x = speechlike(6.0, float(KIWI_RATE))
    g = Graph("warm")
    src = g.add(VectorSource(samples=x, rate=KIWI_RATE, sizes="random", mean_size=300, gaps=[(40000, Gap(lost=100, cause=GapCause.SEQ_GAP))]),
                name="src")  # fmt: skip
    hp = g.add(lookup("dsp.highpass")(), name="hp")
    rs = g.add(lookup("dsp.resample")(to_hz=8000), name="rs")
    lvl = g.add(lookup("dsp.level")(interval_s=0.5), name="level")
    g.chain(src, hp, rs, lvl)
    g.connect(lvl, g.add(lookup("dsp.energy_vad")(), name="vad"))
    g.connect(lvl, g.add(lookup("dsp.stat_sad")(), name="stat_sad"))
    g.connect(lvl, g.add(lookup("models.sad_dnn")(), name="dnn_sad"))
    g.connect(lvl, g.add(lookup("dsp.speech_gate")(), name="asr_sad"))
    g.connect(rs, g.add(STFT(n_fft=256, hop=128), name="stft"))
    return g


def test_no_numba_compilation_after_the_blocks_started():
    r = Runner(station_like_graph(), FreeRun(), stats_interval_s=0, keep_events=True, threaded_events=False)
    r.prepare()
    before = signatures()
    r.run()
    after = signatures()
    new = {k: sorted(v - before.get(k, set())) for k, v in after.items() if v - before.get(k, set())}
    assert new == {}, f"compiled after start(): {new}"
    kinds = {e.kind for e in r.events}
    assert "vad.segment" in kinds  # the detectors did find the bursts (their decision paths ran)
