"""RNN-T model family: every variant trains, LID gradient isolation, streaming encoder, save/load."""

from __future__ import annotations

import pytest
import torch

from streamkit.core.errors import ModelError
from streamkit.models.rnnt import VARIANTS, RnntConfig, RnntModel, load_model, n_params, save_model

torch.set_num_threads(1)


def tiny_cfg(variant: str, **kw) -> RnntConfig:
    base = dict(
        variant=variant,
        languages=("en", "hi", "ta"),
        vocab_sizes=(6, 5, 7),
        feat_dim=12,
        enc_layers=2,
        enc_hidden=16,
        pred_layers=1,
        pred_hidden=12,
        embed_dim=8,
        joint_dim=16,
    )
    base.update(kw)
    return RnntConfig(**base)


def tiny_batch(cfg: RnntConfig, lang, seed: int = 0, B: int = 3, T: int = 9, U: int = 4):
    g = torch.Generator().manual_seed(seed)
    feats = torch.randn(B, T, cfg.feat_dim, generator=g)
    feat_lens = torch.tensor([T, T - 2, 5][:B])
    lv = torch.as_tensor(lang).expand(B) if torch.as_tensor(lang).dim() == 0 else torch.as_tensor(lang)
    targets = torch.stack([torch.randint(1, cfg.vocab_sizes[int(l)], (U,), generator=g) for l in lv])  # noqa: E741
    target_lens = torch.tensor([U, 2, 0][:B])
    targets[1, 2:] = 99  # padding may hold anything
    return feats, feat_lens, targets, target_lens


def grads_of(loss: torch.Tensor, model: RnntModel) -> dict[str, torch.Tensor | None]:
    names, params = zip(*[(n, p) for n, p in model.named_parameters()])
    gs = torch.autograd.grad(loss, params, retain_graph=True, allow_unused=True)
    return {n: (None if g is None or not bool(g.abs().sum() > 0) else g) for n, g in zip(names, gs)}


@pytest.mark.parametrize("variant", VARIANTS)
def test_every_variant_forward_backward(variant):
    torch.manual_seed(0)
    cfg = tiny_cfg(variant)
    model = RnntModel(cfg)
    for lang in (1, torch.tensor([0, 2, 2])):  # one language per batch, and mixed
        out = model(*tiny_batch(cfg, lang), lang=lang)
        assert set(out) == {"loss", "rnnt_loss", "lid_loss"}
        assert torch.isfinite(out["loss"]) and out["rnnt_loss"] > 0
        assert (out["lid_loss"] > 0) == (variant == "lid")
        model.zero_grad()
        out["loss"].backward()
        assert all(torch.isfinite(p.grad).all() for p in model.parameters() if p.grad is not None)
        assert model.encoder.weight_ih_l0.grad.abs().sum() > 0


def test_variant_structure():
    sizes = {v: n_params(RnntModel(tiny_cfg(v))) for v in VARIANTS}
    assert sizes["lsp"] > sizes["multisoftmax"] and sizes["lid"] > sizes["multisoftmax"]
    assert sizes["onehot"] > sizes["vanilla"]
    m = RnntModel(tiny_cfg("vanilla"))
    assert m.joints[0].out.out_features == 1 + 5 + 4 + 6
    m = RnntModel(tiny_cfg("multisoftmax"))
    assert [j.out.out_features for j in m.joints] == [6, 5, 7] and len(m.predictors) == 1
    assert len(RnntModel(tiny_cfg("lsp")).predictors) == 3
    # default (paper-shaped, CPU-sized) model
    assert 1e6 < n_params(RnntModel(RnntConfig())) < 4e6


def test_union_mapping_round_trip():
    m = RnntModel(tiny_cfg("vanilla"))
    tok = torch.tensor([[0, 1, 5], [1, 4, 0], [6, 1, 3]])
    u = m.to_union(tok, torch.tensor([0, 1, 2]))
    assert u.tolist() == [[0, 1, 5], [6, 9, 0], [15, 10, 12]]
    lang, local = m.from_union(u)
    assert local.tolist() == tok.tolist()
    assert lang.tolist() == [[-1, 0, 0], [1, 1, -1], [2, 2, 2]]


