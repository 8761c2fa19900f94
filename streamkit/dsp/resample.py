"""Streaming sample-rate conversion by an exact rational ratio, built on libsoxr.

``out_rate = to_hz`` and ``ratio = to_hz / in_rate`` are exact :class:`~fractions.Fraction` values
(``12001.188 -> 8000`` is ``ratio = 8000 / (3000297/250)``), so the runtime moves tags and time
anchors through the block with exact arithmetic: a tag at input item ``i`` lands on output item
``round_half_up(i * ratio)``.

The filtering is libsoxr's (``soxr.ResampleStream``), the same engine as ``soxr.resample``: its
streaming output is bit-identical to the one-shot call on the whole signal, whatever the chunking
(measured with soxr 1.1.0, QQ..VHQ, 1..3 channels). libsoxr trims its own filter delay: output
item ``j`` is the signal at input time ``j / ratio`` (an impulse at input ``i`` peaks at output
``round(i * ratio)``; a resampled tone keeps its phase to < 1e-6 output items), so the declared
group ``delay`` is 0. What libsoxr does add is *lag*: it holds output back
(``ResampleStream.delay()``) until it has a block of input, up to ~1390 input items (116 ms) for
HQ 12001.188 -> 8000 Hz; the runtime holds tags until the output reaches them, and
:meth:`Resample.flush` drains libsoxr (``last=True``) so that the total output length is within
one item of ``in_len * ratio`` (28 800 000 items for one hour of 12001.188 Hz audio at 8 kHz).

Use it between a source at an odd advertised rate (KiwiSDR's 12001.188 Hz) and blocks that want a
standard rate (8 or 16 kHz for VAD/ASR).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from fractions import Fraction
from typing import Any, ClassVar

import numpy as np
import soxr

from streamkit.core.block import GapPolicy, RateBlock
from streamkit.core.context import Context
from streamkit.core.errors import ConfigError
from streamkit.core.registry import register
from streamkit.core.tags import Gap
from streamkit.core.types import StreamSpec, as_fraction

#: libsoxr quality recipes accepted by ``soxr.ResampleStream`` (quick .. very high).
QUALITIES = ("QQ", "LQ", "MQ", "HQ", "VHQ")

#: give up measuring the lag after this many probe items (never reached for sane ratios)
_PROBE_LIMIT = 1 << 18


def soxr_lag_items(in_hz: float, out_hz: float, quality: str) -> int:
    """Worst-case lag of a ``soxr.ResampleStream`` in *input* items (a build-time probe).

    ``ResampleStream.delay()`` is the output libsoxr owes (``items_in * ratio - items_out``:
    filter half-length plus the input block it is still collecting). Fed one zero at a time, it
    peaks just before each block is processed; the probe records ``delay() / ratio`` over the
    first output block and three more, and adds one output item's worth of input (``1/ratio``)
    for the block-phase jitter of later peaks (over 300k items the peaks stayed within that
    margin for HQ/VHQ/MQ/QQ at 12001.188->8000/16000, 8000<->16000, 44100->8000, 48000->44100).

    Args:
        in_hz, out_hz: the rates given to libsoxr.
        quality: libsoxr recipe name.

    Returns:
        The lag in input items (rounded up).
    """
    rs = soxr.ResampleStream(in_hz, out_hz, 1, dtype="float32", quality=quality)
    r = out_hz / in_hz
    z = np.zeros(1, dtype=np.float32)
    worst = 0.0
    first = -1
    for i in range(_PROBE_LIMIT):
        if rs.resample_chunk(z).shape[0] and first < 0:
            first = i
        worst = max(worst, float(rs.delay()) / r)
        if first >= 0 and i >= 4 * first + 4:
            break
    return int(math.ceil(worst - 1e-9) + math.ceil(1.0 / r - 1e-9))


@register("dsp.resample")
class Resample(RateBlock):
    """Resample float32 audio to ``to_hz`` with libsoxr, streaming.

    Ports:
        in: float32 audio, any rate, any channel count.
        out: float32 audio at ``to_hz``, same channels.
    Parameters:
        to_hz: output rate in Hz, any exact rational: int, float (read through its shortest
            decimal form: ``12001.188`` is ``3000297/250``), str (``"12001.188"``,
            ``"48000000/1001"``) or Fraction.
        quality: libsoxr recipe: ``"QQ"``, ``"LQ"``, ``"MQ"``, ``"HQ"`` (default) or ``"VHQ"``.
    Tags:
        Forwarded; the runtime moves each to ``round_half_up(i * ratio)`` (``delay`` = 0, measured:
        libsoxr's output is time-aligned with its input). ``TimeAnchor`` keeps its ``utc_ns``.
    Events:
        None.
    Latency:
        ``algorithmic_latency()``: libsoxr's worst-case lag in input items, probed once from
        ``ResampleStream.delay()`` (:func:`soxr_lag_items`; HQ: 1390 items = 116 ms for
        12001.188 -> 8000 Hz, 927 items = 116 ms for 8000 -> 16000, 3542 = 80 ms for 44100 ->
        8000). 0 when ``to_hz`` equals the input rate.
    State:
        libsoxr's filter history and held-back output; ``reset()`` clears it (``clear()``). Gaps
        do not reset it (``on_gap`` CONTINUE): the index stays contiguous and anchors re-time.
        When ``to_hz`` equals the input rate the block passes items through and holds nothing.
    """

    on_gap: ClassVar[GapPolicy] = GapPolicy.CONTINUE

    def __init__(self, *, to_hz: Any, quality: str = "HQ", name: str | None = None) -> None:
        super().__init__(name=name)
        self.to_hz: Fraction = as_fraction(to_hz)
        if not isinstance(quality, str) or quality.upper() not in QUALITIES:
            raise ConfigError(f"quality must be one of {QUALITIES}, got {quality!r}")
        self.quality: str = quality.upper()
        self._in_rate: Fraction | None = None
        self._channels = 1
        self._latency: int | None = None
        self._rs: soxr.ResampleStream | None = None

    # -- description ---------------------------------------------------------------------------
    @property
    def passthrough(self) -> bool:
        """True when ``to_hz`` equals the negotiated input rate (no libsoxr involved)."""
        return self.ratio == 1

    def algorithmic_latency(self) -> int:
        if self._in_rate is None or self.passthrough:
            return 0
        if self._latency is None:
            self._latency = soxr_lag_items(float(self._in_rate), float(self.to_hz), self.quality)
        return self._latency

    # -- lifecycle -----------------------------------------------------------------------------
    def negotiate(self, inputs: Mapping[str, StreamSpec]) -> dict[str, StreamSpec]:
        spec = inputs["in"]
        if spec.dtype != np.float32:
            raise ConfigError(f"{self.name}: needs float32 audio, got {spec.dtype}")
        ratio = self.to_hz / spec.rate
        if ratio != 1:
            try:  # libsoxr rejects some ratios; find out now rather than mid-stream
                soxr.ResampleStream(float(spec.rate), float(self.to_hz), spec.channels, dtype="float32", quality=self.quality)
            except (ValueError, RuntimeError) as exc:
                raise ConfigError(f"{self.name}: libsoxr cannot resample {spec.rate} -> {self.to_hz} Hz: {exc}") from exc
        if self._in_rate != spec.rate:
            self._latency = None
        self._in_rate = spec.rate
        self._channels = spec.channels
        self.ratio = ratio
        self.delay = Fraction(0)
        return {"out": spec.replace(rate=self.to_hz)}

    def start(self, ctx: Context) -> None:
        spec = ctx.input_spec("in")
        self._channels = spec.channels
        self._rs = None
        if not self.passthrough:
            self._rs = soxr.ResampleStream(float(spec.rate), float(self.to_hz), spec.channels, dtype="float32", quality=self.quality)

    def work(self, x: np.ndarray, ctx: Context) -> np.ndarray:
        if self._rs is None:
            return x
        return self._rs.resample_chunk(x)

    def reset(self, cause: Gap | None = None) -> None:
        if self._rs is not None:
            self._rs.clear()

    def flush(self, ctx: Context) -> np.ndarray | None:
        if self._rs is None:
            return None
        y = self._rs.resample_chunk(np.zeros((0, self._channels), dtype=np.float32), last=True)
        return y if y.shape[0] else None

    def stop(self) -> None:
        self._rs = None

    def apply_params(self, changes: Mapping[str, Any]) -> None:
        """The rate is fixed once negotiated (``ratio`` cannot change mid-stream)."""
        if changes:
            raise ConfigError(f"{self.name}: {sorted(changes)} cannot change while running; build a new graph")
