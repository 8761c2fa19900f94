"""Sans-I/O tests for streamkit.protocols.kiwi_client and kiwi_frames with byte fixtures."""

from __future__ import annotations

import hashlib
import math
import struct
from datetime import datetime, timedelta, timezone
from typing import Any

import numpy as np
import pytest

from streamkit.protocols.adpcm import AdpcmEncoder, decode_reference
from streamkit.protocols.kiwi_client import KiwiClientProtocol
from streamkit.protocols.kiwi_events import (
    AudioFrame,
    AuthResult,
    GapReason,
    IgnoredMessage,
    KiwiEvent,
    ProtocolViolation,
    SampleRate,
    SequenceGap,
    ServerInfo,
    State,
    Terminal,
    TerminalKind,
    UnknownMessage,
)
from streamkit.protocols.kiwi_frames import (
    DEFAULT_PASSBANDS,
    MODES,
    GpsStamp,
    SndFlag,
    build_msg,
    build_snd_frame,
    gps_week_time_to_utc_ns,
    parse_client_command,
    samples_per_frame,
    smeter_dbm,
    smeter_raw,
)

C = SndFlag.COMPRESSED
IQ = SndFlag.MODE_IQ
LE = SndFlag.LITTLE_ENDIAN

SETUP_DEFAULT = [
    "SET ident_user=streamkit",
    "SET mod=lsb low_cut=-2700 high_cut=-300 freq=7100.000",
    "SET agc=1 hang=0 thresh=-100 slope=6 decay=1000 manGain=50",
    "SET compression=1",
    "SET keepalive",
]
AR_OK = "SET AR OK in=12000 out=44100"

# The v1.711 server side of the handshake, message by message.
PRE_AUTH = [
    b"MSG sample_rate=12001.188000",
    b"MSG client_public_ip=192.0.2.7",
    b"MSG rx_chans=4",
    b"MSG chan_no_pwd=0",
    b"MSG chan_no_pwd_true=0",
    b"MSG is_local=2,0,0",
    b"MSG max_camp=4",
]
AUTH_OK = b"MSG badp=0"
POST_AUTH = [
    b"MSG version_maj=1 version_min=711 debian_ver=11 model=kiwi platform=beaglebone_black ext_clk=0 abyy=0 freq_offset=0.000",
    b"MSG load_cfg=%7B%22rx_gps%22%3A%22%28-37.6%2C%20145.1%29%22%7D",
    b"MSG cfg_loaded",
    b"MSG center_freq=15000000 bandwidth=30000000 adc_clk_nom=66666600",
    b"MSG audio_init=0 audio_rate=12000",
]


def sine(k0: int, k1: int) -> np.ndarray:
    k = np.arange(k0, k1)
    return np.round(8000 * np.sin(2 * np.pi * 1000 * k / 12000)).astype(np.int16)


def proto(freq: float = 7100.0, mode: str = "lsb", **kw: Any) -> KiwiClientProtocol:
    p = KiwiClientProtocol(freq, mode, **kw)
    p.connection_made(0.0)
    return p


def feed(p: KiwiClientProtocol, *messages: bytes | bytearray | memoryview | str, now: float = 0.0) -> list[KiwiEvent]:
    for m in messages:
        p.receive_message(m, now)
    return p.events_received()


def streaming_proto(**kw: Any) -> KiwiClientProtocol:
    """A protocol that went through the whole handshake (events and output drained)."""
    p = proto(**kw)
    feed(p, *PRE_AUTH, AUTH_OK, *POST_AUTH)
    p.data_to_send()
    assert p.setup_complete
    return p


def of(events: list[KiwiEvent], cls: type) -> list:
    return [e for e in events if isinstance(e, cls)]


def frames(events: list[KiwiEvent]) -> list[AudioFrame]:
    return of(events, AudioFrame)


def pcm_frame(seq: int, flags: int = 0, n: int = 512, dbm: float = -73.0) -> bytes:
    return build_snd_frame(seq, dbm, np.arange(n, dtype=np.int16), flags)


# --------------------------------------------------------------------------------------------
# construction and validation
# --------------------------------------------------------------------------------------------


class TestConstruction:
    def test_instance(self) -> None:
        p = KiwiClientProtocol(7100.0)
        assert p.state is State.CONNECTING
        assert p.mode == "lsb" and p.passband == (-2700, -300) and p.freq_khz == 7100.0
        assert p.data_to_send() == [] and p.events_received() == []

    def test_url_path(self) -> None:
        assert KiwiClientProtocol.url_path(1234567) == "/1234567/SND"
        assert KiwiClientProtocol(10.0).url_path(0) == "/0/SND"
        with pytest.raises(ValueError):
            KiwiClientProtocol.url_path(-1)

    @pytest.mark.parametrize("mode", MODES)
    def test_every_firmware_mode_has_a_default_passband(self, mode: str) -> None:
        p = KiwiClientProtocol(1000.0, mode)
        lo, hi = p.passband
        assert lo < hi and (lo, hi) == DEFAULT_PASSBANDS[mode]

    def test_default_passbands(self) -> None:
        assert DEFAULT_PASSBANDS["lsb"] == (-2700, -300)
        assert DEFAULT_PASSBANDS["usb"] == (300, 2700)
        assert DEFAULT_PASSBANDS["cw"] == (300, 700)
        assert DEFAULT_PASSBANDS["nbfm"] == (-6000, 6000)
        assert DEFAULT_PASSBANDS["iq"] == (-5000, 5000)

    @pytest.mark.parametrize(
        "kwargs",
        [
            {"mode": "fm"},
            {"mode": "x"},
            {"mode": "LSB"},
            {"freq_khz": -1.0},
            {"freq_khz": math.nan},
            {"freq_khz": math.inf},
            {"low_cut": 500, "high_cut": 500},
            {"low_cut": 3000},  # above the lsb default high cut of -300
            {"high_cut": -3000},
            {"low_cut": math.nan, "high_cut": 100},
            {"keepalive_interval": 0.0},
            {"keepalive_interval": -1.0},
            {"stall_timeout": 0.0},
        ],
    )
    def test_rejects_bad_config(self, kwargs: dict[str, object]) -> None:
        args: dict[str, object] = {"freq_khz": 7100.0, **kwargs}
        with pytest.raises(ValueError):
            KiwiClientProtocol(**args)  # type: ignore[arg-type]

    def test_custom_passband_one_edge(self) -> None:
        assert KiwiClientProtocol(7100.0, "lsb", low_cut=-3000).passband == (-3000, -300)
        assert KiwiClientProtocol(7100.0, "usb", low_cut=100.4, high_cut=3000).passband == (100, 3000)


# --------------------------------------------------------------------------------------------
# command sequence
# --------------------------------------------------------------------------------------------


