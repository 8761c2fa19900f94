"""Multilingual ASR corpus (en, hi, ta, gu) of espeak-ng speech, for the multi-softmax RNN-T.

``streamkit corpus asr --out DIR --hours-per-language en=H,hi=H,ta=H,gu=H [--seed S] [--jobs N]
[--augment hf|none]``

The analogue of the multi-softmax streaming RNN-T paper's data (its Table 1: two large languages,
En and Hi, about ten times the two small ones, Ta and Gu; grapheme vocabularies with ``B_``
word-start symbols and a blank). ``H`` is the total per language over the three splits
(train/dev/test, fractions ``--splits``, default 0.8/0.1/0.1).

**Text.** One utterance is one random sentence of 3-12 words drawn uniformly from the language's
offline word list (:mod:`streamkit.data.wordlists`: Debian hunspell/aspell dictionaries, filtered to
the language's script, so LID accuracy can be scored as script match). The label ``text`` is the
words separated by single spaces (en lower-case, every text NFC); espeak-ng reads it with a final
full stop (``tts_text``). ``--words N`` closes the vocabulary: sentences are drawn from a fixed,
seeded subset of N words per language (:func:`word_subset`, written to ``vocab/<lang>.words.txt``),
the same for every split, so test words were seen in training and WER measures recognition rather
than the spelling of unseen dictionary words (a hunspell list has tens of thousands of words, so
without it nearly every test word is new to a small model).

**Speech.** :func:`streamkit.data.tts.synthesize` (espeak-ng, 8 kHz). A speaker is an espeak-ng
language voice plus a variant (:data:`ASR_VARIANTS`, 77 of espeak-ng's 101 variants: the
robotic/whisper/joke ones and exact duplicates left out); en has 8 accents (en-us, en-gb, ...;
there is no Indian English voice), hi/ta/gu one voice each, so 616 en speakers and 77 each for the
others. Per language, the speakers are shuffled with the seed and partitioned by the split
fractions: dev and test speakers never occur in train (nor in each other). Per utterance: a random
speaker of its split, rate U{130..200} wpm, pitch U{30..70}, peak U(-6, -1) dBFS, and
U(0.15, 0.5) s of silence before and after the speech. ``speech_start``/``speech_stop`` (samples)
are where the clean speech begins and ends (:func:`streamkit.data.hf_corpus.clean_labels`), so a
SAD can be checked on every file.

**Augmentation** (``--augment hf``, default): with probability ``--augment-prob`` (0.8) the clean
utterance goes through :func:`streamkit.data.hf_channel.simulate` with
``ChannelParams.random(rng, severity)``, severity 0.2 by default (mild: mean SNR 17 dB; SSB band
limit 300-2700 Hz, fading, AGC, a few impulses/heterodynes; no interferer). The simulator keeps
length and alignment, so ``speech_start``/``speech_stop`` hold for the received audio too; the
channel parameters are recorded per utterance (``channel``, null for clean ones).
``--augment none`` writes the clean audio; the texts, speakers and timings are the same for both
(separate random streams).

**Determinism.** Utterance ``i`` of (language, split) draws from
``SeedSequence([seed, lang, split, i, stream])`` only; utterances are made in batches and the
split is cut at the first utterance that fills its share of hours, so the corpus depends on the
seed, the hours, the split fractions, the augmentation options, the espeak-ng version and the
dictionary package versions, never on ``--jobs``.

**Graphemes: Unicode codepoints** (after NFC), not extended grapheme clusters. Clusters (aksharas:
consonant + vowel sign, conjuncts with virama) would give hundreds to thousands of sparse units
per Indic language; codepoints keep the vowel signs (matras), virama and nasalisation marks as
their own symbols, 26-63 per language, which fits a per-language softmax of about 60-110 symbols
with the ``B_`` set (the paper's 59-133). Vocabulary of a language: ``<blank>`` = 0, then every
codepoint of its (whole, filtered) word list in codepoint order, then ``B_`` + every codepoint
that starts a word. A word is encoded as its ``B_`` first symbol followed by its plain symbols, so
spaces need no symbol and :meth:`Vocab.decode` restores them. Built from the word list rather than
from the generated texts, a vocabulary is the same for every corpus of the same language.

Layout of ``DIR``::

    manifest.json               format, command, seed, hours per language, splits, espeak-ng version,
                                word sources, speakers per language and split, vocabularies, counts
    vocab/<lang>.json           {"lang", "symbols": ["<blank>", ...]}
    <split>.jsonl               one line per utterance: id, lang, split, path (relative to DIR), text,
                                tts_text, n_samples, voice, rate, pitch, peak_dbfs, speech_start,
                                speech_stop, channel
    <split>/<lang>/<id>.wav     PCM_16, 8 kHz mono

Speed (one process pinned to one core with ``taskset -c 0``, on the shared 2-core machine under a
load of ~3.4): ``streamkit corpus asr --out DIR --hours-per-language
en=0.03,hi=0.03,ta=0.03,gu=0.03 --seed 1`` made 0.130 h (97 utterances) in 2.7 s of generation,
171x real time (98x counting the 2 s start-up); with ``--augment none`` 268x. ``--jobs N`` runs N
spawned workers (a few seconds of start-up each).
"""

