"""RNN-T loss: both variants against brute-force enumeration of every alignment, gradcheck,
gradient agreement between the variants, reductions and the error paths."""

from __future__ import annotations

import math

import pytest
import torch

from streamkit.models.rnnt_loss import logprob_slices, rnnt_loss, rnnt_loss_from_logprobs

torch.set_num_threads(1)

VARIANTS = ["ab", "diag"]


def _paths(lp: torch.Tensor, y: list[int], T: int, U: int, blank: int, t: int, u: int, acc: float):
    """Log-probability of every alignment path from lattice node (t, u) to the end."""
    if t == T - 1 and u == U:
        yield acc + float(lp[t, u, blank])
        return
    if u < U:  # emit y[u] at (t, u)
        yield from _paths(lp, y, T, U, blank, t, u + 1, acc + float(lp[t, u, y[u]]))
    if t < T - 1:  # blank: next frame
        yield from _paths(lp, y, T, U, blank, t + 1, u, acc + float(lp[t, u, blank]))


def brute_force_nll(logits: torch.Tensor, targets: torch.Tensor, T_l, U_l, blank: int = 0) -> list[float]:
    """-log sum over all alignment paths, enumerated one by one (float64 reference)."""
    lp = torch.log_softmax(logits.double(), dim=-1)
    out = []
    for b in range(logits.shape[0]):
        T, U = int(T_l[b]), int(U_l[b])
        y = [int(v) for v in targets[b, :U]]
        scores = list(_paths(lp[b], y, T, U, blank, 0, 0, 0.0))
        assert len(scores) == math.comb(T - 1 + U, U)  # number of alignments
        m = max(scores)
        out.append(-(m + math.log(sum(math.exp(s - m) for s in scores))))
    return out


def case(seed: int = 0, B: int = 3, T: int = 4, U: int = 3, V: int = 5, dtype=torch.float64):
    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(B, T, U + 1, V, generator=g, dtype=dtype) * 2.0
    targets = torch.randint(1, V, (B, U), generator=g)
    T_l = torch.tensor([T, 2, 1][:B])
    U_l = torch.tensor([U, 1, 0][:B])
    targets[1, 1:] = -7  # padding may hold anything
    return logits, targets, T_l, U_l


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_matches_brute_force_mixed_lengths(variant, seed):
    logits, targets, T_l, U_l = case(seed)
    ref = torch.tensor(brute_force_nll(logits, targets, T_l, U_l), dtype=torch.float64)
    got = rnnt_loss(logits, targets, T_l, U_l, reduction="none", variant=variant)
    assert got.shape == (3,)
    assert torch.allclose(got, ref, rtol=0, atol=1e-12), (got, ref)


@pytest.mark.parametrize("variant", VARIANTS)
def test_brute_force_all_small_shapes_and_blank_not_zero(variant):
    for T in range(1, 5):
        for U in range(0, 4):
            g = torch.Generator().manual_seed(10 * T + U)
            logits = torch.randn(2, T, U + 1, 5, generator=g, dtype=torch.float64)
            blank = 3
            targets = torch.tensor([[1, 2, 4][:U], [4, 0, 1][:U]], dtype=torch.long).reshape(2, U)
            T_l = torch.tensor([T, max(1, T - 1)])
            U_l = torch.tensor([U, max(0, U - 1)])
            ref = torch.tensor(brute_force_nll(logits, targets, T_l, U_l, blank=blank), dtype=torch.float64)
            got = rnnt_loss(logits, targets, T_l, U_l, blank=blank, reduction="none", variant=variant)
            assert torch.allclose(got, ref, rtol=0, atol=1e-12), (T, U, got, ref)


@pytest.mark.parametrize("variant", VARIANTS)
def test_gradcheck(variant):
    logits, targets, T_l, U_l = case(3, T=3, U=2, V=4)
    logits.requires_grad_(True)
    assert torch.autograd.gradcheck(lambda x: rnnt_loss(x, targets, T_l, U_l, reduction="none", variant=variant), (logits,), eps=1e-6, atol=1e-8)


def test_gradcheck_from_logprobs_closed_form():
    logits, targets, T_l, U_l = case(4, T=3, U=2, V=4)
    blank_lp, label_lp = logprob_slices(logits, targets)
    blank_lp = blank_lp.detach().requires_grad_(True)
    label_lp = label_lp.detach().requires_grad_(True)
    assert torch.autograd.gradcheck(
        lambda a, b: rnnt_loss_from_logprobs(a, b, T_l, U_l, reduction="none", variant="ab"), (blank_lp, label_lp), eps=1e-6, atol=1e-8
    )


def test_variant_gradients_agree_and_padding_gets_no_gradient():
    logits, targets, T_l, U_l = case(5, T=4, U=3, V=5)
    grads, losses = [], []
    for variant in VARIANTS:
        x = logits.clone().requires_grad_(True)
        loss = rnnt_loss(x, targets, T_l, U_l, reduction="sum", variant=variant)
        loss.backward()
        grads.append(x.grad)
        losses.append(loss.detach())
    assert torch.allclose(losses[0], losses[1], rtol=0, atol=1e-12)
    assert torch.allclose(grads[0], grads[1], rtol=0, atol=1e-12)
    g = grads[0]
    assert torch.all(g[1, 2:] == 0) and torch.all(g[1, :, 2:] == 0)  # t >= T_1 = 2, u > U_1 = 1
    assert torch.all(g[2, 1:] == 0) and torch.all(g[2, :, 1:] == 0)
    # a log-softmax gradient sums to zero over the vocabulary at every lattice node
    assert torch.allclose(g.sum(-1), torch.zeros_like(g.sum(-1)), atol=1e-12)


