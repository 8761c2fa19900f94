"""Open-set language ID: an ``unknown`` answer when no model language is supported by the LID head.

The LID head of the multi-softmax RNN-T is a softmax over the model's languages only, so it always
names one of them. Open-set LID here is a calibrated threshold on a confidence score computed from
the head's frame posteriors ``P_t(l)`` (no retraining):

* ``"last"``: ``max_l P_T(l)`` of the latest frame (what the recurrent head's ``lid_select="last"``
  decides by);
* ``"mean"``: ``max_l mean_t P_t(l)`` (the paper's average posterior);
* ``"frame"``: ``mean_t max_l P_t(l)``, how confident the head was frame by frame;
* ``"probe"``: a background-class probe on the frozen encoder, ``sigmoid(w · z + b)`` with ``z``
  the standardised mean and standard deviation of the encoder's output frames so far
  (:func:`fit_probe`: logistic regression, in-language utterances against speech of other
  languages). The encoder is causal, so the streaming block computes the same ``z``.

An utterance is ``unknown`` when its score is below the threshold at a **checkpoint**: at the
shutoff wait ``tau`` (frame index ``tau``, so decoding can stop early: all decoders are switched
off) and at the end of the utterance. :func:`calibrate` picks the threshold on a dev set: the
highest threshold whose false-unknown rate on in-language dev utterances stays at or below a target
(``max_false_unknown``), measured with the same checkpoint rule, and reports the share of
non-model-language dev utterances it answers ``unknown``. :func:`choose` compares the scores and
keeps the one that rejects most dev negatives.

A calibration is a small JSON file next to the weights (``rnnt_lid.openset.json`` beside
``rnnt_lid.pt``, :func:`sidecar`): ``{"format", "score", "threshold", "checkpoint_frames",
"max_false_unknown", "dev": {...}, "command"}``; ``models.rnnt_asr`` loads it with its model
(``unknown="auto"``).
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

__all__ = [
    "FORMAT",
    "SCORES",
    "UNKNOWN",
    "OpenSet",
    "OpenSetTracker",
    "calibrate",
    "checkpoint_score",
    "choose",
    "enc_stats",
    "fit_probe",
    "load",
    "probe_value",
    "sidecar",
    "utterance_scores",
]

FORMAT = "streamkit-openset/1"
UNKNOWN = "unknown"
SCORES = ("last", "mean", "frame", "probe")


class OpenSetError(ValueError):
    """A calibration file that cannot be used (one line)."""


@dataclass(frozen=True)
class OpenSet:
    """A calibrated open-set rule: ``unknown`` when ``score`` < ``threshold`` at frame
    ``checkpoint_frames`` (when the utterance gets there) or at its end."""

    score: str
    threshold: float
    checkpoint_frames: int | None = 30
    max_false_unknown: float | None = None
    dev: dict[str, Any] = field(default_factory=dict)
    command: str | None = None
    probe: dict[str, Any] | None = None  # {"w", "b", "mu", "sd"} for score "probe"

    def __post_init__(self) -> None:
        if self.score == "probe" and not (isinstance(self.probe, dict) and {"w", "b", "mu", "sd"} <= set(self.probe)):
            raise OpenSetError("open-set score 'probe' needs its probe weights (w, b, mu, sd)")
        if self.score not in SCORES:
            raise OpenSetError(f"open-set score must be one of {SCORES}, got {self.score!r}")
        if not (0.0 <= float(self.threshold) <= 1.0):
            raise OpenSetError(f"open-set threshold must be in [0, 1], got {self.threshold!r}")
        if self.checkpoint_frames is not None and int(self.checkpoint_frames) < 0:
            raise OpenSetError(f"checkpoint_frames must be >= 0 or null, got {self.checkpoint_frames!r}")

    def to_dict(self) -> dict[str, Any]:
        return {"format": FORMAT, **asdict(self)}

    def save(self, path: str | os.PathLike[str]) -> None:
        from streamkit.io.outputs import write_text

        write_text(path, json.dumps(self.to_dict(), ensure_ascii=False, indent=1) + "\n")

    def is_unknown(self, post: np.ndarray, enc: np.ndarray | None = None) -> bool:
        """The rule on a whole utterance's frame posteriors ``(T, L)`` (and encoder frames ``(T, H)`` for ``probe``)."""
        return checkpoint_score(post, self.score, self.checkpoint_frames, enc, self.probe) < self.threshold


