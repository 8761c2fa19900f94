"""Speech in languages the ASR model does not know, for the open-set LID (the ``unknown`` answer).

``streamkit corpus openset --out DIR [--per-language N] [--seed S]``

espeak-ng voices of 28 other languages read random sentences of 3-12 words drawn from the words
of the installed gettext translation catalogs (``/usr/share/locale/<lang>/LC_MESSAGES/*.mo``:
the translated messages of coreutils, libc, apt, glib, ... and the iso-codes names, shipped by
Debian packages and read as plain files; nothing is downloaded). The speakers, rates, pitches,
levels, padding and HF channel augmentation are those of ``streamkit corpus asr``
(:func:`streamkit.data.asr_corpus._make_utt`: 80 % of the utterances through the mild channel).

The languages are split, not the speakers: **dev** languages (:data:`DEV_LANGS`, for choosing the
open-set threshold) and **test** languages (:data:`TEST_LANGS`, for measuring it) have nothing in
common, so the test measures languages the calibration never heard. Both hold near relatives of
the model's languages (Bengali, Malayalam in dev; Marathi, Nepali, Telugu, Kannada, Punjabi in
test) as well as European and Asian languages.

Layout: ``manifest.json``, ``<split>.jsonl`` (the records of ``corpus asr`` with ``lang`` the
language code), ``<split>/<lang>/<id>.wav`` (PCM_16, 8 kHz).
"""

from __future__ import annotations

import functools
import gettext
import json
import os
import re
import unicodedata
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from streamkit.data import asr_corpus
from streamkit.data.tts import espeak_version, installed_languages, list_voices, require_espeak
from streamkit.io.outputs import atomic_output, write_text

__all__ = ["DEV_LANGS", "FORMAT", "LOCALE_DIR", "TEST_LANGS", "catalog_words", "generate"]

FORMAT = "streamkit-openset-corpus/1"
LOCALE_DIR = Path("/usr/share/locale")
#: non-model languages for choosing the threshold
DEV_LANGS: tuple[str, ...] = ("de", "es", "it", "ru", "pl", "tr", "cs", "vi", "sv", "ja", "bn", "ml")
#: non-model languages for measuring it (none of them in dev)
TEST_LANGS: tuple[str, ...] = ("fr", "pt", "nl", "ro", "hu", "fi", "el", "uk", "mr", "te", "ne", "ar", "kn", "pa", "da", "id")
MIN_WORDS = 100
_FORMAT_SPEC = re.compile(r"%[-+ #0-9.*$]*[a-zA-Z]|\{[^}]*\}|&[a-z]+;|<[^>]*>|_(?=\w)")


@functools.cache
def catalog_words(lang: str, locale_dir: str | os.PathLike[str] = LOCALE_DIR) -> tuple[str, ...]:
    """Distinct lower-case words (letters and marks only, 2-20 codepoints, NFC) of every translated
    message in ``locale_dir/<lang>/LC_MESSAGES/*.mo`` (not the ``iso_639`` language names; a word
that is also in the English message is left out: untranslated commands and names), sorted. ValueError if fewer than
    :data:`MIN_WORDS` (the locale is not installed)."""
    d = Path(locale_dir) / lang / "LC_MESSAGES"
    words: set[str] = set()
    for mo in sorted(d.glob("*.mo")) if d.is_dir() else []:
        if mo.name.startswith("iso_639"):
            continue  # names of thousands of languages: exotic words, not the language's own
        try:
            with open(mo, "rb") as f:
                cat = gettext.GNUTranslations(f)._catalog  # type: ignore[attr-defined]
        except (OSError, ValueError, UnicodeDecodeError):
            continue
        for k, v in cat.items():
            if not k or not isinstance(v, str):
                continue  # the header entry
            source = set((k[0] if isinstance(k, tuple) else k).lower().split())
            for w in _FORMAT_SPEC.sub(" ", v).split():
                w = unicodedata.normalize("NFC", w.strip(".,;:!?\"'()[]«»„“”‘’¿¡…").lower())
                if w not in source and 2 <= len(w) <= 20 and all(unicodedata.category(c)[0] in "LM" for c in w) and unicodedata.category(w[0])[0] == "L":
                    words.add(w)
    if len(words) < MIN_WORDS:
        raise ValueError(f"{lang}: only {len(words)} words in {d}/*.mo (install its translations, e.g. the locales of coreutils/libc)")
    return tuple(sorted(words))


