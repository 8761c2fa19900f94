"""Losses of the tri-training + adversarial SED framework (paper eq. 1-8, Algorithm 1).

* :func:`frame_bce` / :func:`clip_bce`: eq. 3 / eq. 2 on strong (frame) and weak (clip) targets,
  with masks saying which targets exist. The paper writes sums; we take the **mean over the
  labelled elements** so the terms, the domain loss and the regulariser have comparable scales and
  do not depend on batch size or clip length. ``L_y = L_frame + L_clip`` (eq. 1):
  :func:`classification_loss`.
* :func:`domain_loss`: eq. 4, BCE of D's logits against the domain (1 = real, 0 = synthetic), one
  per clip (Adv.whole) or per frame (Adv.time). The gradient reversal with alpha lives in the model
  (:class:`streamkit.models.sed_crnn.DomainClassifier`), so ``L_y + L_d`` backpropagated gives
  eq. 5-7: F gets ``dL_y - alpha dL_d``, D gets ``dL_d``, F1/F2/Ft get ``dL_y`` only.
* :func:`orthogonality_penalty`: eq. 8's ``|(W1/|W1|)^T (W2/|W2|)|`` between the first layers of F1
  and F2. Each unit's input-weight vector is normalised to unit length, so the entries of the
  product are cosines between F1's and F2's units; we take the mean of their absolute values
  (``reduction="sum"`` for the literal entrywise L1 norm). Zero exactly when every unit of F1 is
  orthogonal to every unit of F2. Weight ``lam = 1`` as the paper.
* :func:`pseudo_labels` / :func:`pseudo_label_batch`: Algorithm 1's ``Pseudo-labeling``: a frame
  (or clip) and class gets a pseudo-label where F1 and F2 agree with confidence: both > ``tau``
  (label 1) or both < ``1 - tau`` (label 0), ``tau = 0.5`` as the paper (so "confident and agreed"
  is "on the same side of 0.5"). For weakly labelled clips the clip tags are kept as clip targets,
  and (our addition, ``clip_tags=``) frames of classes absent from the tags are negatives.
* :func:`sed_loss`: the total per method and stage.

How Algorithm 1 maps onto these (stages of one method)
------------------------------------------------------
* ``baseline``, stage ``main``: L_y of Ft on S (frame + clip) and W (clip).
* ``adv-whole`` / ``adv-time``, stage ``main``: as baseline + L_d on S vs W and U (per clip / per
  frame).
* ``tri``, stage ``labelers``: L_y of F1, F2 and Ft on S and W + ``lam * orth(F1, F2)``; stage
  ``final``: L_y of Ft on S, W and the pseudo-labelled W_psl, U_psl.
* ``adv-whole+tri`` / ``adv-time+tri``: as tri, + L_d on S vs W and U in both stages (the paper
  trains D together with the labelers).

The first loop of Algorithm 1 is stage ``labelers`` (train F, F1, F2, Ft, D on S, W, U: U enters
only through D); then the trainer computes pseudo-labels **once** with the frozen F, F1, F2
(:func:`pseudo_label_batch` over W and U) and merges them into the targets
(:func:`with_pseudo_labels`); the second loop is stage ``final`` (train F, Ft, D). Targets come as a
:class:`SedTargets`; a trainer builds them per mini-batch from S (strong frame targets, clip
targets = any frame active), W (clip targets only) and U (nothing, or pseudo-labels in ``final``).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import torch
import torch.nn.functional as F

from streamkit.models.sed_crnn import SedModel

__all__ = [
    "METHODS",
    "ORTH_LAMBDA",
    "PSEUDO_THRESHOLD",
    "SedTargets",
    "parse_method",
    "stages",
    "heads_for",
    "frame_bce",
    "clip_bce",
    "classification_loss",
    "domain_loss",
    "orthogonality_penalty",
    "pseudo_labels",
    "pseudo_label_batch",
    "with_pseudo_labels",
    "sed_loss",
]

METHODS = ("baseline", "adv-whole", "adv-time", "tri", "adv-whole+tri", "adv-time+tri")
ORTH_LAMBDA = 1.0  #: paper eq. 8
PSEUDO_THRESHOLD = 0.5  #: paper §3.2
_EPS = 1e-7


@dataclass
class SedTargets:
    """Targets of a mini-batch of ``B`` clips, ``T`` output frames, ``K`` classes.

    ``frame`` (B, T, K) and ``clip`` (B, K) in [0, 1]; ``frame_mask`` / ``clip_mask`` (same shapes,
    or (B,) per clip) are 1 where the target exists (strong clips: all frames; weak clips: clip
    only; pseudo-labels: where F1 and F2 agreed). ``domain`` (B,): 1 real, 0 synthetic;
    ``domain_mask`` (B,) which clips D sees (default all).
    """

    frame: torch.Tensor
    frame_mask: torch.Tensor
    clip: torch.Tensor
    clip_mask: torch.Tensor
    domain: torch.Tensor
    domain_mask: torch.Tensor | None = None


def parse_method(method: str) -> tuple[str | None, bool]:
    """``(domain mode or None, tri-training?)`` of a method name."""
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}; one of {', '.join(METHODS)}")
    adv = "whole" if method.startswith("adv-whole") else "time" if method.startswith("adv-time") else None
    return adv, method.endswith("tri")


def stages(method: str) -> tuple[str, ...]:
    """Training stages in order: ``("main",)`` or ``("labelers", "final")`` for tri-training."""
    return ("labelers", "final") if parse_method(method)[1] else ("main",)


def heads_for(method: str, stage: str, *, relabel: bool = False) -> tuple[str, ...]:
    """Which heads the model must run for ``method`` at ``stage``.

    ``relabel``: the final stage keeps training the labelers F1, F2 (on the labelled data only), so
    that their pseudo-labels can be remade as F changes (``streamkit train sed --relabel-every``).
    """
    if stage not in stages(method):
        raise ValueError(f"method {method!r} has stages {stages(method)}, not {stage!r}")
    return ("f1", "f2", "ft") if stage == "labelers" or (relabel and stage == "final") else ("ft",)


def _masked_mean(loss: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    m = mask.to(loss.dtype)
    while m.dim() < loss.dim():
        m = m.unsqueeze(-1)
    m = m.expand_as(loss)
    return (loss * m).sum() / m.sum().clamp_min(1.0)


def frame_bce(frame_logits: torch.Tensor, target: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
    """Eq. 3 (mean over labelled frames and classes), on logits for stability."""
    loss = F.binary_cross_entropy_with_logits(frame_logits, target.to(frame_logits.dtype), reduction="none")
    return loss.mean() if mask is None else _masked_mean(loss, mask)


def clip_bce(clip_prob: torch.Tensor, target: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
    """Eq. 2 (mean over labelled clips and classes) on the pooled clip probabilities."""
    p = clip_prob.clamp(_EPS, 1.0 - _EPS)
    loss = F.binary_cross_entropy(p, target.to(p.dtype), reduction="none")
    return loss.mean() if mask is None else _masked_mean(loss, mask)


def classification_loss(head_out: dict[str, torch.Tensor], t: SedTargets) -> torch.Tensor:
    """Eq. 1: ``L_frame + L_clip`` of one head's output."""
    return frame_bce(head_out["frame_logits"], t.frame, t.frame_mask) + clip_bce(head_out["clip"], t.clip, t.clip_mask)


