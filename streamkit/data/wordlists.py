"""Offline word lists of the ASR corpus languages (en, hi, ta, gu), filtered to each language's script.

Source (chosen over ``wordfreq``): the Debian spelling dictionaries, one kind of source for all four
languages, installed by ``.ci/setup`` (``apt-get install hunspell-en-us hunspell-hi hunspell-gu
aspell-ta``, 5 MB in all) and read as plain files; nothing is downloaded at run time.

* en: ``/usr/share/hunspell/en_US.dic`` (hunspell-en-us), hi: ``hi_IN.dic`` (hunspell-hi),
  gu: ``gu_IN.dic`` (hunspell-gu): one stem per line after a count line, ``/FLAGS`` affix classes
  stripped (only the stems are used; affix expansion is not needed for random text).
* ta: ``/usr/share/aspell/ta.cwl.gz`` (aspell-ta; Debian has no hunspell-ta), a gzipped
  *prezip* word list decoded here (:func:`read_prezip`), so the ``aspell`` program is not needed.

Why not ``wordfreq`` (PyPI): it has no Gujarati (it silently falls back to English), so a Debian
dictionary is needed anyway; it is a 58 MB wheel with five more dependencies; and its frequency
order is of little use for a grapheme-level model (uniform sampling over a dictionary covers the
script's grapheme inventory faster than Zipf-weighted text dominated by a few function words).
The built-in pools of :mod:`streamkit.data.tts` (a few hundred words, none for Gujarati) are too
small for ASR text.

Filtering (LID accuracy is script match, as in the paper): each word is NFC-normalised and kept
only if every codepoint is a letter or mark (Unicode category L*/M*) of the language's block:
Basic Latin a-z for en (lower-cased first; words with other letters, digits or apostrophes are
dropped), Devanagari U+0900-097F for hi, Tamil U+0B80-0BFF for ta, Gujarati U+0A80-0AFF for gu.
Words that start with a mark (dictionary junk) or are longer than :data:`MAX_WORD_CHARS` codepoints
are dropped. The lists are sorted and
deduplicated, so a seed gives the same text on any machine with the same package versions.
"""

from __future__ import annotations

import functools
import gzip
import os
import re
import subprocess
import unicodedata
from pathlib import Path

__all__ = [
    "LANGS",
    "MAX_WORD_CHARS",
    "SCRIPT_RANGES",
    "WordListMissingError",
    "alphabet",
    "in_script",
    "read_hunspell_dic",
    "read_prezip",
    "source_info",
    "words",
]

#: the corpus languages, in the order of the paper's Table 1
LANGS: tuple[str, ...] = ("en", "hi", "ta", "gu")

#: inclusive codepoint range of each language's script block
SCRIPT_RANGES: dict[str, tuple[int, int]] = {
    "en": (0x61, 0x7A),  # a-z (text is lower-cased)
    "hi": (0x0900, 0x097F),  # Devanagari
    "ta": (0x0B80, 0x0BFF),  # Tamil
    "gu": (0x0A80, 0x0AFF),  # Gujarati
}

MAX_WORD_CHARS = 20

_HUNSPELL = Path(os.environ.get("STREAMKIT_HUNSPELL_DIR", "/usr/share/hunspell"))
_ASPELL = Path(os.environ.get("STREAMKIT_ASPELL_DIR", "/usr/share/aspell"))

#: (Debian package, file) per language
SOURCES: dict[str, tuple[str, Path]] = {
    "en": ("hunspell-en-us", _HUNSPELL / "en_US.dic"),
    "hi": ("hunspell-hi", _HUNSPELL / "hi_IN.dic"),
    "ta": ("aspell-ta", _ASPELL / "ta.cwl.gz"),
    "gu": ("hunspell-gu", _HUNSPELL / "gu_IN.dic"),
}


class WordListMissingError(RuntimeError):
    """A language's dictionary file is not installed."""


@functools.cache
def alphabet(lang: str) -> frozenset[str]:
    """Codepoints allowed in a word of ``lang``: letters and marks (L*/M*) of its script block."""
    if lang not in SCRIPT_RANGES:
        raise ValueError(f"unknown language {lang!r}; known: {', '.join(LANGS)}")
    lo, hi = SCRIPT_RANGES[lang]
    return frozenset(chr(c) for c in range(lo, hi + 1) if unicodedata.category(chr(c))[0] in "LM")


@functools.cache
def _word_re(lang: str) -> re.Pattern[str]:
    chars = "".join(sorted(alphabet(lang)))
    return re.compile(f"[{re.escape(chars)}]+")