def load(path: str | os.PathLike[str]) -> OpenSet:
    """An :class:`OpenSet` from its JSON file (OpenSetError on a bad file)."""
    p = Path(path)
    try:
        d = json.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise OpenSetError(f"{p}: open-set calibration file not found") from None
    except (ValueError, UnicodeDecodeError) as e:
        raise OpenSetError(f"{p}: not valid JSON ({e})") from None
    if not isinstance(d, dict) or d.get("format") != FORMAT:
        raise OpenSetError(f"{p}: not an open-set calibration (format {d.get('format') if isinstance(d, dict) else None!r}, expected {FORMAT!r})")
    try:
        return OpenSet(str(d["score"]), float(d["threshold"]), None if d.get("checkpoint_frames") is None else int(d["checkpoint_frames"]),
                       d.get("max_false_unknown"), dict(d.get("dev") or {}), d.get("command"), d.get("probe"))  # fmt: skip
    except (KeyError, TypeError, ValueError) as e:
        raise OpenSetError(f"{p}: bad open-set calibration ({type(e).__name__}: {e})") from None


def sidecar(weights: str | os.PathLike[str]) -> Path:
    """The calibration file that goes with a weight file: ``X.pt`` → ``X.openset.json``."""
    w = Path(weights)
    return w.with_name(w.stem + ".openset.json")


# -------------------------------------------------------------------------------- scores
def probe_value(probe: Mapping[str, Any], mean: np.ndarray, std: np.ndarray) -> float:
    """``sigmoid(w · z + b)``, ``z = ((mean, std) - mu) / sd``."""
    z = (np.concatenate([mean, std]) - np.asarray(probe["mu"])) / np.asarray(probe["sd"])
    return float(1.0 / (1.0 + np.exp(-(float(np.dot(np.asarray(probe["w"]), z)) + float(probe["b"])))))


