"""EnergyVAD: state machine on its own, reference detector, bursts in noise, tags, events, gaps."""

from __future__ import annotations

import numpy as np
import pytest

from streamkit.core.errors import ConfigError
from streamkit.core.events import ActivitySegment
from streamkit.core.tags import SPEECH, Gap, GapCause, SpeechBoundary
from streamkit.dsp import EnergyVAD, VadDecision, VadState, VadStateMachine
from streamkit.testing import assert_chunking_invariant, run_block

RATE = 16_000
L = 320  # 20 ms at 16 kHz
rng = np.random.default_rng(0)


def noisy(seconds: float, bursts: list[tuple[int, int]], noise: float = 0.01, level: float = 0.1, seed: int = 1) -> np.ndarray:
    """White noise at -40 dBFS with louder noise bursts (+20 dB) over the given item ranges."""
    g = np.random.default_rng(seed)
    x = g.standard_normal(int(seconds * RATE)) * noise
    for a, b in bursts:
        x[a:b] += g.standard_normal(b - a) * level
    return x.astype(np.float32)[:, None]


def segments(run) -> list[tuple[int, int]]:
    return [e.span for e in run.events_of("vad.segment")]


def ref_segments(x: np.ndarray, *, frame: int, window: int, start_db: float, stop_db: float, start_frames: int, stop_frames: int,
                 min_level: float) -> list[tuple[int, int]]:  # fmt: skip
    """Independent straightforward implementation: per-frame loop, run-length counting."""
    m = x.reshape(-1)[: (x.shape[0] // frame) * frame].astype(np.float64).reshape(-1, frame)
    e = [10 * np.log10(max(float(np.mean(f * f)), 1e-20)) for f in m]
    segs, speaking, run, quiet, cand, start, last = [], False, 0, 0, 0, 0, 0
    for j, ej in enumerate(e):
        snr = ej - min(e[max(0, j - window + 1) : j + 1])
        if not speaking:
            run = run + 1 if (ej >= min_level and snr > start_db) else 0
            if run == 1:
                cand = j
            if run >= start_frames:
                speaking, start, last, quiet = True, cand, j, 0
        else:
            if ej >= min_level and snr > stop_db:
                last, quiet = j, 0
            else:
                quiet += 1
            if quiet >= stop_frames:
                segs.append((start * frame, (last + 1) * frame))
                speaking, run = False, 0
    if speaking:
        segs.append((start * frame, (last + 1) * frame))
    return segs


# -- the state machine alone -----------------------------------------------------------------------


def test_state_machine_transitions():
    sm = VadStateMachine(start_frames=3, stop_frames=2, start_db=10, stop_db=5)
    seq = [0, 12, 12, 0, 12, 12, 12, 7, 0, 7, 0, 0, 0]
    states, decisions = [], []
    for s in seq:
        decisions.append(sm.step(s))
        states.append(sm.state)
    Q, ST, SP, SO = VadState.QUIET, VadState.STARTING, VadState.SPEAKING, VadState.STOPPING
    assert states == [Q, ST, ST, Q, ST, ST, SP, SP, SO, SP, SO, Q, Q]
    got = [(j, d) for j, d in enumerate(decisions) if d is not None]
    assert [(j, d.start, d.frame, d.decided) for j, d in got] == [(6, True, 4, 6), (11, False, 10, 11)]
    assert got[0][1].score == pytest.approx(12.0) and got[1][1].score == pytest.approx((36 + 7 + 0 + 7) / 6)


def test_state_machine_hysteresis_and_gate():
    sm = VadStateMachine(start_frames=1, stop_frames=1, start_db=10, stop_db=5)
    assert sm.step(7) is None and sm.state == VadState.QUIET  # between thresholds: does not start
    assert sm.step(11).start and sm.state == VadState.SPEAKING
    assert sm.step(7) is None and sm.state == VadState.SPEAKING  # ...but keeps speech going
    d = sm.step(30, gate=False)  # gated frames are never speech
    assert d == VadDecision(False, 3, 3, pytest.approx(9.0))
    assert sm.state == VadState.QUIET


def test_state_machine_close():
    sm = VadStateMachine(start_frames=2, stop_frames=5, start_db=10, stop_db=5)
    for s in (20, 20, 20, 0):
        sm.step(s)
    d = sm.close()
    assert d is not None and (d.start, d.frame, d.decided) == (False, 3, 3) and sm.state == VadState.QUIET
    assert sm.close() is None
    sm.step(20)  # STARTING only: dropped
    assert sm.close() is None and sm.state == VadState.QUIET


def test_state_machine_rejects_bad_config():
    with pytest.raises(ConfigError):
        VadStateMachine(start_frames=0, stop_frames=1, start_db=10, stop_db=5)
    with pytest.raises(ConfigError):
        VadStateMachine(start_frames=1, stop_frames=1, start_db=5, stop_db=10)


# -- the block ------------------------------------------------------------------------------------


def test_instance():
    EnergyVAD().reset()  # reset before start is a no-op


@pytest.mark.parametrize("kw", [dict(stop_db=12, start_db=10), dict(frame_ms=0), dict(frame_ms="20"), dict(hangover_ms=-1),
                                dict(noise_window_s=0.01), dict(start_db=float("nan")), dict(min_speech_ms=True)])  # fmt: skip
def test_rejects_bad_config(kw):
    with pytest.raises(ConfigError):
        EnergyVAD(**kw)


def test_rejects_non_float32_and_tiny_frames():
    with pytest.raises(ConfigError):
        run_block(EnergyVAD(), np.zeros((100, 1), np.complex64), rate=RATE)
    with pytest.raises(ConfigError):
        run_block(EnergyVAD(frame_ms=0.01), np.zeros((100, 1), np.float32), rate=RATE)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_matches_reference_detector(seed):
    g = np.random.default_rng(seed)
    bursts = sorted((int(a), int(a) + int(g.integers(800, 16_000))) for a in g.integers(RATE, 9 * RATE, 6))
    x = noisy(10.3, bursts, level=float(g.uniform(0.02, 0.1)), seed=seed)
    kw = dict(start_db=9.0, stop_db=4.0, min_speech_ms=60, hangover_ms=200, noise_window_s=2.0, min_level_dbfs=-60)
    out = run_block(EnergyVAD(**kw), x, rate=RATE, sizes="random", mean_size=700)
    ref = ref_segments(x, frame=L, window=100, start_db=9.0, stop_db=4.0, start_frames=3, stop_frames=10, min_level=-60)
    assert segments(out) == ref and ref


def test_finds_bursts_in_noise_within_a_frame():
    bursts = [
        (int(1.2 * RATE) + 37, int(2.0 * RATE) + 5),
        (int(4.3 * RATE) + 111, int(5.1 * RATE) + 17),
        (int(7.0 * RATE) + 3, int(9.5 * RATE) + 250),
    ]
    short = (int(6.0 * RATE), int(6.0 * RATE) + 800)  # 50 ms < min_speech_ms: ignored
    x = noisy(11.0, bursts + [short])
    out = run_block(EnergyVAD(), x, rate=RATE, sizes=160)
    segs = segments(out)
    assert len(segs) == len(bursts)
    for (a, b), (lo, hi) in zip(bursts, segs, strict=True):
        assert abs(lo - a) < L and abs(hi - b) < L
        assert lo % L == 0 and hi % L == 0  # frame-exact
    for e, (lo, hi) in zip(out.events_of("vad.segment"), segs, strict=True):
        p = e.payload
        assert isinstance(p, ActivitySegment) and p.detector == "energy"
        assert (p.start_s, p.end_s) == (lo / RATE, hi / RATE)
        assert 15 < p.score < 25  # the bursts are 20 dB over the noise
    # a pause shorter than the hangover does not split a segment
    merged = segments(run_block(EnergyVAD(), noisy(6.0, [(RATE, 2 * RATE), (2 * RATE + 2_400, 3 * RATE)]), rate=RATE))
    assert merged == [(RATE, 3 * RATE)]


def test_speech_tags_at_decision_points():
    x = noisy(8.0, [(int(1.5 * RATE) + 10, int(3.0 * RATE) - 20), (int(5.0 * RATE), int(6.0 * RATE) + 99)])
    vad = EnergyVAD(min_speech_ms=100, hangover_ms=300)
    out = run_block(vad, x, rate=RATE, sizes=77, tags=[(1_000, "user:m", 1)])
    segs = segments(out)
    tags = [(t.offset, t.value) for t in out.tags if t.key == SPEECH]
    expect = []
    for lo, hi in segs:
        expect.append((lo + 5 * L, True))  # confirmed at the end of the 5th speech frame
        expect.append((hi + 15 * L, False))  # over after 15 frames (300 ms) of hangover
    assert [(o, v.start) for o, v in tags] == expect
    assert all(isinstance(v, SpeechBoundary) and v.detector == "energy" for _, v in tags)
    assert [v.score for o, v in tags if not v.start] == [e.payload.score for e in out.events_of("vad.segment")]
    assert [t.offset for t in out.tags if t.key == "user:m"] == [1_000]  # input tags are forwarded
    assert vad.algorithmic_latency() == 15 * L
    np.testing.assert_array_equal(out.samples, x)


def test_chunking_invariance():  # bit-exact tags and events, with a gap in the middle
    x = noisy(6.0, [(RATE + 500, 2 * RATE), (int(3.3 * RATE), int(4.1 * RATE)), (int(5.5 * RATE), 6 * RATE)])
    gap = Gap(lost=500, cause=GapCause.SEQ_GAP)
    r = assert_chunking_invariant(EnergyVAD, x, rate=RATE, sizes=("all", 1, 7, 160, "random"), gaps=[(int(3.7 * RATE) + 3, gap)])
    assert len(r.events_of("vad.segment")) == 3


def test_gap_closes_segment_and_restarts():
    bursts = [(int(1.0 * RATE), int(1.8 * RATE)), (int(4.0 * RATE), int(4.6 * RATE))]
    x = noisy(6.0, bursts)
    g = int(1.5 * RATE) + 77  # inside the first burst, off the frame grid
    out = run_block(EnergyVAD(), x, rate=RATE, sizes=500, gaps=[(g, Gap(lost=1_000, cause=GapCause.RECONNECT))])
    segs = segments(out)
    first = segs[0]
    assert first[0] == bursts[0][0] and first[1] <= g and g - first[1] < L  # closed at the gap, frame-exact
    assert (g, False) in [(t.offset, t.value.start) for t in out.tags if t.key == SPEECH]
    # after the gap the detector starts afresh on a frame grid anchored at the gap
    fresh = segments(run_block(EnergyVAD(), x[g:], rate=RATE, sizes=500))
    assert segs[1:] == [(lo + g, hi + g) for lo, hi in fresh]
    assert len(segs) == 2 and abs(segs[1][0] - bursts[1][0]) < L
    # without the reset the first segment would run on to the end of the burst
    assert segments(run_block(EnergyVAD(), x, rate=RATE, sizes=500))[0][1] >= bursts[0][1] - L


def test_flush_closes_an_open_segment():
    n = int(3.0 * RATE) + 111
    x = noisy(n / RATE, [(2 * RATE, n)])
    out = run_block(EnergyVAD(), x, rate=RATE, sizes=1_000)
    assert segments(out) == [(2 * RATE, (n // L) * L)]  # up to the last whole frame
    assert [(t.offset, t.value.start) for t in out.tags if t.key == SPEECH] == [(2 * RATE + 5 * L, True), (n, False)]


def test_quiet_input_gives_nothing():
    out = run_block(EnergyVAD(), noisy(5.0, []), rate=RATE, sizes=999)
    assert segments(out) == [] and not [t for t in out.tags if t.key == SPEECH]
    silent = run_block(EnergyVAD(), np.zeros((RATE, 1), np.float32), rate=RATE)  # -200 dBFS: below min_level
    assert segments(silent) == []
