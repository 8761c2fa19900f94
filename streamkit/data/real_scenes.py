"""``streamkit corpus real``: speech among real distractors, real event clips and off-air recordings.

``streamkit corpus real --out DIR [--cache DIR] [--seed S] [--jobs N]``

Sources are the pinned Debian packages of :mod:`streamkit.data.real_packages`, classified by
:mod:`streamkit.data.real_corpus`. Evaluation packages feed only ``eval``; training packages
feed ``train`` and ``dev``, whose source files are disjoint (each group of files of one package,
class and kind is shuffled with the seed and 15 % of it goes to dev; an event class with ≥ 2 clips
gives dev at least one). Both separations are asserted when the corpus is built.

Layout of ``DIR``::

    manifest.json                          command, seed, packages (version, SHA-256, licence, copyright
                                           file, role, files used), splits, rules
    sources/<package>/                     the unpacked packages (local only; never redistribute)
    <split>/scenes/audio/<id>.wav          ~60 s scenes, 16 kHz mono PCM_16 (split: train, dev, eval)
    <split>/scenes/rttm/<id>.rttm          speech segments
    <split>/scenes/labels/<id>.json        {"id", "rate", "n_samples", "intervals" (speech, samples, half-open),
                                            "speech": [{start, stop, source, package}],
                                            "distractors": [{start, stop, source, package, kind}]}
    eval/offair/audio/<id>.wav             codec2-examples modem/carrier recordings without speech, 8 kHz
    eval/offair/labels/<id>.json           {"id", "rate", "n_samples", "intervals": [], "kind", "source", "package"}
    <split>/events/clips/<Class>/<id>.wav  isolated real clips of a clear DCASE class, 16 kHz
    <split>/events/audio/<id>.wav          10 s scenes of 1-3 clips on a low noise floor, 16 kHz
    <split>/events/events.tsv              DCASE strong labels: filename, onset, offset, event_label

Speech scenes: speech turns (1-4 files of one package joined by 0.15-0.6 s pauses, 2-8 s) alternate
with distractors (a random kind, then package, then file; a 1.5-10 s excerpt) with 0.3-2 s of
silence between, on a pink noise floor 30-50 dB below the speech; speech is ~40 % of a scene.
Speech sits at -28..-16 dBFS active level, each distractor 12 dB below to 3 dB above it. Labels come
from each clean speech file (:func:`speech_labels`: the rules of
:func:`streamkit.data.hf_corpus.clean_labels` at 16 kHz, 10 ms frames within 45 dB of the file's
loudest, or 8 dB above its noise floor where that is higher, at most 30 dB below the loudest;
pauses ≤ 200 ms merged, specks < 50 ms dropped); distractors never overlap a speech turn. Event labels: 10 ms frames within 35 dB of the clip's loudest, gaps
≤ 250 ms merged, events < 100 ms dropped. Each scene has its own random stream
(``SeedSequence([seed, split, index])``): the corpus depends on the seed only, not on ``--jobs``.
"""

from __future__ import annotations

import json
import os
import re
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from scipy.signal import lfilter

from streamkit.data.hf_corpus import clean_labels
from streamkit.data.real_corpus import EVENT_RULES, OFFAIR, RULES, Source, inventory, load, unpack_rcc
from streamkit.data.real_packages import PINS, Pin, check_roles, fetch, unpack
from streamkit.eval.rttm import merge_intervals, write_rttm
from streamkit.io.outputs import write_audio, write_text

__all__ = ["DEFAULT_EVENT_SCENES", "DEFAULT_SCENES", "FORMAT", "SPLITS", "corpus_table", "generate", "partition", "speech_labels"]

