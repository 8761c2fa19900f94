"""SED CRNN (F, F1, F2, Ft, D with gradient reversal) and the tri-training/adversarial losses."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from streamkit.core.errors import ModelError
from streamkit.models.sed_crnn import (
    HEADS,
    SedConfig,
    SedModel,
    events_to_frames,
    frame_span,
    grad_reverse,
    load_model,
    log_mel,
    n_input_frames,
    receptive_field,
    save_model,
)
from streamkit.models.sed_losses import (
    METHODS,
    SedTargets,
    classification_loss,
    heads_for,
    orthogonality_penalty,
    parse_method,
    pseudo_label_batch,
    pseudo_labels,
    sed_loss,
    stages,
    with_pseudo_labels,
)

torch.set_num_threads(1)

K = 4


def tiny_cfg(**kw) -> SedConfig:
    base = dict(
        n_mels=16,
        n_classes=K,
        classes=("a", "b", "c", "d"),
        channels=(4, 8, 8),
        pool_time=(2, 2, 1),
        pool_freq=(2, 2, 4),
        rnn_hidden=8,
        rnn_layers=1,
        dropout=0.0,
        domain_hidden=8,
    )
    base.update(kw)
    return SedConfig(**base)


def tiny_model(seed: int = 0, **kw) -> SedModel:
    torch.manual_seed(seed)
    return SedModel(tiny_cfg(**kw))


def tiny_targets(B: int, T: int, seed: int = 1) -> SedTargets:
    g = torch.Generator().manual_seed(seed)
    frame = (torch.rand(B, T, K, generator=g) > 0.6).float()
    strong = torch.tensor([1.0, 1.0, 0.0, 0.0])[:B]  # clips 0, 1 synthetic strong; 2 weak; 3 unlabelled
    labelled = torch.tensor([1.0, 1.0, 1.0, 0.0])[:B]
    return SedTargets(
        frame=frame,
        frame_mask=strong,
        clip=frame.amax(dim=1),
        clip_mask=labelled,
        domain=1.0 - strong,
    )


# ------------------------------------------------------------------------------------------------
# shapes, front end, split, receptive field
# ------------------------------------------------------------------------------------------------


def test_default_config_shapes_on_a_10s_clip() -> None:
    cfg = SedConfig()
    assert cfg.n_mels == 128 and cfg.n_classes == 10 and cfg.time_pool == 4 and cfg.freq_out == 1
    assert n_input_frames(160000, cfg) == 618
    m = log_mel(np.random.default_rng(0).standard_normal(160000).astype(np.float32), cfg)
    assert m.shape == (618, 128) and torch.isfinite(m).all()
    assert receptive_field(cfg) == (23, 23)
    s, e = frame_span(np.arange(3), cfg)
    assert np.allclose(e - s, 0.064) and np.allclose((s + e) / 2, (1024 * np.arange(3) + 1408) / 16000)


@pytest.mark.parametrize("domain", [None, "whole", "time"])
def test_shapes_per_head_and_domain_mode(domain: str | None) -> None:
    model = tiny_model()
    x = torch.randn(3, 22, 16)
    out = model(x, heads=HEADS, domain=domain)
    T = 22 // 4
    assert out["features"].shape == (3, T, 16)
    for h in HEADS:
        assert out[h]["frame"].shape == (3, T, K) and out[h]["frame_logits"].shape == (3, T, K)
        assert out[h]["clip"].shape == (3, K)
        assert ((out[h]["clip"] >= 0) & (out[h]["clip"] <= 1)).all()
        # attention pooling: the clip probability lies between the frame minimum and maximum
        fr = out[h]["frame"]
        assert (out[h]["clip"] <= fr.amax(1) + 1e-6).all() and (out[h]["clip"] >= fr.amin(1) - 1e-6).all()
    if domain is None:
        assert "domain" not in out
    else:
        assert out["domain"].shape == ((3,) if domain == "whole" else (3, T))


def test_frontend_backend_equals_forward() -> None:
    model = tiny_model().eval()
    x = torch.randn(2, 24, 16)
    full = model(x, heads=HEADS, domain="time")
    split = model.backend(model.frontend(x), heads=HEADS, domain="time")
    for h in HEADS:
        for k in ("frame", "clip"):
            assert torch.equal(full[h][k], split[h][k])
    assert torch.equal(full["domain"], split["domain"])


def test_receptive_field_matches_the_cnn() -> None:
    model = tiny_model().eval()
    cfg = model.cfg
    before, after = receptive_field(cfg)
    P = cfg.time_pool
    x = torch.randn(1, 80, 16)
    base = model.frontend(x)
    j = 41
    x2 = x.clone()
    x2[0, j] += 3.0
    changed = torch.nonzero((model.frontend(x2) - base).abs().sum(-1)[0] > 0).flatten().tolist()
    expect = [k for k in range(base.shape[1]) if P * k - before <= j <= P * k + P - 1 + after]
    assert changed == expect


def test_events_to_frames_alignment() -> None:
    cfg = tiny_cfg()
    y = events_to_frames([("b", 0.1, 0.3)], 10, cfg)
    s, e = frame_span(np.arange(10), cfg)
    c = (s + e) / 2
    assert torch.equal(y[:, 1], torch.from_numpy(((c >= 0.1) & (c < 0.3)).astype(np.float32)))
    assert y[:, [0, 2, 3]].sum() == 0
    with pytest.raises(ValueError):
        events_to_frames([("zz", 0.0, 1.0)], 10, cfg)


# ------------------------------------------------------------------------------------------------
# gradient reversal and D's gradient path
# ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("scale", [1.0, 0.3])
def test_gradient_reversal_flips_and_scales(scale: float) -> None:
    x = torch.randn(5, 3, dtype=torch.float64, requires_grad=True)
    y = grad_reverse(x, scale)
    assert torch.equal(y, x)
    g = torch.randn(5, 3, dtype=torch.float64)
    (gx,) = torch.autograd.grad(y, x, g)
    assert torch.allclose(gx, -scale * g)
    # the layer's Jacobian is -scale * I: compare with the numerical Jacobian of -scale * x
    jac = torch.autograd.functional.jacobian(lambda t: grad_reverse(t, scale), x)
    assert torch.allclose(jac, -scale * torch.autograd.functional.jacobian(lambda t: t, x))


@pytest.mark.parametrize("mode", ["whole", "time"])
def test_domain_gradient_reaches_F_reversed_and_spares_the_heads(mode: str) -> None:
    from streamkit.models.sed_losses import domain_loss

    alpha = 0.5
    model = tiny_model(grl_scale=alpha)
    x = torch.randn(4, 20, 16)
    dom = torch.tensor([0.0, 0.0, 1.0, 1.0])
    out = model(x, heads=HEADS, domain=mode)
    domain_loss(out["domain"], dom).backward()
    g_rev = {n: p.grad.clone() for n, p in model.F.named_parameters() if p.grad is not None}
    g_d_rev = {n: p.grad.clone() for n, p in model.D.named_parameters()}
    for head in (model.f1, model.f2, model.ft):
        assert all(p.grad is None or not p.grad.any() for p in head.parameters())
    # the same loss without reversal
    model.zero_grad()
    h = model.F(x)
    domain_loss(model.D(h, mode, reverse=False), dom).backward()
    assert g_rev.keys() == {n for n, p in model.F.named_parameters() if p.grad is not None} and len(g_rev) > 4
    for n, p in model.F.named_parameters():
        assert torch.allclose(g_rev[n], -alpha * p.grad, atol=1e-7, rtol=1e-5), n
    for n, p in model.D.named_parameters():
        assert torch.allclose(g_d_rev[n], p.grad), n  # D itself minimises L_d (eq. 7)


# ------------------------------------------------------------------------------------------------
# tri-training pieces
# ------------------------------------------------------------------------------------------------


def test_pseudo_label_selection() -> None:
    p1 = torch.tensor([0.9, 0.9, 0.2, 0.2, 0.6, 0.5, 0.51, 0.49])
    p2 = torch.tensor([0.8, 0.3, 0.1, 0.7, 0.55, 0.9, 0.51, 0.49])
    y, m = pseudo_labels(p1, p2)
    assert m.tolist() == [1, 0, 1, 0, 1, 0, 1, 1]  # 0.5 exactly is not confident
    assert (y * m).tolist() == [1, 0, 0, 0, 1, 0, 1, 0]
    y, m = pseudo_labels(p1, p2, threshold=0.75)
    assert m.tolist() == [1, 0, 1, 0, 0, 0, 0, 0] and y.tolist()[:3] == [1, 0, 0]
    with pytest.raises(ValueError):
        pseudo_labels(p1, p2, threshold=0.3)  # the default negative (0.7) is above it


def test_pseudo_label_asymmetric_thresholds() -> None:
    p1 = torch.tensor([0.9, 0.35, 0.25, 0.15, 0.05, 0.35, 0.05])
    p2 = torch.tensor([0.8, 0.40, 0.35, 0.05, 0.02, 0.05, 0.35])
    y, m = pseudo_labels(p1, p2, threshold=0.3, negative=0.1)
    assert m.tolist() == [1, 1, 0, 0, 1, 0, 0]  # unsure frames (both < 0.3 but not both < 0.1) stay unlabelled
    assert (y * m).tolist() == [1, 1, 0, 0, 0, 0, 0]
    y, m = pseudo_labels(p1, p2, threshold=0.3, negative=0.3)
    assert m.tolist() == [1, 1, 0, 1, 1, 0, 0] and y.tolist() == [1, 1, 0, 0, 0, 0, 0]
    y5, m5 = pseudo_labels(p1, p2)
    y5b, m5b = pseudo_labels(p1, p2, threshold=0.5, negative=0.5)
    assert torch.equal(y5, y5b) and torch.equal(m5, m5b)
    for bad in ({"threshold": 0.3, "negative": 0.4}, {"threshold": 0.5, "negative": 0.0}, {"threshold": 1.0, "negative": 0.5}):
        with pytest.raises(ValueError):
            pseudo_labels(p1, p2, **bad)


def test_pseudo_label_batch_and_merge() -> None:
    model = tiny_model()
    model.train()
    x = torch.randn(4, 20, 16)
    tags = torch.tensor([[1.0, 0, 0, 0]] * 4)
    ps = pseudo_label_batch(model, x)
    assert model.training  # mode restored
    with torch.no_grad():
        model.eval()
        o = model(x, heads=("f1", "f2"))
    y, m = pseudo_labels(o["f1"]["frame"], o["f2"]["frame"])
    assert torch.equal(ps["frame"], y) and torch.equal(ps["frame_mask"], m)
    pw = pseudo_label_batch(model, x, clip_tags=tags)
    assert torch.equal(pw["clip"], tags) and pw["clip_mask"].all()
    assert (pw["frame_mask"][..., 1:] == 1).all() and (pw["frame"][..., 1:] == 0).all()
    assert torch.equal(pw["frame_mask"][..., 0], m[..., 0])
    t = tiny_targets(4, 5)
    merged = with_pseudo_labels(t, ps)
    assert torch.equal(merged.frame[:2], t.frame[:2]) and (merged.frame_mask[:2] == 1).all()  # real labels kept
    assert torch.equal(merged.frame_mask[2:], ps["frame_mask"][2:])
    assert torch.equal(merged.frame[2:], ps["frame"][2:] * ps["frame_mask"][2:])
    assert torch.equal(merged.clip[:3], t.clip[:3]) and torch.equal(merged.clip_mask[3], ps["clip_mask"][3])


def test_orthogonality_penalty_values_and_gradients() -> None:
    q, _ = torch.linalg.qr(torch.randn(12, 12, dtype=torch.float64))
    w1, w2 = 3.0 * q[:4], 0.5 * q[4:9]  # rows of F1 orthogonal to rows of F2 (any norms)
    assert orthogonality_penalty(w1, w2).abs() < 1e-12
    assert orthogonality_penalty(w1, w2, "sum").abs() < 1e-12
    a = torch.randn(4, 12, dtype=torch.float64)
    b = torch.randn(5, 12, dtype=torch.float64)
    assert orthogonality_penalty(a, b) > 0
    assert orthogonality_penalty(a, 2.0 * a) > orthogonality_penalty(a, b) > 0  # shared directions cost more
    # identical single units: |cos| = 1
    assert torch.isclose(orthogonality_penalty(a[:1], 7.0 * a[:1]), torch.tensor(1.0, dtype=torch.float64))
    manual = torch.stack([torch.stack([(u @ v).abs() / (u.norm() * v.norm()) for v in b]) for u in a])
    assert torch.allclose(orthogonality_penalty(a, b, "sum"), manual.sum())
    a.requires_grad_(True)
    b.requires_grad_(True)
    assert torch.autograd.gradcheck(lambda x, y: orthogonality_penalty(x, y), (a, b))
    assert torch.autograd.gradcheck(lambda x, y: orthogonality_penalty(x, y, "sum"), (a, b))


def test_method_table() -> None:
    assert parse_method("baseline") == (None, False)
    assert parse_method("adv-time+tri") == ("time", True)
    assert parse_method("adv-whole") == ("whole", False)
    assert stages("tri") == ("labelers", "final") and stages("adv-time") == ("main",)
    assert heads_for("tri", "labelers") == ("f1", "f2", "ft") and heads_for("adv-whole+tri", "final") == ("ft",)
    with pytest.raises(ValueError):
        parse_method("mean-teacher")
    with pytest.raises(ValueError):
        heads_for("baseline", "final")
    assert heads_for("tri", "final", relabel=True) == ("f1", "f2", "ft") and heads_for("tri", "labelers", relabel=True) == ("f1", "f2", "ft")


def test_final_stage_with_labeler_targets() -> None:
    """labeler_targets: F1/F2 learn from the labelled targets only, Ft from the pseudo-labelled ones, plus eq. 8."""
    model = tiny_model(head_hidden=6)
    x = torch.randn(4, 20, 16)
    t_lab = tiny_targets(4, 5)
    t = with_pseudo_labels(t_lab, pseudo_label_batch(model, x))
    out = model(x, heads=heads_for("tri", "final", relabel=True))
    parts = sed_loss("tri", out, t, model=model, stage="final", labeler_targets=t_lab)
    assert set(parts) == {"loss", "y_f1", "y_f2", "y_ft", "orth"}
    assert torch.allclose(parts["y_f1"], classification_loss(out["f1"], t_lab)) and torch.allclose(parts["y_ft"], classification_loss(out["ft"], t))
    assert torch.allclose(parts["loss"], parts["y_f1"] + parts["y_f2"] + parts["y_ft"] + parts["orth"])
    parts["loss"].backward()
    assert all(any(p.grad is not None and p.grad.any() for p in getattr(model, h).parameters()) for h in HEADS)
    with pytest.raises(ValueError, match="only apply to stage 'final'"):
        sed_loss("tri", out, t, model=model, stage="labelers", labeler_targets=t_lab)
    with pytest.raises(ValueError, match="needs model="):
        sed_loss("tri", out, t, stage="final", labeler_targets=t_lab)
    with pytest.raises(ValueError, match="lacks head 'f1'"):
        sed_loss("tri", model(x, heads=("ft",)), t, model=model, stage="final", labeler_targets=t_lab)


def test_detached_labelers_leave_F_to_Ft_and_D() -> None:
    """detach_labelers: same outputs; F1/F2 losses and eq. 8 reach the labelers only; F's gradient is Ft's + D's."""
    model = tiny_model(head_hidden=6)
    x = torch.randn(4, 20, 16)
    t = tiny_targets(4, 5)
    grads = {}
    for det in (False, True):
        model.zero_grad()
        out = model(x, heads=HEADS, domain="time", detach_labelers=det)
        parts = sed_loss("adv-time+tri", out, t, model=model, stage="labelers")
        (parts["y_f1"] + parts["y_f2"] + parts["orth"]).backward(retain_graph=True)
        labeler_to_F = [p.grad is not None and bool(p.grad.any()) for p in model.F.parameters()]
        assert any(p.grad is not None and p.grad.any() for p in model.f1.parameters())
        assert any(labeler_to_F) != det, det  # only without the stop-gradient do F1/F2 shape F
        model.zero_grad()
        (parts["y_ft"] + parts["domain"]).backward()
        grads[det] = {n: p.grad.clone() for n, p in model.F.named_parameters()}
        assert all(p.grad is None or not p.grad.any() for p in model.f1.parameters())
    for n in grads[False]:
        assert torch.equal(grads[False][n], grads[True][n]), n
    a, b = model(x, heads=HEADS), model(x, heads=HEADS, detach_labelers=True)
    assert all(torch.equal(a[h]["frame"], b[h]["frame"]) for h in HEADS)