class TestHandshake:
    """The exact commands for scripted server conversations."""

    def test_auth_is_first(self) -> None:
        p = KiwiClientProtocol(7100.0)
        p.connection_made(0.0)
        assert p.state is State.AUTHENTICATING
        assert p.data_to_send() == ["SET auth t=kiwi p="]
        assert p.data_to_send() == []
        p.connection_made(1.0)  # a second call is ignored
        assert p.data_to_send() == []

    def test_v1711_sequence(self) -> None:
        p = proto()
        assert p.data_to_send() == ["SET auth t=kiwi p="]
        # sample_rate arrives BEFORE the auth reply: nothing may be sent yet (a real Kiwi kicks
        # a client that sends SET before auth succeeds).
        for m in PRE_AUTH:
            p.receive_message(m, 0.05)
            assert p.data_to_send() == []
        p.receive_message(AUTH_OK, 0.06)
        assert p.data_to_send() == SETUP_DEFAULT
        assert p.authenticated and not p.setup_complete
        for m in POST_AUTH[:-1]:
            p.receive_message(m, 0.07)
            assert p.data_to_send() == []
        p.receive_message(POST_AUTH[-1], 0.08)
        assert p.data_to_send() == [AR_OK]
        assert p.setup_complete
        assert p.state is State.AUTHENTICATING  # STREAMING only after the first frame

    def test_v1711_events(self) -> None:
        p = proto()
        events = feed(p, *PRE_AUTH, AUTH_OK, *POST_AUTH)
        assert of(events, AuthResult) == [AuthResult(True, 0)]
        assert of(events, SampleRate) == [SampleRate(12001.188, 12000)]
        assert not of(events, ProtocolViolation) and not of(events, UnknownMessage)
        info = {e.key: e.value for e in of(events, ServerInfo)}
        assert info["client_public_ip"] == "192.0.2.7"
        assert info["rx_chans"] == 4 and info["version_min"] == 711 and info["version_maj"] == 1
        assert info["freq_offset"] == 0.0 and isinstance(info["freq_offset"], float)
        assert info["is_local"] == "2,0,0"
        assert info["model"] == "kiwi" and info["debian_ver"] == 11
        assert info["center_freq"] == 15_000_000 and info["bandwidth"] == 30_000_000
        assert info["cfg_loaded"] is None
        assert info["load_cfg"] == '{"rx_gps":"(-37.6, 145.1)"}'
        assert info["audio_rate"] == 12000 and info["audio_init"] == 0
        assert p.server_info["bandwidth"] == 30_000_000
        assert p.sample_rate == 12001.188 and p.audio_rate == 12000

    def test_old_grouped_form_before_badp(self) -> None:
        """v1.216: audio_init, audio_rate and sample_rate in one MSG before the auth reply."""
        p = proto()
        p.data_to_send()
        events = feed(p, b"MSG audio_init=0 audio_rate=12000 sample_rate=12001.150")
        assert p.data_to_send() == []
        assert of(events, SampleRate) == [SampleRate(12001.15, 12000)]
        feed(p, b"MSG badp=0")
        assert p.data_to_send() == [*SETUP_DEFAULT, AR_OK]
        assert p.setup_complete

    def test_grouped_after_badp_audio_rate_first(self) -> None:
        p = proto()
        p.data_to_send()
        feed(p, AUTH_OK)
        assert p.data_to_send() == []  # no sample_rate yet
        feed(p, b"MSG audio_rate=12000 sample_rate=12001.150")
        # setup comes before AR OK whatever the token order
        assert p.data_to_send() == [*SETUP_DEFAULT, AR_OK]

    def test_sample_rate_after_badp(self) -> None:
        p = proto()
        p.data_to_send()
        feed(p, AUTH_OK, b"MSG audio_init=1 audio_rate=20250")
        assert p.data_to_send() == ["SET AR OK in=20250 out=44100"]
        events = feed(p, b"MSG sample_rate=20251.094000")
        assert p.data_to_send() == SETUP_DEFAULT
        assert of(events, SampleRate) == [SampleRate(20251.094, 20250)]

    def test_custom_parameters_are_encoded(self) -> None:
        p = proto(
            14074.0,
            "usb",
            low_cut=100,
            high_cut=3000,
            password="my secret/pw&x=1",
            user="Tom & Jerry",
            compression=False,
            agc=False,
            man_gain=70,
            agc_hang=True,
            agc_thresh=-90,
            agc_slope=3,
            agc_decay=500,
        )
        assert p.data_to_send() == ["SET auth t=kiwi p=my%20secret%2Fpw%26x%3D1"]
        feed(p, b"MSG sample_rate=12001.188000", AUTH_OK, b"MSG audio_init=0 audio_rate=12000")
        assert p.data_to_send() == [
            "SET ident_user=Tom%20%26%20Jerry",
            "SET mod=usb low_cut=100 high_cut=3000 freq=14074.000",
            "SET agc=0 hang=1 thresh=-90 slope=3 decay=500 manGain=70",
            "SET compression=0",
            "SET keepalive",
            AR_OK,
        ]

    def test_setup_sent_once(self) -> None:
        p = streaming_proto()
        feed(p, b"MSG sample_rate=12001.188000", AUTH_OK, b"MSG audio_rate=12000")
        assert p.data_to_send() == []

    def test_every_command_parses_server_side(self) -> None:
        p = proto(password="pw d", user="a b")
        feed(p, *PRE_AUTH, AUTH_OK, *POST_AUTH)
        sent = p.data_to_send()
        parsed = [parse_client_command(c) for c in sent]
        assert [name for name, _ in parsed] == ["auth", "ident_user", "mod", "agc", "compression", "keepalive", "AR OK"]
        assert parsed[0][1] == {"t": "kiwi", "p": "pw d"}
        assert parsed[1][1] == {"ident_user": "a b"}
        assert parsed[2][1] == {"mod": "lsb", "low_cut": "-2700", "high_cut": "-300", "freq": "7100.000"}
        assert parsed[3][1] == {"agc": "1", "hang": "0", "thresh": "-100", "slope": "6", "decay": "1000", "manGain": "50"}
        assert parsed[6][1] == {"in": "12000", "out": "44100"}

    def test_nothing_sent_before_connection_made(self) -> None:
        p = KiwiClientProtocol(7100.0)
        feed(p, *PRE_AUTH, AUTH_OK, *POST_AUTH)
        assert p.data_to_send() == []
        p.tick(100.0)
        assert p.data_to_send() == []


# --------------------------------------------------------------------------------------------
# keepalive and the four-keepalive rule
# --------------------------------------------------------------------------------------------


def keepalives(cmds: list[str]) -> int:
    return sum(c == "SET keepalive" for c in cmds)


