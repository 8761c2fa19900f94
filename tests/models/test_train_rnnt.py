"""streamkit train rnnt: a tiny run lowers the loss, --resume is bit-exact, corpus errors are clear, the weights load in models.rnnt_asr."""

from __future__ import annotations

import argparse
import json
import re
import shutil

import numpy as np
import pytest
import soundfile as sf
import torch

from streamkit.data import asr_corpus
from streamkit.data.asr_corpus import FORMAT, Vocab
from streamkit.models.rnnt import RnntConfig, load_model
from streamkit.train import rnnt as tr
from streamkit.train.rnnt_corpus import compute_logmel, stacked
from streamkit.train.rnnt_eval import char_errors, greedy_decode, word_errors

torch.set_num_threads(1)

RATE = 8000
LETTERS = {"en": "abc", "hi": "kmn"}
TONE = {ch: 300 + 250 * i for i, ch in enumerate("abckmn")}


def _audio(text: str, rng: np.random.Generator) -> np.ndarray:
    """A tone of its own frequency per grapheme (90 ms), a short pause between words."""
    parts = [np.zeros(800, np.float32)]
    for w in text.split():
        for ch in w:
            t = np.arange(720) / RATE
            parts.append((0.3 * np.sin(2 * np.pi * TONE[ch] * t)).astype(np.float32))
        parts.append(np.zeros(400, np.float32))
    parts.append(np.zeros(800, np.float32))
    x = np.concatenate(parts)
    return x + 0.003 * rng.standard_normal(x.shape[0]).astype(np.float32)


def make_corpus(root, n_train=(12, 6), n_dev=3, seed=0):
    """A fake corpus in the ``streamkit corpus asr`` layout: two languages, three graphemes each."""
    rng = np.random.default_rng(seed)
    vocab = {}
    for lg, chars in LETTERS.items():
        v = Vocab(lg, ("<blank>", *chars, *("B_" + c for c in chars)))
        (root / "vocab").mkdir(parents=True, exist_ok=True)
        v.save(root / "vocab" / f"{lg}.json")
        vocab[lg] = v
    for split, counts in (("train", n_train), ("dev", (n_dev, n_dev)), ("test", (n_dev, n_dev))):
        recs = []
        for (lg, chars), n in zip(LETTERS.items(), counts):
            (root / split / lg).mkdir(parents=True, exist_ok=True)
            for i in range(n):
                words = ["".join(rng.choice(list(chars), size=int(rng.integers(1, 4)))) for _ in range(int(rng.integers(1, 4)))]
                text = " ".join(words)
                x = _audio(text, rng)
                rel = f"{split}/{lg}/{lg}_{split}_{i:06d}.wav"
                sf.write(root / rel, x, RATE, subtype="PCM_16")
                recs.append({"id": f"{lg}_{split}_{i:06d}", "lang": lg, "split": split, "path": rel, "text": text, "n_samples": len(x)})
        with open(root / f"{split}.jsonl", "w", encoding="utf-8") as f:
            f.writelines(json.dumps(r) + "\n" for r in recs)
    man = {"format": FORMAT, "command": "fake tones (tests)", "hours_per_language": {"en": 0.01, "hi": 0.01}}
    (root / "manifest.json").write_text(json.dumps(man))
    return root


TINY = RnntConfig(variant="lid", enc_layers=1, enc_hidden=32, pred_hidden=24, embed_dim=8, joint_dim=24)
KW = dict(batch_seconds=4.0, max_utts=4, lr=5e-3, warmup=3, dev_per_lang=3, wer_per_lang=2, quiet=True, threads=1)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return make_corpus(tmp_path_factory.mktemp("asr"))


def test_tiny_run_lowers_the_loss(corpus, tmp_path):
    losses = []
    card = tr.train(corpus, tmp_path / "m.pt", cfg=TINY, steps=40, eval_every=20, seed=3, on_step=lambda s, v: losses.append(v), **KW)
    assert len(losses) == 40
    assert np.mean(losses[-8:]) < 0.6 * np.mean(losses[:8]), losses
    hist = card["dev"]["history"]
    assert [h["step"] for h in hist] == [20, 40] and hist[-1]["rnnt_loss"] < hist[0]["rnnt_loss"]
    assert set(hist[-1]["wer_per_lang"]) == {"en", "hi"} and 0 <= hist[-1]["lid_acc"] <= 1
    assert set(hist[-1]["cer_per_lang"]) == {"en", "hi"} and 0 <= hist[-1]["cer_char_weighted"] <= hist[-1]["wer_word_weighted"] + 1
    assert card["variant"] == "lid" and card["training"]["steps"] == 40 and card["corpus"]["command"] == "fake tones (tests)"
    assert card["status"] == "finished" and card["n_params"] > 0 and "machine" in card
    on_disk = json.loads((tmp_path / "m.json").read_text())
    assert on_disk["training"]["steps"] == 40 and str(tmp_path) not in json.dumps(on_disk)
    model, meta = load_model(tmp_path / "m.pt")
    assert meta["symbols"]["en"] == ["<blank>", "a", "b", "c", "B_a", "B_b", "B_c"] and meta["step"] == card["dev"]["best_step"]
    assert model.cfg.languages == ("en", "hi") and model.cfg.vocab_sizes == (7, 7)
    assert float(model.feat_std.min()) > 0 and float(model.feat_mean.abs().sum()) > 0  # stats from the training data


