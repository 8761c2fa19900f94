"""Sans-I/O KiwiSDR audio (``SND``) server: the protocol state machine of one connection.

:class:`KiwiServerProtocol` is what a KiwiSDR does on one ``/<ts>/SND`` WebSocket: admission
(``down``, ``redirect``, ``too_busy``, a duplicate ``<ts>``), the ``SET auth`` handshake and its
``MSG`` replies, the set-up commands and the five command bits that start the audio, the limits
that drop a client (keepalives, timeouts), pacing, and the frames themselves (ADPCM with its state
carried across frames, PCM, IQ with GPS stamps), with the faults of a
:class:`~streamkit.protocols.kiwi_faults.FaultConfig` applied. It does no I/O: no sockets, no
asyncio, no clock. The adapter (``streamkit.io.kiwi_emulator``) owns the WebSocket and calls:

* :meth:`~KiwiServerProtocol.receive_message` with every client message and the current monotonic
  time; it returns the ``MSG`` messages to send, in order;
* :meth:`~KiwiServerProtocol.next_timer` for the earliest pending :class:`Timer` and its due time;
* when a timer is due, :meth:`~KiwiServerProtocol.frame_due` (``Timer.FRAME``: one
  :class:`FrameOut`) or :meth:`~KiwiServerProtocol.fire` (the others: a list of
  :data:`Output`, i.e. ``MSG`` bytes to send, :class:`Close` or :class:`Abort`).

Everything is recorded in the connection's
:class:`~streamkit.protocols.kiwi_server_log.ConnectionLog`. Receivers are shared between the
connections of one server through a :class:`ChannelTable`; the samples come from a
:data:`SignalBlockFn` the adapter provides.

Behaviour (firmware v1.711, kiwirecorder v1.11; choices where the firmware's behaviour is unknown
are marked):

* Nothing happens until the first client message. Then the channel is allocated (or the client is
  refused with ``MSG down``/``redirect``/``too_busy``, repeated for every later message; a second
  connection with the ``<ts>`` and client IP of a live one is ignored without a message),
  ``MSG sample_rate`` is sent, and the first message is processed as a command (normally
  ``SET auth``). The auth reply is ``client_public_ip``, ``rx_chans``, ``chan_no_pwd``,
  ``chan_no_pwd_true``, ``is_local`` (auth OK only), ``max_camp``, ``badp``; after ``badp=0`` come
  the version message, ``load_cfg``/``load_dxcfg``/``load_dxcomm_cfg``, ``cfg_loaded``,
  ``center_freq``/``bandwidth``/``adc_clk_nom`` and ``audio_init``/``audio_rate`` (once). A repeated
  ``SET auth`` after a successful one gets the auth reply again, nothing more.
* No audio until the five bits are set (frequency, mode, passband, AGC, ``AR OK``). More than 4
  ``SET keepalive`` before that, any ``SET`` other than ``auth``/``keepalive``/``options`` before a
  successful auth, no keepalive for ``keepalive_timeout`` after auth, no successful auth
  ``pre_auth_timeout`` after the first message (``MSG password_timeout`` first) and an incomplete
  set-up ``setup_timeout`` after auth all **drop** the connection: nothing more is sent, and the
  wire action is the adapter's per ``drop_action`` (``silent``: as the firmware, keep the socket;
  ``close``; ``abort``). A dropped, refused or silent connection is closed (1001) after
  ``drop_linger``.
* Frame ``k`` carries samples ``[S_k, S_k + n)`` of the connection's own sample counter (from 0 at
  the first frame, running across retunes and dropped frames) and is due at
  ``t0 + (S_k + n) / (rate * speed)`` on a monotonic schedule (no drift); more than one frame late
  re-anchors the schedule (``ConnectionLog.slips``) instead of bursting. ``speed=0``: always due.
* ``NEW_FREQ`` and ``LPF`` are set on the first frame after a change made while streaming (choice);
  after ``SET little-endian`` every frame carries flag 0x80; a dropped frame still advances the
  ADPCM encoder, as when a real server discards a queued frame.
* IQ frames carry ``last_gps_solution`` (``gps_solution``; None cycles 0..3 with the stream time,
  255 = no fix) and the GPS time of week of the first sample, ``gps_epoch + S_k / sample_rate`` in
  exact integer nanoseconds; the first IQ frame has the all-zero stamp, as real recordings do.
"""

