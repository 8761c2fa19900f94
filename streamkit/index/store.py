"""The archive index on disk: a directory holding ``index.sqlite`` (metadata, transcripts) and
``vectors.f32`` (the embeddings).

* ``index.sqlite`` (stdlib :mod:`sqlite3`): ``meta`` (format, the embedder's name, dimension and
  classes, window and hop), ``files`` (path, size, mtime, station, frequency, mode, exact rate,
  items, UTC span, how it was indexed), ``entries`` (one per window or event segment: file, kind,
  sample range, UTC range, station, the events overlapping it as JSON, its ASR text, its row in
  ``vectors.f32``) and ``transcripts``, an FTS5 table over the entries' ASR text (a plain table
  searched with ``LIKE`` where this Python's SQLite has no FTS5).
* ``vectors.f32``: the vectors, float32, row after row, appended. A file is committed to SQLite
  only after its vectors are on disk; rows past the committed count (a build that died) are cut
  off by the next build.

Why no vector library (faiss, usearch, hnswlib): search is exact, a matrix-vector product in numpy
over the rows that pass the filters (station, time) done in SQL first. For the SED baseline
(10 dimensions) a 24-hour 10-station archive (172,800 windows at a 5 s hop) is 7 MB and one query
takes a few milliseconds; even 512 dimensions stay within tens of milliseconds below a million
windows (docs/search.md has the measurement). An approximate index would add a dependency, make
filtered search approximate too, and could only pay off far beyond that size.
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from streamkit.core.errors import StreamkitError

__all__ = ["FORMAT", "ArchiveIndexError", "IndexStore"]

FORMAT = "streamkit-archive-index/1"
DB = "index.sqlite"
VECTORS = "vectors.f32"

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS files (
    id INTEGER PRIMARY KEY, path TEXT UNIQUE NOT NULL, size INTEGER NOT NULL, mtime_ns INTEGER NOT NULL,
    station TEXT, freq_khz REAL, mode TEXT, rate TEXT NOT NULL, file_rate INTEGER NOT NULL, items INTEGER NOT NULL,
    channels INTEGER NOT NULL, utc_start_ns INTEGER, utc_end_ns INTEGER, events_path TEXT, nonfinite INTEGER NOT NULL DEFAULT 0,
    notes TEXT);
CREATE TABLE IF NOT EXISTS entries (
    id INTEGER PRIMARY KEY, file_id INTEGER NOT NULL REFERENCES files(id), kind TEXT NOT NULL, label TEXT,
    start INTEGER NOT NULL, end INTEGER NOT NULL, utc_start_ns INTEGER, utc_end_ns INTEGER, station TEXT,
    events TEXT NOT NULL, transcript TEXT NOT NULL, vec_row INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS entries_station_time ON entries (station, utc_start_ns);
CREATE INDEX IF NOT EXISTS entries_file ON entries (file_id);
CREATE UNIQUE INDEX IF NOT EXISTS entries_vec_row ON entries (vec_row);
-- covering the search filters: a time or station filter reads these narrow indexes, not the wide rows
CREATE INDEX IF NOT EXISTS entries_end_row ON entries (utc_end_ns, vec_row);
CREATE INDEX IF NOT EXISTS entries_station_row ON entries (station, utc_end_ns, utc_start_ns, kind, vec_row);
"""


class ArchiveIndexError(StreamkitError):
    """A missing, corrupt or foreign index (or one built by another embedder)."""


def has_fts5(con: sqlite3.Connection) -> bool:
    try:
        con.execute("CREATE VIRTUAL TABLE IF NOT EXISTS temp._fts5_probe USING fts5(x)")
        con.execute("DROP TABLE temp._fts5_probe")
        return True
    except sqlite3.OperationalError:
        return False


