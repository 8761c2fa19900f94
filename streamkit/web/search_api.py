"""The live view's search box: ``GET /api/search`` and ``GET /api/clip`` over an archive index
(:mod:`streamkit.index`), e.g. the one ``monitor --record DIR --index IDX`` fills as it records.

The request's parameters are checked here (:func:`search_params`, :func:`clip_params`: a
``ValueError`` with the reason, answered with HTTP 400); the work itself (:func:`run_search`,
:func:`clip_wav`) blocks on SQLite and the files, so the server runs it in an executor, off its
event loop. A clip is served only from a file the index lists, within that file, and at most
:data:`MAX_CLIP_S` long: the page cannot name any other file.
"""

from __future__ import annotations

import io
from collections.abc import Mapping
from fractions import Fraction
from typing import Any

__all__ = ["MAX_CLIP_S", "MAX_QUERY", "MAX_TOP", "clip_params", "clip_wav", "run_search", "search_params"]

MAX_QUERY = 300  #: characters in a query
MAX_TOP = 100  #: hits per query
MAX_CLIP_S = 120.0  #: seconds per clip


def _int(q: Mapping[str, str], key: str, default: int | None = None) -> int:
    v = q.get(key)
    if v is None or v == "":
        if default is None:
            raise ValueError(f"{key} is missing")
        return default
    try:
        return int(v)
    except ValueError:
        raise ValueError(f"{key} must be an integer, got {v[:40]!r}") from None


def search_params(q: Mapping[str, str]) -> dict[str, Any]:
    """``q`` (1 to :data:`MAX_QUERY` characters), ``top`` (1 to :data:`MAX_TOP`, default 10),
    ``station``, ``since``/``until`` (as ``streamkit search``), ``kinds``."""
    from streamkit.index.search import parse_since

    text = (q.get("q") or "").strip()
    if not text:
        raise ValueError("q is missing: give what to find, e.g. ?q=alarm+bells")
    if len(text) > MAX_QUERY:
        raise ValueError(f"q is longer than {MAX_QUERY} characters")
    top = _int(q, "top", 10)
    if not 1 <= top <= MAX_TOP:
        raise ValueError(f"top must be 1 to {MAX_TOP}, got {top}")
    kinds = q.get("kinds") or "all"
    if kinds not in ("all", "windows", "segments"):
        raise ValueError(f"kinds must be all, windows or segments, got {kinds[:40]!r}")
    out: dict[str, Any] = {"query": text, "top": top, "station": (q.get("station") or "").strip() or None, "kinds": kinds}
    for key in ("since", "until"):
        out[key] = parse_since(q[key]) if q.get(key) else None
    return out


def run_search(index: str, p: Mapping[str, Any]) -> dict[str, Any]:
    """The result of ``streamkit search --json`` for the checked parameters ``p``."""
    from streamkit.index.search import search

    res = search(p["query"], index, station=p["station"], since=p["since"], until=p["until"], top=p["top"], kinds=p["kinds"])
    return res.to_dict()


def clip_params(q: Mapping[str, str]) -> tuple[str, int, int]:
    """``(file, start, end)``: a file as a hit names it and a sample range, ``0 <= start < end``."""
    file = q.get("file") or ""
    if not file:
        raise ValueError("file is missing (a hit's file)")
    start, end = _int(q, "start"), _int(q, "end")
    if not 0 <= start < end:
        raise ValueError(f"need 0 <= start < end, got {start}, {end}")
    return file, start, end


def clip_wav(index: str, file: str, start: int, end: int) -> bytes:
    """Samples ``[start, end)`` of an indexed file as a 16-bit WAV (its rate, mono mix).

    Raises:
        LookupError: the index lists no such file; ValueError: a range outside it or too long.
    """
    import numpy as np
    import soundfile as sf

    from streamkit.index.growing import read_clip
    from streamkit.index.store import IndexStore

    store = IndexStore(index)
    try:
        row = store.file_row(file)
    finally:
        store.close()
    if row is None:
        raise LookupError("the index lists no such file")
    rate = float(Fraction(row["rate"]))
    if end > int(row["items"]):
        raise ValueError(f"end {end} is past the file's {row['items']} samples")
    if (end - start) / rate > MAX_CLIP_S:
        raise ValueError(f"a clip is at most {MAX_CLIP_S:g} s")
    x, file_rate = read_clip(file, start, end)
    mono = x.mean(axis=1) if x.ndim == 2 and x.shape[1] > 1 else x.reshape(-1)
    buf = io.BytesIO()
    sf.write(buf, np.clip(mono, -1.0, 1.0), file_rate, format="WAV", subtype="PCM_16")
    return buf.getvalue()
