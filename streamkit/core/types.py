"""What travels on an edge: the stream format, chunks of items and tags at absolute indices.

The index model follows GNU Radio's ``nitems_read``/``nitems_written``: every port counts the items
it has delivered, starting at 0, and a chunk says where it starts in that count. Time is never an
index; it is metadata attached at an index by :class:`~streamkit.core.tags.TimeAnchor` tags.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np

from streamkit.core.errors import ConfigError

#: dtypes the core moves between blocks. Audio is float32; IQ is complex64; feature streams
#: (STFT frames) are complex64 or float32 with one "channel" per bin.
SUPPORTED_DTYPES = (np.dtype(np.float32), np.dtype(np.complex64), np.dtype(np.float64), np.dtype(np.int16))


def as_fraction(rate: Any) -> Fraction:
    """Turn a rate given as int, float, str or Fraction into an exact :class:`Fraction`.

    Floats go through their shortest decimal representation (``repr``), so ``12001.188`` becomes
    ``Fraction(3000297, 250)`` and not the binary expansion of the float.

    Raises:
        ConfigError: if the rate is not a finite positive number.
    """
    if isinstance(rate, Fraction):
        fr = rate
    elif isinstance(rate, bool):
        raise ConfigError(f"rate must be a number, got {rate!r}")
    elif isinstance(rate, int):
        fr = Fraction(rate)
    elif isinstance(rate, float):
        if not np.isfinite(rate):
            raise ConfigError(f"rate must be finite, got {rate!r}")
        fr = Fraction(repr(rate))
    elif isinstance(rate, str):
        try:
            fr = Fraction(rate.strip())
        except (ValueError, ZeroDivisionError) as exc:
            raise ConfigError(f"cannot read rate {rate!r}") from exc
    else:
        try:
            fr = Fraction(rate)
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"cannot read rate {rate!r}") from exc
    if fr <= 0:
        raise ConfigError(f"rate must be > 0, got {rate!r}")
    return fr


@dataclass(frozen=True, slots=True)
class StreamSpec:
    """Format of one port: exact nominal rate, channel count and dtype.

    Attributes:
        rate: items per second, exact (``Fraction``). Nominal: drift is carried by time anchors.
        channels: items are rows of ``channels`` values (audio channels, or STFT bins).
        dtype: numpy dtype of the items.
    """

    rate: Fraction
    channels: int = 1
    dtype: np.dtype = field(default=np.dtype(np.float32))

    def __post_init__(self) -> None:
        object.__setattr__(self, "rate", as_fraction(self.rate))
        try:
            dt = np.dtype(self.dtype)
        except TypeError as exc:
            raise ConfigError(f"unknown dtype {self.dtype!r}") from exc
        if dt not in SUPPORTED_DTYPES:
            raise ConfigError(f"dtype {dt} not supported (use one of {[str(d) for d in SUPPORTED_DTYPES]})")
        object.__setattr__(self, "dtype", dt)
        if isinstance(self.channels, bool) or not isinstance(self.channels, (int, np.integer)) or self.channels < 1:
            raise ConfigError(f"channels must be an int >= 1, got {self.channels!r}")
        object.__setattr__(self, "channels", int(self.channels))

    @property
    def rate_hz(self) -> float:
        """The rate as a float, for display and for libraries that want one."""
        return float(self.rate)

    def replace(self, **changes: Any) -> StreamSpec:
        """A copy with some fields changed."""
        return StreamSpec(
            rate=changes.get("rate", self.rate), channels=changes.get("channels", self.channels), dtype=changes.get("dtype", self.dtype)
        )

    def seconds(self, items: int) -> float:
        """Duration of ``items`` items in seconds."""
        return float(items / self.rate)

    def items(self, seconds: float) -> int:
        """Number of items in ``seconds`` seconds, rounded to nearest."""
        return int(round(float(seconds) * float(self.rate)))

    def to_dict(self) -> dict[str, Any]:
        return {"rate": str(self.rate), "channels": self.channels, "dtype": str(self.dtype)}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> StreamSpec:
        return cls(rate=as_fraction(d["rate"]), channels=int(d.get("channels", 1)), dtype=np.dtype(d.get("dtype", "float32")))

    def __str__(self) -> str:
        rate = str(self.rate) if self.rate.denominator == 1 else f"{float(self.rate):.6f}"
        return f"{rate} Hz x{self.channels} {self.dtype}"


@dataclass(frozen=True, slots=True)
class Tag:
    """A sample-exact fact: ``value`` holds at absolute item ``offset`` of a port.

    Keys are namespaced strings (``"sk:gap"``, ``"sk:time"``, ``"user:..."``); values are small
    frozen dataclasses from :mod:`streamkit.core.tags`.
    """

    offset: int
    key: str
    value: Any = None


def readonly(a: np.ndarray) -> np.ndarray:
    """Return ``a`` (or a view of it) with the writeable flag cleared."""
    if a.flags.writeable:
        a = a.view()
        a.flags.writeable = False
    return a


@dataclass(frozen=True, slots=True)
class Chunk:
    """A run of items on one port.

    Attributes:
        start: absolute index of ``samples[0]``; equals the previous chunk's ``stop``.
        samples: array of shape ``(n, channels)``, read-only.
        tags: tags sorted by offset with ``start <= offset < stop`` (a zero-length chunk at the end
            of a stream may carry tags at ``offset == start``).
    """

    start: int
    samples: np.ndarray
    tags: tuple[Tag, ...] = ()

    @property
    def stop(self) -> int:
        return self.start + int(self.samples.shape[0])

    def __len__(self) -> int:
        return int(self.samples.shape[0])

    def tags_with(self, key: str) -> list[Tag]:
        return [t for t in self.tags if t.key == key]
