"""Loopback tests for streamkit.io.kiwi_emulator, driven by the sans-I/O KiwiClientProtocol.

Every test talks to a real :class:`KiwiEmulator` over a loopback WebSocket
(``websockets.asyncio.client``) and checks the client-side events and the emulator's
per-connection log against the KiwiSDR protocol: paths, message order, nothing before the first
message; the five command bits and the four-keepalive rule; commands; frame layouts, S-meter,
GNSS stamps; ADPCM state events; timeouts, refusals, drops without a close frame. Frames are paced faster than real time (``speed``) and
timeouts are short so that each test takes well under 3 s.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import logging
import math
import time
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar
from urllib.parse import unquote, urlencode

import numpy as np
import pytest
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, ConnectionClosedOK, InvalidStatus
from websockets.protocol import State as WsState
from websockets.sync.client import connect as sync_connect

from streamkit.io.kiwi_emulator import (
    SMETER_OFFSET_DB,
    ConnectionLog,
    EmulatorConfig,
    EmulatorThread,
    FaultConfig,
    KiwiEmulator,
    Mix,
    Noise,
    Phase,
    SpeechLike,
    Tone,
    add_emulator_arguments,
    config_from_args,
    frame_smeter_dbm,
    mix,
    noise,
    parse_fault_spec,
    parse_station_spec,
    quantize,
    run_from_args,
    speech_like,
    tone,
)
from streamkit.io.kiwi_emulator_session import EmulatorSession as _Session
from streamkit.protocols.adpcm import AdpcmDecoder, AdpcmEncoder
from streamkit.protocols.kiwi_client import KiwiClientProtocol
from streamkit.protocols.kiwi_events import (
    AudioFrame,
    AuthResult,
    GapReason,
    KiwiEvent,
    ProtocolViolation,
    SampleRate,
    SequenceGap,
    ServerInfo,
    Terminal,
    TerminalKind,
)
from streamkit.protocols.kiwi_frames import SndFlag

RATE = 12001.188
FAST = 16.0
EXPECTED_KEYS = [
    "sample_rate",
    "client_public_ip",
    "rx_chans",
    "chan_no_pwd",
    "chan_no_pwd_true",
    "is_local",
    "max_camp",
    "badp",
    "version_maj",
    "load_cfg",
    "load_dxcfg",
    "load_dxcomm_cfg",
    "cfg_loaded",
    "center_freq",
    "audio_init",
]
AUTH = "SET auth t=kiwi p="
MOD = "SET mod=lsb low_cut=-2700 high_cut=-300 freq=7074.000"
AGC = "SET agc=1 hang=0 thresh=-100 slope=6 decay=1000 manGain=50"
AR_OK = "SET AR OK in=12000 out=44100"
ALL_BITS = 0x1F

T = TypeVar("T")


def aio(fn: Callable[..., Coroutine[Any, Any, None]]) -> Callable[..., None]:
    """Run an async test with asyncio.run and a hard 15 s cap."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> None:
        asyncio.run(asyncio.wait_for(fn(*args, **kwargs), 15.0))

    return wrapper


def now() -> float:
    return time.monotonic()


def of(events: list[KiwiEvent], kind: type[T]) -> list[T]:
    return [e for e in events if isinstance(e, kind)]


def to_int16(frame: AudioFrame) -> np.ndarray:
    """Client float samples back to the int16 (mono) or (n, 2) int16 (IQ) that was sent."""
    if frame.iq:
        z = frame.samples.astype(np.complex128) * 32768.0
        return np.stack([np.rint(z.real), np.rint(z.imag)], axis=1).astype(np.int16)
    return np.rint(frame.samples.astype(np.float64) * 32768.0).astype(np.int16)


def cfg(**kw: Any) -> EmulatorConfig:
    kw.setdefault("speed", FAST)
    return EmulatorConfig(**kw)


async def ws_connect(url: str) -> ClientConnection:
    # max_queue=None: a test that stops reading must still see the close handshake promptly
    return await connect(url, compression=None, ping_interval=None, open_timeout=3, close_timeout=1, max_queue=None)


class Client:
    """Drives a KiwiClientProtocol over a loopback websockets connection."""

    def __init__(self, proto: KiwiClientProtocol, ws: ClientConnection) -> None:
        self.p = proto
        self.ws = ws
        self.events: list[KiwiEvent] = []
        self.closed = False
        self.close_exc: ConnectionClosed | None = None

    @classmethod
    async def open(cls, emu: KiwiEmulator, proto: KiwiClientProtocol, ts: int = 1, query: str = "") -> Client:
        c = cls(proto, await ws_connect(emu.url(ts, query)))
        proto.connection_made(now())
        await c._flush()
        return c

    async def _flush(self) -> None:
        for command in self.p.data_to_send():
            try:
                await self.ws.send(command)
            except ConnectionClosed:
                break
        self.events.extend(self.p.events_received())

    @property
    def frames(self) -> list[AudioFrame]:
        return of(self.events, AudioFrame)

    @property
    def terminal(self) -> Terminal | None:
        return self.p.terminal

    async def pump(self, until: Callable[[Client], bool] = lambda c: False, timeout: float = 2.0) -> bool:
        """Receive/tick/send until ``until(self)``, a Terminal, the connection closing, or the
        timeout; returns ``until(self)``."""
        deadline = now() + timeout
        while not until(self):
            if self.closed or self.terminal is not None:
                return until(self)
            remaining = deadline - now()
            if remaining <= 0:
                return False
            try:
                msg = await asyncio.wait_for(self.ws.recv(), min(0.05, remaining))
            except asyncio.TimeoutError:  # noqa: UP041 (not the builtin on 3.10)
                self.p.tick(now())
            except ConnectionClosed as exc:
                self.closed = True
                self.close_exc = exc
                self.p.connection_lost(now())
            else:
                self.p.receive_message(msg, now())
            await self._flush()
        return True

    async def close(self) -> None:
        await self.ws.close()


def n_frames(n: int) -> Callable[[Client], bool]:
    return lambda c: len(c.frames) >= n


async def recv_all(ws: ClientConnection, quiet: float = 0.15, limit: float = 2.0) -> list[bytes | str]:
    """Messages received until none came for ``quiet`` seconds (or ``limit``)."""
    out: list[bytes | str] = []
    deadline = now() + limit
    while now() < deadline:
        try:
            out.append(await asyncio.wait_for(ws.recv(), quiet))
        except asyncio.TimeoutError:  # noqa: UP041
            break
    return out


def snd(messages: list[bytes | str]) -> list[bytes]:
    return [m for m in messages if isinstance(m, bytes) and m[:3] == b"SND"]


def last_log(emu: KiwiEmulator) -> ConnectionLog:
    return emu.connections[-1]


async def ended(emu: KiwiEmulator, log: ConnectionLog, timeout: float = 2.0) -> None:
    assert await emu.wait_until(lambda: log.closed_at is not None, timeout)


def assert_frames_match_log(frames: list[AudioFrame], log: ConnectionLog) -> None:
    by_seq = {f.seq: f for f in log.frames}
    assert frames
    for fr in frames:
        sent = by_seq[fr.seq]
        assert sent.status == "sent"
        assert fr.flags == sent.flags
        np.testing.assert_array_equal(to_int16(fr), sent.decoded)


