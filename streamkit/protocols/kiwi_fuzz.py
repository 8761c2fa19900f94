"""Fuzzing the sans-I/O KiwiSDR client: mutated server messages of every kind, and an audit of
what the parser made of each.

Used by the bounded property test in the suite and by ``benchmarks/fuzz_kiwi.py`` (millions of
frames). Everything is driven by a :class:`numpy.random.Generator`, so a seed replays a run.

* :func:`make_message` builds one well-formed message of a :data:`KINDS` kind: ``SND`` frames
  (ADPCM, PCM big/little-endian, IQ with a GNSS block) with a plausible sequence number, ``MSG``
  with known and unknown keys and hostile values (percent escapes, control characters, absurd
  numbers, bad redirect URLs), the ``W/F``/``EXT``/``DAT``/``CLI`` tags, an unknown tag, a text
  (not binary) WebSocket message, and messages shorter than a tag.
* :func:`mutate` damages one: bit flips, truncation, extension, a random header byte, a splice of
  two messages, a one-byte payload cut (odd lengths).
* :func:`audit` checks the events of ONE message against that message: only the documented event
  types, no internal error caught by the parser's last-resort guard, every audio frame exactly as
  long as its payload says (nothing silently short), every gap's sample count consistent.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Final
from urllib.parse import quote

import numpy as np

from streamkit.protocols.kiwi_client import KiwiClientProtocol
from streamkit.protocols.kiwi_events import (
    AudioFrame,
    AuthResult,
    GapReason,
    IgnoredMessage,
    ProtocolViolation,
    SampleRate,
    SequenceGap,
    ServerInfo,
    Terminal,
    UnknownMessage,
)
from streamkit.protocols.kiwi_frames import IQ_HEADER_LEN, SND_HEADER_LEN, SndFlag, samples_per_frame

__all__ = ["KINDS", "MUTATIONS", "FuzzSession", "audit", "handshake", "make_message", "mutate"]

KINDS: Final[tuple[str, ...]] = ("snd_adpcm", "snd_pcm", "snd_iq", "msg", "wf", "ext", "dat", "cli", "unknown_tag", "text", "short")
"""Message kinds :func:`make_message` builds."""

MUTATIONS: Final[tuple[str, ...]] = ("bitflip", "truncate", "extend", "header_byte", "splice", "cut_one")
"""Damage :func:`mutate` can do."""

_EVENT_TYPES: Final = (SampleRate, AudioFrame, SequenceGap, ServerInfo, AuthResult, Terminal, ProtocolViolation, UnknownMessage, IgnoredMessage)

HANDSHAKE: Final[tuple[bytes, ...]] = (
    b"MSG sample_rate=12001.188000",
    b"MSG client_public_ip=127.0.0.1",
    b"MSG rx_chans=4",
    b"MSG badp=0",
    b"MSG version_maj=1 version_min=711",
    b"MSG audio_init=0 audio_rate=12000",
)

# MSG keys: (key, weight). Terminal keys are rare so that sessions last.
_MSG_KEYS: Final[tuple[tuple[str, float], ...]] = (
    ("sample_rate", 3), ("audio_rate", 3), ("badp", 1), ("version_maj", 2), ("version_min", 2), ("load_cfg", 2),
    ("center_freq", 2), ("bandwidth", 2), ("freq_offset", 2), ("audio_adpcm_state", 3), ("reason_disabled", 1),
    ("rx_chans", 2), ("client_public_ip", 2), ("status_msg_html", 2), ("notify_msg", 1), ("keepalive", 1), ("stats_cb", 1),
    ("nonsense", 4), ("x", 2), ("", 1),
    ("too_busy", 0.05), ("redirect", 0.15), ("down", 0.05), ("kiwi_kick", 0.05), ("inactivity_timeout", 0.02),
    ("ip_limit", 0.02), ("wb_only", 0.02), ("password_timeout", 0.02), ("exclusive_use", 0.02), ("camp_disconnect", 0.02),
)  # fmt: skip
_KEY_NAMES: Final = [k for k, _ in _MSG_KEYS]
_KEY_CUM: Final = np.cumsum([w for _, w in _MSG_KEYS]) / sum(w for _, w in _MSG_KEYS)

_VALUES: Final[tuple[str, ...]] = (
    "0", "1", "-1", "12001.188", "1e400", "nan", "inf", "-0", "4294967296", "99999999999999999999", "12k", "", "=", "==x",
    "%", "%zz", "%00", "%C3%28", "\x1b[2J", "\u2028", "é", "a b", ",", "1,2", "1,99999", "88,-32768", "89,0", "-1,0",
    "http%3A%2F%2F%5B%3A%3A1%5D%3A18120%2F", "http%3A%2F%2Fhost%3Aport", "ftp%3A%2F%2Fh", "http%3A%2F%2F%5B%3A%3A1",
    '{"rx_name":"x"}', "%7B%22a%22%3A1%7D",
)  # fmt: skip


_MOSTLY_VALID: Final[dict[str, str]] = {"badp": "badp=0", "sample_rate": "sample_rate=12001.188000"}


@dataclass(slots=True)
class FuzzSession:
    """State the generator keeps between messages: the next sequence number."""

    seq: int = 1
    sent: dict[str, int] = field(default_factory=dict)


def _seq(rng: np.random.Generator, s: FuzzSession) -> int:
    r = rng.random()
    if r < 0.85:
        seq = s.seq
    elif r < 0.92:
        seq = s.seq + int(rng.integers(1, 5))  # forward jump: frames lost
    elif r < 0.96:
        seq = max(s.seq - 1, 0)  # duplicate
    elif r < 0.98:
        seq = int(rng.integers(0, 1 << 32))  # anywhere (wraps, backward jumps)
    else:
        seq = (1 << 32) - 1  # the wrap
    s.seq = (seq + 1) % (1 << 32)
    return seq


def _snd(rng: np.random.Generator, s: FuzzSession, flags: int, payload_len: int) -> bytes:
    if rng.random() < 0.1:
        payload_len = int(rng.integers(0, 2 * payload_len + 1))
    header = b"SND" + struct.pack("<BI", flags, _seq(rng, s)) + struct.pack(">H", int(rng.integers(0, 1 << 16)))
    if flags & SndFlag.MODE_IQ:
        header += struct.pack("<BBII", int(rng.integers(0, 256)), 0, int(rng.integers(0, 1 << 32)), int(rng.integers(0, 1 << 32)))
    return header + rng.bytes(payload_len)


def _extra_flags(rng: np.random.Generator) -> int:
    f = 0
    for bit in (SndFlag.LPF, SndFlag.ADC_OVFL, SndFlag.NEW_FREQ, SndFlag.RESTART, SndFlag.SQUELCH_UI, SndFlag.LITTLE_ENDIAN):
        if rng.random() < 0.1:
            f |= bit
    return f


def _msg(rng: np.random.Generator) -> bytes:
    n = int(rng.integers(1, 4))
    tokens = []
    for _ in range(n):
        key = _KEY_NAMES[min(int(np.searchsorted(_KEY_CUM, rng.random())), len(_KEY_NAMES) - 1)]
        if key in _MOSTLY_VALID and rng.random() < 0.9:
            tokens.append(_MOSTLY_VALID[key])  # so that sessions last: these end one when wrong
            continue
        r = rng.random()
        if r < 0.15:
            tokens.append(key)  # bare key
        elif r < 0.8:
            tokens.append(f"{key}={_VALUES[int(rng.integers(len(_VALUES)))]}")
        else:
            raw = rng.bytes(int(rng.integers(0, 40))).decode("latin-1")
            tokens.append(f"{key}={quote(raw, safe='') if rng.random() < 0.5 else raw}")
    return ("MSG " + " ".join(tokens)).encode("utf-8", "surrogatepass")


def make_message(kind: str, rng: np.random.Generator, session: FuzzSession) -> bytes | str:
    """One well-formed (for ``SND``: nominally sized, sometimes not) message of ``kind``.

    Raises:
        ValueError: an unknown kind.
    """
    session.sent[kind] = session.sent.get(kind, 0) + 1
    if kind == "snd_adpcm":
        return _snd(rng, session, SndFlag.COMPRESSED | _extra_flags(rng), 1024)
    if kind == "snd_pcm":
        return _snd(rng, session, _extra_flags(rng), 1024)
    if kind == "snd_iq":
        return _snd(rng, session, SndFlag.MODE_IQ | _extra_flags(rng), 2048)
    if kind == "msg":
        return _msg(rng)
    if kind in ("wf", "ext", "dat", "cli"):
        tag = {"wf": b"W/F", "ext": b"EXT", "dat": b"DAT", "cli": b"CLI"}[kind]
        return tag + rng.bytes(int(rng.integers(0, 1100)))
    if kind == "unknown_tag":
        return rng.bytes(3) + rng.bytes(int(rng.integers(0, 64)))
    if kind == "text":
        m = _msg(rng).decode("utf-8", "replace")
        return m if rng.random() < 0.7 else rng.bytes(int(rng.integers(0, 64))).decode("latin-1")
    if kind == "short":
        return rng.bytes(int(rng.integers(0, 3)))
    raise ValueError(f"unknown message kind {kind!r}")


def mutate(message: bytes | str, rng: np.random.Generator, kind: str | None = None, other: bytes | None = None) -> bytes | str:
    """``message`` damaged by one of :data:`MUTATIONS` (``kind``; random if None)."""
    kind = kind or MUTATIONS[int(rng.integers(len(MUTATIONS)))]
    if isinstance(message, str):
        out = mutate(message.encode("utf-8", "surrogatepass"), rng, kind, other)
        return out.decode("utf-8", "replace") if isinstance(out, bytes) else out
    b = bytearray(message)
    if kind == "bitflip" and b:
        for _ in range(int(rng.integers(1, 9))):
            i = int(rng.integers(len(b)))
            b[i] ^= 1 << int(rng.integers(8))
    elif kind == "truncate" and b:
        del b[int(rng.integers(len(b))) :]
    elif kind == "extend":
        b += rng.bytes(int(rng.integers(1, 64)))
    elif kind == "header_byte" and b:
        b[int(rng.integers(min(len(b), IQ_HEADER_LEN)))] = int(rng.integers(256))
    elif kind == "splice" and b:
        tail = other if other is not None else rng.bytes(32)
        b = bytearray(b[: int(rng.integers(len(b)))] + tail[int(rng.integers(len(tail) + 1)) :])
    elif kind == "cut_one" and b:
        del b[-1]
    return bytes(b)


def handshake(p: KiwiClientProtocol, now: float = 0.0) -> None:
    """Run ``p`` (after ``connection_made``) through a successful auth, dropping events and commands."""
    for m in HANDSHAKE:
        p.receive_message(m, now)
    p.events_received()
    p.data_to_send()


def _expected_samples(m: bytes, flags: int) -> int:
    if flags & SndFlag.MODE_IQ:
        return (len(m) - IQ_HEADER_LEN) // 4
    if flags & SndFlag.COMPRESSED:
        return 2 * (len(m) - SND_HEADER_LEN)
    return (len(m) - SND_HEADER_LEN) // 2


def audit(message: bytes | str, events: list[object]) -> list[str]:
    """Problems with the ``events`` one ``message`` produced (empty when all is well)."""
    problems: list[str] = []
    for ev in events:
        if not isinstance(ev, _EVENT_TYPES):
            problems.append(f"undocumented event type {type(ev).__name__}")
        elif isinstance(ev, ProtocolViolation):
            if ev.reason.startswith("internal error"):
                problems.append(ev.reason)
        elif isinstance(ev, AudioFrame):
            m = message if isinstance(message, bytes) else b""
            want = _expected_samples(m, ev.flags)
            got = ev.samples.shape[0]
            if got != want:
                problems.append(f"audio frame seq {ev.seq} of {got} samples where its {len(m)}-byte message holds {want}")
            if (ev.samples.dtype == np.complex64) != ev.iq or ev.samples.dtype not in (np.float32, np.complex64):
                problems.append(f"audio frame seq {ev.seq} has dtype {ev.samples.dtype} (iq={ev.iq})")
            if (m[3] if len(m) > 3 else -1) != ev.flags:
                problems.append(f"audio frame flags {ev.flags:#x} differ from the message's")
        elif isinstance(ev, SequenceGap):
            if ev.reason is GapReason.LOST and (ev.lost_frames <= 0 or ev.lost_samples != ev.lost_frames * _spf_of(message)):
                problems.append(f"gap {ev} does not add up")
    return problems


def _spf_of(message: bytes | str) -> int:
    return samples_per_frame(message[3]) if isinstance(message, bytes) and len(message) > 3 else -1