from __future__ import annotations

import json
import math
import os
import time
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from streamkit.data import wordlists
from streamkit.data.hf_channel import RATE, ChannelParams, simulate
from streamkit.data.hf_corpus import _to_i16, clean_labels
from streamkit.data.tts import VARIANTS, Voice, espeak_version, list_voices, require_espeak, synthesize
from streamkit.io.outputs import atomic_output, write_audio, write_text

__all__ = [
    "ASR_VARIANTS",
    "BLANK",
    "ESPEAK_VOICES",
    "FORMAT",
    "LANGS",
    "SPLITS",
    "Vocab",
    "build_vocab",
    "corpus_table",
    "generate",
    "load_vocab",
    "normalize_text",
    "parse_hours",
    "read_jsonl",
    "speakers",
]

FORMAT = "streamkit-asr-corpus/1"
SPLITS = ("train", "dev", "test")
LANGS = wordlists.LANGS
BLANK = "<blank>"
WORD_START = "B_"

#: espeak-ng language voices per corpus language (no en-IN exists in espeak-ng)
ESPEAK_VOICES: dict[str, tuple[str, ...]] = {
    "en": ("en-us", "en-gb", "en-gb-scotland", "en-gb-x-rp", "en-gb-x-gbclan", "en-gb-x-gbcwmd", "en-029", "en-us-nyc"),
    "hi": ("hi",),
    "ta": ("ta",),
    "gu": ("gu",),
}

#: espeak-ng variants used as speakers: tts.VARIANTS (default, m1-m8, f1-f5), the klatt voices and the
#: named human-sounding variants. Left out: whisper/whisperf, Demonic, croak, robosoft*, UniRobot,
#: anikaRobot, RicishayMax*, fast, Storm, Tweaky, kaukovalta, AnxiousAndy (odd or non-speech-like),
#: and Mr, caleb, klatt6 (bit-identical to the default, klatt, klatt).
ASR_VARIANTS: tuple[str, ...] = VARIANTS + (
    "klatt", "klatt2", "klatt3", "klatt4", "klatt5",
    "adam", "Alex", "Alicia", "Andrea", "Andy", "Annie", "antonio", "aunty", "belinda", "benjamin", "boris", "david", "Denis",
    "Diogo", "ed", "edward", "edward2", "Gene", "Gene2", "gustave", "announcer", "Henrique", "Hugo", "iven", "iven2", "iven3",
    "iven4", "Jacky", "john", "Lee", "linda", "marcelo", "Marco", "Mario", "max", "Michael", "michel", "miguel", "Mike",
    "Nguyen", "pablo", "paul", "pedro", "quincy", "rob", "robert", "steph", "steph2", "steph3", "zac", "anika", "grandpa",
    "grandma", "norbert", "sandro", "shelby", "travis", "victor",
)  # fmt: skip

