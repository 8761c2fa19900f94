"""`streamkit train sad-dnn --real DIR --init WEIGHTS`: real scenes of `streamkit corpus real` as extra training data."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from streamkit.models.sad_dnn import SadDnnConfig, load_weights
from streamkit.train.sad_dnn_real import scene_items, scene_signal
from tests.test_sad_dnn import _signal, _tiny_corpus


def _tiny_real(root: Path) -> None:
    """train/dev scenes at 16 kHz in the layout of `streamkit corpus real` (labels in samples at 16 kHz)."""
    for split, nf in (("train", 2), ("dev", 1)):
        d = root / split / "scenes"
        for sub in ("audio", "labels"):
            (d / sub).mkdir(parents=True)
        for i in range(nf):
            fid = f"{split}-{i:04d}"
            x8, m8 = _signal(12.0, seed=40 + i, gap=(1.2, 2.0))
            x = np.repeat(x8, 2)  # 16 kHz, same content
            d8 = np.diff(np.r_[0, m8.astype(int), 0])
            iv = np.stack([np.flatnonzero(d8 == 1), np.flatnonzero(d8 == -1)], 1) * 2
            sf.write(d / "audio" / f"{fid}.wav", x, 16000, subtype="PCM_16")
            (d / "labels" / f"{fid}.json").write_text(json.dumps({"id": fid, "rate": 16000, "n_samples": len(x), "intervals": iv.tolist()}))
    (root / "manifest.json").write_text(json.dumps({"packages": [{"package": "some-train-voices", "version": "1", "licence": "GPL-2", "role": "train"},
                                                                 {"package": "some-eval-data", "version": "1", "licence": "MIT", "role": "eval"}]}))  # fmt: skip


def test_scene_items_rescale_labels_and_refuse_eval(tmp_path: Path) -> None:
    _tiny_real(tmp_path / "r")
    items = scene_items(tmp_path / "r", "train")
    j = json.loads((tmp_path / "r" / "train" / "scenes" / "labels" / "train-0000.json").read_text())
    assert len(items) == 2 and items[0]["n"] == j["n_samples"] // 2
    assert items[0]["intervals"] == [[a // 2, b // 2] for a, b in j["intervals"]]
    with pytest.raises(ValueError, match="train"):
        scene_items(tmp_path / "r", "eval")
    with pytest.raises(FileNotFoundError, match="corpus real"):
        scene_items(tmp_path / "nothing", "dev")


def test_scene_signal_epoch0_as_recorded_later_augmented_and_aligned(tmp_path: Path) -> None:
    _tiny_real(tmp_path / "r")
    it = scene_items(tmp_path / "r", "train")[0]
    x0 = scene_signal(it, 0, 0, seed=1, severity=0.5, hf_prob=1.0)
    x1 = scene_signal(it, 1, 0, seed=1, severity=0.5, hf_prob=1.0)
    assert len(x0) == len(x1) == it["n"] and not np.array_equal(x0, x1)
    assert np.array_equal(x1, scene_signal(it, 1, 0, seed=1, severity=0.5, hf_prob=1.0))  # seeded
    assert np.isfinite(x1).all() and np.abs(x1).max() <= 1.0


def test_train_with_real_scenes_from_init(tmp_path: Path) -> None:
    from streamkit.models.sad_dnn import SadDnn
    from streamkit.models.train_sad_dnn import Corpus, save_weights, train

    _tiny_corpus(tmp_path / "c")
    _tiny_real(tmp_path / "r")
    cfg = SadDnnConfig(channels=(2, 4, 4), gru_hidden=8)
    init = tmp_path / "init.pt"
    save_weights(init, SadDnn(cfg), threshold=0.5)
    out = tmp_path / "w" / "m.pt"
    n_hf = len(Corpus(tmp_path / "c", "train").items)
    summary = train(tmp_path / "c", out, cfg=cfg, minutes=2, seed=1, batch=4, lr=1e-2, threads=1, eval_every=5, max_steps=8, quiet=True,
                    real=tmp_path / "r", init=init)  # fmt: skip
    assert summary["step"] == 8 and summary["real"] == str(tmp_path / "r") and summary["init"] == str(init)
    card = json.loads(out.with_suffix(".json").read_text())
    assert "f1" in card["metrics"]["real_dev"] and card["training"]["real_corpus"] == "r"  # no machine path in a card
    assert card["training"]["real_packages"] == [{"package": "some-train-voices", "version": "1", "licence": "GPL-2"}]
    assert n_hf == 3 and load_weights(out).cfg == cfg
    # a weight file of another shape cannot seed the run
    with pytest.raises(Exception, match="config"):
        train(tmp_path / "c", tmp_path / "w2" / "m.pt", cfg=SadDnnConfig(channels=(2, 4, 8), gru_hidden=8), minutes=1, max_steps=1,
              quiet=True, init=init, finalize=False)  # fmt: skip
