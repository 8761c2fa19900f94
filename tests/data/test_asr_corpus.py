"""Multilingual ASR corpus generator. Needs espeak-ng and the Debian dictionaries (hunspell-en-us,
hunspell-hi, hunspell-gu, aspell-ta): .ci/setup installs them; no skip."""

from __future__ import annotations

import argparse
import json
import unicodedata
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from streamkit.cli import corpus as cli_corpus
from streamkit.data import asr_corpus as ac
from streamkit.data import wordlists
from streamkit.data.tts import Voice

HOURS = {lang: 20 / 3600 for lang in ac.LANGS}  # 20 s per language: 16 s train, 2 s dev, 2 s test


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    out = tmp_path_factory.mktemp("asr") / "a"
    man = ac.generate(out, HOURS, seed=5)
    return out, man


def _records(out: Path) -> dict[str, list[dict]]:
    return {s: ac.read_jsonl(out / f"{s}.jsonl") for s in ac.SPLITS}


def test_manifest_and_jsonl_match_the_files(corpus: tuple[Path, dict]) -> None:
    out, man = corpus
    assert man == json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    assert man["format"] == ac.FORMAT and man["seed"] == 5 and man["rate"] == 8000
    assert man["espeak_ng"] and set(man["hours_per_language"]) == set(ac.LANGS)
    assert "--seed 5" in man["command"] and "en=0.00555556" in man["command"]
    recs = _records(out)
    listed = set()
    for split, rs in recs.items():
        for lang in ac.LANGS:
            mine = [r for r in rs if r["lang"] == lang]
            c = man["counts"][lang][split]
            assert c["utterances"] == len(mine) >= 1
            assert c["samples"] == sum(r["n_samples"] for r in mine)
            # each split stops at the first utterance that fills its share
            share = HOURS[lang] * 3600 * 8000 * man["splits"][split]
            assert c["samples"] >= share and c["samples"] - mine[-1]["n_samples"] < share
        for r in rs:
            assert r["split"] == split and r["path"] == f"{split}/{r['lang']}/{r['id']}.wav"
            info = sf.info(out / r["path"])
            assert info.samplerate == 8000 and info.channels == 1 and info.subtype == "PCM_16" and info.frames == r["n_samples"]
            assert 0 < r["speech_start"] < r["speech_stop"] < r["n_samples"]
            assert ac.RATE_WPM[0] <= r["rate"] <= ac.RATE_WPM[1] and ac.PITCH[0] <= r["pitch"] <= ac.PITCH[1]
            assert r["tts_text"] == r["text"] + "."
            listed.add(r["path"])
    on_disk = {str(p.relative_to(out)) for p in out.rglob("*.wav")}
    assert on_disk == listed  # utterances made past a split's cut are removed
    assert len({r["id"] for rs in recs.values() for r in rs}) == len(listed)
    # augmentation: some utterances through the channel, parameters recorded
    chans = [r["channel"] for rs in recs.values() for r in rs if r["channel"] is not None]
    assert chans and all("snr_db" in c and "seed" in c for c in chans)


def test_speakers_disjoint_across_splits(corpus: tuple[Path, dict]) -> None:
    out, man = corpus
    recs = _records(out)
    for lang in ac.LANGS:
        sets = {s: set(man["speakers"][lang][s]) for s in ac.SPLITS}
        assert not sets["train"] & sets["dev"] and not sets["train"] & sets["test"] and not sets["dev"] & sets["test"]
        assert set().union(*sets.values()) == set(ac.speakers(lang))
        assert len(sets["dev"]) >= 1 and len(sets["test"]) >= 1
        for split, rs in recs.items():
            for r in rs:
                if r["lang"] == lang:
                    assert r["voice"] in sets[split]
                    assert Voice.parse(r["voice"]).language in ac.ESPEAK_VOICES[lang]


def test_texts_only_in_their_script(corpus: tuple[Path, dict]) -> None:
    out, _ = corpus
    for rs in _records(out).values():
        for r in rs:
            words = r["text"].split(" ")
            assert ac.WORDS_PER_UTT[0] <= len(words) <= ac.WORDS_PER_UTT[1]
            assert r["text"] == unicodedata.normalize("NFC", r["text"])
            for w in words:
                assert wordlists.in_script(w, r["lang"]), (r["lang"], w)
                assert not any(wordlists.in_script(w, o) for o in ac.LANGS if o != r["lang"])