# ------------------------------------------------------------------------------------------
# handshake
# ------------------------------------------------------------------------------------------


class TestHandshake:
    @aio
    async def test_nothing_before_first_message_then_sequence_in_order(self) -> None:
        async with KiwiEmulator(cfg()) as emu:
            ws = await ws_connect(emu.url(11))
            assert await recv_all(ws, quiet=0.2) == []  # the server waits for the client
            c = Client(KiwiClientProtocol(7074.0, "lsb"), ws)
            c.p.connection_made(now())
            await c._flush()
            assert await c.pump(n_frames(3))
            await c.close()
            log = last_log(emu)
            await ended(emu, log)
        assert log.msg_keys() == EXPECTED_KEYS
        assert log.messages[0].data == b"MSG sample_rate=12001.188000"
        assert not of(c.events, ProtocolViolation)  # every message was binary and well-formed
        assert of(c.events, AuthResult) == [AuthResult(True, 0)]
        assert of(c.events, SampleRate) == [SampleRate(RATE, 12000)]
        info = {e.key: e.value for e in of(c.events, ServerInfo)}
        assert info["version_maj"] == 1 and info["version_min"] == 711 and info["freq_offset"] == 0.0
        assert info["bandwidth"] == 30_000_000 and info["audio_rate"] == 12000 and info["rx_chans"] == 8
        assert info["is_local"] == "0,0,0"
        assert json.loads(str(info["load_cfg"]))["rx_gps"] == "(52.000000, 0.000000)"
        assert [f.seq for f in c.frames] == list(range(1, len(c.frames) + 1))
        assert log.command_bits == ALL_BITS and log.authenticated and log.channel == 0
        assert [cmd.name for cmd in log.commands[:3]] == ["auth", "ident_user", "mod"]
        assert all(cmd.t >= log.opened_at for cmd in log.commands)

    @aio
    async def test_sample_rate_option(self) -> None:
        async with KiwiEmulator(cfg(sample_rate=11999.028)) as emu:
            ws = await ws_connect(emu.url(1))
            await ws.send(AUTH)
            msgs = await recv_all(ws)
            await ws.close()
        assert msgs[0] == b"MSG sample_rate=11999.028000"
        assert all(isinstance(m, bytes) for m in msgs)

    @aio
    async def test_paths(self) -> None:
        async with KiwiEmulator(cfg()) as emu:
            ws = await ws_connect(f"ws://127.0.0.1:{emu.port}/ws/kiwi/1700000000000/SND")
            await ws.send(AUTH)
            assert (await recv_all(ws))[0] == b"MSG sample_rate=12001.188000"
            await ws.close()
            for bad in ("/1/W/F", "/foo", "/1/SND/x", "/abc/SND"):
                with pytest.raises(InvalidStatus) as info:
                    await ws_connect(f"ws://127.0.0.1:{emu.port}{bad}")
                assert info.value.response.status_code == 404

    @aio
    async def test_password(self) -> None:
        async with KiwiEmulator(cfg(password="s3cret")) as emu:
            bad = await Client.open(emu, KiwiClientProtocol(7074.0, password="wrong"), ts=1)
            await bad.pump()
            good = await Client.open(emu, KiwiClientProtocol(7074.0, password="s3cret"), ts=2)
            assert await good.pump(n_frames(1))
            await bad.close()
            await good.close()
            logs = emu.connections
        assert of(bad.events, AuthResult) == [AuthResult(False, 1)]
        assert bad.terminal is not None and bad.terminal.kind is TerminalKind.BADP
        assert "is_local" not in logs[0].msg_keys() and "version_maj" not in logs[0].msg_keys()
        assert logs[0].badp == 1 and not logs[0].authenticated
        assert b"MSG chan_no_pwd=0" in [m.data for m in logs[1].messages]

    @aio
    async def test_unknown_and_ignored_commands(self) -> None:
        async with KiwiEmulator(cfg()) as emu:
            c = await Client.open(emu, KiwiClientProtocol(7074.0))
            assert await c.pump(n_frames(1))
            for text in ("SET foo=1", "HELLO", "SET nb algo=1", "SET squelch=0 max=0", "", "SET mod=lsb"):
                await c.ws.send(text)
            assert await c.pump(n_frames(4))
            await c.close()
            log = last_log(emu)
            await ended(emu, log)
        outcomes = {cmd.text: cmd.outcome for cmd in log.commands}
        assert outcomes["SET foo=1"] == "unknown" and outcomes["HELLO"] == "unknown"
        assert outcomes["SET nb algo=1"] == "ignored" and outcomes[""] == "empty"
        assert outcomes["SET mod=lsb"] == "bad_params"
        assert log.unknown_commands == 2 and log.bad_params == 1
        assert log.drop_reason is None  # unknown commands are harmless


# ------------------------------------------------------------------------------------------
# the five command bits and the drop rules
# ------------------------------------------------------------------------------------------


FIVE_BITS_CASES = {
    "freq": (["SET mod=lsb low_cut=-2700 high_cut=-300 freq=-1", AGC, AR_OK], MOD, 0x01),
    "mode": (["SET mod=x low_cut=-2700 high_cut=-300 freq=7074.000", AGC, AR_OK], MOD, 0x02),
    "passband": (["SET mod=lsb low_cut=0 high_cut=0 freq=7074.000", AGC, AR_OK], MOD, 0x04),
    "agc": ([MOD, "SET agc=1 hang=0 thresh=-100 slope=6 decay=1000", AR_OK], AGC, 0x08),
    "ar_ok": ([MOD, AGC, "SET AR OK in=12000 out=0"], AR_OK, 0x10),
}


@pytest.mark.parametrize("missing", list(FIVE_BITS_CASES))
@aio
async def test_no_audio_until_all_five_bits(missing: str) -> None:
    commands, fix, bit = FIVE_BITS_CASES[missing]
    async with KiwiEmulator(cfg(speed=32.0)) as emu:
        ws = await ws_connect(emu.url(1))
        await ws.send(AUTH)
        await recv_all(ws, quiet=0.05)
        for command in commands:
            await ws.send(command)
        assert snd(await recv_all(ws, quiet=0.25)) == []
        log = last_log(emu)
        assert log.command_bits == ALL_BITS & ~bit and log.phase is Phase.SETUP
        await ws.send(fix)
        got = snd(await recv_all(ws, quiet=0.1, limit=0.3))
        await ws.close()
    assert got and got[0][4:8] == b"\x01\x00\x00\x00"  # seq 1, little-endian


