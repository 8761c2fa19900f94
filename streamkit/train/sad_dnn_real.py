"""Real-recording scenes as training and dev data of the CNN-GRU SAD.

``streamkit train sad-dnn --corpus HF --real REAL`` adds the ``train`` (and, to the dev loss, the
``dev``) speech scenes of a ``streamkit corpus real`` corpus (real speech from the training
packages with real non-speech sounds between the utterances, 16 kHz, labels in samples) to the
synthetic HF corpus. Evaluation-only packages never reach these splits (the corpus builder
refuses them); this module reads only ``train`` and ``dev``.

Each epoch, a scene is resampled to the SAD's 8 kHz and, from epoch 1 on, gets a random gain
(-24 to +6 dB) and, with probability ``hf_prob``, goes through the HF channel simulator with fresh
``ChannelParams.random`` (the simulator is time-aligned, so the labels stay valid): the detector
sees real speech and real distractors both as a microphone hears them and as an SSB receiver does.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

RATE = 8000
SPLITS = ("train", "dev")
GAIN_DB = (-24.0, 6.0)


def scene_items(root: str | Path, split: str, limit: int | None = None) -> list[dict[str, Any]]:
    """The scenes of one split of a ``corpus real`` root: id, audio path, intervals at 8 kHz, length at 8 kHz."""
    if split not in SPLITS:
        raise ValueError(f"real scenes for training come from {SPLITS} only, not {split!r}")
    d = Path(root) / split / "scenes"
    labels = sorted((d / "labels").glob("*.json"))
    if not labels:
        raise FileNotFoundError(f"{root}: no {split}/scenes/labels/*.json (is it a corpus from `streamkit corpus real`?)")
    items = []
    for p in labels[:limit]:
        j = json.loads(p.read_text(encoding="utf-8"))
        rate = int(j.get("rate", 16000))
        scale = RATE / rate
        iv = [[int(round(a * scale)), int(round(b * scale))] for a, b in j["intervals"]]
        items.append({"id": j["id"], "audio": d / "audio" / f"{j['id']}.wav", "intervals": iv, "n": int(round(int(j["n_samples"]) * scale)),
                      "kind": "real"})  # fmt: skip
    return items


def read_8k(path: Path) -> np.ndarray:
    """A scene as float32 mono at 8 kHz (:func:`streamkit.eval.sad_systems.load_audio`: soxr HQ, NaN refused)."""
    from streamkit.eval.sad_systems import load_audio

    return load_audio(path).x


def scene_signal(item: dict[str, Any], epoch: int, index: int, seed: int, severity: float, hf_prob: float) -> np.ndarray:
    """The training signal of one scene in one epoch (epoch 0: as recorded)."""
    x = read_8k(item["audio"])
    if epoch == 0:
        return x
    rng = np.random.default_rng(np.random.SeedSequence([seed, 3, epoch, index]))
    x = x * np.float32(10 ** (rng.uniform(*GAIN_DB) / 20))
    if rng.random() < hf_prob:
        from streamkit.data.hf_channel import ChannelParams, simulate

        x = simulate(x, ChannelParams.random(rng, severity)).received
    return (np.clip(np.round(np.asarray(x, np.float64) * 32767), -32768, 32767) / 32767).astype(np.float32)