@pytest.mark.parametrize("lid_hidden", [0, 5])
@pytest.mark.parametrize("detach", [False, True])
def test_lid_gradient_isolation(detach, lid_hidden):
    torch.manual_seed(1)
    cfg = tiny_cfg("lid", lid_detach_encoder=detach, lid_hidden=lid_hidden)
    model = RnntModel(cfg)
    out = model(*tiny_batch(cfg, 2), lang=2)
    g_lid = grads_of(out["lid_loss"], model)
    g_rnnt = grads_of(out["rnnt_loss"], model)
    lid_params = {n for n in g_lid if n.startswith(("lid_head.", "lid_rnn."))}
    assert any(n.startswith("lid_rnn.") for n in lid_params) == bool(lid_hidden)
    enc_params = {n for n in g_lid if n.startswith("encoder.")}
    assert lid_params and enc_params
    # CE reaches the LID head (and the encoder unless detached), nothing else
    assert all(g_lid[n] is not None for n in lid_params)
    assert all((g_lid[n] is None) == detach for n in enc_params)
    assert all(g_lid[n] is None for n in g_lid if n not in lid_params | enc_params)
    # the RNN-T loss never reaches the LID head; it reaches encoder, shared predictor and only language 2's joint/embedding
    assert all(g_rnnt[n] is None for n in lid_params)
    assert all(g_rnnt[n] is not None for n in enc_params)
    assert g_rnnt["predictors.0.weight_ih_l0"] is not None and g_rnnt["joints.2.out.weight"] is not None
    assert g_rnnt["joints.0.out.weight"] is None and g_rnnt["embed.1.weight"] is None
    # the total loss's LID-head gradient is exactly the CE one, weighted
    g_tot = grads_of(out["loss"], model)
    assert torch.allclose(g_tot["lid_head.weight"], cfg.lid_weight * g_lid["lid_head.weight"])


@pytest.mark.parametrize("feat_norm", ["global", "causal"])
@pytest.mark.parametrize("variant", ["onehot", "lid"])
def test_encoder_step_over_chunks_equals_full(variant, feat_norm):
    torch.manual_seed(2)
    cfg = tiny_cfg(variant, feat_norm=feat_norm)
    model = RnntModel(cfg).eval()
    feats = torch.randn(2, 23, cfg.feat_dim) * 3 + torch.randn(2, 1, cfg.feat_dim)
    lang = torch.tensor([0, 2])
    with torch.no_grad():
        full = model.encode(feats, lang)
        for chunk in (1, 4, 10):
            st, outs = None, []
            for i in range(0, 23, chunk):
                o, st = model.encoder_step(feats[:, i : i + chunk], st, lang)
                outs.append(o)
            assert torch.allclose(torch.cat(outs, 1), full, atol=1e-6)
        if variant == "lid":
            assert model.lid_logits(full).shape == (2, 23, 3)


@pytest.mark.parametrize("variant", VARIANTS)
def test_step_api_matches_training_graph(variant):
    """predictor_step token by token + joint reproduce the logits the loss sees."""
    torch.manual_seed(3)
    cfg = tiny_cfg(variant)
    model = RnntModel(cfg).eval()
    lang = torch.tensor([1, 2])
    toks = torch.tensor([[3, 1, 2], [6, 6, 1]])
    with torch.no_grad():
        if not cfg.multi:
            toks = model.to_union(toks, lang)
        seq = torch.cat([torch.zeros(2, 1, dtype=torch.long), toks], 1)
        full, _ = model._predict_rows(seq, None, lang)
        st, outs = None, []
        for u in range(seq.shape[1]):
            o, st = model.predictor_step(seq[:, u], st, lang)
            outs.append(o)
        assert torch.allclose(torch.stack(outs, 1), full, atol=1e-6)
        enc = model.encode(torch.randn(2, 4, cfg.feat_dim), lang)
        lg = model.joint(enc[1, :, None], full[1, None], 2)
        assert lg.shape == (4, 4, cfg.output_size(2))


def test_adam_lowers_loss():
    torch.manual_seed(4)
    cfg = tiny_cfg("lid")
    model = RnntModel(cfg)
    batch = tiny_batch(cfg, 0, seed=5)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    first = None
    for _ in range(40):
        out = model(*batch, lang=0)
        first = first if first is not None else {k: float(v.detach()) for k, v in out.items()}
        opt.zero_grad()
        out["loss"].backward()
        opt.step()
    with torch.no_grad():
        last = {k: float(v) for k, v in model(*batch, lang=0).items()}
    assert last["rnnt_loss"] < 0.5 * first["rnnt_loss"], (first, last)
    assert last["lid_loss"] < 0.1 * first["lid_loss"], (first, last)


def test_input_errors():
    cfg = tiny_cfg("multisoftmax")
    model = RnntModel(cfg)
    feats, fl, tg, tl = tiny_batch(cfg, 0)
    with pytest.raises(ValueError, match="language"):
        model(feats, fl, tg, tl)
    with pytest.raises(ValueError, match="lang must lie"):
        model(feats, fl, tg, tl, lang=3)
    bad = tg.clone()
    bad[0, 0] = 6  # vocab of language 0 is 6: symbols 1..5
    with pytest.raises(ValueError, match="language-local"):
        model(feats, fl, bad, tl, lang=0)
    with pytest.raises(ValueError, match="feat_lens"):
        model(feats, torch.tensor([10, 2, 2]), tg, tl, lang=0)
    with pytest.raises(ValueError, match="feats must be"):
        model(feats[..., :5], fl, tg, tl, lang=0)
    with pytest.raises(ValueError, match="variant"):
        tiny_cfg("bilingual")
    with pytest.raises(ValueError, match="vocabulary"):
        tiny_cfg("lid", vocab_sizes=(6, 5))