WORDS_PER_UTT = (3, 12)
RATE_WPM = (130, 200)
PITCH = (30, 70)
PEAK_DB = (-6.0, -1.0)
PAD_S = (0.15, 0.5)
DEFAULT_SEVERITY = 0.2
DEFAULT_AUGMENT_PROB = 0.8
DEFAULT_HOURS = "en=2,hi=2,ta=0.25,gu=0.25"
_EST_UTT_S = 3.5  # first guess of an utterance's length, to size the first batch


# --------------------------------------------------------------------------------------------
# text and vocabularies
# --------------------------------------------------------------------------------------------


def normalize_text(text: str, lang: str) -> str:
    """Label form of a text: NFC, en lower-cased, words separated by single spaces."""
    t = unicodedata.normalize("NFC", text)
    if lang == "en":
        t = t.lower()
    return " ".join(t.split())


@dataclass(frozen=True)
class Vocab:
    """Grapheme (codepoint) vocabulary of one language: ``<blank>`` = 0, graphemes, ``B_`` graphemes.

    ``encode("ab c")`` gives ``[B_a, b, B_c]``; ``decode`` inverts it (blanks are skipped, a ``B_``
    symbol starts a new word).
    """

    lang: str
    symbols: tuple[str, ...]
    _index: dict[str, int] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not self.symbols or self.symbols[0] != BLANK:
            raise ValueError(f"symbol 0 must be {BLANK!r}")
        if len(set(self.symbols)) != len(self.symbols):
            raise ValueError("duplicate symbols")
        object.__setattr__(self, "symbols", tuple(self.symbols))
        object.__setattr__(self, "_index", {s: i for i, s in enumerate(self.symbols)})

    def __len__(self) -> int:
        return len(self.symbols)

    @property
    def graphemes(self) -> list[str]:
        """The plain (not word-initial) graphemes."""
        return [s for s in self.symbols[1:] if not s.startswith(WORD_START)]

    def encode(self, text: str) -> list[int]:
        """Symbol ids of ``text`` (normalised with :func:`normalize_text`); ValueError on a grapheme
        outside the vocabulary."""
        ids: list[int] = []
        for word in normalize_text(text, self.lang).split(" "):
            for k, ch in enumerate(word):
                sym = WORD_START + ch if k == 0 else ch
                i = self._index.get(sym)
                if i is None:
                    raise ValueError(f"{self.lang}: grapheme {ch!r} (U+{ord(ch):04X}) of {word!r} is not in the vocabulary")
                ids.append(i)
        return ids

    def decode(self, ids: Iterable[int]) -> str:
        """Text of symbol ids; blanks are dropped, ``B_`` symbols start words."""
        out: list[str] = []
        for i in ids:
            i = int(i)
            if i == 0:
                continue
            if not 0 < i < len(self.symbols):
                raise ValueError(f"{self.lang}: symbol id {i} out of range [0, {len(self.symbols)})")
            s = self.symbols[i]
            if s.startswith(WORD_START):
                if out:
                    out.append(" ")
                out.append(s[len(WORD_START) :])
            else:
                out.append(s)
        return "".join(out)

    def to_dict(self) -> dict[str, Any]:
        return {"lang": self.lang, "symbols": list(self.symbols)}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Vocab:
        return cls(str(d["lang"]), tuple(d["symbols"]))

    def save(self, path: str | os.PathLike[str]) -> None:
        write_text(path, json.dumps(self.to_dict(), ensure_ascii=False, indent=1))


def build_vocab(lang: str, words: Iterable[str] | None = None) -> Vocab:
    """The vocabulary of ``lang`` from ``words`` (default: its whole filtered word list)."""
    ws = list(wordlists.words(lang) if words is None else words)
    plain = sorted({ch for w in ws for ch in w})
    initial = sorted({w[0] for w in ws if w})
    return Vocab(lang, (BLANK, *plain, *(WORD_START + c for c in initial)))