class _Killed(Exception):
    pass


def test_resume_is_bit_exact(corpus, tmp_path):
    cfg = RnntConfig(**{**TINY.to_dict(), "variant": "multisoftmax", "dropout": 0.0})
    kw = dict(cfg=cfg, steps=16, eval_every=5, seed=1, **KW)
    tr.train(corpus, tmp_path / "a.pt", **kw)

    def kill(step, loss):
        if step == 13:
            raise _Killed

    with pytest.raises(_Killed):
        tr.train(corpus, tmp_path / "b.pt", on_step=kill, **kw)
    ck = torch.load(tmp_path / "b.ckpt", weights_only=False)
    assert ck["state"]["step"] == 10  # the last checkpoint before the kill
    card = tr.train(corpus, tmp_path / "b.pt", resume=True, **kw)
    assert card["training"]["runs"] == 2 and card["training"]["steps"] == 16
    a = torch.load(tmp_path / "a.ckpt", weights_only=False)
    b = torch.load(tmp_path / "b.ckpt", weights_only=False)
    for k, v in a["model"].items():
        assert torch.equal(v, b["model"][k]), k
    strip = lambda h: [{k: v for k, v in r.items() if k != "elapsed_s"} for r in h]  # noqa: E731
    assert strip(a["state"]["history"]) == strip(b["state"]["history"])
    with pytest.raises(ValueError, match="another run"):
        tr.train(corpus, tmp_path / "b.pt", resume=True, **{**kw, "seed": 2})


def test_half_weights_on_resume_rewrite_only_the_weight_file(corpus, tmp_path):
    kw = dict(cfg=TINY, steps=6, eval_every=3, seed=4, **KW)
    tr.train(corpus, tmp_path / "m.pt", **kw)
    full, meta = load_model(tmp_path / "m.pt")
    size = (tmp_path / "m.pt").stat().st_size
    ck_before = torch.load(tmp_path / "m.ckpt", weights_only=False)
    card = tr.train(corpus, tmp_path / "m.pt", resume=True, half_weights=True, **kw)  # a finished run: nothing more is trained
    assert card["training"]["steps"] == 6 and card["weights_dtype"] == "float16" and card["training"]["command"].endswith("--half-weights")
    raw = torch.load(tmp_path / "m.pt", weights_only=True)
    assert raw["storage_dtype"] == "float16"
    assert all(v.dtype == torch.float16 for v in raw["state_dict"].values() if v.is_floating_point())
    assert (tmp_path / "m.pt").stat().st_size < 0.75 * size
    half, meta_h = load_model(tmp_path / "m.pt")
    assert meta_h == meta
    for (k, a), (k2, b) in zip(full.state_dict().items(), half.state_dict().items()):
        assert k == k2 and b.dtype == a.dtype  # float32 parameters again
        assert torch.allclose(a, b, rtol=1e-3, atol=1e-4), k
    ck = torch.load(tmp_path / "m.ckpt", weights_only=False)
    assert all(torch.equal(v, ck_before["model"][k]) for k, v in ck["model"].items())  # the checkpoint is untouched float32


def test_corpus_errors(corpus, tmp_path, capsys):
    with pytest.raises(tr.CorpusError, match="not found"):
        tr.AsrCorpus(tmp_path / "nope")
    (tmp_path / "empty").mkdir()
    with pytest.raises(tr.CorpusError, match="no manifest.json"):
        tr.AsrCorpus(tmp_path / "empty")
    bad = tmp_path / "bad"
    shutil.copytree(corpus, bad)
    (bad / "manifest.json").write_text("{not json")
    with pytest.raises(tr.CorpusError, match="not valid JSON"):
        tr.AsrCorpus(bad)
    (bad / "manifest.json").write_text(json.dumps({"format": "other"}))
    with pytest.raises(tr.CorpusError, match="format"):
        tr.AsrCorpus(bad)
    shutil.copy(corpus / "manifest.json", bad / "manifest.json")
    first = json.loads((bad / "train.jsonl").read_text().splitlines()[0])
    (bad / first["path"]).unlink()
    with pytest.raises(tr.CorpusError, match="audio file missing"):
        tr.train(bad, tmp_path / "x.pt", cfg=TINY, steps=2, **KW)
    (bad / "dev.jsonl").unlink()
    with pytest.raises(tr.CorpusError, match="no dev.jsonl"):
        tr.train(bad, tmp_path / "x.pt", cfg=TINY, steps=2, **KW)
    with open(bad / "train.jsonl", "a") as f:
        f.write(json.dumps({**first, "text": "xyz"}) + "\n")
    with pytest.raises(tr.CorpusError, match="train.jsonl:.*not in the vocabulary"):
        tr.AsrCorpus(bad).split("train")
    # the CLI prints one line and returns 2
    ns = tr.add_arguments(argparse.ArgumentParser()).parse_args(
        ["--corpus", str(tmp_path / "empty"), "--out", str(tmp_path / "y.pt"), "--steps", "1"]
    )
    assert tr.run_from_args(ns) == 2
    assert "streamkit train rnnt: error:" in capsys.readouterr().err


