"""SAD over audio files and corpora: what ``streamkit sad`` and ``streamkit eval sad`` run.

* :func:`collect_audio` expands file and directory arguments (directories searched recursively
  for ``*.wav`` / ``*.flac``); :func:`score_file` gives one file's speech intervals and frame
  scores at 8 kHz: the systems that are blocks (stat, stat-c, dnn) stream the file through the
  graph ``io.file -> dsp.mono -> dsp.resample -> dsp.stat_sad | models.sad_dnn`` in bounded
  memory (:mod:`streamkit.eval.sad_stream`) and give the block's segments (hysteresis, vote,
  start-up re-scoring: what a graph gives); the others load the file and mark speech where
  ``score > threshold``, frames OR-ed onto samples by :func:`~streamkit.eval.sad.frames_to_samples`.
* :func:`split_files` and :func:`score_split`: the HF paper's protocol on a corpus written by
  ``streamkit corpus hf``: thresholds swept per split, the dev-EER and dev-best-F1 thresholds
  applied to eval (:mod:`streamkit.eval.sad`), beside the paper's Table 2 (:data:`PAPER_TABLE2`).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np

from streamkit.eval import sad_stream
from streamkit.eval import sad_systems as ss
from streamkit.eval.rttm import mask_to_intervals, read_rttm_masks
from streamkit.eval.sad import (
    DEFAULT_THRESHOLDS,
    RocCurve,
    frames_to_samples,
    sweep,
)

AUDIO_EXT = (".wav", ".flac")

#: Heitkaemper et al., "A Database for Research on Detection and Enhancement of Speech Transmitted
#: over HF links" (ITG 2021), Table 2: eval set, 0.5 s collar, threshold at the dev set's EER;
#: RT factor on a Xeon E3-1240 v6 @ 3.7 GHz. Percent.
PAPER_TABLE2: tuple[dict[str, Any], ...] = (
    {"system": "paper: statistical SAD (C)", "recall": 85.90, "precision": 93.24, "f1": 89.42, "rt_factor": 0.0047},
    {"system": "paper: DNN SAD (CNN+GRU)", "recall": 95.59, "precision": 95.65, "f1": 95.62, "rt_factor": 0.0119},
)


def collect_audio(paths: list[str]) -> list[Path]:
    """The audio files of ``paths``: files as given, directories searched recursively for :data:`AUDIO_EXT`; a missing path raises."""
    files: list[Path] = []
    for s in paths:
        p = Path(s)
        if p.is_dir():
            files += sorted(q for q in p.rglob("*") if q.is_file() and q.suffix.lower() in AUDIO_EXT)
        elif p.is_file():
            files.append(p)
        else:
            raise FileNotFoundError(f"path not found: {p}")
    return files


def file_id(stem: str, seen: set[str]) -> str:
    """A file id for an RTTM file name and its lines: ``stem`` without white space, numbered when already in ``seen``."""
    fid = re.sub(r"\s+", "_", stem) or "file"
    base, k = fid, 2
    while fid in seen:  # the same stem in two directories: keep both
        fid = f"{base}_{k}"
        k += 1
    seen.add(fid)
    return fid


def score_file(path: Path, system: ss.SadSystem, thr: float) -> sad_stream.FileSad:
    """Speech intervals and frame scores of one file at 8 kHz.

    A system that is a block (stat, stat-c, dnn) runs as a stream over the file
    (:func:`streamkit.eval.sad_stream.sad_file`: bounded memory, the block's segments, so the
    RTTM is what a graph gives); the others score the whole loaded file and take
    ``score > thr`` per frame, OR-ed onto the samples.
    """
    if sad_stream.streamed(system.name):
        return sad_stream.sad_file(path, system.name, thr)
    audio = ss.load_audio(path)
    sc = ss.score_signal(system, audio.x)
    speech = frames_to_samples(sc.scores > thr, sc.hop, sc.win, sc.n_samples)
    return sad_stream.FileSad(mask_to_intervals(speech), sc.scores, sc.hop, sc.win, sc.n_samples, sc.seconds, audio.notes)


def split_files(corpus: Path, split: str) -> list[tuple[str, Path, Path]]:
    """``(file id, audio, reference RTTM)`` of one split of a ``streamkit corpus hf`` corpus."""
    audio_dir = corpus / split / "audio"
    if not audio_dir.is_dir():
        raise FileNotFoundError(f"{corpus}: no {split}/audio directory (is it a corpus from `streamkit corpus hf`?)")
    out = []
    for a in sorted(q for q in audio_dir.iterdir() if q.suffix.lower() in AUDIO_EXT):
        r = corpus / split / "rttm" / f"{a.stem}.rttm"
        if not r.is_file():
            raise FileNotFoundError(f"{corpus}: reference {r} missing for {a}")
        out.append((a.stem, a, r))
    if not out:
        raise FileNotFoundError(f"{corpus}: no audio in {audio_dir}")
    return out


def score_split(
    systems: list[ss.SadSystem],
    files: list[tuple[str, Path, Path]],
    collar: float,
    mode: str,
    per_file: dict[str, dict[str, RocCurve]] | None = None,
) -> tuple[dict[str, RocCurve], dict[str, float], int]:
    """Sweep every system over one split; returns curves, process seconds per system, samples.

    ``per_file``, when given, is filled with ``{file_id: {system: curve}}`` (for breakdowns by
    channel condition).
    """
    secs = {s.name: 0.0 for s in systems}
    n_tot = 0
    curves: dict[str, RocCurve] = {}
    warm = np.random.default_rng(0).standard_normal(ss.RATE).astype(np.float32) * 0.01
    for s in systems:  # untimed warm-up: numba JIT, imports
        s.score_file(warm)
    for fid, apath, rpath in files:
        audio = ss.load_audio(apath)
        n = len(audio.x)
        n_tot += n
        refs = {fid: read_rttm_masks(rpath, ss.RATE, {fid: n})[fid]}
        for s in systems:
            sc = ss.score_signal(s, audio.x)
            secs[s.name] += sc.seconds
            hyp = frames_to_samples(sc.scores, sc.hop, sc.win, n)
            c = sweep(refs, {fid: hyp}, DEFAULT_THRESHOLDS, collar, rate=ss.RATE, mode=mode)  # type: ignore[arg-type]
            curves[s.name] = curves[s.name] + c if s.name in curves else c
            if per_file is not None:
                per_file.setdefault(fid, {})[s.name] = c
    return curves, secs, n_tot


def reference_lines() -> list[str]:
    return [f"| {r['system']} | eval | dev-EER (paper Table 2) | n/a | {r['recall']:.2f} | {r['precision']:.2f} | {r['f1']:.2f} | n/a | n/a | n/a | "
            f"{r['rt_factor']:.4f} |" for r in PAPER_TABLE2]  # fmt: skip
