"""Log-mel augmentation of SED training batches (not in the paper; standard in later DCASE task 4 systems).

``streamkit train sed --augment`` perturbs every training clip (S, W and U alike) on the cached natural-log
mel features, drawn anew for each step from ``(seed, step)`` so that a resumed run draws the same:

- *mel shift*: the spectrum moves by a whole number of mel bins, uniform in ``[-shift, shift]``, the edge bin
  repeated into the gap. Resampling a source by r moves its high-frequency content by about
  ``128 / 2840 * 2595 * log10(r)`` bins at the top of the scale (a pitch/size change: another dog, another
  motor), less at the bottom.
- *FilterAugment* (Nam et al., ICASSP 2022, linear type): a random gain in ``[-filter_db, filter_db]`` dB at
  2-5 random points of the mel axis, interpolated linearly between them, as a microphone or room colours a sound.
- *level*: one gain in ``[-gain_db, gain_db]`` dB on the whole clip.

Frame and clip targets are unchanged by all three, so the same targets (tags, strong labels, pseudo-labels)
hold for the perturbed clip. The pseudo-labels themselves are made on the clean features: the student sees
noise the teacher did not (noisy-student self-training, Xie et al., CVPR 2020).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

DB_TO_LN = np.log(10.0) / 10.0  # a power gain of 1 dB in natural-log energy units


@dataclass(frozen=True)
class MelAugment:
    shift: int = 8  #: largest mel-bin shift (0: off)
    filter_db: float = 6.0  #: largest FilterAugment band gain in dB (0: off)
    gain_db: float = 6.0  #: largest clip level change in dB (0: off)

    def __post_init__(self) -> None:
        if self.shift < 0 or self.filter_db < 0 or self.gain_db < 0:
            raise ValueError(f"augmentation ranges must be >= 0, got shift {self.shift}, filter {self.filter_db} dB, gain {self.gain_db} dB")

    def to_dict(self) -> dict[str, Any]:
        return {k: (int(v) if k == "shift" else float(v)) for k, v in asdict(self).items()}

    def __call__(self, x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """``(B, T, n_mels)`` natural-log mel energies -> a perturbed float32 copy (the input is not changed)."""
        if x.ndim != 3:
            raise ValueError(f"expected (batch, frames, n_mels) features, got shape {x.shape}")
        b, _, m = x.shape
        out = np.empty(x.shape, np.float32)
        bins = np.arange(m)
        for i in range(b):
            k = int(rng.integers(-self.shift, self.shift + 1)) if self.shift else 0
            xi = np.asarray(x[i], np.float32)
            if k:
                xi = mel_shift(xi, k)
            db = np.zeros(m, np.float64)
            if self.filter_db:
                n = int(rng.integers(2, 6))
                pts = np.sort(np.concatenate([[0.0, m - 1.0], rng.uniform(0.0, m - 1.0, n - 2)]))
                db += np.interp(bins, pts, rng.uniform(-self.filter_db, self.filter_db, n))
            if self.gain_db:
                db += rng.uniform(-self.gain_db, self.gain_db)
            out[i] = xi + (db * DB_TO_LN).astype(np.float32)
        return out


def mel_shift(x: np.ndarray, k: int) -> np.ndarray:
    """Features (``(..., n_mels)``, mel bins last) moved up by ``k`` mel bins (down when negative): bin j takes
    bin j - k, the edge bin repeated into the gap (the augmentation's shift; a copy, also for ``k`` 0)."""
    m = x.shape[-1]
    return x[..., np.clip(np.arange(m) - int(k), 0, m - 1)]


def batch_rng(seed: int, step: int) -> np.random.Generator:
    """The augmentation draws of one training step: a function of the run's seed and the step only."""
    return np.random.default_rng([int(seed), 0x5ED_A06, int(step)])