@pytest.mark.parametrize("variant", ["lid", "vanilla"])
def test_cli_weights_load_in_rnnt_asr(corpus, tmp_path, variant):
    from streamkit.models.rnnt_stream import RnntAsr
    from streamkit.testing import run_block

    out = tmp_path / f"{variant}.pt"
    args = ["--corpus", str(corpus), "--variant", variant, "--out", str(out), "--steps", "6", "--eval-every", "3", "--enc-layers", "1",
            "--enc-hidden", "16", "--pred-hidden", "16", "--embed-dim", "8", "--joint-dim", "16", "--batch-seconds", "4", "--max-utts", "4",
            "--dev-per-lang", "2", "--wer-per-lang", "1", "--quiet"]  # fmt: skip
    ns = tr.add_arguments(argparse.ArgumentParser()).parse_args(args)
    assert tr.run_from_args(ns) == 0
    assert out.is_file() and out.with_suffix(".json").is_file() and out.with_suffix(".ckpt").is_file()
    rec = json.loads((corpus / "test.jsonl").read_text().splitlines()[0])
    x, _ = sf.read(corpus / rec["path"], dtype="float32")
    r = run_block(RnntAsr(model=str(out), utterance_mode="always", beam=2), x, rate=RATE, sizes=333)
    kinds = [e.kind for e in r.events]
    assert "asr.final" in kinds and "lid.result" in kinds
    fin = next(e.payload for e in r.events if e.kind == "asr.final")
    assert fin.lang in ("en", "hi") or (variant == "vanilla" and not fin.text)  # vanilla: the language of its tokens
    assert set(fin.text) <= set("abckmn ")


