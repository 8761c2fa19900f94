"""streamkit train rnnt-lid: only the LID head changes, dev LID does not get worse, errors are clear, the CLI wires it."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

import pytest
import torch

from streamkit.models.rnnt import RnntConfig, load_model
from streamkit.train import rnnt as tr
from streamkit.train import rnnt_lid as rl

from .test_train_rnnt import KW, TINY, make_corpus

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A tiny lid model trained a few steps with one-language batches, and its corpus."""
    root = tmp_path_factory.mktemp("lidrefit")
    corpus = make_corpus(root / "c", n_train=(10, 10), n_dev=4, seed=4)
    tr.train(corpus, root / "m.pt", cfg=TINY, steps=12, eval_every=12, seed=2, **KW)
    return corpus, root / "m.pt"


def test_refit_changes_only_the_lid_head(trained, tmp_path):
    corpus, src = trained
    card = rl.refit_lid(src, corpus, tmp_path / "r.pt", utts_per_lang=10, epochs=15, lr=2e-2, dev_per_lang=4, quiet=True)
    a, _ = load_model(src)
    b, meta = load_model(tmp_path / "r.pt")
    sa, sb = a.state_dict(), b.state_dict()
    assert sa.keys() == sb.keys()
    changed = {k for k in sa if not torch.equal(sa[k], sb[k])}
    assert changed and changed <= {"lid_head.weight", "lid_head.bias"}, changed
    # the selection starts from the source head's dev score, so the kept head is never worse on dev
    dev = card["dev"]
    assert dev["best"]["lid_acc"] >= dev["before"]["lid_acc"]
    assert meta["lid_refit"]["dev_lid_acc"] == dev["best"]["lid_acc"] and meta["lid_refit"]["source"] == "m.pt"
    assert meta["symbols"] and meta["card"] == "r.json"
    assert [h["epoch"] for h in dev["history"]] == list(range(1, 16))
    conf = dev["best"]["confusion"]["counts"]
    assert sum(map(sum, conf)) == 8 and sum(conf[i][i] for i in range(2)) / 8 == pytest.approx(dev["best"]["lid_acc"], abs=1e-4)
    saved = json.loads((tmp_path / "r.json").read_text())
    assert saved["training"]["command"].startswith("streamkit train rnnt-lid --model m.pt --corpus CORPUS --out r.pt")
    assert saved["corpus"]["train_utterances_per_lang"] == {"en": 10, "hi": 10}


def test_refit_learns_the_languages_from_a_fresh_layer(trained, tmp_path):
    """The two fake languages use disjoint tones, so a refitted head separates dev utterances."""
    corpus, src = trained
    card = rl.refit_lid(src, corpus, tmp_path / "r.pt", utts_per_lang=10, epochs=40, lr=3e-2, dev_per_lang=4, reset=True, quiet=True)
    assert card["training"]["init"] == "fresh" and card["training"]["head"] == "linear"
    assert card["dev"]["best"]["lid_acc"] >= 0.75, card["dev"]["history"][-3:]


def test_refit_with_a_recurrent_head(trained, tmp_path):
    """--lid-hidden N: a fresh GRU + linear head; the rest of the model is the source's, bit for bit."""
    corpus, src = trained
    card = rl.refit_lid(src, corpus, tmp_path / "g.pt", utts_per_lang=10, epochs=25, lr=2e-2, dev_per_lang=4, lid_hidden=8, quiet=True)
    assert card["training"]["head"] == "GRU 8 + linear" and card["training"]["init"] == "fresh"
    assert card["config"]["lid_hidden"] == 8 and "--lid-hidden 8" in card["training"]["command"]
    assert card["dev"]["best"]["lid_acc"] >= 0.75, card["dev"]["history"][-3:]
    a, _ = load_model(src)
    b, meta = load_model(tmp_path / "g.pt")
    assert b.cfg.lid_hidden == 8 and b.lid_rnn is not None and b.lid_rnn.hidden_size == 8
    sa, sb = a.state_dict(), b.state_dict()
    for k, v in sa.items():
        if not k.startswith("lid_"):
            assert torch.equal(v, sb[k]), k
    assert {k for k in sb if k not in sa} == {k for k in sb if k.startswith("lid_rnn.")}
    with pytest.raises(ValueError, match="--lid-hidden"):
        rl.refit_lid(src, corpus, tmp_path / "x.pt", lid_hidden=-1, quiet=True)


def test_half_weights_and_in_place(trained, tmp_path):
    corpus, src = trained
    dst = tmp_path / "m.pt"
    dst.write_bytes(src.read_bytes())
    rl.refit_lid(dst, corpus, dst, utts_per_lang=4, epochs=2, dev_per_lang=2, half_weights=True, quiet=True)
    obj = torch.load(dst, map_location="cpu", weights_only=False)
    assert obj["state_dict"]["lid_head.weight"].dtype == torch.float16
    m, meta = load_model(dst)
    assert meta["lid_refit"]["source"] == "m.pt" and m.lid_head.weight.dtype == torch.float32


def test_errors(trained, tmp_path, capsys):
    corpus, src = trained
    ms = tmp_path / "ms.pt"
    tr.train(corpus, ms, cfg=RnntConfig(**{**TINY.to_dict(), "variant": "multisoftmax"}), steps=2, eval_every=2, **KW)
    with pytest.raises(ValueError, match="no LID head"):
        rl.refit_lid(ms, corpus, tmp_path / "x.pt", quiet=True)
    with pytest.raises(ValueError, match="--model"):
        rl.refit_lid(tmp_path / "missing.pt", corpus, tmp_path / "x.pt", quiet=True)
    bad = tmp_path / "bad.pt"
    bad.write_bytes(b"not a model")
    with pytest.raises(ValueError, match="--model"):
        rl.refit_lid(bad, corpus, tmp_path / "x.pt", quiet=True)
    with pytest.raises(ValueError, match="--epochs"):
        rl.refit_lid(src, corpus, tmp_path / "x.pt", epochs=0, quiet=True)
    with pytest.raises(ValueError, match="--lr"):
        rl.refit_lid(src, corpus, tmp_path / "x.pt", lr=0.0, quiet=True)
    other = make_corpus(tmp_path / "other", n_train=(2, 2), n_dev=1)
    man = json.loads((other / "manifest.json").read_text())
    man["hours_per_language"] = {"hi": 0.01, "en": 0.01}  # same languages, other order: the heads would not line up
    (other / "manifest.json").write_text(json.dumps(man))
    with pytest.raises(ValueError, match="languages"):
        rl.refit_lid(src, other, tmp_path / "x.pt", quiet=True)
    ns = rl.add_arguments(argparse.ArgumentParser()).parse_args(
        ["--model", str(src), "--corpus", str(tmp_path / "nope"), "--out", str(tmp_path / "x.pt")]
    )
    assert rl.run_from_args(ns) == 2
    assert "corpus directory not found" in capsys.readouterr().err
    assert not (tmp_path / "x.pt").exists()


def test_cli_lists_and_runs_it(trained, tmp_path):
    corpus, src = trained
    out = tmp_path / "c.pt"
    r = subprocess.run([sys.executable, "-m", "streamkit", "train", "rnnt-lid", "--model", str(src), "--corpus", str(corpus), "--out", str(out),
                        "--utts-per-lang", "3", "--epochs", "1", "--dev-per-lang", "2"], capture_output=True, text=True, timeout=300)  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert "dev LID" in r.stderr and out.is_file() and out.with_suffix(".json").is_file()
