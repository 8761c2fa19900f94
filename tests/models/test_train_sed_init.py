"""``streamkit train sed --init WEIGHTS``: fine-tuning starts from a model file's weights."""

from __future__ import annotations

import json

import pytest
import torch

from streamkit.models.sed_crnn import SedConfig, load_model
from tests.models.sed_tiny_corpus import tiny_sed_corpus


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return tiny_sed_corpus(tmp_path_factory, {"synthetic": 8, "weak": 4, "unlabelled": 0, "validation": 3, "eval": 0}, 4)


def _tiny() -> SedConfig:
    from streamkit.train.sed import PRESETS

    return SedConfig(**PRESETS["tiny"])


def _opts(**kw):
    from streamkit.train.sed import TrainOptions

    return TrainOptions(**{**dict(epochs=1, batch=2, synthetic_holdout=2, lr=3e-3, psds=False, ckpt_minutes=100.0), **kw})


def test_init_starts_from_the_file_and_is_part_of_the_run(corpus, tmp_path):
    from streamkit.cli import build_parser
    from streamkit.train.sed import file_sha256, train
    from streamkit.train.sed_options import options_from_args

    train(corpus, tmp_path / "a" / "m.pt", _opts(seed=1), cfg=_tiny(), quiet=True)
    start = tmp_path / "a" / "m.pt"
    m0, _ = load_model(start)
    # lr 0: the parameters stay the file's (only the BN statistics move), so the run started from them
    train(corpus, tmp_path / "b" / "m.pt", _opts(seed=2, lr=0.0, init=str(start)), cfg=_tiny(), quiet=True)
    m1, _ = load_model(tmp_path / "b" / "m.pt")
    p0, p1 = dict(m0.named_parameters()), dict(m1.named_parameters())
    assert all(torch.equal(p0[k], p1[k]) for k in p0)
    assert torch.equal(m0.F.feat_mean, m1.F.feat_mean) and torch.equal(m0.F.feat_std, m1.F.feat_std)
    card = json.loads((tmp_path / "b" / "m.json").read_text())["training"]
    assert card["init"] == {"file": "m.pt", "sha256": file_sha256(start)}
    # without it the same seed starts elsewhere
    train(corpus, tmp_path / "c" / "m.pt", _opts(seed=2, lr=0.0), cfg=_tiny(), quiet=True)
    m2, _ = load_model(tmp_path / "c" / "m.pt")
    assert not all(torch.equal(p0[k], v) for k, v in m2.named_parameters())
    assert json.loads((tmp_path / "c" / "m.json").read_text())["training"]["init"] is None
    # part of the checkpoint fingerprint: another start is not resumed
    stop = train(corpus, tmp_path / "r" / "m.pt", _opts(epochs=2, init=str(start), max_steps=1), cfg=_tiny(), quiet=True)
    assert not stop["finished"]
    with pytest.raises(ValueError, match="checkpoint of another run"):
        train(corpus, tmp_path / "r" / "m.pt", _opts(epochs=2, init=str(tmp_path / "c" / "m.pt")), cfg=_tiny(), quiet=True, resume=True)
    # refusals: a missing file, another config
    with pytest.raises(ValueError, match="no such file"):
        train(corpus, tmp_path / "x.pt", _opts(init=str(tmp_path / "none.pt")), cfg=_tiny(), quiet=True)
    with pytest.raises(ValueError, match="another model config"):
        train(corpus, tmp_path / "x.pt", _opts(init=str(start)), cfg=SedConfig(**{**_tiny().to_dict(), "rnn_hidden": 4}), quiet=True)
    # the command line
    a = build_parser().parse_args(["train", "sed", "--corpus", str(corpus), "--out", "o.pt", "--init", str(start)])
    assert options_from_args(a).init == str(start)