def test_benchmark_runs_on_a_tiny_model(corpus, tmp_path):

    from streamkit.models import rnnt as rnnt_mod

    tr.train(corpus, tmp_path / "lid.pt", cfg=TINY, steps=4, eval_every=4, seed=0, **KW)
    from streamkit.eval.bench import rnnt_multilingual as bench
    out = tmp_path / "res.json"
    args = ["--corpus", str(corpus), "--model", f"lid={tmp_path / 'lid.pt'}", "--limit", "1", "--sweep", "--beam", "2", "--out", str(out)]
    assert bench.main(args) == 0
    assert rnnt_mod.load_model is bench._load_model  # the benchmark's model cache is undone
    res = json.loads(out.read_text())
    modes = [r["mode"] for r in res["rows"]]
    assert modes[:2] == ["known", "lid-free"] and modes.count("sweep") == 15
    for r in res["rows"]:
        assert set(r["wer"]) == {"en", "hi"} and r["utterances"] == 2 and r["missing_finals"] == 0
        assert 0 < r["decoder_cpu_per_audio_s"] <= r["rt_cpu"] and 1.0 <= r["t_avg"] <= 2.0
    assert res["rows"][0]["lid_acc"] is None and res["rows"][1]["t_avg"] == 2.0
    assert str(tmp_path) not in json.dumps(res) and "machine" in res
    assert res["decoding"]["boundaries"].startswith("whole corpus files")

    # --lexicon and --sweep-lid-select: every row constrained to the word files, the sweep with the last-frame rule
    lexd = tmp_path / "lexd"
    lexd.mkdir()
    for lg in ("en", "hi"):
        ws = {w for r in asr_corpus.read_jsonl(corpus / "test.jsonl") if r["lang"] == lg for w in r["text"].split()}
        (lexd / f"{lg}.words.txt").write_text("\n".join(sorted(ws)) + "\n", encoding="utf-8")
    out3 = tmp_path / "lex.json"
    assert bench.main([*args[:-2], "--sweep-lid-select", "last", "--lexicon", str(lexd), "--word-penalty", "0.5", "--out", str(out3)]) == 0
    res3 = json.loads(out3.read_text())
    assert res3["decoding"]["lexicon"] == "<lang>.words.txt in lexd/" and res3["decoding"]["word_penalty"] == 0.5
    assert all(r["lexicon"] == "lexd" and r["word_penalty"] == 0.5 for r in res3["rows"])
    sweep = [r for r in res3["rows"] if r["mode"] == "sweep"]
    assert len(sweep) == 15 and all(r["lid_select"] == "last" for r in sweep)
    assert str(tmp_path) not in json.dumps(res3)

    # --sweep-points keeps the named grid points; --sweep-lid-score last reaches the block
    out4 = tmp_path / "pts.json"
    assert bench.main([*args[:-2], "--sweep-points", "inf:inf,30:0.5", "--sweep-lid-score", "last", "--out", str(out4)]) == 0
    sweep = [r for r in json.loads(out4.read_text())["rows"] if r["mode"] == "sweep"]
    assert [(r["tau_frames"], r["s_th"]) for r in sweep] == [(None, None), (30, 0.5)]
    assert all(r["lid_score"] == "last" for r in sweep)
    with pytest.raises(SystemExit):
        bench.main([*args[:-2], "--sweep-points", "30", "--out", str(out4)])

    # --trim: utterances cut to the records' speech_start/stop +- margin (the fake corpus has none: a clear exit)
    with pytest.raises(SystemExit, match="speech_start"):
        bench.main(args[:-2] + ["--trim", "0.05", "--out", str(tmp_path / "t.json")])
    trimmed = tmp_path / "trimmed"
    shutil.copytree(corpus, trimmed)
    recs = [json.loads(x) for x in (trimmed / "test.jsonl").read_text().splitlines()]
    for r in recs:
        r["speech_start"], r["speech_stop"] = 800, r["n_samples"] - 800  # _audio pads 800 samples of silence each side
    (trimmed / "test.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    out2 = tmp_path / "t.json"
    args2 = ["--corpus", str(trimmed), "--model", f"lid={tmp_path / 'lid.pt'}", "--limit", "1", "--beam", "2", "--trim", "0.05", "--out", str(out2)]
    assert bench.main(args2) == 0
    res2 = json.loads(out2.read_text())
    assert res2["decoding"]["boundaries"] == "speech only: the corpus records' speech_start/speech_stop +- 0.05 s"
    # one utterance per language, each cut by 800 - 400 samples on both sides (audio_s is rounded to 0.1 s)
    trimmed_s = sum(r["n_samples"] - 800 for r in recs if r["id"].endswith("_000000")) / 8000
    assert res2["rows"][0]["audio_s"] == pytest.approx(trimmed_s, abs=0.051)


@pytest.mark.parametrize("variant", ["lid", "vanilla", "onehot", "lsp"])
def test_batched_greedy_equals_the_streaming_search_with_beam_1(variant):
    from streamkit.models.rnnt import BLANK, RnntModel
    from streamkit.models.rnnt_search import MultiDecoder

    torch.manual_seed(4)
    cfg = RnntConfig(variant=variant, languages=("en", "hi"), vocab_sizes=(6, 5), feat_dim=12, enc_layers=1, enc_hidden=10,
                        pred_hidden=8, embed_dim=4, joint_dim=8)  # fmt: skip
    m = RnntModel(cfg).eval()
    with torch.no_grad():
        for j in m.joints:
            j.out.bias[BLANK] -= 0.5  # emit often, several symbols per frame
    x = torch.randn(3, 30, 12)
    lens = torch.tensor([30, 17, 5])
    for lg in range(2):
        enc = m.encode(x, lg)
        got = greedy_decode(m, enc, lens, lg, max_symbols=2)
        assert any(len(g) > 0 for g in got)
        for b in range(3):
            d = MultiDecoder(m, beam=1, max_symbols_per_frame=2, languages=[lg])
            d.advance_frames(enc[b, : int(lens[b])])
            assert list(d.result().tokens) == got[b], (variant, lg, b)


def test_mixed_batching_and_per_utterance_lid_loss(corpus, tmp_path):
    losses = []
    card = tr.train(corpus, tmp_path / "m.pt", cfg=TINY, steps=30, eval_every=15, seed=5, batching="mixed", lid_loss="utt-sum",
                    on_step=lambda s, v: losses.append(v), **KW)  # fmt: skip
    assert np.mean(losses[-6:]) < 0.6 * np.mean(losses[:6]), losses
    per = card["training"]["steps_per_language"]
    assert set(per) == {"en", "hi"} and abs(sum(per.values()) - 30) < 0.5 and min(per.values()) > 0  # batches hold both languages
    assert "--batching mixed --lid-loss utt-sum" in card["training"]["command"] and "summed per utterance" in card["training"]["loss"]
    ck = torch.load(tmp_path / "m.ckpt", weights_only=False)
    assert ck["run"]["batching"] == "mixed" and ck["run"]["lid_loss"] == "utt-sum"
    with pytest.raises(ValueError, match="another run"):  # the options are part of the run
        tr.train(corpus, tmp_path / "m.pt", cfg=TINY, steps=30, eval_every=15, seed=5, resume=True, **KW)


@pytest.mark.parametrize("bad", [{"batching": "random"}, {"lid_loss": "sum"}])
def test_bad_batching_or_lid_loss(corpus, tmp_path, bad):
    with pytest.raises(ValueError, match="must be one of"):
        tr.train(corpus, tmp_path / "m.pt", cfg=TINY, steps=2, **{**KW, **bad})


def test_edit_distances():
    assert word_errors("a bc d", "a bd d e") == (2, 3)  # one substitution, one insertion
    assert char_errors("ab cd", "abd") == (2, 5)  # "ab cd" -> "abd": delete " " and "c"
    assert char_errors("", "") == (0, 0) and word_errors("x y", "") == (2, 2)


def test_init_from_an_earlier_run(corpus, tmp_path):
    tr.train(corpus, tmp_path / "a.pt", cfg=TINY, steps=30, eval_every=30, seed=6, **KW)
    first = {}
    for name, init in (("scratch", None), ("warm", tmp_path / "a.pt")):
        losses: list[float] = []
        card = tr.train(corpus, tmp_path / f"{name}.pt", cfg=TINY, steps=2, eval_every=2, seed=7, init_from=init,
                        on_step=lambda s, v, out=losses: out.append(v), **KW)  # fmt: skip
        first[name] = losses[0]
    assert first["warm"] < 0.7 * first["scratch"], first  # the earlier run's weights, not a fresh model
    assert "--init-from a.pt" in card["training"]["command"]
    # the loss weighting and dropout are the new run's own: not an architecture mismatch
    retuned = RnntConfig(**{**TINY.to_dict(), "lid_weight": 3.0, "dropout": 0.1})
    card = tr.train(corpus, tmp_path / "retuned.pt", cfg=retuned, steps=1, eval_every=1, seed=7, init_from=tmp_path / "a.pt", **KW)
    assert card["config"]["lid_weight"] == 3.0 and card["config"]["dropout"] == 0.1
    assert "--init-from a.pt" in card["training"]["command"]
    other = RnntConfig(**{**TINY.to_dict(), "enc_hidden": 16})
    with pytest.raises(ValueError, match="--init-from"):
        tr.train(corpus, tmp_path / "b.pt", cfg=other, steps=2, init_from=tmp_path / "a.pt", **KW)
    with pytest.raises(ValueError, match="not found"):
        tr.train(corpus, tmp_path / "b.pt", cfg=TINY, steps=2, init_from=tmp_path / "missing.pt", **KW)


def test_init_from_takes_the_ctc_heads_of_the_earlier_checkpoint(corpus, tmp_path, capsys):
    """The weight file has no CTC heads; --init-from loads them from <stem>.ckpt, so the first steps start from trained ones."""
    tr.train(corpus, tmp_path / "a.pt", cfg=TINY, steps=30, eval_every=30, seed=6, **KW)
    kw = {**KW, "quiet": False}
    first = {}
    for name in ("with", "without"):
        if name == "without":
            (tmp_path / "a.ckpt").rename(tmp_path / "moved.ckpt")
        losses: list[float] = []
        tr.train(corpus, tmp_path / f"{name}.pt", cfg=TINY, steps=1, eval_every=1, seed=7, init_from=tmp_path / "a.pt",
                 on_step=lambda s, v, out=losses: out.append(v), **kw)  # fmt: skip
        first[name] = losses[0]
        log = capsys.readouterr().out
        assert ("--init-from: CTC heads from a.ckpt (step 30)" in log) == (name == "with"), log
    assert "no checkpoint a.ckpt beside it: the CTC heads start fresh" in log
    assert first["with"] < first["without"], first


def test_stop_after_pauses_and_resume_goes_on_bit_exact(corpus, tmp_path):
    full = tr.train(corpus, tmp_path / "full.pt", cfg=TINY, steps=12, eval_every=6, seed=9, **KW)
    part = tr.train(corpus, tmp_path / "part.pt", cfg=TINY, steps=12, eval_every=6, seed=9, stop_after=6, **KW)
    assert part["training"]["steps"] == 6 and part["status"] == "in progress"
    done = tr.train(corpus, tmp_path / "part.pt", cfg=TINY, steps=12, eval_every=6, seed=9, resume=True, **KW)
    assert done["training"]["steps"] == 12 and done["status"] == "finished"
    a, _ = load_model(tmp_path / "full.pt")
    b, _ = load_model(tmp_path / "part.pt")
    assert all(torch.equal(x, y) for x, y in zip(a.state_dict().values(), b.state_dict().values()))
    assert [h["rnnt_loss"] for h in full["dev"]["history"]] == [h["rnnt_loss"] for h in done["dev"]["history"]]


def test_device_errors(corpus, tmp_path, capsys):
    with pytest.raises(ValueError, match="--device"):
        tr.train(corpus, tmp_path / "d.pt", cfg=TINY, steps=1, device="gpu7", **KW)
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="sees no CUDA device"):
            tr.train(corpus, tmp_path / "d.pt", cfg=TINY, steps=1, device="cuda", **KW)
    ns = tr.add_arguments(argparse.ArgumentParser()).parse_args(
        ["--corpus", str(corpus), "--out", str(tmp_path / "d.pt"), "--steps", "1", "--device", "nonsense"]
    )
    assert tr.run_from_args(ns) == 2
    assert "--device" in capsys.readouterr().err
    assert not (tmp_path / "d.pt").exists() and not (tmp_path / "d.ckpt").exists()