from __future__ import annotations

import enum
import json
import logging
import math
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from typing import Final, Literal, Protocol, TypeAlias

import numpy as np
from numpy.typing import NDArray

from streamkit.protocols.adpcm import AdpcmDecoder, AdpcmEncoder
from streamkit.protocols.kiwi_faults import FaultConfig, malformed_payload
from streamkit.protocols.kiwi_frames import (
    GPS_EPOCH_UNIX_S,
    GPS_UTC_LEAP_SECONDS,
    GPS_WEEK_S,
    MODES,
    SAMPLES_PER_FRAME_ADPCM,
    SAMPLES_PER_FRAME_IQ,
    SAMPLES_PER_FRAME_PCM,
    STEREO_MODES,
    U32,
    GpsStamp,
    SndFlag,
    build_msg,
    build_snd_frame,
    parse_client_command,
    parse_int,
    smeter_raw,
)
from streamkit.protocols.kiwi_server_log import ConnectionLog, Phase, RateLimitedLog, ReceivedCommand, SentFrame

__all__ = [
    "Abort",
    "ChannelTable",
    "Close",
    "DropAction",
    "FrameOut",
    "KiwiServerProtocol",
    "Output",
    "ServerConfig",
    "SignalBlockFn",
    "Timer",
]

logger = logging.getLogger(__name__)
_rlog = RateLimitedLog(logger)

_NS: Final = 1_000_000_000
_GPS_WEEK_NS: Final = GPS_WEEK_S * _NS
_MAX_CAMP: Final = 4
# Commands the firmware accepts and the server acknowledges without acting on them.
_ACCEPTED_NOOP: Final[frozenset[str]] = frozenset(
    {
        "ident_user", "squelch", "genattn", "gen", "de_emp", "nb", "nr", "mute", "ovld_mute",
        "rf_attn", "window_func", "spc_", "sam_pll", "test", "underrun", "STATS_UPD", "MON_CAMP",
        "geo", "geoloc", "geojson", "ext_no_keepalive", "wf_comp", "lms_autonotch",
    }
)  # fmt: skip
_AGC_FIELDS: Final[tuple[str, ...]] = ("agc", "hang", "thresh", "slope", "decay", "manGain")

# The five command bits that must all be set before audio flows.
_CMD_FREQ: Final = 0x01
_CMD_MODE: Final = 0x02
_CMD_PASSBAND: Final = 0x04
_CMD_AGC: Final = 0x08
_CMD_AR_OK: Final = 0x10
_CMD_ALL: Final = 0x1F

DropAction: TypeAlias = Literal["silent", "close", "abort"]

SignalBlockFn: TypeAlias = Callable[[float, "tuple[int, int] | None", int, int, bool], "tuple[NDArray[np.int16], float]"]
"""``signal_block(freq_khz, passband, n, start_index, iq) -> (samples, smeter_dbm)``: the int16
samples (shape (n,), or (n, 2) ``[I, Q]`` for IQ) heard at that dial frequency and passband from
sample ``start_index`` of the connection, and their S-meter in dBm."""


class ServerConfig(Protocol):
    """The server settings :class:`KiwiServerProtocol` reads (``streamkit.io.kiwi_emulator.EmulatorConfig``
    has them all; see its attributes)."""

    sample_rate: float
    audio_rate: int
    password: str | None
    rx_chans: int
    speed: float
    pre_auth_timeout: float
    keepalive_timeout: float
    setup_timeout: float | None
    drop_action: DropAction
    drop_linger: float | None
    gps_solution: int | None
    gps_epoch: float | None
    is_local: bool
    record_frames: int
    rx_gps: str
    rx_name: str


