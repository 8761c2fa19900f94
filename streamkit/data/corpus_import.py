"""``streamkit corpus import``: a real corpus (LibriSpeech, Common Voice, Kaldi, MUCS 2021) written
in the layout of ``streamkit corpus asr``, so ``streamkit train rnnt --corpus DIR`` trains on it
unchanged.

The layouts are read by :mod:`streamkit.data.corpus_formats`; this module normalises the
transcripts, chooses the vocabularies, assigns the splits, decodes and resamples the audio and
writes ``manifest.json``, ``vocab/<lang>.json``, ``<split>.jsonl`` and
``<split>/<lang>/<id>.wav`` (PCM_16, 8 kHz mono), as :mod:`streamkit.data.asr_corpus` does.

**Text** (:func:`import_text`): NFC, lower-cased, apostrophes dropped (``don't`` → ``dont``), other
punctuation and symbols (Unicode P*/S*, the danda ``।`` included) turned into spaces, format
characters (ZWJ/ZWNJ, category Cf) dropped, single spaces. Nothing else is changed: Devanagari,
Tamil and Gujarati text keeps every letter and mark.

**Vocabularies** (``vocab``): ``auto`` (default) gives a model language (en, hi, ta, gu) the
vocabulary of ``streamkit corpus asr`` (its Debian word list's graphemes), so ``--init-from`` the
shipped weights fits, and any other language the graphemes of its transcripts; ``transcripts``
builds every vocabulary from the transcripts. An utterance whose normalised text has a grapheme
outside a word-list vocabulary (digits, letters of another script) or no text at all is left out
and counted in the manifest (``skipped``: per reason the count and the first examples), never
silently changed.

**Splits**: the split the layout names (LibriSpeech ``train-*``/``dev-*``/``test-*`` directories,
Common Voice ``train/dev/test.tsv``, MUCS ``train``/``test``) or the one given as ``SPLIT=SRC``;
utterances without one are assigned by speaker (a hash of seed, language and speaker against the
``splits`` fractions), so no speaker is in two splits. A speaker found in two named splits is
reported (``speaker_overlap`` in the manifest), not changed.

**Audio**: soundfile (libsndfile ≥ 1.1 reads FLAC, WAV, OGG/Opus and MP3), mixed to mono, resampled
with soxr (VHQ) to 8 kHz. A missing or unreadable audio file stops the import with one line naming
it and the transcript line that refers to it; samples beyond full scale after resampling are
clipped and counted (``clipped_samples``).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import time
import unicodedata
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from streamkit.data import asr_corpus, wordlists
from streamkit.data.corpus_formats import FORMATS, SPLIT_NAMES, FormatError, Item, read_items
from streamkit.io.outputs import atomic_output, write_audio, write_text

__all__ = ["VOCABS", "assign_split", "import_corpus", "import_text"]

RATE = 8000
VOCABS = ("auto", "transcripts")
_APOSTROPHES = "'\u2019\u02bc`\u00b4"
_MAX_EXAMPLES = 5


def import_text(text: str, lang: str) -> str:
    """The label form of a real transcript (see the module doc)."""
    t = unicodedata.normalize("NFC", text)
    out = []
    for ch in t:
        cat = unicodedata.category(ch)
        if ch in _APOSTROPHES or cat == "Cf":
            continue
        out.append(" " if cat[0] in "PSZC" else ch)
    return asr_corpus.normalize_text("".join(out).lower(), lang)


def assign_split(seed: int, lang: str, speaker: str, fractions: Sequence[float]) -> str:
    """The split of a speaker without a named split: a hash of (seed, language, speaker) against
    the cumulative ``fractions`` (train, dev, test)."""
    h = hashlib.sha256(f"{int(seed)}\0{lang}\0{speaker}".encode()).digest()
    u = int.from_bytes(h[:8], "big") / 2.0**64
    tot = float(sum(fractions))
    acc = 0.0
    for name, f in zip(SPLIT_NAMES, fractions):
        acc += f / tot
        if u < acc:
            return name
    return next(n for n, f in zip(reversed(SPLIT_NAMES), reversed(fractions)) if f > 0)


def _safe_id(uid: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]", "_", uid).lstrip(".") or "_"


def _model_vocab(lang: str) -> asr_corpus.Vocab | None:
    if lang not in asr_corpus.LANGS:
        return None
    return asr_corpus.build_vocab(lang)


def _read_audio(it: Item) -> tuple[np.ndarray, int]:
    """Mono float32 samples of an item (its segment, if any) and their rate."""
    import soundfile as sf

    if not it.audio.is_file():
        raise FormatError(f"{it.where}: audio file missing: {it.audio}")
    try:
        info = sf.info(str(it.audio))
        sr = int(info.samplerate)
        a = 0 if it.start is None else int(round(it.start * sr))
        b = -1 if it.end is None else int(round(it.end * sr))
        if it.start is not None and (a > info.frames or (b != -1 and b > info.frames + sr // 100)):
            raise FormatError(f"{it.where}: segment {it.start}-{it.end} s is beyond the end of {it.audio} ({info.frames / sr:.2f} s)")
        x, sr = sf.read(str(it.audio), start=a, stop=None if b == -1 else min(b, info.frames), dtype="float32", always_2d=True)
    except FormatError:
        raise
    except Exception as e:  # noqa: BLE001 - libsndfile's errors
        raise FormatError(f"{it.where}: unreadable audio {it.audio} ({str(e).splitlines()[0] if str(e) else type(e).__name__})") from None
    return x.mean(axis=1), int(sr)


def import_corpus(
    fmt: str,
    sources: Sequence[tuple[str | None, str | os.PathLike[str]]],
    out_dir: str | os.PathLike[str],
    *,
    lang: str | None = None,
    vocab: str = "auto",
    splits: Sequence[float] = (0.8, 0.1, 0.1),
    seed: int = 0,
    progress: Callable[[int, int, float], None] | None = None,
    command: str | None = None,
) -> dict[str, Any]:
    """Import ``sources`` (pairs ``(split or None, directory)``) of layout ``fmt`` into ``out_dir``;
    returns (and writes) the manifest. ``progress(done, total, audio_s)`` after every 100 utterances.

    Raises:
        FormatError: a bad source, option, transcript or audio file (one line).
    """
    if fmt not in FORMATS:
        raise FormatError(f"unknown format {fmt!r}: one of {', '.join(FORMATS)}")
    if vocab not in VOCABS:
        raise FormatError(f"unknown vocabulary choice {vocab!r}: one of {', '.join(VOCABS)}")
    if len(splits) != 3 or any(not math.isfinite(f) or f < 0 for f in splits) or sum(splits) <= 0:
        raise FormatError(f"splits must be 3 non-negative fractions with a positive sum, got {list(splits)}")
    if not sources:
        raise FormatError("no source directory given")
    t0 = time.perf_counter()
    items: list[Item] = []
    for split, src in sources:
        items += read_items(fmt, src, lang, split)

    # ids, splits, text
    seen: dict[str, str] = {}
    langs: list[str] = []
    skipped: dict[str, dict[str, Any]] = {}

    def skip(reason: str, it: Item, note: str) -> None:
        s = skipped.setdefault(reason, {"count": 0, "examples": []})
        s["count"] += 1
        if len(s["examples"]) < _MAX_EXAMPLES:
            s["examples"].append(f"{it.where}: {note}")

    kept: list[tuple[Item, str, str, str]] = []  # item, split, file id, text
    for it in items:
        fid = _safe_id(it.id)
        if fid in seen:
            raise FormatError(f"{it.where}: utterance id {it.id!r} also at {seen[fid]}")
        seen[fid] = it.where
        if it.lang not in langs:
            langs.append(it.lang)
        split = it.split or assign_split(seed, it.lang, it.speaker, splits)
        text = import_text(it.text, it.lang)
        if not text:
            skip("empty text", it, repr(it.text))
            continue
        kept.append((it, split, fid, text))
    order = [lg for lg in asr_corpus.LANGS if lg in langs] + sorted(lg for lg in langs if lg not in asr_corpus.LANGS)

    vocabs: dict[str, asr_corpus.Vocab] = {}
    for lg in order:
        v = _model_vocab(lg) if vocab == "auto" else None
        if v is None:
            v = asr_corpus.build_vocab(lg, [w for it, _s, _f, t in kept if it.lang == lg for w in t.split()])
        vocabs[lg] = v
    final: list[tuple[Item, str, str, str]] = []
    for it, split, fid, text in kept:
        try:
            vocabs[it.lang].encode(text)
        except ValueError as e:
            skip("grapheme outside the vocabulary", it, str(e).split(": ", 1)[-1])
            continue
        final.append((it, split, fid, text))
    if not final:
        why = ", ".join(f"{k}: {v['count']}" for k, v in skipped.items())
        raise FormatError(f"no utterance left to import ({why})")

    # audio
    import soxr

    out = Path(out_dir)
    records: dict[str, list[dict[str, Any]]] = {s: [] for s in SPLIT_NAMES}
    clipped = 0
    audio = 0
    for n, (it, split, fid, text) in enumerate(final, 1):
        x, sr = _read_audio(it)
        if x.shape[0] == 0:
            skip("empty audio", it, str(it.audio))
            continue
        if sr != RATE:
            x = soxr.resample(x, sr, RATE, quality="VHQ").astype(np.float32)
        over = np.abs(x) > 1.0
        if over.any():
            clipped += int(np.count_nonzero(over))
            x = np.clip(x, -1.0, 1.0)
        pcm = np.round(x * 32767.0).astype(np.int16)
        rel = f"{split}/{it.lang}/{fid}.wav"
        write_audio(out / rel, pcm, RATE, subtype="PCM_16", durable=False)
        rec = {"id": fid, "lang": it.lang, "split": split, "path": rel, "text": text, "n_samples": int(pcm.shape[0]),
               "speaker": it.speaker, "source": str(it.audio), "source_text": it.text}  # fmt: skip
        if it.start is not None:
            rec["source_start_s"], rec["source_end_s"] = it.start, it.end
        records[split].append(rec)
        audio += int(pcm.shape[0])
        if progress is not None and (n % 100 == 0 or n == len(final)):
            progress(n, len(final), audio / RATE)

    (out / "vocab").mkdir(parents=True, exist_ok=True)
    for lg, v in vocabs.items():
        v.save(out / "vocab" / f"{lg}.json")
    for s, recs in records.items():
        if recs:
            with atomic_output(out / f"{s}.jsonl", "w") as f:
                for r in recs:
                    f.write(json.dumps(r, ensure_ascii=False) + "\n")
    counts: dict[str, dict[str, Any]] = {}
    speakers: dict[str, dict[str, list[str]]] = {}
    for s, recs in records.items():
        for lg in order:
            rs = [r for r in recs if r["lang"] == lg]
            if rs:
                n_s = sum(r["n_samples"] for r in rs)
                spk = sorted({r["speaker"] for r in rs})
                counts.setdefault(lg, {})[s] = {
                    "utterances": len(rs),
                    "samples": n_s,
                    "hours": round(n_s / RATE / 3600, 6),
                    "speakers_used": len(spk),
                }
                speakers.setdefault(lg, {})[s] = spk
    overlap = {lg: sorted(set(d.get("train", [])) & (set(d.get("dev", [])) | set(d.get("test", [])))) for lg, d in speakers.items()}
    manifest = {
        "format": asr_corpus.FORMAT,
        "command": command,
        "imported": {
            "format": fmt,
            "sources": [{"split": s, "path": str(p)} for s, p in sources],
            "vocab": vocab,
            "splits": dict(zip(SPLIT_NAMES, splits)),
            "seed": int(seed),
            "lang": lang,
        },  # fmt: skip
        "seed": int(seed),
        "hours_per_language": {lg: round(sum(c["hours"] for c in counts.get(lg, {}).values()), 6) for lg in order if lg in counts},
        "splits": dict(zip(SPLIT_NAMES, splits)),
        "rate": RATE,
        "augment": "none",
        "speakers": speakers,
        "speaker_overlap": {lg: len(v) for lg, v in overlap.items()},
        "vocab": {
            lg: {
                "path": f"vocab/{lg}.json",
                "size": len(v),
                "graphemes": len(v.graphemes),
                "symbols": list(v.symbols),
                "from": "transcripts" if vocab == "transcripts" or lg not in asr_corpus.LANGS else "word list",
            }
            for lg, v in vocabs.items()
            if lg in counts
        },  # fmt: skip
        "text_sources": {lg: wordlists.source_info(lg) for lg in order if lg in counts and vocab == "auto" and lg in asr_corpus.LANGS},
        "counts": counts,
        "skipped": skipped,
        "clipped_samples": clipped,
        "generation": {"wall_s": round(time.perf_counter() - t0, 2), "audio_s": round(audio / RATE, 2)},
    }
    write_text(out / "manifest.json", json.dumps(manifest, ensure_ascii=False, indent=1))
    return manifest


def summary(man: Mapping[str, Any]) -> list[str]:
    """Lines after the corpus table: what was left out, overlaps, clipping."""
    lines = []
    for reason, s in man.get("skipped", {}).items():
        lines.append(f"skipped {s['count']} utterance(s): {reason} (first: {s['examples'][0]})")
    for lg, n in man.get("speaker_overlap", {}).items():
        if n:
            lines.append(f"warning: {n} {lg} speaker(s) of train are also in dev or test (the splits named by the source)")
    if man.get("clipped_samples"):
        lines.append(f"clipped {man['clipped_samples']} sample(s) beyond full scale after resampling")
    return lines
