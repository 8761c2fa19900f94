"""RNN-T loss speed: the two pure-PyTorch variants, forward and forward+backward, one thread.

Joint logits of shape (B, T, U+1, V) = (8, 100, 31, 60) by default, float32, random with a fixed
seed, full lengths except a few shorter utterances (T_b down to 70 %, U_b down to 50 %, as in a
padded batch). Rows:

* ``ab``: closed-form alpha/beta in a custom autograd Function (the training loss);
* ``diag``: anti-diagonal alpha with autograd (the reference);

each timed as ``fwd`` (loss only, under ``torch.no_grad``) and ``fwd+bwd`` (loss and its gradient
with respect to the logits, including the blank/label log-prob slices and their backward).
Before timing, the variants' losses and gradients are compared (float32; the float64 agreement
to 1e-12 and the brute-force check are in ``tests/models/test_rnnt_loss.py``). Each figure is the
best of ``--repeat`` runs with the garbage collector off (the machine is shared; the minimum is
the figure least disturbed by other load).

    python benchmarks/rnnt_loss.py [--B 8 --T 100 --U 30 --V 60] [--repeat 7] [--threads 1]

Writes benchmarks/results/rnnt_loss.json.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _bench import best_of  # noqa: E402  (benchmarks/_bench.py: the script directory is on sys.path)

from streamkit.core.machine import machine_info  # noqa: E402
from streamkit.io.outputs import write_text  # noqa: E402
from streamkit.models.rnnt_loss import rnnt_loss  # noqa: E402

VARIANTS = ("ab", "diag")


def make_batch(B: int, T: int, U: int, V: int, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(B, T, U + 1, V, generator=g)
    targets = torch.randint(1, V, (B, U), generator=g)
    T_l = torch.full((B,), T, dtype=torch.long)
    U_l = torch.full((B,), U, dtype=torch.long)
    n_short = B // 4
    if n_short:
        T_l[-n_short:] = torch.linspace(T, int(0.7 * T), n_short).long()
        U_l[-n_short:] = torch.linspace(U, int(0.5 * U), n_short).long()
    return logits, targets, T_l, U_l


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--B", type=int, default=8)
    ap.add_argument("--T", type=int, default=100)
    ap.add_argument("--U", type=int, default=30)
    ap.add_argument("--V", type=int, default=60)
    ap.add_argument("--repeat", type=int, default=7, help="runs per row; the best is reported (default 7)")
    ap.add_argument("--threads", type=int, default=1, help="torch intra-op threads (default 1)")
    ap.add_argument("--out", default=str(Path(__file__).parent / "results" / "rnnt_loss.json"))
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    logits, targets, T_l, U_l = make_batch(a.B, a.T, a.U, a.V)

    # ---------------------------------------------------------------- agreement
    losses, grads = {}, {}
    for v in VARIANTS:
        x = logits.clone().requires_grad_(True)
        loss = rnnt_loss(x, targets, T_l, U_l, reduction="none", variant=v)
        loss.sum().backward()
        losses[v], grads[v] = loss.detach(), x.grad
    loss_diff = float((losses["ab"] - losses["diag"]).abs().max())
    grad_diff = float((grads["ab"] - grads["diag"]).abs().max())

    # ---------------------------------------------------------------- timing
    rows: list[dict[str, Any]] = []
    for v in VARIANTS:

        def fwd(v=v) -> None:
            with torch.no_grad():
                rnnt_loss(logits, targets, T_l, U_l, variant=v)

        def fwd_bwd(v=v) -> None:
            x = logits.detach().requires_grad_(True)
            rnnt_loss(x, targets, T_l, U_l, variant=v).backward()

        t_f = best_of(fwd, a.repeat)
        t_fb = best_of(fwd_bwd, a.repeat)
        rows.append({"variant": v, "fwd_ms": t_f * 1e3, "fwd_bwd_ms": t_fb * 1e3, "bwd_ms": (t_fb - t_f) * 1e3})
    base = next(r for r in rows if r["variant"] == "ab")["fwd_bwd_ms"]
    for r in rows:
        r["fwd_bwd_vs_ab"] = r["fwd_bwd_ms"] / base

    # ---------------------------------------------------------------- report
    shape = f"B={a.B}, T={a.T}, U={a.U}, V={a.V}"
    print(f"RNN-T loss, {shape}, float32, {a.threads} thread(s), best of {a.repeat}; lengths T_b {T_l.tolist()}, U_b {U_l.tolist()}")
    hdr = f"{'variant':<8} {'fwd ms':>9} {'fwd+bwd ms':>11} {'x ab':>6}"
    print(hdr)
    print("-" * len(hdr))
    for r in rows:
        print(f"{r['variant']:<8} {r['fwd_ms']:>9.1f} {r['fwd_bwd_ms']:>11.1f} {r['fwd_bwd_vs_ab']:>6.2f}")
    print(f"ab vs diag (float32): max |loss diff| {loss_diff:.2e} (loss ~{float(losses['ab'].mean()):.1f}), max |grad diff| {grad_diff:.2e}")
    mi = machine_info()
    print(f"machine: {mi.get('cpu', '?')}, {mi['cpu_count']} cores, Python {mi['python']}, torch {mi.get('torch')}")
    out_path = Path(a.out)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    write_text(
        out_path,
        json.dumps(
            {
                "benchmark": "rnnt_loss",
                "shape": {"B": a.B, "T": a.T, "U": a.U, "V": a.V},
                "dtype": "float32",
                "threads": a.threads,
                "repeat": a.repeat,
                "logit_lengths": T_l.tolist(),
                "target_lengths": U_l.tolist(),
                "rows": rows,
                "agreement_float32": {"max_abs_loss_diff": loss_diff, "max_abs_grad_diff": grad_diff, "mean_loss": float(losses["ab"].mean())},
                "machine": mi,
                "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                "command": "python benchmarks/rnnt_loss.py " + " ".join(sys.argv[1:]),
            },
            indent=2,
        ),
    )
    print(f"wrote {out_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