class Timer(enum.Enum):
    """A pending action of :class:`KiwiServerProtocol` (:meth:`~KiwiServerProtocol.next_timer`)."""

    DROP_ACTION = "drop_action"
    """The connection was just dropped and ``drop_action`` is ``close`` or ``abort``."""
    PASSWORD_TIMEOUT = "password_timeout"
    KICK = "kick"
    INACTIVITY = "inactivity"
    KEEPALIVE_TIMEOUT = "keepalive_timeout"
    SETUP_TIMEOUT = "setup_timeout"
    STALL = "stall"
    FRAME = "frame"
    """The next audio frame is due: call :meth:`~KiwiServerProtocol.frame_due`."""
    LINGER = "linger"


@dataclass(frozen=True, slots=True)
class Close:
    """Close the WebSocket with this code and reason; the session is over."""

    code: int
    reason: str


@dataclass(frozen=True, slots=True)
class Abort:
    """Reset the TCP connection (no close frame); the session is over."""


Output: TypeAlias = bytes | Close | Abort
"""What :meth:`KiwiServerProtocol.fire` asks the adapter to do: bytes are a binary message."""


@dataclass(frozen=True, slots=True)
class FrameOut:
    """The outcome of one due frame (:meth:`KiwiServerProtocol.frame_due`).

    Attributes:
        status: ``sent``, ``dropped`` (send nothing), ``malformed:<kind>`` or ``cut`` (the
            ``close_mid_frame`` fault: write half of ``frame``'s WebSocket bytes, then close TCP).
        payload: The message to send: bytes (binary) or str (text; the ``malformed=..:text`` fault).
        frame: The well-formed SND message as built.
        close_after: ``max_frames`` reached: close (1000, end reason ``max_frames``) once this
            frame is handled.
    """

    status: str
    payload: bytes | str
    frame: bytes
    close_after: bool


class ChannelTable:
    """The receiver channels of one server, shared by its connections (admission and release)."""

    __slots__ = ("_held",)

    def __init__(self) -> None:
        self._held: dict[int, ConnectionLog] = {}

    def __len__(self) -> int:
        return len(self._held)

    def duplicate(self, log: ConnectionLog) -> bool:
        """Whether a channel is held by a connection with the same ``<ts>`` and client IP."""
        ip = log.peer.rsplit(":", 1)[0]
        return any(o.ts == log.ts and o.peer.rsplit(":", 1)[0] == ip for o in self._held.values())

    def allocate(self, log: ConnectionLog, rx_chans: int) -> int | None:
        """The lowest free channel, now held by ``log`` (also set as ``log.channel``); None if all are busy."""
        free = [c for c in range(rx_chans) if c not in self._held]
        if not free:
            return None
        self._held[free[0]] = log
        log.channel = free[0]
        return free[0]

    def release(self, log: ConnectionLog) -> None:
        """Free the channel ``log`` holds (if any)."""
        ch = log.channel
        if ch is not None and self._held.get(ch) is log:
            del self._held[ch]


def _gps_epoch_ns_now(utc_ns: int) -> int:
    """GPS time (ns since 1980-01-06, GPS scale) of the UTC time ``utc_ns``."""
    return (utc_ns - GPS_EPOCH_UNIX_S * _NS) + GPS_UTC_LEAP_SECONDS * _NS