def generate(
    out_dir: str | os.PathLike[str],
    per_language: int = 25,
    seed: int = 0,
    *,
    dev_langs: Sequence[str] = DEV_LANGS,
    test_langs: Sequence[str] = TEST_LANGS,
    augment: str = "hf",
    progress: Callable[[int, int], None] | None = None,
) -> dict[str, Any]:
    """Write ``per_language`` utterances of every dev and test language; returns (and writes) the manifest.

    Raises:
        ValueError: a language in both lists, without an espeak-ng voice or without words.
    """
    if set(dev_langs) & set(test_langs):
        raise ValueError(f"languages in both dev and test: {sorted(set(dev_langs) & set(test_langs))}")
    if per_language < 1:
        raise ValueError(f"per_language must be >= 1, got {per_language}")
    require_espeak()
    out = Path(out_dir)
    plan = [(split, lang) for split, langs in (("dev", dev_langs), ("test", test_langs)) for lang in langs]
    voices: dict[str, list[str]] = {}
    words: dict[str, tuple[str, ...]] = {}
    for _split, lang in plan:
        accents = sorted(x for x in installed_languages() if x == lang or x.startswith(lang + "-"))  # fr: fr-fr, fr-be, fr-ch
        vs = [v.name for v in list_voices(accents, asr_corpus.ASR_VARIANTS)]
        if not vs:
            raise ValueError(f"espeak-ng has no voice {lang!r}")
        voices[lang] = vs
        words[lang] = catalog_words(lang)
    records: dict[str, list[dict[str, Any]]] = {"dev": [], "test": []}
    total = len(plan) * per_language
    done = 0
    for li, (split, lang) in enumerate(plan):
        (out / split / lang).mkdir(parents=True, exist_ok=True)
        for i in range(per_language):
            task = {"seed": int(seed), "lang": lang, "lang_idx": 1000 + li, "split": split, "split_idx": 1 if split == "dev" else 2,
                    "index": i, "id": f"{lang}_{split}_{i:06d}", "voices": voices[lang], "out": str(out), "augment": augment,
                    "severity": asr_corpus.DEFAULT_SEVERITY, "augment_prob": asr_corpus.DEFAULT_AUGMENT_PROB, "words": words[lang]}  # fmt: skip
            records[split].append(asr_corpus._make_utt(task))
            done += 1
            if progress is not None and (done % 50 == 0 or done == total):
                progress(done, total)
    for split, recs in records.items():
        with atomic_output(out / f"{split}.jsonl", "w") as f:
            for r in recs:
                f.write(json.dumps(r, ensure_ascii=False) + "\n")
    manifest = {
        "format": FORMAT,
        "command": f"streamkit corpus openset --per-language {per_language} --seed {seed} --augment {augment}",
        "seed": int(seed),
        "rate": asr_corpus.RATE,
        "augment": augment,
        "espeak_ng": espeak_version(),
        "languages": {"dev": list(dev_langs), "test": list(test_langs)},
        "words_per_language": {lang: len(w) for lang, w in words.items()},
        "counts": {s: {"utterances": len(r), "hours": round(sum(x["n_samples"] for x in r) / asr_corpus.RATE / 3600, 4)} for s, r in records.items()},
    }
    write_text(out / "manifest.json", json.dumps(manifest, ensure_ascii=False, indent=1))
    return manifest
