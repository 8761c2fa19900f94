"""Pinned Debian packages of real recordings: the pin table and a checked fetcher.

The real-recordings corpus (:mod:`streamkit.data.real_corpus`) is built from audio shipped in
Debian (bookworm) packages, fetched at run time and never committed. Each package is pinned by
version and SHA-256 of its ``.deb``; :func:`fetch` runs ``apt-get download PKG=VERSION`` into a
cache directory (a file already there with the pinned SHA-256 is reused, nothing is downloaded),
checks the hash and :func:`unpack` runs ``dpkg-deb -x``. A file with another hash is never used:
it is renamed ``*.deb.bad`` and :class:`FetchError` names the package, the expected and the
actual hash.

Roles: ``eval`` packages only ever feed the evaluation split; ``train`` packages feed train and dev.
The split assignment asserts it (:func:`check_roles`). The licence strings are short summaries
of ``/usr/share/doc/<pkg>/copyright`` for the audio used (the copyright file is recorded next to
them in the manifest): GPL and CC-BY-SA audio is used locally, never redistributed.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "EVAL_PACKAGES",
    "PINS",
    "TRAIN_PACKAGES",
    "FetchError",
    "Pin",
    "check_roles",
    "fetch",
    "pin",
    "sha256_file",
    "unpack",
]

APT_TIMEOUT_S = 600  # one package download
DPKG_TIMEOUT_S = 600  # one package extraction


class FetchError(RuntimeError):
    """A package could not be fetched, verified or unpacked (one line, for an ``error:`` message)."""


@dataclass(frozen=True)
class Pin:
    """A pinned package: its ``.deb`` must have exactly this SHA-256 and size."""

    package: str
    version: str
    sha256: str
    size: int
    licence: str
    role: str  # "eval" | "train"
    audio: str = ""  # what it holds, for the manifest

    @property
    def copyright(self) -> str:
        """Path of the copyright file inside the package."""
        return f"usr/share/doc/{self.package}/copyright"

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "copyright": "/" + self.copyright}


# fmt: off
PINS: tuple[Pin, ...] = (
    # ---- evaluation only: never in train or dev
    Pin("pocketsphinx-testdata", "0.8+5prealpha+1-15", "eaeb7a01d54f20b799d1a81ef110ec544b2cb47ea006614078220737a33019f0", 1822580,
        "BSD-2-Clause (CMU Sphinx test data; LibriVox excerpts public domain)", "eval", "read speech (LibriVox, cards, go forward, numbers), 16 kHz"),
    Pin("asterisk-core-sounds-en-wav", "1.6.1-1", "2be3ea287d83299d143815fa804f11179a75b7affd4a758b98b55f5afc18a35d", 18272864,
        "CC-BY-SA-3.0 (Digium, voice: Allison Smith)", "eval", "telephony prompts, one female voice, 8 kHz"),
    Pin("asterisk-moh-opsound-wav", "2.03-1.1", "8f9d808a729d305c2d3343993f21ca5e6829e411682618dc8ea7aa8bc24a566c", 13969212,
        "CC-BY-SA-3.0 (opsound.org artists)", "eval", "music on hold, 8 kHz"),
    Pin("codec2-examples", "1.0.5-1", "7af8cd128f269a1d8116993c9d2bd7d4d452fc17da46a09899aaca2b9bd993d4", 11362712,
        "LGPL-2.1 (codec2 test samples)", "eval", "clean speech samples, off-air HF modem and carrier recordings, 8/16 kHz"),
    Pin("minetest-data", "5.6.1+dfsg+~1.9.0mt8+dfsg-2", "91371dd2bd51cfcd4fa60c138667989a47047dfe1a47f7523b9ad1782d397585", 3646524,
        "CC-BY-SA-3.0 (sounds; per-file authors in the copyright file)", "eval", "game sound effects (water, fire, doors, footsteps)"),
    Pin("scratch", "1.4.0.6~dfsg1-6.1", "36c582eb93110f64f06c4e685c41e933ccba2fa68db12f79b10bfe840b21fc10", 25654320,
        "CC-BY-SA-3.0 (Media/*)", "eval", "sound library: animals, effects, instruments, music loops"),
    Pin("sonic-pi-samples", "3.2.2~repack-8", "25f2312d2fae005e6ad0f4726b8ed3084e776006a5a132083506e960224ac79d", 21882696,
        "CC0-1.0 (most samples; a few CC-BY-SA-4.0, see the copyright file)", "eval", "music samples: drums, loops, ambient"),
    Pin("sound-theme-freedesktop", "0.8-2", "135cc4893ba590d428577bc3bf42df756a165c05a2a43f84311ad7db779a70ea", 383752,
        "CC-BY-SA-3.0 / CC-BY-3.0 / GPL-2+ (per file)", "eval", "desktop UI sounds, alarm clock, phone rings"),
    Pin("tuxpaint-stamps-default", "2022.06.04-1", "6db6c1bfc870a47f1499d6203b083522eacb57c5f9c87d468f2e92eb6d9d5f34", 160880444,
        "GPL-2", "eval", "stamp sounds (animals, household, vehicles) and spoken names/descriptions"),
    # ---- training material (train and dev, disjoint files)
    Pin("fillets-ng-data", "1.0.1-1.1", "25de89afd8b1adf7bcace8290248a6a22c89cd42300317e69000e162c032cf84", 70633484,
        "GPL-2+", "train", "game music, sound effects, a few voices"),
    Pin("fillets-ng-data-cs", "1.0.1-1.1", "3ecef99b9456f1c80c9625c6f2418642b52d58e7167a46bad7a412db17991b14", 39042172,
        "GPL-2+", "train", "Czech dialogue voices, many actors"),
    Pin("hedgewars-data", "1.0.2-6", "722225903a72604403e6e0026e40e9a6953f47a74d94efc5f55504bc05bb4761", 145330284,
        "GFDL-1.3 / CC-BY-SA-3.0 (sounds and music, per file)", "train", "voice packs (speech), sound effects, music"),
    Pin("frozen-bubble-data", "2.212-11", "39cdfd07d9532d1558762cf265a844d09015c4540568573c50f444cc084166e0", 21929412,
        "GPL-2", "train", "game music and sound effects"),
    Pin("pingus-data", "0.7.6-5.1", "db503fdc34a7f86a02f2f1a77219b5cf4d813224cd4b13b5f0aad3af3d213805", 11703040,
        "GPL-2+", "train", "game sound effects"),
    Pin("gcompris-qt-data", "3.1-2", "e9cf06ab2105529068df73085784e835d2ff03f870d2a8091f09125d40abac9f", 44196292,
        "GPL-3+ / CC-BY-SA / free-art (per file)", "train", "educational activity sounds in Qt .rcc bundles: farm animals, instruments, noises"),
)
# fmt: on

EVAL_PACKAGES = frozenset(p.package for p in PINS if p.role == "eval")
TRAIN_PACKAGES = frozenset(p.package for p in PINS if p.role == "train")
_BY_NAME = {p.package: p for p in PINS}


def pin(package: str) -> Pin:
    """The pin of ``package`` (KeyError names it)."""
    try:
        return _BY_NAME[package]
    except KeyError:
        raise KeyError(f"no pinned package {package!r}") from None


def check_roles(split: str, packages: Iterable[str]) -> None:
    """Assert the train/eval separation: eval packages only in ``eval``, train packages only in
    ``train``/``dev``. Raises ``AssertionError`` naming the offending package."""
    for p in packages:
        if split == "eval":
            assert p in EVAL_PACKAGES, f"package {p} is not an evaluation package but was put in the eval split"
        else:
            assert p not in EVAL_PACKAGES, f"evaluation-only package {p} was put in the {split} split"
            assert p in TRAIN_PACKAGES, f"package {p} is not a training package but was put in the {split} split"


def sha256_file(path: str | os.PathLike[str]) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _apt_download(p: Pin, cache: Path) -> None:
    """``apt-get download PKG=VERSION`` into ``cache`` (the default downloader)."""
    if shutil.which("apt-get") is None:
        raise FetchError(f"apt-get not found: cannot download {p.package}={p.version} (put its .deb in the cache directory)")
    try:
        r = subprocess.run(["apt-get", "download", f"{p.package}={p.version}"], cwd=cache, capture_output=True, text=True,
                           timeout=APT_TIMEOUT_S, check=False)  # fmt: skip
    except subprocess.TimeoutExpired:
        raise FetchError(f"apt-get download {p.package}={p.version} timed out after {APT_TIMEOUT_S} s") from None
    if r.returncode != 0:
        last = (r.stderr.strip().splitlines() or ["(no message)"])[-1]
        raise FetchError(f"apt-get download {p.package}={p.version} failed (exit {r.returncode}): {last}")


def _candidates(p: Pin, cache: Path) -> list[Path]:
    return sorted(cache.glob(f"{p.package}_*.deb"))


def fetch(p: Pin, cache: str | os.PathLike[str], *, downloader: Callable[[Pin, Path], None] | None = None) -> Path:
    """The verified ``.deb`` of ``p`` in ``cache``, downloaded there if no cached file has the pinned
    SHA-256. Raises :class:`FetchError` (bad hash: the file is renamed ``*.bad`` and not used)."""
    cache = Path(cache)
    cache.mkdir(parents=True, exist_ok=True)
    for f in _candidates(p, cache):
        if f.stat().st_size == p.size and sha256_file(f) == p.sha256:
            return f
    before = {f: f.stat().st_mtime_ns for f in _candidates(p, cache)}
    (downloader or _apt_download)(p, cache)
    new = [f for f in _candidates(p, cache) if before.get(f) != f.stat().st_mtime_ns]
    if not new:
        raise FetchError(f"downloading {p.package}={p.version} produced no {p.package}_*.deb in {cache}")
    for f in new:
        got = sha256_file(f)
        if got == p.sha256:
            return f
        f.rename(f.with_name(f.name + ".bad"))
        raise FetchError(f"SHA-256 mismatch for {p.package} {p.version}: expected {p.sha256}, got {got} ({f.name} renamed .bad, not used)")
    raise AssertionError("unreachable")


def unpack(deb: str | os.PathLike[str], dest: str | os.PathLike[str], p: Pin) -> Path:
    """``dpkg-deb -x deb dest`` unless ``dest`` already holds this exact package (a stamp file with
    its SHA-256); returns ``dest``."""
    dest = Path(dest)
    stamp = dest / ".streamkit-unpacked"
    if stamp.is_file() and stamp.read_text().strip() == p.sha256:
        return dest
    if shutil.which("dpkg-deb") is None:
        raise FetchError(f"dpkg-deb not found: cannot unpack {p.package} (install dpkg)")
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    try:
        r = subprocess.run(["dpkg-deb", "-x", str(deb), str(dest)], capture_output=True, text=True, timeout=DPKG_TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired:
        raise FetchError(f"dpkg-deb -x {Path(deb).name} timed out after {DPKG_TIMEOUT_S} s") from None
    if r.returncode != 0:
        last = (r.stderr.strip().splitlines() or ["(no message)"])[-1]
        raise FetchError(f"dpkg-deb -x {Path(deb).name} failed (exit {r.returncode}): {last}")
    stamp.write_text(p.sha256 + "\n")
    return dest
