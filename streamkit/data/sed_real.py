"""Real recordings as event sources of the SED corpus (``streamkit corpus sed --real-clips DIR``).

``DIR`` is the root written by ``streamkit corpus real --out DIR``; its isolated event clips are
``DIR/<split>/events/clips/<Class>/<id>.wav`` (16 kHz mono, one DCASE class per folder). Only the
``train`` and ``dev`` splits are read: ``eval`` holds the evaluation-only packages and is never
opened (:meth:`RealClips.load` refuses a root without train/dev clips, any clip path that
resolves under ``DIR/eval``, and any clip whose name ``<package>__<stem>`` names an
evaluation-only package: :data:`EVAL_ONLY` or a package of role ``eval`` in the root's manifest).

Which clips feed which corpus subset (:data:`SPLIT_OF`): the training subsets (synthetic, weak,
unlabelled) draw from ``train`` clips, validation and the corpus's own eval from ``dev`` clips, so
model selection and post-processing are tuned on recordings the weights never saw.

An event of class C becomes a real one with probability ``fraction`` when the split has clips of C
(else it stays procedural): a clip drawn uniformly, a segment of the event's drawn duration that
holds the clip's loudest 10 ms frame, faded in and out over 10 ms, then labelled by its energy
envelope as the procedural sources are (:func:`real_extent`: from its first to its last frame
above the threshold) and scaled to RMS 1 over that extent. Recordings have a noise floor, so the
threshold is the higher of the procedural one (45 dB below the loudest frame) and 6 dB over the
clip's floor (its 10th-percentile frame), capped at 20 dB below the loudest frame so that a
stationary sound (a vacuum cleaner) keeps its whole span.

These draws use their own random stream (``SeedSequence([seed, subset, index, 2])``): everything
else in a clip (classes, durations, SNRs, backgrounds, rooms, microphones, levels) is drawn as
without real clips, and without ``--real-clips`` the corpus is the procedural one, bit for bit.
"""

from __future__ import annotations

import functools
import json
import math
from pathlib import Path
from typing import Any

import numpy as np

from streamkit.data.sed_sources import CLASSES, render_event

__all__ = ["DEFAULT_FRACTION", "READ_SPLITS", "SPLIT_OF", "RealClips", "real_extent"]

#: the splits of a `corpus real` root that training material may come from (never ``eval``)
READ_SPLITS = ("train", "dev")
#: corpus subset -> the real split its events draw from
SPLIT_OF = {"synthetic": "train", "weak": "train", "unlabelled": "train", "validation": "dev", "eval": "dev"}
DEFAULT_FRACTION = 0.5
AUDIO_EXT = (".wav", ".flac", ".ogg")
#: the evaluation-only packages (never training or tuning material): a clip named ``<package>__<stem>`` of one of these is refused wherever it lies
EVAL_ONLY = ("pocketsphinx-testdata", "asterisk-core-sounds-", "asterisk-moh-opsound-", "codec2-examples", "minetest-data", "scratch",
             "sonic-pi-samples", "sound-theme-freedesktop", "tuxpaint-stamps-default")  # fmt: skip


def _eval_package(clip_name: str, eval_packages: frozenset[str]) -> str | None:
    pkg = clip_name.split("__", 1)[0] if "__" in clip_name else None
    if pkg is None:
        return None
    if pkg in eval_packages or any(pkg == e or e.endswith("-") and pkg.startswith(e) for e in EVAL_ONLY):
        return pkg
    return None


_FLOOR_DB, _OVER_FLOOR_DB, _CAP_DB = -45.0, 6.0, -20.0


