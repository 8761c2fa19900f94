"""Singer identification: embedding, gallery, CLI (enroll / identify) and the models.singer_id block."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from streamkit.cli import main
from streamkit.data.singing import SingerProfile, sing
from streamkit.models.singer_embed import SingerEmbedder, Whitening
from streamkit.models.singer_gallery import Gallery, eer_threshold
from streamkit.testing import assert_chunking_invariant


def _song(singer: str, seed: int, dur: float = 12.0) -> np.ndarray:
    p = SingerProfile.random(np.random.default_rng(int(singer[1:]) * 7919), singer)
    return sing(p, seed, dur).audio.astype(np.float64)


@pytest.fixture(scope="module")
def songs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[Path]]:
    d = tmp_path_factory.mktemp("singers")
    out: dict[str, list[Path]] = {}
    for s in ("S1", "S2", "S3"):
        for k in range(3):
            p = d / f"{s}_{k}.wav"
            sf.write(p, _song(s, 100 + k), 16000, subtype="PCM_16")
            out.setdefault(s, []).append(p)
    return out


def test_eer_threshold_separates() -> None:
    thr, eer = eer_threshold(np.array([0.8, 0.9, 0.7]), np.array([0.1, 0.2, 0.3]))
    assert eer == 0.0 and thr == pytest.approx(0.5)  # the middle of the gap, not the worst target's score
    # overlapping sets: the same errors as at the crossing score, from the middle of its interval
    t, n = np.array([0.4, 0.6, 0.8, 0.9]), np.array([0.1, 0.3, 0.5, 0.7])
    thr, eer = eer_threshold(t, n)
    assert eer == pytest.approx(0.25) and thr == pytest.approx(0.55)
    assert np.mean(t < thr) == pytest.approx(0.25) and np.mean(n >= thr) == pytest.approx(0.25)


def test_whitening_fit_roundtrip(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    raw = np.concatenate([rng.normal(c, 0.1, (20, 84)) for c in (0.0, 1.0, 2.0)])
    lab = np.repeat(["a", "b", "c"], 20)
    t = Whitening.fit(raw, lab)
    t.save(tmp_path / "t.npz")
    u = Whitening.load(tmp_path / "t.npz")
    np.testing.assert_allclose(u(raw), t(raw))
    e = t(raw)
    assert np.allclose(np.linalg.norm(e, axis=1), 1.0)
    with pytest.raises(ValueError, match="2 singers"):
        Whitening.fit(raw[:20], lab[:20])


def test_enroll_identify_and_reject_unknown(songs: dict[str, list[Path]], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    g = tmp_path / "g.json"
    for s in ("S1", "S2"):
        assert main(["singers", "enroll", s, *map(str, songs[s][:2]), "--gallery", str(g), "--mode", "clip"]) == 0
    capsys.readouterr()
    files = [str(songs["S1"][2]), str(songs["S2"][2]), str(songs["S3"][0])]
    assert main(["singers", "identify", *files, "--gallery", str(g), "--json"]) == 0
    res = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["best"] for r in res[:2]] == ["S1", "S2"]
    gal = Gallery.load(g)
    # an open-set threshold between the known singers' scores and the stranger's rejects the stranger
    thr = (min(res[0]["score"], res[1]["score"]) + res[2]["score"]) / 2
    assert res[2]["score"] < min(res[0]["score"], res[1]["score"])
    assert main(["singers", "identify", *files, "--gallery", str(g), "--json", "--threshold", str(thr)]) == 0
    res = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["singer"] for r in res] == ["S1", "S2", "unknown"]
    assert sorted(gal.singers) == ["S1", "S2"] and gal.mode == "clip"


def test_motif_mode_reports_motifs(songs: dict[str, list[Path]]) -> None:
    e = SingerEmbedder("motif").embed(_song("S3", 7, 40.0))  # S3 sings motifs the band contour finds
    assert e.vector is not None and e.motifs and all(len(m) >= 5 for m in e.motifs)
    assert all(b - a >= 0.15 for a, b in e.clips)


def test_cli_errors(songs: dict[str, list[Path]], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    g = tmp_path / "g.json"
    assert main(["singers", "identify", str(songs["S1"][0]), "--gallery", str(g)]) == 2
    assert "not found" in capsys.readouterr().err
    bad = tmp_path / "bad.wav"
    bad.write_bytes(b"not audio")
    assert main(["singers", "enroll", "X", str(bad), "--gallery", str(g)]) == 2
    assert "cannot read audio" in capsys.readouterr().err
    assert not g.exists()  # nothing written
    silent = tmp_path / "silent.wav"
    sf.write(silent, np.zeros(16000), 16000)
    assert main(["singers", "enroll", "X", str(silent), "--gallery", str(g)]) == 2
    err = capsys.readouterr().err
    assert "no voiced audio" in err and err.count("\n") == 1
    assert main(["singers", "enroll", "X", str(songs["S1"][0]), str(tmp_path / "missing.wav"), "--gallery", str(g)]) == 2
    assert not g.exists()  # one bad file: the whole enrolment is refused


def test_block_events_and_chunking(songs: dict[str, list[Path]], tmp_path: Path) -> None:
    from streamkit.models.singer_embed import read_audio
    from streamkit.models.singer_id_block import SINGER_ID, SingerIdBlock

    g = tmp_path / "g.json"
    for s in ("S1", "S2"):
        assert main(["singers", "enroll", s, *map(str, songs[s][:2]), "--gallery", str(g)]) == 0
    x = read_audio(songs["S2"][2]).astype(np.float32)[:, None]
    run = assert_chunking_invariant(lambda: SingerIdBlock(gallery=str(g), every_s=3.0, window_s=8.0), x, rate=16000,
                                    sizes=("all", 333, "random"))  # fmt: skip
    np.testing.assert_array_equal(run.samples, x)  # audio passes through
    ev = run.events_of(SINGER_ID)
    assert len(ev) >= 2
    assert [e.payload.best for e in ev].count("S2") > len(ev) / 2
    for e in ev:
        assert e.span[1] - e.span[0] <= 8 * 16000 and e.payload.end_s - e.payload.start_s <= 8.0 + 1e-9


def test_block_config_errors(tmp_path: Path) -> None:
    from streamkit.core.errors import ConfigError
    from streamkit.models.singer_id_block import SingerIdBlock

    with pytest.raises(ConfigError, match="not found"):
        SingerIdBlock(gallery=str(tmp_path / "none.json"))


def test_block_window_buffer_appends_without_copying_the_window() -> None:
    from streamkit.models.singer_id_block import _Window

    w = _Window((3,), size=64)
    ref = np.zeros((0, 3))
    rng = np.random.default_rng(0)
    reallocs, buf = 0, w._buf
    for _ in range(500):
        v = rng.normal(size=(int(rng.integers(0, 5)), 3))
        w.append(v)
        ref = np.concatenate([ref, v])
        if len(ref) > 40:  # a sliding window of at most 40 rows
            w.drop(len(ref) - 40)
            ref = ref[-40:]
        reallocs += w._buf is not buf
        buf = w._buf
        np.testing.assert_array_equal(w.view(), ref)
    assert reallocs <= 1  # the live part is compacted in place, not re-allocated per append


def test_a_gallery_refuses_another_embedder_of_the_same_dimension(songs: dict[str, list[Path]], tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    from streamkit.core.errors import ConfigError
    from streamkit.models.singer_embed import WEIGHTS
    from streamkit.models.singer_id_block import SingerIdBlock

    a, b = tmp_path / "a.npz", tmp_path / "b.npz"
    a.write_bytes(WEIGHTS.read_bytes())
    d = dict(np.load(WEIGHTS, allow_pickle=False))
    d["w"] = d["w"][:, ::-1].copy()  # another space of the same dimension
    np.savez(b, **d)
    g = tmp_path / "g.json"
    assert main(["singers", "enroll", "S1", str(songs["S1"][0]), "--gallery", str(g), "--mode", "clip", "--weights", str(a)]) == 0
    assert Gallery.load(g).embedder is not None and Gallery.load(g).embedder.startswith("a.npz sha256:")
    capsys.readouterr()
    assert main(["singers", "identify", str(songs["S1"][1]), "--gallery", str(g), "--weights", str(b)]) == 2
    err = capsys.readouterr().err
    assert "enrolled with a.npz" in err and "b.npz" in err and err.count("\n") == 1
    assert main(["singers", "enroll", "S2", str(songs["S2"][0]), "--gallery", str(g), "--weights", str(b)]) == 2
    assert sorted(Gallery.load(g).singers) == ["S1"]  # nothing enrolled into the other space
    with pytest.raises(ConfigError, match="enrolled with a.npz"):
        SingerIdBlock(gallery=str(g), weights=str(b))
    assert main(["singers", "identify", str(songs["S1"][1]), "--gallery", str(g), "--weights", str(a)]) == 0
