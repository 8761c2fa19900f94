"""Loss accounting of malformed SND frames and of servers that send anything but audio."""

from __future__ import annotations

import numpy as np

from streamkit.protocols.adpcm import AdpcmEncoder
from streamkit.protocols.kiwi_client import KiwiClientProtocol
from streamkit.protocols.kiwi_events import AudioFrame, GapReason, ProtocolViolation, SequenceGap, State, Terminal, TerminalKind
from streamkit.protocols.kiwi_frames import SndFlag, build_snd_frame

from .test_kiwi import feed, of, sine, streaming_proto

C = SndFlag.COMPRESSED


def adpcm_frames(n: int) -> list[bytes]:
    enc = AdpcmEncoder()
    return [build_snd_frame(k, -73.0, sine((k - 1) * 2048, k * 2048), C, encoder=enc) for k in range(1, n + 1)]


def test_odd_adpcm_payload_is_a_violation_and_a_counted_gap() -> None:
    p = streaming_proto()
    f = adpcm_frames(4)
    events = feed(p, f[0], f[1][:-1], f[2], f[3])
    (v,) = of(events, ProtocolViolation)
    assert "ADPCM payload of 1023 bytes is odd" in v.reason and not v.fatal
    assert [a.seq for a in of(events, AudioFrame)] == [1, 3, 4]
    assert all(a.samples.shape == (2048,) for a in of(events, AudioFrame))
    assert of(events, SequenceGap) == [SequenceGap(2, 3, 1, 2048, GapReason.LOST)]
    # every sample of the 4 frames is either delivered or reported lost, none short
    assert p.counters.samples + p.counters.lost_samples == 4 * 2048
    assert of(events, AudioFrame)[1].lost_before == 1


def test_odd_adpcm_payload_keeps_the_decoder_state() -> None:
    """A rejected frame does not touch the ADPCM state: the next frame decodes as after a lost frame."""
    f = adpcm_frames(3)
    a, b = streaming_proto(), streaming_proto()
    ea = of(feed(a, f[0], f[1][:-1], f[2]), AudioFrame)
    eb = of(feed(b, f[0], f[2]), AudioFrame)
    np.testing.assert_array_equal(ea[-1].samples, eb[-1].samples)


def flood(p: KiwiClientProtocol, t0: float, t1: float, step: float, message: bytes | str) -> None:
    t = t0
    while t < t1 and p.state is not State.CLOSED:
        p.receive_message(message, t)
        p.tick(t)
        t += step


def test_message_flood_without_audio_is_reported_as_such() -> None:
    p = streaming_proto(stall_timeout=2.0)
    feed(p, adpcm_frames(1)[0], now=0.0)
    flood(p, 0.0, 10.0, 0.01, b"MSG flood=1")
    (t,) = of(p.events_received(), Terminal)
    assert t.kind is TerminalKind.NO_AUDIO and t.retryable
    assert "no audio for 2.0 s" in t.message and "MSG flood" in t.message and "stalled" not in t.message
    n = int(t.message.split("MSG flood x")[1].split()[0].rstrip(",)"))
    assert 190 <= n <= 201  # the count of what it sent instead


def test_text_flood_names_the_kind_and_escapes_server_text() -> None:
    p = streaming_proto(stall_timeout=1.0)
    feed(p, adpcm_frames(1)[0], now=0.0)
    flood(p, 0.0, 0.9, 0.05, "MSG \x1b[2Jevil")
    p.receive_message(b"MSG \x1b[31mred=1", 0.99)  # a key with an escape sequence
    p.tick(1.0)
    (t,) = of(p.events_received(), Terminal)
    assert t.kind is TerminalKind.NO_AUDIO
    assert "text message x" in t.message and "\x1b" not in t.message and "\\x1b[31mred" in t.message


def test_audio_resets_the_flood_watch_and_silence_is_still_stalled() -> None:
    p = streaming_proto(stall_timeout=2.0)
    frames = adpcm_frames(30)
    t = 0.0
    for k in range(30):  # audio every 0.17 s with MSGs in between: healthy
        p.receive_message(frames[k], t)
        for _ in range(10):
            t += 0.017
            p.receive_message(b"MSG foo=1", t)
            p.tick(t)
    assert p.state is State.STREAMING and not of(p.events_received(), Terminal)
    p.tick(t + 2.5)  # then nothing at all: stalled, as before
    (term,) = of(p.events_received(), Terminal)
    assert term.kind is TerminalKind.STALLED
