"""The .rcc reader on a bundle built here (Qt's binary layout, format version 2)."""

from __future__ import annotations

import struct
import zlib
from pathlib import Path

import pytest

from streamkit.data.qt_rcc import RccError, read_rcc


def _name(s: str) -> bytes:
    return struct.pack(">HI", len(s), 0) + s.encode("utf-16-be")


def _bundle(files: dict[str, tuple[bytes, bool]]) -> bytes:
    """Root -> directory "d" -> the files (payload, compressed?)."""
    names = b""
    name_at = {}
    for n in ["d", *files]:
        name_at[n] = len(names)
        names += _name(n)
    data = b""
    data_at = {}
    for n, (payload, comp) in files.items():
        blob = struct.pack(">I", len(payload)) + zlib.compress(payload) if comp else payload
        data_at[n] = len(data)
        data += struct.pack(">I", len(blob)) + blob
    node = struct.Struct(">IHII Q")  # 22 bytes: name, flags, (count, first) or (territory/language, data)
    tree = node.pack(0, 2, 1, 1, 0)  # root: one child at index 1
    tree += node.pack(name_at["d"], 2, len(files), 2, 0)
    for n, (_, comp) in files.items():
        tree += node.pack(name_at[n], 1 if comp else 0, 0, data_at[n], 0)
    head = 4 + 4 * 4
    return b"qres" + struct.pack(">IIII", 2, head, head + len(tree), head + len(tree) + len(data)) + tree + data + names


def test_reads_plain_and_zlib_files(tmp_path: Path) -> None:
    f = tmp_path / "a.rcc"
    f.write_bytes(_bundle({"x.ogg": (b"OggS plain", False), "y.wav": (b"RIFF" + bytes(100), True), "z.png": (b"png", False)}))
    assert read_rcc(f) == {"d/x.ogg": b"OggS plain", "d/y.wav": b"RIFF" + bytes(100), "d/z.png": b"png"}
    assert set(read_rcc(f, want=(".ogg", ".wav"))) == {"d/x.ogg", "d/y.wav"}


def test_malformed_bundles_are_clear_errors(tmp_path: Path) -> None:
    f = tmp_path / "b.rcc"
    f.write_bytes(b"RIFF0000")
    with pytest.raises(RccError, match="not a Qt resource bundle"):
        read_rcc(f)
    good = _bundle({"x.ogg": (b"OggS", False)})
    f.write_bytes(good[:40])
    with pytest.raises(RccError):
        read_rcc(f)
