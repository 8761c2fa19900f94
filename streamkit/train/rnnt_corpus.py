"""The data of ``streamkit train rnnt``: a ``streamkit corpus asr`` directory (:class:`AsrCorpus`), its
audio as log-mel features, and length-bucketed mini-batches (:func:`make_batches`, :func:`collate`)."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import torch

from streamkit.data import asr_corpus
from streamkit.models.features import N_MELS, RATE, STACK, STRIDE, log_mel, n_stacked

T = TypeVar("T")

__all__ = ["AsrCorpus", "CorpusError", "Utt", "collate", "compute_logmel", "feature_stats", "make_batches", "read_audio", "spread", "stacked"]


class CorpusError(ValueError):
    """The corpus directory is missing, incomplete or not a ``streamkit corpus asr`` corpus."""


@dataclass
class Utt:
    id: str
    lang: int
    path: Path
    text: str
    targets: np.ndarray  # language-local symbols, int64
    n_samples: int


class AsrCorpus:
    """A ``streamkit corpus asr`` directory: manifest, vocabularies, splits.

    ``languages``: use only these of the corpus's languages (e.g. ``["en"]`` for a monolingual
    model); ``langs``/``vocabs`` and the splits then hold only them, in the corpus's order, and
    :attr:`Utt.lang` indexes that subset. ``all_langs`` keeps the manifest's list.
    """

    def __init__(self, root: str | os.PathLike[str], languages: Sequence[str] | None = None) -> None:
        self.root = root = Path(root)
        if not root.is_dir():
            raise CorpusError(f"corpus directory not found: {root}")
        man = root / "manifest.json"
        if not man.is_file():
            raise CorpusError(f"{root}: no manifest.json (not a corpus from `streamkit corpus asr`, or its generation has not finished)")
        try:
            self.manifest: dict[str, Any] = json.loads(man.read_text(encoding="utf-8"))
        except (ValueError, UnicodeDecodeError) as exc:
            raise CorpusError(f"{man}: not valid JSON ({exc})") from None
        if not isinstance(self.manifest, dict) or self.manifest.get("format") != asr_corpus.FORMAT:
            got = self.manifest.get("format") if isinstance(self.manifest, dict) else None
            raise CorpusError(f"{man}: format {got!r}, expected {asr_corpus.FORMAT!r} (a corpus from `streamkit corpus asr`)")
        langs = self.manifest.get("hours_per_language")
        if not isinstance(langs, dict) or not langs:
            raise CorpusError(f"{man}: no languages (hours_per_language)")
        self.all_langs: list[str] = [str(x) for x in langs]
        self.langs: list[str] = list(self.all_langs)
        if languages is not None:
            want = [str(x) for x in languages]
            unknown = [x for x in want if x not in self.all_langs]
            if not want or unknown or len(set(want)) != len(want):
                raise CorpusError(f"{root}: --languages {','.join(want) or '(none)'}: pick distinct ones of the corpus's {self.all_langs}")
            self.langs = [x for x in self.all_langs if x in want]
        self.vocabs: list[asr_corpus.Vocab] = []
        for lg in self.langs:
            p = root / "vocab" / f"{lg}.json"
            try:
                self.vocabs.append(asr_corpus.load_vocab(root, lg))
            except FileNotFoundError:
                raise CorpusError(f"{root}: vocabulary {p.relative_to(root)} missing") from None
            except (ValueError, KeyError, TypeError) as exc:
                raise CorpusError(f"{p}: bad vocabulary ({exc})") from None

    @property
    def command(self) -> str | None:
        return self.manifest.get("command")

    def split(self, name: str) -> list[Utt]:
        """The utterances of a split, in file order; every text encoded with its language's vocabulary."""
        p = self.root / f"{name}.jsonl"
        if not p.is_file():
            raise CorpusError(f"{self.root}: no {name}.jsonl (split {name!r} missing)")
        out: list[Utt] = []
        with open(p, encoding="utf-8") as f:
            for n, line in enumerate(f, 1):
                if not line.strip():
                    continue
                try:
                    r = json.loads(line)
                    if r["lang"] in self.all_langs and r["lang"] not in self.langs:
                        continue  # a language left out by ``languages``
                    lg = self.langs.index(r["lang"])
                    targets = np.asarray(self.vocabs[lg].encode(r["text"]), np.int64)
                    out.append(Utt(str(r["id"]), lg, self.root / r["path"], str(r["text"]), targets, int(r["n_samples"])))
                except ValueError as exc:
                    raise CorpusError(f"{p}:{n}: {exc}") from None
                except (KeyError, TypeError) as exc:
                    raise CorpusError(f"{p}:{n}: bad record ({type(exc).__name__}: {exc})") from None
        if not out:
            raise CorpusError(f"{p}: no utterances")
        return out


