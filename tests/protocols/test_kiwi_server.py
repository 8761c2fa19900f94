"""Sans-I/O tests of the KiwiSDR server state machine: feed client messages and times, assert the
exact messages, frames and timers it produces (no socket, no loop, no clock)."""

from __future__ import annotations

import struct
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from streamkit.protocols.adpcm import AdpcmEncoder
from streamkit.protocols.kiwi_client import KiwiClientProtocol
from streamkit.protocols.kiwi_events import AudioFrame, SampleRate
from streamkit.protocols.kiwi_faults import FaultConfig, faults_from_query, malformed_payload, parse_fault_spec
from streamkit.protocols.kiwi_frames import GPS_WEEK_S, SndFlag
from streamkit.protocols.kiwi_server import Abort, ChannelTable, Close, KiwiServerProtocol, Timer
from streamkit.protocols.kiwi_server_log import ConnectionLog, Phase

RATE = 12001.188
T0 = 100.0
AUTH = "SET auth t=kiwi p="
SETUP_PCM = [
    "SET compression=0",
    "SET mod=usb low_cut=300 high_cut=2700 freq=7074.000",
    "SET agc=1 hang=0 thresh=-100 slope=6 decay=1000 manGain=50",
    "SET AR OK in=12000 out=44100",
]


def config(**over: Any) -> SimpleNamespace:
    """The settings the server reads, with the emulator's defaults."""
    base: dict[str, Any] = dict(
        sample_rate=RATE, audio_rate=12000, password=None, rx_chans=8, speed=1.0, pre_auth_timeout=20.0, keepalive_timeout=60.0,
        setup_timeout=20.0, drop_action="silent", drop_linger=60.0, gps_solution=None, gps_epoch=None, is_local=False,
        record_frames=1000, rx_gps="(52.000000, 0.000000)", rx_name="test",
    )  # fmt: skip
    base.update(over)
    return SimpleNamespace(**base)


def ramp_block(freq_khz: float, passband: tuple[int, int] | None, n: int, start: int, iq: bool) -> tuple[np.ndarray, float]:
    """A deterministic signal: sample i is (i % 2000) - 1000 (I and -Q for IQ)."""
    x = ((np.arange(start, start + n) % 2000) - 1000).astype(np.int16)
    return (np.stack([x, -x], axis=1) if iq else x), -50.0


def server(
    cfg: SimpleNamespace | None = None,
    faults: FaultConfig | None = None,
    channels: ChannelTable | None = None,
    *,
    ts: int = 1,
    peer: str = "127.0.0.1:5000",
) -> KiwiServerProtocol:
    log = ConnectionLog(1, f"/{ts}/SND", ts, {}, peer, T0, faults or FaultConfig())
    return KiwiServerProtocol(cfg or config(), log, channels if channels is not None else ChannelTable(), ramp_block)


def streaming(cfg: SimpleNamespace | None = None, faults: FaultConfig | None = None, setup: list[str] = SETUP_PCM) -> KiwiServerProtocol:
    s = server(cfg, faults)
    for cmd in [AUTH, *setup]:
        s.receive_message(cmd, T0)
    assert s.log.phase is Phase.STREAMING
    return s


def keys(messages: list[bytes]) -> list[str]:
    return [m[4:].split(b" ")[0].partition(b"=")[0].decode() for m in messages]


# ------------------------------------------------------------------------------------------
# handshake
# ------------------------------------------------------------------------------------------


def test_first_message_gets_sample_rate_then_the_auth_reply() -> None:
    s = server()
    assert s.next_timer(T0) == (T0 + 60.0, Timer.LINGER)  # nothing is sent before the client speaks
    out = s.receive_message(AUTH, T0)
    assert out[0] == b"MSG sample_rate=12001.188000"
    assert out[1:8] == [
        b"MSG client_public_ip=127.0.0.1",
        b"MSG rx_chans=8",
        b"MSG chan_no_pwd=8",
        b"MSG chan_no_pwd_true=8",
        b"MSG is_local=0,0,0",
        b"MSG max_camp=4",
        b"MSG badp=0",
    ]
    assert keys(out[8:]) == ["version_maj", "load_cfg", "load_dxcfg", "load_dxcomm_cfg", "cfg_loaded", "center_freq", "audio_init"]
    assert out[-1] == b"MSG audio_init=0 audio_rate=12000"
    assert s.log.phase is Phase.SETUP and s.log.authenticated and s.log.channel == 0
    assert s.receive_message(AUTH, T0 + 1)[-1] == b"MSG badp=0"  # a repeated auth: the reply again, nothing more
    assert [c.outcome for c in s.log.commands] == ["ok", "ok"]


