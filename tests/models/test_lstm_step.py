"""The packed one-step LSTM cell of the streaming decoders against ``nn.LSTM``, and where the model uses it."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from streamkit.models.lstm_step import lstm_step
from streamkit.models.rnnt import STEP_FRAMES, RnntConfig, RnntModel

torch.set_num_threads(1)


def lstm(inp=7, hidden=5, layers=3, dtype=torch.float64, seed=0, **kw) -> nn.LSTM:
    torch.manual_seed(seed)
    return nn.LSTM(inp, hidden, num_layers=layers, batch_first=True, **kw).to(dtype).eval()


@pytest.mark.parametrize("layers", [1, 3])
@pytest.mark.parametrize("B", [1, 4])
def test_equals_nn_lstm_over_steps(layers, B):
    net = lstm(layers=layers)
    g = torch.Generator().manual_seed(1)
    x = torch.randn(B, 6, 7, generator=g, dtype=torch.float64)
    h0 = torch.randn(layers, B, 5, generator=g, dtype=torch.float64)
    c0 = torch.randn(layers, B, 5, generator=g, dtype=torch.float64)
    with torch.no_grad():
        ref, (hr, cr) = net(x, (h0, c0))
        st, outs = (h0, c0), []
        for t in range(6):
            o, st = lstm_step(net, x[:, t], st)
            outs.append(o)
    assert torch.allclose(torch.stack(outs, 1), ref, rtol=0, atol=1e-13)
    assert torch.allclose(st[0], hr, rtol=0, atol=1e-13) and torch.allclose(st[1], cr, rtol=0, atol=1e-13)


def test_zero_state_and_no_bias_and_float32():
    for net, tol in ((lstm(layers=2, bias=False), 1e-13), (lstm(layers=2, dtype=torch.float32), 1e-6)):
        x = torch.randn(3, 7, dtype=next(net.parameters()).dtype)
        with torch.no_grad():
            ref, (hr, cr) = net(x[:, None])
            o, (h, c) = lstm_step(net, x, None)
        assert torch.allclose(o, ref[:, 0], rtol=0, atol=tol)
        assert torch.allclose(h, hr, rtol=0, atol=tol) and torch.allclose(c, cr, rtol=0, atol=tol)


def test_repacks_when_a_parameter_changes():
    net = lstm(layers=2)
    x = torch.randn(2, 7, dtype=torch.float64)
    with torch.no_grad():
        before = lstm_step(net, x, None)[0]
        net.weight_ih_l1.mul_(0.5)  # an in-place update (as an optimiser step) moves the version counter
        after = lstm_step(net, x, None)[0]
        ref = net(x[:, None])[0][:, 0]
        other = lstm(layers=2, seed=3)
        net.load_state_dict(other.state_dict())
        loaded = lstm_step(net, x, None)[0]
        ref2 = other(x[:, None])[0][:, 0]
    assert not torch.allclose(before, after)
    assert torch.allclose(after, ref, rtol=0, atol=1e-13)
    assert torch.allclose(loaded, ref2, rtol=0, atol=1e-13)


def test_errors():
    with pytest.raises(ValueError, match="unidirectional"):
        lstm_step(lstm(bidirectional=True), torch.zeros(1, 7, dtype=torch.float64), None)
    with pytest.raises(ValueError, match="unidirectional"):
        lstm_step(lstm(proj_size=3), torch.zeros(1, 7, dtype=torch.float64), None)
    with pytest.raises(ValueError, match=r"x must be \(B, 7\)"):
        lstm_step(lstm(), torch.zeros(1, 1, 7, dtype=torch.float64), None)


def model(**kw) -> RnntModel:
    torch.manual_seed(4)
    cfg = RnntConfig(
        variant="lid", languages=("en", "hi"), vocab_sizes=(6, 5), feat_dim=12, enc_layers=2, enc_hidden=16,
        pred_layers=1, pred_hidden=12, embed_dim=8, joint_dim=16, **kw,
    )  # fmt: skip
    return RnntModel(cfg).eval()


def test_streaming_encoder_is_bit_identical_for_any_chunking():
    m = model()
    feats = torch.randn(1, 2 * STEP_FRAMES + 3, 12)
    with torch.no_grad():
        runs = []
        for chunk in (1, 3, STEP_FRAMES):
            st, outs = None, []
            for i in range(0, feats.shape[1], chunk):
                o, st = m.encoder_step(feats[:, i : i + chunk], st)
                outs.append(o)
            runs.append((torch.cat(outs, 1), st))
        full = m.encode(feats)  # nn.LSTM over the whole sequence: equal up to rounding
    for out, st in runs[1:]:
        assert torch.equal(out, runs[0][0]) and all(torch.equal(a, b) for a, b in zip(st, runs[0][1]))
    assert torch.allclose(runs[0][0], full, rtol=0, atol=1e-5)


def test_training_keeps_autograd_through_nn_lstm():
    m = model()
    feats = torch.randn(1, 2, 12)
    out, _ = m.encoder_step(feats, None)  # grad enabled: nn.LSTM, a graph to the weights
    out.sum().backward()
    assert m.encoder.weight_ih_l0.grad is not None and m.encoder.weight_ih_l0.grad.abs().sum() > 0
    assert out.requires_grad


def test_predictor_step_equals_nn_lstm():
    m = model()
    tok = torch.tensor([1, 2, 0, 3])
    with torch.no_grad():
        o, (h, c) = m.predictor_step(tok, None, 0)  # a packed step (4 rows)
        ref, (hr, cr) = m.predictors[0](m.embed[0](tok)[:, None], None)
    assert torch.allclose(o, ref[:, 0], rtol=0, atol=1e-6) and torch.allclose(c, cr, rtol=0, atol=1e-6)


def test_benchmark_per_call_rows(tmp_path):
    """streamkit.eval.bench.rnnt_step (benchmarks/rnnt_step.py): one row per net and row count, the two paths agree."""

    from streamkit.eval.bench import rnnt_step as bench
    from streamkit.models.rnnt import save_model
    path = save_model(tmp_path / "m.pt", model())
    rows = bench.call_rows(path, calls=2, repeat=1)
    assert [(r["net"], r["rows"]) for r in rows] == [("encoder", 1)] + [("predictor", b) for b in bench.ROWS]
    assert rows[0]["layers"] == 2 and rows[0]["input"] == 12 and rows[1]["hidden"] == 12
    assert all(r["max_abs_diff"] < 1e-5 and r["nn_lstm_us"] > 0 and r["lstm_step_us"] > 0 for r in rows)
    assert bench._args_without_out(["--corpus", "C3", "--out", "/x/y.json", "--limit", "5", "--out=/z.json"]) == ["--corpus", "C3", "--limit", "5"]