class TestKeepalive:
    def test_rate_limited_after_setup(self) -> None:
        p = proto()
        feed(p, *PRE_AUTH, AUTH_OK, *POST_AUTH, now=0.0)
        assert keepalives(p.data_to_send()) == 1  # the one of the setup, at t=0
        p.tick(0.5)
        assert p.data_to_send() == []
        p.tick(0.99)
        assert p.data_to_send() == []
        p.tick(1.0)
        assert p.data_to_send() == ["SET keepalive"]
        p.tick(1.0)
        p.tick(1.5)
        assert p.data_to_send() == []
        # frame arrival also triggers one, under the same limit
        p.receive_message(pcm_frame(1), 1.8)
        assert p.data_to_send() == []
        p.receive_message(pcm_frame(2), 2.0)
        assert p.data_to_send() == ["SET keepalive"]
        p.tick(2.5)
        p.receive_message(pcm_frame(3), 2.9)
        assert p.data_to_send() == []
        p.tick(3.0)
        p.receive_message(pcm_frame(4), 3.0)
        assert p.data_to_send() == ["SET keepalive"]
        assert p.counters.keepalives_sent == 4

    def test_never_more_than_one_per_interval(self) -> None:
        p = streaming_proto(keepalive_interval=2.0)
        sent_at: list[float] = []
        for i in range(1, 400):
            now = i * 0.05
            if i % 3:
                p.tick(now)
            else:
                p.receive_message(pcm_frame(i), now)
            if keepalives(p.data_to_send()):
                sent_at.append(now)
        assert len(sent_at) >= 9
        assert all(b - a >= 2.0 - 1e-9 for a, b in zip(sent_at[:-1], sent_at[1:], strict=True))

    def test_at_most_four_before_setup_complete(self) -> None:
        """sample_rate and badp=0 but no audio_rate: setup incomplete, so <= 4 keepalives."""
        p = proto()
        p.data_to_send()
        feed(p, *PRE_AUTH, AUTH_OK, now=0.0)
        total = keepalives(p.data_to_send())
        assert total == 1
        for i in range(1, 2001):
            p.tick(i * 0.05)  # 100 s
            total += keepalives(p.data_to_send())
        assert total == 4
        # setup completes: the normal 1 s cadence resumes
        feed(p, POST_AUTH[-1], now=100.0)
        assert p.data_to_send() == [AR_OK]
        p.tick(100.0)
        p.tick(100.5)
        p.tick(101.0)
        assert keepalives(p.data_to_send()) == 2

    def test_pre_auth_keepalives_are_spaced_and_capped(self) -> None:
        p = proto()
        p.data_to_send()
        times: list[float] = []
        for i in range(1, 1001):
            now = i * 0.1
            p.tick(now)
            if keepalives(p.data_to_send()):
                times.append(now)
        assert len(times) == 4
        assert all(b - a >= 5.0 - 1e-9 for a, b in zip(times[:-1], times[1:], strict=True))
        # after badp=0 + sample_rate the setup goes out without a 5th keepalive
        feed(p, *PRE_AUTH, AUTH_OK, now=200.0)
        assert p.data_to_send() == SETUP_DEFAULT[:-1]
        assert p.counters.keepalives_sent == 4

    def test_frames_before_setup_obey_the_budget(self) -> None:
        p = proto()
        p.data_to_send()
        total = 0
        for i in range(1, 200):
            p.receive_message(pcm_frame(i), i * 1.0)
            total += keepalives(p.data_to_send())
        assert total <= 4

    def test_setup_keepalive_respects_interval(self) -> None:
        p = proto()
        p.data_to_send()
        p.tick(5.0)  # pre-auth keepalive at t=5
        assert p.data_to_send() == ["SET keepalive"]
        feed(p, *PRE_AUTH, AUTH_OK, now=5.5)
        assert keepalives(p.data_to_send()) == 0

    def test_no_keepalive_after_close(self) -> None:
        p = streaming_proto()
        feed(p, b"MSG kiwi_kick=1%2Cbye", now=0.5)
        p.tick(10.0)
        p.receive_message(pcm_frame(1), 11.0)
        assert p.data_to_send() == []


# --------------------------------------------------------------------------------------------
# SND frames
# --------------------------------------------------------------------------------------------


class TestFrames:
    def test_example_header_adpcm(self) -> None:
        """53 4e 44 10 01 00 00 00 02 1c + 1024 ADPCM bytes (this is F1)."""
        payload = AdpcmEncoder().encode(sine(0, 2048))
        msg = bytes.fromhex("53 4e 44 10 01 00 00 00 02 1c") + payload
        assert hashlib.sha256(msg).hexdigest() == "2eb67b2818b4107b73e789c68c4b9f70c8f37ec563c9668ac26f43e52b0fb79f"
        p = streaming_proto()
        events = feed(p, msg)
        assert p.state is State.STREAMING
        (f,) = frames(events)
        assert (f.seq, f.flags, f.smeter_dbm, f.iq, f.gps, f.lost_before) == (1, 0x10, -73.0, False, None, 0)
        assert f.compressed and not f.restart and not f.little_endian
        assert f.samples.dtype == np.float32 and f.samples.shape == (2048,)
        np.testing.assert_array_equal(f.samples * 32768, decode_reference(payload)[0])
        assert p.adpcm_state == (68, -4322)

    def test_example_header_pcm(self) -> None:
        """53 4e 44 00 07 00 00 00 02 1c + 512 big-endian int16."""
        x = np.linspace(-32768, 32767, 512).astype(np.int16)
        msg = bytes.fromhex("53 4e 44 00 07 00 00 00 02 1c") + x.astype(">i2").tobytes()
        assert build_snd_frame(7, -73.0, x, 0) == msg
        (f,) = frames(feed(streaming_proto(), msg))
        assert (f.seq, f.smeter_dbm, f.compressed) == (7, -73.0, False)
        assert f.samples.dtype == np.float32 and f.samples.shape == (512,)
        np.testing.assert_array_equal(f.samples, x.astype(np.float32) / 32768)
        assert f.samples.min() == -1.0

    def test_example_header_iq(self) -> None:
        """IQ header with GNSS stamp 345600 s / 500000000 ns, then I=1000, Q=-1000."""
        header = bytes.fromhex("53 4e 44 08 01 00 00 00 02 1c 00 00 00 46 05 00 00 65 cd 1d")
        msg = header + bytes.fromhex("03 e8 fc 18") * 512
        gps = GpsStamp(0, 345600, 500_000_000)
        assert build_snd_frame(1, -73.0, np.tile(np.array([1000, -1000], np.int16), 512), IQ, gps) == msg
        (f,) = frames(feed(streaming_proto(), msg))
        assert f.iq and f.seq == 1 and f.smeter_dbm == -73.0
        assert f.gps == gps and f.gps is not None and f.gps.valid
        assert f.samples.dtype == np.complex64 and f.samples.shape == (512,)
        assert f.samples[0] == np.complex64(complex(1000 / 32768, -1000 / 32768))
        assert f.samples[0].real == 1000 / 32768

    def test_iq_frame_two_dim_input(self) -> None:
        iq = np.array([[1, 2], [3, 4]], np.int16)
        assert build_snd_frame(1, -73.0, iq, IQ) == build_snd_frame(1, -73.0, iq.reshape(-1), IQ)

    def test_little_endian_flag(self) -> None:
        x = np.array([1, -2, 300, -32768, 32767, 0], np.int16)
        be = frames(feed(streaming_proto(), build_snd_frame(1, -73.0, x, 0)))[0]
        msg_le = build_snd_frame(1, -73.0, x, LE)
        assert msg_le[10:] == x.astype("<i2").tobytes()
        le = frames(feed(streaming_proto(), msg_le))[0]
        assert le.little_endian
        np.testing.assert_array_equal(le.samples, be.samples)
        iq_be = frames(feed(streaming_proto(), build_snd_frame(1, -73.0, x, IQ)))[0]
        iq_le = frames(feed(streaming_proto(), build_snd_frame(1, -73.0, x, IQ | LE)))[0]
        np.testing.assert_array_equal(iq_le.samples, iq_be.samples)
        assert iq_le.samples[1] == np.complex64(complex(300 / 32768, -1.0))

    def test_follows_flags_not_configured_mode(self) -> None:
        """An lsb + compression client still decodes PCM and IQ frames by their flags."""
        p = streaming_proto()
        events = feed(p, pcm_frame(1), build_snd_frame(2, -73.0, np.zeros(8, np.int16), IQ))
        f1, f2 = frames(events)
        assert not f1.compressed and f1.samples.shape == (512,)
        assert f2.iq and f2.samples.shape == (4,)

    @pytest.mark.parametrize(("raw", "dbm"), [(0, -127.0), (270, -100.0), (540, -73.0), (1304, 3.4), (1000, -27.0)])
    def test_smeter(self, raw: int, dbm: float) -> None:
        assert smeter_dbm(raw) == pytest.approx(dbm)
        assert smeter_raw(dbm) == raw
        msg = b"SND\x00\x01\x00\x00\x00" + struct.pack(">H", raw)
        (f,) = frames(feed(streaming_proto(), msg))
        assert f.smeter_dbm == pytest.approx(dbm)
        assert f.samples.shape == (0,)

    def test_smeter_raw_clamps_and_round_trips(self) -> None:
        assert smeter_raw(-200.0) == 0
        assert smeter_raw(50.0) == 1304
        assert smeter_raw(-73.05) == 539  # truncation, not rounding
        assert all(smeter_raw(smeter_dbm(r)) == r for r in range(1305))
        with pytest.raises(ValueError):
            smeter_raw(math.nan)

    def test_flag_properties(self) -> None:
        flags = SndFlag.LPF | SndFlag.ADC_OVFL | SndFlag.NEW_FREQ | SndFlag.SQUELCH_UI
        (f,) = frames(feed(streaming_proto(), pcm_frame(1, flags)))
        assert f.passband_changed and f.adc_overload and f.new_freq and f.squelched
        assert not f.compressed and not f.restart

    def test_samples_per_frame(self) -> None:
        assert samples_per_frame(C) == 2048
        assert samples_per_frame(0) == 512
        assert samples_per_frame(IQ) == 512
        assert samples_per_frame(IQ | LE) == 512

    def test_sample_rate_emitted_before_first_frame_without_audio_rate(self) -> None:
        p = proto()
        events = feed(p, b"MSG sample_rate=12001.188000", AUTH_OK)
        assert not of(events, SampleRate)
        events = feed(p, pcm_frame(1), pcm_frame(2))
        assert isinstance(events[0], SampleRate) and events[0] == SampleRate(12001.188, None)
        assert len(of(events, SampleRate)) == 1 and len(frames(events)) == 2

    def test_frame_before_sample_rate_is_reported_once(self) -> None:
        p = proto()
        events = feed(p, pcm_frame(1), pcm_frame(2))
        assert len(frames(events)) == 2
        assert [v.reason for v in of(events, ProtocolViolation)] == ["audio frame before sample_rate"]

    def test_counters(self) -> None:
        p = streaming_proto()
        before = p.counters.bytes
        feed(p, pcm_frame(1), pcm_frame(2), build_snd_frame(3, -73.0, sine(0, 2048), C))
        c = p.counters
        assert c.frames == 3 and c.samples == 512 + 512 + 2048
        assert c.bytes - before == 3 * 1034


