"""A small reader of Qt binary resource bundles (``.rcc``, format versions 1-3).

GCompris ships its activity sounds inside ``.rcc`` files; :func:`read_rcc` lists and reads them
so that :mod:`streamkit.data.real_corpus` can use them without Qt.

Layout (Qt's ``rcc`` tool, big-endian): header ``b"qres"``, version (u32), offsets of the tree,
the data and the names (u32 each), and from version 3 a flags word (u32). Tree nodes are 14 bytes
(version 1) or 22 bytes (version ≥ 2, a u64 modification time appended): name offset (u32),
flags (u16), then for a directory the child count and the index of its first child (u32 each),
for a file the territory and language (u16 each) and its data offset (u32). A name is its length
in UTF-16 units (u16), a hash (u32) and the UTF-16BE text; a datum is its length (u32) and the
bytes, which for a compressed file (flag 1) start with the uncompressed length (u32) and hold a
zlib stream. Zstandard-compressed files (flag 4, Qt 6) are reported as unsupported.
"""

from __future__ import annotations

import os
import struct
import zlib
from pathlib import Path

__all__ = ["RccError", "read_rcc"]

_COMPRESSED, _DIRECTORY, _ZSTD = 0x01, 0x02, 0x04


class RccError(ValueError):
    """Not a readable ``.rcc`` bundle."""


def _u16(b: bytes, at: int) -> int:
    return int(struct.unpack_from(">H", b, at)[0])


def _u32(b: bytes, at: int) -> int:
    return int(struct.unpack_from(">I", b, at)[0])


def read_rcc(path: str | os.PathLike[str], *, want: tuple[str, ...] = ()) -> dict[str, bytes]:
    """``{"dir/name.ext": bytes}`` of the files in the bundle; with ``want`` (lower-case name
    suffixes, e.g. ``(".ogg", ".wav")``), only the files whose name ends with one of them.

    Raises :class:`RccError` on a malformed bundle (bad magic, offsets out of range, bad zlib).
    """
    b = Path(path).read_bytes()
    try:
        if b[:4] != b"qres":
            raise RccError(f"{path}: not a Qt resource bundle (magic {b[:4]!r})")
        version, tree, data, names = (_u32(b, 4 + 4 * i) for i in range(4))
        if version not in (1, 2, 3):
            raise RccError(f"{path}: unsupported rcc version {version}")
        node = 14 if version == 1 else 22

        def name(i: int) -> str:
            at = names + _u32(b, tree + i * node)
            n = _u16(b, at)
            return b[at + 6 : at + 6 + 2 * n].decode("utf-16-be")

        out: dict[str, bytes] = {}
        stack = [(0, "")]
        seen = 0
        while stack:
            i, prefix = stack.pop()
            seen += 1
            if seen > len(b):  # a cycle in a corrupt tree
                raise RccError(f"{path}: resource tree does not terminate")
            at = tree + i * node
            flags = _u16(b, at + 4)
            if flags & _DIRECTORY:
                count, first = _u32(b, at + 6), _u32(b, at + 10)
                base = "" if i == 0 else prefix + name(i) + "/"
                stack.extend((first + k, base) for k in range(count))
                continue
            full = prefix + name(i)
            if want and not full.lower().endswith(want):
                continue
            if flags & _ZSTD:
                raise RccError(f"{path}: {full} is zstd-compressed (Qt 6), not supported")
            d = data + _u32(b, at + 10)
            size = _u32(b, d)
            blob = b[d + 4 : d + 4 + size]
            if len(blob) != size:
                raise RccError(f"{path}: {full} runs past the end of the file")
            out[full] = zlib.decompress(blob[4:]) if flags & _COMPRESSED else blob
        return out
    except (struct.error, zlib.error, UnicodeDecodeError, IndexError) as e:
        raise RccError(f"{path}: malformed rcc bundle ({e})") from None