def in_script(word: str, lang: str) -> bool:
    """True if ``word`` is non-empty and made only of letters/marks of ``lang``'s script."""
    return _word_re(lang).fullmatch(word) is not None


def read_hunspell_dic(path: str | os.PathLike[str]) -> list[str]:
    """Stems of a hunspell ``.dic`` file (the count line and ``/FLAGS`` suffixes removed)."""
    out = []
    with open(path, encoding="utf-8", errors="replace") as f:
        for i, line in enumerate(f):
            line = line.strip()
            if not line or (i == 0 and line.isdigit()):
                continue
            out.append(line.split("/", 1)[0].split("\t", 1)[0].strip())
    return out


def read_prezip(data: bytes) -> list[str]:
    """Decode an aspell *prezip* word list (the content of ``<lang>.cwl`` after gunzip).

    Format: ``0x02`` then lines ``<prefix> <rest>*`` and the end mark ``0x1F 0xFF``; ``<prefix>``
    is one byte 0x00-0x1D, or 0x1E, any number of 0xFF and one byte 0x00-0xFE, whose sum is the
    number of (escaped) bytes kept from the previous line; ``<rest>`` bytes are 0x20-0xFF or the
    escape ``0x1F b`` (b 0x20-0x3F, meaning b - 0x20).
    """
    if not data or data[0] != 0x02:
        raise ValueError("not a prezip word list (first byte is not 0x02)")
    words: list[str] = []
    prev = b""
    i, n = 1, len(data)
    while i < n:
        b = data[i]
        if b == 0x1F and i + 1 < n and data[i + 1] == 0xFF:
            break  # end mark
        if b < 0x1E:
            keep = b
            i += 1
        elif b == 0x1E:
            keep = 0x1E
            i += 1
            while i < n and data[i] == 0xFF:
                keep += 0xFF
                i += 1
            if i >= n:
                raise ValueError("truncated prefix in prezip data")
            keep += data[i]
            i += 1
        else:
            raise ValueError(f"bad prefix byte 0x{b:02x} at {i}")
        j = i
        while j < n and (data[j] >= 0x20 or (data[j] == 0x1F and j + 1 < n and 0x20 <= data[j + 1] <= 0x3F)):
            j += 2 if data[j] == 0x1F else 1
        cur = prev[:keep] + data[i:j]  # escaped form: the next prefix is counted on it
        prev = cur
        i = j
        raw = re.sub(rb"\x1f([\x20-\x3f])", lambda m: bytes([m.group(1)[0] - 0x20]), cur)
        words.append(raw.decode("utf-8", errors="replace"))
    return words


def _raw_words(lang: str) -> list[str]:
    if lang not in SOURCES:
        raise ValueError(f"unknown language {lang!r}; known: {', '.join(LANGS)}")
    pkg, path = SOURCES[lang]
    if not path.is_file():
        raise WordListMissingError(f"word list for {lang!r} not found ({path}): install it with `apt-get install {pkg}`")
    if path.suffix == ".gz":
        return read_prezip(gzip.decompress(path.read_bytes()))
    return read_hunspell_dic(path)


@functools.cache
def words(lang: str) -> tuple[str, ...]:
    """The filtered, sorted word list of ``lang`` (see the module doc).

    Raises:
        ValueError: unknown language.
        WordListMissingError: its Debian dictionary is not installed (message names the package).
    """
    out = set()
    for w in _raw_words(lang):
        w = unicodedata.normalize("NFC", w.strip())
        if lang == "en":
            if not w.islower():  # proper nouns and acronyms out
                continue
        # a word starts with a letter (dictionary junk such as a leading vowel sign is dropped)
        if 0 < len(w) <= MAX_WORD_CHARS and unicodedata.category(w[0])[0] == "L" and in_script(w, lang):
            out.add(w)
    if not out:
        raise WordListMissingError(f"word list for {lang!r} ({SOURCES[lang][1]}) has no word in its script")
    return tuple(sorted(out))


def source_info(lang: str) -> dict[str, object]:
    """Where ``lang``'s words come from: Debian package and version (None if unknown), file and word count
    (for the manifest)."""
    pkg, path = SOURCES[lang]
    try:  # the Debian package version (the word list, hence the texts, depend on it)
        version = subprocess.run(["dpkg-query", "-W", "-f=${Version}", pkg], capture_output=True, text=True, check=False).stdout.strip() or None
    except OSError:
        version = None
    return {"package": pkg, "version": version, "file": str(path), "words": len(words(lang))}