def test_bad_password_then_password_timeout_drops() -> None:
    s = server(config(password="secret"))
    out = s.receive_message("SET auth t=kiwi p=wrong", T0)
    assert keys(out) == ["sample_rate", "client_public_ip", "rx_chans", "chan_no_pwd", "chan_no_pwd_true", "max_camp", "badp"]
    assert out[-1] == b"MSG badp=1" and b"MSG chan_no_pwd=0" in out and s.log.phase is Phase.AUTH
    assert s.next_timer(T0 + 1) == (T0 + 20.0, Timer.PASSWORD_TIMEOUT)
    assert s.fire(Timer.PASSWORD_TIMEOUT, T0 + 20.0) == [b"MSG password_timeout"]
    assert s.log.phase is Phase.DROPPED and s.log.drop_reason == "password timeout"
    assert s.receive_message("SET auth t=kiwi p=secret", T0 + 21) == []  # dropped: ignored
    assert s.log.commands[-1].outcome == "ignored"


def test_percent_encoded_password_is_accepted() -> None:
    s = server(config(password="a b&c"))
    assert s.receive_message("SET auth t=kiwi p=a%20b%26c", T0)[-1] == b"MSG audio_init=0 audio_rate=12000"


def test_set_before_auth_drops_without_a_reply() -> None:
    s = server()
    out = s.receive_message("SET mod=usb low_cut=300 high_cut=2700 freq=7074", T0)
    assert out == [b"MSG sample_rate=12001.188000"]
    assert s.log.phase is Phase.DROPPED and s.log.drop_reason == "SET mod before auth"
    assert s.log.commands[-1].outcome == "kicked"


def test_more_than_four_keepalives_before_setup_drop() -> None:
    s = server()
    s.receive_message(AUTH, T0)
    for k in range(4):
        assert s.receive_message("SET keepalive", T0 + k) == []
        assert s.log.phase is Phase.SETUP
    s.receive_message("SET keepalive", T0 + 5)
    assert s.log.phase is Phase.DROPPED and s.log.drop_reason.startswith("connection hang")


def test_unknown_and_noop_commands_are_counted_not_answered() -> None:
    s = server()
    s.receive_message(AUTH, T0)
    assert s.receive_message("SET squelch=0 max=0", T0) == []
    assert s.receive_message("SET frobnicate=1", T0) == []
    assert s.receive_message("hello", T0) == []
    assert s.receive_message("SET agc=1 hang=x", T0) == []
    assert [c.outcome for c in s.log.commands[1:]] == ["ignored", "unknown", "unknown", "bad_params"]
    assert s.log.unknown_commands == 2 and s.log.bad_params == 1


def test_setup_needs_all_five_bits_then_the_first_frame_is_due_one_frame_later() -> None:
    s = server()
    s.receive_message(AUTH, T0)
    for cmd in SETUP_PCM[:-1]:
        s.receive_message(cmd, T0)
        assert s.log.phase is Phase.SETUP
    assert s.next_timer(T0)[1] is Timer.SETUP_TIMEOUT
    s.receive_message(SETUP_PCM[-1], T0)
    assert s.log.phase is Phase.STREAMING and s.log.command_bits == 0x1F
    deadline, timer = s.next_timer(T0)
    assert timer is Timer.FRAME and deadline == pytest.approx(T0 + 512 / RATE, abs=1e-12)


def test_incomplete_setup_times_out() -> None:
    s = server()
    s.receive_message(AUTH, T0)
    assert s.next_timer(T0) == (T0 + 20.0, Timer.SETUP_TIMEOUT)
    assert s.fire(Timer.SETUP_TIMEOUT, T0 + 20.0) == []
    assert s.log.drop_reason == "incomplete connection" and s.channels.duplicate(s.log) is False


