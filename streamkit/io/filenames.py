"""Graph and station names made safe to use as one file name.

A graph's name comes from a graph file, a station from the command line or a stations file; both end
up in file names (``events/{graph}.jsonl``, ``<record>/<station>.wav``). :func:`safe_filename` keeps
such a name inside the directory it is meant for: no path separator, no ``..``, no control character.
"""

from __future__ import annotations

import re

__all__ = ["safe_filename"]

_UNSAFE = re.compile(r"[^A-Za-z0-9._+@=,~-]")
_MAX = 200


def safe_filename(name: str) -> str:
    """``name`` as a single path component that stays where it is put.

    Every character outside ``A-Z a-z 0-9 . _ + @ = , ~ -`` (path separators, ``:``, spaces, control
    characters, anything non-ASCII) becomes ``_``; a leading ``.`` (``..``, hidden files) is prefixed
    with ``_``; an empty name becomes ``_``; the result is at most 200 characters. Names already safe
    (``127.0.0.1-8073-7100lsb``, ``demo``) come back unchanged.
    """
    s = _UNSAFE.sub("_", str(name))[:_MAX]
    if not s:
        return "_"
    if s.startswith("."):
        s = "_" + s[: _MAX - 1]
    return s
