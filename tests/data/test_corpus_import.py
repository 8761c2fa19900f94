"""``streamkit corpus import``: LibriSpeech, Common Voice, Kaldi and MUCS 2021 layouts into the
``corpus asr`` layout that ``streamkit train rnnt`` reads. Tiny fixtures are made here with espeak-ng
(installed by .ci/setup) in each layout; the error paths give one ``error:`` line and exit 2."""

from __future__ import annotations

import json
import unicodedata
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from streamkit.cli import main
from streamkit.data import asr_corpus as ac
from streamkit.data.corpus_formats import FormatError, read_items
from streamkit.data.corpus_import import assign_split, import_corpus, import_text
from streamkit.data.tts import synthesize
from streamkit.train.rnnt_corpus import AsrCorpus, compute_logmel

HI = "नमस्ते दुनिया।"  # NFC Devanagari with a danda
TA = "வணக்கம் உலகம்"
GU = "નમસ્તે દુનિયા"


def _speech(text: str, voice: str, rate: int) -> np.ndarray:
    x = synthesize(text, voice, out_rate=8000)
    if rate != 8000:
        import soxr

        x = soxr.resample(x, 8000, rate).astype(np.float32)
    return x


def _write(path: Path, x: np.ndarray, rate: int, fmt: str | None = None) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    sf.write(str(path), x, rate, format=fmt)


def _run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    rc = main(["corpus", "import", *args])
    cap = capsys.readouterr()
    return rc, cap.out, cap.err


def _jsonl(out: Path, split: str) -> list[dict]:
    p = out / f"{split}.jsonl"
    return ac.read_jsonl(p) if p.is_file() else []


