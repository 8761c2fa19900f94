"""The live view's sans-I/O parts: binary frames, bind addresses, the token and the Origin check."""

from __future__ import annotations

import math

import numpy as np
import pytest

from streamkit.web import frames
from streamkit.web.access import AccessError, check_access, check_origin, is_loopback, parse_bind, view_url


def test_rows_frame_round_trip():
    rows = [
        (1.5e9 + 0.1, 0.0, False, None, bytes(range(256))),
        (1.5e9 + 0.2, 0.171, True, "seq_gap", bytes(256)),
        (math.nan, 2.0, True, "weird", bytes([7]) * 256),
    ]
    data = frames.encode_rows(3, rows, 256)
    assert len(data) == 8 + 3 * (14 + 256)
    station, got = frames.decode(data)
    assert station == 3 and len(got) == 3
    assert got[0].t_s == rows[0][0] and got[0].levels == rows[0][4] and not got[0].gap and got[0].cause == "none"
    assert got[1].gap and got[1].cause == "seq_gap" and got[1].lost_s == pytest.approx(0.171, abs=1e-6)
    assert math.isnan(got[2].t_s) and got[2].cause == "other"  # an unknown cause is "other", never dropped


def test_audio_frame_round_trip_clips_and_rounds():
    x = np.array([0.0, 0.5, -0.5, 1.5, -2.0, 1e-6], np.float32)
    f = frames.decode(frames.encode_audio(1, 8000.0, 123456789, x, lost_s=0.25, gap=True))
    assert isinstance(f, frames.AudioFrame)
    assert (f.station, f.rate, f.start, f.gap) == (1, 8000.0, 123456789, True) and f.lost_s == 0.25
    assert f.samples.tolist() == [0, 16384, -16384, 32767, -32768, 0]


def test_batch_frames_hold_one_tick_of_frames_in_order():
    parts = [
        frames.encode_rows(0, [(1.0, 0.0, False, None, bytes(8))], 8),
        frames.encode_audio(2, 8000, 160, np.zeros(160)),
        frames.encode_rows(5, [], 8),
    ]
    batch = frames.encode_batch(parts)
    assert frames.split_batch(batch) == parts and frames.split_batch(parts[0]) == [parts[0]]
    got = frames.decode_all(batch)
    assert got[0][0] == 0 and got[1].station == 2 and got[1].start == 160 and got[2] == (5, [])
    for bad, why in [(batch[:-1], "past the end"), (batch + b"x", "after the last"), (batch[:3], "short batch"), (bytes([3, 2, 0, 0]), "version 2"),
                     (frames.encode_batch([b"ab"])[:6], "inside a length")]:  # fmt: skip
        with pytest.raises(frames.FrameError, match=why):
            frames.decode_all(bad)


@pytest.mark.parametrize(
    "bad, why",
    [(b"", "0 bytes"), (bytes([1, 9]), "version 9"), (bytes([7, 1]), "unknown frame type"), (bytes([1, 1, 0]), "short rows"),
     (frames.encode_rows(0, [(0.0, 0.0, False, None, bytes(8))], 8)[:-1], "rows frame of"), (frames.encode_audio(0, 8000, 0, np.zeros(4))[:-2], "audio frame of")],
)  # fmt: skip
def test_bad_frames_are_refused_with_a_reason(bad, why):
    with pytest.raises(frames.FrameError, match=why):
        frames.decode(bad)


def test_encode_refuses_inconsistent_rows():
    with pytest.raises(ValueError, match="bins"):
        frames.encode_rows(0, [(0.0, 0.0, False, None, bytes(10))], 8)
    with pytest.raises(ValueError, match="station"):
        frames.encode_rows(70000, [], 8)


@pytest.mark.parametrize(
    "spec, want",
    [
        ("8080", ("127.0.0.1", 8080)),
        ("0", ("127.0.0.1", 0)),
        ("0.0.0.0:80", ("0.0.0.0", 80)),
        ("[::1]:9000", ("::1", 9000)),
        ("localhost:1", ("localhost", 1)),
    ],
)
def test_parse_bind(spec, want):
    assert parse_bind(spec) == want


@pytest.mark.parametrize(
    "spec, why", [("", "empty"), ("abc", "port"), ("70000", "0-65535"), ("::1:80", "brackets"), ("[::1]80", "IPV6"), (":80", "empty host")]
)
def test_parse_bind_refuses_garbage(spec, why):
    with pytest.raises(AccessError, match=why):
        parse_bind(spec)


def test_loopback_and_url():
    assert is_loopback("127.0.0.1") and is_loopback("127.3.4.5") and is_loopback("::1") and is_loopback("localhost") and is_loopback("[::1]")
    assert not is_loopback("0.0.0.0") and not is_loopback("192.168.1.2") and not is_loopback("example.org") and not is_loopback("::")
    assert view_url("127.0.0.1", 8080, None) == "http://127.0.0.1:8080/"
    assert view_url("::1", 8080, "abc") == "http://[::1]:8080/?token=abc"


def test_token_check():
    assert check_access(None, None, None) == (True, "")
    assert check_access("s3cret", "s3cret", None)[0]
    assert check_access("s3cret", None, "Bearer s3cret")[0]
    ok, why = check_access("s3cret", None, None)
    assert not ok and "token required" in why
    ok, why = check_access("s3cret", "guess", None)
    assert not ok and why == "wrong access token" and "s3cret" not in why


def test_origin_check():
    assert check_origin(None, "127.0.0.1:8080")[0]  # not a browser
    assert check_origin("http://127.0.0.1:8080", "127.0.0.1:8080")[0]
    assert not check_origin("http://evil.example", "127.0.0.1:8080")[0]
    assert not check_origin("null", "127.0.0.1:8080")[0]
    assert not check_origin("http://127.0.0.1:8081", "127.0.0.1:8080")[0]
