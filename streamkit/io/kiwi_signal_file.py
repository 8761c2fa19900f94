"""An emulator signal that plays an audio file, as a transmitter with its own clock would.

:class:`FilePlayback` is a :data:`~streamkit.io.kiwi_signals.SignalFn`: sample ``i`` of a
connection at the emulator's true rate ``R`` is the file read at position::

    p(i) = (i / R - delay_s) * file_rate * (1 + ppm * 1e-6)

so the file starts ``delay_s`` after the connection's first sample and its sample clock runs
``ppm`` parts per million fast (negative: slow) against the receiver's. The file is read by
band-limited interpolation (:func:`streamkit.dsp.align.clock.interpolate`), exact per sample
index (independent of how the stream is cut into frames), silent before the start and after the
end. ``streamkit emulate kiwi --play FREQ_KHZ:PATH[:PPM[:DELAY_S]]`` puts one on a station.
"""

from __future__ import annotations

import math
import os
from typing import Any

import numpy as np
from numpy.typing import NDArray

from streamkit.dsp.align.clock import interpolate

__all__ = ["FilePlayback", "parse_play_spec"]


class FilePlayback:
    """Play ``audio`` (mono, at ``file_rate``) with a clock offset of ``ppm`` and a start ``delay_s`` late."""

    __slots__ = ("audio", "delay_s", "file_rate", "level", "name", "ppm")

    def __init__(self, audio: Any, file_rate: float, *, ppm: float = 0.0, delay_s: float = 0.0, level: float = 1.0, name: str = "file") -> None:
        x = np.asarray(audio, dtype=np.float64)
        if x.ndim != 1:
            raise ValueError(f"audio must be mono, got shape {x.shape}")
        for what, v in (("file_rate", file_rate), ("ppm", ppm), ("delay_s", delay_s), ("level", level)):
            if not math.isfinite(float(v)):
                raise ValueError(f"{what} must be finite, got {v}")
        if file_rate <= 0 or abs(ppm) >= 1e5 or delay_s < 0:
            raise ValueError(f"bad playback: file_rate {file_rate} > 0, |ppm| {ppm} < 1e5, delay_s {delay_s} >= 0 required")
        self.audio = x
        self.file_rate = float(file_rate)
        self.ppm = float(ppm)
        self.delay_s = float(delay_s)
        self.level = float(level)
        self.name = name

    def __call__(self, n: int, start: int, rate: float, iq: bool) -> NDArray[Any]:
        step = self.file_rate * (1.0 + self.ppm * 1e-6) / float(rate)
        pos = (np.arange(start, start + n, dtype=np.float64) - self.delay_s * float(rate)) * step
        y = self.level * interpolate(self.audio, pos, ratio=step).astype(np.float64)
        return y.astype(np.complex128) if iq else y

    def __repr__(self) -> str:
        return f"play({self.name}, {self.ppm:+g} ppm, delay {self.delay_s:g} s)"


def parse_play_spec(spec: str) -> tuple[float, FilePlayback]:
    """``FREQ_KHZ:PATH[:PPM[:DELAY_S]]`` -> ``(khz, playback)`` (a path may hold ':' itself).

    Raises:
        ValueError: malformed spec, or a file that cannot be read.
    """
    import soundfile as sf

    parts = spec.split(":")
    if len(parts) < 2 or not parts[1]:
        raise ValueError(f"--play {spec!r}: expected FREQ_KHZ:PATH[:PPM[:DELAY_S]]")
    try:
        khz = float(parts[0])
    except ValueError:
        raise ValueError(f"--play {spec!r}: bad frequency {parts[0]!r}") from None
    if not (math.isfinite(khz) and khz >= 0):
        raise ValueError(f"--play {spec!r}: bad frequency {parts[0]!r}")
    rest = parts[1:]
    nums: list[float] = []
    while len(rest) > 1 and len(nums) < 2:
        try:
            nums.insert(0, float(rest[-1]))
        except ValueError:
            break
        rest.pop()
    path = ":".join(rest)
    if not os.path.isfile(path):
        raise ValueError(f"--play {spec!r}: no such file {path!r}")
    try:
        x, fs = sf.read(path, dtype="float64", always_2d=True)
    except Exception as exc:  # soundfile's own error types
        raise ValueError(f"--play {spec!r}: cannot read audio ({str(exc).splitlines()[0] if str(exc) else type(exc).__name__})") from None
    ppm = nums[0] if nums else 0.0
    delay = nums[1] if len(nums) > 1 else 0.0
    return khz, FilePlayback(x.mean(axis=1), float(fs), ppm=ppm, delay_s=delay, name=os.path.basename(path))
