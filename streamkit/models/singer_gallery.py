"""A gallery of enrolled singers: name -> embeddings, cosine scoring, open-set threshold.

The file is JSON (``format`` ``streamkit-singer-gallery``, version 2): the embedding mode, the
dimension, the embedder that enrolled it (weight file name and SHA-256 prefix; version 1 files have
none), the threshold, and per singer the enrolled files with one embedding each. Vectors of another
embedder are refused, even of the same dimension. A singer's
model is the mean of its enrolment embeddings, length-normalised; a query scores the cosine
against every model; the best model names the singer when its score reaches the threshold, else
the answer is ``unknown``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

FORMAT = "streamkit-singer-gallery"
UNKNOWN = "unknown"


@dataclass(frozen=True)
class Decision:
    """The answer for one query: ``name`` (or ``unknown``), the best score (cosine), the best
    enrolled name whatever the threshold, and every singer's score."""

    name: str
    score: float
    best: str
    scores: dict[str, float]


@dataclass
class Gallery:
    mode: str
    dim: int
    threshold: float
    singers: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    embedder: str | None = None

    def check_embedder(self, identity: str | None) -> None:
        """ValueError unless ``identity`` is the embedder that enrolled this gallery (a gallery
        without a record, version 1, is checked by dimension only)."""
        if self.embedder is not None and identity is not None and identity != self.embedder:
            raise ValueError(f"the gallery was enrolled with {self.embedder}, these weights are {identity}: "
                             "re-enroll, or pass the weights that enrolled it with --weights")  # fmt: skip

    def enroll(self, name: str, file: str, vector: np.ndarray) -> None:
        if not name or name == UNKNOWN:
            raise ValueError(f"singer name must be non-empty and not {UNKNOWN!r}, got {name!r}")
        v = np.asarray(vector, dtype=np.float64).reshape(-1)
        if v.shape[0] != self.dim:
            raise ValueError(f"embedding has {v.shape[0]} dims, the gallery {self.dim}")
        self.singers.setdefault(name, []).append({"file": file, "embedding": [round(float(a), 6) for a in v]})

    def models(self) -> tuple[list[str], np.ndarray]:
        names = sorted(self.singers)
        m = np.array([np.mean([e["embedding"] for e in self.singers[n]], axis=0) for n in names]).reshape(len(names), self.dim)
        return names, m / (np.linalg.norm(m, axis=1, keepdims=True) + 1e-12)

    def score(self, vector: np.ndarray, threshold: float | None = None) -> Decision:
        if not self.singers:
            raise ValueError("the gallery has no singers; enroll some first")
        names, m = self.models()
        v = np.asarray(vector, dtype=np.float64).reshape(-1)
        s = m @ (v / (np.linalg.norm(v) + 1e-12))
        i = int(np.argmax(s))
        thr = self.threshold if threshold is None else threshold
        best = names[i]
        return Decision(best if s[i] >= thr else UNKNOWN, float(s[i]), best, {n: float(a) for n, a in zip(names, s, strict=True)})

    def to_json(self) -> dict[str, Any]:
        return {"format": FORMAT, "version": 2, "mode": self.mode, "dim": self.dim, "embedder": self.embedder, "threshold": self.threshold,
                "singers": self.singers}  # fmt: skip

    def save(self, path: str | Path) -> None:
        p = Path(path)
        tmp = p.with_name(p.name + ".tmp")
        tmp.write_text(json.dumps(self.to_json(), indent=1) + "\n", encoding="utf-8")
        tmp.replace(p)

    @classmethod
    def load(cls, path: str | Path) -> Gallery:
        p = Path(path)
        if not p.is_file():
            raise ValueError(f"gallery {p} not found; make it with `streamkit singers enroll NAME FILES... --gallery {p}`")
        try:
            d = json.loads(p.read_text(encoding="utf-8"))
            if d.get("format") != FORMAT:
                raise ValueError(f"format is {d.get('format')!r}")
            emb = d.get("embedder")
            g = cls(str(d["mode"]), int(d["dim"]), float(d["threshold"]), dict(d["singers"]), None if emb is None else str(emb))
            for n, es in g.singers.items():
                for e in es:
                    if len(e["embedding"]) != g.dim:
                        raise ValueError(f"singer {n!r}: embedding of {len(e['embedding'])} dims, not {g.dim}")
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise ValueError(f"{p}: not a singer gallery ({exc})") from None
        return g


def eer_threshold(target: np.ndarray, nontarget: np.ndarray) -> tuple[float, float]:
    """The threshold where the miss rate of ``target`` scores equals the false-accept rate of
    ``nontarget`` scores, and that equal error rate. Every threshold between the crossing score and
    the next lower score has the same errors on these scores; the middle of that interval is
    returned (for separable sets: halfway between the best non-target and the worst target, not at
    the worst target, which would reject new targets scoring a little lower)."""
    t = np.sort(np.asarray(target, dtype=np.float64))
    n = np.sort(np.asarray(nontarget, dtype=np.float64))
    if t.size == 0 or n.size == 0:
        raise ValueError("need target and non-target scores to calibrate a threshold")
    cands = np.unique(np.concatenate([t, n]))
    miss = np.searchsorted(t, cands, side="left") / t.size
    fa = 1.0 - np.searchsorted(n, cands, side="left") / n.size
    i = int(np.argmin(np.abs(miss - fa)))
    thr = float(cands[i]) if i == 0 else float((cands[i - 1] + cands[i]) / 2)
    return thr, float((miss[i] + fa[i]) / 2)