# ------------------------------------------------------------------------------------------
# admission
# ------------------------------------------------------------------------------------------


def test_too_busy_when_every_channel_is_held_and_the_refusal_repeats() -> None:
    table = ChannelTable()
    cfg = config(rx_chans=1)
    first = server(cfg, channels=table, ts=1)
    first.receive_message(AUTH, T0)
    second = server(cfg, channels=table, ts=2)
    assert second.receive_message(AUTH, T0) == [b"MSG too_busy=1"]
    assert second.receive_message("SET keepalive", T0 + 1) == [b"MSG too_busy=1"]
    assert second.log.phase is Phase.REFUSED and second.log.refusal == "too_busy" and len(table) == 1
    first.drop("test", T0 + 2)  # releases the channel
    third = server(cfg, channels=table, ts=3)
    assert third.receive_message(AUTH, T0 + 3)[0] == b"MSG sample_rate=12001.188000" and third.log.channel == 0


def test_duplicate_ts_from_the_same_ip_is_ignored_silently() -> None:
    table = ChannelTable()
    server(channels=table, ts=77).receive_message(AUTH, T0)
    dup = server(channels=table, ts=77, peer="127.0.0.1:6000")
    assert dup.receive_message(AUTH, T0) == []
    assert dup.log.phase is Phase.DUPLICATE and dup.log.refusal == "duplicate"
    other_ip = server(channels=table, ts=77, peer="10.0.0.2:6000")
    assert other_ip.receive_message(AUTH, T0)[0].startswith(b"MSG sample_rate=")


@pytest.mark.parametrize(
    ("spec", "reply"),
    [
        ("down=1;down_reason=back soon", b"MSG reason_disabled=back%20soon down=1"),
        ("redirect=ws://other:8073/", b"MSG redirect=ws%3A%2F%2Fother%3A8073%2F"),
        ("too_busy", b"MSG too_busy=8"),
    ],
)
def test_refusal_faults(spec: str, reply: bytes) -> None:
    s = server(faults=parse_fault_spec(spec))
    assert s.receive_message(AUTH, T0) == [reply]
    assert s.log.phase is Phase.REFUSED and s.log.channel is None


def test_forced_badp_and_sample_rate_text() -> None:
    s = server(faults=parse_fault_spec("badp=6;sample_rate=abc"))
    out = s.receive_message(AUTH, T0)
    assert out[0] == b"MSG sample_rate=abc" and out[-1] == b"MSG badp=6"


# ------------------------------------------------------------------------------------------
# frames
# ------------------------------------------------------------------------------------------


def test_pcm_frames_carry_the_signal_big_endian_with_running_seq() -> None:
    s = streaming()
    for k in range(3):
        deadline, timer = s.next_timer(T0)
        assert timer is Timer.FRAME
        out = s.frame_due(deadline, 0)
        assert out.status == "sent" and out.payload is out.frame and not out.close_after
        f = out.frame
        assert f[:3] == b"SND" and f[3] == 0 and struct.unpack_from("<I", f, 4)[0] == k + 1
        assert struct.unpack_from(">H", f, 8)[0] == 770  # -50 dBm
        expected = ((np.arange(512 * k, 512 * (k + 1)) % 2000) - 1000).astype(">i2").tobytes()
        assert f[10:] == expected
    assert [fr.start_index for fr in s.log.frames] == [0, 512, 1024] and s.log.slips == 0


def test_default_adpcm_frames_decode_in_the_client_to_what_the_log_says() -> None:
    s = streaming(setup=SETUP_PCM[1:])  # compression left on
    client = KiwiClientProtocol(7074.0, "usb")
    client.connection_made(0.0)
    client.receive_message(b"MSG sample_rate=12001.188000 audio_rate=12000", 0.0)
    client.receive_message(b"MSG badp=0", 0.0)
    enc = AdpcmEncoder()
    for _ in range(3):
        out = s.frame_due(s.next_timer(T0)[0] or T0, 0)
        assert out.frame[3] == SndFlag.COMPRESSED and len(out.frame) == 10 + 1024
        assert out.frame[10:] == enc.encode(((np.arange(2048 * (out.frame[4] - 1), 2048 * out.frame[4]) % 2000) - 1000).astype(np.int16))
        client.receive_message(out.frame, 0.0)
    frames = [e for e in client.events_received() if isinstance(e, AudioFrame)]
    decoded = np.concatenate([np.rint(f.samples * 32768).astype(np.int16) for f in frames])
    np.testing.assert_array_equal(decoded, s.log.expected_pcm())