# --------------------------------------------------------------------------------------------
# sequence numbers
# --------------------------------------------------------------------------------------------


class TestSequence:
    def test_forward_gap_adpcm(self) -> None:
        p = streaming_proto()
        enc = AdpcmEncoder()
        msgs = [build_snd_frame(s, -73.0, sine(0, 2048), C, encoder=enc) for s in (1, 2, 5)]
        events = feed(p, *msgs)
        gap = SequenceGap(expected=3, got=5, lost_frames=2, lost_samples=4096, reason=GapReason.LOST)
        i = events.index(gap)
        after = events[i + 1]
        assert isinstance(after, AudioFrame) and after.seq == 5
        assert [f.lost_before for f in frames(events)] == [0, 0, 2]
        assert (p.counters.lost_frames, p.counters.lost_samples) == (2, 4096)

    def test_forward_gap_pcm_and_iq(self) -> None:
        p = streaming_proto()
        events = feed(p, pcm_frame(7), pcm_frame(10))
        assert of(events, SequenceGap) == [SequenceGap(8, 10, 2, 1024, GapReason.LOST)]
        iq = [build_snd_frame(s, -73.0, np.zeros(1024, np.int16), IQ) for s in (11, 15)]
        events = feed(p, *iq)
        assert of(events, SequenceGap) == [SequenceGap(12, 15, 3, 1536, GapReason.LOST)]
        assert (p.counters.lost_frames, p.counters.lost_samples) == (5, 2560)

    def test_backward_jump_resyncs(self) -> None:
        p = streaming_proto()
        events = feed(p, pcm_frame(10), pcm_frame(5), pcm_frame(6))
        assert of(events, SequenceGap) == [SequenceGap(11, 5, -6, -6 * 512, GapReason.BACKWARD)]
        assert [f.seq for f in frames(events)] == [10, 5, 6]
        assert [f.lost_before for f in frames(events)] == [0, 0, 0]
        assert p.counters.backward_jumps == 1 and p.counters.lost_frames == 0

    def test_duplicate_is_dropped_and_counted(self) -> None:
        p = streaming_proto()
        events = feed(p, pcm_frame(3), pcm_frame(3), pcm_frame(4))
        assert of(events, SequenceGap) == [SequenceGap(4, 3, 0, 0, GapReason.DUPLICATE)]
        assert [f.seq for f in frames(events)] == [3, 4]
        assert p.counters.duplicates == 1 and p.counters.frames == 2

    def test_uint32_wrap_is_not_a_gap(self) -> None:
        p = streaming_proto()
        events = feed(p, pcm_frame(0xFFFFFFFE), pcm_frame(0xFFFFFFFF), pcm_frame(0), pcm_frame(1))
        assert not of(events, SequenceGap)
        assert [f.seq for f in frames(events)] == [0xFFFFFFFE, 0xFFFFFFFF, 0, 1]

    def test_gap_across_wrap(self) -> None:
        p = streaming_proto()
        events = feed(p, pcm_frame(0xFFFFFFFE), pcm_frame(1))
        assert of(events, SequenceGap) == [SequenceGap(0xFFFFFFFF, 1, 2, 1024, GapReason.LOST)]

    def test_first_frame_needs_no_particular_seq(self) -> None:
        events = feed(streaming_proto(), pcm_frame(12345))
        assert not of(events, SequenceGap)

    def test_malformed_frame_shows_up_as_a_gap(self) -> None:
        """A dropped frame does not consume its seq: the next good frame reports one lost frame."""
        p = streaming_proto()
        bad = pcm_frame(2)[:-1]  # odd PCM payload
        events = feed(p, pcm_frame(1), bad, pcm_frame(3))
        assert len(of(events, ProtocolViolation)) == 1
        assert of(events, SequenceGap) == [SequenceGap(2, 3, 1, 512, GapReason.LOST)]


# --------------------------------------------------------------------------------------------
# ADPCM state across frames
# --------------------------------------------------------------------------------------------


def decoded_int(f: AudioFrame) -> list[int]:
    return (np.asarray(f.samples) * 32768).astype(np.int64).tolist()


