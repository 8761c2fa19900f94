"""RNN-Transducer loss in pure PyTorch (no torchaudio, no C++/CUDA kernel).

Graves 2012, "Sequence Transduction with Recurrent Neural Networks". For one utterance with
``T`` encoder frames and ``U`` target symbols ``y_1..y_U`` the joint network gives, at every
lattice node ``(t, u)`` (``0 <= t < T``, ``0 <= u <= U``), a distribution over the vocabulary.
Two slices of its log-probabilities are all the loss needs::

    blank(t, u) = log P(blank | t, u)          shape (B, T, U+1)
    label(t, u) = log P(y_{u+1} | t, u)        shape (B, T, U)    (u < U)

    alpha(0, 0) = 0
    alpha(t, u) = logaddexp(alpha(t-1, u) + blank(t-1, u), alpha(t, u-1) + label(t, u-1))
    loss        = -(alpha(T-1, U) + blank(T-1, U))        (the last step emits a blank)

Two independent implementations (``variant``):

* ``"ab"`` (default, the training loss): alpha frame by frame. Within a frame the label chain
  is a prefix sum, so with ``C(t, u) = sum_{j<u} label(t, j)``::

      alpha(t, u) = C(t, u) + logcumsumexp_u(alpha(t-1, u) + blank(t-1, u) - C(t, u))

  and beta likewise with a reversed ``logcumsumexp``, from a terminal pseudo-cell
  ``beta(T_b, U_b) = 0``. Both run without an autograd graph inside a custom
  :class:`torch.autograd.Function`; the gradients are closed form (occupation probabilities)::

      d loss / d blank(t, u) = -exp(alpha(t, u) + blank(t, u) + beta(t+1, u) - logZ)
      d loss / d label(t, u) = -exp(alpha(t, u) + label(t, u) + beta(t, u+1) - logZ)

  ``T`` sequential steps in the forward pass (alpha) and ``T`` in the backward (beta).
* ``"diag"`` (reference): alpha over anti-diagonals ``n = t + u`` (``T + U - 1`` steps), each a
  ``(B, U+1)`` vector, plain autograd through the loop. Slower backward; kept as an independent
  check and tested against brute-force enumeration of all alignments.

Variable lengths per utterance (``logit_lengths``, ``target_lengths``) are handled with masks.
Unreachable cells hold a large finite negative number (:data:`NEG`) instead of ``-inf``:
``logaddexp(-inf, -inf)`` has NaN gradients. Values in the padding (``t >= T_b`` or
``u > U_b``) never reach the loss and get zero gradient.

:func:`rnnt_loss` takes joint logits ``(B, T, U+1, V)``. It does not materialise a full
``log_softmax``: it gathers the blank and label logits and subtracts ``logsumexp`` over ``V``.
:func:`rnnt_loss_from_logprobs` takes the two slices directly, so a caller with per-language
output layers (or a pruned/factorised joint) can build them however it likes.

``reduction="mean"`` is the mean over the batch of the per-utterance loss (as torchaudio), ``"sum"``
its sum, ``"none"`` the ``(B,)`` vector. Half-precision inputs are computed in float32.
"""

from __future__ import annotations

from typing import Literal

import torch

__all__ = ["NEG", "rnnt_loss", "rnnt_loss_from_logprobs", "logprob_slices"]

#: Stand-in for log(0): finite in float32 and float64, so no inf - inf and no NaN gradients.
NEG = -1.0e30

Reduction = Literal["mean", "sum", "none"]
Variant = Literal["ab", "diag"]


# ------------------------------------------------------------------------------------------------
# validation
# ------------------------------------------------------------------------------------------------


def _lengths(name: str, x: torch.Tensor | list[int] | tuple[int, ...], B: int, lo: int, hi: int, dim_name: str) -> torch.Tensor:
    t = torch.as_tensor(x)
    if t.dim() != 1 or t.shape[0] != B:
        raise ValueError(f"{name} must have shape ({B},), got {tuple(t.shape)}")
    if t.dtype.is_floating_point or t.dtype == torch.bool or t.is_complex():
        raise ValueError(f"{name} must be integer, got {t.dtype}")
    t = t.to(torch.long).cpu()
    if B and (int(t.min()) < lo or int(t.max()) > hi):
        bad = [int(v) for v in t if not lo <= int(v) <= hi]
        raise ValueError(f"{name} must lie in [{lo}, {hi}] ({dim_name}); got {bad[:5]}")
    return t