def test_word_lists() -> None:
    for lang in ac.LANGS:
        ws = wordlists.words(lang)
        assert len(ws) > 10_000 and list(ws) == sorted(set(ws))
        assert all(unicodedata.category(w[0])[0] == "L" for w in ws[:: max(1, len(ws) // 500)])
    assert not wordlists.in_script("hello", "hi") and wordlists.in_script("नमस्ते", "hi") and not wordlists.in_script("Hello", "en")
    with pytest.raises(ValueError, match="unknown language"):
        wordlists.words("xx")


def test_read_prezip() -> None:
    # "ab", "abc", "abd", then a word keeping 0x1E + 0xFF + 2 = 287 bytes of a long word, and an escape
    long = b"x" * 300
    data = b"\x02\x00ab\x02c\x02d\x00" + long + b"\x1e\xff\x02yz\x00q\x1f\x21r\x1f\xff"
    assert wordlists.read_prezip(data) == ["ab", "abc", "abd", "x" * 300, "x" * 287 + "yz", "q\x01r"]
    with pytest.raises(ValueError):
        wordlists.read_prezip(b"\x01abc")


def test_vocab_round_trip(corpus: tuple[Path, dict]) -> None:
    out, man = corpus
    for lang in ac.LANGS:
        v = ac.load_vocab(out, lang)
        assert v == ac.build_vocab(lang) and v.symbols[0] == ac.BLANK and man["vocab"][lang]["size"] == len(v)
        assert man["vocab"][lang]["symbols"] == list(v.symbols)
        b = [s for s in v.symbols if s.startswith("B_")]
        assert b and len(v) == 1 + len(v.graphemes) + len(b)
        assert set(v.graphemes) == {c for w in wordlists.words(lang) for c in w}
    for rs in _records(out).values():
        for r in rs:
            v = ac.load_vocab(out, r["lang"])
            ids = v.encode(r["text"])
            assert v.decode(ids) == r["text"]
            starts = [i for i in ids if v.symbols[i].startswith("B_")]
            assert len(starts) == len(r["text"].split(" "))
            assert v.symbols[ids[0]] == "B_" + r["text"][0]
            # blanks anywhere are ignored
            with_blanks = [x for i in ids for x in (0, i, 0)]
            assert v.decode(with_blanks) == r["text"]
    en = ac.build_vocab("en")
    assert en.decode(en.encode("The  cat")) == "the cat"  # normalised: lower case, single spaces
    ids = en.encode("ab c")
    assert [en.symbols[i] for i in ids] == ["B_a", "b", "B_c"]
    with pytest.raises(ValueError, match="not in the vocabulary"):
        en.encode("naïve")
    with pytest.raises(ValueError, match="out of range"):
        en.decode([len(en)])
    hi = ac.build_vocab("hi")
    assert hi.decode(hi.encode("नमस्ते दुनिया")) == "नमस्ते दुनिया"
    assert [hi.symbols[i] for i in hi.encode("की")] == ["B_क", "ी"]  # vowel sign = own codepoint symbol


def test_deterministic_for_a_seed_whatever_the_jobs(corpus: tuple[Path, dict], tmp_path: Path) -> None:
    out, _ = corpus
    b = tmp_path / "b"
    man2 = ac.generate(b, HOURS, seed=5, jobs=2)
    for split in ac.SPLITS:
        assert (out / f"{split}.jsonl").read_bytes() == (b / f"{split}.jsonl").read_bytes()
    for p in out.rglob("*.wav"):
        assert p.read_bytes() == (b / p.relative_to(out)).read_bytes()
    assert {str(p.relative_to(b)) for p in b.rglob("*.wav")} == {str(p.relative_to(out)) for p in out.rglob("*.wav")}
    assert man2["generation"]["jobs"] == 2


def test_augment_none_same_draws_clean_edges(corpus: tuple[Path, dict], tmp_path: Path) -> None:
    out, _ = corpus
    c = tmp_path / "c"
    man = ac.generate(c, {"ta": 20 / 3600}, seed=5, augment="none")
    assert set(man["hours_per_language"]) == {"ta"} and man["augment"] == "none"
    ref = {r["id"]: r for r in ac.read_jsonl(out / "train.jsonl") if r["lang"] == "ta"}
    for r in ac.read_jsonl(c / "train.jsonl"):
        assert r["channel"] is None
        for k in ("text", "voice", "rate", "pitch", "speech_start", "speech_stop", "n_samples"):
            assert r[k] == ref[r["id"]][k]
        x, _ = sf.read(c / r["path"], dtype="float32")
        a, b = r["speech_start"], r["speech_stop"]
        assert not x[:a].any() and not x[b:].any()
        assert x[a] != 0 and x[b - 1] != 0 and np.abs(x[a:b]).max() > 0.3


def _ns(**kw: object) -> argparse.Namespace:
    p = cli_corpus.add_asr_arguments(argparse.ArgumentParser())
    args = ["--out", str(kw.pop("out"))]
    for k, v in kw.items():
        args += [f"--{k.replace('_', '-')}", str(v)]
    return p.parse_args(args)


@pytest.mark.parametrize(
    "hours, msg",
    [
        ("en=1,xx=1", "unknown language code 'xx'"),
        ("en=0", "bad hours '0' for en"),
        ("hi=abc", "bad hours 'abc' for hi"),
        ("ta=nan", "bad hours 'nan'"),
        ("gu", "want LANG=HOURS"),
        ("en=1,en=2", "given twice"),
    ],
)
def test_cli_errors_one_line_exit_2(hours: str, msg: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_corpus.run_asr(_ns(out=tmp_path / "x", hours_per_language=hours)) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and msg in err and err.startswith("error: ")
    assert not (tmp_path / "x").exists()


def test_cli_wiring(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from streamkit.cli import main

    assert main(["corpus", "asr", "--out", str(tmp_path / "y"), "--hours-per-language", "en=1,fr=1"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "unknown language code 'fr'" in err
    assert main(["corpus", "asr", "--out", str(tmp_path / "z"), "--hours-per-language", "gu=0.001", "--seed", "2", "--augment", "none"]) == 0
    table = capsys.readouterr().out
    assert "vocab size" in table and "train hours" in table and "gu" in table
    assert ac.read_jsonl(tmp_path / "z" / "test.jsonl")[0]["lang"] == "gu"


def test_word_subset_seeded_distinct_in_list_order() -> None:
    ws = wordlists.words("hi")
    a = ac.word_subset("hi", 50, seed=3)
    assert a == ac.word_subset("hi", 50, seed=3)
    assert len(a) == len(set(a)) == 50 and set(a) <= set(ws)
    pos = [ws.index(w) for w in a]
    assert pos == sorted(pos)
    assert a != ac.word_subset("hi", 50, seed=4)
    assert ac.word_subset("ta", len(wordlists.words("ta")) + 10) == tuple(wordlists.words("ta"))


def test_closed_vocabulary_every_split_from_the_subset(tmp_path: Path) -> None:
    out = tmp_path / "w"
    man = ac.generate(out, {"en": 12 / 3600, "gu": 12 / 3600}, seed=2, augment="none", words=6)
    assert man["command"].endswith("--words 6")
    for lang in ("en", "gu"):
        info = man["words_per_language"][lang]
        subset = (out / info["path"]).read_text(encoding="utf-8").split()
        assert info["words"] == 6 and tuple(subset) == ac.word_subset(lang, 6, seed=2)
        used = {w for s in ac.SPLITS for r in ac.read_jsonl(out / f"{s}.jsonl") if r["lang"] == lang for w in r["text"].split()}
        assert used and used <= set(subset)
    # the vocabulary still comes from the whole word list: models trained on either corpus are compatible
    assert json.loads((out / "vocab" / "en.json").read_text())["symbols"] == list(ac.build_vocab("en").symbols)
    assert ac.generate(tmp_path / "open", {"gu": 4 / 3600}, seed=2, augment="none")["words_per_language"] is None


def test_cli_rejects_words_below_one(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_corpus.run_asr(_ns(out=tmp_path / "x", hours_per_language="en=1", words=0)) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "words must be >= 1, got 0" in err
    assert not (tmp_path / "x").exists()