FORMAT = "streamkit-real-corpus/1"
SPLITS = ("train", "dev", "eval")
RATE = 16000
SCENE_S = 60.0
EVENT_SCENE_S = 10.0
DEFAULT_SCENES = {"train": 120, "dev": 20, "eval": 40}
DEFAULT_EVENT_SCENES = {"train": 300, "dev": 50, "eval": 100}
DEV_FRACTION = 0.15
SPEECH_TARGET = 0.40
MAX_CLIPS_PER_CLASS = 40
# share of the speech turns per package (renormalised over the packages present)
SPEECH_WEIGHTS = {
    "pocketsphinx-testdata": 0.3, "asterisk-core-sounds-en-wav": 0.3, "codec2-examples": 0.2, "tuxpaint-stamps-default": 0.15,
    "sound-theme-freedesktop": 0.05, "fillets-ng-data-cs": 0.5, "hedgewars-data": 0.4, "fillets-ng-data": 0.07, "pingus-data": 0.03,
}  # fmt: skip
LABELS_16K = {"frame": 160, "merge_gap": 3200, "min_speech": 800}  # the 8 kHz rules of hf_corpus, at 16 kHz
EVENT_LABELS: dict[str, Any] = {"frame": 160, "active_db": -35.0, "merge_gap": 4000, "min_speech": 1600}
_PINK_B = [0.049922035, -0.095993537, 0.050612699, -0.004408786]
_PINK_A = [1.0, -2.494956002, 2.017265875, -0.522189400]

Progress = Callable[[str], None]


# --------------------------------------------------------------------------- split assignment
def partition(sources: Sequence[Source], seed: int) -> dict[str, list[Source]]:
    """Training-package sources -> ``{"train": [...], "dev": [...]}``, disjoint files."""
    groups: dict[tuple[str, str, str, str], list[Source]] = defaultdict(list)
    for s in sources:
        groups[(s.package, s.cls, s.kind, s.event or "")].append(s)
    out: dict[str, list[Source]] = {"train": [], "dev": []}
    for key in sorted(groups):
        g = sorted(groups[key], key=lambda s: s.path)
        rng = np.random.default_rng(np.random.SeedSequence([seed, 7, *key[0].encode(), *key[1].encode(), *key[2].encode(), *key[3].encode()]))
        g = [g[i] for i in rng.permutation(len(g))]
        k = round(DEV_FRACTION * len(g)) if len(g) >= 4 else 0
        if key[3] and len(g) >= 2:
            k = max(k, 1)
        out["dev"] += g[:k]
        out["train"] += g[k:]
    return out


# --------------------------------------------------------------------------- signal helpers
def _active_rms(x: np.ndarray) -> float:
    n = len(x) // 160 * 160
    if n == 0:
        return float(np.sqrt(np.mean(np.square(x, dtype=np.float64)))) if len(x) else 0.0
    ms = np.mean(np.square(x[:n].reshape(-1, 160), dtype=np.float64), axis=1)
    act = ms[ms >= ms.max() * 1e-3]  # frames within 30 dB of the loudest
    return float(np.sqrt(act.mean())) if act.size else 0.0


def _trim(x: np.ndarray, db: float = -50.0) -> np.ndarray:
    """Drop leading/trailing 10 ms frames more than ``db`` below the loudest."""
    n = len(x) // 160
    if n == 0:
        return x
    ms = np.mean(np.square(x[: n * 160].reshape(-1, 160), dtype=np.float64), axis=1)
    on = np.flatnonzero(ms > ms.max() * 10 ** (db / 10))
    return x[on[0] * 160 : (on[-1] + 1) * 160] if on.size else x[:0]


