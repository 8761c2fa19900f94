"""``streamkit train retrieval --real-clips REAL``: the real event clips of a ``streamkit corpus real`` corpus as training pairs.

A real corpus keeps, for its ``train`` and ``dev`` splits (both built from TRAINING packages only),
``<split>/events/audio/*.wav`` (10 s scenes with their events in ``events.tsv``) and
``<split>/events/clips/<class>/*.wav`` (isolated source clips of one class). Each of them whose
classes all map to a class of the caption vocabulary (:data:`~streamkit.train.retrieval_captions.TRAIN`)
gets captions in the TRAINING wording: a lone event gets a single-event caption (with its duration
and position words in a scene; an isolated clip gets the clause alone), several events are joined
as in the synthetic clips. Loudness and background words need an SNR or a background that the
real corpus does not record, so none are written. ``REAL/eval`` is evaluation-only: it is never
read, and a path inside it is refused.
"""

from __future__ import annotations

import csv
import json
import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from streamkit.train.retrieval_captions import TRAIN, captions

__all__ = ["REAL_SPLITS", "class_map", "eval_clips", "real_clips", "real_features", "real_captions"]

REAL_SPLITS = ("train", "dev")  #: the splits trained on; never ``eval``
REAL_FORMAT = "streamkit-real-corpus/"
MAX_S = 10.0  #: an isolated clip longer than this is cut to its first 10 s, the length of the scenes


def _key(name: str) -> str:
    return re.sub(r"[^a-z]", "", name.lower())


def class_map(label: str, vocabulary: Sequence[str] = tuple(TRAIN.clauses)) -> str | None:
    """The caption class of a real clip's label (case, spaces and underscores ignored: ``speech`` -> ``Speech``), or None."""
    want = _key(label)
    return next((c for c in vocabulary if _key(c) == want), None)


def _is_real_root(d: Path) -> bool:
    man = d / "manifest.json"
    try:
        return man.is_file() and str(json.loads(man.read_text(encoding="utf-8")).get("format", "")).startswith(REAL_FORMAT)
    except (OSError, ValueError, AttributeError):
        return False


def _check_root(real: Path) -> None:
    full = real.resolve()
    for up in full.parents:  # a path inside a real corpus: refused when it is (in) the eval split, else pointed at the root
        if _is_real_root(up):
            if full.relative_to(up).parts[0] == "eval":
                raise ValueError(f"{real}: the eval split of the real corpus is evaluation-only and is never trained on")
            raise ValueError(f"{real}: a part of the real corpus {up}: give the corpus root (its train and dev splits are read)")
    if not _is_real_root(full):
        raise ValueError(f"{real}: not a `streamkit corpus real` corpus (no manifest.json of format {REAL_FORMAT}*)")


def real_clips(real: str | Path, *, splits: Sequence[str] = REAL_SPLITS) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """``(clips, skipped)``: the captionable clips of ``real``'s ``splits`` and how many were skipped, by reason.

    A clip is ``{"id", "path", "split", "events": [{"event_label", "onset", "offset"}], "clip_s", "timing"}``;
    ValueError for an eval split (as a path or in ``splits``) or a directory that is not a real corpus."""
    root = Path(real)
    _check_root(root)
    if "eval" in splits:
        raise ValueError("the real corpus's eval split is evaluation-only and is never trained on")
    out: list[dict[str, Any]] = []
    skipped = {"unmapped_class": 0, "no_events": 0}
    for split in splits:
        out += _split_clips(root, split, skipped)
    return out, skipped


def eval_clips(real: str | Path) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """The same clips of the real corpus's ``eval`` split, for scoring only (``benchmarks/retrieval.py --real-eval``)."""
    root = Path(real)
    _check_root(root)
    skipped = {"unmapped_class": 0, "no_events": 0}
    return _split_clips(root, "eval", skipped), skipped


def _split_clips(root: Path, split: str, skipped: dict[str, int]) -> list[dict[str, Any]]:
    import soundfile as sf

    out: list[dict[str, Any]] = []
    ev = root / split / "events"
    rows: dict[str, list[dict[str, Any]]] = {}
    tsv = ev / "events.tsv"
    if tsv.is_file():
        with tsv.open(encoding="utf-8", newline="") as fh:
            for r in csv.DictReader(fh, delimiter="\t"):
                rows.setdefault(r["filename"], []).append(r)
    for wav in sorted((ev / "audio").glob("*.wav")):
        labels = rows.get(wav.name, [])
        mapped = [class_map(r["event_label"]) for r in labels]
        if not labels:
            skipped["no_events"] += 1
            continue
        if None in mapped:  # a caption that leaves out an audible event would teach the wrong pairing
            skipped["unmapped_class"] += 1
            continue
        events = [{"event_label": c, "onset": float(r["onset"]), "offset": float(r["offset"])} for r, c in zip(labels, mapped)]
        out.append({"id": f"real-{split}-{wav.stem}", "path": wav, "split": split, "events": events,
                    "clip_s": min(MAX_S, float(sf.info(str(wav)).duration)), "timing": True})  # fmt: skip
    for d in sorted(p for p in (ev / "clips").glob("*") if p.is_dir()):
        cls = class_map(d.name)
        for wav in sorted(d.glob("*.wav")):
            if cls is None:
                skipped["unmapped_class"] += 1
                continue
            dur = min(MAX_S, float(sf.info(str(wav)).duration))
            out.append({"id": f"real-{split}-{d.name}-{wav.stem}", "path": wav, "split": split, "clip_s": dur, "timing": False,
                        "events": [{"event_label": cls, "onset": 0.0, "offset": dur}]})  # fmt: skip
    return out


def real_captions(clip: Mapping[str, Any], n: int, seed: int) -> list[str]:
    """``n`` TRAIN-wording captions of a real clip (an isolated clip: without duration or position words)."""
    return captions(clip, "train", n, seed, clip_s=float(clip.get("clip_s") or 10.0), timing=bool(clip.get("timing", True)))


def real_features(clips: Sequence[Mapping[str, Any]], sed_weights: str | Path, cache_dir: str | Path, *,
                  log: Callable[[str], None] | None = None) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """``(frames (N, T, D) float16, lengths (N,))`` of the real clips, cached in ``cache_dir`` under a key of their paths and the trunk."""
    import hashlib

    from streamkit.train.retrieval_data import clip_frames, file_sha

    key = hashlib.sha256("\n".join(str(Path(c["path"]).resolve()) for c in clips).encode()).hexdigest()[:12]
    sha = file_sha(sed_weights)[:12]
    cache = Path(cache_dir)
    f_path, l_path = cache / f"retrieval.real.{key}.{sha}.npy", cache / f"retrieval.real.{key}.{sha}.lengths.npy"
    if f_path.is_file() and l_path.is_file():
        frames, lengths = np.load(f_path, mmap_mode="r"), np.load(l_path)
        if frames.shape[0] == len(clips):
            return frames, lengths
    frames, lengths = clip_frames([Path(c["path"]) for c in clips], sed_weights, log=log, what="real", max_s=MAX_S)
    cache.mkdir(parents=True, exist_ok=True)
    np.save(f_path, frames)
    np.save(l_path, lengths)
    return frames, lengths