def test_save_load_round_trip_and_errors(tmp_path):
    torch.manual_seed(5)
    cfg = tiny_cfg("lid")
    model = RnntModel(cfg)
    model.set_feature_stats(torch.randn(cfg.feat_dim), torch.rand(cfg.feat_dim) + 0.5)
    p = save_model(tmp_path / "m.pt", model, meta={"steps": 3})
    loaded, meta = load_model(p, expect={"variant": "lid"})
    assert meta == {"steps": 3} and loaded.cfg == cfg and not loaded.training
    batch = tiny_batch(cfg, 1)
    with torch.no_grad():
        a, b = model.eval()(*batch, lang=1), loaded(*batch, lang=1)
    assert torch.equal(a["loss"], b["loss"])
    with pytest.raises(ModelError, match="does not match"):
        load_model(p, expect={"enc_hidden": 32})
    with pytest.raises(ModelError, match="not found"):
        load_model(tmp_path / "missing.pt")
    corrupt = tmp_path / "corrupt.pt"
    corrupt.write_bytes(p.read_bytes()[:200])
    with pytest.raises(ModelError, match="corrupt"):
        load_model(corrupt)
    foreign = tmp_path / "foreign.pt"
    torch.save({"format": "other", "state_dict": {}}, foreign)
    with pytest.raises(ModelError, match="not an RNN-T"):
        load_model(foreign)
    # a config that does not fit the stored weights
    obj = torch.load(p, weights_only=True)
    obj["config"]["joint_dim"] = 8
    mism = tmp_path / "mismatch.pt"
    torch.save(obj, mism)
    with pytest.raises(ModelError, match="do not match their config"):
        load_model(mism)
    obj["config"]["variant"] = "nope"
    torch.save(obj, mism)
    with pytest.raises(ModelError, match="invalid model config"):
        load_model(mism)


def test_causal_feat_norm_is_causal_and_removes_utterance_offsets():
    """Running per-utterance normalisation: frames depend only on the past (padding is harmless),
    and a per-utterance offset and scale of the features are removed as frames accumulate."""
    torch.manual_seed(5)
    cfg = tiny_cfg("multisoftmax", feat_norm="causal", norm_prior_frames=2.0)
    model = RnntModel(cfg).eval()
    feats = torch.randn(1, 400, cfg.feat_dim)
    with torch.no_grad():
        x, _ = model._enc_input(feats, 0)
        x_pad, _ = model._enc_input(torch.cat([feats, 100 * torch.ones(1, 7, cfg.feat_dim)], 1), 0)
        assert torch.equal(x_pad[:, :400], x)
        y, _ = model._enc_input(feats * 0.5 + 5.0, 0)
    assert torch.allclose(y[:, 300:], x[:, 300:], atol=0.1)
    assert abs(float(x[:, 50:].mean())) < 0.1 and abs(float(x[:, 50:].std()) - 1) < 0.1
    with pytest.raises(ValueError, match="feat_norm"):
        tiny_cfg("lid", feat_norm="cmvn")


def test_recurrent_lid_head_steps_equal_the_sequence():
    """lid_hidden > 0: lid_step over chunks from a None state equals lid_logits over the whole sequence."""
    torch.manual_seed(4)
    cfg = tiny_cfg("lid", lid_hidden=6)
    model = RnntModel(cfg).eval()
    with torch.no_grad():
        enc = model.encode(torch.randn(2, 17, cfg.feat_dim), 0)
        full = model.lid_logits(enc)
        assert full.shape == (2, 17, 3)
        for chunk in (1, 5):
            st, outs = None, []
            for i in range(0, 17, chunk):
                o, st = model.lid_step(enc[:, i : i + chunk], st)
                outs.append(o)
            assert st is not None and st.shape == (1, 2, 6)
            assert torch.allclose(torch.cat(outs, 1), full, atol=1e-6)
        # the linear head has no state and takes any leading shape
        lin = RnntModel(tiny_cfg("lid")).eval()
        o, st = lin.lid_step(enc[0, 3], None)
        assert st is None and o.shape == (3,)
    with pytest.raises(ValueError, match="recurrent LID head"):
        model.lid_logits(enc[0])
    with pytest.raises(ValueError, match="lid_hidden"):
        tiny_cfg("lid", lid_hidden=-1)
    # weight files from before the field load with the linear head
    d = cfg.to_dict()
    del d["lid_hidden"]
    assert RnntConfig.from_dict(d).lid_hidden == 0