def _fade(x: np.ndarray, n: int = 160) -> np.ndarray:
    x = x.astype(np.float32, copy=True)
    n = min(n, len(x) // 2)
    if n:
        r = np.linspace(0.0, 1.0, n, dtype=np.float32)
        x[:n] *= r
        x[-n:] *= r[::-1]
    return x


def _at_level(x: np.ndarray, db: float) -> np.ndarray:
    r = _active_rms(x)
    return (x * np.float32(10 ** (db / 20) / r)).astype(np.float32) if r > 0 else x.astype(np.float32)


def _pink(rng: np.random.Generator, n: int, db: float) -> np.ndarray:
    w = lfilter(_PINK_B, _PINK_A, rng.standard_normal(n + 2000))[2000:]
    return (w * (10 ** (db / 20) / max(float(np.sqrt(np.mean(w * w))), 1e-12))).astype(np.float32)


def _to_i16(x: np.ndarray) -> np.ndarray:
    return np.clip(np.round(np.asarray(x, np.float64) * 32767), -32768, 32767).astype(np.int16)


def _label_json(obj: dict[str, Any]) -> str:
    return json.dumps(obj, ensure_ascii=False, indent=1)


# --------------------------------------------------------------------------- per-process state
_STATE: dict[str, Any] = {}


def _init(state: dict[str, Any]) -> None:
    _STATE.clear()
    _STATE.update(state)


def _pick(rng: np.random.Generator, items: Sequence[Any]) -> Any:
    return items[int(rng.integers(len(items)))]


def speech_labels(x: np.ndarray) -> np.ndarray:
    """Speech intervals of one clean 16 kHz speech recording: the rules of
    :func:`~streamkit.data.hf_corpus.clean_labels` (10 ms frames, pauses ≤ 200 ms merged, specks
    < 50 ms dropped) with the level 45 dB below the loudest frame, raised for a recording whose
    noise floor (5th percentile frame) is higher to 8 dB above that floor, at most 30 dB below the
    loudest frame (real recordings are not digitally silent between words)."""
    n = len(x) // 160 * 160
    if n == 0:
        return np.zeros((0, 2), np.int64)
    e = 10 * np.log10(np.mean(np.square(x[:n].reshape(-1, 160), dtype=np.float64), axis=1) + 1e-20)
    active_db = max(-45.0, min(-30.0, float(np.percentile(e, 5) - e.max()) + 8.0))
    return clean_labels(x, active_db=active_db, **LABELS_16K)


def _speech_turn(rng: np.random.Generator, pools: dict[str, Any], roots: dict[str, str], limit: int
                 ) -> tuple[np.ndarray, list[dict[str, Any]], np.ndarray]:  # fmt: skip
    """1-4 files of one package joined by short pauses, at most ``limit`` samples: the samples,
    the placed files and the speech intervals (each file labelled on its own, then pauses
    ≤ 200 ms merged)."""
    pkgs = sorted(pools["speech"])
    w = np.array([SPEECH_WEIGHTS.get(p, 0.1) for p in pkgs])
    pkg = pkgs[int(rng.choice(len(pkgs), p=w / w.sum()))]
    files = pools["speech"][pkg]
    want = int(rng.uniform(2.0, 8.0) * RATE)
    parts: list[np.ndarray] = []
    placed: list[dict[str, Any]] = []
    ivs: list[np.ndarray] = []
    at = 0
    for k in rng.permutation(len(files))[:4].tolist():
        src = files[k]
        if parts:
            pause = np.zeros(int(rng.uniform(0.15, 0.6) * RATE), np.float32)
            parts.append(pause)
            at += len(pause)
        x = load(roots[src.package], src, RATE)[0][: max(0, min(15 * RATE, limit - at))]
        if len(x) == 0:
            break
        parts.append(x)
        ivs.append(speech_labels(x) + at)
        placed.append({"start": at, "stop": at + len(x), "source": src.path, "package": src.package})
        at += len(x)
        if at >= want:
            break
    iv = np.concatenate(ivs) if ivs else np.zeros((0, 2), np.int64)
    if len(iv):
        gap = LABELS_16K["merge_gap"]
        iv = merge_intervals(iv + np.array([0, gap])) - np.array([0, gap])
    x = np.concatenate(parts).astype(np.float32) if parts else np.zeros(0, np.float32)
    return x[:limit], placed, iv.astype(np.int64)


def _distractor(rng: np.random.Generator, pools: dict[str, Any], roots: dict[str, str]) -> tuple[np.ndarray, dict[str, Any]]:
    kind = _pick(rng, sorted(pools["nonspeech"]))
    pkg = _pick(rng, sorted(pools["nonspeech"][kind]))
    src = _pick(rng, pools["nonspeech"][kind][pkg])
    x = _trim(load(roots[src.package], src, RATE)[0])
    want = int(rng.uniform(1.5, 10.0) * RATE)
    if len(x) > want:
        o = int(rng.integers(len(x) - want + 1))
        x = x[o : o + want]
    return _fade(x), {"source": src.path, "package": src.package, "kind": kind}


def make_scene(split: str, index: int) -> dict[str, Any]:
    """Build scene ``index`` of ``split`` from the pools set by :func:`_init`; writes its files."""
    st = _STATE
    seed, out, roots = st["seed"], Path(st["out"]), st["roots"]
    pools = st["pools"][split]
    rng = np.random.default_rng(np.random.SeedSequence([seed, SPLITS.index(split), index]))
    n = int(SCENE_S * RATE)
    speech = np.zeros(n, np.float32)
    other = np.zeros(n, np.float32)
    level = rng.uniform(-28.0, -16.0)
    intervals: list[np.ndarray] = []
    sp_items: list[dict[str, Any]] = []
    ds_items: list[dict[str, Any]] = []
    pos = int(rng.uniform(0.2, 1.5) * RATE)
    speech_n = 0
    last = ""
    while pos < n - RATE // 2:
        is_speech = speech_n < SPEECH_TARGET * pos if last != "speech" else speech_n < 0.7 * SPEECH_TARGET * pos
        if not pools["nonspeech"]:
            is_speech = True
        if is_speech:
            x, placed, iv = _speech_turn(rng, pools, roots, n - pos)
            x = _at_level(x, level + rng.uniform(-3.0, 3.0))
            if len(iv):
                intervals.append(iv + pos)
                speech_n += int((iv[:, 1] - iv[:, 0]).sum())
            speech[pos : pos + len(x)] += x
            sp_items += [{**p, "start": pos + p["start"], "stop": pos + p["stop"]} for p in placed]
            last = "speech"
        else:
            x, meta = _distractor(rng, pools, roots)
            x = _at_level(x, level + rng.uniform(-12.0, 3.0))[: n - pos]
            other[pos : pos + len(x)] += x
            ds_items.append({"start": pos, "stop": pos + len(x), **meta})
            last = "distractor"
        pos += len(x) + int(rng.uniform(0.3, 2.0) * RATE)
    mix = speech + other + _pink(rng, n, level - rng.uniform(30.0, 50.0))
    peak = float(np.abs(mix).max())
    if peak > 0.98:
        mix *= np.float32(0.98 / peak)
    iv = np.concatenate(intervals) if intervals else np.zeros((0, 2), np.int64)
    fid = f"{split}-{index:04d}"
    d = out / split / "scenes"
    write_audio(d / "audio" / f"{fid}.wav", _to_i16(mix), RATE, subtype="PCM_16", durable=False)
    write_rttm(d / "rttm" / f"{fid}.rttm", {fid: iv}, RATE, durable=False)
    label = {"id": fid, "rate": RATE, "n_samples": n, "intervals": iv.tolist(), "speech": sp_items, "distractors": ds_items}
    write_text(d / "labels" / f"{fid}.json", _label_json(label), durable=False)
    return {"id": fid, "n_samples": n, "speech_samples": int((iv[:, 1] - iv[:, 0]).sum()) if len(iv) else 0,
            "sources": sorted({(i["package"], i["source"]) for i in sp_items + ds_items})}  # fmt: skip


def make_event_scene(split: str, index: int) -> dict[str, Any]:
    """A 10 s DCASE-style scene of 1-3 real clips of the split on a low noise floor."""
    st = _STATE
    clips: dict[str, list[Source]] = st["clips"][split]  # class -> sources
    rng = np.random.default_rng(np.random.SeedSequence([st["seed"], 10 + SPLITS.index(split), index]))
    n = int(EVENT_SCENE_S * RATE)
    mix = _pink(rng, n, rng.uniform(-62.0, -48.0))
    events = []
    for _ in range(int(rng.integers(1, 4))):
        cls = _pick(rng, sorted(clips))
        src = _pick(rng, clips[cls])
        x = load(st["roots"][src.package], src, RATE)[0]
        if len(x) > 8 * RATE:
            o = int(rng.integers(len(x) - 8 * RATE + 1))
            x = x[o : o + 8 * RATE]
        x = _fade(_at_level(x, rng.uniform(-30.0, -15.0)))
        at = int(rng.integers(max(1, n - len(x) + 1)))
        x = x[: n - at]
        mix[at : at + len(x)] += x
        for a, b in clean_labels(x, **EVENT_LABELS).tolist():
            events.append({"onset": (at + a) / RATE, "offset": (at + b) / RATE, "event_label": cls, "source": src.path, "package": src.package})
    peak = float(np.abs(mix).max())
    if peak > 0.98:
        mix *= np.float32(0.98 / peak)
    fid = f"{split}-ev{index:04d}"
    write_audio(Path(st["out"]) / split / "events" / "audio" / f"{fid}.wav", _to_i16(mix), RATE, subtype="PCM_16", durable=False)
    return {"id": fid, "events": events}


def _scene_task(task: tuple[str, str, int]) -> dict[str, Any]:
    kind, split, index = task
    return make_scene(split, index) if kind == "scene" else make_event_scene(split, index)


# --------------------------------------------------------------------------- corpus
def _clip_id(src: Source) -> str:
    stem = re.sub(r"[^A-Za-z0-9]+", "_", src.path.rsplit(".", 1)[0].replace("usr/share/", "")).strip("_")
    return f"{src.package}__{stem[-80:]}"


def _pools(sources: Sequence[Source]) -> dict[str, Any]:
    speech: dict[str, list[Source]] = defaultdict(list)
    nonspeech: dict[str, dict[str, list[Source]]] = defaultdict(lambda: defaultdict(list))
    for s in sources:
        if s.cls == "speech":
            speech[s.package].append(s)
        elif s.cls == "nonspeech":
            nonspeech[s.kind][s.package].append(s)
    return {"speech": dict(speech), "nonspeech": {k: dict(v) for k, v in nonspeech.items()}}


def _run(tasks: list[tuple[str, str, int]], state: dict[str, Any], jobs: int, progress: Progress | None, what: str) -> list[dict[str, Any]]:
    t0 = time.monotonic()
    res: list[dict[str, Any]] = []

    def tick() -> None:
        if progress and (len(res) == len(tasks) or len(res) % 10 == 0):
            progress(f"  {what}: {len(res)}/{len(tasks)} in {time.monotonic() - t0:.1f} s")

    if jobs > 1 and len(tasks) > 1:
        import multiprocessing as mp

        with mp.get_context("spawn").Pool(jobs, initializer=_init, initargs=(state,)) as pool:
            for r in pool.imap(_scene_task, tasks, chunksize=2):
                res.append(r)
                tick()
    else:
        _init(state)
        for t in tasks:
            res.append(_scene_task(t))
            tick()
    return res


def generate(
    out_dir: str | os.PathLike[str],
    *,
    cache: str | os.PathLike[str],
    seed: int = 0,
    jobs: int = 1,
    scenes: dict[str, int] | None = None,
    event_scenes: dict[str, int] | None = None,
    pins: Sequence[Pin] | None = None,
    downloader: Any = None,
    progress: Progress | None = None,
    command: str | None = None,
) -> dict[str, Any]:
    """Fetch, unpack and classify the pinned packages, then write the corpus under ``out_dir``;
    returns (and writes) the manifest. Raises :class:`~streamkit.data.real_packages.FetchError`."""
    out = Path(out_dir)
    pins = PINS if pins is None else pins
    scenes = {**DEFAULT_SCENES, **(scenes or {})}
    event_scenes = {**DEFAULT_EVENT_SCENES, **(event_scenes or {})}
    say = progress or (lambda m: None)
    roots: dict[str, str] = {}
    inv: dict[str, list[Source]] = {}
    for p in pins:
        deb = fetch(p, cache, downloader=downloader)
        root = unpack(deb, out / "sources" / p.package, p)
        if p.package == "gcompris-qt-data":
            unpack_rcc(root)
        roots[p.package] = str(root)
        inv[p.package] = inventory(p.package, root)
        c = Counter(s.cls for s in inv[p.package])
        say(f"  {p.package} {p.version}: {c['speech']} speech, {c['nonspeech']} non-speech, {c['skip']} skipped files")
    role = {p.package: p.role for p in pins}
    by_split = {"eval": [s for p in pins if p.role == "eval" for s in inv[p.package]]}
    by_split.update(partition([s for p in pins if p.role == "train" for s in inv[p.package]], seed))
    for split, srcs in by_split.items():
        check_roles(split, {s.package for s in srcs if s.cls != "skip"})
    dev_files = {(s.package, s.path) for s in by_split["dev"]}
    assert not dev_files & {(s.package, s.path) for s in by_split["train"]}, "train and dev share source files"

    # isolated event clips
    clips: dict[str, dict[str, list[Source]]] = {}
    clip_counts: dict[str, dict[str, int]] = {}
    used: dict[str, set[str]] = defaultdict(set)
    for split in SPLITS:
        per: dict[str, list[Source]] = defaultdict(list)
        for s in by_split[split]:
            if s.event and s.cls != "skip":
                per[s.event].append(s)
        clips[split] = {}
        for cls in sorted(per):
            g = per[cls]
            if len(g) > MAX_CLIPS_PER_CLASS:
                rng = np.random.default_rng(np.random.SeedSequence([seed, 5, SPLITS.index(split), *cls.encode()]))
                g = [g[i] for i in sorted(rng.choice(len(g), MAX_CLIPS_PER_CLASS, replace=False))]
            for s in g:
                x = load(roots[s.package], s, RATE)[0]
                dest = out / split / "events" / "clips" / cls / f"{_clip_id(s)}.wav"
                write_audio(dest, _to_i16(x), RATE, subtype="PCM_16", durable=False)
                clips[split].setdefault(cls, []).append(s)
                used[s.package].add(s.path)
        clip_counts[split] = {c: len(v) for c, v in clips[split].items()}

    state: dict[str, Any] = {"seed": seed, "out": str(out), "roots": roots, "pools": {sp: _pools(by_split[sp]) for sp in SPLITS}, "clips": clips}
    splits_man: dict[str, Any] = {}
    for split in SPLITS:
        if scenes[split] and not state["pools"][split]["speech"]:
            raise ValueError(f"no speech sources for the {split} split")
        res = _run([("scene", split, i) for i in range(scenes[split])], state, jobs, progress, f"{split} scenes")
        ev = _run([("events", split, i) for i in range(event_scenes[split] if clips[split] else 0)], state, jobs, progress, f"{split} events")
        scene_sources = set()
        for r in res:
            for pkg, path in r.pop("sources"):
                used[pkg].add(path)
                scene_sources.add((pkg, path))
        lines = ["filename\tonset\toffset\tevent_label"]
        for e in ev:
            for x in sorted(e["events"], key=lambda x: (x["onset"], x["event_label"])):
                lines.append(f"{e['id']}.wav\t{x['onset']:.3f}\t{x['offset']:.3f}\t{x['event_label']}")
                used[x["package"]].add(x["source"])
        if ev:
            write_text(out / split / "events" / "events.tsv", "\n".join(lines) + "\n")
        splits_man[split] = {
            "scenes": res,
            "packages": sorted({s.package for s in by_split[split] if s.cls != "skip"}),
            "source_files": {c: sum(1 for s in by_split[split] if s.cls == c) for c in ("speech", "nonspeech")},
            "scene_sources_used": len(scene_sources),
            "scene_packages": sorted({p for p, _ in scene_sources}),
            "event_clips": clip_counts[split],
            "event_scenes": len(ev),
            "events": sum(len(e["events"]) for e in ev),
        }

    # off-air recordings without speech (eval)
    offair = []
    for s in by_split["eval"]:
        kind = next((k for suffix, k in OFFAIR.items() if s.path.endswith(suffix)), None)
        if kind is None:
            continue
        x, sr = load(roots[s.package], s, None)
        fid = Path(s.path).stem
        write_audio(out / "eval" / "offair" / "audio" / f"{fid}.wav", _to_i16(x), sr, subtype="PCM_16", durable=False)
        lab = {"id": fid, "rate": sr, "n_samples": len(x), "intervals": [], "kind": kind, "source": s.path, "package": s.package}
        write_text(out / "eval" / "offair" / "labels" / f"{fid}.json", _label_json(lab), durable=False)
        offair.append({"id": fid, "n_samples": len(x), "rate": sr, "kind": kind})
        used[s.package].add(s.path)
    splits_man["eval"]["offair"] = offair

    manifest = {
        "format": FORMAT,
        "command": command or " ".join(sys.argv),
        "seed": seed,
        "rate": RATE,
        "packages": [{**p.to_dict(), "files_used": sorted(used[p.package])} for p in pins],
        "splits": splits_man,
        "rules": {
            "classes": [list(r) for r in RULES],
            "events": [list(r) for r in EVENT_RULES],
            "offair": OFFAIR,
            "speech_labels": "per clean speech file, hf_corpus.clean_labels at 16 kHz: 10 ms frames within 45 dB of the loudest (or 8 dB above the 5th-percentile frame where higher, at most 30 dB below the loudest), pauses <= 200 ms merged, < 50 ms dropped",
            "event_labels": "10 ms frames within 35 dB of the clip's loudest, gaps <= 250 ms merged, < 100 ms dropped",
            "roles": {p.package: role[p.package] for p in pins},
            "dev_fraction": DEV_FRACTION,
        },
        "licence_note": "GPL / CC-BY-SA audio: used locally to train and evaluate, never redistributed.",
    }
    write_text(out / "manifest.json", json.dumps(manifest, ensure_ascii=False, indent=1))
    return manifest


def corpus_table(manifest: dict[str, Any]) -> str:
    """The corpus table: one row per split and set (scenes, off-air, event clips, event scenes)."""
    rows: list[tuple[str, ...]] = [("split", "set", "files", "minutes", "speech %", "sources", "packages")]
    for split in SPLITS:
        m = manifest["splits"][split]
        sc = m["scenes"]
        n = sum(s["n_samples"] for s in sc)
        sp = sum(s["speech_samples"] for s in sc)
        pk = m["scene_packages"]
        srcs = m["scene_sources_used"]
        rows.append((split, "scenes", str(len(sc)), f"{n / RATE / 60:.1f}", f"{100 * sp / n:.1f}" if n else "n/a", str(srcs), str(len(pk))))
        if m.get("offair"):
            na = sum(o["n_samples"] / o["rate"] for o in m["offair"])
            rows.append((split, "offair", str(len(m["offair"])), f"{na / 60:.1f}", "0.0", str(len(m["offair"])), "1"))
        if m["event_scenes"]:
            rows.append((split, "event scenes", str(m["event_scenes"]), f"{m['event_scenes'] * EVENT_SCENE_S / 60:.1f}", "",
                         f"{m['events']} events", ""))  # fmt: skip
    classes = sorted({c for sp in SPLITS for c in manifest["splits"][sp]["event_clips"]})
    clip_rows = [("event clips", *SPLITS)] + [(c, *(str(manifest["splits"][sp]["event_clips"].get(c, 0)) for sp in SPLITS)) for c in classes]
    return _fmt(rows) + "\n\n" + _fmt(clip_rows)


def _fmt(rows: list[tuple[str, ...]]) -> str:
    w = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(c.ljust(w[i]) for i, c in enumerate(r)).rstrip() for r in rows)
