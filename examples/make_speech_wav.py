"""Make ``speech.wav``, the small test file the README's commands run on.

Two espeak-ng sentences (English voice) at 1.0 s and 7.0 s in an 11.5 s file at 22050 Hz, over a
light noise floor (seeded, so the file is the same on every machine with the same espeak-ng)::

    python examples/make_speech_wav.py            # writes ./speech.wav
    python examples/make_speech_wav.py out.wav

Needs espeak-ng (``apt-get install espeak-ng``; ``make test`` installs it).
"""

from __future__ import annotations

import sys

import numpy as np

from streamkit.data.tts import ESPEAK_RATE, synthesize
from streamkit.io.outputs import write_audio

SENTENCES = (
    (1.0, "The weather station reports light rain and a north wind this afternoon."),
    (7.0, "Please check the antenna before the evening net starts."),
)
DURATION_S = 11.5
NOISE_DBFS = -50.0


def make(seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = (10 ** (NOISE_DBFS / 20) * rng.standard_normal(int(DURATION_S * ESPEAK_RATE))).astype(np.float32)
    for at_s, text in SENTENCES:
        s = synthesize(text, "en", out_rate=ESPEAK_RATE)
        i = int(at_s * ESPEAK_RATE)
        x[i : i + len(s)] += 0.5 * s / max(1e-6, float(np.abs(s).max()))
    return x


if __name__ == "__main__":
    path = sys.argv[1] if len(sys.argv) > 1 else "speech.wav"
    write_audio(path, make(), ESPEAK_RATE, subtype="PCM_16")
    print(f"wrote {path}: {DURATION_S} s at {ESPEAK_RATE} Hz, speech at " + ", ".join(f"{a:g} s" for a, _ in SENTENCES))
