"""Reading a WAV file that is still being written (``monitor --record`` while it runs).

``io.wav_sink`` writes the samples through libsndfile as they come, but the WAV header's data size
is only filled in when the file is closed (it reads 0 until then, and a reader has to guess the
length from the file's size). :func:`data_offset` finds the ``data`` chunk by walking the RIFF
chunks; :func:`read_frames` reads whole frames of 16-bit PCM from there, never past ``limit`` (the
items the writer says it has written) nor past the complete frames on disk. :func:`read_clip` reads
a clip through soundfile and falls back to this reader where the header lists fewer frames.
"""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np

__all__ = ["data_offset", "read_clip", "read_frames"]


def data_offset(path: str | Path) -> int:
    """Byte offset of the samples of a RIFF/WAVE file (``ValueError`` when it has no ``data`` chunk yet)."""
    with open(path, "rb") as f:
        head = f.read(12)
        if len(head) < 12 or head[:4] != b"RIFF" or head[8:12] != b"WAVE":
            raise ValueError(f"{path}: not a RIFF/WAVE file")
        pos = 12
        while True:
            f.seek(pos)
            ch = f.read(8)
            if len(ch) < 8:
                raise ValueError(f"{path}: no data chunk (yet)")
            cid, size = ch[:4], struct.unpack("<I", ch[4:])[0]
            if cid == b"data":
                return pos + 8
            pos += 8 + size + (size & 1)


def read_frames(path: str | Path, start: int, end: int, channels: int, *, limit: int | None = None) -> np.ndarray:
    """Frames ``[start, end)`` of a 16-bit PCM WAV file being written, as float32 ``(n, channels)``
    (the same values soundfile gives); cut to ``limit`` frames and to the complete frames on disk."""
    off = data_offset(path)
    frame = 2 * channels
    on_disk = max(0, (Path(path).stat().st_size - off) // frame)
    stop = min(end, on_disk if limit is None else min(on_disk, limit))
    if stop <= start:
        return np.zeros((0, channels), np.float32)
    with open(path, "rb") as f:
        f.seek(off + start * frame)
        raw = f.read((stop - start) * frame)
    x = np.frombuffer(raw[: len(raw) // frame * frame], dtype="<i2").reshape(-1, channels)
    return (x.astype(np.float32) / 32768.0).astype(np.float32)


def read_clip(path: str | Path, start: int, end: int) -> tuple[np.ndarray, int]:
    """``(frames [start, end) as float32 (n, channels), the file's rate)``: through soundfile, or, for a
    16-bit WAV still being written (its header lists fewer frames), from the frames on disk."""
    import soundfile as sf

    with sf.SoundFile(str(path)) as f:
        rate, channels, frames, subtype = f.samplerate, f.channels, f.frames, f.subtype
        if end <= frames or subtype != "PCM_16" or f.format != "WAV":
            f.seek(min(start, frames))
            return f.read(max(0, min(end, frames) - start), dtype="float32", always_2d=True), rate
    return read_frames(path, start, end, channels), rate