class TestDropRules:
    @aio
    async def test_more_than_four_keepalives_before_setup_drops(self) -> None:
        async with KiwiEmulator(cfg()) as emu:
            ws = await ws_connect(emu.url(1))
            await ws.send(AUTH)
            await recv_all(ws, quiet=0.05)
            for _ in range(4):
                await ws.send("SET keepalive")
            await asyncio.sleep(0.05)
            log = last_log(emu)
            assert log.drop_reason is None  # four are allowed
            await ws.send("SET keepalive")
            for command in (MOD, AGC, AR_OK):
                await ws.send(command)
            after = await recv_all(ws, quiet=0.3)
            assert ws.state is WsState.OPEN  # dropped silently: no close frame
            assert emu.active_channels == 0
            await ws.close()
        assert after == []
        assert log.drop_reason is not None and log.drop_reason.startswith("connection hang") and log.frames_sent == 0
        assert log.commands[5].outcome == "kicked"
        assert all(cmd.outcome == "ignored" for cmd in log.commands[6:])

    @aio
    async def test_set_before_auth_drops(self) -> None:
        async with KiwiEmulator(cfg()) as emu:
            ws = await ws_connect(emu.url(1))
            await ws.send(MOD)  # first message, and a SET other than auth
            first = await recv_all(ws, quiet=0.1)
            await ws.send(AUTH)
            later = await recv_all(ws, quiet=0.1)
            await ws.close()
            log0 = last_log(emu)
            ws2 = await ws_connect(emu.url(2))
            await ws2.send("SET auth t=kiwi p=")
            await recv_all(ws2, quiet=0.05)
            await ws2.close()
        assert first == [b"MSG sample_rate=12001.188000"]  # the task started, then the kick
        assert later == []
        assert log0.drop_reason == "SET mod before auth" and not log0.authenticated

    @aio
    async def test_set_after_failed_auth_drops(self) -> None:
        async with KiwiEmulator(cfg(password="pw")) as emu:
            ws = await ws_connect(emu.url(1))
            await ws.send("SET auth t=kiwi p=nope")
            await recv_all(ws, quiet=0.05)
            await ws.send("SET keepalive")  # allowed before auth
            await ws.send("SET ident_user=x")  # not allowed
            await asyncio.sleep(0.05)
            log = last_log(emu)
            assert log.drop_reason == "SET ident_user before auth"
            await ws.close()

    @aio
    async def test_password_timeout(self) -> None:
        async with KiwiEmulator(cfg(pre_auth_timeout=0.3)) as emu:
            ws = await ws_connect(emu.url(1))
            await ws.send("SET keepalive")  # starts the task, but no auth
            msgs = await recv_all(ws, quiet=0.5)
            p = KiwiClientProtocol(7074.0)
            p.connection_made(now())
            for m in msgs:
                p.receive_message(m, now())
            await ws.close()
            log = last_log(emu)
        assert msgs == [b"MSG sample_rate=12001.188000", b"MSG password_timeout"]
        assert p.terminal is not None and p.terminal.kind is TerminalKind.PASSWORD_TIMEOUT
        assert log.drop_reason == "password timeout"

    @aio
    async def test_keepalive_timeout(self) -> None:
        async with KiwiEmulator(cfg(keepalive_timeout=0.3, speed=8.0)) as emu:
            ws = await ws_connect(emu.url(1))
            for command in (AUTH, MOD, AGC, AR_OK):  # never a keepalive
                await ws.send(command)
            got = snd(await recv_all(ws, quiet=0.3, limit=1.5))
            log = last_log(emu)
            assert ws.state is WsState.OPEN
            await ws.close()
        assert log.drop_reason == "keepalive timeout"
        assert 0 < len(got) == log.frames_sent
        # the timeout (0.3 s of loop time after auth) wins over every frame due after it: the stream
        # stops at 0.3 s of audio at speed 8 however late the loop ran (ADPCM frames, 2048 samples)
        last = log.frames[-1]
        assert (last.start_index + 2048) / (RATE * 8.0) <= 0.3

    @aio
    async def test_setup_timeout(self) -> None:
        async with KiwiEmulator(cfg(setup_timeout=0.2)) as emu:
            ws = await ws_connect(emu.url(1))
            await ws.send(AUTH)
            await ws.send(MOD)
            await recv_all(ws, quiet=0.35)
            log = last_log(emu)
            await ws.close()
        assert log.drop_reason == "incomplete connection"

    @aio
    async def test_drop_action_close(self) -> None:
        async with KiwiEmulator(cfg(drop_action="close")) as emu:
            c = await Client.open(emu, KiwiClientProtocol(7074.0), query="kick=0.1")
            await c.pump(timeout=1.0)
            assert c.terminal is not None and c.terminal.kind is TerminalKind.KIWI_KICK
            with pytest.raises(ConnectionClosedOK):
                await asyncio.wait_for(c.ws.recv(), 1.0)
            log = last_log(emu)
            await ended(emu, log)
        assert log.end_reason == "dropped (kiwi_kick): closed"


# ------------------------------------------------------------------------------------------
# audio
# ------------------------------------------------------------------------------------------