@pytest.mark.parametrize("method", METHODS)
def test_each_method_runs_forward_backward(method: str) -> None:
    model = tiny_model(head_hidden=6)
    adv, tri = parse_method(method)
    x = torch.randn(4, 20, 16)
    t = tiny_targets(4, 5)
    for stage in stages(method):
        if stage == "final":
            t = with_pseudo_labels(t, pseudo_label_batch(model, x))
        model.zero_grad()
        out = model(x, heads=heads_for(method, stage), domain=adv)
        parts = sed_loss(method, out, t, model=model, stage=stage)
        assert torch.isfinite(parts["loss"])
        parts["loss"].backward()
        assert ("domain" in parts) == (adv is not None)
        assert ("orth" in parts) == (stage == "labelers")
        trained = {"ft"} | ({"f1", "f2"} if stage == "labelers" else set())
        for name in HEADS:
            grads = [p.grad for p in getattr(model, name).parameters()]
            assert any(g is not None and g.any() for g in grads) == (name in trained), (stage, name)
        assert any(p.grad is not None and p.grad.any() for p in model.D.parameters()) == (adv is not None)
        assert all(p.grad is not None for p in model.F.parameters() if p.requires_grad)
    with pytest.raises(ValueError):
        sed_loss("adv-time", model(x), tiny_targets(4, 5))  # no domain logits