def test_variants_agree_at_the_vanilla_union_size():
    """The closed form and the autograd reference at the 341-symbol union of the vanilla model, long lattices."""
    torch.manual_seed(0)
    logits = torch.randn(3, 40, 13, 341, dtype=torch.float64)
    targets = torch.randint(1, 341, (3, 12))
    T_l, U_l = torch.tensor([40, 25, 10]), torch.tensor([12, 7, 0])
    out = []
    for variant in VARIANTS:
        x = logits.clone().requires_grad_(True)
        loss = rnnt_loss(x, targets, T_l, U_l, reduction="mean", variant=variant)
        (g,) = torch.autograd.grad(loss, x)
        out.append((loss.detach(), g))
    assert torch.allclose(out[0][0], out[1][0], rtol=0, atol=1e-10)
    assert torch.allclose(out[0][1], out[1][1], rtol=0, atol=1e-12)


def test_reductions_and_float32():
    logits, targets, T_l, U_l = case(6)
    none = rnnt_loss(logits, targets, T_l, U_l, reduction="none")
    assert torch.allclose(rnnt_loss(logits, targets, T_l, U_l, reduction="sum"), none.sum())
    assert torch.allclose(rnnt_loss(logits, targets, T_l, U_l), none.mean())
    f32 = rnnt_loss(logits.float(), targets, T_l, U_l, reduction="none")
    assert f32.dtype == torch.float32
    assert torch.allclose(f32.double(), none, rtol=1e-5)
    # the upstream gradient scales the closed-form one
    x = logits.clone().requires_grad_(True)
    (rnnt_loss(x, targets, T_l, U_l, reduction="none") * torch.tensor([2.0, 0.0, -1.0], dtype=torch.float64)).sum().backward()
    y = logits.clone().requires_grad_(True)
    rnnt_loss(y[:1], targets[:1], T_l[:1], U_l[:1], reduction="sum").backward()
    assert torch.allclose(x.grad[0], 2 * y.grad[0]) and torch.all(x.grad[1] == 0)


def test_large_float32_finite():
    g = torch.Generator().manual_seed(0)
    logits = (torch.randn(2, 50, 21, 30, generator=g) * 5).requires_grad_(True)
    targets = torch.randint(1, 30, (2, 20), generator=g)
    T_l, U_l = torch.tensor([50, 30]), torch.tensor([20, 7])
    losses = [rnnt_loss(logits, targets, T_l, U_l, reduction="none", variant=v) for v in VARIANTS]
    assert torch.allclose(losses[0], losses[1], rtol=1e-5)
    losses[0].sum().backward()
    assert torch.isfinite(logits.grad).all()


@pytest.mark.parametrize(
    "mutate, match",
    [
        (lambda a: a.update(targets=a["targets"][:, :2]), "targets have U"),
        (lambda a: a.update(target_lengths=torch.tensor([4, 1, 0])), "target_lengths"),
        (lambda a: a.update(logit_lengths=torch.tensor([5, 2, 1])), "logit_lengths"),
        (lambda a: a.update(logit_lengths=torch.tensor([0, 2, 1])), "logit_lengths"),
        (lambda a: a.update(logit_lengths=torch.tensor([4, 2])), "logit_lengths"),
        (lambda a: a.update(blank=5), "blank"),
        (lambda a: a.update(blank=-1), "blank"),
        (lambda a: a["logits"].__setitem__((0, 0, 0, 0), float("nan")), "NaN or inf"),
        (lambda a: a["logits"].__setitem__((2, 3, 3, 1), float("inf")), "NaN or inf"),
        (lambda a: a["targets"].__setitem__((0, 0), 9), "must lie in"),
        (lambda a: a["targets"].__setitem__((0, 1), 0), "blank symbol"),
        (lambda a: a.update(logits=a["logits"][0]), "logits must be"),
        (lambda a: a.update(targets=a["targets"].double()), "integer"),
        (lambda a: a.update(reduction="avg"), "reduction"),
        (lambda a: a.update(variant="cuda"), "variant"),
    ],
)
def test_errors(mutate, match):
    logits, targets, T_l, U_l = case(7)
    args = dict(logits=logits, targets=targets, logit_lengths=T_l, target_lengths=U_l)
    mutate(args)
    with pytest.raises(ValueError, match=match):
        rnnt_loss(**args)


def test_from_logprobs_shape_errors():
    b = torch.zeros(2, 3, 4)
    with pytest.raises(ValueError, match="label log-probs"):
        rnnt_loss_from_logprobs(b, torch.zeros(2, 3, 2), torch.tensor([3, 3]), torch.tensor([1, 1]))
    with pytest.raises(ValueError, match="NaN or inf"):
        rnnt_loss_from_logprobs(b, torch.full((2, 3, 3), float("-inf")), torch.tensor([3, 3]), torch.tensor([1, 1]))