class TestAudio:
    @aio
    async def test_adpcm_decodes_exactly_across_frames(self) -> None:
        async with KiwiEmulator(cfg()) as emu:
            c = await Client.open(emu, KiwiClientProtocol(7074.0, "lsb"))
            assert await c.pump(n_frames(6))
            await c.close()
            log = last_log(emu)
            await ended(emu, log)
        frames = c.frames[:6]
        assert all(f.compressed and len(f.samples) == 2048 for f in frames)
        assert_frames_match_log(frames, log)
        # The log's source samples are the station's signal, quantised; the decoded reference is
        # an independent encode/decode of them with the state carried across frames.
        station = emu.config.signals[7074.0]
        enc, dec = AdpcmEncoder(), AdpcmDecoder()
        for i, sent in enumerate(log.frames[:6]):
            assert sent.start_index == 2048 * i
            np.testing.assert_array_equal(sent.samples, quantize(station(2048, 2048 * i, RATE, False), False))
            np.testing.assert_array_equal(dec.decode(enc.encode(sent.samples)), sent.decoded)
        # A decoder reset before frame 2 would be badly wrong: the continuation matters.
        assert not np.array_equal(AdpcmDecoder().decode(AdpcmEncoder().encode(log.frames[1].samples)), log.frames[1].decoded)

    @aio
    async def test_pcm_decodes_exactly(self) -> None:
        async with KiwiEmulator(cfg()) as emu:
            c = await Client.open(emu, KiwiClientProtocol(7100.0, "usb", compression=False))
            assert await c.pump(n_frames(10))
            await c.close()
            log = last_log(emu)
            await ended(emu, log)
        assert all(f.flags == 0 and len(f.samples) == 512 for f in c.frames)
        assert_frames_match_log(c.frames, log)
        assert [f.start_index for f in log.frames[:10]] == [512 * i for i in range(10)]

    @aio
    async def test_iq_frames_and_gps_stamps(self) -> None:
        epoch = 1_400_000_000.25  # GPS seconds
        async with KiwiEmulator(cfg(gps_epoch=epoch)) as emu:
            c = await Client.open(emu, KiwiClientProtocol(7074.0, "iq"))
            assert await c.pump(n_frames(12))
            await c.close()
            log = last_log(emu)
            await ended(emu, log)
        frames = c.frames[:12]
        assert all(f.iq and f.flags & SndFlag.MODE_IQ and not f.compressed and len(f.samples) == 512 for f in frames)
        assert frames[0].samples.dtype == np.complex64
        assert_frames_match_log(frames, log)
        np.testing.assert_array_equal(np.concatenate([f.samples.astype(np.complex128) * 32768 for f in frames]), log.expected_iq(log.frames[:12]))
        g0 = frames[0].gps
        assert g0 is not None and (g0.last_gps_solution, g0.gpssec, g0.gpsnsec) == (0, 0, 0)  # first frame
        stamps = []
        for f in frames[1:]:
            assert f.gps is not None and f.gps.valid and 0 <= f.gps.last_gps_solution <= 3
            stamps.append(f.gps.gpssec * 10**9 + f.gps.gpsnsec)
        week_ns = 604_800 * 10**9
        assert stamps[0] == (round(epoch * 1e9) + round(512 * 1e9 / RATE)) % week_ns
        steps = np.diff(stamps)
        assert np.all(np.abs(steps - 512e9 / RATE) <= 1.0)  # 42.662 ms per frame, exact to 1 ns

    @aio
    async def test_iq_no_gps_fix(self) -> None:
        async with KiwiEmulator(cfg(gps_solution=255)) as emu:
            c = await Client.open(emu, KiwiClientProtocol(14200.0, "iq"))
            assert await c.pump(n_frames(3))
            await c.close()
        sols = [f.gps.last_gps_solution for f in c.frames if f.gps is not None]
        assert sols[0] == 0 and all(s == 255 for s in sols[1:])
        assert not c.frames[1].gps.valid  # type: ignore[union-attr]

    @aio
    async def test_smeter(self) -> None:
        stations = {7074.0: tone(1500.0, -12.0), 9000.0: tone(1000.0, 0.0), 9100.0: noise(-30.0, seed=3)}
        results = {}
        async with KiwiEmulator(cfg(signals=stations)) as emu:
            for ts, khz in enumerate(stations, start=1):
                c = await Client.open(emu, KiwiClientProtocol(khz, "lsb", compression=False), ts=ts)
                assert await c.pump(n_frames(4))
                await c.close()
                results[khz] = c.frames[:4]
        # calibration: full-scale sine = -10 dBm; a -12 dBFS tone -22 dBm; -30 dBFS RMS noise -37 dBm
        # (a 512-sample noise frame's power estimate varies by about +-0.3 dB rms)
        for khz, expected, tol in ((9000.0, -10.0, 0.15), (7074.0, -22.0, 0.15), (9100.0, -30.0 + SMETER_OFFSET_DB, 1.5)):
            for f in results[khz]:
                assert abs(f.smeter_dbm - expected) < tol, (khz, f.smeter_dbm)
                power = float(np.mean(np.abs(f.samples.astype(np.float64)) ** 2))
                assert abs(f.smeter_dbm - (10 * math.log10(power) + SMETER_OFFSET_DB)) <= 0.11

    @aio
    async def test_station_selection_within_passband(self) -> None:
        stations = {7100.0: tone(800.0, -6.0)}
        floor = noise(-60.0, seed=9)
        async with KiwiEmulator(cfg(signals=stations, noise_floor=floor)) as emu:
            near = await Client.open(emu, KiwiClientProtocol(7102.5, "lsb", compression=False), ts=1)  # 2.5 kHz < 2.7 kHz
            far = await Client.open(emu, KiwiClientProtocol(7103.0, "lsb", compression=False), ts=2)
            assert await near.pump(n_frames(2)) and await far.pump(n_frames(2))
            await near.close()
            await far.close()
        np.testing.assert_array_equal(to_int16(near.frames[0]), quantize(stations[7100.0](512, 0, RATE, False), False))
        np.testing.assert_array_equal(to_int16(far.frames[0]), quantize(floor(512, 0, RATE, False), False))

    @aio
    async def test_compression_toggle_reinit_and_mode_switch(self) -> None:
        async with KiwiEmulator(cfg()) as emu:
            c = await Client.open(emu, KiwiClientProtocol(7074.0, "lsb"))
            steps: list[Callable[[], None]] = [
                lambda: c.p.set_compression(False),  # ADPCM -> PCM
                lambda: c.p.set_compression(True),  # 0 -> 1 resets the encoder
                lambda: c.p.reinit(),  # reset + RESTART flag (event 3)
                lambda: c.p.set_frequency(7074.0, "iq"),  # IQ frames
                lambda: c.p.set_frequency(7074.0, "usb"),  # stereo -> mono resets (event 4)
            ]
            target = 3
            assert await c.pump(n_frames(target))
            for step in steps:
                step()
                await c._flush()
                target = len(c.frames) + 5
                assert await c.pump(n_frames(target))
            await c.close()
            log = last_log(emu)
            await ended(emu, log)
        frames = c.frames
        assert_frames_match_log(frames, log)  # exact only if both sides reset at the same frames
        kinds: list[str] = []
        for f in frames:
            kind = "iq" if f.iq else "adpcm" if f.compressed else "pcm"
            if not kinds or kinds[-1] != kind:
                kinds.append(kind)
        assert kinds == ["adpcm", "pcm", "adpcm", "iq", "adpcm"]
        restarts = [f.seq for f in log.frames if f.flags & SndFlag.RESTART]
        assert len(restarts) == 1
        new_freq = [f for f in log.frames if f.flags & SndFlag.NEW_FREQ]
        assert len(new_freq) == 2 and new_freq[0].mode == "iq" and new_freq[1].mode == "usb"
        assert not of(c.events, ProtocolViolation)
        assert not of(c.events, SequenceGap)

    @aio
    async def test_little_endian(self) -> None:
        async with KiwiEmulator(cfg()) as emu:
            c = await Client.open(emu, KiwiClientProtocol(7074.0, compression=False))
            assert await c.pump(n_frames(2))
            await c.ws.send("SET little-endian")
            assert await c.pump(lambda cl: sum(1 for f in cl.frames if f.little_endian) >= 3)
            await c.close()
            log = last_log(emu)
            await ended(emu, log)
        assert any(f.little_endian for f in c.frames) and not c.frames[0].little_endian
        assert_frames_match_log(c.frames, log)


# ------------------------------------------------------------------------------------------
# pacing
# ------------------------------------------------------------------------------------------


class _FakeWs:
    """Stands in for the server's WebSocket: records what the session sends."""

    remote_address = ("127.0.0.1", 1)

    def __init__(self) -> None:
        self.sent: list[bytes | str] = []

    async def send(self, data: bytes | str) -> None:
        self.sent.append(data)


class FakeClockSession:
    """One emulator session (:class:`_Session`) driven by a fake clock, no socket and no loop timers.

    The session is set up through its own command handling (auth, PCM, tuning, AGC, ``AR OK``) at
    fake time ``t0``; :meth:`run` then asks the session for its next deadline, moves the fake clock
    to it plus an injected lateness, and runs the due action, as the real ``clock()`` coroutine does
    with the loop's clock. Pacing is therefore checked on the schedule itself, whatever the load
    of the machine running the test.
    """

    def __init__(self, config: EmulatorConfig, t0: float = 1000.0) -> None:
        self.emu = KiwiEmulator(config)
        log = ConnectionLog(1, "/1/SND", 1, {}, "127.0.0.1:1", t0, self.emu.config.faults.copy())
        self.session = _Session(self.emu, _FakeWs(), log)  # type: ignore[arg-type]
        self.log = log
        self.now = t0
        for command in (AUTH, "SET compression=0", MOD, AGC, AR_OK):
            self.session._on_message(command, t0)
        assert log.phase is Phase.STREAMING
        self.deadlines: list[float] = []
        """The due time the session gave for each frame it sent."""

    async def run(self, frames: int, lateness: Callable[[int], float] = lambda k: 0.0) -> None:
        """Send ``frames`` more frames; frame ``k`` (0-based, over the session) is handled
        ``lateness(k)`` seconds after it was due."""
        s = self.session
        stop = len(self.log.frames) + frames
        while len(self.log.frames) < stop:
            s._on_message("SET keepalive", self.now)  # as a client does (every second or so)
            deadline, action = s._next_action(self.now)
            assert deadline is not None and action == s._on_frame_due  # nothing but frames is pending
            self.deadlines.append(deadline)
            self.now = max(self.now, deadline) + lateness(len(self.log.frames))
            assert await action(self.now) is False


