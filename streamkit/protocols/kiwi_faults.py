"""Faults a KiwiSDR server can be told to inject: :class:`FaultConfig` and its spec syntax.

Sans-I/O data: the server state machine (:mod:`streamkit.protocols.kiwi_server`) honours a
:class:`FaultConfig` per connection; the emulator (:mod:`streamkit.io.kiwi_emulator`) sets one per
server (``--fault``) and per connection (the URL query, :func:`faults_from_query`). The spec syntax
is ``key[=value]`` items separated by ``;`` (:func:`parse_fault_spec`): ``drop_every=N``,
``drop=S1,S2,...``, ``too_busy``, ``badp=N``, ``down=N``, ``down_reason=TEXT``, ``redirect=URL``,
``kick=T``, ``kick_message=TEXT``, ``inactivity_timeout=T``, ``stall=T``, ``slow=F``,
``malformed=SEQ:KIND,...`` (KIND one of ``truncated``, ``bad_tag``, ``odd_payload``, ``text``),
``close_mid_frame=SEQ``, ``sample_rate=TEXT`` and ``max_frames=K``. :func:`malformed_payload`
builds the corrupted frames.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Final

from streamkit.protocols.kiwi_frames import parse_int

__all__ = [
    "FAULT_KEYS",
    "MALFORMED_KINDS",
    "FaultConfig",
    "faults_from_query",
    "malformed_payload",
    "parse_fault_spec",
]

MALFORMED_KINDS: Final[frozenset[str]] = frozenset({"truncated", "bad_tag", "odd_payload", "text"})
"""Kinds of malformed frame the ``malformed`` fault can send."""


@dataclass(slots=True)
class FaultConfig:
    """Faults to inject (all off by default). Times are seconds of loop (monotonic) time.

    Attributes:
        drop_every: Drop (never send) every frame whose seq is a multiple of N (0 = off). The
            encoder state still advances, as when a real server discards a queued frame.
        drop_seqs: Drop the frames with these seq numbers.
        too_busy: Refuse every connection with ``MSG too_busy=<rx_chans>``.
        badp: Force this ``badp`` code (1..7) in the auth reply (0 = normal password check).
        down: Refuse with ``MSG reason_disabled=<down_reason> down=<code>`` (None = off).
        down_reason: Text of ``reason_disabled``.
        redirect: Refuse with ``MSG redirect=<url>`` (None = off).
        kick_after: ``MSG kiwi_kick=1,<kick_message>`` this long after auth, then drop.
        kick_message: Text of the kick.
        inactivity_timeout: ``MSG inactivity_timeout=<mins>`` this long after the last
            frequency/mode change (or ``SET inactivity_ack``), then drop.
        stall_after: Stop sending frames this long after the first frame; the socket stays open
            and commands are still processed.
        slow: Deliver at this fraction of real time (0 < slow; 1 = normal). Ignored at speed 0.
        malformed: ``{seq: kind}``: send that frame malformed (``truncated``: 7 bytes;
            ``bad_tag``: tag ``SNX``; ``odd_payload``: last payload byte cut, a violation for
            every frame kind; ``text``: a text WebSocket message instead of the frame).
        close_mid_frame: At this seq write half of the frame's WebSocket bytes, then close the
            TCP connection (no WebSocket close frame).
        sample_rate: Send this text as ``MSG sample_rate=`` instead of the true rate (e.g.
            ``abc`` or ``0``); pacing keeps the true rate.
        max_frames: After the frame with this seq, close the connection cleanly (code 1000).
    """

    drop_every: int = 0
    drop_seqs: frozenset[int] = frozenset()
    too_busy: bool = False
    badp: int = 0
    down: int | None = None
    down_reason: str = "down for maintenance"
    redirect: str | None = None
    kick_after: float | None = None
    kick_message: str = "kicked by the emulator"
    inactivity_timeout: float | None = None
    stall_after: float | None = None
    slow: float = 1.0
    malformed: dict[int, str] = field(default_factory=dict)
    close_mid_frame: int | None = None
    sample_rate: str | None = None
    max_frames: int | None = None

    def validate(self) -> None:
        """Raise ValueError on out-of-range values."""
        if self.drop_every < 0:
            raise ValueError(f"drop_every must be >= 0, got {self.drop_every}")
        if not 0 <= self.badp <= 7:
            raise ValueError(f"badp must be 0..7, got {self.badp}")
        if self.down is not None and self.down not in (0, 1, 2):
            raise ValueError(f"down must be 0, 1 or 2, got {self.down}")
        for name in ("kick_after", "inactivity_timeout", "stall_after"):
            v = getattr(self, name)
            if v is not None and not (math.isfinite(v) and v >= 0):
                raise ValueError(f"{name} must be a finite number >= 0, got {v}")
        if not (math.isfinite(self.slow) and self.slow > 0):
            raise ValueError(f"slow must be > 0, got {self.slow}")
        for seq, kind in self.malformed.items():
            if kind not in MALFORMED_KINDS:
                raise ValueError(f"malformed kind {kind!r} at seq {seq}; expected one of {sorted(MALFORMED_KINDS)}")
        if self.max_frames is not None and self.max_frames < 1:
            raise ValueError(f"max_frames must be >= 1, got {self.max_frames}")
        if self.redirect is not None and not self.redirect:
            raise ValueError("redirect needs a URL")

    def drops(self, seq: int) -> bool:
        """Whether the frame with this seq is dropped."""
        return (self.drop_every > 0 and seq % self.drop_every == 0) or seq in self.drop_seqs

    def copy(self) -> FaultConfig:
        """An independent copy."""
        return dataclasses.replace(self, malformed=dict(self.malformed))


def _parse_seconds(key: str, value: str) -> float:
    try:
        v = float(value)
    except ValueError:
        raise ValueError(f"fault {key}: expected seconds, got {value!r}") from None
    if not (math.isfinite(v) and v >= 0):
        raise ValueError(f"fault {key}: expected seconds >= 0, got {value!r}")
    return v


def _parse_int_value(key: str, value: str) -> int:
    if parse_int(value.strip()) is None:
        raise ValueError(f"fault {key}: expected an integer, got {value!r}")
    return int(value)


def _apply_fault_item(f: FaultConfig, key: str, value: str | None) -> None:
    key = key.strip()
    v = "" if value is None else value.strip()
    if key == "too_busy":
        f.too_busy = v.lower() not in ("0", "false", "no", "off")
        return
    if value is None:
        raise ValueError(f"fault {key!r} needs a value ({key}=...)")
    if key == "drop_every":
        f.drop_every = _parse_int_value(key, v)
    elif key in ("drop", "drop_seqs"):
        f.drop_seqs = frozenset(_parse_int_value(key, s) for s in v.split(",") if s.strip())
    elif key == "badp":
        f.badp = _parse_int_value(key, v)
    elif key == "down":
        f.down = _parse_int_value(key, v)
    elif key == "down_reason":
        f.down_reason = value
    elif key == "redirect":
        f.redirect = v
    elif key in ("kick", "kick_after"):
        f.kick_after = _parse_seconds(key, v)
    elif key == "kick_message":
        f.kick_message = value
    elif key == "inactivity_timeout":
        f.inactivity_timeout = _parse_seconds(key, v)
    elif key in ("stall", "stall_after"):
        f.stall_after = _parse_seconds(key, v)
    elif key == "slow":
        try:
            f.slow = float(v)
        except ValueError:
            raise ValueError(f"fault slow: expected a fraction, got {value!r}") from None
    elif key == "malformed":
        for item in v.split(","):
            if not item.strip():
                continue
            seq_s, sep, kind = item.partition(":")
            if not sep:
                raise ValueError(f"fault malformed: expected SEQ:KIND, got {item!r}")
            f.malformed[_parse_int_value(key, seq_s)] = kind.strip()
    elif key == "close_mid_frame":
        f.close_mid_frame = _parse_int_value(key, v)
    elif key == "sample_rate":
        if not v or " " in v:
            raise ValueError(f"fault sample_rate: expected one token, got {value!r}")
        f.sample_rate = v
    elif key == "max_frames":
        f.max_frames = _parse_int_value(key, v)
    else:
        raise ValueError(f"unknown fault {key!r}")


FAULT_KEYS: Final[frozenset[str]] = frozenset(
    {
        "too_busy", "drop_every", "drop", "drop_seqs", "badp", "down", "down_reason", "redirect",
        "kick", "kick_after", "kick_message", "inactivity_timeout", "stall", "stall_after", "slow",
        "malformed", "close_mid_frame", "sample_rate", "max_frames",
    }
)  # fmt: skip


def parse_fault_spec(spec: str | Iterable[str], base: FaultConfig | None = None) -> FaultConfig:
    """Parse ``key[=value];key[=value]...`` (or several such strings) into a FaultConfig.

    Keys: ``drop_every=N``, ``drop=S1,S2``, ``too_busy``, ``badp=N``, ``down=N``,
    ``down_reason=TEXT``, ``redirect=URL``, ``kick=T``, ``kick_message=TEXT``,
    ``inactivity_timeout=T``, ``stall=T``, ``slow=F``, ``malformed=SEQ:KIND,...``,
    ``close_mid_frame=SEQ``, ``sample_rate=TEXT``, ``max_frames=K``.

    Args:
        spec: One spec string or several.
        base: Start from a copy of this (default: no faults).

    Raises:
        ValueError: unknown key, bad value.
    """
    f = base.copy() if base is not None else FaultConfig()
    for s in [spec] if isinstance(spec, str) else spec:
        for item in s.split(";"):
            if not item.strip():
                continue
            key, sep, value = item.partition("=")
            _apply_fault_item(f, key, value if sep else None)
    f.validate()
    return f


def faults_from_query(query: Mapping[str, str], base: FaultConfig) -> FaultConfig:
    """The faults of one connection: ``base`` plus those of its URL query, given as fault keys
    (``?drop_every=5&too_busy``) or as one spec (``?fault=drop_every=5;kick=2``).

    Raises:
        ValueError: a bad fault in the query (``base`` is left unchanged).
    """
    specs = [f"{k}={v}" if v else k for k, v in query.items() if k in FAULT_KEYS]
    if "fault" in query:
        specs.append(query["fault"])
    return parse_fault_spec(specs, base) if specs else base


def malformed_payload(frame: bytes, seq: int, kind: str) -> bytes | str:
    """What the ``malformed`` fault sends instead of the SND message ``frame`` (see
    :class:`FaultConfig`): bytes for a binary message, str for a text one."""
    if kind == "truncated":
        return frame[:7]
    if kind == "bad_tag":
        return b"SNX" + frame[3:]
    if kind == "odd_payload":
        return frame[:-1]
    return f"SND frame {seq} sent as a text message"