def enc_stats(enc: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Mean and standard deviation over the frames of ``enc`` (T, H)."""
    e = np.asarray(enc, dtype=np.float64)
    m = e.mean(0)
    return m, np.sqrt(np.maximum((e * e).mean(0) - m * m, 0.0))


def _score(post: np.ndarray, kind: str, enc: np.ndarray | None = None, probe: Mapping[str, Any] | None = None) -> float:
    if post.shape[0] == 0:
        return 0.0
    if kind == "probe":
        if enc is None or probe is None:
            raise ValueError("score 'probe' needs the encoder frames and the probe")
        return probe_value(probe, *enc_stats(enc))
    if kind == "last":
        return float(post[-1].max())
    if kind == "mean":
        return float(post.mean(0).max())
    if kind == "frame":
        return float(post.max(1).mean())
    raise ValueError(f"score must be one of {SCORES}, got {kind!r}")


def checkpoint_score(post: np.ndarray, kind: str, checkpoint_frames: int | None, enc: np.ndarray | None = None,
                     probe: Mapping[str, Any] | None = None) -> float:  # fmt: skip
    """The rule's statistic: the lower of the score at frame ``checkpoint_frames`` (frames
    ``0..checkpoint_frames``, if the utterance has them) and at the end."""
    post = np.asarray(post, dtype=np.float64)
    s = _score(post, kind, enc, probe)
    if checkpoint_frames is not None and post.shape[0] > checkpoint_frames + 1:
        k = checkpoint_frames + 1
        s = min(s, _score(post[:k], kind, None if enc is None else enc[:k], probe))
    return s


def utterance_scores(posts: Iterable[np.ndarray], kind: str, checkpoint_frames: int | None, encs: Sequence[np.ndarray] | None = None,
                     probe: Mapping[str, Any] | None = None) -> np.ndarray:  # fmt: skip
    posts = list(posts)
    es = list(encs) if encs is not None else [None] * len(posts)
    return np.array([checkpoint_score(p, kind, checkpoint_frames, e, probe) for p, e in zip(posts, es)], dtype=np.float64)


def fit_probe(pos_encs: Sequence[np.ndarray], neg_encs: Sequence[np.ndarray], checkpoint_frames: int | None = 30,
              l2: float = 1e-2, iters: int = 300) -> dict[str, Any]:  # fmt: skip
    """Logistic regression (L2, LBFGS) of in-language (1) against other-language (0) utterances on
    the encoder statistics at the checkpoint and at the end (both rows per utterance), classes
    weighted equally; returns ``{"w", "b", "mu", "sd"}`` (plain lists, for the JSON file)."""
    import torch

    def rows(encs: Sequence[np.ndarray]) -> list[np.ndarray]:
        out = []
        for e in encs:
            out.append(np.concatenate(enc_stats(e)))
            if checkpoint_frames is not None and e.shape[0] > checkpoint_frames + 1:
                out.append(np.concatenate(enc_stats(e[: checkpoint_frames + 1])))
        return out

    P, N = rows(pos_encs), rows(neg_encs)
    if not P or not N:
        raise ValueError("fit_probe needs in-language and other-language utterances")
    X = np.stack(P + N)
    y = np.r_[np.ones(len(P)), np.zeros(len(N))]
    mu, sd = X.mean(0), X.std(0) + 1e-6
    Xt = torch.tensor((X - mu) / sd, dtype=torch.float64)
    yt = torch.tensor(y, dtype=torch.float64)
    wt = torch.tensor(np.where(y == 1, 0.5 / len(P), 0.5 / len(N)), dtype=torch.float64)
    w = torch.zeros(X.shape[1], dtype=torch.float64, requires_grad=True)
    b = torch.zeros((), dtype=torch.float64, requires_grad=True)
    opt = torch.optim.LBFGS([w, b], max_iter=iters, line_search_fn="strong_wolfe")

    def closure() -> torch.Tensor:
        opt.zero_grad()
        loss = (wt * torch.nn.functional.binary_cross_entropy_with_logits(Xt @ w + b, yt, reduction="none")).sum() + l2 * (w * w).sum()
        loss.backward()
        return loss

    opt.step(closure)
    return {"w": w.detach().numpy().round(6).tolist(), "b": round(float(b.detach()), 6), "mu": mu.round(6).tolist(), "sd": sd.round(6).tolist()}


def calibrate(pos: Sequence[float], neg: Sequence[float], max_false_unknown: float = 0.05) -> dict[str, float]:
    """The highest threshold that answers ``unknown`` (score < threshold) for at most
    ``max_false_unknown`` of the in-language scores ``pos``; with it, the share of ``neg``
    (non-model-language) scores answered unknown. Ties are kept on the known side.

    Returns ``{"threshold", "false_unknown", "unknown_rate"}`` (rates in [0, 1]).
    """
    p = np.sort(np.asarray(pos, dtype=np.float64))
    n = np.asarray(neg, dtype=np.float64)
    if p.size == 0:
        raise ValueError("no in-language scores to calibrate on")
    if not 0.0 <= max_false_unknown < 1.0:
        raise ValueError(f"max_false_unknown must be in [0, 1), got {max_false_unknown}")
    k = int(math.floor(max_false_unknown * p.size + 1e-9))  # at most k positives may fall below
    th = float(p[k]) if k < p.size else 1.0  # the (k+1)-th smallest: exactly k are strictly below
    fu = float(np.mean(p < th))
    assert fu <= max_false_unknown + 1e-12
    return {"threshold": th, "false_unknown": fu, "unknown_rate": float(np.mean(n < th)) if n.size else float("nan")}


def choose(pos_posts: Sequence[np.ndarray], neg_posts: Sequence[np.ndarray], *, max_false_unknown: float = 0.05,
           checkpoint_frames: int | None = 30, kinds: Sequence[str] = ("last", "mean", "frame"), pos_encs: Sequence[np.ndarray] | None = None,
           neg_encs: Sequence[np.ndarray] | None = None, probe: dict[str, Any] | None = None) -> tuple[OpenSet, dict[str, dict[str, float]]]:  # fmt: skip
    """Calibrate every score kind on dev posteriors (and encoder frames, for ``probe``); the
    :class:`OpenSet` of the kind answering most negatives ``unknown`` (ties: the first of
    ``kinds``) and every kind's figures."""
    table: dict[str, dict[str, float]] = {}
    for k in kinds:
        pe, ne = (pos_encs, neg_encs) if k == "probe" else (None, None)
        table[k] = calibrate(utterance_scores(pos_posts, k, checkpoint_frames, pe, probe),
                             utterance_scores(neg_posts, k, checkpoint_frames, ne, probe), max_false_unknown)  # fmt: skip
    best = max(kinds, key=lambda k: (table[k]["unknown_rate"], -list(kinds).index(k)))
    return OpenSet(best, table[best]["threshold"], checkpoint_frames, max_false_unknown, {"scores": table},
                   probe=probe if best == "probe" else None), table  # fmt: skip