PERIOD_PCM = 512 / RATE


class TestPacing:
    """Pacing is a schedule: frame ``k`` is due at ``t0 + (S_k + n) / (rate * speed)``. These tests
    drive that schedule with a fake clock (timings on a real loop are measured by
    ``benchmarks/kiwi_pacing.py``)."""

    @aio
    async def test_real_time_schedule_without_drift(self) -> None:
        # every frame handled late by up to 0.9 period: a schedule of "previous send + period" would
        # drift by the sum of those delays (about 900 periods here); the monotonic schedule does not
        rng = np.random.default_rng(0)
        late = rng.uniform(0.0, 0.9 * PERIOD_PCM, 2000)
        fc = FakeClockSession(cfg(speed=1.0))
        t0 = fc.now
        await fc.run(2000, lambda k: float(late[k]))
        ideal = t0 + np.arange(1, 2001) * PERIOD_PCM
        np.testing.assert_allclose(fc.deadlines, ideal, rtol=0, atol=1e-9)
        assert [f.start_index for f in fc.log.frames] == list(range(0, 2000 * 512, 512))
        assert [f.t for f in fc.log.frames] == pytest.approx(ideal + late, abs=1e-9)  # sent when handled
        assert fc.log.slips == 0 and fc.log.frames_sent == 2000

    @aio
    async def test_late_loop_reanchors_without_a_burst(self) -> None:
        # frame 10 is handled 9 periods late (a stalled loop): one slip, the late frame goes out at
        # once, and the schedule restarts from there one period apart: no burst of 9 frames
        fc = FakeClockSession(cfg(speed=1.0))
        t0 = fc.now
        await fc.run(30, lambda k: 9 * PERIOD_PCM if k == 10 else 0.0)
        d = np.array(fc.deadlines)
        np.testing.assert_allclose(d[:11], t0 + np.arange(1, 12) * PERIOD_PCM, atol=1e-9)
        resumed = d[10] + 9 * PERIOD_PCM  # when frame 10 was actually handled
        assert fc.log.frames[10].t == pytest.approx(resumed, abs=1e-9)
        np.testing.assert_allclose(d[11:], resumed + np.arange(1, 20) * PERIOD_PCM, atol=1e-9)
        assert fc.log.slips == 1
        assert [f.start_index for f in fc.log.frames] == list(range(0, 30 * 512, 512))  # late, never lost
        assert all(f.status == "sent" for f in fc.log.frames)

    @aio
    async def test_lateness_under_one_period_is_no_slip(self) -> None:
        fc = FakeClockSession(cfg(speed=1.0))
        await fc.run(50, lambda k: 0.99 * PERIOD_PCM)
        assert fc.log.slips == 0

    @pytest.mark.parametrize(("speed", "slow"), [(1.0, 1.0), (4.0, 1.0), (4.0, 0.5), (1.0, 0.25)])
    @aio
    async def test_speed_and_slow_fault_scale_the_schedule(self, speed: float, slow: float) -> None:
        fc = FakeClockSession(cfg(speed=speed, faults=FaultConfig(slow=slow)))
        await fc.run(40)
        np.testing.assert_allclose(np.diff(fc.deadlines), 512 / (RATE * speed * slow), rtol=1e-9)

    @aio
    async def test_slow_fault_changed_at_run_time_keeps_the_stream_whole(self) -> None:
        fc = FakeClockSession(cfg(speed=1.0))
        await fc.run(10)
        fc.session.faults.slow = 0.5  # what set_faults does to a live session's copy
        await fc.run(10)
        steps = np.diff(fc.deadlines)
        np.testing.assert_allclose(steps[:9], PERIOD_PCM, rtol=1e-9)
        np.testing.assert_allclose(steps[9:], 2 * PERIOD_PCM, rtol=1e-9)  # re-anchored at the change
        assert [f.start_index for f in fc.log.frames] == list(range(0, 20 * 512, 512))

    @aio
    async def test_speed_zero_never_waits_between_frames(self) -> None:
        fc = FakeClockSession(cfg(speed=0.0))
        t0 = fc.now
        await fc.run(400)
        assert fc.deadlines == [t0] * 400  # every frame is due at once: the clock never moves
        assert [f.seq for f in fc.log.frames] == list(range(1, 401)) and fc.log.slips == 0

    @aio
    async def test_speed_zero_on_a_real_loop_sends_without_sleeping(self, monkeypatch: pytest.MonkeyPatch) -> None:
        # the session's clock sleeps only when its next deadline is in the future: at speed 0 it
        # never does while streaming (the client's reading is the only brake); at speed 16 it does
        sleeps: dict[float, int] = {}
        real_sleep = _Session._sleep_until

        async def counting_sleep(self: _Session, deadline: float | None) -> None:
            if self.log.phase is Phase.STREAMING:
                sleeps[self.cfg.speed] = sleeps.get(self.cfg.speed, 0) + 1
            await real_sleep(self, deadline)

        monkeypatch.setattr(_Session, "_sleep_until", counting_sleep)
        for speed in (0.0, FAST):
            sleeps[speed] = 0
            async with KiwiEmulator(cfg(speed=speed)) as emu:
                c = await Client.open(emu, KiwiClientProtocol(7100.0, compression=False))
                assert await c.pump(n_frames(200), timeout=10.0)
                await c.close()
                log = last_log(emu)
                await ended(emu, log, timeout=5.0)
            assert [f.seq for f in c.frames[:200]] == list(range(1, 201))
        assert sleeps[0.0] == 0
        assert sleeps[FAST] >= 100  # paced: about one wait per frame


# ------------------------------------------------------------------------------------------
# faults
# ------------------------------------------------------------------------------------------


