"""benchmarks/sed_real.py (streamkit.eval.bench.sed_real): scoring and the run on a tiny fake `corpus real` tree."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from streamkit.eval.bench import sed_real as bench
from streamkit.eval.sed import Event
from streamkit.testing.real_tree import fake_real_tree


def _ev(f: str, a: float, b: float, c: str) -> Event:
    return Event(f, a, b, c)


def test_scene_scores_per_class_and_targets() -> None:
    ref = {"s0.wav": [_ev("s0.wav", 1.0, 3.0, "Dog"), _ev("s0.wav", 5.0, 8.5, "Cat")], "s1.wav": [_ev("s1.wav", 2.0, 4.0, "Dog")]}
    dur = {"s0.wav": 10.0, "s1.wav": 10.0}
    perfect = bench.score_scenes(ref, ref, dur)
    assert perfect["event_f1"] == 100.0 and perfect["segment_f1"] == 100.0 and perfect["meets_targets_per_class"]
    assert perfect["classes_present"] == ["Cat", "Dog"] and perfect["events"] == 3 and perfect["files"] == 2
    # Cat missed, one Dog found 0.5 s late (outside the 200 ms onset collar: a miss and a false alarm), a false Speech
    est = {"s0.wav": [_ev("s0.wav", 1.0, 3.0, "Dog"), _ev("s0.wav", 0.0, 1.0, "Speech")], "s1.wav": [_ev("s1.wav", 2.5, 4.0, "Dog")]}
    s = bench.score_scenes(ref, est, dur)
    assert s["per_class"]["Cat"]["event_f1"] == 0.0 and s["per_class"]["Cat"]["n_sys"] == 0
    assert s["per_class"]["Dog"]["event_f1"] == 50.0  # 1 hit of 2 references and 2 detections
    assert s["per_class"]["Speech"]["n_ref"] == 0 and s["per_class"]["Speech"]["event_f1"] is None
    assert s["event_f1"] == 25.0  # macro over the classes present (Cat, Dog), Speech's false alarm not averaged
    # segments: Dog 1 s segments 1, 2 of s0 and 2, 3 of s1 are all covered
    assert s["per_class"]["Dog"]["segment_f1"] == 100.0 and s["segment_f1"] == 50.0
    assert not s["meets_targets_per_class"]


def test_clip_check_counts_hits_and_other_classes() -> None:
    c = bench.clip_check({"Dog": [{"Dog"}, {"Dog", "Cat"}, set()], "Cat": [{"Alarm_bell_ringing", "Dog"}]})
    assert c["clips"] == 4 and c["detected_pct"] == 50.0
    assert c["per_class"]["Dog"] == {"clips": 3, "detected": 2, "detected_pct": 66.7, "clips_with_other_classes": 1, "others": {"Cat": 1}}
    assert c["per_class"]["Cat"]["detected"] == 0 and c["per_class"]["Cat"]["others"] == {"Alarm_bell_ringing": 1, "Dog": 1}


def test_run_on_a_fake_tree_scores_every_model_and_writes_the_machine(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from streamkit.models.sed_settings import default_weights

    root = fake_real_tree(tmp_path / "real", classes={"train": ("Dog",), "eval": ("Dog", "Cat")})
    # the training splits hold bytes no reader accepts: only eval/events is read
    for p in (root / "train").rglob("*.wav"):
        p.write_bytes(b"junk")
    copy = tmp_path / "copy.pt"
    copy.write_bytes(Path(default_weights()).read_bytes())
    out = tmp_path / "r.json"
    assert bench.main(["--real", str(root), "--model", f"other={copy}", "--out", str(out)]) == 0
    r = json.loads(out.read_text())
    assert list(r["models"]) == ["shipped", "other"] and r["machine"]["cpu_count"] >= 1
    assert r["command"] == "python benchmarks/sed_real.py --real DIR --model other=copy.pt --out OUT" and str(tmp_path) not in out.read_text()
    a, b = r["models"]["shipped"], r["models"]["other"]
    assert a["scenes"] == b["scenes"] and a["clips"] == b["clips"]  # the same weights score the same
    assert a["scenes"]["files"] == 2 and a["scenes"]["classes_present"] == ["Cat", "Dog", "Speech"] and a["clips"]["clips"] == 4
    assert a["rtf"] > 0 and r["targets"] == {"event_f1_per_class": 40.0, "segment_f1_per_class": 70.0}
    assert "| shipped |" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        bench.main(["--real", str(tmp_path / "none"), "--out", str(out)])
    with pytest.raises(SystemExit):
        bench.main(["--real", str(root), "--model", "bad", "--out", str(out)])
