"""SED soundscape corpus (`streamkit corpus sed`): layout, labels vs audio, determinism, CLI errors.
Needs espeak-ng (speech events): CI installs it; no skip."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from streamkit.cli import corpus as cli_corpus
from streamkit.data import sed_corpus as sc
from streamkit.data import tts
from streamkit.data.sed_sources import CLASSES, DURATION_S, render_event

COUNTS = {"synthetic": 4, "weak": 2, "unlabelled": 2, "validation": 2, "eval": 2}
RATE = 16000


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    tts.require_espeak()
    out = tmp_path_factory.mktemp("sed") / "a"
    return out, sc.generate(out, COUNTS, seed=3)


def _tsv(p: Path) -> list[list[str]]:
    return [ln.split("\t") for ln in p.read_text(encoding="utf-8").splitlines()]


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file() and p.name != "manifest.json"}


def test_every_class_renders_with_variation() -> None:
    for cls in CLASSES:
        a, _ = render_event(cls, 1, DURATION_S[cls][0] + 0.5, RATE)
        b, _ = render_event(cls, 2, DURATION_S[cls][0] + 0.5, RATE)
        assert a.dtype == np.float32 and 0.05 * RATE <= len(a) <= (DURATION_S[cls][0] + 0.5) * RATE
        assert np.sqrt(np.mean(a.astype(np.float64) ** 2)) == pytest.approx(1.0, rel=1e-3)
        assert len(a) != len(b) or not np.allclose(a, b)  # another seed, another sound
        c, _ = render_event(cls, 1, DURATION_S[cls][0] + 0.5, RATE)
        assert np.array_equal(a, c)


def test_layout_manifest_and_label_formats(corpus: tuple[Path, dict]) -> None:
    out, man = corpus
    assert json.loads((out / "manifest.json").read_text()) == man
    assert man["rate"] == RATE and man["seed"] == 3 and "corpus sed" in man["command"]
    for sub, n in COUNTS.items():
        assert man["subsets"][sub]["clips"] == n
        wavs = sorted((out / sub / "audio").glob("*.wav"))
        assert len(wavs) == n
        info = sf.info(str(wavs[0]))
        assert info.samplerate == RATE and info.frames == 10 * RATE and info.channels == 1 and info.subtype == "PCM_16"
        rows = _tsv(out / sub / "labels.tsv")
        kind = sc.SUBSETS[sub][1]
        head = {"strong": ["filename", "onset", "offset", "event_label"], "weak": ["filename", "event_labels"], "none": ["filename"]}[kind]
        assert rows[0] == head and all(len(r) == len(head) for r in rows)
        assert {r[0] for r in rows[1:]} <= {w.name for w in wavs}
        meta = json.loads((out / sub / "meta.json").read_text())
        per_class = {c: sum(e["event_label"] == c for m in meta for e in m["events"]) for c in CLASSES}
        assert per_class == man["subsets"][sub]["events_per_class"]
        assert all(1 <= len(m["events"]) <= 3 for m in meta)
        if kind == "strong":
            truth = sorted((f"{m['id']}.wav", f"{e['onset']:.3f}", f"{e['offset']:.3f}", e["event_label"]) for m in meta for e in m["events"])
            assert sorted(tuple(r) for r in rows[1:]) == truth
            for r in rows[1:]:
                assert 0 <= float(r[1]) < float(r[2]) <= 10.0 and r[3] in CLASSES
    table = sc.corpus_table(man)
    assert "synthetic" in table and "ev/clip" in table and "Speech" in table


def test_weak_labels_are_the_clip_classes(corpus: tuple[Path, dict]) -> None:
    out, _ = corpus
    meta = {m["id"]: m for m in json.loads((out / "weak" / "meta.json").read_text())}
    rows = _tsv(out / "weak" / "labels.tsv")[1:]
    assert len(rows) == COUNTS["weak"]
    for fn, tags in rows:
        assert set(tags.split(",")) == {e["event_label"] for e in meta[fn[:-4]]["events"]}


def test_synthetic_events_sit_in_their_labelled_spans(corpus: tuple[Path, dict]) -> None:
    out, man = corpus
    rows = _tsv(out / "synthetic" / "labels.tsv")[1:]
    for i in range(COUNTS["synthetic"]):
        fid = f"synthetic_{i:05d}"
        c = sc.make_clip(3, "synthetic", i, RATE)
        x, _ = sf.read(str(out / "synthetic" / "audio" / f"{fid}.wav"), dtype="int16")
        assert np.array_equal(x, c["audio"])  # the file is the regenerated clip
        spans = [(float(r[1]), float(r[2]), r[3]) for r in rows if r[0] == f"{fid}.wav"]
        assert len(spans) == len(c["dry"])
        gain = c["level"]["gain"]
        mix = (c["bg"] + sum(c["dry"])) * gain
        assert np.max(np.abs(mix * 32767 - x)) <= 0.51  # audio = background + placed dry events (PCM_16 rounding)
        for e, d in zip(c["events"], c["dry"]):
            a, b = round(e["onset"] * RATE), round(e["offset"] * RATE)
            assert (e["onset"], e["offset"], e["event_label"]) in spans
            nz = np.flatnonzero(d)
            assert a <= nz[0] < a + RATE // 100 and b - RATE // 100 <= nz[-1] < b  # the event fills its span (10 ms frames)
            # the event regenerated from its recorded params is what was placed
            y, _ = render_event(e["event_label"], e["seed"], e["duration_s"], RATE)
            np.testing.assert_allclose(d[a:b], y[: b - a] * 10 ** (e["snr_db"] / 20), rtol=1e-5, atol=1e-4)
            # and the clip has more energy inside the span than the background alone
            inside = float(np.mean((x[a:b].astype(np.float64) / 32767) ** 2))
            bg = float(np.mean((c["bg"][a:b] * gain) ** 2))
            assert 10 * np.log10(inside / bg) > 3.0


def test_real_domain_differs(corpus: tuple[Path, dict]) -> None:
    c = sc.make_clip(3, "eval", 0, RATE)
    assert c["domain"] == "real" and c["room"]["rt60_s"] > 0 and len(c["mic"]["eq"]) == 3
    s = sc.make_clip(3, "synthetic", 0, RATE)
    assert s["room"] is None and s["mic"] is None


def test_deterministic_and_jobs_independent(corpus: tuple[Path, dict], tmp_path: Path) -> None:
    out, man = corpus
    man2 = sc.generate(tmp_path / "b", COUNTS, seed=3, jobs=2)
    assert _files(out) == _files(tmp_path / "b")
    assert man2["subsets"] == man["subsets"]
    man3 = sc.generate(tmp_path / "c", {**COUNTS, "synthetic": 1, "weak": 0}, seed=3)
    assert "weak" not in man3["subsets"]
    assert (tmp_path / "c" / "eval" / "audio" / "eval_00001.wav").read_bytes() == (out / "eval" / "audio" / "eval_00001.wav").read_bytes()
    man4 = sc.generate(tmp_path / "d", {k: (1 if k == "synthetic" else 0) for k in COUNTS}, seed=4)
    assert (tmp_path / "d" / "synthetic" / "audio" / "synthetic_00000.wav").read_bytes() != (
        out / "synthetic" / "audio" / "synthetic_00000.wav"
    ).read_bytes()
    assert man4["counts"]["weak"] == 0


def _run(argv: list[str]) -> int:
    return cli_corpus.run_sed(cli_corpus.add_sed_arguments(argparse.ArgumentParser()).parse_args(argv))


@pytest.mark.parametrize(
    "extra",
    [["--clips-weak", "-1"], ["--rate", "4000"], ["--rate", "16001"], ["--jobs", "0"], sum(([f"--clips-{s}", "0"] for s in COUNTS), [])],
)
def test_cli_errors_one_line_exit_2(extra: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert _run(["--out", str(tmp_path / "x"), *extra]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1


def test_cli_out_is_a_file_and_missing_espeak(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    f = tmp_path / "file"
    f.write_text("x")
    zero = sum(([f"--clips-{s}", "0"] for s in COUNTS if s != "eval"), [])
    assert _run(["--out", str(f), *zero, "--clips-eval", "1"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1
    tts.require_espeak.cache_clear()
    monkeypatch.setattr(tts.shutil, "which", lambda name: None)
    try:
        assert _run(["--out", str(tmp_path / "y"), *zero, "--clips-eval", "1"]) == 2
        err = capsys.readouterr().err
        assert "apt-get install espeak-ng" in err and err.count("\n") == 1
    finally:
        monkeypatch.undo()
        tts.require_espeak.cache_clear()


def test_cli_tiny_run_prints_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    zero = sum(([f"--clips-{s}", "0"] for s in COUNTS if s not in ("synthetic", "weak")), [])
    assert _run(["--out", str(tmp_path / "t"), *zero, "--clips-synthetic", "1", "--clips-weak", "1", "--seed", "5"]) == 0
    out = capsys.readouterr().out
    assert "synthetic" in out and "weak" in out and "hours" in out


def test_streamkit_cli_wires_corpus_sed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from streamkit.cli import main

    assert main(["corpus", "sed", "--out", str(tmp_path / "z"), "--clips-eval", "-2"]) == 2
    err = capsys.readouterr().err
    assert err == "error: --clips-eval must be >= 0, got -2\n"


def test_wide_gap_shifts_real_sources_and_adds_unlabelled_sounds() -> None:
    from streamkit.data.sed_sources import DISTRACTORS, render_distractor, shift_source

    s_std, s_wide = sc.make_clip(3, "synthetic", 1, RATE), sc.make_clip(3, "synthetic", 1, RATE, gap="wide")
    assert np.array_equal(s_std["audio"], s_wide["audio"]) and "distractors" not in s_wide  # synthetic clips do not change
    n_distractors = 0
    for i in range(4):
        std, wide = sc.make_clip(3, "eval", i, RATE), sc.make_clip(3, "eval", i, RATE, gap="wide")
        # everything but the sources is drawn as in the standard corpus
        assert np.array_equal(std["bg"], wide["bg"]) and std["mic"] == wide["mic"] and std["room"]["rt60_s"] == wide["room"]["rt60_s"]
        assert [e["event_label"] for e in std["events"]] == [e["event_label"] for e in wide["events"]]
        assert "shift" not in std["events"][0] and "distractors" not in std
        for e, d in zip(wide["events"], wide["dry"]):
            assert sc.SHIFT_RANGE[0] <= e["shift"] <= sc.SHIFT_RANGE[1]
            y, _ = render_event(e["event_label"], e["seed"], e["duration_s"], RATE)
            z = shift_source(y, e["shift"], RATE)
            a, b = round(e["onset"] * RATE), round(e["offset"] * RATE)
            np.testing.assert_allclose(d[a:b], z[: b - a] * 10 ** (e["snr_db"] / 20), rtol=1e-5, atol=1e-4)
        assert len(wide["distractors"]) == len(wide["distractor_dry"]) <= 3
        for x, d in zip(wide["distractors"], wide["distractor_dry"]):
            assert x["kind"] in DISTRACTORS and x["kind"] not in CLASSES
            y, _ = render_distractor(x["kind"], x["seed"], x["duration_s"], RATE)
            a = round(x["onset"] * RATE)
            np.testing.assert_allclose(d[a : a + 100], y[:100] * 10 ** (x["snr_db"] / 20), rtol=1e-5, atol=1e-4)
        n_distractors += len(wide["distractors"])
        assert not np.array_equal(std["audio"], wide["audio"])
    assert n_distractors > 0


def test_shift_source_scales_frequency_and_length() -> None:
    from streamkit.data.sed_sources import shift_source

    t = np.arange(RATE) / RATE
    y = np.sin(2 * np.pi * 1000 * t).astype(np.float32)
    z = shift_source(y, 1.25, RATE)
    assert abs(len(z) - RATE / 1.25) <= RATE // 100 + 2
    spec = np.abs(np.fft.rfft(z * np.hanning(len(z))))
    assert abs(np.argmax(spec) * RATE / len(z) - 1250) < 5
    assert np.sqrt(np.mean(z.astype(np.float64) ** 2)) == pytest.approx(1.0, rel=1e-3)
    assert shift_source(y, 1.0, RATE) is y
    with pytest.raises(ValueError, match="ratio"):
        shift_source(y, 3.0, RATE)


def test_distractors_render_deterministically_and_reject_unknown_kinds() -> None:
    from streamkit.data.sed_sources import DISTRACTORS, render_distractor

    for kind in DISTRACTORS:
        a, _ = render_distractor(kind, 1, 2.0, RATE)
        b, _ = render_distractor(kind, 1, 2.0, RATE)
        c, _ = render_distractor(kind, 2, 2.0, RATE)
        assert np.array_equal(a, b) and a.size > 0.05 * RATE and np.all(np.isfinite(a))
        assert len(a) != len(c) or not np.allclose(a, c)
    with pytest.raises(ValueError, match="non-target"):
        render_distractor("Dog", 1, 1.0, RATE)


def test_wide_gap_corpus_and_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    counts = {"synthetic": 0, "weak": 1, "unlabelled": 0, "validation": 1, "eval": 0}
    man = sc.generate(tmp_path / "w", counts, seed=3, gap="wide")
    assert man["domain_gap"] == "wide" and man["command"].endswith("--domain-gap wide")
    meta = json.loads((tmp_path / "w" / "validation" / "meta.json").read_text())
    assert "distractors" in meta[0] and all("shift" in e for e in meta[0]["events"])
    labels = (tmp_path / "w" / "validation" / "labels.tsv").read_text()
    for x in meta[0]["distractors"]:
        assert x["kind"] not in labels  # non-target sounds carry no label
    with pytest.raises(ValueError, match="domain-gap"):
        sc.generate(tmp_path / "x", counts, seed=3, gap="huge")
    with pytest.raises(ValueError, match="domain gap"):
        sc.make_clip(3, "eval", 0, RATE, gap="huge")
    with pytest.raises(SystemExit):
        _run(["--out", str(tmp_path / "y"), "--domain-gap", "huge"])
    assert "--domain-gap" in capsys.readouterr().err
