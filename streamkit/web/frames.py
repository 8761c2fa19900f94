"""Binary WebSocket frames of the live view (sans-I/O: bytes in, bytes out; no sockets here).

All numbers are little-endian. Text frames carry JSON (hello, events, status, end); binary frames
carry waterfall rows and audio:

**Rows** (type 1)::

    u8 type=1, u8 version=1, u16 station, u16 n_rows, u16 n_bins
    n_rows x (f64 t_s, f32 lost_s, u8 flags, u8 cause, n_bins x u8 level)

``t_s`` is the UTC time of the row's last item (seconds, NaN before the first time anchor),
``flags`` bit 0 = items were lost just before this row (``lost_s`` seconds of them, ``cause`` an
index into :data:`GAP_CAUSES`).

**Batch** (type 3): the binary frames of one server tick in one WebSocket message, so that a
tick costs one message whatever the number of stations::

    u8 type=3, u8 version=1, u16 count, count x (u32 length, length bytes: a rows or audio frame)

**Audio** (type 2)::

    u8 type=2, u8 version=1, u16 station, u32 n, f64 rate, f64 start, f32 lost_s, u8 flags, 3 x u8 pad
    n x i16 samples

``start`` is the absolute item index of the first sample; ``lost_s`` seconds of audio were lost
just before it (bit 0 of ``flags``): a player plays that much silence there, so that what follows
stays in time.
"""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass

import numpy as np

__all__ = ["GAP_CAUSES", "AudioFrame", "FrameError", "Row", "decode", "decode_all", "encode_audio", "encode_batch", "encode_rows", "split_batch"]

VERSION = 1
ROWS = 1
AUDIO = 2
BATCH = 3
#: gap causes by index (``core.tags.GapCause`` values, then "other" for anything unknown)
GAP_CAUSES = ("none", "xrun", "seq_gap", "reconnect", "overload", "block_error", "restart", "other")

_ROWS_HEAD = struct.Struct("<BBHHH")
_ROW = struct.Struct("<dfBB")
_AUDIO_HEAD = struct.Struct("<BBHIddfB3x")
_BATCH_HEAD = struct.Struct("<BBH")
_LEN = struct.Struct("<I")
MAX_STATIONS = 65535


class FrameError(ValueError):
    """A frame that cannot be decoded (short, unknown type or version, bad sizes)."""


@dataclass(frozen=True)
class Row:
    t_s: float
    lost_s: float
    gap: bool
    cause: str
    levels: bytes


@dataclass(frozen=True)
class AudioFrame:
    station: int
    rate: float
    start: int
    lost_s: float
    gap: bool
    samples: np.ndarray  # int16


def cause_index(cause: str | None) -> int:
    if not cause:
        return 0
    try:
        return GAP_CAUSES.index(str(cause))
    except ValueError:
        return GAP_CAUSES.index("other")


def encode_rows(station: int, rows: list[tuple[float, float, bool, str | None, bytes]], n_bins: int) -> bytes:
    """One rows frame: ``rows`` as ``(t_s, lost_s, gap, cause, levels)`` with ``len(levels) == n_bins``."""
    if not 0 <= station <= MAX_STATIONS:
        raise ValueError(f"station index {station} out of range")
    parts = [_ROWS_HEAD.pack(ROWS, VERSION, station, len(rows), n_bins)]
    for t_s, lost_s, gap, cause, levels in rows:
        if len(levels) != n_bins:
            raise ValueError(f"row of {len(levels)} bins, frame says {n_bins}")
        parts.append(_ROW.pack(float(t_s) if t_s is not None else math.nan, float(lost_s), 1 if gap else 0, cause_index(cause)))
        parts.append(bytes(levels))
    return b"".join(parts)


