"""SpeechGate: the audio passes unchanged, speech tags sit on the StatSAD's segment spans, any
chunking gives the same result, a gap loses nothing that the source did not lose."""

from __future__ import annotations

import numpy as np
import pytest

from streamkit.core.errors import ConfigError
from streamkit.core.tags import GAP, SPEECH, Gap, GapCause, SpeechBoundary
from streamkit.core.types import StreamSpec
from streamkit.dsp.speech_gate import SpeechGate
from streamkit.dsp.stat_sad import StatSAD
from streamkit.testing import assert_chunking_invariant, run_block
from tests.dsp.test_stat_sad import make

RATE = 8000


@pytest.fixture(scope="module")
def sig() -> np.ndarray:
    x, _ = make(24.0, snr_db=10.0, seed=3)
    return x.astype(np.float32)


def speech_spans(run) -> list[tuple[int, int | None]]:
    """(start, end) offsets from the speech tags (end None when the segment was never closed)."""
    out: list[tuple[int, int | None]] = []
    for t in run.tags:
        if t.key != SPEECH:
            continue
        assert isinstance(t.value, SpeechBoundary) and t.value.detector == "stat"
        if t.value.start:
            out.append((t.offset, None))
        else:
            assert out and out[-1][1] is None, "end tag without a start"
            out[-1] = (out[-1][0], t.offset)
    return out


def event_spans(run) -> list[tuple[int, int]]:
    return [tuple(e.span) for e in run.events_of("vad.segment")]


def test_audio_unchanged_and_tags_on_statsad_segments(sig):
    r = run_block(SpeechGate(), sig[:, None], rate=RATE, sizes=333)
    np.testing.assert_array_equal(r.samples[:, 0], sig)  # every item, unchanged, none added
    ref = run_block(StatSAD(), sig[:, None], rate=RATE, sizes=333)
    ev_ref = event_spans(ref)
    assert len(ev_ref) >= 3
    assert event_spans(r) == ev_ref  # the StatSAD's decisions
    spans = speech_spans(r)
    closed = [(a, b) for a, b in spans if b is not None]
    # every segment that ends before the last item has both tags, at its span
    assert closed == [s for s in ev_ref if s[1] < sig.shape[0]]


def test_chunking_invariant(sig):
    assert_chunking_invariant(SpeechGate, sig[:, None], rate=RATE, sizes=("all", 1, 257, "random"))


def test_gap_drains_held_audio(sig):
    g = 100_000
    gap = Gap(lost=4000, cause=GapCause.RECONNECT)
    r = run_block(SpeechGate(), sig[:, None], rate=RATE, sizes=700, gaps=[(g, gap)])
    np.testing.assert_array_equal(r.samples[:, 0], sig)  # nothing held back at the gap is lost
    assert GAP in [t.key for t in r.tags if t.offset == g]
    spans = speech_spans(r)
    # no segment runs across the gap, and the run after the gap is a fresh one
    assert all(not (a < g < (b if b is not None else g + 1)) for a, b in spans)
    fresh = run_block(SpeechGate(), sig[g:, None], rate=RATE, sizes=700)
    assert [(a - g, b - g) for a, b in event_spans(r) if a >= g] == event_spans(fresh)
    assert_chunking_invariant(SpeechGate, sig[:, None], rate=RATE, sizes=("all", 7, "random"), gaps=[(g, gap)])


def test_latency_and_config():
    gate = SpeechGate()
    assert gate.algorithmic_latency() == 512 + 12 * 256
    with pytest.raises(ConfigError):
        SpeechGate(threshold="x")
    with pytest.raises(ConfigError):
        SpeechGate(vote_window=4)
    with pytest.raises(ConfigError):
        SpeechGate(events="yes")
    with pytest.raises(ConfigError, match="8000"):
        SpeechGate().negotiate({"in": StreamSpec(16000, 1, np.dtype(np.float32))})


def test_events_off_and_nonfinite(sig):
    x = sig.copy()
    x[5000:5100] = np.nan
    r = run_block(SpeechGate(events=False), x[:, None], rate=RATE, sizes=500)
    assert not r.events_of("vad.segment")
    assert speech_spans(r)
    np.testing.assert_array_equal(np.isnan(r.samples[:, 0]), np.isnan(x))  # handed on as it came


def test_registered():
    from streamkit.core.registry import lookup

    assert lookup("dsp.speech_gate") is SpeechGate


def test_short_prompt_tagged_from_its_start():
    """The ASR's gate gets the StatSAD's warm-up re-scoring: a prompt's speech is tagged from its start."""
    from tests.dsp.test_stat_sad import prompt

    x, a, b = prompt(1)
    r = run_block(SpeechGate(), x[:, None], rate=RATE, sizes=800)
    np.testing.assert_array_equal(r.samples[:, 0], x)
    spans = speech_spans(r)
    assert spans and spans[0][0] <= a + 2 * 256
    end = spans[0][1] if spans[0][1] is not None else x.shape[0]
    assert (min(end, b) - max(spans[0][0], a)) / (b - a) > 0.9
    r0 = run_block(SpeechGate(warmup_rescore=False), x[:, None], rate=RATE, sizes=800)
    assert not speech_spans(r0) or speech_spans(r0)[0][0] > a + 0.5 * RATE
    assert_chunking_invariant(SpeechGate, x[:, None], rate=RATE, sizes=("all", 1, 300, "random"))