@pytest.fixture(scope="module")
def libri(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("libri") / "LibriSpeech"
    lines = {("train-clean-100", "19", "198"): ["DON'T GO THERE", "THE CAT SAT"], ("dev-clean", "84", "121"): ["HELLO WORLD"],
             ("test-clean", "61", "70"): ["GOOD MORNING"]}  # fmt: skip
    for (part, spk, ch), texts in lines.items():
        d = root / part / spk / ch
        rows = []
        for i, t in enumerate(texts):
            uid = f"{spk}-{ch}-{i:04d}"
            _write(d / f"{uid}.flac", _speech(t.lower(), "en-us", 16000), 16000)
            rows.append(f"{uid} {t}")
        (d / f"{spk}-{ch}.trans.txt").write_text("\n".join(rows) + "\n", encoding="utf-8")
    return root


def test_librispeech_in_the_corpus_asr_layout(libri: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "c"
    rc, stdout, err = _run(["--format", "librispeech", str(libri), "--out", str(out)], capsys)
    assert rc == 0, err
    assert "train utterances" in stdout and "en" in stdout
    man = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    assert man["format"] == ac.FORMAT and man["imported"]["format"] == "librispeech" and man["skipped"] == {}
    assert man["counts"]["en"]["train"]["utterances"] == 2 and man["counts"]["en"]["dev"]["utterances"] == 1
    assert man["counts"]["en"]["test"]["utterances"] == 1 and man["speakers"]["en"]["train"] == ["19"]
    train = _jsonl(out, "train")
    assert [r["text"] for r in train] == ["dont go there", "the cat sat"] and train[0]["source_text"] == "DON'T GO THERE"
    for r in train:
        info = sf.info(str(out / r["path"]))
        assert info.samplerate == 8000 and info.channels == 1 and info.subtype == "PCM_16" and info.frames == r["n_samples"]
    # the shipped model's vocabulary (so --init-from fits) and the trainer reads it as it is
    assert man["vocab"]["en"]["symbols"] == list(ac.build_vocab("en").symbols)
    c = AsrCorpus(out)
    utts = c.split("train")
    assert c.langs == ["en"] and [u.text for u in utts] == ["dont go there", "the cat sat"]
    assert compute_logmel(utts)[0].shape[1] == 80


def test_commonvoice_mp3_hindi_text_survives_and_speakers_split_apart(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = tmp_path / "cv" / "hi"
    rows = ["client_id\tpath\tsentence\tup_votes\tdown_votes\tage\tgender\taccents\tlocale\tsegment"]
    for i in range(8):
        name = f"common_voice_hi_{i}.mp3"
        _write(src / "clips" / name, _speech(HI, "hi", 48000), 48000, "MP3")
        rows.append(f"spk{i % 4}\t{name}\t{HI}\t2\t0\t\t\t\thi\t")
    rows.append("spk9\tcommon_voice_hi_9.mp3\tसन 1990 में\t2\t0\t\t\t\thi\t")  # a digit: outside the hi vocabulary
    _write(src / "clips" / "common_voice_hi_9.mp3", _speech(HI, "hi", 48000), 48000, "MP3")
    (src / "validated.tsv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    out = tmp_path / "c"
    rc, stdout, err = _run(["--format", "commonvoice", str(src), "--out", str(out), "--splits", "0.5", "0.25", "0.25"], capsys)
    assert rc == 0, err
    assert "skipped 1 utterance(s): grapheme outside the vocabulary" in stdout and "U+0031" in stdout
    man = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    assert man["skipped"]["grapheme outside the vocabulary"]["count"] == 1
    recs = [r for s in ac.SPLITS for r in _jsonl(out, s)]
    assert len(recs) == 8 and {r["lang"] for r in recs} == {"hi"}
    assert all(r["text"] == unicodedata.normalize("NFC", "नमस्ते दुनिया") for r in recs)  # danda gone, every mark kept
    by_split = {s: {r["speaker"] for r in _jsonl(out, s)} for s in ac.SPLITS}
    for a in ac.SPLITS:
        for b in ac.SPLITS:
            assert a == b or not by_split[a] & by_split[b]
        for spk in by_split[a]:
            assert assign_split(0, "hi", spk, (0.5, 0.25, 0.25)) == a
    assert all(sf.info(str(out / r["path"])).samplerate == 8000 for r in recs)


def test_kaldi_segments_tamil(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    d = tmp_path / "data" / "train"
    x = _speech(TA, "ta", 16000)
    gap = np.zeros(8000, np.float32)
    _write(tmp_path / "audio" / "rec1.wav", np.concatenate([x, gap, x]), 16000)
    d.mkdir(parents=True)
    n = x.shape[0] / 16000
    (d / "wav.scp").write_text(f"rec1 {tmp_path / 'audio' / 'rec1.wav'}\n", encoding="utf-8")
    (d / "segments").write_text(f"u1 rec1 0.0 {n:.3f}\nu2 rec1 {n + 0.5:.3f} {2 * n + 0.5:.3f}\n", encoding="utf-8")
    (d / "text").write_text(f"u1 {TA}\nu2 {TA}\n", encoding="utf-8")
    (d / "utt2spk").write_text("u1 s1\nu2 s1\n", encoding="utf-8")
    out = tmp_path / "c"
    rc, _, err = _run(["--format", "kaldi", f"train={d}", "--lang", "ta", "--out", str(out)], capsys)
    assert rc == 0, err
    recs = _jsonl(out, "train")
    assert [r["id"] for r in recs] == ["u1", "u2"] and all(r["text"] == TA and r["lang"] == "ta" for r in recs)
    for r in recs:
        assert abs(r["n_samples"] - round(n * 8000)) <= 8
    assert recs[1]["source_start_s"] == pytest.approx(n + 0.5, abs=1e-3)


def test_mucs_gujarati(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for part in ("train", "test"):
        d = tmp_path / "mucs" / "Gujarati" / part
        ids = [f"{part}spk_{i:03d}" for i in range(2)]
        for uid in ids:
            _write(d / "audio" / f"{uid}.wav", _speech(GU, "gu", 8000), 8000)
        (d / "transcription.txt").write_text("".join(f"{uid} {GU}\n" for uid in ids), encoding="utf-8")
    out = tmp_path / "c"
    rc, _, err = _run(["--format", "mucs", str(tmp_path / "mucs"), "--out", str(out)], capsys)
    assert rc == 0, err
    assert [r["speaker"] for r in _jsonl(out, "train")] == ["trainspk", "trainspk"]
    assert [r["text"] for r in _jsonl(out, "test")] == [GU, GU] and _jsonl(out, "dev") == []
    assert AsrCorpus(out).langs == ["gu"]


def test_import_text() -> None:
    assert import_text("DON'T  stop—now!", "en") == "dont stop now"
    assert import_text("नमस्ते, दुनिया।", "hi") == "नमस्ते दुनिया"
    assert import_text("a\u200cb", "gu") == "ab"


def _one_error(rc: int, err: str, *needles: str) -> None:
    assert rc == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    for n in needles:
        assert n in lines[0], lines[0]


def test_errors_are_one_line(libri: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = str(tmp_path / "c")
    # missing audio file: named with the transcript line that wants it
    broken = tmp_path / "lib"
    d = broken / "train-clean-100" / "1" / "2"
    d.mkdir(parents=True)
    (d / "1-2.trans.txt").write_text("1-2-0000 HELLO\n", encoding="utf-8")
    _one_error(*_run(["--format", "librispeech", str(broken), "--out", out], capsys)[::2], "audio file missing", "1-2.trans.txt:1")
    # bad TSV
    cv = tmp_path / "cv"
    cv.mkdir()
    (cv / "validated.tsv").write_text("client_id\tpath\tlocale\na\tb.mp3\ten\n", encoding="utf-8")
    _one_error(*_run(["--format", "commonvoice", str(cv), "--out", out], capsys)[::2], "validated.tsv", "no sentence column")
    (cv / "validated.tsv").write_text("client_id\tpath\tsentence\na\tb.mp3\n", encoding="utf-8")
    _one_error(*_run(["--format", "commonvoice", str(cv), "--out", out, "--lang", "en"], capsys)[::2], "validated.tsv:2", "2 fields")
    # pipe in wav.scp
    k = tmp_path / "k"
    k.mkdir()
    (k / "wav.scp").write_text("r1 sox in.wav -t wav - |\n", encoding="utf-8")
    (k / "text").write_text("r1 hello\n", encoding="utf-8")
    (k / "utt2spk").write_text("r1 s\n", encoding="utf-8")
    _one_error(*_run(["--format", "kaldi", str(k), "--lang", "en", "--out", out], capsys)[::2], "wav.scp:1", "pipe command")
    # unknown language: a Kaldi dir without --lang, a bad code, a MUCS directory of no MUCS language
    _one_error(*_run(["--format", "kaldi", str(k), "--out", out], capsys)[::2], "unknown language", "--lang")
    _one_error(*_run(["--format", "librispeech", str(libri), "--lang", "English!", "--out", out], capsys)[::2], "unknown language")
    m = tmp_path / "m" / "Klingon" / "train"
    m.mkdir(parents=True)
    (m / "transcription.txt").write_text("a_1 qapla\n", encoding="utf-8")
    _one_error(*_run(["--format", "mucs", str(tmp_path / "m"), "--out", out], capsys)[::2], "unknown language", "Gujarati")
    # not the layout at all, and a bad SPLIT= prefix
    _one_error(*_run(["--format", "librispeech", str(tmp_path / "m"), "--out", out], capsys)[::2], "trans.txt")
    _one_error(*_run(["--format", "librispeech", f"eval={libri}", "--out", out], capsys)[::2], "unknown split 'eval'")
    assert not (tmp_path / "c").exists()  # nothing written on an error before the audio


def test_duplicate_ids_and_read_items_override(libri: Path, tmp_path: Path) -> None:
    with pytest.raises(FormatError, match="also at"):
        import_corpus("librispeech", [(None, libri), (None, libri)], tmp_path / "c")
    assert {it.split for it in read_items("librispeech", libri, split="test")} == {"test"}
