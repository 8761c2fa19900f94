"""Synthetic test signals shared by the tests and the benchmarks."""

from __future__ import annotations

import numpy as np


def speechlike(n: int, rng: np.random.Generator, *, rate: int = 8000, harmonics: int = 33) -> np.ndarray:
    """``n`` samples at ``rate`` Hz of a speech-like burst: a harmonic tone (f0 100-220 Hz gliding
    +-15 %, harmonics below 3400 Hz), falling spectral tilt, 3-6 Hz syllable amplitude modulation."""
    t = np.arange(n) / rate
    f0 = rng.uniform(100, 220) * (1 + 0.15 * np.sin(2 * np.pi * rng.uniform(0.3, 1.0) * t + rng.uniform(0, 6)))
    ph = 2 * np.pi * np.cumsum(f0) / rate
    y = np.zeros(n)
    for h in range(1, harmonics + 1):
        amp = np.where(h * f0 < 3400, 1.0, 0.0) / (1 + (h * f0.mean() / 800) ** 1.5)
        y += amp * np.sin(h * ph + rng.uniform(0, 6))
    am = 0.5 * (1 - np.cos(2 * np.pi * rng.uniform(3, 6) * t + rng.uniform(0, 6)))
    return y * am**1.5