def encode_audio(station: int, rate: float, start: int, samples: np.ndarray, *, lost_s: float = 0.0, gap: bool = False) -> bytes:
    """One audio frame from float samples in [-1, 1] (clipped, rounded to int16)."""
    x = np.asarray(samples, dtype=np.float32).reshape(-1)
    pcm = np.clip(np.rint(x * 32767.0), -32768, 32767).astype("<i2")
    return _AUDIO_HEAD.pack(AUDIO, VERSION, station, pcm.size, float(rate), float(start), float(lost_s), 1 if gap else 0) + pcm.tobytes()


def encode_batch(parts: list[bytes]) -> bytes:
    """One batch frame holding ``parts`` (rows and audio frames), in order."""
    if len(parts) > 65535:
        raise ValueError(f"{len(parts)} frames in one batch (at most 65535)")
    out = [_BATCH_HEAD.pack(BATCH, VERSION, len(parts))]
    for p in parts:
        out += [_LEN.pack(len(p)), p]
    return b"".join(out)


def split_batch(frame: bytes) -> list[bytes]:
    """The frames inside a batch frame, or ``[frame]`` for a single frame."""
    if len(frame) < 2 or frame[0] != BATCH:
        return [frame]
    if frame[1] != VERSION:
        raise FrameError(f"frame version {frame[1]}, this decoder reads {VERSION}")
    if len(frame) < _BATCH_HEAD.size:
        raise FrameError("short batch header")
    n = _BATCH_HEAD.unpack_from(frame)[2]
    off, out = _BATCH_HEAD.size, []
    for _ in range(n):
        if off + _LEN.size > len(frame):
            raise FrameError("batch ends inside a length")
        (size,) = _LEN.unpack_from(frame, off)
        off += _LEN.size
        if off + size > len(frame):
            raise FrameError(f"batch part of {size} bytes runs past the end")
        out.append(bytes(frame[off : off + size]))
        off += size
    if off != len(frame):
        raise FrameError(f"{len(frame) - off} bytes after the last batch part")
    return out


def decode_all(frame: bytes) -> list[tuple[int, list[Row]] | AudioFrame]:
    """Every rows/audio frame in ``frame`` (a batch, or a single frame), in order."""
    return [decode(p) for p in split_batch(frame)]


def decode(frame: bytes) -> tuple[int, list[Row]] | AudioFrame:
    """Decode one binary frame: ``(station, rows)`` for a rows frame, an :class:`AudioFrame` for audio."""
    if len(frame) < 2:
        raise FrameError(f"frame of {len(frame)} bytes")
    kind, ver = frame[0], frame[1]
    if ver != VERSION:
        raise FrameError(f"frame version {ver}, this decoder reads {VERSION}")
    if kind == ROWS:
        if len(frame) < _ROWS_HEAD.size:
            raise FrameError("short rows header")
        _, _, station, n, bins = _ROWS_HEAD.unpack_from(frame)
        size = _ROW.size + bins
        if len(frame) != _ROWS_HEAD.size + n * size:
            raise FrameError(f"rows frame of {len(frame)} bytes for {n} rows of {bins} bins")
        rows = []
        for i in range(n):
            off = _ROWS_HEAD.size + i * size
            t_s, lost_s, flags, cause = _ROW.unpack_from(frame, off)
            c = GAP_CAUSES[cause] if cause < len(GAP_CAUSES) else "other"
            rows.append(Row(t_s, lost_s, bool(flags & 1), c, bytes(frame[off + _ROW.size : off + size])))
        return station, rows
    if kind == AUDIO:
        if len(frame) < _AUDIO_HEAD.size:
            raise FrameError("short audio header")
        _, _, station, n, rate, start, lost_s, flags = _AUDIO_HEAD.unpack_from(frame)
        if len(frame) != _AUDIO_HEAD.size + 2 * n:
            raise FrameError(f"audio frame of {len(frame)} bytes for {n} samples")
        pcm = np.frombuffer(frame, dtype="<i2", count=n, offset=_AUDIO_HEAD.size)
        return AudioFrame(station, rate, int(start), lost_s, bool(flags & 1), pcm)
    raise FrameError(f"unknown frame type {kind}")