class TestAdpcmState:
    def test_state_carries_across_frames(self) -> None:
        enc = AdpcmEncoder()
        f1 = build_snd_frame(1, -73.0, sine(0, 2048), C, encoder=enc)
        f2 = build_snd_frame(2, -73.0, sine(2048, 4096), C | SndFlag.NEW_FREQ | SndFlag.LPF, encoder=enc)
        a, b = frames(feed(streaming_proto(), f1, f2))
        assert decoded_int(b)[:8] == [-7365, -7918, -7415, -4213, 360, 3403, 7277, 7780]
        assert decoded_int(b) == decode_reference(f2[10:], 68, -4322)[0]

    def test_restart_flag_resets(self) -> None:
        enc = AdpcmEncoder()
        f1 = build_snd_frame(1, -73.0, sine(0, 2048), C, encoder=enc)
        enc.reset()  # server: SET reinit
        f2 = build_snd_frame(2, -73.0, sine(2048, 4096), C | SndFlag.RESTART, encoder=enc)
        _, b = frames(feed(streaming_proto(), f1, f2))
        assert b.restart
        assert decoded_int(b) == decode_reference(f2[10:])[0]

    def test_compression_off_then_on_resets(self) -> None:
        enc = AdpcmEncoder()
        f1 = build_snd_frame(1, -73.0, sine(0, 2048), C, encoder=enc)
        f2 = build_snd_frame(2, -73.0, sine(0, 512), 0)
        enc.reset()  # server: SET compression=1 after 0 (0 -> 1 transition)
        f3 = build_snd_frame(3, -73.0, sine(512, 2560), C, encoder=enc)
        _, _, c = frames(feed(streaming_proto(), f1, f2, f3))
        assert decoded_int(c) == decode_reference(f3[10:])[0]

    def test_iq_to_mono_resets(self) -> None:
        enc = AdpcmEncoder()
        f1 = build_snd_frame(1, -73.0, sine(0, 2048), C, encoder=enc)
        f2 = build_snd_frame(2, -73.0, np.zeros(1024, np.int16), IQ)
        enc.reset()  # server: SET mod= from a stereo mode to a mono one
        f3 = build_snd_frame(3, -73.0, sine(0, 2048), C, encoder=enc)
        _, _, c = frames(feed(streaming_proto(), f1, f2, f3))
        assert decoded_int(c) == decode_reference(f3[10:])[0]

    def test_iq_to_mono_pcm_then_compressed(self) -> None:
        p = streaming_proto()
        feed(p, build_snd_frame(1, -73.0, sine(0, 2048), C))
        assert p.adpcm_state != (0, 0)
        feed(p, build_snd_frame(2, -73.0, np.zeros(8, np.int16), IQ))
        assert p.adpcm_state != (0, 0)  # an IQ frame alone does not touch the decoder
        feed(p, pcm_frame(3))
        assert p.adpcm_state == (0, 0)  # MODE_IQ set -> clear

    def test_no_reset_without_a_reason(self) -> None:
        """A wrongly reset decoder would give garbage; check a plain continuation."""
        enc = AdpcmEncoder()
        msgs = [build_snd_frame(s + 1, -73.0, sine(2048 * s, 2048 * (s + 1)), C, encoder=enc) for s in range(4)]
        events = feed(streaming_proto(), *msgs)
        got = np.concatenate([decoded_int(f) for f in frames(events)])
        ref = decode_reference(b"".join(m[10:] for m in msgs))[0]
        assert got.tolist() == ref

    def test_camp_preset(self) -> None:
        """MSG audio_adpcm_state presets the decoder (camp mode)."""
        enc = AdpcmEncoder()
        enc.encode(sine(0, 2048))
        f2 = build_snd_frame(2, -73.0, sine(2048, 4096), C, encoder=enc)
        p = streaming_proto()
        events = feed(p, b"MSG audio_adpcm_state=68,-4322", f2)
        assert ServerInfo("audio_adpcm_state", "68,-4322") in events
        (f,) = frames(events)
        assert decoded_int(f)[:8] == [-7365, -7918, -7415, -4213, 360, 3403, 7277, 7780]

    @pytest.mark.parametrize("value", [b"x", b"89,0", b"1", b"1,40000", b""])
    def test_bad_adpcm_state(self, value: bytes) -> None:
        p = streaming_proto()
        events = feed(p, b"MSG audio_adpcm_state=" + value)
        assert len(of(events, ProtocolViolation)) == 1
        assert p.adpcm_state == (0, 0)


# --------------------------------------------------------------------------------------------
# GNSS stamps
# --------------------------------------------------------------------------------------------


class TestGps:
    def test_validity(self) -> None:
        assert GpsStamp(0, 345600, 500_000_000).valid
        assert GpsStamp(3, 1, 0).valid
        assert GpsStamp(252, 1, 0).valid
        assert not GpsStamp(255, 345600, 0).valid  # no GPS timing
        assert not GpsStamp(254, 345600, 0).valid
        assert not GpsStamp(0, 0, 0).valid  # first frame / stamps off
        assert not GpsStamp(0, 604800, 0).valid
        assert not GpsStamp(0, 1, 1_000_000_000).valid
        with pytest.raises(ValueError):
            GpsStamp(255, 1, 0).to_utc_ns(0)

    def test_first_iq_frame_is_all_zero(self) -> None:
        (f,) = frames(feed(streaming_proto(), build_snd_frame(1, -73.0, np.zeros(4, np.int16), IQ)))
        assert f.gps == GpsStamp(0, 0, 0) and f.gps is not None and not f.gps.valid

    @pytest.mark.parametrize(
        "when",
        [
            datetime(2025, 12, 7, 18, 35, 6, 123456, tzinfo=timezone.utc),
            datetime(2024, 6, 15, 23, 59, 59, tzinfo=timezone.utc),  # Saturday, end of a GPS week
            datetime(2024, 6, 16, 0, 0, 1, tzinfo=timezone.utc),  # Sunday, start of the next one
        ],
    )
    @pytest.mark.parametrize("ref_offset_h", [-80, -1, 0, 1, 80])
    def test_to_utc(self, when: datetime, ref_offset_h: int) -> None:
        gps_epoch = datetime(1980, 1, 6, tzinfo=timezone.utc)
        gps_total_us = (when - gps_epoch) // timedelta(microseconds=1) + 18_000_000
        gpssec, us = divmod(gps_total_us, 1_000_000)
        stamp = GpsStamp(1, gpssec % 604800, us * 1000)
        utc_ns = (when - datetime(1970, 1, 1, tzinfo=timezone.utc)) // timedelta(microseconds=1) * 1000
        ref = utc_ns + ref_offset_h * 3600 * 10**9
        assert stamp.to_utc_ns(ref) == utc_ns
        assert gps_week_time_to_utc_ns(stamp.gpssec, stamp.gpsnsec, ref) == utc_ns

    def test_known_value(self) -> None:
        # GPS week 2400 starts 2026-01-04T00:00:00 GPS = 2026-01-03T23:59:42 UTC.
        utc = int(datetime(2026, 1, 3, 23, 59, 42, tzinfo=timezone.utc).timestamp()) * 10**9
        assert gps_week_time_to_utc_ns(0, 0, utc + 10**9) == utc
        wed = utc + 345600 * 10**9 + 500_000_000  # Thursday 00:00:00.5 GPS, 4 days in
        assert gps_week_time_to_utc_ns(345600, 500_000_000, utc + 3 * 86400 * 10**9) == wed
        # the week is the one closest to the reference: from the week start, 4 days ahead is
        # further than 3 days back, so the previous week's Thursday is chosen
        assert gps_week_time_to_utc_ns(345600, 500_000_000, utc) == wed - 604800 * 10**9
        assert gps_week_time_to_utc_ns(0, 0, utc, leap_seconds=0) == utc + 18 * 10**9
        with pytest.raises(ValueError):
            gps_week_time_to_utc_ns(604800, 0, utc)


# --------------------------------------------------------------------------------------------
# terminal conditions
# --------------------------------------------------------------------------------------------


