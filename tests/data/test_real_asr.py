"""``streamkit corpus real-asr``: English game voices with their file-name transcripts, the train/eval
package separation, the mixed corpus in the ``corpus asr`` layout, and the CLI error paths.

No network and no real package: the package trees are faked in ``tmp_path`` with generated audio.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from streamkit.cli import main
from streamkit.data import asr_corpus
from streamkit.data import real_asr as ra
from streamkit.train.rnnt_corpus import AsrCorpus

HW = "usr/share/games/hedgewars/Data/Sounds"
PINGUS = "usr/share/games/pingus/data/sounds"


def _tone(rate: int, seconds: float = 0.6, f: float = 300.0) -> np.ndarray:
    t = np.arange(int(seconds * rate)) / rate
    return (0.4 * np.sin(2 * np.pi * f * t)).astype(np.float32)


def _write(root: Path, rel: str, rate: int = 22050) -> None:
    p = root / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    sf.write(str(p), _tone(rate), rate)


@pytest.fixture()
def roots(tmp_path: Path) -> dict[str, Path]:
    hw, pg = tmp_path / "hedgewars-data", tmp_path / "pingus-data"
    for rel in ("Default/Incoming.ogg", "Default/Youllregretthat.ogg", "Default/Firstblood2.ogg", "Pirate/Takecover.ogg",
                "Surfer/Fire.ogg", "Surfer/Hello.ogg",
                "Default/Ow1.ogg", "Default/Laugh.ogg",  # vocalisations: not speech
                "Default_es/Incoming.ogg", "Russian/Fire.ogg",  # other languages
                "Default/Mysteryphrase.ogg", "Singer/Hello.ogg"):  # fmt: skip
        _write(hw, f"{HW}/voices/{rel}")
    _write(hw, f"{HW}/Explosion.ogg")  # a sound effect
    _write(pg, f"{PINGUS}/letsgo.wav", 44100)
    _write(pg, f"{PINGUS}/yipee.wav", 44100)
    _write(pg, f"{PINGUS}/boing.wav", 44100)
    return {"hedgewars-data": hw, "pingus-data": pg}


def _fake_asr_corpus(root: Path) -> Path:
    """A two-language ``corpus asr`` directory with one utterance per split and language."""
    langs = ["en", "hi"]
    (root / "vocab").mkdir(parents=True)
    recs: dict[str, list[dict]] = {s: [] for s in asr_corpus.SPLITS}
    texts = {"en": "hello there", "hi": "नमस्ते"}
    for lg in langs:
        v = asr_corpus.build_vocab(lg, None if lg == "en" else texts[lg].split())  # en: the model's vocabulary
        v.save(root / "vocab" / f"{lg}.json")
        for s in asr_corpus.SPLITS:
            rel = f"{s}/{lg}/{lg}_{s}_000000.wav"
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            sf.write(str(root / rel), _tone(8000), 8000, subtype="PCM_16")
            recs[s].append({"id": f"{lg}_{s}_000000", "lang": lg, "split": s, "path": rel, "text": texts[lg], "n_samples": 4800})
    for s, rs in recs.items():
        (root / f"{s}.jsonl").write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rs), encoding="utf-8")
    man = {"format": asr_corpus.FORMAT, "hours_per_language": {"en": 0.001, "hi": 0.001}, "rate": 8000, "command": "fake"}
    (root / "manifest.json").write_text(json.dumps(man), encoding="utf-8")
    return root


def test_phrases_from_file_names(roots: dict[str, Path]) -> None:
    utts, skipped = ra.utterances(roots)
    got = sorted((u.package, u.voice, u.text) for u in utts)
    assert got == [
        ("hedgewars-data", "Default", "first blood"),
        ("hedgewars-data", "Default", "incoming"),
        ("hedgewars-data", "Default", "youll regret that"),
        ("hedgewars-data", "Pirate", "take cover"),
        ("hedgewars-data", "Surfer", "fire"),
        ("hedgewars-data", "Surfer", "hello"),
        ("pingus-data", "pingus", "lets go"),
    ]
    assert skipped == {"other_language": 2, "unknown_phrase": 1}  # Default_es, Russian; Mysteryphrase
    vocab = asr_corpus.build_vocab("en")
    for text in ra.PHRASES.values():  # every transcript fits the model's English vocabulary
        assert vocab.encode(text)


@pytest.mark.parametrize("package", ["pocketsphinx-testdata", "asterisk-core-sounds-en-wav", "codec2-examples"])
def test_evaluation_packages_are_refused(roots: dict[str, Path], tmp_path: Path, package: str) -> None:
    with pytest.raises(ra.RealAsrError, match="evaluation-only"):
        ra.utterances({**roots, package: tmp_path})
    with pytest.raises(ra.RealAsrError, match="evaluation-only"):
        ra.phrases(package, tmp_path)
    with pytest.raises(ra.RealAsrError, match="evaluation-only"):
        ra.build(tmp_path / "out", {**roots, package: tmp_path})
    assert not (tmp_path / "out").exists()


def test_training_package_without_english_text_and_unknown_package(roots: dict[str, Path], tmp_path: Path) -> None:
    with pytest.raises(ra.RealAsrError, match="no English speech with known text"):
        ra.utterances({"fillets-ng-data-cs": tmp_path})
    with pytest.raises(ra.RealAsrError, match="not a pinned training package"):
        ra.utterances({"some-package": tmp_path})
    with pytest.raises(ra.RealAsrError, match="not found"):
        ra.utterances({"hedgewars-data": tmp_path / "nowhere"})


def test_build_alone_splits_by_voice_pack(roots: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "R"
    man = ra.build(out, roots, repeat=3, seed=1)
    c = AsrCorpus(out)
    assert c.langs == ["en"]
    train, dev = c.split("train"), c.split("dev")
    assert len(train) == 5 * 3 and len(dev) == 2  # Surfer's two clips once, clean; the others three times
    assert {u.text for u in dev} == {"fire", "hello"}
    assert (out / "test.jsonl").read_text() == ""  # no real test split here
    recs = asr_corpus.read_jsonl(out / "train.jsonl")
    assert {r["voice"].split(":")[1] for r in recs} == {"Default", "Pirate", "pingus"}
    x, sr = sf.read(str(out / recs[0]["path"]))
    assert sr == 8000 and len(x) == recs[0]["n_samples"] and np.abs(x).max() > 0.1
    copies = [sf.read(str(out / r["path"]))[0] for r in recs if r["source"] == recs[0]["source"]]
    assert len(copies) == 3 and not np.array_equal(copies[0], copies[1])  # each copy its own draw
    assert man["real_english"]["packages"][0]["licence"] and man["real_english"]["skipped"]["unknown_phrase"] == 1
    assert ra.build(tmp_path / "R2", roots, repeat=3, seed=1)["real_english"] == man["real_english"]
    for r in asr_corpus.read_jsonl(tmp_path / "R2" / "train.jsonl"):  # deterministic by seed
        assert np.array_equal(sf.read(str(tmp_path / "R2" / r["path"]))[0], sf.read(str(out / r["path"]))[0])


def test_build_mixed_with_a_synthetic_corpus(roots: dict[str, Path], tmp_path: Path) -> None:
    syn = _fake_asr_corpus(tmp_path / "C")
    out = tmp_path / "M"
    ra.build(out, roots, mix=syn, repeat=2)
    c = AsrCorpus(out)
    assert c.langs == ["en", "hi"]
    train = c.split("train")
    assert sum(u.path.resolve().is_relative_to(syn.resolve()) for u in train) == 2  # the synthetic ones, through the link
    assert sum(u.lang == 0 for u in train) == 5 * 2 + 1 and sum(u.lang == 1 for u in train) == 1
    assert [u.text for u in c.split("test")] == ["hello there", "नमस्ते"]  # the synthetic test split alone
    assert all(u.path.is_file() for u in train)
    small = _fake_asr_corpus(tmp_path / "C_small")  # an English vocabulary without the letters of the phrases
    asr_corpus.build_vocab("en", ["hello", "there"]).save(small / "vocab" / "en.json")
    with pytest.raises(ra.RealAsrError, match="does not fit the English vocabulary"):
        ra.build(tmp_path / "M_small", roots, mix=small)
    ra.build(out, roots, mix=syn, repeat=2)  # again over the same directory: the link is reused
    (out / "synthetic").unlink()
    (out / "synthetic").mkdir()
    with pytest.raises(ra.RealAsrError, match="not a link"):
        ra.build(out, roots, mix=syn)


def test_cli(roots: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    fetched: list[str] = []

    def fake_fetch(cache: str, dest: str, progress: object = None) -> dict[str, Path]:
        fetched.append(cache)
        return roots

    monkeypatch.setattr(ra, "fetch_sources", fake_fetch)
    out = tmp_path / "out"
    for args, msg in ((["--repeat", "0"], "--repeat must be >= 1"), (["--augment-prob", "2"], "--augment-prob must be in"),
                      (["--mix", str(tmp_path / "none")], "not a `streamkit corpus asr` corpus")):  # fmt: skip
        assert main(["corpus", "real-asr", "--out", str(out), *args]) == 2
        err = capsys.readouterr().err
        assert err.startswith("error: ") and msg in err and err.count("\n") == 1
    assert not fetched  # options are checked before anything is fetched
    assert main(["corpus", "real-asr", "--out", str(out), "--dev-voices", "Nobody"]) == 2
    assert "dev voice(s) Nobody not found" in capsys.readouterr().err
    assert main(["corpus", "real-asr", "--out", str(out), "--repeat", "2", "--augment", "none"]) == 0
    stdout = capsys.readouterr().out
    assert "7 clips of 4 voices" in stdout and "train 10 utterances" in stdout and "left out: other_language 2, unknown_phrase 1" in stdout
    assert fetched[-1] == str(out / "debs")
    man = json.loads((out / "manifest.json").read_text())
    assert man["real_english"]["augment"] == "none" and man["real_english"]["dev_voices"] == ["Surfer"]
