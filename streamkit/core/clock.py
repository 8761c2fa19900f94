"""Run modes and time anchors.

* :class:`FreeRun`: file and synthetic sources are read as fast as the graph consumes them. This
  is the RT-factor benchmark mode.
* :class:`Paced`: non-live sources are released at ``speed`` times real time, so latency can be
  measured without a device.
* :class:`RealTime`: ``Paced(1.0)`` for non-live sources; live sources deliver as they capture.

:class:`AnchorTrack` turns the ``TimeAnchor`` tags seen on a port into UTC times of item indices.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from fractions import Fraction

from streamkit.core.tags import TimeAnchor


@dataclass(frozen=True, slots=True)
class FreeRun:
    """As fast as possible (benchmarks, batch processing of files)."""

    name: str = "freerun"


@dataclass(frozen=True, slots=True)
class Paced:
    """Release non-live sources at ``speed`` x real time."""

    speed: float = 1.0
    name: str = "paced"

    def __post_init__(self) -> None:
        if not self.speed > 0:
            raise ValueError(f"speed must be > 0, got {self.speed}")


@dataclass(frozen=True, slots=True)
class RealTime:
    """Live operation: live sources as they come, others paced at 1x."""

    name: str = "realtime"
    speed: float = 1.0


Mode = FreeRun | Paced | RealTime


def parse_mode(text: str) -> Mode:
    """``"freerun"``, ``"realtime"``, ``"paced"`` or ``"paced:2.5"``."""
    t = text.strip().lower()
    if t in ("freerun", "free", "fast"):
        return FreeRun()
    if t in ("realtime", "live", "rt"):
        return RealTime()
    if t.startswith("paced"):
        _, _, sp = t.partition(":")
        return Paced(float(sp) if sp else 1.0)
    raise ValueError(f"unknown run mode {text!r} (freerun, realtime, paced[:speed])")


class AnchorTrack:
    """Time anchors of one port; answers "what UTC is item i?"."""

    __slots__ = ("rate", "_offsets", "_anchors", "max_keep")

    def __init__(self, rate: Fraction, max_keep: int = 64) -> None:
        self.rate = rate
        self._offsets: list[int] = []
        self._anchors: list[TimeAnchor] = []
        self.max_keep = max_keep

    def add(self, offset: int, anchor: TimeAnchor) -> None:
        if self._offsets and offset < self._offsets[-1]:
            return  # anchors arrive in index order; an older one adds nothing
        if self._offsets and offset == self._offsets[-1]:
            self._anchors[-1] = anchor
            return
        self._offsets.append(offset)
        self._anchors.append(anchor)
        if len(self._offsets) > self.max_keep:
            del self._offsets[0]
            del self._anchors[0]

    def set_rate(self, rate: Fraction) -> None:
        self.rate = rate

    @property
    def empty(self) -> bool:
        return not self._offsets

    def latest(self) -> tuple[int, TimeAnchor] | None:
        if not self._offsets:
            return None
        return self._offsets[-1], self._anchors[-1]

    def time_of(self, index: int) -> int | None:
        """UTC ns of item ``index`` (None before any anchor)."""
        if not self._offsets:
            return None
        k = bisect.bisect_right(self._offsets, index) - 1
        if k < 0:
            k = 0
        off = self._offsets[k]
        a = self._anchors[k]
        return a.utc_ns + int(round((index - off) * 1e9 / float(self.rate)))
