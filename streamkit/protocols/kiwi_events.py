"""Events and counters of the sans-I/O KiwiSDR client (:class:`~streamkit.protocols.kiwi_client.KiwiClientProtocol`).

Every event is a frozen dataclass; :data:`KiwiEvent` is their union. :class:`State` is the
client's connection state, :class:`TerminalKind` why a session ended, :class:`GapReason` the kind
of a sequence discontinuity.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import TypeAlias

import numpy as np
from numpy.typing import NDArray

from streamkit.protocols.kiwi_frames import GpsStamp, SndFlag

__all__ = [
    "AudioFrame",
    "AuthResult",
    "GapReason",
    "IgnoredMessage",
    "KiwiCounters",
    "KiwiEvent",
    "ProtocolViolation",
    "SampleRate",
    "SequenceGap",
    "ServerInfo",
    "State",
    "Terminal",
    "TerminalKind",
    "UnknownMessage",
]


class State(enum.Enum):
    """Connection state of :class:`KiwiClientProtocol`."""

    CONNECTING = enum.auto()
    """Created; :meth:`KiwiClientProtocol.connection_made` not called yet."""
    AUTHENTICATING = enum.auto()
    """``SET auth`` queued; setup may be under way; no audio frame yet."""
    STREAMING = enum.auto()
    """At least one audio frame received."""
    CLOSED = enum.auto()
    """A :class:`Terminal` event was emitted, or the connection was closed or lost."""


class TerminalKind(str, enum.Enum):
    """Why the session ended (the value is the server's ``MSG`` key where there is one)."""

    TOO_BUSY = "too_busy"
    REDIRECT = "redirect"
    DOWN = "down"
    BADP = "badp"
    INACTIVITY_TIMEOUT = "inactivity_timeout"
    IP_LIMIT = "ip_limit"
    KIWI_KICK = "kiwi_kick"
    PASSWORD_TIMEOUT = "password_timeout"
    WB_ONLY = "wb_only"
    EXCLUSIVE_USE = "exclusive_use"
    CAMP_DISCONNECT = "camp_disconnect"
    PROTOCOL_ERROR = "protocol_error"
    """A fatal :class:`ProtocolViolation` (e.g. an absurd ``sample_rate``)."""
    STALLED = "stalled"
    """No message for ``stall_timeout`` seconds (only if enabled)."""
    NO_AUDIO = "no_audio"
    """Messages, but no audio frame, for ``stall_timeout`` seconds (only if enabled); the message
    names what the server sent instead (e.g. a flood of ``MSG`` or text messages)."""
    CONNECTION_LOST = "connection_lost"
    """The transport closed without a terminal ``MSG`` first."""


class GapReason(str, enum.Enum):
    """Kind of sequence discontinuity reported by :class:`SequenceGap`."""

    LOST = "lost"
    """Forward jump: frames were lost."""
    DUPLICATE = "duplicate"
    """The previous sequence number again; the frame is dropped."""
    BACKWARD = "backward"
    """Backward jump; the protocol resynchronises on the new number."""


@dataclass(frozen=True, slots=True)
class SampleRate:
    """The stream's true sample rate (``MSG sample_rate``); emitted once, before the first
    :class:`AudioFrame`.

    Attributes:
        rate: Clock-derived rate in Hz, e.g. 12001.188 (use this for timing and resampling).
        nominal: The nominal ``audio_rate`` (12000, 20250, 24000) if known, else None.
    """

    rate: float
    nominal: int | None


@dataclass(frozen=True, slots=True, eq=False)
class AudioFrame:
    """One decoded SND frame.

    Attributes:
        seq: Sequence number (uint32, first frame 1).
        flags: Raw flags byte; see :class:`SndFlag` and the properties below.
        smeter_dbm: S-meter in dBm, ``raw / 10 - 127``.
        samples: float32 mono samples, shape (n,), or complex64 I+jQ, shape (n,), both scaled
            by 1/32768.
        iq: True for the IQ/stereo layout (flag 0x08).
        gps: GNSS stamp for IQ frames, None for mono.
        lost_before: Frames lost right before this one (0 unless a :class:`SequenceGap` with
            reason ``lost`` was emitted just before).
    """

    seq: int
    flags: int
    smeter_dbm: float
    samples: NDArray[np.float32] | NDArray[np.complex64]
    iq: bool
    gps: GpsStamp | None
    lost_before: int

    @property
    def compressed(self) -> bool:
        """The payload was IMA ADPCM."""
        return bool(self.flags & SndFlag.COMPRESSED)

    @property
    def restart(self) -> bool:
        """The server reset its ADPCM/AGC state before this frame."""
        return bool(self.flags & SndFlag.RESTART)

    @property
    def squelched(self) -> bool:
        """Squelch is closed; the client should mute."""
        return bool(self.flags & SndFlag.SQUELCH_UI)

    @property
    def adc_overload(self) -> bool:
        """ADC overload was flagged."""
        return bool(self.flags & SndFlag.ADC_OVFL)

    @property
    def new_freq(self) -> bool:
        """Frequency or mode changed in this frame."""
        return bool(self.flags & SndFlag.NEW_FREQ)

    @property
    def passband_changed(self) -> bool:
        """Passband changed in this frame."""
        return bool(self.flags & SndFlag.LPF)

    @property
    def little_endian(self) -> bool:
        """Uncompressed samples were little-endian."""
        return bool(self.flags & SndFlag.LITTLE_ENDIAN)


@dataclass(frozen=True, slots=True)
class SequenceGap:
    """A discontinuity in SND sequence numbers, emitted before the frame that follows it.

    Attributes:
        expected: The sequence number that should have come (previous + 1, mod 2**32).
        got: The sequence number that came.
        lost_frames: Frames lost (> 0 for ``lost``); 0 for ``duplicate``; the negative distance
            for ``backward``.
        lost_samples: ``lost_frames`` times the samples per frame of the arriving frame's format
            (2048 ADPCM mono, 512 PCM mono, 512 IQ).
        reason: See :class:`GapReason`.
    """

    expected: int
    got: int
    lost_frames: int
    lost_samples: int
    reason: GapReason


@dataclass(frozen=True, slots=True)
class ServerInfo:
    """An informational ``MSG`` key, value parsed to int/float where numeric.

    Attributes:
        key: The ``MSG`` key, e.g. ``version_min``, ``center_freq``, ``freq_offset``.
        value: int, float or str (percent-decoded for encoded keys); None for a bare key.
    """

    key: str
    value: int | float | str | None


@dataclass(frozen=True, slots=True)
class AuthResult:
    """The server's ``MSG badp=<n>`` reply to ``SET auth``.

    Attributes:
        ok: True for ``badp=0``.
        badp: The code, 0..7.
    """

    ok: bool
    badp: int


@dataclass(frozen=True, slots=True)
class Terminal:
    """The session is over; the caller should close the socket (the server does not).

    Attributes:
        kind: What ended it.
        retryable: Whether an automatic reconnect is appropriate (with a fresh ``<ts>``).
        message: Human-readable reason (percent-decoded server text where there is one).
        redirect_url: The decoded target for ``redirect``, else None.
        retry_after: Suggested minimum delay in seconds before retrying, or None.
    """

    kind: TerminalKind
    retryable: bool
    message: str
    redirect_url: str | None = None
    retry_after: float | None = None


@dataclass(frozen=True, slots=True)
class ProtocolViolation:
    """Malformed or unexpected input. Processing continues unless ``fatal``.

    Attributes:
        reason: What was wrong.
        data_len: Length in bytes of the offending message (characters for a text message).
        fatal: True if a :class:`Terminal` event follows.
    """

    reason: str
    data_len: int
    fatal: bool = False


@dataclass(frozen=True, slots=True)
class UnknownMessage:
    """A ``MSG`` key this module does not know (value as received, None for a bare key)."""

    key: str
    value: str | None


@dataclass(frozen=True, slots=True)
class IgnoredMessage:
    """A message with a known tag that the audio client does not use (``W/F``, ``EXT``,
    ``DAT``, ``CLI``)."""

    tag: str
    data_len: int


KiwiEvent: TypeAlias = (
    SampleRate | AudioFrame | SequenceGap | ServerInfo | AuthResult | Terminal | ProtocolViolation | UnknownMessage | IgnoredMessage
)
"""Every event type :meth:`KiwiClientProtocol.events_received` can return."""


@dataclass(slots=True)
class KiwiCounters:
    """Running counters of a :class:`KiwiClientProtocol` (mutable, read them any time)."""

    messages: int = 0
    """WebSocket messages received (including ignored ones)."""
    bytes: int = 0
    """Bytes received in those messages."""
    frames: int = 0
    """Audio frames emitted."""
    samples: int = 0
    """Samples (complex samples for IQ) emitted."""
    lost_frames: int = 0
    """Frames lost according to forward sequence gaps."""
    lost_samples: int = 0
    """Samples in those frames."""
    duplicates: int = 0
    """Duplicate frames dropped."""
    backward_jumps: int = 0
    """Backward sequence jumps (resynchronised)."""
    violations: int = 0
    """ProtocolViolation events emitted."""
    keepalives_sent: int = 0
    """``SET keepalive`` commands queued."""
    ignored_after_close: int = 0
    """Messages received after the protocol was CLOSED (silently counted, no events)."""