def test_adam_lowers_the_baseline_loss() -> None:
    model = tiny_model(seed=3)
    g = torch.Generator().manual_seed(5)
    x = torch.randn(4, 20, 16, generator=g)
    t = tiny_targets(4, 5, seed=7)
    opt = torch.optim.Adam(model.parameters(), lr=0.01)

    def loss() -> torch.Tensor:
        return sed_loss("baseline", model(x, heads=("ft",)), t)["loss"]

    model.eval()  # batch norm in eval mode: a deterministic objective to compare
    with torch.no_grad():
        before = float(loss())
    model.train()
    for _ in range(30):
        opt.zero_grad()
        loss().backward()
        opt.step()
    model.eval()
    with torch.no_grad():
        after = float(loss())
    assert after < 0.8 * before, (before, after)
    print(f"baseline loss {before:.4f} -> {after:.4f}")


# ------------------------------------------------------------------------------------------------
# weight files
# ------------------------------------------------------------------------------------------------


def test_save_load_round_trip_and_errors(tmp_path) -> None:
    model = tiny_model().eval()
    model.F.set_normalisation(torch.linspace(-1, 1, 16), torch.full((16,), 2.0))
    p = save_model(tmp_path / "sed.pt", model, meta={"method": "tri"})
    loaded, meta = load_model(p)
    assert meta == {"method": "tri"} and loaded.cfg == model.cfg and not loaded.training
    x = torch.randn(2, 20, 16)
    a, b = model(x, heads=HEADS, domain="time"), loaded(x, heads=HEADS, domain="time")
    for h in HEADS:
        assert torch.equal(a[h]["frame"], b[h]["frame"]) and torch.equal(a[h]["clip"], b[h]["clip"])
    assert torch.equal(a["domain"], b["domain"])
    load_model(p, expect={"n_mels": 16})
    with pytest.raises(ModelError, match="does not match"):
        load_model(p, expect={"rnn_hidden": 9})
    with pytest.raises(ModelError, match="not found"):
        load_model(tmp_path / "none.pt")
    bad = tmp_path / "bad.pt"
    bad.write_bytes(p.read_bytes()[:200])
    with pytest.raises(ModelError, match="corrupt"):
        load_model(bad)
    other = tmp_path / "other.pt"
    torch.save({"format": "something-else/1"}, other)
    with pytest.raises(ModelError, match="not a SED CRNN weight file"):
        load_model(other)
    wrong = tmp_path / "wrong.pt"
    obj = torch.load(p, weights_only=True)
    obj["config"]["rnn_hidden"] = 9
    torch.save(obj, wrong)
    with pytest.raises(ModelError, match="weights do not match"):
        load_model(wrong)


def test_files_of_removed_experiments(tmp_path) -> None:
    """Config fields of removed training experiments: a file with ``fast_dropout`` (training masks only) or with
    the experiments off loads as the plain model; one trained with ``domain_bn`` or its own ``labeler_hidden``
    width holds parameters the model lacks and is refused with a clear error."""
    cfg = tiny_cfg(dropout=0.3, head_hidden=5)
    torch.manual_seed(0)
    p = save_model(tmp_path / "m.pt", SedModel(cfg))
    obj = torch.load(p, weights_only=True)
    for extra in ({"fast_dropout": True}, {"fast_dropout": False, "domain_bn": False, "labeler_hidden": None}, {"labeler_hidden": 5}):
        old = tmp_path / "old.pt"
        torch.save({**obj, "config": {**obj["config"], **extra}}, old)
        model, _ = load_model(old)
        assert model.cfg == cfg, extra
    for extra, name in (({"domain_bn": True}, "domain_bn"), ({"labeler_hidden": 12}, "labeler_hidden")):
        torch.save({**obj, "config": {**obj["config"], **extra}}, tmp_path / "exp.pt")
        with pytest.raises(ModelError, match=f"trained with {name}, an experiment removed"):
            load_model(tmp_path / "exp.pt")
