"""Readers of the corpus layouts people have: LibriSpeech, Common Voice, Kaldi data dirs, MUCS 2021.

Each reader turns a source directory into :class:`Item` records (utterance id, speaker, language,
transcript, audio file, optional segment times, the split the layout names, if any); nothing
here decodes audio (:mod:`streamkit.data.corpus_import` does, and writes the ``streamkit corpus
asr`` layout). Every problem of the source is a :class:`FormatError` with one line naming the file
(and line) at fault.

Layouts:

* ``librispeech``: ``<spk>/<chapter>/<spk>-<chapter>.trans.txt`` (``ID TEXT`` per line) beside
  ``ID.flac`` (or ``.wav``), anywhere under the source; speaker = the ID's first field. A path
  component ``train-*``/``dev-*``/``test-*`` (``train-clean-100``, ``dev-clean``...) names the
  split. Language ``en`` unless ``--lang``.
* ``commonvoice``: a locale directory with ``clips/`` and TSV files (header ``client_id path
  sentence ...``, optionally ``locale``): ``train.tsv``/``dev.tsv``/``test.tsv`` (their splits)
  when present, else ``validated.tsv``; speaker = ``client_id``; language = the ``locale`` column,
  else ``--lang``.
* ``kaldi``: a data directory with ``wav.scp`` (``REC PATH``; pipe commands and ark offsets are
  refused), ``text`` (``UTT TEXT``), ``utt2spk`` and optionally ``segments`` (``UTT REC START
  END`` seconds). Relative audio paths are taken from the current directory, else from the data
  directory. Kaldi dirs record no language: ``--lang`` is required.
* ``mucs``: MUCS 2021 (subtask 1) as distributed: ``<Language>/<part>/transcription.txt``
  (``ID TEXT``) with ``<Language>/<part>/audio/ID.wav``; ``<Language>`` is one of Hindi, Marathi,
  Odia, Tamil, Telugu, Gujarati (any case; codes hi, mr, or, ta, te, gu) and ``<part>``
  ``train``/``dev``/``test`` names the split. The data carries no speaker labels: the speaker is
  the ID's part before its first ``_`` (the whole ID if none), so speaker-disjoint splits hold only
  as far as that prefix is a speaker.
"""

from __future__ import annotations

import csv
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path

__all__ = ["FORMATS", "MUCS_LANGUAGES", "FormatError", "Item", "check_lang", "read_items"]

FORMATS = ("librispeech", "commonvoice", "kaldi", "mucs")
SPLIT_NAMES = ("train", "dev", "test")
MUCS_LANGUAGES = {"hindi": "hi", "marathi": "mr", "odia": "or", "oriya": "or", "tamil": "ta", "telugu": "te", "gujarati": "gu"}
_LANG_RE = re.compile(r"^[a-z]{2,3}(-[A-Za-z0-9]{2,8})*$")
_AUDIO_EXT = (".flac", ".wav", ".mp3", ".ogg", ".opus")


class FormatError(ValueError):
    """The source does not have the layout of its format (one line, for an ``error:`` message)."""


@dataclass(frozen=True)
class Item:
    """One utterance of a source: where its audio and transcript are."""

    id: str
    speaker: str
    lang: str
    text: str
    audio: Path
    start: float | None = None  # seconds into ``audio`` (Kaldi segments)
    end: float | None = None
    split: str | None = None  # the split the layout names, if any
    where: str = ""  # file:line of the transcript, for messages


def check_lang(code: str, where: str) -> str:
    """``code`` if it looks like a language code (``en``, ``hi``, ``pt-BR``); else FormatError."""
    if not isinstance(code, str) or not _LANG_RE.match(code):
        raise FormatError(f"{where}: unknown language {code!r}: want a code such as en, hi, ta, gu (give --lang)")
    return code


def _split_of(path: Path, root: Path) -> str | None:
    """The split a path component names (``train-clean-100`` → train, ``dev`` → dev, ...)."""
    try:
        parts = path.relative_to(root).parts
    except ValueError:
        parts = path.parts
    for p in parts:
        low = p.lower()
        for s in SPLIT_NAMES:
            if low == s or low.startswith(s + "-") or low.startswith(s + "_"):
                return s
    return None


def _lines(path: Path) -> Iterator[tuple[int, str]]:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise FormatError(f"{path}: file not found") from None
    except UnicodeDecodeError as e:
        raise FormatError(f"{path}: not UTF-8 text ({e.reason} at byte {e.start})") from None
    for n, line in enumerate(text.splitlines(), 1):
        line = line.lstrip("\ufeff").strip()
        if line:
            yield n, line


