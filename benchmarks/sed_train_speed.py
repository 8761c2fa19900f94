"""Training-step time of the SED CRNN: torch's dropout against ``--fast-dropout`` (LaneDropout).

Issue #7's experiments are bounded by training time on this 2-core machine (a 13 500-step run takes
about four hours beside another job), so the step is measured here rather than guessed. One step is
what ``streamkit train sed`` does per mini-batch: forward of the heads the method's stage needs,
its loss (:func:`streamkit.models.sed_losses.sed_loss`), backward and an Adam update, on log-mel
batches of the corpus's clip length (618 input frames, 128 bins) drawn at random (the time does not
depend on the values). Batches as the trainer makes them with the default 6 clips per subset: the
baseline sees strong synthetic + weak real clips (12), adv-time+tri's labeler stage adds the
unlabelled real clips (18) and trains F1, F2, Ft and D.

The two dropout kinds run alternately in one process (``--repeat`` rounds of ``--steps`` steps
each, after one warm-up round), so a neighbour's load hits both alike; the table gives the best
and the median round per step and the ratio of the bests.

    python benchmarks/sed_train_speed.py [--steps 20] [--repeat 3] [--threads 1] [--preset small]

Writes benchmarks/results/sed_train_speed.json.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import torch  # noqa: E402
from _bench import write_result  # noqa: E402

from streamkit.core.machine import machine_info  # noqa: E402

OUT = Path(__file__).resolve().parent / "results" / "sed_train_speed.json"
CLIPS = 6  # per subset, the trainer's default --batch-size
FRAMES = 618  # input frames of a 10 s clip at 16 kHz (n_fft 2048, hop 256)
CASES = (("baseline", "main", 2), ("adv-time+tri", "labelers", 3))  # (method, stage, subsets in the batch)


def batch(cfg: Any, subsets: int, seed: int, frames: int) -> tuple[torch.Tensor, Any]:
    """Random features and targets: subset 0 strong synthetic, 1 weak real, 2 unlabelled real."""
    from streamkit.models.sed_losses import SedTargets

    g = torch.Generator().manual_seed(seed)
    b = CLIPS * subsets
    x = torch.randn(b, frames, cfg.n_mels, generator=g)
    t_out = frames // cfg.time_pool
    frame = (torch.rand(b, t_out, cfg.n_classes, generator=g) > 0.8).float()
    kind = torch.arange(b) // CLIPS
    targets = SedTargets(frame=frame, frame_mask=(kind == 0).float(), clip=frame.amax(dim=1), clip_mask=(kind <= 1).float(),
                         domain=(kind >= 1).float())  # fmt: skip
    return x, targets


def time_steps(method: str, stage: str, subsets: int, fast: bool, cfg0: Any, steps: int, seed: int, frames: int = FRAMES) -> float:
    """Seconds per step of ``steps`` training steps (a fresh model and optimiser each round)."""
    from streamkit.models.sed_crnn import SedModel
    from streamkit.models.sed_losses import heads_for, parse_method, sed_loss

    cfg = dataclasses.replace(cfg0, fast_dropout=fast)
    torch.manual_seed(seed)
    model = SedModel(cfg).train()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    adv = parse_method(method)[0]
    heads = heads_for(method, stage)
    x, t = batch(cfg, subsets, seed, frames)
    t0 = time.perf_counter()
    for _ in range(steps):
        opt.zero_grad(set_to_none=True)
        out = model(x, heads=heads, domain=adv)
        sed_loss(method, out, t, model=model, stage=stage)["loss"].backward()
        opt.step()
    return (time.perf_counter() - t0) / steps


def main(argv: list[str] | None = None) -> int:
    from streamkit.models.sed_crnn import SedConfig, SedModel, n_params
    from streamkit.train.sed import PRESETS

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=20, help="steps per round (default 20)")
    ap.add_argument("--repeat", type=int, default=3, help="timed rounds per dropout kind (default 3)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--preset", choices=tuple(PRESETS), default="small")
    ap.add_argument("--frames", type=int, default=FRAMES, help=f"input frames per clip (default {FRAMES}: 10 s)")
    ap.add_argument("--out", default=str(OUT))
    a = ap.parse_args(argv)
    if a.steps < 1 or a.repeat < 1 or a.frames < 1:
        ap.error("--steps, --repeat and --frames must be positive")
    torch.set_num_threads(a.threads)
    cfg = SedConfig(**PRESETS[a.preset])
    load_before = os.getloadavg()[0]
    rows = []
    for method, stage, subsets in CASES:
        for fast in (False, True):  # warm-up round of each
            time_steps(method, stage, subsets, fast, cfg, 2, 0, a.frames)
        runs: dict[bool, list[float]] = {False: [], True: []}
        for r in range(a.repeat):
            for fast in (False, True):
                runs[fast].append(time_steps(method, stage, subsets, fast, cfg, a.steps, r, a.frames))
        best = {k: min(v) for k, v in runs.items()}
        rows.append({"method": method, "stage": stage, "clips": CLIPS * subsets,
                     "torch_dropout_ms": round(1e3 * best[False], 1), "torch_dropout_median_ms": round(1e3 * float(np.median(runs[False])), 1),
                     "fast_dropout_ms": round(1e3 * best[True], 1), "fast_dropout_median_ms": round(1e3 * float(np.median(runs[True])), 1),
                     "speedup": round(best[False] / best[True], 3)})  # fmt: skip
    print(f"SED CRNN training step ({a.preset} preset, {n_params(SedModel(cfg))} parameters, {a.threads} thread(s), "
          f"{a.frames} x {cfg.n_mels} log-mel per clip; best of {a.repeat} rounds of {a.steps} steps, median in brackets)")  # fmt: skip
    print(f"{'method / stage':<26} {'clips':>5} {'torch dropout ms':>20} {'--fast-dropout ms':>20} {'speed-up':>9}")
    for r in rows:
        print(f"{r['method'] + ' / ' + r['stage']:<26} {r['clips']:>5} {r['torch_dropout_ms']:>10.1f} ({r['torch_dropout_median_ms']:>7.1f}) "
              f"{r['fast_dropout_ms']:>10.1f} ({r['fast_dropout_median_ms']:>7.1f}) {r['speedup']:>8.2f}x")  # fmt: skip
    load_after = os.getloadavg()[0]
    print(f"load average {load_before:.2f} -> {load_after:.2f} on {os.cpu_count()} cores", flush=True)
    result = {"benchmark": "sed_train_speed", "preset": a.preset, "threads": a.threads, "steps": a.steps, "repeat": a.repeat,
              "clips_per_subset": CLIPS, "frames": a.frames, "rows": rows, "load_average_1m": [round(load_before, 2), round(load_after, 2)],
              "note": "one training step = forward of the stage's heads + sed_loss + backward + Adam; random batches; the two dropout kinds "
                      "alternate round by round in one process", "machine": machine_info(),
              "created": time.strftime("%Y-%m-%d %H:%M:%S")}  # fmt: skip
    return write_result(a.out, result)


if __name__ == "__main__":
    raise SystemExit(main())
