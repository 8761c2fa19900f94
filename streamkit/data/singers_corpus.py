"""``streamkit corpus singers``: a synthetic singer-identification corpus, split strictly by recording.

``streamkit corpus singers --singers N --hours H --out DIR [--seed S] [--jobs J] [--accompaniment P]
[--channel none|room|hf] [--unknown K]``

Each of the N *known* singers (:class:`~streamkit.data.singing.SingerProfile`, ``S001``...) sings
``max(3, ...)`` recordings of 20-60 s so that the corpus holds about H hours; K *unknown* singers
(``U001``..., default a quarter of N, at least 1) sing a few recordings each that are only in the
test split, for open-set identification. A recording is one :func:`~streamkit.data.singing.sing`
call: its own melody, a transposition of -2..+2 semitones, the singer's mode (one recording in
five the other mode), a guitar with probability P, the channel, and a low noise floor (SNR 30-50
dB re the voiced level).

**Splits are by recording**: each known singer's recordings are shuffled and dealt to test
(20 %, at least 1), dev (10 %, at least 1) and train (the rest, at least 1), so every known singer
is in every split but no recording, and so no clip or motif cut from it, is in two splits. (The
public code of the singer-ID paper split the motif clips at random, so clips of one recording
landed in both train and test and the score measured the recording as much as the singer.)

Layout of ``DIR``::

    manifest.json           format, command, seed, counts per split, singers per split, hours, wall time
    recordings.tsv          id, split, singer, known, duration_s, accompaniment, channel
    singers.json            every singer's profile (timbre, habits, personal motifs)
    audio/<id>.wav          16 kHz mono PCM_16
    truth/<id>.json         singer, split, seed, transposition, mode, the f0 truth (``f0_cents``
                            re 55 Hz per 10 ms frame, null where unvoiced; frame i centred at
                            i*10 ms), the phrases (notes with MIDI pitch, vowel, kind; planted
                            motif occurrences by note index) and the channel parameters

Every recording has its own seed (``SeedSequence([seed, kind, singer, recording])``) and every
singer its own profile seed, so the corpus is identical for any ``--jobs``, and a singer's profile
and recordings do not change with N.
"""

from __future__ import annotations

import json
import math
import os
import time
from pathlib import Path
from typing import Any

import numpy as np

from streamkit.data.singing import CHANNELS, RATE, SingerProfile, sing
from streamkit.io.outputs import check_output_path, write_audio, write_text

__all__ = ["FORMAT", "SPLITS", "corpus_table", "generate", "plan", "profile"]

FORMAT = "streamkit-singers-corpus/1"
SPLITS = ("train", "dev", "test")
REC_S = (20.0, 60.0)
KNOWN, UNKNOWN = 1, 2


def profile(seed: int, kind: int, index: int) -> SingerProfile:
    """Singer ``index`` (0-based) of ``kind`` (:data:`KNOWN` or :data:`UNKNOWN`) of corpus ``seed``."""
    name = f"{'S' if kind == KNOWN else 'U'}{index + 1:03d}"
    return SingerProfile.random(np.random.default_rng(np.random.SeedSequence([int(seed), kind, int(index)])), name)