def _id_text(path: Path) -> Iterator[tuple[str, str, str]]:
    """``ID TEXT`` lines of a transcript file: (id, text, "file:line")."""
    for n, line in _lines(path):
        parts = line.split(maxsplit=1)
        yield parts[0], parts[1] if len(parts) > 1 else "", f"{path}:{n}"


# ------------------------------------------------------------------------------ LibriSpeech
def librispeech(src: Path, lang: str | None) -> list[Item]:
    lg = check_lang(lang or "en", str(src))
    trans = sorted(src.rglob("*.trans.txt"))
    if not trans:
        raise FormatError(f"{src}: no <spk>-<chapter>.trans.txt files: not a LibriSpeech-style directory")
    out = []
    for t in trans:
        split = _split_of(t, src)
        for uid, text, where in _id_text(t):
            audio = next((t.parent / (uid + e) for e in _AUDIO_EXT if (t.parent / (uid + e)).is_file()), t.parent / (uid + ".flac"))
            out.append(Item(uid, uid.split("-")[0], lg, text, audio, split=split, where=where))
    return out


# ------------------------------------------------------------------------------ Common Voice
_CV_NEED = ("client_id", "path", "sentence")


def _read_tsv(path: Path, lang: str | None) -> list[Item]:
    try:
        f = open(path, encoding="utf-8", newline="")
    except OSError as e:
        raise FormatError(f"{path}: cannot read ({e.strerror})") from None
    out = []
    with f:
        rows = csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE)
        try:
            head = next(rows, None)
            if head is None:
                raise FormatError(f"{path}: empty TSV (want a header with {', '.join(_CV_NEED)})")
            head = [h.lstrip("\ufeff").strip() for h in head]
            missing = [c for c in _CV_NEED if c not in head]
            if missing:
                raise FormatError(f"{path}: bad TSV header: no {', '.join(missing)} column (columns: {', '.join(head) or 'none'})")
            col = {c: head.index(c) for c in head}
            for row in rows:
                n = rows.line_num
                if not row or row == [""]:
                    continue
                if len(row) != len(head):
                    raise FormatError(f"{path}:{n}: {len(row)} fields, the header has {len(head)}")
                loc = row[col["locale"]].strip() if "locale" in col and row[col["locale"]].strip() else lang
                if not loc:
                    raise FormatError(f"{path}:{n}: unknown language: no locale column, give --lang")
                clip = row[col["path"]].strip()
                if not clip or "/" in clip or "\\" in clip or clip.startswith("."):
                    raise FormatError(f"{path}:{n}: bad clip name {clip!r}")
                uid = clip.rsplit(".", 1)[0]
                out.append(Item(uid, row[col["client_id"]].strip(), check_lang(loc, f"{path}:{n}"), row[col["sentence"]],
                                path.parent / "clips" / clip, where=f"{path}:{n}"))  # fmt: skip
        except csv.Error as e:
            raise FormatError(f"{path}:{rows.line_num}: bad TSV ({e})") from None
    return out


def commonvoice(src: Path, lang: str | None) -> list[Item]:
    named = [(s, src / f"{s}.tsv") for s in SPLIT_NAMES if (src / f"{s}.tsv").is_file()]
    if named:
        return [replace(it, split=s) for s, p in named for it in _read_tsv(p, lang)]
    if (src / "validated.tsv").is_file():
        return _read_tsv(src / "validated.tsv", lang)
    raise FormatError(f"{src}: no train.tsv/dev.tsv/test.tsv or validated.tsv: not a Common Voice locale directory")


# ------------------------------------------------------------------------------ Kaldi
def _table(path: Path, fields: int, least: int | None = None) -> dict[str, tuple[list[str], str]]:
    """``KEY F2 ... Fn`` lines (the last field takes the rest of the line), at least ``least`` fields."""
    out: dict[str, tuple[list[str], str]] = {}
    for n, line in _lines(path):
        parts = line.split(maxsplit=fields - 1)
        if len(parts) < (fields if least is None else least):
            raise FormatError(f"{path}:{n}: want {fields} fields, got {len(parts)}")
        if parts[0] in out:
            raise FormatError(f"{path}:{n}: {parts[0]!r} listed twice")
        out[parts[0]] = (parts[1:], f"{path}:{n}")
    return out