def load_vocab(corpus_dir: str | os.PathLike[str], lang: str) -> Vocab:
    """``DIR/vocab/<lang>.json`` of a generated corpus."""
    return Vocab.from_dict(json.loads((Path(corpus_dir) / "vocab" / f"{lang}.json").read_text(encoding="utf-8")))


# --------------------------------------------------------------------------------------------
# speakers and utterances
# --------------------------------------------------------------------------------------------


def speakers(lang: str) -> list[str]:
    """All speakers (voice+variant names) of ``lang`` that the installed espeak-ng has, sorted."""
    return [v.name for v in list_voices(ESPEAK_VOICES[lang], ASR_VARIANTS)]


def _partition(seed: int, lang_idx: int, names: Sequence[str], fractions: Sequence[float]) -> list[list[str]]:
    """Disjoint speaker sets per split (every split with a positive fraction gets at least one)."""
    rng = np.random.default_rng(np.random.SeedSequence([seed, 7919, lang_idx]))
    order = [names[i] for i in rng.permutation(len(names))]
    fr = np.asarray(fractions, float) / float(sum(fractions))
    counts = [0 if f <= 0 else max(1, int(round(f * len(order)))) for f in fr[1:]]
    first = len(order) - sum(counts)
    if first < 1:
        raise ValueError(f"too few speakers ({len(order)}) for the splits {list(fractions)}")
    out, i = [], 0
    for c in [first, *counts]:
        out.append(sorted(order[i : i + c]))
        i += c
    return out


def _make_utt(task: dict[str, Any]) -> dict[str, Any]:
    """Synthesise, augment and write one utterance; its JSONL record."""
    key = [task["seed"], task["lang_idx"], task["split_idx"], task["index"]]
    rng = np.random.default_rng(np.random.SeedSequence([*key, 0]))
    lang = task["lang"]
    voices = task["voices"]
    voice = Voice.parse(voices[int(rng.integers(len(voices)))])
    rate_wpm = int(rng.integers(RATE_WPM[0], RATE_WPM[1] + 1))
    pitch = int(rng.integers(PITCH[0], PITCH[1] + 1))
    peak_db = float(rng.uniform(*PEAK_DB))
    pre, post = (int(round(rng.uniform(*PAD_S) * RATE)) for _ in range(2))
    ws = task["words"] if task.get("words") else wordlists.words(lang)
    n_words = int(rng.integers(WORDS_PER_UTT[0], WORDS_PER_UTT[1] + 1))
    text = " ".join(ws[int(i)] for i in rng.integers(0, len(ws), n_words))
    tts_text = text + "."
    x = synthesize(tts_text, voice, rate_wpm=rate_wpm, pitch=pitch, out_rate=RATE)
    iv = clean_labels(x)
    if len(iv) == 0:
        raise RuntimeError(f"espeak-ng gave no speech for {voice.name!r}: {tts_text!r}")
    x = x[iv[0, 0] : iv[-1, 1]]
    x = x * np.float32(10 ** (peak_db / 20) / max(float(np.abs(x).max()), 1e-9))
    clean = np.zeros(pre + len(x) + post, np.float32)
    clean[pre : pre + len(x)] = x
    out = _to_i16(clean)
    channel = None
    if task["augment"] == "hf":
        g = np.random.default_rng(np.random.SeedSequence([*key, 1]))
        if g.random() < task["augment_prob"]:
            params = ChannelParams.random(g, task["severity"])
            sim = simulate(out.astype(np.float32) / np.float32(32767), params)
            out = _to_i16(sim.received)
            channel = sim.params.to_dict()
    rel = f"{task['split']}/{lang}/{task['id']}.wav"
    write_audio(Path(task["out"]) / rel, out, RATE, subtype="PCM_16", durable=False)
    return {
        "id": task["id"],
        "lang": lang,
        "split": task["split"],
        "path": rel,
        "text": text,
        "tts_text": tts_text,
        "n_samples": int(len(out)),
        "voice": voice.name,
        "rate": rate_wpm,
        "pitch": pitch,
        "peak_dbfs": round(peak_db, 3),
        "speech_start": pre,
        "speech_stop": pre + len(x),
        "channel": channel,
    }