class TestFaults:
    @aio
    async def test_drop_every_gives_sequence_gaps(self) -> None:
        async with KiwiEmulator(cfg(faults=FaultConfig(drop_every=3))) as emu:
            c = await Client.open(emu, KiwiClientProtocol(7074.0, compression=False))
            assert await c.pump(n_frames(8))
            await c.close()
            log = last_log(emu)
            await ended(emu, log)
        gaps = of(c.events, SequenceGap)[:3]
        assert [(g.expected, g.got, g.lost_frames, g.lost_samples, g.reason) for g in gaps] == [
            (3, 4, 1, 512, GapReason.LOST),
            (6, 7, 1, 512, GapReason.LOST),
            (9, 10, 1, 512, GapReason.LOST),
        ]
        assert [f.seq for f in c.frames[:4]] == [1, 2, 4, 5] and c.frames[2].lost_before == 1
        assert log.frames_dropped >= 3 and log.frames[2].status == "dropped"
        assert_frames_match_log(c.frames, log)

    @aio
    async def test_drop_list_via_query_and_runtime_change(self) -> None:
        async with KiwiEmulator(cfg()) as emu:
            c = await Client.open(emu, KiwiClientProtocol(7074.0, compression=False), query="drop=4,5")
            assert await c.pump(n_frames(6))
            emu.set_faults(drop_every=2)  # at run time, for the server and every live connection
            assert await c.pump(lambda cl: len(of(cl.events, SequenceGap)) >= 4)
            await c.close()
        gaps = of(c.events, SequenceGap)
        assert (gaps[0].expected, gaps[0].got, gaps[0].lost_frames) == (4, 6, 2)
        assert all(g.lost_frames == 1 and g.expected % 2 == 0 for g in gaps[1:])
        assert emu.config.faults.drop_every == 2

    @pytest.mark.parametrize(
        ("query", "config_faults", "kind", "text"),
        [
            ("", FaultConfig(too_busy=True), TerminalKind.TOO_BUSY, "all 8 channels"),
            ("badp=3", FaultConfig(), TerminalKind.BADP, "admin connection not allowed"),
            (
                urlencode({"fault": "down=1;down_reason=Back at 12:00"}),
                FaultConfig(),
                TerminalKind.DOWN,
                "software update in progress: Back at 12:00",
            ),
            ("", FaultConfig(redirect="http://kiwi2.example.net:8074"), TerminalKind.REDIRECT, "redirected to http://kiwi2.example.net:8074"),
        ],
    )
    @aio
    async def test_refusals(self, query: str, config_faults: FaultConfig, kind: TerminalKind, text: str) -> None:
        async with KiwiEmulator(cfg(faults=config_faults)) as emu:
            c = await Client.open(emu, KiwiClientProtocol(7074.0), query=query)
            await c.pump(timeout=1.0)
            assert c.terminal is not None and c.terminal.kind is kind and text in c.terminal.message
            if kind is not TerminalKind.BADP:
                # refused: no sample_rate; the same refusal for every later message; no close
                log = last_log(emu)
                assert len(log.messages) == 1 and log.channel is None
                await c.ws.send("SET keepalive")
                again = await recv_all(c.ws, quiet=0.15)
                assert again == [log.messages[0].data] and c.ws.state is WsState.OPEN
            await c.close()
        if kind is TerminalKind.REDIRECT:
            assert c.terminal.redirect_url == "http://kiwi2.example.net:8074"

    @aio
    async def test_channel_limit(self) -> None:
        async with KiwiEmulator(cfg(rx_chans=1)) as emu:
            first = await Client.open(emu, KiwiClientProtocol(7074.0), ts=1)
            assert await first.pump(n_frames(1))
            second = await Client.open(emu, KiwiClientProtocol(7074.0), ts=2)
            await second.pump(timeout=1.0)
            await first.close()
            await second.close()
            assert await emu.wait_until(lambda: emu.active_channels == 0, 1.0)
            third = await Client.open(emu, KiwiClientProtocol(7074.0), ts=3)
            assert await third.pump(n_frames(1))
            await third.close()
        assert second.terminal is not None and second.terminal.kind is TerminalKind.TOO_BUSY
        assert "all 1 channels" in second.terminal.message

    @aio
    async def test_duplicate_ts_is_ignored(self) -> None:
        async with KiwiEmulator(cfg()) as emu:
            first = await Client.open(emu, KiwiClientProtocol(7074.0), ts=77)
            assert await first.pump(n_frames(1))
            ws = await ws_connect(emu.url(77))
            await ws.send(AUTH)
            assert await recv_all(ws, quiet=0.2) == []
            await ws.close()
            await first.close()
            dup = emu.connections[1]
        assert dup.refusal == "duplicate"

    @aio
    async def test_kick_then_silence_without_close(self) -> None:
        async with KiwiEmulator(cfg()) as emu:
            c = await Client.open(emu, KiwiClientProtocol(7074.0), query=urlencode({"fault": "kick=0.3;kick_message=Maintenance now"}))
            await c.pump(timeout=1.5)
            assert c.terminal is not None and c.terminal.kind is TerminalKind.KIWI_KICK
            assert c.terminal.message == "kicked by the admin: Maintenance now"
            assert c.frames  # it streamed until the kick
            assert await recv_all(c.ws, quiet=0.3) == []  # nothing more, and no close frame
            assert c.ws.state is WsState.OPEN
            log = last_log(emu)
            assert log.drop_reason == "kiwi_kick" and log.phase is Phase.DROPPED and emu.active_channels == 0
            await c.close()
            await ended(emu, log)
        assert log.end_reason == "client closed"

    @aio
    async def test_inactivity_timeout(self) -> None:
        async with KiwiEmulator(cfg(faults=FaultConfig(inactivity_timeout=0.3))) as emu:
            c = await Client.open(emu, KiwiClientProtocol(7074.0))
            await c.pump(timeout=1.5)
            await c.close()
            log = last_log(emu)
        assert c.terminal is not None and c.terminal.kind is TerminalKind.INACTIVITY_TIMEOUT
        assert log.messages[-1].data == b"MSG inactivity_timeout=1"
        assert log.drop_reason == "inactivity timeout"

    @aio
    async def test_malformed_frames(self) -> None:
        faults = parse_fault_spec("malformed=3:truncated,5:bad_tag,7:odd_payload,9:text")
        async with KiwiEmulator(cfg(faults=faults)) as emu:
            c = await Client.open(emu, KiwiClientProtocol(7074.0, compression=False))
            assert await c.pump(n_frames(8))
            await c.close()
            log = last_log(emu)
            await ended(emu, log)
        reasons = [v.reason for v in of(c.events, ProtocolViolation)][:4]
        assert "truncated SND frame" in reasons[0]
        assert "unknown tag" in reasons[1]
        assert "odd" in reasons[2]
        assert "text message" in reasons[3]
        gaps = of(c.events, SequenceGap)[:4]
        assert [(g.expected, g.got, g.lost_frames) for g in gaps] == [(3, 4, 1), (5, 6, 1), (7, 8, 1), (9, 10, 1)]
        assert log.frames_malformed == 4 and [f.status for f in log.frames[2:9:2]] == [
            "malformed:truncated",
            "malformed:bad_tag",
            "malformed:odd_payload",
            "malformed:text",
        ]
        assert c.terminal is None  # violations are not fatal
        assert_frames_match_log(c.frames, log)

    @aio
    async def test_stall_keeps_the_socket_open(self) -> None:
        async with KiwiEmulator(cfg(faults=FaultConfig(stall_after=0.15))) as emu:
            c = await Client.open(emu, KiwiClientProtocol(7074.0, compression=False, stall_timeout=0.4))
            await c.pump(timeout=2.0)
            assert c.terminal is not None and c.terminal.kind is TerminalKind.STALLED
            assert c.ws.state is WsState.OPEN and not c.closed
            log = last_log(emu)
            assert log.phase is Phase.STALLED
            # no frame is due after the stall (0.15 s of loop time after the first frame): at most
            # 0.15 s of audio at speed 16 plus the first frame (512 samples each)
            assert log.frames[-1].start_index <= 0.15 * RATE * FAST + 512
            await c.close()
        assert c.frames and len(c.frames) == log.frames_sent

    @aio
    async def test_close_mid_frame(self) -> None:
        async with KiwiEmulator(cfg(faults=FaultConfig(close_mid_frame=3))) as emu:
            c = await Client.open(emu, KiwiClientProtocol(7074.0, compression=False))
            await c.pump(timeout=2.0)
            log = last_log(emu)
            await ended(emu, log)
        assert [f.seq for f in c.frames] == [1, 2]
        assert c.closed and c.close_exc is not None and c.close_exc.rcvd is None  # no close frame
        assert c.terminal is not None and c.terminal.kind is TerminalKind.CONNECTION_LOST
        assert log.end_reason == "close_mid_frame" and log.frames[2].status == "cut"

    @aio
    async def test_absurd_sample_rate(self) -> None:
        async with KiwiEmulator(cfg()) as emu:
            c = await Client.open(emu, KiwiClientProtocol(7074.0), query="sample_rate=abc")
            await c.pump(timeout=1.0)
            await c.close()
        assert c.terminal is not None and c.terminal.kind is TerminalKind.PROTOCOL_ERROR
        assert "absurd sample_rate" in c.terminal.message

    @aio
    async def test_max_frames_then_stop_listening(self) -> None:
        async with KiwiEmulator(cfg(faults=FaultConfig(max_frames=5), max_sessions=1)) as emu:
            c = await Client.open(emu, KiwiClientProtocol(7074.0))
            await c.pump(timeout=2.0)
            log = last_log(emu)
            await ended(emu, log)
            assert await emu.wait_until(lambda: not emu.listening, 1.0)
            with pytest.raises(OSError):
                await ws_connect(emu.url(2))
        assert [f.seq for f in c.frames] == [1, 2, 3, 4, 5]
        assert isinstance(c.close_exc, ConnectionClosedOK) and c.close_exc.rcvd is not None and c.close_exc.rcvd.code == 1000
        assert log.end_reason == "max_frames"