class KiwiServerProtocol:
    """Server side of one KiwiSDR ``/<ts>/SND`` connection (see the module docstring).

    Args:
        config: Server settings (read on every use, so changes apply at once).
        log: This connection's record; its ``faults`` are the faults applied (mutable at run
            time: ``slow`` re-anchors the pacing, the others apply from the next check).
        channels: The server's channel table.
        signal_block: Where the samples come from.
    """

    def __init__(self, config: ServerConfig, log: ConnectionLog, channels: ChannelTable, signal_block: SignalBlockFn) -> None:
        self.cfg = config
        self.log = log
        self.channels = channels
        self.signal_block = signal_block
        self.rate = float(config.sample_rate)
        self._rate_frac = Fraction(repr(self.rate))
        self.pending_drop_action = False

        self.phase_since = log.opened_at
        self.started_at: float | None = None
        self.auth_at: float | None = None
        self.last_keepalive: float | None = None
        self.last_tune: float | None = None
        self.stream_started_at: float | None = None
        self.keepalives_before_setup = 0
        self._refusal_msg: bytes | None = None

        # receiver state
        self.bits = 0
        self.mode: str | None = None
        self.freq_khz: float = -1.0
        self.passband: tuple[int, int] | None = None
        self.agc_set = False
        self.compression = True
        self.little_endian = False
        self._pending_flags = 0

        # stream state
        self.encoder = AdpcmEncoder()
        self._mirror = AdpcmDecoder()
        self.seq = 0
        self.sample_index = 0
        self._sent_first_iq = False
        self._anchor_t = 0.0
        self._anchor_samples = 0
        self._anchor_speed = -1.0
        self._gps_epoch_ns: int | None = None

    @property
    def faults(self) -> FaultConfig:
        """The faults applied to this connection (``log.faults``)."""
        return self.log.faults

    # ------------------------------------------------------------------ helpers

    def _set_phase(self, phase: Phase, now: float) -> None:
        if self.log.phase is not phase:
            self.log.phase = phase
            self.phase_since = now

    def _eff_speed(self) -> float:
        s = self.cfg.speed
        return s * self.faults.slow if s > 0 else 0.0

    def _frame_layout(self) -> tuple[bool, bool, int]:
        """(iq, compressed, samples per frame) for the current mode and compression."""
        if self.mode in STEREO_MODES:
            return True, False, SAMPLES_PER_FRAME_IQ
        if self.compression:
            return False, True, SAMPLES_PER_FRAME_ADPCM
        return False, False, SAMPLES_PER_FRAME_PCM

    def _reset_encoder(self) -> None:
        self.encoder.reset()
        self._mirror.reset()

    def drop(self, reason: str, now: float) -> None:
        """Drop the connection: nothing more is sent; the channel is released; with
        ``drop_action`` close/abort, :attr:`Timer.DROP_ACTION` is due at once."""
        if self.log.phase in (Phase.DROPPED, Phase.CLOSED):
            return
        self.log.drop_reason = reason
        self.channels.release(self.log)
        self._set_phase(Phase.DROPPED, now)
        self.pending_drop_action = self.cfg.drop_action != "silent"
        _rlog.log(now, logging.INFO, "drop", "kiwi emulator: connection %d dropped (%s)", self.log.id, reason)

    def _record(self, now: float, text: str, name: str, outcome: str) -> None:
        cmds = self.log.commands
        if len(cmds) < 10_000:
            cmds.append(ReceivedCommand(now, text, name, outcome))

    # ------------------------------------------------------------------ client messages

    def receive_message(self, text: str, now: float) -> list[bytes]:
        """Process one client message (binary ones decoded as UTF-8 by the adapter); returns the
        messages to send, in order."""
        text = text.removesuffix("\n")
        if not text:
            self._record(now, text, "", "empty")  # ignored, not a keepalive
            return []
        phase = self.log.phase
        out: list[bytes] = []
        if phase is Phase.WAITING:
            refusal = self._admit()
            if refusal is not None:
                kind, msg = refusal
                self.log.refusal = kind
                if kind == "duplicate":  # dropped without a message
                    self._set_phase(Phase.DUPLICATE, now)
                    self._record(now, text, "", "ignored")
                    return []
                self._refusal_msg = msg
                self._set_phase(Phase.REFUSED, now)
                self._record(now, text, "", "refused")
                return [msg]
            self.started_at = now
            self._set_phase(Phase.AUTH, now)
            rate_text: object = self.faults.sample_rate if self.faults.sample_rate is not None else self.rate
            out.append(build_msg(**{"sample_rate": rate_text}))
        elif phase is Phase.REFUSED:
            self._record(now, text, "", "refused")
            return [self._refusal_msg] if self._refusal_msg else []
        elif phase in (Phase.DUPLICATE, Phase.DROPPED, Phase.CLOSED):
            self._record(now, text, "", "ignored")
            return []

        if not text.startswith("SET "):
            self.log.unknown_commands += 1
            self._record(now, text, "", "unknown")
            _rlog.log(now, logging.INFO, "unknown", "kiwi emulator: connection %d: unknown message %r", self.log.id, text[:80])
            return out
        try:
            name, params = parse_client_command(text)
        except ValueError:
            self.log.unknown_commands += 1
            self._record(now, text, "", "unknown")
            return out
        outcome = self._on_command(name, params, now, out)
        self._record(now, text, name, outcome)
        return out

    def _admit(self) -> tuple[str, bytes] | None:
        """On the first client message: ``(refusal kind, MSG)`` or None (channel allocated).

        Order: ``down``, ``redirect``, duplicate ``<ts>`` (no message), ``too_busy``.
        """
        f = self.faults
        if f.down is not None:
            return "down", build_msg(reason_disabled=f.down_reason, down=f.down)
        if f.redirect is not None:
            return "redirect", build_msg(redirect=f.redirect)
        if self.channels.duplicate(self.log):
            return "duplicate", b""
        if f.too_busy or self.channels.allocate(self.log, self.cfg.rx_chans) is None:
            return "too_busy", build_msg(too_busy=self.cfg.rx_chans)
        return None

    def _on_command(self, name: str, params: dict[str, str], now: float, out: list[bytes]) -> str:
        if name == "keepalive":
            self.log.keepalives += 1
            self.last_keepalive = now if self.log.authenticated else self.last_keepalive
            if self.bits != _CMD_ALL:
                self.keepalives_before_setup += 1
                if self.keepalives_before_setup > 4:
                    self.drop("connection hang: more than 4 keepalives before setup", now)
                    return "kicked"
            return "ok"
        if name == "auth":
            out.extend(self._on_auth(params, now))
            return "ok"
        if name == "options":
            return "ok"
        if not self.log.authenticated:
            self.drop(f"SET {name} before auth", now)
            return "kicked"
        handler = {
            "mod": self._on_mod,
            "agc": self._on_agc,
            "AR OK": self._on_ar_ok,
            "compression": self._on_compression,
        }.get(name)
        if handler is not None:
            ok = handler(params, now)
            if not ok:
                self.log.bad_params += 1
                _rlog.log(now, logging.INFO, "bad params", "kiwi emulator: connection %d: bad parameters for %s: %s", self.log.id, name, params)
            self._check_setup(now)
            return "ok" if ok else "bad_params"
        if name == "reinit":
            self._reset_encoder()
            self._pending_flags |= SndFlag.RESTART
            return "ok"
        if name == "little-endian":
            self.little_endian = True
            return "ok"
        if name == "inactivity_ack":
            self.last_tune = now
            return "ok"
        if name in _ACCEPTED_NOOP:
            return "ignored"
        self.log.unknown_commands += 1  # "SND BAD PARAMS": logged, counted, no reply
        _rlog.log(now, logging.INFO, "unknown", "kiwi emulator: connection %d: unknown command %r", self.log.id, name)
        return "unknown"

    def _on_auth(self, params: dict[str, str], now: float) -> list[bytes]:
        password = params.get("p", "")
        if password == "#":
            password = ""
        forced = self.faults.badp
        if forced:
            badp = forced
        elif self.cfg.password and password != self.cfg.password:
            badp = 1
        else:
            badp = 0
        self.log.badp = badp
        n = self.cfg.rx_chans
        free_no_pwd = 0 if self.cfg.password else n
        peer_ip = self.log.peer.rsplit(":", 1)[0] if self.log.peer else "127.0.0.1"
        out = [
            build_msg(client_public_ip=peer_ip),
            build_msg(rx_chans=n),
            build_msg(chan_no_pwd=free_no_pwd),
            build_msg(chan_no_pwd_true=free_no_pwd),
        ]
        local = int(self.cfg.is_local)
        if badp == 0:
            out.append(build_msg(is_local=f"{self.log.channel},{local},{local}"))
        out.append(build_msg(max_camp=_MAX_CAMP))
        out.append(build_msg(badp=badp))
        if badp == 0 and not self.log.authenticated:
            self.log.authenticated = True
            self.auth_at = self.last_keepalive = self.last_tune = now
            self._set_phase(Phase.SETUP, now)
            cfg_json = json.dumps(
                {
                    "rx_name": self.cfg.rx_name,
                    "rx_location": "loopback",
                    "rx_gps": self.cfg.rx_gps,
                    "rx_antenna": "dummy load",
                    "inactivity_timeout_mins": 0,
                },
                separators=(",", ":"),
            )
            out += [
                build_msg(version_maj=1, version_min=711, debian_ver=11, model="kiwi", platform="emulator", ext_clk=0, abyy=0, freq_offset=0.0),
                build_msg(load_cfg=cfg_json),
                build_msg(load_dxcfg='{"dx":[]}'),
                build_msg(load_dxcomm_cfg='{"dx":[]}'),
                build_msg(cfg_loaded=None),
                build_msg(center_freq=15_000_000, bandwidth=30_000_000, adc_clk_nom=66_666_600),
                build_msg(audio_init=local, audio_rate=self.cfg.audio_rate),
            ]
            self._check_setup(now)
        return out

    def _on_mod(self, params: dict[str, str], now: float) -> bool:
        mode = params.get("mod", "")
        try:
            lo = int(params["low_cut"])
            hi = int(params["high_cut"])
            freq = float(params["freq"])
        except (KeyError, ValueError):
            return False
        if not mode or not math.isfinite(freq):
            return False
        changed = False
        if mode != "x":
            if mode not in MODES:
                _rlog.log(now, logging.INFO, "mode", "kiwi emulator: unknown mode %r, using am", mode)
                mode = "am"
            self.bits |= _CMD_MODE
            if mode != self.mode:
                if self.mode in STEREO_MODES and mode not in STEREO_MODES and self.agc_set:
                    self._reset_encoder()  # leaving IQ resets the ADPCM state
                changed = self.mode is not None
                self.mode = mode
        if freq != self.freq_khz:
            self.bits |= _CMD_FREQ
            changed = changed or self.freq_khz >= 0
            self.freq_khz = freq
        if not (lo == 0 and hi == 0):
            limit = int(self.rate / 2) - 1
            lo, hi = max(-limit, min(limit, lo)), max(-limit, min(limit, hi))
            if (lo, hi) != self.passband:
                self.bits |= _CMD_PASSBAND
                if self.passband is not None and self.stream_started_at is not None:
                    self._pending_flags |= SndFlag.LPF
                self.passband = (lo, hi)
        if changed:
            self.last_tune = now
            if self.stream_started_at is not None:
                self._pending_flags |= SndFlag.NEW_FREQ
        return True

    def _on_agc(self, params: dict[str, str], now: float) -> bool:
        if not all(parse_int(params.get(k)) is not None for k in _AGC_FIELDS):
            return False
        self.bits |= _CMD_AGC
        self.agc_set = True
        return True

    def _on_ar_ok(self, params: dict[str, str], now: float) -> bool:
        out_rate = parse_int(params.get("out", ""))
        if out_rate is None or parse_int(params.get("in")) is None:
            return False
        if out_rate != 0:
            self.bits |= _CMD_AR_OK
        return True

    def _on_compression(self, params: dict[str, str], now: float) -> bool:
        v = parse_int(params.get("compression", ""))
        if v is None:
            return False
        on = v != 0
        if on and not self.compression:
            self._reset_encoder()  # compression switched back on resets the ADPCM state
        self.compression = on
        return True

    def _check_setup(self, now: float) -> None:
        self.log.command_bits = self.bits
        if self.log.phase is Phase.SETUP and self.bits == _CMD_ALL:
            self._set_phase(Phase.STREAMING, now)
            self._anchor(now)

    # ------------------------------------------------------------------ timers

    def _anchor(self, now: float) -> None:
        self._anchor_t = now
        self._anchor_samples = self.sample_index
        self._anchor_speed = self._eff_speed()

    def _frame_due_at(self, now: float) -> float:
        speed = self._eff_speed()
        if speed != self._anchor_speed:
            self._anchor(now)
        if speed <= 0:
            return now
        n = self._frame_layout()[2]
        return self._anchor_t + (self.sample_index + n - self._anchor_samples) / (self.rate * speed)

    def next_timer(self, now: float) -> tuple[float | None, Timer | None]:
        """The earliest pending timer of the current phase and when it is due (ties: the first
        listed in :class:`Timer` wins); ``(None, None)`` when nothing is pending."""
        if self.pending_drop_action:
            return now, Timer.DROP_ACTION
        phase = self.log.phase
        cands: list[tuple[float, Timer]] = []
        if phase is Phase.AUTH and self.started_at is not None:
            cands.append((self.started_at + self.cfg.pre_auth_timeout, Timer.PASSWORD_TIMEOUT))
        if phase in (Phase.SETUP, Phase.STREAMING, Phase.STALLED):
            assert self.auth_at is not None and self.last_keepalive is not None and self.last_tune is not None
            f = self.faults
            if f.kick_after is not None:
                cands.append((self.auth_at + f.kick_after, Timer.KICK))
            if f.inactivity_timeout is not None:
                cands.append((self.last_tune + f.inactivity_timeout, Timer.INACTIVITY))
            cands.append((self.last_keepalive + self.cfg.keepalive_timeout, Timer.KEEPALIVE_TIMEOUT))
            if phase is Phase.SETUP and self.cfg.setup_timeout is not None:
                cands.append((self.auth_at + self.cfg.setup_timeout, Timer.SETUP_TIMEOUT))
        if phase is Phase.STREAMING:
            if self.faults.stall_after is not None and self.stream_started_at is not None:
                cands.append((self.stream_started_at + self.faults.stall_after, Timer.STALL))
            cands.append((self._frame_due_at(now), Timer.FRAME))
        if phase in (Phase.WAITING, Phase.DROPPED, Phase.REFUSED, Phase.DUPLICATE) and self.cfg.drop_linger is not None:
            cands.append((self.phase_since + self.cfg.drop_linger, Timer.LINGER))
        if not cands:
            return None, None
        return min(cands, key=lambda c: c[0])

    def fire(self, timer: Timer, now: float) -> list[Output]:
        """Run a due timer other than :attr:`Timer.FRAME`; returns what to do, in order."""
        log = self.log
        if timer is Timer.DROP_ACTION:
            self.pending_drop_action = False
            if self.cfg.drop_action == "close":
                log.end_reason = f"dropped ({log.drop_reason}): closed"
                return [Close(1000, "")]
            if self.cfg.drop_action == "abort":
                log.end_reason = f"dropped ({log.drop_reason}): aborted"
                return [Abort()]
            return []
        if timer is Timer.PASSWORD_TIMEOUT:
            self.drop("password timeout", now)
            return [build_msg(password_timeout=None)]
        if timer is Timer.KICK:
            self.drop("kiwi_kick", now)
            return [build_msg(kiwi_kick=f"1,{self.faults.kick_message}")]
        if timer is Timer.INACTIVITY:
            t = self.faults.inactivity_timeout or 0.0
            self.drop("inactivity timeout", now)
            return [build_msg(inactivity_timeout=max(1, math.ceil(t / 60.0)))]
        if timer is Timer.KEEPALIVE_TIMEOUT:
            self.drop("keepalive timeout", now)
        elif timer is Timer.SETUP_TIMEOUT:
            self.drop("incomplete connection", now)
        elif timer is Timer.STALL:
            self._set_phase(Phase.STALLED, now)
            _rlog.log(now, logging.INFO, "stall", "kiwi emulator: connection %d stalled (fault)", log.id)
        elif timer is Timer.LINGER:
            log.end_reason = log.end_reason or f"{log.phase.value}: closed after drop_linger"
            return [Close(1001, "idle")]
        else:
            raise ValueError(f"{timer} is not fired with fire(); use frame_due()")
        return []

    # ------------------------------------------------------------------ frames

    def _gps_stamp(self, start_index: int, first: bool, utc_ns: int) -> GpsStamp:
        if first:
            return GpsStamp(0, 0, 0)
        if self._gps_epoch_ns is None:
            if self.cfg.gps_epoch is not None:
                self._gps_epoch_ns = round(self.cfg.gps_epoch * _NS)
            else:
                self._gps_epoch_ns = _gps_epoch_ns_now(utc_ns)
        num, den = self._rate_frac.numerator, self._rate_frac.denominator
        offset_ns = (2 * start_index * den * _NS + num) // (2 * num)  # round(start * 1e9 / rate)
        tow = (self._gps_epoch_ns + offset_ns) % _GPS_WEEK_NS
        if self.cfg.gps_solution is not None:
            sol = self.cfg.gps_solution
        else:
            sol = int(start_index / self.rate) % 4
        return GpsStamp(sol, tow // _NS, tow % _NS)

    def frame_due(self, now: float, utc_ns: int) -> FrameOut:
        """Build the next frame (:attr:`Timer.FRAME` is due), apply the frame faults and record it.

        Args:
            now: Monotonic time.
            utc_ns: The wall clock (ns since the Unix epoch); used once, for the GPS epoch of IQ
                stamps when ``gps_epoch`` is None.
        """
        due = self._frame_due_at(now)
        iq, compressed, n = self._frame_layout()
        period = n / (self.rate * self._eff_speed()) if self._eff_speed() > 0 else 0.0
        if period and now - due > period:
            self.log.slips += 1  # more than one frame late: re-anchor, no burst
            self._anchor_t = now - period
            self._anchor_samples = self.sample_index
        start = self.sample_index
        samples, dbm = self.signal_block(self.freq_khz, self.passband, n, start, iq)
        seq = (self.seq + 1) % U32
        self.seq = seq
        flags = self._pending_flags
        self._pending_flags = 0
        if iq:
            flags |= SndFlag.MODE_IQ
        elif compressed:
            flags |= SndFlag.COMPRESSED
        if self.little_endian:
            flags |= SndFlag.LITTLE_ENDIAN
        flags = int(flags)
        gps = None
        if iq:
            gps = self._gps_stamp(start, not self._sent_first_iq, utc_ns)
            self._sent_first_iq = True
        frame = build_snd_frame(seq, dbm, samples.reshape(-1), flags, gps, encoder=self.encoder if compressed else None)
        self.sample_index += n
        if self.stream_started_at is None:
            self.stream_started_at = now

        record = len(self.log.frames) < self.cfg.record_frames
        decoded = samples
        if compressed and record:
            # The encoder updates its state by decoding its own codes, so a decoder kept in step
            # with it yields exactly what a correct client decodes.
            decoded = self._mirror.decode(frame[10:])

        f = self.faults
        status = "sent"
        payload: bytes | str = frame
        if f.drops(seq):
            status = "dropped"
        elif f.close_mid_frame is not None and seq == f.close_mid_frame:
            status = "cut"
        elif seq in f.malformed:
            status = f"malformed:{f.malformed[seq]}"
            payload = malformed_payload(frame, seq, f.malformed[seq])

        if record:
            self.log.frames.append(
                SentFrame(seq, now, flags, smeter_raw(dbm), start, samples, decoded, gps, self.freq_khz, self.mode or "", status, len(frame))
            )
        else:
            self.log.frames_not_recorded += 1
        if status == "dropped":
            self.log.frames_dropped += 1
        return FrameOut(status, payload, frame, f.max_frames is not None and seq >= f.max_frames)
