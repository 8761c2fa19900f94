"""The model card of ``streamkit train rnnt``: what was trained, on what, how, and how it measured on the dev
subset (:func:`model_card`), with the command that reproduces the run (:func:`train_command`)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from streamkit.models.rnnt import RnntConfig, RnntModel, n_params
from streamkit.train.rnnt_corpus import AsrCorpus

__all__ = ["model_card", "train_command"]


def model_card(cfg: RnntConfig, model: RnntModel, corpus: AsrCorpus, run: dict[str, Any], st: dict[str, Any], hours: np.ndarray,
                threads: int, out: Path, final: bool, half_weights: bool = False, device: str = "cpu",
                weights_from: str = "best") -> dict[str, Any]:  # fmt: skip
    from streamkit.core.machine import machine_info

    elapsed = st["elapsed_s"]
    return {
        "model": f"streamkit.models.rnnt ({cfg.variant}), multilingual streaming RNN-T (Joshi et al. 2021, multi-softmax)",
        "variant": cfg.variant,
        "weights": out.name,
        "weights_dtype": "float16" if half_weights else "float32",
        "status": "finished" if final else "in progress",
        "config": cfg.to_dict(),
        "n_params": n_params(model),
        "size_note": "scaled down from the paper's 6x1024 encoder / 2x1024 prediction LSTMs (about 69 M parameters) so that CPU "
        "training fits a few hours on one thread of a 2-core machine",
        "features": "80 log-mel (25 ms / 10 ms, 8 kHz), 8 frames stacked, 30 ms shift (streamkit.models.features); per-dimension "
        "normalisation from the training data",
        "corpus": {
            "command": corpus.command,
            "languages": corpus.langs,
            "train_hours": {lg: round(float(h), 3) for lg, h in zip(corpus.langs, hours)},
            "train_utterances": run["train_utterances"],
            "vocab_sizes": list(cfg.vocab_sizes),
        },
        "training": {
            "command": train_command(cfg, run, threads, out, half_weights, device, weights_from),
            "budget": {"steps": run["steps"], "note": "same --steps (and batch settings) for every variant"},
            "seed": run["seed"],
            "steps": st["step"],
            "audio_hours_seen": round(st["audio_s"] / 3600, 3),
            "steps_per_language": {lg: round(float(n), 1) for lg, n in zip(cfg.languages, st["train_lang_steps"])},
            "wall_time_s": round(elapsed, 1),
            "runs": st["runs"],
            "threads": threads,
            "device": device if device == "cpu" else f"{device} ({torch.cuda.get_device_name(torch.device(device))})",
            "batching": (
                "one language per mini-batch, language ~ training hours"
                if run.get("batching", "language") == "language"
                else "mixed: every language's utterances bucketed together (languages in proportion to their hours)"
            )
            + f"; length-bucketed, <= {run['batch_seconds']:g} s padded audio and <= {run['max_utts']} utterances per batch",
            "optimiser": f"Adam (0.9, 0.98), eps 1e-9, lr {run['lr']:g}, linear warm-up {run['warmup']} steps"
            + (f", cosine decay to {run['lr_final']:g} x lr at step {run['steps']}" if run["steps"] else ", then constant")
            + f", gradient norm clip {run['clip']:g}",
            "loss": "RNN-T (mean per utterance)"
            + (
                f" + {cfg.lid_weight:g} x frame-level LID cross-entropy "
                + ("(mean over frames)" if run.get("lid_loss", "frame-mean") == "frame-mean" else "(summed per utterance, mean over utterances)")
                if cfg.has_lid
                else ""
            )
            + (
                f" + {run['ctc_weight']:g} x auxiliary encoder CTC (per utterance; training-only heads, not in the weight file)"
                if run["ctc_weight"]
                else ""
            ),
            "steps_per_s": round(st["step"] / elapsed, 4) if elapsed > 0 else None,
            "audio_s_per_s": round(st["audio_s"] / elapsed, 2) if elapsed > 0 else None,
        },
        "dev": {
            "subset": f"{run['dev_per_lang']} utterances per language (loss, LID), {run['wer_per_lang']} of them for WER; speakers unseen in training",
            "wer_rule": "greedy search with the language known, at most 3 symbols per frame",
            "best_step": st["best_step"],
            "weights": f"the last step's state (step {st['step']})" if weights_from == "last" else f"the best dev loss (step {st['best_step']})",
            "best": st["best_eval"],
            "history": st["history"],
        },
        "torch": torch.__version__,
        "machine": machine_info(),
        "updated": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


def train_command(cfg: RnntConfig, run: dict[str, Any], threads: int, out: Path, half_weights: bool = False, device: str = "cpu",
             weights_from: str = "best") -> str:  # fmt: skip
    d = RnntConfig().to_dict()
    c = cfg.to_dict()
    size = " ".join(f"--{k.replace('_', '-')} {c[k]}" for k in ("enc_layers", "enc_hidden", "pred_layers", "pred_hidden", "embed_dim",
                                                                 "joint_dim", "dropout", "lid_weight", "lid_hidden", "feat_norm") if c[k] != d[k])  # fmt: skip
    cmd = f"streamkit train rnnt --corpus CORPUS --variant {cfg.variant} --out {out.name} --seed {run['seed']}"
    if run["steps"] is not None:
        cmd += f" --steps {run['steps']}"
    cmd += f" --batch-seconds {run['batch_seconds']:g} --max-utts {run['max_utts']} --lr {run['lr']:g} --warmup {run['warmup']}"
    cmd += f" --lr-final {run['lr_final']:g} --clip {run['clip']:g}"
    cmd += f" --batching {run.get('batching', 'language')} --lid-loss {run.get('lid_loss', 'frame-mean')}"
    if run.get("init_from"):
        cmd += f" --init-from {run['init_from']}"
    if run.get("languages"):
        cmd += f" --languages {','.join(run['languages'])}"
    cmd += f" --ctc-weight {run['ctc_weight']:g} --init {run['init']} --eval-every {run['eval_every']} --threads {threads}"
    if device != "cpu":
        cmd += f" --device {device}"
    return (
        cmd + (" " + size if size else "") + (" --half-weights" if half_weights else "") + (" --weights-from last" if weights_from == "last" else "")
    )