# ------------------------------------------------------------------------------------------
# lifecycle
# ------------------------------------------------------------------------------------------


class TestLifecycle:
    @aio
    async def test_stop_with_live_connections_leaves_no_tasks(self, caplog: pytest.LogCaptureFixture) -> None:
        tasks_before = asyncio.all_tasks()
        # a long stop_timeout: a handler that did not end on the close would hold stop() (the test's
        # 15 s cap) and be logged before being aborted
        emu = KiwiEmulator(cfg(faults=FaultConfig(stall_after=0.05), stop_timeout=60.0))
        await emu.start()
        clients = [await Client.open(emu, KiwiClientProtocol(7074.0), ts=ts) for ts in (1, 2)]
        for c in clients:
            await c.pump(n_frames(1))
        dropped = await ws_connect(emu.url(3))
        await dropped.send(MOD)  # dropped silently, socket left open
        idle = await ws_connect(emu.url(4))  # never sends anything
        await asyncio.sleep(0.1)
        with caplog.at_level(logging.WARNING, logger="streamkit"):
            await emu.stop()
        assert not [r for r in caplog.records if "did not finish" in r.getMessage()]  # every handler ended on the close
        for ws in [c.ws for c in clients] + [dropped, idle]:
            with pytest.raises(ConnectionClosed) as info:
                while True:
                    await asyncio.wait_for(ws.recv(), 1.0)
            assert info.value.rcvd is not None and info.value.rcvd.code == 1001
        assert all(log.phase is Phase.CLOSED and log.end_reason == "server stopped" for log in emu.connections)
        assert asyncio.all_tasks() - tasks_before == set()  # no leaked task
        await emu.stop()  # idempotent

    @aio
    async def test_broken_signal_ends_only_its_connection(self, caplog: pytest.LogCaptureFixture) -> None:
        def broken(n: int, start: int, rate: float, iq: bool) -> np.ndarray:
            return np.zeros(n + 1)

        async with KiwiEmulator(cfg(signals={7074.0: tone(1000.0), 9000.0: broken})) as emu:
            bad = await Client.open(emu, KiwiClientProtocol(9000.0), ts=1)
            await bad.pump(timeout=1.0)
            good = await Client.open(emu, KiwiClientProtocol(7074.0), ts=2)
            assert await good.pump(n_frames(2))
            await good.close()
            log = emu.connections[0]
        assert bad.closed and bad.close_exc is not None and bad.close_exc.rcvd is not None and bad.close_exc.rcvd.code == 1011
        assert log.end_reason is not None and log.end_reason.startswith("internal error") and "shape" in log.end_reason
        assert "connection 1 failed" in caplog.text

    @aio
    async def test_silent_connections_are_closed_after_drop_linger(self) -> None:
        async with KiwiEmulator(cfg(drop_linger=0.2)) as emu:
            idle = await ws_connect(emu.url(1))  # never sends
            kicked = await ws_connect(emu.url(2))
            await kicked.send(MOD)  # dropped: SET before auth
            for ws in (idle, kicked):
                with pytest.raises(ConnectionClosedOK) as info:
                    await asyncio.wait_for(ws.recv() if ws is idle else recv_all(ws, quiet=1.0), 1.0)
                assert info.value.rcvd is not None and info.value.rcvd.code == 1001
        assert [log.end_reason for log in emu.connections] == ["waiting: closed after drop_linger", "dropped: closed after drop_linger"]

    def test_emulator_thread_with_a_sync_client(self) -> None:
        with EmulatorThread(cfg()) as t:
            assert t.port > 0
            with sync_connect(f"ws://127.0.0.1:{t.port}/5/SND", compression=None) as ws:
                ws.send(AUTH)
                first = ws.recv(timeout=2)
                for command in (MOD, AGC, AR_OK):
                    ws.send(command)
                while True:
                    m = ws.recv(timeout=2)
                    if isinstance(m, bytes) and m[:3] == b"SND":
                        break
            t.call(lambda: t.emulator.set_faults(drop_every=7))
            logs = t.call(lambda: t.emulator.connections)
        assert first == b"MSG sample_rate=12001.188000"
        assert logs[0].frames_sent >= 1 and logs[0].ts == 5
        assert t.emulator.config.faults.drop_every == 7

    def test_thread_reports_bind_errors(self) -> None:
        with EmulatorThread(cfg()) as t:
            clash = EmulatorThread(cfg(port=t.port))
            with pytest.raises(OSError):
                clash.start()

    def test_cli(self, capsys: pytest.CaptureFixture[str]) -> None:
        p = argparse.ArgumentParser()
        add_emulator_arguments(p)
        ns = p.parse_args(["--port", "0", "--duration", "0.2", "--rx-chans", "2", "--fault", "drop_every=50;kick=10", "--station", "9500=speech:3"])
        config = config_from_args(ns)
        assert config.rx_chans == 2 and config.faults.drop_every == 50 and config.faults.kick_after == 10.0
        assert isinstance(config.signals[9500.0], SpeechLike) and 7074.0 in config.signals
        assert run_from_args(ns) == 0
        assert "listening on ws://127.0.0.1:" in capsys.readouterr().err
        assert run_from_args(p.parse_args(["--port", "0", "--fault", "bogus=1"])) == 2
        assert "unknown fault 'bogus'" in capsys.readouterr().err