def domain_loss(logits: torch.Tensor, domain: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
    """Eq. 4: BCE of D's logits, (B,) for Adv.whole or (B, T) for Adv.time, against (B,) domains."""
    d = domain.to(logits.dtype)
    if logits.dim() == 2:
        d = d[:, None].expand_as(logits)
    loss = F.binary_cross_entropy_with_logits(logits, d, reduction="none")
    return loss.mean() if mask is None else _masked_mean(loss, mask)


def orthogonality_penalty(w1: torch.Tensor, w2: torch.Tensor, reduction: str = "mean") -> torch.Tensor:
    """Eq. 8's ``|(W1/|W1|)^T (W2/|W2|)|`` for (out, in) weights of F1's and F2's first layers."""
    if w1.shape[1] != w2.shape[1]:
        raise ValueError(f"first layers see different inputs: {tuple(w1.shape)} vs {tuple(w2.shape)}")
    u1 = w1 / w1.norm(dim=1, keepdim=True).clamp_min(1e-12)
    u2 = w2 / w2.norm(dim=1, keepdim=True).clamp_min(1e-12)
    cos = (u1 @ u2.T).abs()  # (out1, out2): the paper's W1^T W2 with (in, out) matrices
    if reduction == "mean":
        return cos.mean()
    if reduction == "sum":
        return cos.sum()
    raise ValueError(f"reduction must be 'mean' or 'sum', got {reduction!r}")


def pseudo_labels(
    p1: torch.Tensor, p2: torch.Tensor, threshold: float = PSEUDO_THRESHOLD, *, negative: float | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(labels, mask)``: 1 where both > ``threshold``, 0 where both < ``negative``; mask where either holds.

    ``negative`` defaults to ``1 - threshold``: the paper's symmetric rule, which at 0.5 labels every
    frame where F1 and F2 agree. A lower ``negative`` leaves the frames where both are unsure
    unlabelled instead of calling them negatives; a ``threshold`` below 0.5 needs an explicit
    ``negative``. Requires ``0 < negative <= threshold < 1``.
    """
    neg = 1.0 - threshold if negative is None else float(negative)
    if not 0.0 < threshold < 1.0:
        raise ValueError(f"threshold must be in (0, 1), got {threshold}")
    if not 0.0 < neg <= threshold:
        raise ValueError(f"negative threshold must be in (0, threshold={threshold}], got {neg}")
    pos = (p1 > threshold) & (p2 > threshold)
    negm = (p1 < neg) & (p2 < neg)
    return pos.to(p1.dtype), (pos | negm).to(p1.dtype)


@torch.no_grad()
def pseudo_label_batch(
    model: SedModel,
    x: torch.Tensor,
    *,
    clip_tags: torch.Tensor | None = None,
    threshold: float = PSEUDO_THRESHOLD,
    negative: float | None = None,
    heads: tuple[str, str] = ("f1", "f2"),
) -> dict[str, torch.Tensor]:
    """Algorithm 1's ``Pseudo-labeling(F, F1, F2, X)`` for one batch (eval mode, no gradients).

    Returns ``frame``, ``frame_mask`` (B, T, K) and ``clip``, ``clip_mask`` (B, K). With
    ``clip_tags`` (B, K) (weakly labelled clips) the clip targets are the tags (mask 1), and frames
    of classes absent from the tags are negatives (mask 1) whatever F1 and F2 say. ``heads``: the two
    labelers; ``("ft", "ft")`` labels with a finished model's final classifier (``--teacher``).
    """
    was = model.training
    model.eval()
    try:
        out = model(x, heads=tuple(dict.fromkeys(heads)))
    finally:
        model.train(was)
    a, b = out[heads[0]], out[heads[1]]
    frame, frame_mask = pseudo_labels(a["frame"], b["frame"], threshold, negative=negative)
    clip, clip_mask = pseudo_labels(a["clip"], b["clip"], threshold, negative=negative)
    if clip_tags is not None:
        tags = clip_tags.to(frame.dtype)
        absent = (tags < 0.5)[:, None, :].expand_as(frame)
        frame = torch.where(absent, torch.zeros_like(frame), frame)
        frame_mask = torch.where(absent, torch.ones_like(frame_mask), frame_mask)
        clip, clip_mask = tags, torch.ones_like(tags)
    return {"frame": frame, "frame_mask": frame_mask, "clip": clip, "clip_mask": clip_mask}


def with_pseudo_labels(t: SedTargets, pseudo: dict[str, torch.Tensor]) -> SedTargets:
    """Targets where the existing ones stay and missing ones are filled from ``pseudo`` (where it has a label)."""

    def merge(y: torch.Tensor, m: torch.Tensor, py: torch.Tensor, pm: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        m = m.to(py.dtype)
        while m.dim() < py.dim():
            m = m.unsqueeze(-1)
        m = m.expand_as(py)
        have = m > 0
        return torch.where(have, y.to(py.dtype).expand_as(py), py * pm), torch.where(have, m, pm)

    frame, frame_mask = merge(t.frame, t.frame_mask, pseudo["frame"], pseudo["frame_mask"])
    clip, clip_mask = merge(t.clip, t.clip_mask, pseudo["clip"], pseudo["clip_mask"])
    return replace(t, frame=frame, frame_mask=frame_mask, clip=clip, clip_mask=clip_mask)


def sed_loss(
    method: str,
    out: dict[str, Any],
    t: SedTargets,
    *,
    model: SedModel | None = None,
    stage: str | None = None,
    orth_lambda: float = ORTH_LAMBDA,
    orth_reduction: str = "mean",
    labeler_targets: SedTargets | None = None,
) -> dict[str, torch.Tensor]:
    """Total loss of ``method`` at ``stage`` (default: the first stage) and its parts.

    ``out``: ``model(x, heads=heads_for(method, stage), domain=parse_method(method)[0])``.
    ``model`` is needed at stage ``labelers`` (the orthogonality regulariser reads F1's and F2's
    weights). Returns ``{"loss", "y_ft", ["y_f1", "y_f2", "orth"], ["domain"]}``.

    ``labeler_targets`` (stage ``final`` only): also train F1 and F2 as in stage ``labelers``, on
    these targets (the labelled data without pseudo-labels), with the orthogonality term; Ft learns
    from ``t`` (with them). ``out`` must then hold ``heads_for(method, "final", relabel=True)``.
    """
    adv, _tri = parse_method(method)
    stage = stage or stages(method)[0]
    relabel = labeler_targets is not None
    if relabel and stage != "final":
        raise ValueError(f"labeler_targets only apply to stage 'final', not {stage!r}")
    heads = heads_for(method, stage, relabel=relabel)
    parts: dict[str, torch.Tensor] = {}
    for h in heads:
        if h not in out:
            raise ValueError(f"model output lacks head {h!r} needed by {method!r} at stage {stage!r}")
        parts[f"y_{h}"] = classification_loss(out[h], labeler_targets if relabel and h != "ft" else t)  # type: ignore[arg-type]
    total = sum(parts.values())
    if stage == "labelers" or relabel:
        if model is None:
            raise ValueError(f"stage {stage!r} with the labelers needs model= for the orthogonality regulariser")
        parts["orth"] = orthogonality_penalty(model.f1.first_layer_weight(), model.f2.first_layer_weight(), orth_reduction)
        total = total + orth_lambda * parts["orth"]
    if adv is not None:
        if "domain" not in out:
            raise ValueError(f"method {method!r} needs the model run with domain={adv!r}")
        logits = out["domain"]
        if (adv == "whole") != (logits.dim() == 1):
            raise ValueError(
                f"method {method!r} expects {'per-clip' if adv == 'whole' else 'per-frame'} domain logits, got shape {tuple(logits.shape)}"
            )
        parts["domain"] = domain_loss(logits, t.domain, t.domain_mask)
        total = total + parts["domain"]
    parts["loss"] = total  # type: ignore[assignment]
    return parts
