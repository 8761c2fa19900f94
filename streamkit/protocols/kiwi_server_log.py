"""What the KiwiSDR server state machine records about each connection.

:class:`ConnectionLog` (one per connection: its :class:`Phase`, the commands received
(:class:`ReceivedCommand`), the ``MSG`` messages sent (:class:`SentMessage`), the frames produced
with their exact samples (:class:`SentFrame`) and counters) is written by
:class:`~streamkit.protocols.kiwi_server.KiwiServerProtocol` and by the I/O adapter that sends what
it produces (:mod:`streamkit.io.kiwi_emulator`); tests compare a client's output against it.
:class:`RateLimitedLog` keeps a misbehaving client from flooding the server's log.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from streamkit.protocols.kiwi_faults import FaultConfig
from streamkit.protocols.kiwi_frames import GpsStamp, SndFlag

__all__ = [
    "ConnectionLog",
    "Phase",
    "RateLimitedLog",
    "ReceivedCommand",
    "SentFrame",
    "SentMessage",
]


class RateLimitedLog:
    """At most ``burst`` records per key per ``interval`` seconds; the rest are counted and
    summarised when the next window opens. The caller passes the time (monotonic seconds)."""

    __slots__ = ("_burst", "_interval", "_logger", "_state")

    def __init__(self, log: logging.Logger, interval: float = 10.0, burst: int = 5) -> None:
        self._logger = log
        self._interval = interval
        self._burst = burst
        self._state: dict[str, list[float]] = {}  # key -> [window start, count, suppressed]

    def log(self, now: float, level: int, key: str, msg: str, *args: object) -> None:
        if not self._logger.isEnabledFor(level):
            return
        st = self._state.get(key)
        if st is None or now - st[0] >= self._interval:
            if st is not None and st[2]:
                self._logger.log(level, "%s: %d similar messages suppressed", key, int(st[2]))
            if st is None and len(self._state) > 256:
                self._state.clear()
            st = self._state[key] = [now, 0.0, 0.0]
        if st[1] < self._burst:
            st[1] += 1
            self._logger.log(level, msg, *args)
        else:
            st[2] += 1


class Phase(str, enum.Enum):
    """Server-side state of one connection."""

    WAITING = "waiting"
    """Upgraded; no client message yet (the server does nothing)."""
    REFUSED = "refused"
    """Refused (too_busy, down, redirect): every later message gets the refusal again."""
    DUPLICATE = "duplicate"
    """Same ``<ts>`` as a live session: ignored silently."""
    AUTH = "auth"
    """Channel allocated, ``sample_rate`` sent, waiting for a successful ``SET auth``."""
    SETUP = "setup"
    """Authenticated; waiting for the five command bits."""
    STREAMING = "streaming"
    """Sending frames."""
    STALLED = "stalled"
    """``stall`` fault: no more frames, socket open, commands processed."""
    DROPPED = "dropped"
    """Dropped by the server (kick, timeout, rule): nothing more is sent."""
    CLOSED = "closed"
    """The WebSocket connection is gone."""


@dataclass(frozen=True, slots=True)
class ReceivedCommand:
    """A client message as received.

    Attributes:
        t: Loop (monotonic) time of arrival.
        text: The message text (binary messages decoded as UTF-8 with replacement).
        name: Command name from :func:`~streamkit.protocols.kiwi_frames.parse_client_command`, or "".
        outcome: What the server did: ``ok``, ``ignored``, ``unknown``, ``bad_params``,
            ``refused``, ``dropped``, ``kicked`` (caused a drop), ``empty``.
    """

    t: float
    text: str
    name: str
    outcome: str


@dataclass(frozen=True, slots=True)
class SentMessage:
    """A non-frame message sent (``MSG ...`` as bytes)."""

    t: float
    data: bytes

    @property
    def keys(self) -> list[str]:
        """The ``MSG`` keys in order."""
        return [tok.partition("=")[0] for tok in self.data[4:].decode("utf-8", "replace").split(" ") if tok]

    @property
    def text(self) -> str:
        """The message as text."""
        return self.data.decode("utf-8", "replace")


@dataclass(frozen=True, slots=True, eq=False)
class SentFrame:
    """One SND frame the server produced (sent, dropped or malformed).

    Attributes:
        seq: Sequence number.
        t: Loop time when it was sent (or dropped).
        flags: Flags byte.
        smeter_raw: Raw S-meter.
        start_index: Connection sample index of the first sample.
        samples: The int16 samples encoded: shape (n,) mono, (n, 2) IQ ``[I, Q]`` (read-only).
        decoded: What a correct client decodes: the ADPCM reconstruction for compressed
            frames, else ``samples``.
        gps: The GNSS stamp (IQ frames).
        freq_khz: Dial frequency.
        mode: Mode.
        status: ``sent``, ``dropped``, ``malformed:<kind>`` or ``cut`` (close_mid_frame).
        nbytes: Bytes of the SND message as built.
    """

    seq: int
    t: float
    flags: int
    smeter_raw: int
    start_index: int
    samples: NDArray[np.int16]
    decoded: NDArray[np.int16]
    gps: GpsStamp | None
    freq_khz: float
    mode: str
    status: str
    nbytes: int

    @property
    def iq(self) -> bool:
        """IQ layout (flag 0x08)."""
        return bool(self.flags & SndFlag.MODE_IQ)

    @property
    def compressed(self) -> bool:
        """ADPCM payload."""
        return bool(self.flags & SndFlag.COMPRESSED)

    @property
    def smeter_dbm(self) -> float:
        """S-meter as the client computes it (``raw / 10 - 127``)."""
        return self.smeter_raw / 10.0 - 127.0

    def complex(self) -> NDArray[np.complex128]:
        """IQ samples as ``I + jQ`` (int values); raises ValueError for mono frames."""
        if not self.iq:
            raise ValueError("not an IQ frame")
        return self.decoded[:, 0].astype(np.float64) + 1j * self.decoded[:, 1].astype(np.float64)


@dataclass(slots=True, eq=False)
class ConnectionLog:
    """Everything about one connection (mutated by the server while it runs).

    Read it from the emulator's loop, or after the connection ended (``closed_at`` set).
    """

    id: int
    path: str
    ts: int
    query: dict[str, str]
    peer: str
    opened_at: float
    faults: FaultConfig
    phase: Phase = Phase.WAITING
    closed_at: float | None = None
    channel: int | None = None
    authenticated: bool = False
    badp: int | None = None
    refusal: str | None = None
    """``too_busy``, ``down``, ``redirect`` or ``duplicate``."""
    drop_reason: str | None = None
    """Why the server dropped the connection (``keepalive timeout``, ``kiwi_kick`` ...)."""
    end_reason: str | None = None
    """How the connection ended (``client closed``, ``max_frames``, ``close_mid_frame`` ...)."""
    command_bits: int = 0
    commands: list[ReceivedCommand] = field(default_factory=list)
    messages: list[SentMessage] = field(default_factory=list)
    frames: list[SentFrame] = field(default_factory=list)
    frames_sent: int = 0
    frames_dropped: int = 0
    frames_malformed: int = 0
    bytes_sent: int = 0
    unknown_commands: int = 0
    bad_params: int = 0
    keepalives: int = 0
    slips: int = 0
    frames_not_recorded: int = 0

    def msg_keys(self) -> list[str]:
        """First key of every ``MSG`` sent, in order."""
        return [m.keys[0] if m.keys else "" for m in self.messages]

    def delivered(self) -> list[SentFrame]:
        """Recorded frames that went out well-formed (status ``sent``)."""
        return [f for f in self.frames if f.status == "sent"]

    def expected_pcm(self, frames: Iterable[SentFrame] | None = None) -> NDArray[np.int16]:
        """Concatenated decoded int16 of the delivered mono frames (or of ``frames``)."""
        chosen = [f for f in (self.delivered() if frames is None else frames) if not f.iq]
        return np.concatenate([f.decoded for f in chosen]) if chosen else np.zeros(0, np.int16)

    def expected_iq(self, frames: Iterable[SentFrame] | None = None) -> NDArray[np.complex128]:
        """Concatenated ``I + jQ`` of the delivered IQ frames (or of ``frames``)."""
        chosen = [f for f in (self.delivered() if frames is None else frames) if f.iq]
        return np.concatenate([f.complex() for f in chosen]) if chosen else np.zeros(0, np.complex128)