def real_extent(x: np.ndarray, rate: int) -> tuple[int, int]:
    """First and one-past-last sample of the audible extent of a recording (10 ms frames; see the
    module docstring for the threshold); ``(0, 0)`` when it is silent."""
    fr = max(1, rate // 100)
    k = len(x) // fr
    if k == 0:
        return 0, 0
    e = np.sqrt(np.mean(np.asarray(x[: k * fr], np.float64).reshape(k, fr) ** 2, axis=1))
    peak = float(e.max())
    if peak <= 0:
        return 0, 0
    floor = float(np.percentile(e, 10)) * 10 ** (_OVER_FLOOR_DB / 20)
    thr = max(peak * 10 ** (_FLOOR_DB / 20), min(floor, peak * 10 ** (_CAP_DB / 20)))
    act = np.flatnonzero(e > thr)
    if act.size == 0:  # (e > thr holds at least at the peak frame)
        return 0, 0
    return int(act[0] * fr), int((act[-1] + 1) * fr)


@functools.lru_cache(maxsize=512)
def _read(path: str, rate: int) -> np.ndarray:
    import soundfile as sf
    from scipy.signal import resample_poly

    x, sr = sf.read(path, dtype="float64", always_2d=True)
    x = x.mean(axis=1)
    if int(sr) != rate:
        g = math.gcd(int(sr), int(rate))
        x = resample_poly(x, rate // g, int(sr) // g)
    return x


class RealClips:
    """The train/dev event clips of a ``streamkit corpus real`` root, by split and class."""

    def __init__(self, root: Path, clips: dict[str, dict[str, list[str]]], fraction: float, source: dict[str, Any] | None) -> None:
        self.root, self.clips, self.fraction, self.source = root, clips, float(fraction), source

    @classmethod
    def load(cls, root: str | Path, fraction: float = DEFAULT_FRACTION) -> RealClips:
        """Scan ``root/{train,dev}/events/clips/<Class>/``; ``eval`` is never listed.

        Raises:
            ValueError: ``fraction`` outside (0, 1], no such directory, no train/dev clips of any
                DCASE class, a class folder that is not a DCASE class, or a clip path that
                resolves into the root's ``eval`` split.
        """
        if not 0.0 < float(fraction) <= 1.0:
            raise ValueError(f"--real-fraction must be in (0, 1], got {fraction}")
        base = Path(root)
        if not base.is_dir():
            raise ValueError(f"--real-clips {base}: no such directory (make one with `streamkit corpus real --out DIR`)")
        base = base.resolve()
        forbidden = (base / "eval").resolve()
        if base == forbidden or base.is_relative_to(forbidden) or base.name == "eval":
            raise ValueError(f"--real-clips {root}: give the root of a `corpus real` tree, not its eval split")
        source = None
        mpath = base / "manifest.json"
        if mpath.is_file():
            try:
                source = json.loads(mpath.read_text(encoding="utf-8"))
            except ValueError as e:
                raise ValueError(f"--real-clips: {mpath.name}: unreadable: {e}") from None
        pk = source.get("packages") if isinstance(source, dict) else None
        eval_pkgs = frozenset(p.get("package") for p in pk or [] if isinstance(p, dict) and p.get("role") == "eval")
        clips: dict[str, dict[str, list[str]]] = {}
        for split in READ_SPLITS:
            assert split != "eval"  # the evaluation-only packages never become training or tuning material
            d = base / split / "events" / "clips"
            by: dict[str, list[str]] = {}
            if d.is_dir():
                for cdir in sorted(p for p in d.iterdir() if p.is_dir()):
                    if cdir.name not in CLASSES:
                        raise ValueError(f"--real-clips: {split}/events/clips/{cdir.name} is not a DCASE class ({', '.join(CLASSES)})")
                    files = sorted(p for p in cdir.iterdir() if p.is_file() and p.suffix.lower() in AUDIO_EXT)
                    for p in files:
                        if p.resolve().is_relative_to(forbidden):
                            raise ValueError(f"--real-clips: {p.relative_to(base)} resolves into the eval split; refused")
                        if (bad := _eval_package(p.name, eval_pkgs)) is not None:
                            raise ValueError(f"--real-clips: {p.relative_to(base)} is from the evaluation-only package {bad}; refused")
                    if files:
                        by[cdir.name] = [p.relative_to(base).as_posix() for p in files]
            clips[split] = by
        if not any(clips.values()):
            raise ValueError(f"--real-clips {root}: no clips under train/events/clips or dev/events/clips")
        return cls(base, clips, fraction, source)

    def pick(self, subset: str, cls: str, rng: np.random.Generator) -> str | None:
        """A clip (root-relative path) for an event of ``cls`` in ``subset``, or None: procedural."""
        pool = self.clips.get(SPLIT_OF[subset], {}).get(cls)
        u = rng.random()
        if not pool or u >= self.fraction:
            return None
        return pool[int(rng.integers(len(pool)))]

    def event(self, subset: str, cls: str, seed: int, duration_s: float, rng: np.random.Generator, rate: int) -> tuple[np.ndarray, dict[str, Any]]:
        """An event of ``cls`` for a clip of ``subset``: from a real clip (:meth:`pick`) or procedural
        (:func:`streamkit.data.sed_sources.render_event` of ``seed``)."""
        rel = self.pick(subset, cls, rng)
        return render_event(cls, seed, duration_s, rate) if rel is None else self.render(rel, duration_s, rng, rate)

    def render(self, rel: str, duration_s: float, rng: np.random.Generator, rate: int) -> tuple[np.ndarray, dict[str, Any]]:
        """The event from clip ``rel``: float32, trimmed to its extent, RMS 1 over it; and its record."""
        if rel.split("/", 1)[0] not in READ_SPLITS:
            raise ValueError(f"real clip {rel!r} is not in {' or '.join(READ_SPLITS)}")
        x = _read(str(self.root / rel), int(rate))
        n = min(len(x), max(int(duration_s * rate), int(0.05 * rate)))
        fr = max(1, rate // 100)
        k = len(x) // fr
        peak = int(np.argmax(np.sum(x[: k * fr].reshape(k, fr) ** 2, axis=1))) * fr if k else 0
        lo, hi = max(0, peak + fr - n), min(peak, len(x) - n)
        start = int(rng.integers(lo, hi + 1)) if hi >= lo else 0
        y = x[start : start + n].copy()
        f = min(fr, len(y) // 2)
        if f:
            ramp = np.linspace(0.0, 1.0, f, endpoint=False)
            y[:f] *= ramp
            y[len(y) - f :] *= ramp[::-1]
        a, b = real_extent(y, rate)
        y = y[a:b]
        rms = float(np.sqrt(np.mean(y * y))) if y.size else 0.0
        if rms > 0:
            y = y / rms
        return y.astype(np.float32), {"real_clip": rel, "start_s": round((start + a) / rate, 3)}

    def record(self) -> dict[str, Any]:
        """The corpus manifest's ``real_clips`` entry: fraction, clips per split and class, the source's packages."""
        rec: dict[str, Any] = {
            "fraction": self.fraction,
            "splits_read": list(READ_SPLITS),
            "split_of_subset": dict(SPLIT_OF),
            "clips": {s: {c: len(v) for c, v in by.items()} for s, by in self.clips.items()},
        }
        used = {rel.rsplit("/", 1)[-1].split("__", 1)[0] for by in self.clips.values() for v in by.values() for rel in v}
        pk = self.source.get("packages") if isinstance(self.source, dict) else None
        if isinstance(pk, list):  # the packages the clips come from, with version, digest and licence
            keys = ("package", "version", "sha256", "licence", "role")
            rec["packages"] = [{k: p.get(k) for k in keys} for p in pk if isinstance(p, dict) and p.get("package") in used]
        if isinstance(self.source, dict):
            rec["source_format"] = self.source.get("format")
        return rec


@functools.lru_cache(maxsize=4)
def cached(root: str, fraction: float) -> RealClips:
    """One :class:`RealClips` per process and root (the corpus's worker processes load it once)."""
    return RealClips.load(root, fraction)