class IndexStore:
    """An index directory, opened for reading (``create=False``) or building (``create=True``).

    Raises:
        ArchiveIndexError: no index there (reading), not an index, a corrupt database, or vectors missing.
    """

    def __init__(self, root: str | os.PathLike[str], *, create: bool = False) -> None:
        self.root = Path(root)
        db = self.root / DB
        if not create and not db.is_file():
            raise ArchiveIndexError(f"{self.root}: no archive index here (build one with `streamkit index build DIR --index {self.root}`)")
        if create:
            self.root.mkdir(parents=True, exist_ok=True)
        try:
            self.con = sqlite3.connect(str(db))
            self.con.row_factory = sqlite3.Row
            if create:
                self.con.executescript(SCHEMA)
            self.meta = {r["key"]: json.loads(r["value"]) for r in self.con.execute("SELECT key, value FROM meta")}
        except (sqlite3.DatabaseError, json.JSONDecodeError) as exc:
            raise ArchiveIndexError(f"{db}: not a readable archive index ({exc})") from None
        if self.meta and self.meta.get("format") != FORMAT:
            raise ArchiveIndexError(f"{db}: format {self.meta.get('format')!r}, expected {FORMAT!r}")
        if not create and not self.meta:
            raise ArchiveIndexError(f"{db}: an empty or unfinished archive index (no meta)")
        if create and "fts" not in self.meta:
            self.set_meta(format=FORMAT, fts=has_fts5(self.con), n_vectors=0)
        if create:
            if self.meta["fts"]:
                self.con.execute("CREATE VIRTUAL TABLE IF NOT EXISTS transcripts USING fts5(text)")
            else:
                self.con.execute("CREATE TABLE IF NOT EXISTS transcripts (rowid INTEGER PRIMARY KEY, text TEXT)")
            self.con.commit()

    # -- meta -----------------------------------------------------------------------------------
    def set_meta(self, **kv: Any) -> None:
        for k, v in kv.items():
            self.con.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", (k, json.dumps(v)))
            self.meta[k] = v
        self.con.commit()

    def check_embedder(self, desc: dict[str, Any], window_s: float, hop_s: float) -> None:
        """Record the embedder of a new index, or refuse one that differs from the index's."""
        have = self.meta.get("embedder")
        if have is None:
            self.set_meta(embedder=desc, window_s=window_s, hop_s=hop_s)
            return
        if have != desc:
            raise ArchiveIndexError(f"{self.root}: built with embedder {have.get('name')!r} ({have.get('dim')} dims), not "
                              f"{desc.get('name')!r} ({desc.get('dim')} dims): build a new index")  # fmt: skip
        if (self.meta.get("window_s"), self.meta.get("hop_s")) != (window_s, hop_s):
            raise ArchiveIndexError(f"{self.root}: built with {self.meta.get('window_s')} s windows every {self.meta.get('hop_s')} s, "
                              f"not {window_s} / {hop_s}: build a new index")  # fmt: skip

    @property
    def dim(self) -> int:
        return int((self.meta.get("embedder") or {}).get("dim") or 0)

    # -- vectors ----------------------------------------------------------------------------------
    @property
    def vectors_path(self) -> Path:
        return self.root / VECTORS

    def vectors(self) -> np.ndarray:
        """The committed vectors, ``(n, dim)`` float32 (memory-mapped)."""
        n, d = int(self.meta.get("n_vectors", 0)), self.dim
        if n == 0:
            return np.zeros((0, d), np.float32)
        p = self.vectors_path
        if not p.is_file() or p.stat().st_size < n * d * 4:
            raise ArchiveIndexError(f"{p}: missing or shorter than the {n} vectors the index lists (corrupt index: build it again)")
        return np.memmap(p, dtype=np.float32, mode="r", shape=(n, d))

    def append_vectors(self, v: np.ndarray) -> int:
        """Write ``v`` after the committed rows (cutting off uncommitted ones); returns the first row. Durable on return."""
        n = int(self.meta.get("n_vectors", 0))
        v = np.ascontiguousarray(v, np.float32)
        with open(self.vectors_path, "a+b") as f:
            f.truncate(n * self.dim * 4)
            f.seek(n * self.dim * 4)
            f.write(v.tobytes())
            f.flush()
            os.fsync(f.fileno())
        return n

    # -- files and entries ------------------------------------------------------------------------
    def file_row(self, path: str) -> sqlite3.Row | None:
        return self.con.execute("SELECT * FROM files WHERE path = ?", (path,)).fetchone()  # type: ignore[no-any-return]

    def remove_file(self, file_id: int) -> None:
        """Drop a file's entries (its vectors stay in ``vectors.f32``, unreferenced)."""
        ids = [r[0] for r in self.con.execute("SELECT id FROM entries WHERE file_id = ?", (file_id,))]
        self.con.executemany("DELETE FROM transcripts WHERE rowid = ?", [(i,) for i in ids])
        self.con.execute("DELETE FROM entries WHERE file_id = ?", (file_id,))
        self.con.execute("DELETE FROM files WHERE id = ?", (file_id,))

    def add_file(self, file: dict[str, Any], entries: Sequence[dict[str, Any]], vectors: np.ndarray) -> int:
        """Store one recording and its entries in one transaction, after their vectors; returns the file id."""
        if len(entries) != vectors.shape[0]:
            raise ValueError(f"{len(entries)} entries for {vectors.shape[0]} vectors")
        row0 = self.append_vectors(vectors)
        with self.con:
            old = self.file_row(file["path"])
            if old is not None:
                self.remove_file(int(old["id"]))
            cols = ", ".join(file)
            cur = self.con.execute(f"INSERT INTO files ({cols}) VALUES ({', '.join('?' * len(file))})", tuple(file.values()))
            fid = int(cur.lastrowid or 0)
            self._insert_entries(fid, file.get("station"), entries, row0)
            n = row0 + vectors.shape[0]
            self.con.execute("INSERT OR REPLACE INTO meta (key, value) VALUES ('n_vectors', ?)", (json.dumps(n),))
        self.meta["n_vectors"] = n
        return fid

    def append_entries(self, file: dict[str, Any], entries: Sequence[dict[str, Any]], vectors: np.ndarray, *, fresh: bool = False) -> int:
        """Add entries to a file that is still being written (the live indexer), after their vectors, in one
        transaction: the file's row is created, or updated with ``file``'s fields (``fresh``: its old entries
        dropped first, a file re-created since it was indexed). Returns the file id."""
        if len(entries) != vectors.shape[0]:
            raise ValueError(f"{len(entries)} entries for {vectors.shape[0]} vectors")
        row0 = self.append_vectors(vectors)
        with self.con:
            old = self.file_row(file["path"])
            if old is not None and fresh:
                self.remove_file(int(old["id"]))
                old = None
            if old is None:
                cur = self.con.execute(f"INSERT INTO files ({', '.join(file)}) VALUES ({', '.join('?' * len(file))})", tuple(file.values()))
                fid = int(cur.lastrowid or 0)
            else:
                fid = int(old["id"])
                self.con.execute(f"UPDATE files SET {', '.join(k + ' = ?' for k in file)} WHERE id = ?", (*file.values(), fid))
            self._insert_entries(fid, file.get("station"), entries, row0)
            n = row0 + vectors.shape[0]
            self.con.execute("INSERT OR REPLACE INTO meta (key, value) VALUES ('n_vectors', ?)", (json.dumps(n),))
        self.meta["n_vectors"] = n
        return fid

    def _insert_entries(self, fid: int, station: str | None, entries: Sequence[dict[str, Any]], row0: int) -> None:
        for i, e in enumerate(entries):
            cur = self.con.execute(
                "INSERT INTO entries (file_id, kind, label, start, end, utc_start_ns, utc_end_ns, station, events, transcript, vec_row) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (fid, e["kind"], e.get("label"), e["start"], e["end"], e.get("utc_start_ns"), e.get("utc_end_ns"), station,
                 json.dumps(e.get("events", [])), e.get("transcript", ""), row0 + i),
            )  # fmt: skip
            if e.get("transcript"):
                self.con.execute("INSERT INTO transcripts (rowid, text) VALUES (?, ?)", (cur.lastrowid, e["transcript"]))

    def counts(self) -> dict[str, int]:
        c = self.con.execute("SELECT (SELECT count(*) FROM files), (SELECT count(*) FROM entries WHERE kind = 'window'), "
                             "(SELECT count(*) FROM entries WHERE kind != 'window')").fetchone()  # fmt: skip
        return {"files": int(c[0]), "windows": int(c[1]), "segments": int(c[2])}

    def text_matches(self, terms: Iterable[str]) -> list[tuple[int, str]]:
        """``(vec_row, transcript)`` of the entries whose transcript holds any of ``terms`` (whole words with FTS5, substrings without)."""
        terms = [t for t in terms if t]
        if not terms:
            return []
        sql = "SELECT e.vec_row, e.transcript FROM transcripts t JOIN entries e ON e.id = t.rowid WHERE "
        if self.meta.get("fts"):
            q = " OR ".join('"' + t.replace('"', '""') + '"' for t in terms)
            return [(int(r[0]), str(r[1])) for r in self.con.execute(sql + "transcripts MATCH ?", (q,))]
        where = " OR ".join("lower(t.text) LIKE ?" for _ in terms)
        return [(int(r[0]), str(r[1])) for r in self.con.execute(sql + where, [f"%{t}%" for t in terms])]

    def close(self) -> None:
        self.con.close()