# --------------------------------------------------------------------------------------------
# corpus
# --------------------------------------------------------------------------------------------


def parse_hours(spec: str | Mapping[str, float]) -> dict[str, float]:
    """``"en=2,hi=2,ta=0.25,gu=0.25"`` (or a mapping) -> hours per language, in :data:`LANGS` order.

    Raises:
        ValueError: unknown or repeated language code, a malformed item, or hours that are not a
            finite number > 0 (one-line messages, for the CLI).
    """
    items: list[tuple[str, str]] = []
    if isinstance(spec, Mapping):
        items = [(str(k), str(v)) for k, v in spec.items()]
    else:
        for part in str(spec).split(","):
            part = part.strip()
            if not part:
                continue
            if "=" not in part:
                raise ValueError(f"bad --hours-per-language item {part!r}: want LANG=HOURS, e.g. en=2")
            k, v = part.split("=", 1)
            items.append((k.strip(), v.strip()))
    out: dict[str, float] = {}
    for k, v in items:
        if k not in LANGS:
            raise ValueError(f"unknown language code {k!r} in --hours-per-language; known: {', '.join(LANGS)}")
        if k in out:
            raise ValueError(f"language {k!r} given twice in --hours-per-language")
        try:
            h = float(v)
        except ValueError:
            raise ValueError(f"bad hours {v!r} for {k}: want a number > 0") from None
        if not (math.isfinite(h) and h > 0):
            raise ValueError(f"bad hours {v!r} for {k}: want a number > 0")
        out[k] = h
    if not out:
        raise ValueError("--hours-per-language names no language")
    return {k: out[k] for k in LANGS if k in out}