def kaldi(src: Path, lang: str | None) -> list[Item]:
    for need in ("wav.scp", "text", "utt2spk"):
        if not (src / need).is_file():
            raise FormatError(f"{src}: no {need}: not a Kaldi data directory (want wav.scp, text, utt2spk, optional segments)")
    if not lang:
        raise FormatError(f"{src}: unknown language: a Kaldi data directory does not record it, give --lang")
    lg = check_lang(lang, str(src))
    recs: dict[str, Path] = {}
    for rec, (rest, where) in _table(src / "wav.scp", 2).items():
        p = rest[0].strip()
        if p.endswith("|") or p.startswith("|"):
            raise FormatError(f"{where}: pipe command in wav.scp ({p[:60]!r}) is not run: write the audio to files and list their paths")
        if re.search(r"\.ark:\d+$", p):
            raise FormatError(f"{where}: ark offset in wav.scp ({p!r}) is not supported: list plain audio files")
        q = Path(p)
        recs[rec] = q if q.is_absolute() or q.exists() else src / q
    text = _table(src / "text", 2, least=1)
    spk = _table(src / "utt2spk", 2)
    segs = _table(src / "segments", 4) if (src / "segments").is_file() else None
    out = []
    for uid, (rest, where) in text.items():
        t = rest[0] if rest else ""
        if uid not in spk:
            raise FormatError(f"{where}: utterance {uid!r} has no speaker in utt2spk")
        speaker = spk[uid][0][0]
        if segs is not None:
            if uid not in segs:
                raise FormatError(f"{where}: utterance {uid!r} is not in segments")
            (rec, a, b), sw = segs[uid]
            try:
                start, end = float(a), float(b)
            except ValueError:
                raise FormatError(f"{sw}: bad segment times {a!r} {b!r}") from None
            if not (0 <= start < end or (end == -1 and start >= 0)):
                raise FormatError(f"{sw}: bad segment times {a} {b} (want 0 <= start < end)")
            if rec not in recs:
                raise FormatError(f"{sw}: recording {rec!r} is not in wav.scp")
            out.append(Item(uid, speaker, lg, t, recs[rec], start, None if end == -1 else end, where=where))
        else:
            if uid not in recs:
                raise FormatError(f"{where}: utterance {uid!r} is not in wav.scp (and there is no segments file)")
            out.append(Item(uid, speaker, lg, t, recs[uid], where=where))
    return out


# ------------------------------------------------------------------------------ MUCS 2021
def mucs(src: Path, lang: str | None) -> list[Item]:
    files = sorted(p for p in src.rglob("transcription.txt") if len(p.relative_to(src).parts) <= 4)
    if not files:
        raise FormatError(f"{src}: no <Language>/<part>/transcription.txt: not a MUCS 2021 directory")
    out = []
    for f in files:
        rel = f.relative_to(src).parts[:-1]
        lg = lang
        for part in (src.name, *rel):
            if part.lower() in MUCS_LANGUAGES:
                lg = MUCS_LANGUAGES[part.lower()]
        if lg is None:
            names = ", ".join(sorted({k.capitalize() for k in MUCS_LANGUAGES}))
            raise FormatError(f"{f}: unknown language: no directory named after a MUCS language ({names}) above it; give --lang")
        lg = check_lang(lg, str(f))
        split = _split_of(f, src)
        for uid, text, where in _id_text(f):
            audio = f.parent / "audio" / f"{uid}.wav"
            out.append(Item(uid, uid.split("_")[0], lg, text, audio, split=split, where=where))
    return out


_READERS = {"librispeech": librispeech, "commonvoice": commonvoice, "kaldi": kaldi, "mucs": mucs}


def read_items(fmt: str, src: str | os.PathLike[str], lang: str | None = None, split: str | None = None) -> list[Item]:
    """The utterances of ``src`` in layout ``fmt``; ``split`` (train/dev/test) overrides the split
    the layout names. Raises :class:`FormatError` (one line)."""
    if fmt not in _READERS:
        raise FormatError(f"unknown format {fmt!r}: one of {', '.join(FORMATS)}")
    if split is not None and split not in SPLIT_NAMES:
        raise FormatError(f"unknown split {split!r}: one of {', '.join(SPLIT_NAMES)}")
    root = Path(src)
    if not root.is_dir():
        raise FormatError(f"{root}: directory not found")
    if lang is not None:
        check_lang(lang, "--lang")
    items = _READERS[fmt](root, lang)
    if not items:
        raise FormatError(f"{root}: no utterances found")
    if split is not None:
        items = [replace(it, split=split) for it in items]
    return items
