"""``streamkit search``: rank the entries of an archive index for a free-text query.

Hybrid score of an entry = audio score + text score:

* audio: the dot product of its vector with the query's (:mod:`streamkit.index.embed`), 0 when
  negative; for the SED-posterior baseline, the mean posterior of the classes the query names, in
  [0, 1], 0 for every entry when the query names no class; for the contrastive model, the cosine
  of the two unit vectors.
* text: the share of the query's content words (:func:`~streamkit.index.query.content_words`)
  found in the entry's ASR transcript, in [0, 1]; 0 without a transcript.

Filters (station, time) are applied in SQL before scoring, and the search is exact. Entries that
overlap a better hit of the same file by more than half the shorter one are left out, so ten hits
are ten places, not one event seen by its overlapping windows.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta, timezone
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np

from streamkit.index.embed import query_encoder
from streamkit.index.query import content_words, words
from streamkit.index.store import IndexStore

__all__ = ["Hit", "export_hits", "parse_since", "search", "utc_iso"]

_REL = re.compile(r"^(\d+(?:\.\d+)?)\s*([smhdw])$")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def parse_since(text: str, now: datetime | None = None) -> int:
    """UTC nanoseconds of ``text``: an ISO 8601 time (UTC unless it has an offset: ``2025-03-01T10:00``,
    ``2025-03-01 10:00:00+01:00``, ``2025-03-01``) or a time ago (``90s``, ``30m``, ``12h``, ``2d``, ``1w``).
    ``ValueError`` with the accepted forms otherwise."""
    s = text.strip()
    m = _REL.match(s.lower())
    if m:
        now = now or datetime.now(timezone.utc)
        return int((now - timedelta(seconds=float(m.group(1)) * _UNITS[m.group(2)])).timestamp() * 1e9)
    try:
        t = datetime.fromisoformat(s[:-1] + "+00:00" if s.endswith(("Z", "z")) else s)
    except ValueError:
        raise ValueError(f"bad time {text!r}: give an ISO 8601 UTC time (2025-03-01T10:00) or a time ago (30m, 12h, 2d)") from None
    if t.tzinfo is None:
        t = t.replace(tzinfo=timezone.utc)
    return int(t.timestamp()) * 1_000_000_000 + t.microsecond * 1000


def utc_iso(ns: int | None) -> str | None:
    """``2025-03-01T10:00:05.250Z`` (ms), or None."""
    if ns is None:
        return None
    t = datetime.fromtimestamp(ns // 1_000_000_000, timezone.utc).replace(microsecond=(ns % 1_000_000_000) // 1000)
    return t.strftime("%Y-%m-%dT%H:%M:%S.") + f"{t.microsecond // 1000:03d}Z"


@dataclass
class Hit:
    """One ranked entry: a window (``kind="window"``) or an event segment (``kind`` = the event's kind)."""

    rank: int
    score: float
    audio_score: float
    text_score: float
    kind: str
    label: str | None
    station: str | None
    freq_khz: float | None
    mode: str | None
    utc_start: str | None
    utc_end: str | None
    file: str
    start_s: float
    end_s: float
    start_sample: int
    end_sample: int
    rate: str
    transcript: str
    events: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class SearchResult:
    """What :func:`search` returns: the hits and how the query was understood."""

    query: str
    hits: list[Hit]
    classes: list[str]
    words: list[str]
    candidates: int
    seconds: float
    embedder: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"query": self.query, "embedder": self.embedder, "classes": self.classes, "words": self.words, "candidates": self.candidates,
                "seconds": round(self.seconds, 4), "hits": [h.to_dict() for h in self.hits]}  # fmt: skip


def _overlap(a: tuple[int, int], b: tuple[int, int]) -> bool:
    inter = min(a[1], b[1]) - max(a[0], b[0])
    return inter > 0.5 * max(1, min(a[1] - a[0], b[1] - b[0]))


def _descending(score: np.ndarray, first: int) -> Iterator[int]:
    """The indices of ``score`` from the highest, ties in index order (a stable argsort of ``-score``), sorted only as far
    as they are consumed: the best ``first`` (and their ties) at first, four times more each time those run out."""
    n = int(score.size)
    k, done = min(n, first), 0
    while done < n:
        if k >= n:
            order = np.argsort(-score, kind="stable")
        else:  # everything >= the k-th largest, stably sorted: a prefix of the full order
            cand = np.flatnonzero(score >= np.partition(score, n - k)[n - k])
            order = cand[np.argsort(-score[cand], kind="stable")]
        yield from order[done:].tolist()
        done = int(order.size)
        k *= 4


