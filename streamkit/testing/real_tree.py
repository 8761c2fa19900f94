"""A tiny fake ``streamkit corpus real`` tree for tests (no packages, no network).

``fake_real_tree(root)`` writes, at 16 kHz mono::

    <split>/events/clips/<Class>/<id>.wav     a tone burst (class-specific pitch) over a faint noise floor
    eval/events/audio/<id>.wav + events.tsv   10 s scenes with DCASE strong labels
    manifest.json

``eval_bytes`` (default: valid audio) replaces every eval file's content, so a test can put bytes there that
no audio reader accepts and see that nothing reads them.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

__all__ = ["burst", "fake_real_tree"]

RATE = 16000
_PITCH = {"Alarm_bell_ringing": 2400.0, "Dog": 500.0, "Cat": 800.0, "Speech": 220.0, "Vacuum_cleaner": 1200.0}


def burst(cls: str, seconds: float, on: tuple[float, float], seed: int = 0, rate: int = RATE) -> np.ndarray:
    """``seconds`` of audio: -60 dBFS noise, and a tone of ``cls``'s pitch (with 3 harmonics) from ``on[0]`` to ``on[1]`` s."""
    rng = np.random.default_rng(seed)
    n = int(seconds * rate)
    x = 0.001 * rng.standard_normal(n)
    a, b = int(on[0] * rate), int(on[1] * rate)
    t = np.arange(b - a) / rate
    f = _PITCH.get(cls, 1000.0)
    x[a:b] += 0.3 * sum(np.sin(2 * np.pi * f * k * t) / k for k in (1, 2, 3))
    return x.astype(np.float32)


def fake_real_tree(root: str | Path, *, classes: dict[str, tuple[str, ...]] | None = None, eval_bytes: bytes | None = None) -> Path:
    """Write the tree under ``root``; ``classes``: split -> classes with clips (default: train Dog, Cat, Speech; dev Dog; eval Dog,
    Cat). Returns ``root``."""
    import soundfile as sf

    root = Path(root)
    classes = classes or {"train": ("Dog", "Cat", "Speech"), "dev": ("Dog",), "eval": ("Dog", "Cat")}
    for split, names in classes.items():
        for ci, cls in enumerate(names):
            d = root / split / "events" / "clips" / cls
            d.mkdir(parents=True, exist_ok=True)
            for i in range(2):
                sf.write(
                    str(d / f"fake-sounds__{split}_{cls}_{i}.wav"),
                    burst(cls, 3.0, (0.5 + 0.3 * i, 2.0 + 0.2 * i), seed=7 * ci + i),
                    RATE,
                    subtype="PCM_16",
                )
    ev = root / "eval" / "events"
    (ev / "audio").mkdir(parents=True, exist_ok=True)
    lines = ["filename\tonset\toffset\tevent_label"]
    for i, (a, b) in enumerate((("Dog", "Cat"), ("Cat", "Speech"))):
        x = burst(a, 10.0, (1.0, 3.0), seed=100 + i) + burst(b, 10.0, (5.0, 8.5), seed=200 + i)
        sf.write(str(ev / "audio" / f"scene_{i}.wav"), x, RATE, subtype="PCM_16")
        lines += [f"scene_{i}.wav\t1.000\t3.000\t{a}", f"scene_{i}.wav\t5.000\t8.500\t{b}"]
    (ev / "events.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    if eval_bytes is not None:
        for p in (root / "eval").rglob("*.wav"):
            p.write_bytes(eval_bytes)
    manifest = {
        "format": "fake-real/1",
        "packages": [
            {"package": "fake-sounds", "version": "1", "sha256": "0" * 64, "licence": "CC0", "role": "train"},
            {"package": "fake-eval", "version": "1", "sha256": "1" * 64, "licence": "CC0", "role": "eval"},
        ],
    }
    (root / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    return root