class TestTerminal:
    @pytest.mark.parametrize(
        ("msg", "kind", "retryable"),
        [
            (b"MSG too_busy=4", TerminalKind.TOO_BUSY, True),
            (b"MSG exclusive_use", TerminalKind.EXCLUSIVE_USE, True),
            (b"MSG reason_disabled=Down%20for%20maintenance down=0", TerminalKind.DOWN, True),
            (b"MSG down=1", TerminalKind.DOWN, True),
            (b"MSG wb_only", TerminalKind.WB_ONLY, False),
            (b"MSG password_timeout", TerminalKind.PASSWORD_TIMEOUT, False),
            (b"MSG inactivity_timeout=30", TerminalKind.INACTIVITY_TIMEOUT, False),
            (b"MSG ip_limit=120%2C192.0.2.7", TerminalKind.IP_LIMIT, False),
            (b"MSG kiwi_kick=1%2CGoodbye%20now", TerminalKind.KIWI_KICK, False),
            (b"MSG camp_disconnect", TerminalKind.CAMP_DISCONNECT, False),
            (b"MSG redirect=http%3A%2F%2Fkiwi2.example.net%3A8073", TerminalKind.REDIRECT, True),
            (b"MSG redirect=not%20a%20url", TerminalKind.REDIRECT, False),
        ],
    )
    def test_terminal_messages(self, msg: bytes, kind: TerminalKind, retryable: bool) -> None:
        p = proto()
        events = feed(p, *PRE_AUTH, msg)
        (t,) = of(events, Terminal)
        assert t.kind is kind and t.kind == kind.value
        assert t.retryable is retryable
        assert t.message
        assert p.state is State.CLOSED and p.terminal == t
        assert p.data_to_send() == []  # the queued auth is moot: close the socket

    @pytest.mark.parametrize("badp", [1, 2, 3, 4, 5, 6, 7, 9])
    def test_badp(self, badp: int) -> None:
        p = proto()
        events = feed(p, *PRE_AUTH, f"MSG badp={badp}".encode())
        assert of(events, AuthResult) == [AuthResult(False, badp)]
        (t,) = of(events, Terminal)
        assert t.kind is TerminalKind.BADP
        assert t.retryable is (badp in (2, 6))
        assert (t.retry_after is not None) is (badp in (2, 6))
        assert events.index(of(events, AuthResult)[0]) < events.index(t)
        assert p.data_to_send() == [] and not p.authenticated
        if badp == 1:
            assert "password" in t.message

    def test_redirect_url_decoding(self) -> None:
        (t,) = of(feed(proto(), b"MSG redirect=http%3A%2F%2Fkiwi2.example.net%3A8074%2F"), Terminal)
        assert t.redirect_url == "http://kiwi2.example.net:8074/"
        assert t.retry_after == 2.0
        (bad,) = of(feed(proto(), b"MSG redirect=http%3A%2F%2Fhost%3Aport"), Terminal)
        assert bad.redirect_url is None and not bad.retryable
        (empty,) = of(feed(proto(), b"MSG redirect"), Terminal)
        assert empty.redirect_url is None and not empty.retryable

    def test_down_reason_is_decoded(self) -> None:
        (t,) = of(feed(proto(), b"MSG reason_disabled=Back%20at%2012%3A00%2C%20sorry down=0"), Terminal)
        assert "Back at 12:00, sorry" in t.message
        # reason_disabled alone is informational
        events = feed(proto(), b"MSG reason_disabled=Back%20soon")
        assert events == [ServerInfo("reason_disabled", "Back soon")]

    def test_messages_carry_server_text(self) -> None:
        (kick,) = of(feed(proto(), b"MSG kiwi_kick=1%2CGoodbye%20now"), Terminal)
        assert "Goodbye now" in kick.message
        (lim,) = of(feed(proto(), b"MSG ip_limit=120%2C192.0.2.7"), Terminal)
        assert "120" in lim.message and "192.0.2.7" in lim.message
        (busy,) = of(feed(proto(), b"MSG too_busy=8"), Terminal)
        assert "8" in busy.message and busy.retry_after == 15.0

    def test_after_terminal_everything_is_ignored_and_counted(self) -> None:
        p = streaming_proto()
        feed(p, pcm_frame(1))
        events = feed(p, b"MSG inactivity_timeout=5 badp=0", pcm_frame(2), b"garbage", "text")
        assert [type(e) for e in events] == [Terminal]  # rest of the MSG skipped too
        assert p.counters.ignored_after_close == 3
        assert p.counters.frames == 1
        p.set_frequency(7000.0)
        p.set_agc(agc=False)
        p.set_compression(False)
        p.reinit()
        p.tick(100.0)
        p.connection_lost(100.0)
        assert p.data_to_send() == [] and p.events_received() == []
        assert p.state is State.CLOSED

    @pytest.mark.parametrize(
        "value",
        [b"0", b"999.9", b"1000000.5", b"1e7", b"nan", b"NaN", b"inf", b"-12000", b"abc", b"", b"12001,188"],
    )
    def test_absurd_sample_rate_is_fatal(self, value: bytes) -> None:
        p = proto()
        events = feed(p, b"MSG sample_rate=" + value, AUTH_OK)
        (v,) = of(events, ProtocolViolation)
        assert v.fatal
        (t,) = of(events, Terminal)
        assert t.kind is TerminalKind.PROTOCOL_ERROR and not t.retryable
        assert events.index(v) < events.index(t)
        assert p.state is State.CLOSED and p.sample_rate is None
        assert not of(events, AuthResult)  # ignored after close

    def test_bare_sample_rate_is_fatal(self) -> None:
        events = feed(proto(), b"MSG sample_rate")
        assert of(events, Terminal)[0].kind is TerminalKind.PROTOCOL_ERROR

    @pytest.mark.parametrize("value", [b"1000", b"1000000", b"300000.000000", b"11999.028000"])
    def test_plausible_sample_rates(self, value: bytes) -> None:
        p = proto()
        assert not of(feed(p, b"MSG sample_rate=" + value), ProtocolViolation)
        assert p.sample_rate == float(value)

    def test_changed_sample_rate_keeps_the_first(self) -> None:
        p = streaming_proto()
        events = feed(p, b"MSG sample_rate=12001.188000")
        assert events == []
        events = feed(p, b"MSG sample_rate=11999.028000")
        (v,) = of(events, ProtocolViolation)
        assert not v.fatal and p.sample_rate == 12001.188

    def test_connection_lost(self) -> None:
        p = streaming_proto()
        p.connection_lost(5.0)
        (t,) = of(p.events_received(), Terminal)
        assert t.kind is TerminalKind.CONNECTION_LOST and t.retryable
        p2 = streaming_proto()
        p2.close()
        p2.connection_lost(5.0)
        assert p2.events_received() == [] and p2.state is State.CLOSED

    def test_stall_timeout(self) -> None:
        p = streaming_proto(stall_timeout=10.0)
        p.receive_message(pcm_frame(1), 5.0)
        p.tick(14.9)
        assert p.state is not State.CLOSED
        p.tick(15.0)
        (t,) = of(p.events_received(), Terminal)
        assert t.kind is TerminalKind.STALLED and t.retryable
        # disabled by default
        q = streaming_proto()
        q.tick(1e6)
        assert q.state is not State.CLOSED


# --------------------------------------------------------------------------------------------
# malformed input never raises
# --------------------------------------------------------------------------------------------

MALFORMED: list[tuple[str, bytes | str]] = [
    ("text frame", "MSG badp=0"),
    ("empty message", b""),
    ("2 bytes", b"SN"),
    ("unknown tag", b"XYZ hello"),
    ("truncated SND header", b"SND\x10\x01\x00\x00\x00\x02"),
    ("tag only", b"SND"),
    ("truncated IQ header", b"SND\x08\x01\x00\x00\x00\x02\x1c\x00\x00\x00"),
    ("odd PCM payload", b"SND\x00\x02\x00\x00\x00\x02\x1c\x00\x01\x02"),
    ("odd LE PCM payload", b"SND\x80\x02\x00\x00\x00\x02\x1c\x00"),
    ("IQ payload not a multiple of 4", b"SND\x08\x02\x00\x00\x00\x02\x1c" + bytes(10) + b"\x00\x01\x02\x03\x04\x05"),
    ("compressed IQ", b"SND\x18\x02\x00\x00\x00\x02\x1c" + bytes(10) + bytes(8)),
    ("non-UTF-8 MSG", b"MSG note=\xff\xfe\xfd"),
    ("empty MSG", b"MSG "),
    ("MSG tag only", b"MSG"),
    ("MSG spaces only", b"MSG    "),
    ("bad badp", b"MSG badp=x"),
    ("negative badp", b"MSG badp=-1"),
    ("bad audio_rate", b"MSG audio_rate=12k"),
]