def test_explicit_cpu_device_is_the_default_run(corpus, tmp_path):
    kw = dict(cfg=TINY, steps=6, eval_every=3, seed=2, **KW)
    a = tr.train(corpus, tmp_path / "a.pt", **kw)
    b = tr.train(corpus, tmp_path / "b.pt", device="cpu", **kw)
    assert a["training"]["device"] == b["training"]["device"] == "cpu" and "--device" not in b["training"]["command"]
    ma, mb = torch.load(tmp_path / "a.ckpt", weights_only=False)["model"], torch.load(tmp_path / "b.ckpt", weights_only=False)["model"]
    assert all(torch.equal(v, mb[k]) for k, v in ma.items())


def test_monolingual_run_and_its_benchmark_row(corpus, tmp_path, capsys):

    cfg = RnntConfig(**{**TINY.to_dict(), "variant": "multisoftmax"})
    card = tr.train(corpus, tmp_path / "hi.pt", cfg=cfg, steps=4, eval_every=4, seed=0, languages=["hi"], **KW)
    assert card["corpus"]["languages"] == ["hi"] and list(card["corpus"]["train_hours"]) == ["hi"]
    assert card["corpus"]["train_utterances"] == 6 and card["config"]["languages"] == ["hi"]
    assert "--languages hi" in card["training"]["command"] and set(card["dev"]["history"][-1]["utterances"]) == {"hi"}
    model, meta = load_model(tmp_path / "hi.pt")
    assert model.cfg.languages == ("hi",) and list(meta["symbols"]) == ["hi"]
    with pytest.raises(ValueError, match="another run"):  # the language subset is part of the run
        tr.train(corpus, tmp_path / "hi.pt", cfg=cfg, steps=4, eval_every=4, seed=0, resume=True, **KW)
    for bad in (["fr"], [], ["hi", "hi"]):
        with pytest.raises(tr.CorpusError, match="--languages"):
            tr.train(corpus, tmp_path / "x.pt", cfg=cfg, steps=1, languages=bad, **KW)
    c = tr.AsrCorpus(corpus, ["hi", "en"])  # the corpus's order, whatever the order asked
    assert c.langs == ["en", "hi"] and c.all_langs == ["en", "hi"]

    from streamkit.eval.bench import rnnt_multilingual as bench
    out = tmp_path / "mono.json"
    assert bench.main(["--corpus", str(corpus), "--mono", f"hi={tmp_path / 'hi.pt'}", "--limit", "2", "--beam", "2", "--out", str(out)]) == 0
    res = json.loads(out.read_text())
    (row,) = res["rows"]
    assert row["model"] == "monolingual" and row["mode"] == "known" and set(row["wer"]) == {"hi"}
    assert row["utterances"] == 2 and row["missing_finals"] == 0 and row["lid_acc"] is None
    assert res["models"]["monolingual hi"]["config"]["languages"] == ["hi"]
    for args, msg in (
        (["--mono", f"en={tmp_path / 'hi.pt'}"], "not \\['en'\\]"),
        (["--mono", f"fr={tmp_path / 'hi.pt'}"], "LANG=PATH"),
        ([], "--model or --mono"),
    ):
        with pytest.raises(SystemExit):
            bench.main(["--corpus", str(corpus), *args, "--out", str(tmp_path / "bad.json")])
        assert re.search(msg, capsys.readouterr().err)


