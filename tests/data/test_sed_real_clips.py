"""``streamkit corpus sed --real-clips DIR``: real clips as event sources (streamkit.data.sed_real).

Needs espeak-ng (speech events) as the rest of the SED corpus tests."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest

from streamkit.data import sed_corpus as sc
from streamkit.data import sed_real, sed_sources
from streamkit.data.sed_real import RealClips, real_extent
from streamkit.testing.real_tree import burst, fake_real_tree

COUNTS = {"synthetic": 3, "weak": 2, "unlabelled": 1, "validation": 2, "eval": 1}


def _stub_speech(monkeypatch: pytest.MonkeyPatch) -> None:
    """Speech from seeded noise instead of espeak-ng, so that the corpus digest does not depend on its version."""
    real = sed_sources.render_event

    def stub(cls: str, seed: int, duration_s: float, rate: int):  # type: ignore[no-untyped-def]
        if cls == "Speech":
            n = max(int(duration_s * rate), int(0.05 * rate))
            return sed_sources._trim_unit(np.random.default_rng(seed).standard_normal(n) * np.hanning(n), rate), {"stub": True}
        return real(cls, seed, duration_s, rate)

    monkeypatch.setattr(sc, "render_event", stub)
    monkeypatch.setattr(sed_real, "render_event", stub)


def _digest(root: Path) -> str:
    h = hashlib.sha256()
    for p in sorted(root.rglob("*")):
        if p.is_file() and p.name != "manifest.json":
            h.update(p.relative_to(root).as_posix().encode())
            h.update(p.read_bytes())
    return h.hexdigest()


#: the corpus of COUNTS, seed 7, speech stubbed, computed with the generator before --real-clips existed
DIGEST_BEFORE = {
    "standard": "600e4dbed751b49a669b58c681aecad72385cb799ff1fe8ce0cf3fee4360ddeb",
    "wide": "448c8cc97e96d967a0d902edeb9b61b3b59d106322f518e2efe43f5b19325a73",
}


@pytest.mark.parametrize("gap", ["standard", "wide"])
def test_without_real_clips_the_corpus_is_bit_identical(gap: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _stub_speech(monkeypatch)
    man = sc.generate(tmp_path / "c", COUNTS, seed=7, gap=gap)
    assert _digest(tmp_path / "c") == DIGEST_BEFORE[gap]
    assert "real_clips" not in man and "--real-clips" not in man["command"]


def _read_paths(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    seen: list[str] = []
    orig = sed_real._read.__wrapped__

    def spy(path: str, rate: int) -> np.ndarray:
        seen.append(path)
        return orig(path, rate)

    monkeypatch.setattr(sed_real, "_read", spy)
    return seen


def test_real_clips_are_used_recorded_and_eval_never_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _stub_speech(monkeypatch)
    root = fake_real_tree(tmp_path / "real", eval_bytes=b"not audio")  # reading any eval file would fail
    seen = _read_paths(monkeypatch)
    counts = {"synthetic": 12, "weak": 0, "unlabelled": 0, "validation": 6, "eval": 0}
    man = sc.generate(tmp_path / "c", counts, seed=5, real_clips=root, real_fraction=1.0)
    assert seen and not any("/eval/" in p for p in seen)
    assert {Path(p).relative_to(root.resolve()).parts[0] for p in seen} <= {"train", "dev"}
    metas = {s: json.loads((tmp_path / "c" / s / "meta.json").read_text()) for s in ("synthetic", "validation")}
    real_events = {s: [e for c in m for e in c["events"] if "real_clip" in e["params"]] for s, m in metas.items()}
    # fraction 1: every event of a class with clips is real; the others stay procedural
    for s, split, have in (("synthetic", "train", {"Dog", "Cat", "Speech"}), ("validation", "dev", {"Dog"})):
        for c in metas[s]:
            for e in c["events"]:
                assert ("real_clip" in e["params"]) == (e["event_label"] in have)
        assert all(e["params"]["real_clip"].startswith(f"{split}/events/clips/{e['event_label']}/") for e in real_events[s])
    assert real_events["synthetic"] and real_events["validation"]
    rc = man["real_clips"]
    assert rc["fraction"] == 1.0 and rc["clips"]["train"] == {"Cat": 2, "Dog": 2, "Speech": 2} and rc["clips"]["dev"] == {"Dog": 2}
    assert [p["package"] for p in rc["packages"]] == ["fake-sounds"] and "eval" not in rc["splits_read"]
    assert man["subsets"]["synthetic"]["real_events"] == len(real_events["synthetic"])
    assert "--real-clips" in man["command"]
    # a real event is labelled by its energy envelope: the burst, not the clip's noise floor
    for c in metas["synthetic"]:
        for e in c["events"]:
            if "real_clip" in e["params"]:
                assert e["offset"] - e["onset"] <= 1.8 + 0.02


def test_real_clips_change_only_the_events(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _stub_speech(monkeypatch)
    root = fake_real_tree(tmp_path / "real")
    real = RealClips.load(root, 1.0)
    a, b = sc.make_clip(7, "synthetic", 0, real=None), sc.make_clip(7, "synthetic", 0, real=real)
    assert [e["event_label"] for e in a["events"]] == [e["event_label"] for e in b["events"]]
    assert [e["snr_db"] for e in a["events"]] == [e["snr_db"] for e in b["events"]]
    assert np.array_equal(a["bg"], b["bg"]) and a["level"] == b["level"]


def test_eval_split_and_bad_trees_are_refused(tmp_path: Path) -> None:
    root = fake_real_tree(tmp_path / "real")
    with pytest.raises(ValueError, match="not its eval split"):
        RealClips.load(root / "eval")
    with pytest.raises(ValueError, match="no clips under train"):
        RealClips.load(fake_real_tree(tmp_path / "only_eval", classes={"eval": ("Dog",)}))
    with pytest.raises(ValueError, match="no such directory"):
        RealClips.load(tmp_path / "missing")
    with pytest.raises(ValueError, match="real-fraction"):
        RealClips.load(root, 0.0)
    (root / "train" / "events" / "clips" / "Horse").mkdir()
    with pytest.raises(ValueError, match="not a DCASE class"):
        RealClips.load(root)
    (root / "train" / "events" / "clips" / "Horse").rmdir()
    (root / "train" / "events" / "clips" / "Dog" / "sneaky.wav").symlink_to(next((root / "eval").rglob("*.wav")))
    with pytest.raises(ValueError, match="resolves into the eval split"):
        RealClips.load(root)
    (root / "train" / "events" / "clips" / "Dog" / "sneaky.wav").unlink()
    for name, pkg in (("scratch__Dog1.wav", "scratch"), ("asterisk-core-sounds-en-wav__x.wav", "asterisk-core-sounds-en-wav"),
                      ("fake-eval__x.wav", "fake-eval")):  # fmt: skip
        clip = root / "dev" / "events" / "clips" / "Dog" / name
        clip.write_bytes(b"")
        with pytest.raises(ValueError, match=f"evaluation-only package {pkg}"):
            RealClips.load(root)
        clip.unlink()
    with pytest.raises(ValueError, match="is not in train or dev"):
        RealClips(root, {}, 1.0, None).render("eval/events/clips/Dog/x.wav", 1.0, np.random.default_rng(0), 16000)


def test_real_extent_skips_the_noise_floor_but_keeps_stationary_sounds() -> None:
    x = burst("Dog", 3.0, (0.5, 2.0))
    a, b = real_extent(x, 16000)
    assert abs(a / 16000 - 0.5) <= 0.011 and abs(b / 16000 - 2.0) <= 0.011
    hum = np.random.default_rng(0).standard_normal(16000 * 2)  # stationary: all of it
    assert real_extent(hum, 16000) == (0, 32000)
    assert real_extent(np.zeros(800), 16000) == (0, 0)


def test_cli_real_clips(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from streamkit.cli import main

    root = fake_real_tree(tmp_path / "real")
    args = ["corpus", "sed", "--out", str(tmp_path / "c"), "--clips-synthetic", "2", "--clips-weak", "0", "--clips-unlabelled", "0",
            "--clips-validation", "1", "--clips-eval", "0", "--seed", "1", "--real-clips", str(root), "--real-fraction", "0.7"]  # fmt: skip
    assert main(args) == 0
    man = json.loads((tmp_path / "c" / "manifest.json").read_text())
    assert man["real_clips"]["fraction"] == 0.7
    assert main([*args[:-4], "--real-clips", str(root / "eval")]) == 2
    assert "not its eval split" in capsys.readouterr().err
