"""The corpus of ``streamkit train sed``: a ``streamkit corpus sed`` directory and its cached log-mel features.

Features: 128-bin log-mel (:func:`streamkit.models.sed_crnn.log_mel`, 16 kHz, hop 256) computed **once** per
corpus and feature config and cached as float16 ``.npy`` files (default ``<corpus>/features``) with a JSON
sidecar (file names, sizes, feature config); a stale or foreign cache is rebuilt.
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
from pathlib import Path
from typing import Any

import numpy as np
import torch

from streamkit.io.outputs import atomic_output, write_text
from streamkit.models.sed_crnn import SedConfig, log_mel, n_input_frames

__all__ = ["CACHE_FORMAT", "SUBSETS", "CorpusError", "SedCorpus"]

CACHE_FORMAT = "streamkit-sed-features/1"
SUBSETS = ("synthetic", "weak", "unlabelled", "validation", "eval")


class CorpusError(ValueError):
    """A missing, incomplete or corrupt corpus (or feature cache)."""


def _feature_key(cfg: SedConfig) -> dict[str, Any]:
    return {"rate": cfg.rate, "n_mels": cfg.n_mels, "n_fft": cfg.n_fft, "hop": cfg.hop, "f_min": cfg.f_min, "f_max": cfg.f_max}


class SedCorpus:
    """A ``streamkit corpus sed`` directory: file lists, labels, cached features."""

    def __init__(self, root: str | Path, cache: str | Path | None = None) -> None:
        from streamkit.eval.sed import read_strong_tsv, read_weak_tsv

        self.root = Path(root)
        if not self.root.is_dir():
            raise CorpusError(f"corpus directory not found: {self.root} (make one with `streamkit corpus sed --out DIR`)")
        mpath = self.root / "manifest.json"
        if not mpath.is_file():
            raise CorpusError(f"{self.root}: no manifest.json; not a `streamkit corpus sed` corpus (or its generation did not finish)")
        try:
            self.manifest = json.loads(mpath.read_text(encoding="utf-8"))
        except (OSError, ValueError) as e:
            raise CorpusError(f"{mpath}: unreadable manifest: {e}") from None
        if not isinstance(self.manifest, dict) or not str(self.manifest.get("format", "")).startswith("streamkit-sed-corpus/"):
            raise CorpusError(f"{mpath}: not a `streamkit corpus sed` manifest (format {self.manifest.get('format')!r})")
        self.rate = int(self.manifest.get("rate", 16000))
        self.clip_s = float(self.manifest.get("clip_s", 10.0))
        self.cache = Path(cache) if cache is not None else self.root / "features"
        self.files: dict[str, list[str]] = {}
        self.strong: dict[str, dict[str, list[Any]]] = {}
        self.weak: dict[str, frozenset[str]] = {}
        for sub in SUBSETS:
            d = self.root / sub
            if not (d / "audio").is_dir():
                continue
            wavs = sorted(p.name for p in (d / "audio").glob("*.wav"))
            lab = d / "labels.tsv"
            if not lab.is_file():
                raise CorpusError(f"{d}: missing labels.tsv")
            try:
                if sub in ("synthetic", "validation", "eval"):
                    ev = read_strong_tsv(lab)
                    listed = set(ev)
                    self.strong[sub] = {f: ev.get(f, []) for f in wavs}
                elif sub == "weak":
                    self.weak = read_weak_tsv(lab)
                    listed = set(self.weak)
                else:
                    lines = [x.strip() for x in lab.read_text(encoding="utf-8").splitlines()[1:] if x.strip()]
                    listed = set(lines)
            except (ValueError, OSError) as e:
                raise CorpusError(f"corpus labels: {e}") from None
            missing = sorted(listed - set(wavs))
            if missing:
                raise CorpusError(f"{lab}: {len(missing)} labelled files missing from {d / 'audio'} (e.g. {missing[0]})")
            if sub in ("weak", "unlabelled") and set(wavs) - listed:
                extra = sorted(set(wavs) - listed)
                raise CorpusError(f"{lab}: {len(extra)} audio files without a label row (e.g. {extra[0]})")
            self.files[sub] = wavs

    def require(self, *subsets: str) -> None:
        for s in subsets:
            if not self.files.get(s):
                raise CorpusError(f"{self.root}: subset {s!r} is missing or empty")

    def corpus_command(self) -> str | None:
        """The generating command with the output directory replaced by ``DIR`` (no machine paths)."""
        cmd = self.manifest.get("command")
        if not cmd:
            return None
        return re.sub(r"--out\s+\S+", "--out DIR", str(cmd))

    def n_frames(self, cfg: SedConfig) -> int:
        return n_input_frames(int(round(self.clip_s * cfg.rate)), cfg)

    def features(self, subset: str, cfg: SedConfig, *, progress: bool = True) -> np.ndarray:
        """(N, T, n_mels) float16 log-mel of a subset (cached; computed on first use)."""
        import soundfile as sf

        if cfg.rate != self.rate:
            raise CorpusError(f"model rate {cfg.rate} Hz differs from the corpus rate {self.rate} Hz")
        files = self.files.get(subset)
        if not files:
            raise CorpusError(f"{self.root}: subset {subset!r} is missing or empty")
        audio = self.root / subset / "audio"
        sizes = [(audio / f).stat().st_size for f in files]
        key = _feature_key(cfg)
        t_in = self.n_frames(cfg)
        digest = hashlib.sha1(json.dumps([key, files, sizes]).encode()).hexdigest()[:12]
        npy = self.cache / f"{subset}.mel{cfg.n_mels}.{digest}.npy"
        side = npy.with_suffix(".json")
        if npy.is_file() and side.is_file():
            try:
                meta = json.loads(side.read_text(encoding="utf-8"))
                arr = np.load(npy, mmap_mode="r")
                if (
                    meta.get("format") == CACHE_FORMAT
                    and meta.get("files") == files
                    and meta.get("sizes") == sizes
                    and arr.shape == (len(files), t_in, cfg.n_mels)
                ):
                    return np.asarray(arr)
            except (OSError, ValueError):
                pass  # rebuilt below
        self.cache.mkdir(parents=True, exist_ok=True)
        out = np.zeros((len(files), t_in, cfg.n_mels), dtype=np.float16)
        it: Any = range(len(files))
        if progress:
            from tqdm import tqdm

            it = tqdm(it, desc=f"log-mel {subset}", file=sys.stderr, mininterval=1.0 if sys.stderr.isatty() else 30.0, leave=False)
        for i in it:
            p = audio / files[i]
            try:
                x, sr = sf.read(str(p), dtype="float32", always_2d=True)
            except Exception as e:  # noqa: BLE001 - soundfile raises several types for broken files
                raise CorpusError(f"{p}: unreadable audio: {type(e).__name__}: {e}") from None
            if sr != cfg.rate:
                raise CorpusError(f"{p}: {sr} Hz, expected {cfg.rate}")
            f = log_mel(torch.from_numpy(x.mean(axis=1)), cfg).numpy()
            n = min(t_in, f.shape[0])
            out[i, :n] = f[:n]
            if n < t_in:  # a shorter clip: repeat its quietest value (log floor) rather than zeros
                out[i, n:] = f.min() if f.size else np.log(1e-10)
        with atomic_output(npy, "wb") as fh:
            np.save(fh, out)
        write_text(side, json.dumps({"format": CACHE_FORMAT, "feature": key, "frames": t_in, "files": files, "sizes": sizes}))
        return out
