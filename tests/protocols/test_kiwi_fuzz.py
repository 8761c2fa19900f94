"""Bounded property tests of the KiwiSDR parser and the ADPCM codec (hypothesis, derandomised).

The long run of the same generator (>= 1,000,000 frames) is ``benchmarks/fuzz_kiwi.py``.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streamkit.protocols.adpcm import INDEX_MAX, AdpcmDecoder, AdpcmEncoder, decode_reference
from streamkit.protocols.kiwi_client import KiwiClientProtocol
from streamkit.protocols.kiwi_events import AudioFrame, GapReason, ProtocolViolation, SequenceGap, State
from streamkit.protocols.kiwi_frames import build_snd_frame
from streamkit.protocols.kiwi_fuzz import KINDS, MUTATIONS, FuzzSession, audit, handshake, make_message, mutate

FUZZ = settings(max_examples=300, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

step = st.tuples(
    st.sampled_from(KINDS),
    st.one_of(st.none(), st.sampled_from(MUTATIONS)),
    st.integers(0, 2**32 - 1),
)


def run_messages(steps: list[tuple[str, str | None, int]]) -> None:
    p = KiwiClientProtocol(7100.0, "lsb", stall_timeout=5.0)
    p.connection_made(0.0)
    handshake(p)
    session = FuzzSession()
    delivered = lost_frames = 0
    last: bytes | str = b""
    for i, (kind, mutation, seed) in enumerate(steps):
        rng = np.random.default_rng(seed)
        m = make_message(kind, rng, session)
        if mutation is not None:
            m = mutate(m, rng, mutation, other=last if isinstance(last, bytes) else None)
        last = m
        now = 0.01 * (i + 1)
        p.receive_message(m, now)  # must never raise
        p.tick(now)
        events = p.events_received()
        p.data_to_send()
        assert audit(m, events) == [], (kind, mutation, seed)
        delivered += sum(e.samples.shape[0] for e in events if isinstance(e, AudioFrame))
        lost_frames += sum(e.lost_frames for e in events if isinstance(e, SequenceGap) and e.reason is GapReason.LOST)
        if p.state is State.CLOSED:
            assert p.terminal is not None and p.terminal.message
            break
    # the counters agree with the events: every decoded sample and every lost frame is accounted
    assert p.counters.samples == delivered and p.counters.lost_frames == lost_frames


@FUZZ
@given(st.lists(step, min_size=1, max_size=40))
def test_parser_survives_mutated_frames_of_every_kind(steps: list[tuple[str, str | None, int]]) -> None:
    run_messages(steps)


@pytest.mark.parametrize("kind", KINDS)
def test_every_kind_and_mutation_once(kind: str) -> None:
    run_messages([(kind, None, 1), *[(kind, m, s) for s in range(3) for m in MUTATIONS]])


CLEAN = settings(max_examples=200, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])


@CLEAN
@given(
    fmt=st.sampled_from(["adpcm", "pcm", "iq"]),
    plan=st.lists(
        st.tuples(st.integers(1, 3), st.sampled_from(["ok", "ok", "ok", "odd", "truncated", "bad_tag", "text", "duplicate"])), min_size=1, max_size=30
    ),
)
def test_every_frame_is_delivered_or_reported_lost(fmt: str, plan: list[tuple[int, str]]) -> None:
    """Frames of one format with forward sequence jumps and damaged frames in between: samples
    delivered + samples reported lost == frames in the sequence range x samples per frame.

    The range starts at the first good frame: a connection's first frame sets the baseline
    (test_kiwi.py::TestSequence::test_first_frame_needs_no_particular_seq)."""
    plan = [(plan[0][0], "ok"), *plan[1:]]
    flags = {"adpcm": 0x10, "pcm": 0, "iq": 0x08}[fmt]
    n = {"adpcm": 2048, "pcm": 512, "iq": 512}[fmt]
    enc = AdpcmEncoder()
    p = KiwiClientProtocol(7100.0, "iq" if fmt == "iq" else "lsb")
    p.connection_made(0.0)
    handshake(p)

    def frame(seq: int) -> bytes:
        x = (np.arange(2 * n if fmt == "iq" else n) % 200 - 100).astype(np.int16)
        return build_snd_frame(seq, -80.0, x, flags, encoder=enc if fmt == "adpcm" else None)

    seq, first = 0, None
    for jump, damage in plan:
        seq += jump
        first = seq if first is None else first
        good = frame(seq)
        bad = {"odd": good[:-1], "truncated": good[:9], "bad_tag": b"SNX" + good[3:], "text": "SND", "duplicate": None}.get(damage)
        if damage == "duplicate":
            p.receive_message(good, 0.0)
        elif bad is not None:
            p.receive_message(bad, 0.0)  # its number is never consumed: the next good frame reports it lost
            continue
        p.receive_message(good, 0.0)
    events = p.events_received()
    assert not [e for e in events if isinstance(e, ProtocolViolation) and e.reason.startswith("internal")]
    last_good = max((e.seq for e in events if isinstance(e, AudioFrame)), default=None)
    if last_good is None:
        return
    assert p.counters.samples + p.counters.lost_samples == (last_good - first + 1) * n


@CLEAN
@given(data=st.binary(max_size=300), index=st.integers(0, INDEX_MAX), prev=st.integers(-32768, 32767), cut=st.integers(0, 300))
def test_adpcm_decoder_matches_the_reference_and_splits_anywhere(data: bytes, index: int, prev: int, cut: int) -> None:
    d = AdpcmDecoder()
    d.preset(index, prev)
    out = d.decode(data)
    assert out.dtype == np.int16 and out.shape == (2 * len(data),)
    ref, ref_index, ref_prev = decode_reference(data, index, prev)
    assert out.tolist() == ref and d.state == (ref_index, ref_prev)
    d2 = AdpcmDecoder()
    d2.preset(index, prev)
    cut = min(cut, len(data))
    np.testing.assert_array_equal(np.concatenate([d2.decode(data[:cut]), d2.decode(data[cut:])]), out)


@CLEAN
@given(x=st.lists(st.integers(-32768, 32767), max_size=400), index=st.integers(-5, 95), prev=st.integers(-40000, 40000))
def test_adpcm_encoder_and_bad_state(x: list[int], index: int, prev: int) -> None:
    e = AdpcmEncoder()
    if len(x) % 2:
        with pytest.raises(ValueError):
            e.encode(np.array(x, dtype=np.int64))
        return
    payload = e.encode(np.array(x, dtype=np.int16))
    assert len(payload) == len(x) // 2
    d = AdpcmDecoder()
    d.decode(payload)
    assert d.state == e.state  # the encoder's state is the decoder's: nothing lost across frames
    if 0 <= index <= INDEX_MAX and -32768 <= prev <= 32767:
        d.preset(index, prev)
    else:
        with pytest.raises(ValueError):
            d.preset(index, prev)