def read_audio(utt: Utt) -> np.ndarray:
    import soundfile as sf

    if not utt.path.is_file():
        raise CorpusError(f"audio file missing: {utt.path}")
    try:
        x, sr = sf.read(str(utt.path), dtype="float32", always_2d=True)
    except Exception as exc:  # noqa: BLE001 - libsndfile errors
        raise CorpusError(f"{utt.path}: unreadable audio ({exc})") from None
    if sr != RATE:
        raise CorpusError(f"{utt.path}: {sr} Hz, expected {RATE}")
    return x.mean(axis=1)


def compute_logmel(utts: Sequence[Utt], note: Callable[[str], None] | None = None) -> list[torch.Tensor]:
    """(frames, 80) float32 log-mel of every utterance (10 ms frames)."""
    out = []
    t0 = time.monotonic()
    for i, u in enumerate(utts):
        out.append(log_mel(read_audio(u)).contiguous())
        if note is not None and time.monotonic() - t0 > 30 and i % 500 == 0:
            note(f"  features: {i + 1}/{len(utts)}")
    return out


def stacked(lm: torch.Tensor) -> torch.Tensor:
    """(frames, 80) log-mel -> (n, 640) stacked (:func:`streamkit.models.features.stack_frames`)."""
    k = n_stacked(lm.shape[0])
    return lm.unfold(0, STACK, STRIDE)[:k].transpose(1, 2).reshape(k, STACK * N_MELS)


def feature_stats(logmels: Sequence[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    """Mean and standard deviation of every stacked dimension over all frames."""
    s = torch.zeros(STACK * N_MELS, dtype=torch.float64)
    ss = torch.zeros_like(s)
    n = 0
    for lm in logmels:
        x = stacked(lm).to(torch.float64)
        s += x.sum(0)
        ss += (x * x).sum(0)
        n += x.shape[0]
    if n == 0:
        raise CorpusError("no training utterance is long enough for one feature frame")
    mean = s / n
    std = (ss / n - mean * mean).clamp(min=0).sqrt()
    return mean.float(), std.float()


def make_batches(lens: np.ndarray, batch_frames: int, max_utts: int, rng: np.random.Generator | None) -> list[list[int]]:
    """Indices into ``lens`` grouped by length: each batch's ``size x longest <= batch_frames`` (or a
    single utterance) and ``size <= max_utts``; with ``rng`` the sort is jittered and the batch order shuffled."""
    lens = np.asarray(lens, np.int64)
    key = lens.astype(np.float64) if rng is None else lens * (1.0 + 0.2 * rng.random(lens.shape[0]))
    order = np.argsort(key, kind="stable")
    batches: list[list[int]] = []
    cur: list[int] = []
    longest = 0
    for i in order.tolist():
        m = max(longest, int(lens[i]))
        if cur and ((len(cur) + 1) * m > batch_frames or len(cur) >= max_utts):
            batches.append(cur)
            cur, m = [], int(lens[i])
        cur.append(i)
        longest = m
    if cur:
        batches.append(cur)
    if rng is not None:
        perm = rng.permutation(len(batches))
        batches = [batches[j] for j in perm.tolist()]
    return batches


def collate(utts: Sequence[Utt], logmels: Sequence[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Padded stacked features (B, T, 640), frame counts, padded targets (B, U), target counts."""
    feats = [stacked(lm) for lm in logmels]
    B = len(feats)
    T = max(f.shape[0] for f in feats)
    U = max(1, max(len(u.targets) for u in utts))
    x = torch.zeros(B, T, STACK * N_MELS)
    y = torch.zeros(B, U, dtype=torch.long)
    for b, (f, u) in enumerate(zip(feats, utts)):
        x[b, : f.shape[0]] = f
        y[b, : len(u.targets)] = torch.from_numpy(u.targets)
    fl = torch.tensor([f.shape[0] for f in feats], dtype=torch.long)
    tl = torch.tensor([len(u.targets) for u in utts], dtype=torch.long)
    return x, fl, y, tl


# --------------------------------------------------------------------------------------------
# decoding and scoring (dev)
# --------------------------------------------------------------------------------------------


def spread(items: Sequence[T], k: int) -> list[T]:
    """``k`` of ``items`` evenly spread over the list (all of them when ``k >= len(items)``)."""
    if k >= len(items):
        return list(items)
    pos = np.unique(np.round(np.linspace(0, len(items) - 1, k)).astype(int))
    return [items[i] for i in pos.tolist()]