def plan(singers: int, hours: float, seed: int, *, unknown: int | None = None, accompaniment: float = 0.3,
         channel: str = "none") -> list[dict[str, Any]]:  # fmt: skip
    """The recordings to make (one dict per recording: id, split, singer, kind, index, seed,
    duration, transposition, mode, accompaniment, channel), split by recording.

    Raises:
        ValueError: fewer than 2 singers, hours <= 0, a negative ``unknown``, an accompaniment
            probability outside [0, 1], an unknown channel.
    """
    if singers < 2:
        raise ValueError(f"--singers must be >= 2, got {singers}")
    if not hours > 0 or not math.isfinite(hours):
        raise ValueError(f"--hours must be > 0, got {hours:g}")
    if unknown is None:
        unknown = max(1, round(singers / 4))
    if unknown < 0:
        raise ValueError(f"--unknown must be >= 0, got {unknown}")
    if not 0.0 <= accompaniment <= 1.0:
        raise ValueError(f"--accompaniment must be a probability in [0, 1], got {accompaniment:g}")
    if channel not in CHANNELS:
        raise ValueError(f"--channel must be one of {', '.join(CHANNELS)}, got {channel!r}")
    mean_s = sum(REC_S) / 2
    per_known = max(3, round(hours * 3600 / mean_s / (singers + 0.2 * unknown)))
    per_unknown = max(1, round(0.2 * per_known))
    recs: list[dict[str, Any]] = []
    for kind, count, per in ((KNOWN, singers, per_known), (UNKNOWN, unknown, per_unknown)):
        for i in range(count):
            p = profile(seed, kind, i)
            order = np.random.default_rng(np.random.SeedSequence([int(seed), kind, i, 1 << 20])).permutation(per)
            n_test, n_dev = max(1, round(0.2 * per)), max(1, round(0.1 * per))
            for r in range(per):
                rng = np.random.default_rng(np.random.SeedSequence([int(seed), kind, i, r]))
                pos = int(np.flatnonzero(order == r)[0])
                split = "test" if kind == UNKNOWN or pos < n_test else "dev" if pos < n_test + n_dev else "train"
                other = [m for m in ("phrygian", "flamenco") if m != p.mode][0]
                recs.append(
                    {
                        "id": f"{p.singer}_r{r + 1:03d}",
                        "split": split,
                        "singer": p.singer,
                        "known": kind == KNOWN,
                        "kind": kind,
                        "index": i,
                        "seed": int(rng.integers(2**31)),
                        "duration_s": round(float(rng.uniform(*REC_S)), 2),
                        "transpose": int(rng.integers(-2, 3)),
                        "mode": other if rng.random() < 0.2 else p.mode,
                        "accompaniment": bool(rng.random() < accompaniment),
                        "channel": channel,
                        "noise_snr_db": round(float(rng.uniform(30, 50)), 1),
                    }
                )
    return recs


def _make(task: dict[str, Any]) -> dict[str, Any]:
    p = profile(task["seed0"], task["kind"], task["index"])
    song = sing(p, task["seed"], task["duration_s"], transpose=task["transpose"], mode=task["mode"],
                accompaniment=task["accompaniment"], channel=task["channel"])  # fmt: skip
    x = song.audio.astype(np.float64)
    rng = np.random.default_rng(np.random.SeedSequence([task["seed"], 9]))
    mask = np.zeros(len(x), bool)
    per = int(song.rate * 0.01)
    mask[: song.voiced.size * per] = np.repeat(song.voiced, per)[: len(x)]
    ref = float(np.sqrt(np.mean(x[mask] ** 2))) if mask.any() else 0.1
    x += rng.standard_normal(len(x)) * ref * 10 ** (-task["noise_snr_db"] / 20)
    x *= min(1.0, 0.95 / (float(np.max(np.abs(x))) + 1e-12))
    out = Path(task["out"])
    write_audio(out / "audio" / f"{task['id']}.wav", np.clip(np.round(x * 32767), -32768, 32767).astype(np.int16), RATE, subtype="PCM_16",
                durable=False)  # fmt: skip
    keep = {
        k: task[k] for k in ("id", "split", "singer", "known", "seed", "duration_s", "transpose", "mode", "accompaniment", "channel", "noise_snr_db")
    }
    truth = {
        **keep,
        "rate": RATE,
        "samples": len(x),
        "frame_s": 0.01,
        "f0_cents": [None if not v else round(float(c), 1) for c, v in zip(song.f0_cents, song.voiced)],
        "phrases": [ph.record() for ph in song.phrases],
        "render": song.info,
    }
    write_text(out / "truth" / f"{task['id']}.json", json.dumps(truth), durable=False)
    return {**keep, "duration_s": round(len(x) / RATE, 2), "phrases": len(song.phrases),
            "motifs": sum(len(ph.motifs) for ph in song.phrases), "voiced_s": round(float(np.sum(song.voiced)) * 0.01, 2)}  # fmt: skip


