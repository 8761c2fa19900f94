"""``web.tap``: a sink that feeds one station's audio and waterfall rows to the live view's hub."""

from __future__ import annotations

from collections.abc import Mapping
from fractions import Fraction
from typing import TYPE_CHECKING

import numpy as np

from streamkit.core.block import Sink
from streamkit.core.errors import ConfigError
from streamkit.core.registry import register
from streamkit.core.tags import GAP, Gap
from streamkit.core.types import Chunk, StreamSpec
from streamkit.web.hub import StationFeed, get_hub
from streamkit.web.spectrogram import WaterfallRows

if TYPE_CHECKING:
    from streamkit.core.context import Context

__all__ = ["WebTap"]


@register("web.tap")
class WebTap(Sink):
    """Feed the live view: waterfall rows (computed here) and the audio itself, for one station.

    Ports:
        in: real float32 audio at any rate (the first channel is shown and played).
    Parameters:
        hub: the id of a :class:`~streamkit.web.hub.LiveHub` (``hub.id``); the hub must exist while the graph runs.
        station: the station's name in the view (default: the graph's name).
    Tags:
        Consumes ``sk:gap``: the row and the audio that follow a gap carry how much was lost
        (seconds at this port's rate) and why; the page draws it on the timeline and plays that much
        silence. Follows a rate change (``sk:format``) by restarting the waterfall at the new rate.
    Cost:
        about 4 FFTs of 512 points per row (10 rows/s), a lock and an append per chunk; it never waits
        for a viewer (the hub's rings are bounded; viewers that fall behind lose the oldest items).
    """

    def __init__(self, *, hub: str, station: str | None = None, name: str | None = None) -> None:
        super().__init__(name=name)
        self.hub_id = str(hub)
        self.station = station
        self._feed: StationFeed | None = None
        self._wf: WaterfallRows | None = None
        self._rate: Fraction | None = None
        self._pending_gap: tuple[float, str] | None = None  # a gap before the next audio pushed
        self._row_gap: tuple[float, str] | None = None  # a gap before the next waterfall row

    def negotiate(self, inputs: Mapping[str, StreamSpec]) -> dict[str, StreamSpec]:
        spec = inputs["in"]
        if spec.dtype != np.dtype(np.float32):
            raise ConfigError(f"web.tap: needs real float32 audio, got {spec.dtype} (tap after a demodulator / resampler)")
        return {}

    def start(self, ctx: Context) -> None:
        try:
            hub = get_hub(self.hub_id)
        except KeyError as exc:
            raise ConfigError(f"web.tap: {exc.args[0]}") from None
        self._feed = hub.station(self.station or ctx.stream)
        self._set_rate(ctx.input_spec("in").rate)

    def _set_rate(self, rate: Fraction) -> None:
        hub = get_hub(self.hub_id)
        self._rate = Fraction(rate)
        self._wf = WaterfallRows(self._rate, bins=hub.bins, rows_per_s=hub.rows_per_s)
        assert self._feed is not None
        with self._feed.lock:
            self._feed.rate = float(self._rate)
            self._feed.version += 1

    def consume(self, chunk: Chunk, ctx: Context) -> None:
        feed, wf = self._feed, self._wf
        if feed is None or wf is None:
            return
        rate = ctx.input_spec("in").rate
        if rate != self._rate:
            self._set_rate(rate)
            wf = self._wf
            assert wf is not None
        r = float(rate)
        x = chunk.samples[:, 0] if chunk.samples.ndim == 2 else chunk.samples
        # split the audio at gap tags: what follows a gap carries the loss
        cuts: list[tuple[int, float, str]] = []
        for t in chunk.tags:
            if t.key == GAP and isinstance(t.value, Gap) and not t.value.filled:
                lost = t.value.lost
                cuts.append((t.offset - chunk.start, (lost / r) if lost else 0.0, getattr(t.value.cause, "value", str(t.value.cause))))
        pos = 0
        for off, lost_s, cause in cuts:
            if off > pos:
                self._push(feed, wf, x[pos:off], chunk.start + pos, r, ctx)
                pos = off
            lost0 = self._pending_gap[0] if self._pending_gap else 0.0
            self._pending_gap = (lost0 + lost_s, cause)
        if pos < x.shape[0]:
            self._push(feed, wf, x[pos:], chunk.start + pos, r, ctx)

    def _push(self, feed: StationFeed, wf: WaterfallRows, x: np.ndarray, start: int, rate: float, ctx: Context) -> None:
        gap = self._pending_gap
        self._pending_gap = None
        feed.add_audio(start, rate, x, lost_s=gap[0] if gap else 0.0, gap=gap is not None)
        rows = wf.push(x, start)
        if gap is not None:  # the next row to complete (maybe in a later chunk) carries the gap
            self._row_gap = (self._row_gap[0] + gap[0], gap[1]) if self._row_gap else gap
        if not rows:
            return
        out: list[tuple[float, float, bool, str | None, bytes]] = []
        for end, levels in rows:
            t_ns = ctx.time_of(end)
            g, self._row_gap = self._row_gap, None
            out.append((t_ns / 1e9 if t_ns is not None else float("nan"), g[0] if g else 0.0, g is not None, g[1] if g else None, levels.tobytes()))
        feed.add_rows(out)