def test_iq_frames_have_the_zero_stamp_first_then_gps_time() -> None:
    s = streaming(
        config(gps_epoch=1000.0, gps_solution=7), setup=[*SETUP_PCM[1:2], "SET mod=iq low_cut=-5000 high_cut=5000 freq=7074", *SETUP_PCM[2:]]
    )
    first = s.frame_due(T0, 0).frame
    second = s.frame_due(T0, 0).frame
    assert first[3] == SndFlag.MODE_IQ and first[10:20] == bytes(10)
    sol, _, sec, nsec = struct.unpack_from("<BBII", second, 10)
    t_ns = 1000 * 10**9 + round(512 * 10**9 / RATE)
    assert (sol, sec, nsec) == (7, (t_ns // 10**9) % GPS_WEEK_S, t_ns % 10**9)
    iq = np.frombuffer(second[20:], ">i2").reshape(-1, 2)
    np.testing.assert_array_equal(iq[:, 0], -iq[:, 1])


def test_retune_while_streaming_flags_the_next_frame() -> None:
    s = streaming()
    s.frame_due(T0, 0)
    s.receive_message("SET mod=usb low_cut=300 high_cut=2400 freq=7100", T0)
    flags = s.frame_due(T0, 0).frame[3]
    assert flags == SndFlag.NEW_FREQ | SndFlag.LPF
    assert s.frame_due(T0, 0).frame[3] == 0


def test_speed_and_slow_set_the_schedule() -> None:
    s = streaming(config(speed=4.0), FaultConfig(slow=0.5))
    assert s.next_timer(T0)[0] == pytest.approx(T0 + 512 / (RATE * 2.0), abs=1e-12)
    s0 = streaming(config(speed=0.0))
    assert s0.next_timer(T0 + 5) == (T0 + 5, Timer.FRAME)


def test_frame_faults_drop_corrupt_cut_and_close() -> None:
    s = streaming(faults=parse_fault_spec("drop=2;malformed=3:truncated,4:text;close_mid_frame=5;max_frames=6"))
    outs = [s.frame_due(T0, 0) for _ in range(6)]
    assert [o.status for o in outs] == ["sent", "dropped", "malformed:truncated", "malformed:text", "cut", "sent"]
    assert outs[2].payload == outs[2].frame[:7]
    assert outs[3].payload == "SND frame 4 sent as a text message"
    assert [o.close_after for o in outs] == [False] * 5 + [True]
    assert s.log.frames_dropped == 1 and [f.status for f in s.log.frames][1] == "dropped"
    assert malformed_payload(b"SND0123456789", 9, "bad_tag") == b"SNX0123456789"


# ------------------------------------------------------------------------------------------
# timers
# ------------------------------------------------------------------------------------------


def test_kick_sends_the_message_then_drops() -> None:
    s = server(faults=FaultConfig(kick_after=5.0, kick_message="bye now"))
    s.receive_message(AUTH, T0)
    assert s.next_timer(T0 + 1.0) == (T0 + 5.0, Timer.KICK)
    assert s.fire(Timer.KICK, T0 + 5.0) == [b"MSG kiwi_kick=1%2Cbye%20now"]
    assert s.log.phase is Phase.DROPPED and s.log.drop_reason == "kiwi_kick" and len(s.channels) == 0
    assert s.next_timer(T0 + 5.0) == (T0 + 65.0, Timer.LINGER)  # silent drop: only the linger is left


def test_inactivity_timeout_counts_from_the_last_tune() -> None:
    s = server(config(setup_timeout=None), FaultConfig(inactivity_timeout=90.0))
    s.receive_message(AUTH, T0)
    s.receive_message("SET mod=usb low_cut=300 high_cut=2700 freq=7074", T0 + 10.0)
    assert s.next_timer(T0 + 10.0) == (T0 + 60.0, Timer.KEEPALIVE_TIMEOUT)
    s.receive_message("SET keepalive", T0 + 50.0)
    s.receive_message("SET mod=usb low_cut=300 high_cut=2700 freq=7100", T0 + 55.0)  # a retune
    assert s.next_timer(T0 + 55.0) == (T0 + 110.0, Timer.KEEPALIVE_TIMEOUT)
    s.receive_message("SET keepalive", T0 + 100.0)
    assert s.next_timer(T0 + 100.0) == (T0 + 145.0, Timer.INACTIVITY)
    assert s.fire(Timer.INACTIVITY, T0 + 145.0) == [b"MSG inactivity_timeout=2"]
    assert s.log.drop_reason == "inactivity timeout"


def test_keepalive_timeout_drops_without_a_message() -> None:
    s = server(config(setup_timeout=None))
    s.receive_message(AUTH, T0)
    s.receive_message("SET keepalive", T0 + 30.0)
    assert s.next_timer(T0 + 30.0) == (T0 + 90.0, Timer.KEEPALIVE_TIMEOUT)
    assert s.fire(Timer.KEEPALIVE_TIMEOUT, T0 + 90.0) == [] and s.log.drop_reason == "keepalive timeout"


@pytest.mark.parametrize(("action", "expected"), [("close", Close(1000, "")), ("abort", Abort())])
def test_drop_action_is_due_at_once(action: str, expected: object) -> None:
    s = server(config(drop_action=action))
    s.receive_message("SET mod=usb low_cut=300 high_cut=2700 freq=7074", T0)
    assert s.next_timer(T0 + 1) == (T0 + 1, Timer.DROP_ACTION)
    assert s.fire(Timer.DROP_ACTION, T0 + 1) == [expected]
    assert s.log.end_reason == f"dropped (SET mod before auth): {'closed' if action == 'close' else 'aborted'}"


def test_linger_closes_a_silent_connection() -> None:
    s = server()
    assert s.fire(Timer.LINGER, T0 + 60.0) == [Close(1001, "idle")]
    assert s.log.end_reason == "waiting: closed after drop_linger"


def test_stall_stops_frames_but_keeps_the_session() -> None:
    s = streaming(faults=FaultConfig(stall_after=1.0))
    s.frame_due(T0, 0)
    assert s.next_timer(T0 + 1.0 - 1e-9)[1] is Timer.FRAME
    s.fire(Timer.STALL, T0 + 1.0)
    assert s.log.phase is Phase.STALLED
    assert s.next_timer(T0 + 1.0) == (T0 + 60.0, Timer.KEEPALIVE_TIMEOUT)
    with pytest.raises(ValueError, match="frame_due"):
        s.fire(Timer.FRAME, T0)


# ------------------------------------------------------------------------------------------
# fault specs
# ------------------------------------------------------------------------------------------


def test_faults_from_query_adds_to_the_base_and_rejects_bad_ones() -> None:
    base = FaultConfig(drop_every=7)
    f = faults_from_query({"too_busy": "", "fault": "kick=2;slow=0.5", "camp": ""}, base)
    assert (f.drop_every, f.too_busy, f.kick_after, f.slow) == (7, True, 2.0, 0.5)
    assert faults_from_query({"camp": ""}, base) is base and base.kick_after is None
    with pytest.raises(ValueError, match="unknown fault"):
        faults_from_query({"fault": "nonsense=1"}, base)


def test_client_sees_sample_rate_from_the_server_bytes() -> None:
    s = server()
    client = KiwiClientProtocol(7074.0, "usb")
    client.connection_made(0.0)
    for m in s.receive_message(client.data_to_send()[0], T0):
        client.receive_message(m, 0.0)
    assert any(isinstance(e, SampleRate) and e.rate == RATE and e.nominal == 12000 for e in client.events_received())
    for cmd in client.data_to_send():  # the client's own set-up completes the five bits
        s.receive_message(cmd, T0)
    assert s.log.phase is Phase.STREAMING