def search(query: str, index: str | os.PathLike[str], *, station: str | None = None, since: int | str | None = None,
           until: int | str | None = None, top: int = 10, kinds: str = "all") -> SearchResult:  # fmt: skip
    """The ``top`` best entries of the index at ``index`` for ``query``.

    ``station``: only stations whose name contains it; ``since``/``until``: UTC ns or a time for
    :func:`parse_since` (entries without UTC time are then left out); ``kinds``: ``all``,
    ``windows`` or ``segments``. Hits score 0 are never returned.

    Raises:
        ArchiveIndexError: a missing or corrupt index; ValueError: a bad time or ``top``.
    """
    if top < 1:
        raise ValueError(f"top must be >= 1, got {top}")
    if kinds not in ("all", "windows", "segments"):
        raise ValueError(f"kinds must be all, windows or segments, got {kinds!r}")
    t0 = parse_since(since) if isinstance(since, str) else since
    t1 = parse_since(until) if isinstance(until, str) else until
    started = time.perf_counter()
    store = IndexStore(index)
    try:
        enc = query_encoder(store.meta)
        qv, classes = enc.encode(query)
        terms = content_words(query)
        where, args = [], []
        if station:
            where.append("instr(station, ?) > 0")
            args.append(station)
        if t0 is not None:
            where.append("utc_end_ns > ?")
            args.append(t0)
        if t1 is not None:
            where.append("utc_start_ns < ?")
            args.append(t1)
        if kinds != "all":
            where.append("kind = 'window'" if kinds == "windows" else "kind != 'window'")
        vecs = store.vectors()
        n_vec = vecs.shape[0]
        keep = None
        if where:  # the filters select rows in SQL first; when they leave few, only those vectors are scored
            keep = np.fromiter((r[0] for r in store.con.execute("SELECT vec_row FROM entries WHERE " + " AND ".join(where), args)), np.int64)
            keep = keep[keep < n_vec]
            n = int(keep.size)
        else:
            n = int(store.con.execute("SELECT count(*) FROM entries").fetchone()[0])
        score_a = np.zeros(n_vec, np.float32)
        if qv is not None and n_vec:
            if keep is None or 4 * keep.size > n_vec:  # a product over all is faster than gathering many rows
                score_a = np.maximum(np.asarray(vecs @ qv, np.float32), 0.0)
            elif keep.size:
                rows = np.sort(keep)
                score_a[rows] = np.maximum(np.asarray(vecs[rows] @ qv, np.float32), 0.0)
        score_t = np.zeros(n_vec, np.float32)
        for row, text in store.text_matches(terms):
            have = set(words(text))
            score_t[row] = sum(1 for t in terms if t in have) / len(terms)
        score = score_a + score_t
        if keep is not None:
            mask = np.zeros(n_vec, bool)
            mask[keep] = True
            score = np.where(mask, score, 0.0)
        order = _descending(score, max(256, 32 * top))
        hits: list[Hit] = []
        taken: dict[int, list[tuple[int, int]]] = {}
        files: dict[int, Any] = {}
        for i in order:
            if score[i] <= 0 or len(hits) >= top:
                break
            e = store.con.execute("SELECT * FROM entries WHERE vec_row = ?", (int(i),)).fetchone()
            if e is None:  # the vector of a file indexed again since
                continue
            span = (int(e["start"]), int(e["end"]))
            if any(_overlap(span, s) for s in taken.get(e["file_id"], [])):
                continue
            taken.setdefault(e["file_id"], []).append(span)
            f = files.get(e["file_id"]) or store.con.execute("SELECT * FROM files WHERE id = ?", (e["file_id"],)).fetchone()
            files[e["file_id"]] = f
            rate = Fraction(f["rate"])
            hits.append(Hit(rank=len(hits) + 1, score=round(float(score[i]), 4), audio_score=round(float(score_a[i]), 4),
                            text_score=round(float(score_t[i]), 4), kind=e["kind"], label=e["label"], station=f["station"],
                            freq_khz=f["freq_khz"], mode=f["mode"], utc_start=utc_iso(e["utc_start_ns"]), utc_end=utc_iso(e["utc_end_ns"]),
                            file=f["path"], start_s=round(span[0] / float(rate), 3), end_s=round(span[1] / float(rate), 3),
                            start_sample=span[0], end_sample=span[1], rate=f["rate"], transcript=e["transcript"],
                            events=json.loads(e["events"])))  # fmt: skip
    finally:
        store.close()
    return SearchResult(query, hits, classes, terms, n, time.perf_counter() - started, enc.name)


def export_hits(hits: list[Hit], out_dir: str | os.PathLike[str]) -> list[Path]:
    """Write each hit's audio (its file's samples, at the file's rate and channels) as ``NN_<station>_<utc>.wav`` under ``out_dir``."""
    import soundfile as sf

    from streamkit.io.filenames import safe_filename
    from streamkit.io.outputs import write_audio

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for h in hits:
        with sf.SoundFile(h.file) as f:
            f.seek(h.start_sample)
            data = f.read(h.end_sample - h.start_sample, dtype="float32", always_2d=True)
            rate = f.samplerate
        when = (h.utc_start or f"{h.start_s:.3f}s").replace(":", "")
        name = safe_filename(f"{h.rank:02d}_{h.station or Path(h.file).stem}_{when}") + ".wav"
        written.append(write_audio(out / name, data, rate, subtype="FLOAT"))
    return written