def test_weights_from_last_and_the_rewrite_on_resume(corpus, tmp_path):
    kw = dict(cfg=TINY, steps=8, eval_every=4, seed=4, **KW)
    card = tr.train(corpus, tmp_path / "m.pt", weights_from="last", **kw)
    assert card["dev"]["weights"] == "the last step's state (step 8)" and card["training"]["command"].endswith("--weights-from last")
    model, meta = load_model(tmp_path / "m.pt")
    ck = torch.load(tmp_path / "m.ckpt", weights_only=False)
    assert meta["step"] == 8 and meta["weights_from"] == "last"
    assert all(torch.equal(v, ck["model"][k]) for k, v in model.state_dict().items())
    # the same finished run, resumed with the default: the weight file becomes the best dev-loss state
    card2 = tr.train(corpus, tmp_path / "m.pt", resume=True, **kw)
    model2, meta2 = load_model(tmp_path / "m.pt")
    best = ck["state"]["best_step"]
    assert meta2["step"] == best and card2["dev"]["weights"] == f"the best dev loss (step {best})"
    assert all(torch.equal(v, ck["best_state"][k]) for k, v in model2.state_dict().items())
    with pytest.raises(ValueError, match="--weights-from"):
        tr.train(corpus, tmp_path / "m.pt", weights_from="middle", **kw)