def generate(
    out_dir: str | os.PathLike[str],
    hours_per_language: str | Mapping[str, float],
    seed: int = 0,
    *,
    splits: Sequence[float] = (0.8, 0.1, 0.1),
    augment: str = "hf",
    severity: float = DEFAULT_SEVERITY,
    augment_prob: float = DEFAULT_AUGMENT_PROB,
    jobs: int = 1,
    progress: Any = None,
    words: int | None = None,
) -> dict[str, Any]:
    """Write the corpus under ``out_dir``; returns (and writes) the manifest.

    ``words``: closed vocabulary, every sentence drawn from a fixed subset of that many words per
    language (:func:`word_subset`, the same for all splits); None draws from the whole word list.

    Every (language, split) with a positive fraction gets utterances until its share of the
    language's hours is reached (at least one). ``progress(done_utts, audio_s, wall_s)`` is called
    after every batch. The result does not depend on ``jobs``.

    Raises:
        ValueError: bad hours, splits or augmentation options.
        EspeakMissingError, WordListMissingError: espeak-ng or a dictionary is not installed.
    """
    hours = parse_hours(hours_per_language)
    if augment not in ("hf", "none"):
        raise ValueError(f"augment must be 'hf' or 'none', got {augment!r}")
    if not 0.0 <= severity <= 1.0:
        raise ValueError(f"severity must be in [0, 1], got {severity}")
    if not 0.0 <= augment_prob <= 1.0:
        raise ValueError(f"augment probability must be in [0, 1], got {augment_prob}")
    if len(splits) != len(SPLITS) or any(not math.isfinite(f) or f < 0 for f in splits) or splits[0] <= 0:
        raise ValueError(f"splits must be {len(SPLITS)} non-negative fractions with train > 0, got {list(splits)}")
    if words is not None and words < 1:
        raise ValueError(f"words must be >= 1, got {words}")
    require_espeak()
    for lang in hours:
        wordlists.words(lang)  # fail early, with the apt-get hint, if a dictionary is missing
    subsets = {lang: word_subset(lang, words, seed) for lang in hours} if words is not None else {}
    out = Path(out_dir)
    t0 = time.perf_counter()

    # streams: one per (language, split)
    streams: list[dict[str, Any]] = []
    voice_sets: dict[str, dict[str, list[str]]] = {}
    tot = float(sum(splits))
    for lang, h in hours.items():
        li = LANGS.index(lang)
        parts = _partition(seed, li, speakers(lang), splits)
        voice_sets[lang] = {}
        for si, (name, frac) in enumerate(zip(SPLITS, splits)):
            if frac <= 0:
                continue
            voice_sets[lang][name] = parts[si]
            (out / name / lang).mkdir(parents=True, exist_ok=True)
            streams.append({"lang": lang, "lang_idx": li, "split": name, "split_idx": si, "voices": parts[si],
                            "target": h * 3600 * RATE * frac / tot, "have": 0, "next": 0, "done": False, "records": []})  # fmt: skip

    def task(s: dict[str, Any], i: int) -> dict[str, Any]:
        return {"seed": int(seed), "lang": s["lang"], "lang_idx": s["lang_idx"], "split": s["split"], "split_idx": s["split_idx"],
                "index": i, "id": f"{s['lang']}_{s['split']}_{i:06d}", "voices": s["voices"], "out": str(out), "augment": augment,
                "severity": float(severity), "augment_prob": float(augment_prob), "words": subsets.get(s["lang"])}  # fmt: skip

    pool = None
    if jobs > 1:
        import multiprocessing as mp

        pool = mp.get_context("spawn").Pool(jobs)
    audio = 0
    n_done = 0
    try:
        while not all(s["done"] for s in streams):
            batch: list[tuple[dict[str, Any], dict[str, Any]]] = []
            for s in streams:
                if s["done"]:
                    continue
                # batch size only changes how many utterances past the cut are made and dropped
                est = s["have"] / s["next"] if s["next"] else _EST_UTT_S * RATE
                k = 1 if jobs <= 1 else int(min(max(1, math.ceil((s["target"] - s["have"]) / est)), 4096 if s["next"] else 8 * jobs))
                batch += [(s, task(s, s["next"] + j)) for j in range(k)]
                s["next"] += k
            results = pool.map(_make_utt, [t for _, t in batch], chunksize=1) if pool else [_make_utt(t) for _, t in batch]
            for (s, _t), r in zip(batch, results):
                if s["done"]:  # past the cut: made in the same batch, not part of the corpus
                    (out / r["path"]).unlink(missing_ok=True)
                    continue
                s["records"].append(r)
                s["have"] += r["n_samples"]
                audio += r["n_samples"]
                n_done += 1
                if s["have"] >= s["target"]:
                    s["done"] = True
            if progress:
                progress(n_done, audio / RATE, time.perf_counter() - t0)
    finally:
        if pool is not None:
            pool.close()
            pool.join()
    wall = time.perf_counter() - t0

    (out / "vocab").mkdir(parents=True, exist_ok=True)
    vocabs = {lang: build_vocab(lang) for lang in hours}
    for lang, v in vocabs.items():
        v.save(out / "vocab" / f"{lang}.json")
    for lang, ws in subsets.items():
        write_text(out / "vocab" / f"{lang}.words.txt", "\n".join(ws) + "\n")
    counts: dict[str, dict[str, dict[str, Any]]] = {}
    for name in SPLITS:
        recs = [r for s in streams if s["split"] == name for r in s["records"]]
        if not any(s["split"] == name for s in streams):
            continue
        with atomic_output(out / f"{name}.jsonl", "w") as f:
            for r in recs:
                f.write(json.dumps(r, ensure_ascii=False) + "\n")
    for s in streams:
        counts.setdefault(s["lang"], {})[s["split"]] = {
            "utterances": len(s["records"]),
            "samples": int(s["have"]),
            "hours": round(s["have"] / RATE / 3600, 6),
            "speakers_used": len({r["voice"] for r in s["records"]}),
        }
    hours_txt = ",".join(f"{k}={v:g}" for k, v in hours.items())
    cmd = f"streamkit corpus asr --hours-per-language {hours_txt} --seed {seed} --augment {augment}"
    if augment == "hf":
        cmd += f" --severity {severity:g} --augment-prob {augment_prob:g}"
    if tuple(splits) != (0.8, 0.1, 0.1):
        cmd += " --splits " + " ".join(f"{f:g}" for f in splits)
    if words is not None:
        cmd += f" --words {words}"
    manifest = {
        "format": FORMAT,
        "command": cmd,
        "seed": int(seed),
        "hours_per_language": hours,
        "splits": {n: f for n, f in zip(SPLITS, splits)},
        "rate": RATE,
        "augment": augment,
        "severity": severity if augment == "hf" else None,
        "augment_prob": augment_prob if augment == "hf" else None,
        "espeak_ng": espeak_version(),
        "text_sources": {lang: wordlists.source_info(lang) for lang in hours},
        "words_per_language": (
            None if words is None else {lang: {"words": len(ws), "path": f"vocab/{lang}.words.txt"} for lang, ws in subsets.items()}
        ),
        "speakers": voice_sets,
        "vocab": {
            lang: {"path": f"vocab/{lang}.json", "size": len(v), "graphemes": len(v.graphemes), "symbols": list(v.symbols)}
            for lang, v in vocabs.items()
        },  # fmt: skip
        "counts": counts,
        "generation": {
            "wall_s": round(wall, 2),
            "audio_s": round(audio / RATE, 2),
            "x_real_time": round(audio / RATE / max(wall, 1e-9), 1),
            "jobs": jobs,
        },  # fmt: skip
    }
    write_text(out / "manifest.json", json.dumps(manifest, ensure_ascii=False, indent=1))
    return manifest