class TestMalformed:
    @pytest.mark.parametrize(("name", "data"), MALFORMED, ids=[m[0] for m in MALFORMED])
    def test_violation_and_continue(self, name: str, data: bytes | str) -> None:
        p = streaming_proto()
        feed(p, pcm_frame(1))
        before = p.counters.violations
        events = feed(p, data)
        (v,) = of(events, ProtocolViolation)
        assert not v.fatal
        assert v.data_len == len(data)
        assert not of(events, Terminal) and p.state is State.STREAMING
        assert p.counters.violations == before + 1
        # processing continues: the next good frame arrives (possibly after a reported gap)
        events = feed(p, pcm_frame(3))
        assert [f.seq for f in frames(events)] == [3]
        assert not of(events, ProtocolViolation)

    def test_non_utf8_msg_still_processed(self) -> None:
        p = proto()
        events = feed(p, b"MSG note=\xff rx_chans=4")
        assert "not valid UTF-8" in of(events, ProtocolViolation)[0].reason
        assert ServerInfo("rx_chans", 4) in events
        assert UnknownMessage("note", "\ufffd") in events

    def test_unknown_keys(self) -> None:
        events = feed(proto(), b"MSG foo=bar baz=1%202 qux extra==x")
        assert events == [
            UnknownMessage("foo", "bar"),
            UnknownMessage("baz", "1%202"),
            UnknownMessage("qux", None),
            UnknownMessage("extra", "=x"),
        ]

    @pytest.mark.parametrize("tag", [b"W/F", b"EXT", b"DAT", b"CLI"])
    def test_known_other_tags_are_ignored(self, tag: bytes) -> None:
        events = feed(streaming_proto(), tag + b"\x00" * 20)
        assert events == [IgnoredMessage(tag.decode(), 23)]

    def test_buffer_types(self) -> None:
        msg = pcm_frame(1)
        for data in (msg, bytearray(msg), memoryview(msg)):
            (f,) = frames(feed(streaming_proto(), data))
            assert f.seq == 1
        # a multi-byte-item memoryview is reinterpreted as bytes
        wide = memoryview(np.frombuffer(msg, np.uint8).view(np.uint16))  # type: ignore[arg-type]
        (f,) = frames(feed(streaming_proto(), wide))
        assert f.samples.shape == (512,)

    def test_numeric_parsing_is_strict(self) -> None:
        events = feed(proto(), b"MSG rx_chans=1_000 max_camp=nan bandwidth=3e7 is_local=1,0,0 model=-")
        values = {e.key: e.value for e in of(events, ServerInfo)}
        assert values == {"rx_chans": "1_000", "max_camp": "nan", "bandwidth": 3e7, "is_local": "1,0,0", "model": "-"}


def hypothesis(name: str):  # type: ignore[no-untyped-def]
    """Import hypothesis (or one of its modules), skipping the test when it is not installed."""
    return pytest.importorskip(name)


def test_fuzz_random_bytes_never_raise() -> None:
    """Property: random bytes (plain and behind valid tags) never raise (hypothesis)."""
    hyp = hypothesis("hypothesis")
    st = hyp.strategies

    prefixes = st.sampled_from([b"", b"SND", b"MSG ", b"SND\x08", b"SND\x10", b"SND\x00", b"SND\x80", b"W/F"])

    @hyp.settings(max_examples=400, deadline=None, derandomize=True)
    @hyp.given(st.lists(st.tuples(prefixes, st.binary(max_size=300)), max_size=8))
    def run(chunks: list[tuple[bytes, bytes]]) -> None:
        p = streaming_proto()
        for i, (prefix, body) in enumerate(chunks):
            p.receive_message(prefix + body, float(i))
            p.tick(float(i) + 0.5)
        for e in p.events_received():
            if isinstance(e, ProtocolViolation):
                assert not e.reason.startswith("internal error")
            if isinstance(e, AudioFrame):
                assert e.samples.dtype in (np.float32, np.complex64)
        p.data_to_send()

    run()


def test_fuzz_text_never_raises() -> None:
    hyp = hypothesis("hypothesis")
    st = hyp.strategies

    @hyp.settings(max_examples=200, deadline=None, derandomize=True)
    @hyp.given(st.text(max_size=200))
    def run(text: str) -> None:
        p = streaming_proto()
        p.receive_message("MSG " + text, 0.0)
        p.receive_message(("MSG " + text).encode("utf-8", "surrogatepass"), 0.0)
        for e in p.events_received():
            if isinstance(e, ProtocolViolation):
                assert not e.reason.startswith("internal error")

    run()


# --------------------------------------------------------------------------------------------
# retuning and other commands
# --------------------------------------------------------------------------------------------


class TestCommands:
    def test_set_frequency_after_setup(self) -> None:
        p = streaming_proto()
        p.set_frequency(7074.5)
        assert p.data_to_send() == ["SET mod=lsb low_cut=-2700 high_cut=-300 freq=7074.500"]
        p.set_frequency(10000.0, mode="am")
        assert p.data_to_send() == ["SET mod=am low_cut=-4900 high_cut=4900 freq=10000.000"]
        p.set_frequency(10000.0, low_cut=-3000, high_cut=3000)
        assert p.data_to_send() == ["SET mod=am low_cut=-3000 high_cut=3000 freq=10000.000"]
        p.set_frequency(10001.0)  # same mode keeps the custom cuts
        assert p.data_to_send() == ["SET mod=am low_cut=-3000 high_cut=3000 freq=10001.000"]
        p.set_frequency(10001.0, mode="iq")
        assert p.data_to_send() == ["SET mod=iq low_cut=-5000 high_cut=5000 freq=10001.000"]
        assert (p.mode, p.freq_khz, p.passband) == ("iq", 10001.0, (-5000, 5000))

    def test_set_frequency_before_setup_is_stored(self) -> None:
        p = proto()
        p.data_to_send()
        p.set_frequency(3573.0, mode="usb")
        assert p.data_to_send() == []
        feed(p, b"MSG sample_rate=12001.188000", AUTH_OK)
        assert "SET mod=usb low_cut=300 high_cut=2700 freq=3573.000" in p.data_to_send()

    def test_set_frequency_validation(self) -> None:
        p = streaming_proto()  # bandwidth=30000000 known
        for kwargs in ({"freq_khz": -1.0}, {"freq_khz": 30000.1}, {"freq_khz": 7000.0, "mode": "wfm"},
                       {"freq_khz": 7000.0, "low_cut": 100, "high_cut": 50}):  # fmt: skip
            with pytest.raises(ValueError):
                p.set_frequency(**kwargs)  # type: ignore[arg-type]
        assert p.data_to_send() == []
        assert (p.mode, p.freq_khz) == ("lsb", 7100.0)
        p.set_frequency(30000.0)
        assert p.data_to_send() == ["SET mod=lsb low_cut=-2700 high_cut=-300 freq=30000.000"]

    def test_set_agc(self) -> None:
        p = streaming_proto()
        p.set_agc(agc=False, man_gain=80)
        assert p.data_to_send() == ["SET agc=0 hang=0 thresh=-100 slope=6 decay=1000 manGain=80"]
        p.set_agc(hang=True, thresh=-110, slope=10, decay=2000)
        assert p.data_to_send() == ["SET agc=0 hang=1 thresh=-110 slope=10 decay=2000 manGain=80"]

    def test_set_compression_and_reinit(self) -> None:
        p = streaming_proto()
        p.set_compression(False)
        p.reinit()
        p.set_compression(True)
        assert p.data_to_send() == ["SET compression=0", "SET reinit", "SET compression=1"]

    def test_commands_before_setup_are_not_sent(self) -> None:
        p = proto()
        p.data_to_send()
        p.set_agc(agc=False)
        p.set_compression(False)
        p.reinit()
        assert p.data_to_send() == []
        feed(p, b"MSG sample_rate=12001.188000", AUTH_OK)
        sent = p.data_to_send()
        assert "SET agc=0 hang=0 thresh=-100 slope=6 decay=1000 manGain=50" in sent
        assert "SET compression=0" in sent and "SET reinit" not in sent

    def test_states(self) -> None:
        p = KiwiClientProtocol(7100.0)
        assert p.state is State.CONNECTING
        p.connection_made(0.0)
        assert p.state is State.AUTHENTICATING
        feed(p, *PRE_AUTH, AUTH_OK, *POST_AUTH)
        assert p.state is State.AUTHENTICATING
        feed(p, pcm_frame(1))
        assert p.state is State.STREAMING
        p.close()
        assert p.state is State.CLOSED and p.terminal is None