def test_offline_lid_benchmark(corpus, tmp_path, capsys):
    """streamkit.eval.bench.rnnt_lid_offline (benchmarks/rnnt_lid_offline.py): decisions from the encoder and LID head, confusion matrices, errors."""

    from streamkit.eval.bench import rnnt_lid_offline as bench
    gru = RnntConfig(**{**TINY.to_dict(), "lid_hidden": 8})  # a recurrent head, as the shipped model's
    tr.train(corpus, tmp_path / "lid.pt", cfg=gru, steps=6, eval_every=6, seed=1, **KW)
    out = tmp_path / "lid.json"
    assert bench.main(["--corpus", str(corpus), "--model", f"tiny={tmp_path / 'lid.pt'}", "--limit", "2", "--out", str(out)]) == 0
    res = json.loads(out.read_text())
    assert str(tmp_path) not in json.dumps(res) and res["corpus_command"] == "fake tones (tests)"
    (row,) = res["rows"]
    assert row["model"] == "tiny" and row["file"] == "lid.pt" and set(row["splits"]) == {"dev", "test"}
    model, _ = load_model(tmp_path / "lid.pt")
    utts = bench.pick(tr.AsrCorpus(corpus).split("test"), ["en", "hi"], 2)
    with torch.inference_mode():  # the last-frame rule by hand, stepping the LID head frame by frame as the streaming block does
        want = []
        for lm in compute_logmel(utts):
            enc, state = model.encode(stacked(lm)[None]), None
            for t in range(enc.shape[1]):
                logit, state = model.lid_step(enc[:, t : t + 1], state)
            want.append(int(logit[0, -1].argmax()))
    test = row["splits"]["test"]
    ref = [u.lang for u in utts]
    conf = np.zeros((2, 2), dtype=int)
    np.add.at(conf, (ref, want), 1)
    assert test["utterances"] == 4 and test["last"]["confusion"] == conf.tolist()
    for rule in ("last", "mean", "last+prior", "mean+prior"):
        c = np.array(test[rule]["confusion"])
        assert c.sum() == 4 and test[rule]["accuracy"] == round(100.0 * np.trace(c) / 4, 2)
        assert test[rule]["macro"] == pytest.approx(np.mean(list(test[rule]["per_language"].values())), abs=0.01)
    # the prior rules: the training hours the trainer recorded, applied as the block's LidShutoff.select does
    _, meta = load_model(tmp_path / "lid.pt")
    assert row["prior"] == meta["train_hours"] and set(meta["train_hours"]) == {"en", "hi"}
    from streamkit.models.rnnt_search import LidShutoff

    prior = [meta["train_hours"][lg] for lg in ("en", "hi")]
    for rule, sel in (("last+prior", "last"), ("mean+prior", "mean")):
        got = []
        with torch.inference_mode():
            for lm in compute_logmel(utts):
                sh = LidShutoff(2, prior=prior)
                for row_lp in model.lid_logits(model.encode(stacked(lm)[None]))[0].log_softmax(-1):
                    sh.update(row_lp)
                got.append(sh.select(sel))
        c = np.zeros((2, 2), dtype=int)
        np.add.at(c, (ref, got), 1)
        assert test[rule]["confusion"] == c.tolist()
    # the offline shutoff: the block's rule fed the head's frame-by-frame posteriors, both statistics
    from streamkit.models.rnnt_search import MultiDecoder

    assert set(test["shutoff"]) == {f"{st} tau {t} s_th {s:g}" for st in ("sum", "last", "sum+prior", "last+prior") for t, s in bench.SHUTOFF_POINTS}
    for v in test["shutoff"].values():
        alive, right, tav = 0, 0, []
        with torch.inference_mode():
            for u, lm in zip(utts, compute_logmel(utts)):
                md = MultiDecoder(model, beam=1, tau=v["tau_frames"], s_th=v["s_th"], lid_score=v["statistic"], lid_select="last",
                                  lid_prior=prior if v["prior"] else None)  # fmt: skip
                md.reset()
                md.advance_frames(model.encode(stacked(lm)[None])[0])
                alive += md.lid.active[u.lang]
                right += md.result().lang == u.lang
                tav.append(md.lid.t_avg)
        assert v["reference_survives"] == round(100.0 * alive / 4, 2) and v["t_avg"] == pytest.approx(np.mean(tav), abs=1e-3)
        assert v["lid_last"] == round(100.0 * right / 4, 2)
    ms = RnntConfig(**{**TINY.to_dict(), "variant": "multisoftmax"})
    tr.train(corpus, tmp_path / "ms.pt", cfg=ms, steps=1, eval_every=1, seed=1, **KW)
    for args, msg in ((["--model", str(tmp_path / "lid.pt")], "NAME=PATH"), (["--model", f"ms={tmp_path / 'ms.pt'}"], "no LID head")):
        with pytest.raises(SystemExit):
            bench.main(["--corpus", str(corpus), *args, "--out", str(tmp_path / "bad.json")])
        assert msg in capsys.readouterr().err