def word_subset(lang: str, n: int, seed: int = 0) -> tuple[str, ...]:
    """The closed vocabulary of ``--words n``: ``n`` distinct words of ``lang``'s word list (all of
    them if it has fewer), a seeded uniform sample in word-list order. Depends on the seed, the
    language and the dictionary version only."""
    ws = wordlists.words(lang)
    if n >= len(ws):
        return tuple(ws)
    rng = np.random.default_rng(np.random.SeedSequence([int(seed), LANGS.index(lang), 7919]))
    return tuple(ws[int(i)] for i in np.sort(rng.choice(len(ws), size=n, replace=False)))


def read_jsonl(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """The records of a ``<split>.jsonl``."""
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def corpus_table(out_dir: str | os.PathLike[str]) -> str:
    """The paper's Table 1 analogue: per language, hours and utterances per split, speakers per
    split, vocabulary size (blank + graphemes + ``B_`` graphemes)."""
    man = json.loads((Path(out_dir) / "manifest.json").read_text(encoding="utf-8"))
    langs = list(man["hours_per_language"])
    splits = [s for s in SPLITS if any(s in man["counts"][lg] for lg in langs)]
    rows: list[list[str]] = []
    for s in splits:
        rows.append([f"{s} hours"] + [f"{man['counts'][lg][s]['hours']:.3f}" if s in man["counts"][lg] else "-" for lg in langs])
    for s in splits:
        rows.append([f"{s} utterances"] + [str(man["counts"][lg][s]["utterances"]) if s in man["counts"][lg] else "-" for lg in langs])
    for s in splits:
        rows.append([f"{s} speakers"] + [str(len(man["speakers"][lg].get(s, []))) for lg in langs])
    rows.append(["vocab size"] + [str(man["vocab"][lg]["size"]) for lg in langs])
    rows.append(["graphemes"] + [str(man["vocab"][lg]["graphemes"]) for lg in langs])
    head = ["language", *langs]
    w = [max(len(head[i]), *(len(r[i]) for r in rows)) for i in range(len(head))]
    lines = ["  ".join(c.ljust(w[0]) if i == 0 else c.rjust(w[i]) for i, c in enumerate(head)), "  ".join("-" * x for x in w)]
    lines += ["  ".join(v.ljust(w[0]) if i == 0 else v.rjust(w[i]) for i, v in enumerate(r)) for r in rows]
    return "\n".join(lines)
