"""The archive index: build (incremental, bad files), search (sound classes, transcripts, filters), the CLI."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from streamkit.cli import main
from streamkit.data.sed_sources import render_event
from streamkit.index import ArchiveIndexError, build_index, search
from streamkit.index.query import parse_classes
from streamkit.index.search import parse_since, utc_iso

RATE = 12000
T0 = 1_767_225_600_000_000_000  # 2026-01-01T00:00:00Z
STATION = "kiwi.test-8073-7100lsb"
CLASSES = ("Alarm_bell_ringing", "Blender", "Cat", "Dishes", "Dog", "Electric_shaver_toothbrush", "Frying", "Running_water", "Speech",
           "Vacuum_cleaner")  # fmt: skip


def _noise(n: int, seed: int) -> np.ndarray:
    return (0.003 * np.random.default_rng(seed).standard_normal(n)).astype(np.float32)


def _with_event(cls: str, seconds: float, at_s: float, rate: int, seed: int) -> np.ndarray:
    x = _noise(int(seconds * rate), seed)
    y, _ = render_event(cls, seed, 7.0, rate)
    i = int(at_s * rate)
    y = y[: x.size - i]
    x[i : i + y.size] += 0.3 * y.astype(np.float32)
    return x


def _station_archive(root: Path) -> Path:
    """30 s of a station at 12 kHz: a dog barks at 11-18 s; an ASR final at 22-26 s; a sidecar anchoring it at T0."""
    root.mkdir(parents=True, exist_ok=True)
    wav = root / f"{STATION}.wav"
    sf.write(str(wav), _with_event("Dog", 30.0, 11.0, RATE, 1), RATE, subtype="PCM_16")
    side = {"version": 1, "rate": "12000", "items": 30 * RATE, "tags": [{"offset": 0, "key": "sk:time", "utc_ns": T0, "source": "host"}]}
    (root / f"{STATION}.wav.json").write_text(json.dumps(side))
    ev = root / "events"
    ev.mkdir()
    sec = 1_000_000_000
    lines = [
        {"kind": "asr.final", "stream": STATION, "t_start_ns": T0 + 22 * sec, "t_end_ns": T0 + 26 * sec, "span": [0, 0],
         "payload": {"text": "the weather forecast for tomorrow", "lang": "en", "confidence": 0.9}},
        {"kind": "sed.detection", "stream": STATION, "t_start_ns": T0 + 11 * sec, "t_end_ns": T0 + 17 * sec, "span": [0, 0],
         "payload": {"label": "Dog", "confidence": 0.8}},
        {"kind": "level.update", "stream": STATION, "t_start_ns": T0, "t_end_ns": T0, "payload": {}},
    ]  # fmt: skip
    (ev / f"{STATION}.jsonl").write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    return root


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = _station_archive(tmp_path_factory.mktemp("arch") / "rec")
    idx = root.parent / "idx"
    rep = build_index(root, idx)
    assert rep.failed == [] and len(rep.added) == 1 and rep.windows == 5 and rep.segments == 2
    return root, idx


def test_sed_embedder_takes_a_clip_shorter_than_its_smallest_input() -> None:
    from streamkit.index.embed import SedPosteriorEmbedder

    emb = SedPosteriorEmbedder()
    v = emb.embed([np.zeros(800, np.float32), 0.1 * np.ones(2400, np.float32)])  # 50 ms and 150 ms: an event segment can be this short
    assert v.shape == (2, emb.dim) and np.isfinite(v).all()


def test_query_parsing() -> None:
    assert parse_classes("a dog barks while water runs", CLASSES) == ["Dog", "Running_water"]
    assert parse_classes("siren with people shouting", CLASSES) == ["Alarm_bell_ringing", "Speech"]
    assert parse_classes("Vacuum cleaner, then dishes", CLASSES) == ["Vacuum_cleaner", "Dishes"]
    assert parse_classes("the weather forecast", CLASSES) == []


def test_search_ranks_the_window_with_the_class_first(built: tuple[Path, Path]) -> None:
    _root, idx = built
    res = search("a dog barking", idx, kinds="windows")
    assert res.classes == ["Dog"]
    top = res.hits[0]
    assert top.kind == "window" and top.start_s <= 12.0 and top.end_s >= 17.0, top
    assert top.audio_score > 0.5 and top.station == STATION and top.freq_khz == 7100.0 and top.mode == "lsb"
    assert top.utc_start == utc_iso(T0 + int(top.start_s * 1e9))
    assert any(e["kind"] == "sed.detection" and e["label"] == "Dog" for e in top.events)
    assert all(h.audio_score < top.audio_score for h in res.hits[1:])
    seg = search("dog", idx, kinds="segments").hits[0]
    assert (seg.kind, seg.label) == ("sed.detection", "Dog")


def test_search_matches_transcripts(built: tuple[Path, Path]) -> None:
    _root, idx = built
    res = search("weather forecast", idx)
    assert res.classes == [] and res.hits
    assert all("weather forecast" in h.transcript for h in res.hits)
    assert res.hits[0].text_score == 1.0
    assert search("nothing like this", idx).hits == []


def test_filters(built: tuple[Path, Path]) -> None:
    _root, idx = built
    assert search("dog", idx, station="7100lsb").hits
    assert search("dog", idx, station="14200usb").hits == []
    assert search("dog", idx, since=T0 + 3600 * 10**9).hits == []
    assert search("dog", idx, since="2025-12-31T23:00").hits
    assert search("dog", idx, until="2025-12-31T23:00").hits == []
    assert parse_since("2026-01-01T00:00:01Z") == T0 + 10**9
    with pytest.raises(ValueError, match="bad time 'yesterday'"):
        parse_since("yesterday")


def test_incremental_build_adds_only_new_files(built: tuple[Path, Path], tmp_path: Path) -> None:
    root, idx0 = built
    idx = tmp_path / "idx"
    shutil.copytree(idx0, idx)
    again = build_index(root, idx)
    assert again.added == [] and len(again.skipped) == 1
    sf.write(str(root / "water.wav"), _with_event("Running_water", 12.0, 2.0, 16000, 2), 16000)
    try:
        rep = build_index(root, idx)
    finally:
        (root / "water.wav").unlink()
    assert [Path(p).name for p in rep.added] == ["water.wav"] and len(rep.skipped) == 1
    hit = search("running water", idx).hits[0]
    assert Path(hit.file).name == "water.wav" and hit.station is None and hit.utc_start is None
    assert all(h.utc_start is not None for h in search("running water", idx, since="2000-01-01").hits)  # no UTC time: never after T


def test_cli_json_and_export(built: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _root, idx = built
    out = tmp_path / "clips"
    assert main(["search", "dog barks", "--index", str(idx), "--top", "2", "--json", "--export", str(out)]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["classes"] == ["Dog"] and 1 <= len(d["hits"]) <= 2
    assert len(d["exported"]) == len(d["hits"])
    for h, p in zip(d["hits"], d["exported"]):
        data, rate = sf.read(p)
        assert rate == RATE and data.shape[0] == h["end_sample"] - h["start_sample"]
    assert main(["search", "dog barks", "--index", str(idx), "--top", "1"]) == 0
    text = capsys.readouterr().out
    assert "Dog" in text and STATION in text and "2026-01-01T00:00:" in text


def test_corrupt_wav_is_skipped_named_and_counted(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = tmp_path / "rec"
    root.mkdir()
    (root / "broken.wav").write_bytes(b"RIFF not really a wav file" * 20)
    sf.write(str(root / "ok.wav"), _noise(16000 * 3, 3), 16000)
    assert main(["index", "build", str(root), "--index", str(tmp_path / "idx"), "--quiet"]) == 2
    cap = capsys.readouterr()
    assert "1 file(s) added" in cap.out and "1 failed" in cap.out
    assert "skipped" in cap.err and "broken.wav" in cap.err
    rep = build_index(root, tmp_path / "idx")  # the good file is in, the bad one still fails
    assert rep.added == [] and len(rep.skipped) == 1 and [Path(p).name for p, _ in rep.failed] == ["broken.wav"]


def test_error_paths(built: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _root, idx = built
    assert main(["search", "dog", "--index", str(tmp_path / "missing")]) == 2
    assert "no archive index here" in capsys.readouterr().err
    assert main(["search", "dog", "--index", str(idx), "--since", "last tuesday"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "bad time 'last tuesday'" in err
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "index.sqlite").write_bytes(b"garbage" * 100)
    assert main(["search", "dog", "--index", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "not a readable archive index" in err
    with pytest.raises(FileNotFoundError):
        build_index(tmp_path / "nope", tmp_path / "idx2")


def test_truncated_vectors_are_a_corrupt_index(built: tuple[Path, Path], tmp_path: Path) -> None:
    _root, idx0 = built
    idx = tmp_path / "idx"
    shutil.copytree(idx0, idx)
    (idx / "vectors.f32").write_bytes(b"")
    with pytest.raises(ArchiveIndexError, match="corrupt index"):
        search("dog", idx)
    con = sqlite3.connect(str(idx / "index.sqlite"))
    con.execute("UPDATE meta SET value = '\"other\"' WHERE key = 'format'")
    con.commit()
    con.close()
    with pytest.raises(ArchiveIndexError, match="format 'other'"):
        search("dog", idx)