def test_lexicon_grid_benchmark(corpus, tmp_path, capsys):
    """streamkit.eval.bench.rnnt_lexicon_grid (benchmarks/rnnt_lexicon_grid.py): WER per grid point equals decoding by hand; bad grids are usage errors."""

    import jiwer

    from streamkit.eval.bench import rnnt_lexicon_grid as bench
    from streamkit.models.rnnt import BLANK, save_model
    from streamkit.models.rnnt_lexicon import model_lexicons, word_lists
    from streamkit.models.rnnt_search import MultiDecoder
    from streamkit.models.rnnt_stream import symbol_tables

    tr.train(corpus, tmp_path / "m0.pt", cfg=TINY, steps=6, eval_every=6, seed=1, **KW)
    model, meta = load_model(tmp_path / "m0.pt")
    with torch.no_grad():  # a talkative model, so that there are words to constrain
        for j in model.joints:
            j.out.bias[BLANK] -= 4.0
    save_model(tmp_path / "m.pt", model, meta=meta)
    lex = tmp_path / "lex"
    lex.mkdir()
    for lg in ("en", "hi"):  # the words of the test transcripts and a few others
        ws = {w for r in asr_corpus.read_jsonl(corpus / "test.jsonl") if r["lang"] == lg for w in r["text"].split()}
        (lex / f"{lg}.words.txt").write_text("\n".join(sorted(ws | {LETTERS[lg][0] * 3})) + "\n", encoding="utf-8")
    out = tmp_path / "grid.json"
    args = ["--corpus", str(corpus), "--model", str(tmp_path / "m.pt"), "--split", "test", "--limit", "2", "--lexicon", str(lex), "--out", str(out)]
    assert bench.main([*args, "--grid", "2:none,2:0,3:0.2"]) == 0
    res = json.loads(out.read_text())
    assert str(tmp_path) not in json.dumps(res) and res["lexicon"] == "lex" and res["utterances"] == 4
    assert [(r["beam"], r["word_penalty"], r["lexicon"]) for r in res["rows"]] == [(2, None, False), (2, 0.0, True), (3, 0.2, True)]
    model, meta = load_model(tmp_path / "m.pt")
    lexicons = model_lexicons(model.cfg, symbol_tables(model.cfg, meta), word_lists(lex, ["en", "hi"]), word_penalty=0.2)
    utts = bench.pick(tr.AsrCorpus(corpus).split("test"), ["en", "hi"], 2)
    refs, hyps = {0: [], 1: []}, {0: [], 1: []}
    vocabs = tr.AsrCorpus(corpus).vocabs
    with torch.inference_mode():
        for u, lm in zip(utts, compute_logmel(utts)):
            d = MultiDecoder(model.float().eval(), beam=3, languages=[u.lang], lexicons=lexicons)
            d.reset()
            d.advance_frames(model.encode(stacked(lm)[None])[0])
            refs[u.lang].append(u.text)
            hyps[u.lang].append(vocabs[u.lang].decode(d.result().tokens))
    row = res["rows"][2]
    for g, lg in enumerate(("en", "hi")):
        assert row["wer"][lg] == round(100 * jiwer.wer(refs[g], hyps[g]), 2)
        assert all(w in word_lists(lex, [lg])[lg] for h in hyps[g] for w in h.split())
    assert any(hyps[0]) and any(hyps[1]) and res["rows"][0]["wer"] != res["rows"][1]["wer"]  # not vacuous
    assert res["best_lexicon_point"]["wer_avg"] == min(r["wer_avg"] for r in res["rows"][1:])
    with pytest.raises(SystemExit):
        bench.main([*args, "--grid", "2"])
    assert "BEAM:PENALTY" in capsys.readouterr().err