def _check_slices(blank_lp: torch.Tensor, label_lp: torch.Tensor, logit_lengths, target_lengths) -> tuple[torch.Tensor, torch.Tensor]:
    if blank_lp.dim() != 3:
        raise ValueError(f"blank log-probs must be (B, T, U+1), got shape {tuple(blank_lp.shape)}")
    B, T, U1 = blank_lp.shape
    if label_lp.shape != (B, T, U1 - 1):
        raise ValueError(
            f"label log-probs must be (B, T, U) = {(B, T, U1 - 1)} to match blank log-probs {tuple(blank_lp.shape)}, got {tuple(label_lp.shape)}"
        )
    if T < 1:
        raise ValueError("need at least one frame (T >= 1)")
    if not blank_lp.dtype.is_floating_point or not label_lp.dtype.is_floating_point:
        raise ValueError(f"log-probs must be floating point, got {blank_lp.dtype} and {label_lp.dtype}")
    T_l = _lengths("logit_lengths", logit_lengths, B, 1, T, f"1 <= length <= T = {T}")
    U_l = _lengths("target_lengths", target_lengths, B, 0, U1 - 1, f"0 <= length <= U = {U1 - 1}")
    return T_l.to(blank_lp.device), U_l.to(blank_lp.device)


def _reduce(nll: torch.Tensor, reduction: str) -> torch.Tensor:
    if reduction == "none":
        return nll
    if reduction == "sum":
        return nll.sum()
    if reduction == "mean":
        return nll.mean()
    raise ValueError(f"reduction must be 'mean', 'sum' or 'none', got {reduction!r}")


# ------------------------------------------------------------------------------------------------
# "ab": closed-form alpha/beta
# ------------------------------------------------------------------------------------------------


def _alpha_frames(blank: torch.Tensor, C: torch.Tensor) -> torch.Tensor:
    """alpha (B, T, U+1) by frames; ``C`` = cumulative label log-probs with a leading 0."""
    B, T, U1 = blank.shape
    alpha = torch.empty_like(blank)
    alpha[:, 0] = C[:, 0]
    for t in range(1, T):
        c = C[:, t]
        alpha[:, t] = c + torch.logcumsumexp(alpha[:, t - 1] + blank[:, t - 1] - c, dim=1)
    return alpha


def _final(alpha: torch.Tensor, blank: torch.Tensor, T_l: torch.Tensor, U_l: torch.Tensor) -> torch.Tensor:
    b = torch.arange(alpha.shape[0], device=alpha.device)
    return alpha[b, T_l - 1, U_l] + blank[b, T_l - 1, U_l]


