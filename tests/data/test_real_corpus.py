"""``streamkit corpus real``: fetcher (fake .deb files, a fake apt-get), classification, layout and
labels of the scenes, determinism, the train/eval package separation and the CLI error paths.

No network and no real package: every .deb is built here with ``dpkg-deb -b`` from generated audio.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from streamkit.cli import main
from streamkit.data import real_packages as rp
from streamkit.data import real_scenes as rs
from streamkit.data.real_corpus import classify, event_class, inventory

pytestmark = pytest.mark.skipif(shutil.which("dpkg-deb") is None, reason="needs dpkg-deb")

RATE = 16000


def _burst(rate: int, seconds: float = 1.0, lead: float = 0.3, f: float = 440.0) -> np.ndarray:
    """Digital silence, a cosine burst (non-zero from its first sample), digital silence."""
    t = np.arange(int(seconds * rate)) / rate
    x = 0.5 * np.cos(2 * np.pi * f * t)
    pad = np.zeros(int(lead * rate))
    return np.concatenate([pad, x, pad]).astype(np.float32)


def _noise(rate: int, seconds: float, seed: int) -> np.ndarray:
    return (0.2 * np.random.default_rng(seed).standard_normal(int(seconds * rate))).astype(np.float32)


# package -> {relative path: (kind of signal, rate)}
FAKE = {
    "pocketsphinx-testdata": {
        **{f"usr/share/pocketsphinx/test/data/librivox/s{i}.wav": ("speech", 16000) for i in range(3)},
        "usr/share/pocketsphinx/test/data/goforward.raw": ("speech", 16000),
    },
    "scratch": {
        "usr/share/scratch/Media/Sounds/Animal/Dog1.wav": ("noise", 22050),
        "usr/share/scratch/Media/Sounds/Effects/Pop.wav": ("noise", 22050),
        "usr/share/scratch/Media/Sounds/Vocals/Singer1.wav": ("noise", 22050),
    },
    "codec2-examples": {"usr/share/codec2/wav/vk2tpm_004.wav": ("noise", 8000), "usr/share/codec2/raw/hts1a.raw": ("speech", 8000)},
    "hedgewars-data": {
        **{f"usr/share/games/hedgewars/Data/Sounds/voices/Default/W{i}.ogg": ("speech", 22050) for i in range(6)},
        **{f"usr/share/games/hedgewars/Data/Sounds/s{i}.ogg": ("noise", 22050) for i in range(5)},
    },
    "fillets-ng-data": {f"usr/share/games/fillets-ng/sound/bathyscaph/en/bat-t-phone{i}.ogg": ("noise", 22050) for i in range(2)},
}
ROLES = {"pocketsphinx-testdata": "eval", "scratch": "eval", "codec2-examples": "eval", "hedgewars-data": "train", "fillets-ng-data": "train"}


def _build_deb(tmp: Path, package: str, files: dict[str, tuple[str, int]], version: str = "1.0-1") -> Path:
    root = tmp / "build" / package
    (root / "DEBIAN").mkdir(parents=True)
    (root / "DEBIAN" / "control").write_text(
        f"Package: {package}\nVersion: {version}\nArchitecture: all\nMaintainer: test <t@example.org>\nDescription: fake\n"
    )
    doc = root / "usr" / "share" / "doc" / package
    doc.mkdir(parents=True)
    (doc / "copyright").write_text("License: test\n")
    for k, (rel, (what, rate)) in enumerate(sorted(files.items())):
        x = _burst(rate, 0.6 + 0.1 * k) if what == "speech" else _noise(rate, 1.0 + 0.3 * k, k)
        dest = root / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        if rel.endswith(".raw"):
            (x * 32767).astype("<i2").tofile(dest)
        else:
            sf.write(dest, x, rate, format="OGG" if rel.endswith(".ogg") else "WAV")
    deb = tmp / "debs" / f"{package}_{version}_all.deb"
    deb.parent.mkdir(exist_ok=True)
    subprocess.run(["dpkg-deb", "-Zgzip", "--root-owner-group", "-b", str(root), str(deb)], check=True, capture_output=True, timeout=60)
    return deb


@pytest.fixture(scope="module")
def fake(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    """Fake .deb files of five packages, their pins and a fake ``apt-get`` serving them."""
    tmp = tmp_path_factory.mktemp("realdebs")
    debs = {p: _build_deb(tmp, p, files) for p, files in FAKE.items()}
    pins = [rp.Pin(p, "1.0-1", rp.sha256_file(d), d.stat().st_size, "test", ROLES[p]) for p, d in debs.items()]
    bindir = tmp / "bin"
    bindir.mkdir()
    apt = bindir / "apt-get"
    apt.write_text(f'#!/bin/sh\n# fake apt-get: download PKG=VER copies the fake .deb here\npkg="${{2%%=*}}"\ncp "{tmp / "debs"}/${{pkg}}"_*.deb .\n')
    apt.chmod(0o755)
    return {"tmp": tmp, "debs": debs, "pins": pins, "bin": bindir}


@pytest.fixture(scope="module")
def corpus(fake: dict[str, object], tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, object]]:
    out = tmp_path_factory.mktemp("real") / "c"
    man = rs.generate(out, cache=fake["tmp"] / "debs", seed=3, scenes={"train": 2, "dev": 1, "eval": 2},  # type: ignore[operator]
                      event_scenes={"train": 2, "dev": 1, "eval": 3}, pins=fake["pins"])  # type: ignore[arg-type]  # fmt: skip
    return out, man


# --------------------------------------------------------------------------- fetcher
def test_fetch_reuses_a_cached_deb_with_the_pinned_hash(fake: dict[str, object], tmp_path: Path) -> None:
    p = fake["pins"][0]  # type: ignore[index]
    shutil.copy(fake["debs"][p.package], tmp_path)  # type: ignore[index]

    def no_download(pin: rp.Pin, cache: Path) -> None:
        raise AssertionError("downloaded although the cache holds the file")

    assert rp.sha256_file(rp.fetch(p, tmp_path, downloader=no_download)) == p.sha256


def test_fetch_downloads_with_apt_get(fake: dict[str, object], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", f"{fake['bin']}:/usr/bin:/bin")
    p = fake["pins"][1]  # type: ignore[index]
    deb = rp.fetch(p, tmp_path / "cache")
    assert deb.parent == tmp_path / "cache" and rp.sha256_file(deb) == p.sha256


def test_sha_mismatch_is_an_error_and_the_file_is_not_used(fake: dict[str, object], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", f"{fake['bin']}:/usr/bin:/bin")
    good = fake["pins"][0]  # type: ignore[index]
    bad = rp.Pin(good.package, good.version, "0" * 64, good.size, "test", "eval")
    with pytest.raises(rp.FetchError) as e:
        rp.fetch(bad, tmp_path / "cache")
    msg = str(e.value)
    assert good.package in msg and "0" * 64 in msg and good.sha256 in msg and "\n" not in msg
    assert not list((tmp_path / "cache").glob("*.deb")) and list((tmp_path / "cache").glob("*.deb.bad"))
    # and the corpus builder stops before writing anything
    with pytest.raises(rp.FetchError):
        rs.generate(tmp_path / "out", cache=tmp_path / "cache", pins=[bad], scenes={"train": 0, "dev": 0, "eval": 1})
    assert not (tmp_path / "out" / "manifest.json").exists() and not (tmp_path / "out" / "eval").exists()


def test_unpack_without_dpkg_deb_is_a_clear_error(fake: dict[str, object], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    p = fake["pins"][0]  # type: ignore[index]
    with pytest.raises(rp.FetchError, match="dpkg-deb not found"):
        rp.unpack(fake["debs"][p.package], tmp_path / "x", p)  # type: ignore[index]


# --------------------------------------------------------------------------- classification
@pytest.mark.parametrize(
    ("package", "path", "cls"),
    [
        ("tuxpaint-stamps-default", "usr/share/tuxpaint/stamps/animals/birds/gander_desc.ogg", "speech"),
        ("tuxpaint-stamps-default", "usr/share/tuxpaint/stamps/animals/birds/gander_desc_fr.ogg", "speech"),
        ("tuxpaint-stamps-default", "usr/share/tuxpaint/stamps/animals/mammals/dogs/dog.ogg", "nonspeech"),
        ("sound-theme-freedesktop", "usr/share/sounds/freedesktop/stereo/audio-channel-front-left.oga", "speech"),
        ("sound-theme-freedesktop", "usr/share/sounds/freedesktop/stereo/bell.oga", "nonspeech"),
        ("hedgewars-data", "usr/share/games/hedgewars/Data/Sounds/voices/Pirate/Hello.ogg", "speech"),
        ("hedgewars-data", "usr/share/games/hedgewars/Data/Sounds/voices/Pirate/Laugh.ogg", "skip"),
        ("hedgewars-data", "usr/share/games/hedgewars/Data/Sounds/voices/Singer/Hello.ogg", "skip"),
        ("scratch", "usr/share/scratch/Media/Sounds/Vocals/Singer1.wav", "skip"),
        ("codec2-examples", "usr/share/codec2/wav/ve9qrp.wav", "skip"),
        ("codec2-examples", "usr/share/codec2/raw/hts1a.raw", "speech"),
        ("codec2-examples", "usr/share/codec2/wav/vk2tpm_004.wav", "nonspeech"),
        ("asterisk-core-sounds-en-wav", "usr/share/asterisk/sounds/en_US_f_Allison/silence/1.wav", "skip"),
        ("asterisk-core-sounds-en-wav", "usr/share/asterisk/sounds/en_US_f_Allison/confbridge-join.wav", "nonspeech"),  # a tone
        ("asterisk-core-sounds-en-wav", "usr/share/asterisk/sounds/en_US_f_Allison/conf-muted.wav", "speech"),
        ("hedgewars-data", "usr/share/games/hedgewars/Data/Sounds/voices/Default/Flyaway.ogg", "skip"),  # a scream
        ("fillets-ng-data-cs", "usr/share/games/fillets-ng/sound/city/cs/vit-m-hlava.ogg", "speech"),
        ("pocketsphinx-testdata", "usr/share/pocketsphinx/test/data/tidigits/dhd.2934z.raw", "skip"),
    ],
)
def test_classify(package: str, path: str, cls: str) -> None:
    assert classify(package, path)[0] == cls


def test_event_classes(tmp_path: Path) -> None:
    # a file's clip class agrees with its class: the conference tone is no Speech clip
    d = tmp_path / "usr/share/asterisk/sounds/en_US_f_Allison"
    d.mkdir(parents=True)
    for name in ("confbridge-join.wav", "conf-muted.wav"):
        sf.write(d / name, _burst(8000), 8000)
    got = {Path(s.path).name: (s.cls, s.event) for s in inventory("asterisk-core-sounds-en-wav", tmp_path)}
    assert got == {"confbridge-join.wav": ("nonspeech", None), "conf-muted.wav": ("speech", "Speech")}
    assert event_class("scratch", "usr/share/scratch/Media/Sounds/Animal/Dog1.wav") == "Dog"
    assert event_class("sound-theme-freedesktop", "usr/share/sounds/freedesktop/stereo/alarm-clock-elapsed.oga") == "Alarm_bell_ringing"
    assert event_class("scratch", "usr/share/scratch/Media/Sounds/Effects/Pop.wav") is None


# --------------------------------------------------------------------------- corpus
def test_layout_and_labels(corpus: tuple[Path, dict[str, object]]) -> None:
    out, man = corpus
    assert (out / "manifest.json").is_file()
    disk = json.loads((out / "manifest.json").read_text())
    assert disk["seed"] == 3 and {p["package"] for p in disk["packages"]} == set(FAKE)
    assert all(p["copyright"].endswith("/copyright") and p["sha256"] and p["licence"] for p in disk["packages"])
    checked = 0
    for split, n in (("train", 2), ("dev", 1), ("eval", 2)):
        labs = sorted((out / split / "scenes" / "labels").glob("*.json"))
        assert len(labs) == n
        for lab in labs:
            d = json.loads(lab.read_text())
            info = sf.info(out / split / "scenes" / "audio" / f"{d['id']}.wav")
            assert (info.samplerate, info.channels, info.subtype, info.frames) == (RATE, 1, "PCM_16", d["n_samples"])
            assert (out / split / "scenes" / "rttm" / f"{d['id']}.rttm").is_file()
            iv = np.asarray(d["intervals"]).reshape(-1, 2)
            # every fake speech file is 0.3 s silence, a burst, 0.3 s silence: its label is the burst
            # (to 20 ms: the resampler's and the Ogg Vorbis codec's ringing widen the edges)
            # (a file cut at the end of the scene: its label runs to the end or to its burst's end)
            n = d["n_samples"]
            want = np.array(sorted((s["start"] + int(0.3 * RATE), s["stop"] - int(0.3 * RATE) if s["stop"] < n else n) for s in d["speech"]))
            assert iv.shape == want.reshape(-1, 2).shape and np.abs(iv[:, 0] - want[:, 0]).max() <= 320, (iv.tolist(), want.tolist())
            assert np.abs(iv[:-1, 1] - want[:-1, 1]).max() <= 320 and want[-1, 1] - 4800 - 320 <= iv[-1, 1] <= want[-1, 1] + 320
            for x in d["distractors"]:
                assert not np.any((iv[:, 0] < x["stop"]) & (x["start"] < iv[:, 1])), "a distractor overlaps speech"
            pk = {s["package"] for s in d["speech"] + d["distractors"]}
            assert pk <= (rp.EVAL_PACKAGES if split == "eval" else rp.TRAIN_PACKAGES)
            checked += len(iv)
            assert 0.2 < (iv[:, 1] - iv[:, 0]).sum() / d["n_samples"] < 0.6
    assert checked > 10
    off = json.loads((out / "eval" / "offair" / "labels" / "vk2tpm_004.json").read_text())
    assert off["intervals"] == [] and off["rate"] == 8000 and off["kind"]
    assert sf.info(out / "eval" / "offair" / "audio" / "vk2tpm_004.wav").samplerate == 8000
    assert [p.name for p in (out / "eval" / "events" / "clips" / "Dog").iterdir()]
    tsv = (out / "eval" / "events" / "events.tsv").read_text().splitlines()
    assert tsv[0] == "filename\tonset\toffset\tevent_label" and len(tsv) > 1
    assert {ln.split("\t")[3] for ln in tsv[1:]} <= {"Dog", "Speech"}


def test_train_and_dev_use_disjoint_files_and_never_an_eval_package(corpus: tuple[Path, dict[str, object]]) -> None:
    out, _ = corpus
    used: dict[str, set[tuple[str, str]]] = {}
    for split in ("train", "dev", "eval"):
        used[split] = set()
        for lab in (out / split / "scenes" / "labels").glob("*.json"):
            d = json.loads(lab.read_text())
            used[split] |= {(s["package"], s["source"]) for s in d["speech"] + d["distractors"]}
    assert used["train"] and used["dev"] and not used["train"] & used["dev"]
    assert not {p for p, _ in used["train"] | used["dev"]} & rp.EVAL_PACKAGES
    assert {p for p, _ in used["eval"]} <= rp.EVAL_PACKAGES


def test_check_roles_rejects_an_eval_package_in_training() -> None:
    with pytest.raises(AssertionError, match="evaluation-only package scratch"):
        rp.check_roles("train", ["hedgewars-data", "scratch"])
    with pytest.raises(AssertionError):
        rp.check_roles("eval", ["hedgewars-data"])
    rp.check_roles("dev", ["hedgewars-data"])
    assert not rp.EVAL_PACKAGES & rp.TRAIN_PACKAGES
    assert {"pocketsphinx-testdata", "codec2-examples", "tuxpaint-stamps-default", "scratch"} <= rp.EVAL_PACKAGES


def test_deterministic_for_a_seed_and_independent_of_jobs(fake: dict[str, object], corpus: tuple[Path, dict[str, object]], tmp_path: Path) -> None:
    out, _ = corpus
    kw = {"cache": fake["tmp"] / "debs", "pins": fake["pins"], "scenes": {"train": 2, "dev": 1, "eval": 2},  # type: ignore[operator]
          "event_scenes": {"train": 2, "dev": 1, "eval": 3}}  # fmt: skip
    rs.generate(tmp_path / "a", seed=3, jobs=2, **kw)  # type: ignore[arg-type]
    for f in sorted(out.glob("*/scenes/audio/*.wav")) + sorted(out.glob("*/events/events.tsv")) + sorted(out.glob("*/scenes/labels/*.json")):
        assert f.read_bytes() == (tmp_path / "a" / f.relative_to(out)).read_bytes(), f
    kw.update(scenes={"train": 0, "dev": 0, "eval": 1}, event_scenes={"train": 0, "dev": 0, "eval": 0})
    rs.generate(tmp_path / "b", seed=4, **kw)  # type: ignore[arg-type]
    a = hashlib.sha256((out / "eval" / "scenes" / "audio" / "eval-0000.wav").read_bytes()).hexdigest()
    b = hashlib.sha256((tmp_path / "b" / "eval" / "scenes" / "audio" / "eval-0000.wav").read_bytes()).hexdigest()
    assert a != b


# --------------------------------------------------------------------------- CLI
def _one_error_line(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len([ln for ln in err if ln.startswith("error:")]) == 1
    return err[-1]


def test_cli_without_apt_get_exits_2(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    assert main(["corpus", "real", "--out", str(tmp_path / "o"), "--cache", str(tmp_path / "c")]) == 2
    assert "apt-get not found" in _one_error_line(capsys)


def test_cli_sha_mismatch_exits_2(fake: dict[str, object], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                  capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    monkeypatch.setenv("PATH", f"{fake['bin']}:/usr/bin:/bin")  # serves the fake pocketsphinx-testdata, not the pinned one
    monkeypatch.setattr(rs, "PINS", (rp.pin("pocketsphinx-testdata"),))
    assert main(["corpus", "real", "--out", str(tmp_path / "o"), "--cache", str(tmp_path / "c")]) == 2
    line = _one_error_line(capsys)
    assert "SHA-256 mismatch for pocketsphinx-testdata" in line and rp.pin("pocketsphinx-testdata").sha256 in line
    assert not (tmp_path / "o" / "manifest.json").exists()


def test_cli_bad_jobs_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["corpus", "real", "--out", str(tmp_path / "o"), "--jobs", "0"]) == 2
    assert "--jobs" in _one_error_line(capsys)


def test_cli_table(fake: dict[str, object], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(rs, "PINS", tuple(fake["pins"]))  # type: ignore[call-overload]
    args = ["corpus", "real", "--out", str(tmp_path / "o"), "--cache", str(fake["tmp"] / "debs"), "--scenes-train", "1", "--scenes-dev", "1",  # type: ignore[operator]
            "--scenes-eval", "1", "--event-scenes-train", "1", "--event-scenes-dev", "0", "--event-scenes-eval", "1"]  # fmt: skip
    assert main(args) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].split() == ["split", "set", "files", "minutes", "speech", "%", "sources", "packages"]
    assert "eval   offair" in out and "Dog" in out
