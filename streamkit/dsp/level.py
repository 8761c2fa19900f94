"""Level meter: RMS and peak in dBFS over fixed intervals of stream time, audio passed through.

Interval ``k`` covers input items ``[b_k, b_{k+1})`` with ``b_k = round_half_up(k * interval_s *
rate)`` counted from the first item the block sees, so intervals have the exact mean length
``interval_s * rate`` even at odd rates (12001.188 Hz) and sit at the same indices whatever the
chunking. Over an interval of ``m`` items and ``C`` channels::

    rms_dbfs  = 10 * log10(sum(x**2) / (m * C))     (a full-scale sine reads -3.01 dBFS)
    peak_dbfs = 20 * log10(max |x|)

both floored at -200 dBFS for digital silence. Feeds meters and the console view.
"""

from __future__ import annotations

from collections.abc import Mapping
from fractions import Fraction
from math import floor
from typing import Any, ClassVar

import numpy as np

from streamkit.core.block import GapPolicy, SyncBlock
from streamkit.core.context import Context
from streamkit.core.errors import ConfigError
from streamkit.core.events import LEVEL, LevelInfo
from streamkit.core.registry import register
from streamkit.core.tags import Gap
from streamkit.core.types import StreamSpec, as_fraction

#: reported for digital silence instead of -inf
FLOOR_DBFS = -200.0


def level_dbfs(x: np.ndarray) -> LevelInfo:
    """RMS and peak of ``x`` (m, channels) in dBFS, over all items and channels."""
    power = float(np.square(x, dtype=np.float64).sum()) / x.size
    peak = float(np.abs(x).max())
    rms_db = 10.0 * np.log10(power) if power > 0 else FLOOR_DBFS
    peak_db = 20.0 * np.log10(peak) if peak > 0 else FLOOR_DBFS
    return LevelInfo(rms_dbfs=max(float(rms_db), FLOOR_DBFS), peak_dbfs=max(float(peak_db), FLOOR_DBFS))


@register("dsp.level")
class LevelMeter(SyncBlock):
    """Pass audio through; emit ``level.update`` every ``interval_s`` of stream time.

    Ports:
        in, out: float32 audio, any rate, any channel count (out == in, unchanged, no copy).
    Parameters:
        interval_s: interval length in seconds of stream time (default 0.1; any exact rational,
            floats read through their decimal form). At least one item per interval.
    Tags:
        Forwarded unchanged.
    Events:
        ``level.update`` (:class:`~streamkit.core.events.LevelInfo` rms_dbfs, peak_dbfs over all
        channels) when an interval is complete; span = the interval in input indices. ``flush``
        emits the final partial interval.
    Latency:
        0 items for the audio; a level event comes at most ``interval_s`` after its first item.
    State:
        The items of the current, incomplete interval (less than ``interval_s``); ``reset()``
        drops them, and the grid carries on. Gaps do not reset (``on_gap`` CONTINUE): the grid
        stays on the contiguous index, and an interval may straddle a gap.
    """

    emits: ClassVar[tuple[str, ...]] = (LEVEL,)
    on_gap: ClassVar[GapPolicy] = GapPolicy.CONTINUE

    def __init__(self, *, interval_s: Any = 0.1, name: str | None = None) -> None:
        super().__init__(name=name)
        try:
            self.interval_s: Fraction = as_fraction(interval_s)
        except ConfigError as exc:
            raise ConfigError(f"interval_s: {exc}") from None
        self._step = Fraction(0)

    def negotiate(self, inputs: Mapping[str, StreamSpec]) -> dict[str, StreamSpec]:
        spec = inputs["in"]
        if spec.dtype != np.float32:
            raise ConfigError(f"{self.name}: needs float32 audio, got {spec.dtype}")
        if self.interval_s * spec.rate < 1:
            raise ConfigError(f"{self.name}: interval_s={self.interval_s} is shorter than one item at {spec.rate} Hz")
        return {"out": spec}

    def start(self, ctx: Context) -> None:
        self._step = self.interval_s * ctx.input_spec("in").rate  # items per interval, exact
        self._origin: int | None = None  # index of the first item (set by the first work call)
        self._k = 0  # the current interval
        self._parts: list[np.ndarray] = []  # items of interval k seen so far (copies)
        self._end = 0  # index after the last item seen

    def work(self, x: np.ndarray, ctx: Context) -> np.ndarray:
        pos = ctx.position
        if self._origin is None:
            self._origin = pos
        end = pos + x.shape[0]
        self._end = end
        cut = 0
        b = self._bound(self._k + 1)
        while b <= end:
            seg = x[cut : b - pos]
            if self._parts:
                self._parts.append(seg)
                seg = np.concatenate(self._parts)
                self._parts = []
            ctx.emit(LEVEL, level_dbfs(seg), span=(self._bound(self._k), b))
            cut = b - pos
            self._k += 1
            b = self._bound(self._k + 1)
        if cut < x.shape[0]:
            self._parts.append(x[cut:].copy())
        return x

    def reset(self, cause: Gap | None = None) -> None:
        self._parts = []

    def flush(self, ctx: Context) -> np.ndarray | None:
        if self._parts:
            seg = np.concatenate(self._parts)
            lo = self._bound(self._k)
            ctx.emit(LEVEL, level_dbfs(seg), span=(lo, self._end))
            self._parts = []
            self._k += 1
        return None

    def apply_params(self, changes: Mapping[str, Any]) -> None:
        """A new ``interval_s`` applies from the start of the current interval on."""
        unknown = set(changes) - {"interval_s"}
        if unknown:
            raise ConfigError(f"{self.name}: unknown parameter(s) {sorted(unknown)}")
        if "interval_s" not in changes:
            return
        iv = as_fraction(changes["interval_s"])
        if self._step:
            rate = self._step / self.interval_s
            if iv * rate < 1:
                raise ConfigError(f"{self.name}: interval_s={iv} is shorter than one item at {rate} Hz")
            if self._origin is not None:
                self._origin = self._bound(self._k)
                self._k = 0
            self._step = iv * rate
        self.interval_s = iv

    def _bound(self, k: int) -> int:
        """Absolute index where interval ``k`` starts."""
        return (self._origin or 0) + floor(k * self._step + Fraction(1, 2))