# ------------------------------------------------------------------------------------------
# signals and specs (no network)
# ------------------------------------------------------------------------------------------


class TestSignals:
    def test_tone_is_exact_and_chunking_invariant(self) -> None:
        t = tone(1000.0, -6.0)
        whole = t(4096, 1000, RATE, False)
        parts = np.concatenate([t(1000, 1000, RATE, False), t(3096, 2000, RATE, False)])
        np.testing.assert_array_equal(whole, parts)
        k = np.arange(1000, 5096)
        np.testing.assert_allclose(whole, 10 ** (-6 / 20) * np.sin(2 * np.pi * 1000.0 * k / RATE), atol=1e-9)
        z = t(512, 10**9, RATE, True)  # far into the stream, still exact
        assert np.iscomplexobj(z) and np.allclose(np.abs(z), 10 ** (-6 / 20))
        assert isinstance(t, Tone)

    def test_noise_is_deterministic_and_chunking_invariant(self) -> None:
        n = noise(-20.0, seed=5)
        whole = n(10_000, 3000, RATE, False)
        parts = np.concatenate([n(777, 3000, RATE, False), n(9223, 3777, RATE, False)])
        np.testing.assert_array_equal(whole, parts)
        assert np.sqrt(np.mean(whole**2)) == pytest.approx(0.1, rel=0.05)
        z = n(10_000, 0, RATE, True)
        assert np.sqrt(np.mean(np.abs(z) ** 2)) == pytest.approx(0.1, rel=0.05)
        assert not np.array_equal(whole, noise(-20.0, seed=6)(10_000, 3000, RATE, False))
        assert isinstance(n, Noise)

    def test_speech_like(self) -> None:
        s = speech_like(seed=7100)
        n = int(60 * RATE)
        x = s(n, 0, RATE, False)
        again = speech_like(seed=7100)(n, 0, RATE, False)
        np.testing.assert_array_equal(x, again)  # deterministic from the seed
        chunked = np.concatenate([s(2048, i, RATE, False) for i in range(0, n, 2048)])[:n]
        np.testing.assert_allclose(chunked, x, atol=1e-9)  # and from the start index
        assert np.max(np.abs(x)) <= 10 ** (-12 / 20) + 0.01
        bursts = s.bursts(RATE, n)
        assert len(bursts) >= 5
        on = np.array([b - a for a, b in bursts]) / RATE
        off = np.array([bursts[i + 1][0] - bursts[i][1] for i in range(len(bursts) - 1)]) / RATE
        assert np.all((on >= 0.999) & (on <= 4.001)) and np.all((off >= 1.999) & (off <= 6.001))
        assert 2.0 <= bursts[0][0] / RATE <= 6.0  # starts with a pause
        mask = np.zeros(n, bool)
        for a, b in bursts:
            mask[a:b] = True
        assert 10 * np.log10(np.mean(x[mask] ** 2) / np.mean(x[~mask] ** 2)) > 25
        # syllable-rate modulation: the envelope of a burst has its energy at 3-6 Hz
        a, b = bursts[0]
        env = np.abs(x[a:b])
        k = int(RATE // 200)
        env = env[: len(env) // k * k].reshape(-1, k).mean(axis=1)
        spec = np.abs(np.fft.rfft(env - env.mean()))
        freqs = np.fft.rfftfreq(len(env), k / RATE)
        assert 2.5 <= freqs[np.argmax(spec)] <= 12.5
        z = s(4096, bursts[0][0], RATE, True)
        assert np.iscomplexobj(z)
        assert not np.array_equal(x, speech_like(seed=1)(n, 0, RATE, False))

    def test_mix_quantize_and_smeter(self) -> None:
        m = mix(tone(500.0, -6.0), tone(1500.0, -6.0))
        assert isinstance(m, Mix)
        np.testing.assert_allclose(m(256, 0, RATE, False), tone(500.0, -6.0)(256, 0, RATE, False) + tone(1500.0, -6.0)(256, 0, RATE, False))
        q = quantize(np.array([1.5, -1.5, 0.5, 0.0]), False)
        assert q.tolist() == [32767, -32768, 16384, 0]
        qi = quantize(np.array([0.5 - 0.25j]), True)
        assert qi.tolist() == [[16384, -8192]]
        assert frame_smeter_dbm(quantize(tone(1000.0, 0.0)(12000, 0, RATE, False), False)) == pytest.approx(-10.0, abs=0.01)
        assert frame_smeter_dbm(np.zeros(512, np.int16)) < -127

    def test_parse_station_spec(self) -> None:
        khz, fn = parse_station_spec("7074=tone:1500:-12+noise:-40:1")
        assert khz == 7074.0 and isinstance(fn, Mix)
        assert isinstance(parse_station_spec("9.5=speech")[1], SpeechLike)
        for bad in ("7074", "x=tone:1", "7074=wave:1", "7074=tone", "7074=tone:a"):
            with pytest.raises(ValueError):
                parse_station_spec(bad)


class TestFaultSpec:
    def test_all_keys(self) -> None:
        f = parse_fault_spec(
            [
                "drop_every=50;drop=3,9;too_busy;badp=2;down=0;down_reason=Back soon;redirect=http://h:1",
                "kick=2.5;kick_message=bye;inactivity_timeout=3;stall=4;slow=0.5",
                "malformed=5:text,7:bad_tag;close_mid_frame=11;sample_rate=0;max_frames=12",
            ]
        )
        assert f == FaultConfig(
            drop_every=50,
            drop_seqs=frozenset({3, 9}),
            too_busy=True,
            badp=2,
            down=0,
            down_reason="Back soon",
            redirect="http://h:1",
            kick_after=2.5,
            kick_message="bye",
            inactivity_timeout=3.0,
            stall_after=4.0,
            slow=0.5,
            malformed={5: "text", 7: "bad_tag"},
            close_mid_frame=11,
            sample_rate="0",
            max_frames=12,
        )
        assert f.drops(100) and f.drops(9) and not f.drops(10)
        base = FaultConfig(drop_every=2)
        assert parse_fault_spec("kick=1", base).drop_every == 2 and base.kick_after is None

    @pytest.mark.parametrize(
        "spec",
        [
            "bogus=1",
            "drop_every=x",
            "drop_every=-1",
            "badp=9",
            "down=5",
            "kick=-1",
            "slow=0",
            "malformed=3:weird",
            "malformed=3",
            "max_frames=0",
            "kick",
        ],
    )
    def test_errors(self, spec: str) -> None:
        with pytest.raises(ValueError):
            parse_fault_spec(spec)

    def test_config_validation(self) -> None:
        for bad in (dict(sample_rate=10.0), dict(rx_chans=0), dict(speed=-1.0), dict(gps_solution=300), dict(drop_action="boom")):
            with pytest.raises(ValueError):
                EmulatorConfig(**bad).validate()  # type: ignore[arg-type]

    @aio
    async def test_bad_query_fault_is_ignored(self) -> None:
        async with KiwiEmulator(cfg()) as emu:
            c = await Client.open(emu, KiwiClientProtocol(7074.0), query="drop_every=zz")
            assert await c.pump(n_frames(3))
            await c.close()
        assert not of(c.events, SequenceGap)
        assert unquote(emu.connections[0].path) == "/1/SND?drop_every=zz"
