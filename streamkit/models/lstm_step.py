"""One-time-step inference for ``nn.LSTM``: the decoders' hot loop without torch's per-call RNN set-up.

Streaming decoding advances the RNN-T encoder by one 30 ms frame and the prediction network by
one symbol at a time, so every call is a single time step with a batch of 1 (the encoder) to a
few dozen rows (the beams). ``nn.LSTM`` pays a fixed set-up cost per call that dominates such
steps on a CPU: a 3-layer 256-unit encoder step takes about 1.5 ms through ``nn.LSTM`` and
about 0.3 ms as one ``addmm`` per layer (``python benchmarks/rnnt_step.py``). :func:`lstm_step`
computes the same cell (PyTorch's gate equations, biases folded into one vector, the gate rows
reordered to ``i, f, o, g`` so that one ``sigmoid`` covers three gates) from weights packed
once per module and re-packed when a parameter changes (its version counter moves, e.g. after an
optimiser step or ``load_state_dict``).

Results equal ``nn.LSTM`` up to float rounding (about 1e-6 relative in float32), not bit for
bit: callers that need chunking invariance use this path for every step, whatever the chunk.
Inference only: no autograd graph is kept (callers run under ``torch.no_grad()``), no dropout,
no projections (``proj_size``), unidirectional, ``batch_first`` or not.
"""

from __future__ import annotations

import torch
from torch import nn

__all__ = ["lstm_step", "packed_weights"]

_ATTR = "_streamkit_step_pack"


def _key(lstm: nn.LSTM) -> tuple[tuple[int, int, torch.dtype, torch.device], ...]:
    return tuple((p.data_ptr(), p._version, p.dtype, p.device) for p in lstm.parameters())


def packed_weights(lstm: nn.LSTM) -> list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
    """Per layer ``(W_ih^T, W_hh^T, b)`` with the gate columns as ``i, f, o, g`` (cached on the module)."""
    if lstm.bidirectional or getattr(lstm, "proj_size", 0):
        raise ValueError("lstm_step supports unidirectional LSTMs without projections")
    key = _key(lstm)
    cached = getattr(lstm, _ATTR, None)
    if cached is not None and cached[0] == key:
        return cached[1]
    H = lstm.hidden_size
    with torch.no_grad():
        dev = next(lstm.parameters()).device
        perm = torch.cat([torch.arange(0, 2 * H), torch.arange(3 * H, 4 * H), torch.arange(2 * H, 3 * H)]).to(dev)
        layers = []
        for k in range(lstm.num_layers):
            wi = getattr(lstm, f"weight_ih_l{k}")
            wh = getattr(lstm, f"weight_hh_l{k}")
            b = torch.zeros(4 * H, dtype=wi.dtype, device=dev)
            if lstm.bias:
                b = getattr(lstm, f"bias_ih_l{k}") + getattr(lstm, f"bias_hh_l{k}")
            layers.append((wi[perm].t().contiguous(), wh[perm].t().contiguous(), b[perm].contiguous()))
    object.__setattr__(lstm, _ATTR, (key, layers))
    return layers


def lstm_step(
    lstm: nn.LSTM, x: torch.Tensor, state: tuple[torch.Tensor, torch.Tensor] | None
) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
    """One time step of ``lstm`` for inputs ``x`` (B, input_size) from ``state`` (None: zeros).

    ``state`` is ``(h, c)``, each (num_layers, B, hidden_size), as ``nn.LSTM`` takes it. Returns
    ``(out (B, hidden_size), (h, c))``: the last layer's output and the new state.
    """
    layers = packed_weights(lstm)
    if x.dim() != 2 or x.shape[1] != lstm.input_size:
        raise ValueError(f"x must be (B, {lstm.input_size}), got {tuple(x.shape)}")
    B, H, L = x.shape[0], lstm.hidden_size, lstm.num_layers
    if state is None:
        h0 = c0 = x.new_zeros((L, B, H))
    else:
        h0, c0 = state
    hs, cs = [], []
    inp = x
    for k, (wi, wh, b) in enumerate(layers):
        g = torch.addmm(b, inp, wi).addmm_(h0[k], wh)
        s = torch.sigmoid(g[:, : 3 * H])
        c = torch.addcmul(s[:, :H] * torch.tanh(g[:, 3 * H :]), s[:, H : 2 * H], c0[k])
        inp = s[:, 2 * H :] * torch.tanh(c)
        hs.append(inp)
        cs.append(c)
    return inp, (torch.stack(hs), torch.stack(cs))