def generate(out_dir: str | os.PathLike[str], singers: int, hours: float, seed: int = 0, *, unknown: int | None = None,
             accompaniment: float = 0.3, channel: str = "none", jobs: int = 1, progress: Any = None) -> dict[str, Any]:  # fmt: skip
    """Write the corpus under ``out_dir`` (see the module docstring); returns (and writes) the
    manifest. ``progress(done, total, audio_s, wall_s)`` after every recording.

    Raises:
        ValueError: bad arguments (see :func:`plan`), ``jobs < 1``, ``out_dir`` not a directory.
        OutputPathError: an output file's path is taken by something that is not a regular file.
    """
    if jobs < 1:
        raise ValueError(f"--jobs must be >= 1, got {jobs}")
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise ValueError(f"--out {out} exists and is not a directory")
    recs = plan(singers, hours, seed, unknown=unknown, accompaniment=accompaniment, channel=channel)
    for name in ("manifest.json", "recordings.tsv", "singers.json"):
        check_output_path(out / name)  # fail before the long part
    for r in recs:
        check_output_path(out / "audio" / f"{r['id']}.wav")
        check_output_path(out / "truth" / f"{r['id']}.json")
    tasks = [{**r, "seed0": int(seed), "out": str(out)} for r in recs]
    t0 = time.perf_counter()
    results: list[dict[str, Any]] = []
    audio_s = 0.0
    if jobs > 1:
        import multiprocessing as mp

        with mp.get_context("spawn").Pool(jobs) as pool:
            for res in pool.imap(_make, tasks, chunksize=1):
                results.append(res)
                audio_s += res["duration_s"]
                if progress:
                    progress(len(results), len(tasks), audio_s, time.perf_counter() - t0)
    else:
        for t in tasks:
            results.append(_make(t))
            audio_s += results[-1]["duration_s"]
            if progress:
                progress(len(results), len(tasks), audio_s, time.perf_counter() - t0)
    wall = time.perf_counter() - t0
    cols = ("id", "split", "singer", "known", "duration_s", "accompaniment", "channel")
    lines = ["\t".join(cols)] + ["\t".join(str(int(r[c]) if isinstance(r[c], bool) else r[c]) for c in cols) for r in results]
    write_text(out / "recordings.tsv", "\n".join(lines) + "\n")
    profiles = {r["singer"]: profile(seed, r["kind"], r["index"]).record() for r in recs}
    write_text(out / "singers.json", json.dumps(profiles, indent=1))
    splits: dict[str, Any] = {}
    for s in SPLITS:
        rs = [r for r in results if r["split"] == s]
        splits[s] = {
            "recordings": len(rs),
            "hours": round(sum(r["duration_s"] for r in rs) / 3600, 4),
            "voiced_hours": round(sum(r["voiced_s"] for r in rs) / 3600, 4),
            "known_singers": sorted({r["singer"] for r in rs if r["known"]}),
            "unknown_singers": sorted({r["singer"] for r in rs if not r["known"]}),
            "phrases": sum(r["phrases"] for r in rs),
            "planted_motifs": sum(r["motifs"] for r in rs),
        }
    u = sum(1 for r in recs if not r["known"] and r["id"].endswith("_r001"))
    manifest = {
        "format": FORMAT,
        "command": f"streamkit corpus singers --singers {singers} --hours {hours:g} --out {out} --seed {seed} --unknown {u} "
        f"--accompaniment {accompaniment:g} --channel {channel}",
        "seed": int(seed),
        "rate": RATE,
        "singers": singers,
        "unknown": u,
        "split_by": "recording",
        "splits": splits,
        "audio_s": round(audio_s, 2),
        "wall_s": round(wall, 2),
        "jobs": jobs,
    }
    write_text(out / "manifest.json", json.dumps(manifest, indent=1))
    return manifest


def corpus_table(manifest: dict[str, Any]) -> str:
    """Per split: recordings, known and unknown singers, hours, voiced hours, phrases, planted motifs."""
    cols = ["split", "recordings", "known", "unknown", "hours", "voiced h", "phrases", "motifs"]
    rows = [
        [
            s,
            str(v["recordings"]),
            str(len(v["known_singers"])),
            str(len(v["unknown_singers"])),
            f"{v['hours']:.3f}",
            f"{v['voiced_hours']:.3f}",
            str(v["phrases"]),
            str(v["planted_motifs"]),
        ]  # fmt: skip
        for s, v in manifest["splits"].items()
    ]
    w = [max(len(c), *(len(r[i]) for r in rows)) for i, c in enumerate(cols)]
    lines = ["  ".join(c.rjust(w[i]) for i, c in enumerate(cols)), "  ".join("-" * x for x in w)]
    lines += ["  ".join(v.rjust(w[i]) for i, v in enumerate(r)) for r in rows]
    return "\n".join(lines)