# --------------------------------------------------------------------------------------------
# server-side helpers
# --------------------------------------------------------------------------------------------


class TestServerHelpers:
    def test_build_msg(self) -> None:
        assert build_msg(sample_rate=12001.188) == b"MSG sample_rate=12001.188000"
        assert build_msg(audio_init=0, audio_rate=12000) == b"MSG audio_init=0 audio_rate=12000"
        assert build_msg(badp=0) == b"MSG badp=0"
        assert build_msg(cfg_loaded=None) == b"MSG cfg_loaded"
        assert build_msg(freq_offset=0.0) == b"MSG freq_offset=0.000"
        assert build_msg(redirect="http://host:8073") == b"MSG redirect=http%3A%2F%2Fhost%3A8073"
        assert build_msg(reason_disabled="Back at 12:00", down=0) == b"MSG reason_disabled=Back%20at%2012%3A00 down=0"
        assert build_msg(isMasked=True) == b"MSG isMasked=1"
        with pytest.raises(ValueError):
            build_msg()
        with pytest.raises(ValueError):
            build_msg(model="has space")
        with pytest.raises(ValueError):
            build_msg(**{"a b": 1})

    def test_build_msg_round_trip_through_client(self) -> None:
        p = proto()
        events = feed(p, build_msg(kiwi_kick="1,Maintenance: back soon"))
        (t,) = of(events, Terminal)
        assert t.message.endswith("Maintenance: back soon")
        (r,) = of(feed(proto(), build_msg(redirect="http://other.example:8073")), Terminal)
        assert r.redirect_url == "http://other.example:8073"

    def test_build_snd_frame_validation(self) -> None:
        with pytest.raises(ValueError):
            build_snd_frame(-1, -73.0, b"")
        with pytest.raises(ValueError):
            build_snd_frame(1 << 32, -73.0, b"")
        with pytest.raises(ValueError):
            build_snd_frame(1, -73.0, b"", flags=256)
        with pytest.raises(ValueError):
            build_snd_frame(1, -73.0, np.zeros(4, np.int16), IQ | C)
        with pytest.raises(ValueError):
            build_snd_frame(1, -73.0, np.zeros(4, np.int16), 0, gps=GpsStamp(0, 1, 2))
        with pytest.raises(ValueError):
            build_snd_frame(1, -73.0, np.zeros(3, np.int16), C)
        with pytest.raises(ValueError):
            build_snd_frame(1, -73.0, np.array([0, 70000]), 0)
        with pytest.raises(TypeError):
            build_snd_frame(1, -73.0, np.array([0.5, 1.0]), 0)
        # raw payload bytes are used verbatim
        assert build_snd_frame(2, -127.0, b"\x01\x02", C) == b"SND\x10\x02\x00\x00\x00\x00\x00\x01\x02"

    @pytest.mark.parametrize(
        ("text", "expected"),
        [
            ("SET auth t=kiwi p=", ("auth", {"t": "kiwi", "p": ""})),
            ("SET auth t=kiwi p=my%20pw%2F1", ("auth", {"t": "kiwi", "p": "my pw/1"})),
            ("SET auth t=kiwi p=# ipl=secret", ("auth", {"t": "kiwi", "p": "#", "ipl": "secret"})),
            ("SET keepalive", ("keepalive", {})),
            ("SET keepalive\n", ("keepalive", {})),
            ("SET AR OK in=12000 out=44100", ("AR OK", {"in": "12000", "out": "44100"})),
            (
                "SET mod=lsb low_cut=-2700 high_cut=-300 freq=7100.000",
                ("mod", {"mod": "lsb", "low_cut": "-2700", "high_cut": "-300", "freq": "7100.000"}),
            ),
            ("SET ident_user=Tom%20%26%20Jerry", ("ident_user", {"ident_user": "Tom & Jerry"})),
            ("SET compression=0", ("compression", {"compression": "0"})),
            ("SET little-endian", ("little-endian", {})),
            ("SET nb algo=1", ("nb", {"algo": "1"})),
            ("SET squelch=0 max=0", ("squelch", {"squelch": "0", "max": "0"})),
            ("SET gen=0 mix=-1", ("gen", {"gen": "0", "mix": "-1"})),
            ("SET reinit", ("reinit", {})),
        ],
    )
    def test_parse_client_command(self, text: str, expected: tuple[str, dict[str, str]]) -> None:
        assert parse_client_command(text) == expected

    @pytest.mark.parametrize("text", ["", "GET x", "SET ", "SET    ", "set keepalive", "keepalive"])
    def test_parse_client_command_rejects(self, text: str) -> None:
        with pytest.raises(ValueError):
            parse_client_command(text)

    def test_scripted_loopback(self) -> None:
        """A tiny scripted server built from the helpers drives the client to streaming."""
        p = KiwiClientProtocol(7100.0, "usb", password="x y")
        p.connection_made(0.0)
        enc = AdpcmEncoder()
        server_seen: list[str] = []
        seq = 0
        bits: set[str] = set()
        replies: list[bytes] = []
        now = 0.0
        for _ in range(20):
            for cmd in p.data_to_send():
                name, params = parse_client_command(cmd)
                server_seen.append(name)
                if name == "auth":
                    assert params["p"] == "x y"
                    replies += [build_msg(sample_rate=12001.188), build_msg(badp=0), build_msg(audio_init=0, audio_rate=12000)]
                elif name in ("mod", "agc", "AR OK"):
                    bits.add(name)
            if bits == {"mod", "agc", "AR OK"}:
                seq += 1
                replies.append(build_snd_frame(seq, -80.0, sine(2048 * (seq - 1), 2048 * seq), C, encoder=enc))
            for r in replies:
                p.receive_message(r, now)
            replies.clear()
            now += 0.17
            p.tick(now)
        events = p.events_received()
        assert server_seen[:7] == ["auth", "ident_user", "mod", "agc", "compression", "keepalive", "AR OK"]
        assert len(frames(events)) == seq >= 15
        assert not of(events, ProtocolViolation) and not of(events, SequenceGap)
        got = np.concatenate([decoded_int(f) for f in frames(events)])
        enc2 = AdpcmEncoder()
        ref = decode_reference(enc2.encode(sine(0, 2048 * seq)))[0]
        assert got.tolist() == ref