class _RnntAB(torch.autograd.Function):
    @staticmethod
    def forward(ctx, blank: torch.Tensor, label: torch.Tensor, T_l: torch.Tensor, U_l: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        blank = blank.detach()
        label = label.detach()
        B, T, U1 = blank.shape
        C = torch.cat([blank.new_zeros(B, T, 1), torch.cumsum(label, dim=2)], dim=2)
        alpha = _alpha_frames(blank, C)
        logz = _final(alpha, blank, T_l, U_l)
        ctx.save_for_backward(blank, label, C, alpha, logz, T_l, U_l)
        return -logz

    @staticmethod
    def backward(ctx, grad_out: torch.Tensor):  # type: ignore[override]
        blank, label, C, alpha, logz, T_l, U_l = ctx.saved_tensors
        B, T, U1 = blank.shape
        dev = blank.device
        u_idx = torch.arange(U1, device=dev)
        beyond_u = u_idx[None, :] > U_l[:, None]  # (B, U+1): cells past the last target
        terminal = torch.full((B, U1), NEG, dtype=blank.dtype, device=dev)
        terminal[torch.arange(B, device=dev), U_l] = 0.0
        beta = torch.empty_like(blank)
        bnext_all = torch.empty_like(blank)  # beta(t+1, u), with the terminal cell at t = T_b - 1
        bnext = torch.full((B, U1), NEG, dtype=blank.dtype, device=dev)
        for t in range(T - 1, -1, -1):
            bnext = torch.where((T_l - 1 == t)[:, None], terminal, bnext)
            bnext_all[:, t] = bnext
            c = C[:, t]
            d = torch.where(beyond_u, NEG, blank[:, t] + bnext) + c
            bt = torch.flip(torch.logcumsumexp(torch.flip(d, (1,)), dim=1), (1,)) - c
            beta[:, t] = bt
            bnext = bt
        t_valid = (torch.arange(T, device=dev)[None, :] < T_l[:, None])[:, :, None]  # (B, T, 1)
        lz = logz[:, None, None]
        g = -grad_out.to(blank.dtype)[:, None, None]
        vb = t_valid & ~beyond_u[:, None, :]
        g_blank = torch.where(vb, torch.exp(torch.clamp(alpha + blank + bnext_all - lz, max=0.0)), 0.0) * g
        vl = t_valid & (u_idx[None, None, : U1 - 1] < U_l[:, None, None])
        g_label = torch.where(vl, torch.exp(torch.clamp(alpha[:, :, :-1] + label + beta[:, :, 1:] - lz, max=0.0)), 0.0) * g
        return g_blank, g_label, None, None


def _nll_ab(blank: torch.Tensor, label: torch.Tensor, T_l: torch.Tensor, U_l: torch.Tensor) -> torch.Tensor:
    return _RnntAB.apply(blank, label, T_l, U_l)


# ------------------------------------------------------------------------------------------------
# "diag": anti-diagonal alpha with autograd (reference)
# ------------------------------------------------------------------------------------------------


def _nll_diag(blank: torch.Tensor, label: torch.Tensor, T_l: torch.Tensor, U_l: torch.Tensor) -> torch.Tensor:
    B, T, U1 = blank.shape
    dev = blank.device
    u = torch.arange(U1, device=dev)
    b = torch.arange(B, device=dev)
    # label padded with a NEG column so label(t, u-1) for u = 0 is defined (and unreachable)
    label_p = torch.cat([blank.new_full((B, T, 1), NEG), label], dim=2)  # label_p[:, t, u] = label(t, u-1)
    prev = torch.where(u[None, :] == 0, blank.new_zeros(()), blank.new_full((), NEG)).expand(B, U1)  # n = 0
    diags = [prev]
    for n in range(1, T + U1 - 1):
        t_blank = n - 1 - u  # came from (t-1, u) with t = n - u
        t_label = n - u  # came from (t, u-1)
        ok_b = (t_blank >= 0) & (t_blank < T)
        ok_l = (t_label >= 0) & (t_label < T) & (u >= 1)
        tb = t_blank.clamp(0, T - 1)
        tl = t_label.clamp(0, T - 1)
        from_blank = torch.where(ok_b[None, :], prev + blank[:, tb, u], NEG)
        prev_shift = torch.cat([blank.new_full((B, 1), NEG), prev[:, :-1]], dim=1)
        from_label = torch.where(ok_l[None, :], prev_shift + label_p[:, tl, u], NEG)
        prev = torch.logaddexp(from_blank, from_label)
        diags.append(prev)
    alpha_d = torch.stack(diags, dim=1)  # (B, N, U+1): alpha(t = n - u, u)
    n_end = T_l - 1 + U_l
    logz = alpha_d[b, n_end, U_l] + blank[b, T_l - 1, U_l]
    return -logz


_VARIANTS = {"ab": _nll_ab, "diag": _nll_diag}


# ------------------------------------------------------------------------------------------------
# public API
# ------------------------------------------------------------------------------------------------


def rnnt_loss_from_logprobs(
    blank_lp: torch.Tensor,
    label_lp: torch.Tensor,
    logit_lengths: torch.Tensor,
    target_lengths: torch.Tensor,
    *,
    reduction: Reduction = "mean",
    variant: Variant = "ab",
) -> torch.Tensor:
    """RNN-T loss from the blank ``(B, T, U+1)`` and next-label ``(B, T, U)`` log-probs.

    ``label_lp[b, t, u]`` is ``log P(targets[b, u] | t, u)``. Values in the padding are ignored
    but must be finite.

    Raises:
        ValueError: shapes that do not fit, lengths out of range, non-finite values, unknown
            ``reduction`` or ``variant``.
    """
    if variant not in _VARIANTS:
        raise ValueError(f"variant must be one of {sorted(_VARIANTS)}, got {variant!r}")
    if reduction not in ("mean", "sum", "none"):
        raise ValueError(f"reduction must be 'mean', 'sum' or 'none', got {reduction!r}")
    T_l, U_l = _check_slices(blank_lp, label_lp, logit_lengths, target_lengths)
    if not (bool(torch.isfinite(blank_lp).all()) and bool(torch.isfinite(label_lp).all())):
        raise ValueError("log-probs contain NaN or inf")
    if blank_lp.dtype not in (torch.float32, torch.float64):
        blank_lp, label_lp = blank_lp.float(), label_lp.float()
    return _reduce(_VARIANTS[variant](blank_lp, label_lp, T_l, U_l), reduction)


def logprob_slices(logits: torch.Tensor, targets: torch.Tensor, blank: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Blank and next-label log-probs of joint ``logits`` (B, T, U+1, V), differentiable.

    ``log_softmax`` is never materialised: ``logit - logsumexp(logits)`` on the gathered entries.
    Padded target positions may hold any value (they are clamped into the vocabulary).
    """
    B, T, U1, V = logits.shape
    lse = torch.logsumexp(logits, dim=3)  # (B, T, U+1)
    blank_lp = logits[..., blank] - lse
    idx = targets.to(torch.long).clamp(0, V - 1)[:, None, :, None].expand(B, T, U1 - 1, 1)
    label_lp = torch.gather(logits[:, :, : U1 - 1, :], 3, idx).squeeze(3) - lse[:, :, : U1 - 1]
    return blank_lp, label_lp


def rnnt_loss(
    logits: torch.Tensor,
    targets: torch.Tensor,
    logit_lengths: torch.Tensor,
    target_lengths: torch.Tensor,
    blank: int = 0,
    reduction: Reduction = "mean",
    *,
    variant: Variant = "ab",
) -> torch.Tensor:
    """RNN-T negative log-likelihood of ``targets`` given joint ``logits`` (B, T, U+1, V).

    Args:
        logits: unnormalised joint outputs; ``U`` is the padded target length.
        targets: (B, U) integer symbols; positions ``>= target_lengths[b]`` are padding.
        logit_lengths: (B,) frames per utterance, ``1 <= T_b <= T``.
        target_lengths: (B,) symbols per utterance, ``0 <= U_b <= U``.
        blank: the blank index, ``0 <= blank < V``; valid targets must differ from it.
        reduction: ``"mean"`` (over the batch), ``"sum"`` or ``"none"`` (a (B,) tensor).
        variant: ``"ab"`` (closed-form gradients, fast) or ``"diag"`` (autograd reference).

    Raises:
        ValueError: on any shape/length/range mismatch or non-finite logits.
    """
    if logits.dim() != 4:
        raise ValueError(f"logits must be (B, T, U+1, V), got shape {tuple(logits.shape)}")
    B, T, U1, V = logits.shape
    if not logits.dtype.is_floating_point:
        raise ValueError(f"logits must be floating point, got {logits.dtype}")
    if targets.dim() != 2 or targets.shape[0] != B:
        raise ValueError(f"targets must be (B, U) with B = {B}, got shape {tuple(targets.shape)}")
    if targets.dtype.is_floating_point or targets.dtype == torch.bool:
        raise ValueError(f"targets must be integer, got {targets.dtype}")
    if targets.shape[1] != U1 - 1:
        raise ValueError(f"targets have U = {targets.shape[1]} columns but logits have U+1 = {U1} (expected U = {U1 - 1})")
    if not 0 <= int(blank) < V:
        raise ValueError(f"blank = {blank} out of range for vocabulary size V = {V}")
    if U1 < 1 or V < 2:
        raise ValueError(f"need U+1 >= 1 and V >= 2, got logits shape {tuple(logits.shape)}")
    U_l = _lengths("target_lengths", target_lengths, B, 0, U1 - 1, f"0 <= length <= U = {U1 - 1}")
    if B and U1 > 1:
        valid = torch.arange(U1 - 1)[None, :] < U_l[:, None]
        tv = targets.detach().cpu().to(torch.long)[valid]
        if tv.numel() and (int(tv.min()) < 0 or int(tv.max()) >= V):
            raise ValueError(f"targets must lie in [0, {V}) within their lengths; got values {int(tv.min())}..{int(tv.max())}")
        if bool((tv == blank).any()):
            raise ValueError(f"targets contain the blank symbol {blank} within their lengths")
    if not bool(torch.isfinite(logits.detach()).all()):
        raise ValueError("logits contain NaN or inf")
    blank_lp, label_lp = logprob_slices(logits, targets, blank)
    return rnnt_loss_from_logprobs(blank_lp, label_lp, logit_lengths, target_lengths, reduction=reduction, variant=variant)
