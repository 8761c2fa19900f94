"""What a RIFF/RF64 WAVE header declares, against what the file holds.

libsndfile opens a WAV file whose ``data`` chunk runs past the end of the file (a copy cut short, a
recorder killed before it finished) without an error: it quietly shortens the length to what is
there. :func:`wav_truncation` reads the header itself so that :class:`~streamkit.io.file_source.FileSource`
can say how much is missing.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass

__all__ = ["WavTruncation", "wav_truncation"]

#: data sizes that recorders writing to a pipe put in the header for "unknown length"
_PLACEHOLDER = 0x7FFFF000


@dataclass(frozen=True, slots=True)
class WavTruncation:
    """A WAVE file shorter than its header says (frames of ``block_align`` bytes)."""

    declared_frames: int
    present_frames: int

    @property
    def missing_frames(self) -> int:
        return self.declared_frames - self.present_frames


def wav_truncation(path: str | os.PathLike[str], max_chunks: int = 64) -> WavTruncation | None:
    """The truncation of a RIFF/RIFX/RF64 WAVE file, or None (complete, another format, a placeholder
    length, or a header this reader does not follow). Never raises for a bad file."""
    try:
        size = os.path.getsize(path)
        with open(path, "rb") as f:
            head = f.read(12)
            if len(head) < 12 or head[8:12] != b"WAVE" or head[:4] not in (b"RIFF", b"RIFX", b"RF64"):
                return None
            e = ">" if head[:4] == b"RIFX" else "<"
            pos = 12
            block_align = 0
            ds64_data: int | None = None
            for _ in range(max_chunks):
                f.seek(pos)
                hdr = f.read(8)
                if len(hdr) < 8:
                    return None
                cid, n = hdr[:4], struct.unpack(e + "I", hdr[4:])[0]
                if cid == b"ds64":
                    body = f.read(16)
                    if len(body) == 16:
                        ds64_data = struct.unpack("<Q", body[8:16])[0]
                elif cid == b"fmt ":
                    body = f.read(16)
                    if len(body) < 16:
                        return None
                    block_align = struct.unpack(e + "H", body[12:14])[0]
                elif cid == b"data":
                    if n == 0xFFFFFFFF and ds64_data is not None:
                        n = ds64_data
                    elif n >= _PLACEHOLDER:
                        return None
                    if block_align <= 0:
                        return None
                    present = max(0, size - (pos + 8))
                    if n <= present:
                        return None
                    return WavTruncation(n // block_align, present // block_align)
                pos += 8 + n + (n & 1)
                if pos >= size:
                    return None
    except (OSError, struct.error):
        return None
    return None