# -------------------------------------------------------------------------------- streaming
class OpenSetTracker:
    """The rule frame by frame, for the streaming block: :meth:`update` with each frame's LID
    posteriors; :attr:`unknown` turns True (for good) when a checkpoint's score is below the
    threshold; :meth:`finish` applies the end-of-utterance check."""

    def __init__(self, rule: OpenSet) -> None:
        self.rule = rule
        self.reset()

    def reset(self) -> None:
        self.t = 0
        self.sum = None  # type: np.ndarray | None
        self.sum_max = 0.0
        self.enc_sum: np.ndarray | None = None
        self.enc_sq: np.ndarray | None = None
        self.last: np.ndarray | None = None
        self.unknown = False
        self.unknown_at: int | None = None
        self.value: float | None = None

    def _current(self) -> float:
        if self.t == 0 or self.last is None or self.sum is None:
            return 0.0
        if self.rule.score == "last":
            return float(self.last.max())
        if self.rule.score == "mean":
            return float((self.sum / self.t).max())
        if self.rule.score == "probe":
            assert self.enc_sum is not None and self.enc_sq is not None and self.rule.probe is not None
            m = self.enc_sum / self.t
            return probe_value(self.rule.probe, m, np.sqrt(np.maximum(self.enc_sq / self.t - m * m, 0.0)))
        return self.sum_max / self.t

    def _check(self) -> None:
        v = self._current()
        self.value = v if self.value is None else min(self.value, v)
        if v < self.rule.threshold and not self.unknown:
            self.unknown = True
            self.unknown_at = self.t - 1

    def update(self, post: np.ndarray | Sequence[float], enc: np.ndarray | None = None) -> bool:
        """Frame ``t``'s posteriors (and encoder output, for ``probe``); True when the rule has just
        answered unknown at the checkpoint."""
        p = np.asarray(post, dtype=np.float64).reshape(-1)
        if self.rule.score == "probe":
            if enc is None:
                raise ValueError("the probe score needs every frame's encoder output")
            e = np.asarray(enc, dtype=np.float64).reshape(-1)
            self.enc_sum = e.copy() if self.enc_sum is None else self.enc_sum + e
            self.enc_sq = e * e if self.enc_sq is None else self.enc_sq + e * e
        self.sum = p.copy() if self.sum is None else self.sum + p
        self.sum_max += float(p.max())
        self.last = p
        self.t += 1
        was = self.unknown
        if self.rule.checkpoint_frames is not None and self.t - 1 == self.rule.checkpoint_frames:
            self._check()
        return self.unknown and not was

    def finish(self) -> bool:
        """The end-of-utterance check; whether the utterance is unknown."""
        self._check()
        return self.unknown

    def summary(self) -> Mapping[str, Any]:
        return {"score": self.rule.score, "value": self.value, "threshold": self.rule.threshold, "unknown_at": self.unknown_at}
