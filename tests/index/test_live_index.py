"""``monitor --record DIR --index IDX``: the recordings indexed while they are written, completed at the end."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from streamkit.cli import main
from streamkit.index import build_index, search
from streamkit.index.growing import read_clip, read_frames
from streamkit.index.live import LiveIndexer
from streamkit.monitor import run_monitor


def test_a_wav_being_written_is_read_by_whole_frames(tmp_path: Path) -> None:
    p = tmp_path / "g.wav"
    x = (0.1 * np.random.default_rng(0).standard_normal((5000, 2))).astype(np.float32)
    f = sf.SoundFile(str(p), "w", samplerate=8000, channels=2, subtype="PCM_16", format="WAV")
    f.comment = "a LIST chunk before the data"
    f.write(x[:3000])
    try:
        assert open(p, "rb").read().find(b"data\0\0\0\0") > 0  # the header's data size is filled in at close
        got = read_frames(p, 1000, 4000, 2)  # what is on disk: 3000 frames
        assert got.shape == (2000, 2)
        assert read_frames(p, 0, 4000, 2, limit=2500).shape == (2500, 2)
        clip, rate = read_clip(p, 100, 900)
        assert rate == 8000 and clip.shape == (800, 2)
    finally:
        f.close()
    want = sf.read(str(p), dtype="float32", always_2d=True)[0]
    np.testing.assert_array_equal(got, want[1000:3000])
    np.testing.assert_array_equal(read_clip(p, 100, 900)[0], want[100:900])


def test_monitor_indexes_as_it_records(tmp_path: Path) -> None:
    rec, idx, ev = tmp_path / "rec", tmp_path / "idx", tmp_path / "ev"
    ix = LiveIndexer(idx, rec, events_dir=ev, window_s=2.0, hop_s=1.0, interval_s=0.5)
    seen_live: list[int] = []
    orig = ix.poll

    def poll() -> int:  # what a search finds while the run goes on
        n = orig()
        if (idx / "index.sqlite").is_file() and ix.report.live:
            seen_live.append(len(search("people talking", idx, kinds="windows", top=50).hits))
        return n

    ix.poll = poll  # type: ignore[method-assign]
    res = run_monitor([], duration=8.0, events_dir=str(ev), record_dir=str(rec), console=False, index=ix)
    r = res["index"]
    assert r.errors == 0 and r.live > 0 and max(seen_live) > 0
    assert r.final is not None and len(r.final.added) == 3 and r.final.failed == []
    # consistent after the run: every file finished (no live row left), every entry's vector on disk, nothing to rebuild
    con = sqlite3.connect(str(idx / "index.sqlite"))
    files = con.execute("SELECT path, size, mtime_ns, items FROM files").fetchall()
    assert len(files) == 3
    for path, size, mtime, items in files:
        st = Path(path).stat()
        assert (size, mtime, items) == (st.st_size, st.st_mtime_ns, sf.info(path).frames)
    n_vec = int(con.execute("SELECT value FROM meta WHERE key = 'n_vectors'").fetchone()[0])
    assert con.execute("SELECT max(vec_row) FROM entries").fetchone()[0] < n_vec
    assert (idx / "vectors.f32").stat().st_size >= n_vec * 10 * 4
    n_windows = con.execute("SELECT count(*) FROM entries WHERE kind = 'window'").fetchone()[0]
    rates = [sf.info(p).samplerate for p, _, _, _ in files]  # 2 s every 1 s, the last one ends at the end of the file
    assert n_windows == sum(len(range(0, items - 2 * r, r)) + 1 for (_, _, _, items), r in zip(files, rates))
    con.close()
    again = build_index(rec, idx, events_dirs=[ev])
    assert again.added == [] and len(again.skipped) == 3
    hits = search("people talking", idx, top=20).hits
    assert hits and all(h.utc_start and h.station for h in hits)
    assert {"window", "vad.segment"} <= {h.kind for h in hits}


def test_index_needs_record(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["monitor", "--index", str(tmp_path / "idx"), "--duration", "1"]) == 2
    assert "--index needs --record DIR" in capsys.readouterr().err
    assert not (tmp_path / "idx").exists()
