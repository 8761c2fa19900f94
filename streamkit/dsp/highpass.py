"""Butterworth high-pass filter (rumble, hum and DC removal before detection or ASR).

``sos = scipy.signal.butter(order, cutoff_hz, "highpass", fs=rate, output="sos")``, applied as a
cascade of biquads (:func:`streamkit.dsp.kernels.biquad.sos_filter`, transposed direct form II in
float64, the arithmetic of ``scipy.signal.sosfilt``). Magnitude ``|H(f)|^2 = 1 / (1 +
(cutoff/f)^(2*order))``: -3 dB at ``cutoff_hz``, ``-6*order`` dB per octave below it, 0 at DC.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np
from scipy.signal import butter

from streamkit.core.block import GapPolicy, SyncBlock
from streamkit.core.context import Context
from streamkit.core.errors import ConfigError
from streamkit.core.registry import register
from streamkit.core.tags import Gap
from streamkit.core.types import StreamSpec
from streamkit.dsp.kernels.biquad import sos_filter


def _check(cutoff_hz: Any, order: Any) -> tuple[float, int]:
    if isinstance(order, bool) or not isinstance(order, (int, np.integer)) or not 1 <= order <= 32:
        raise ConfigError(f"order must be an int in 1..32, got {order!r}")
    try:
        fc = float(cutoff_hz)
    except (TypeError, ValueError):
        raise ConfigError(f"cutoff_hz must be a number, got {cutoff_hz!r}") from None
    if not (np.isfinite(fc) and fc > 0):
        raise ConfigError(f"cutoff_hz must be > 0, got {cutoff_hz!r}")
    return fc, int(order)


@register("dsp.highpass")
class Highpass(SyncBlock):
    """Butterworth high-pass, any channel count.

    Ports:
        in, out: float32 audio, any rate, any channel count (out spec == in spec).
    Parameters:
        cutoff_hz: -3 dB corner in Hz; must be > 0 and < rate/2. Settable at run time
            (``set_params(cutoff_hz=...)``: new coefficients, filter state kept).
        order: filter order (1..32), default 4 (24 dB/octave); ``ceil(order/2)`` biquads.
    Tags:
        Forwarded unchanged (1:1).
    Events:
        None.
    Latency:
        0 items (causal; the filter's phase delay is not a buffering latency).
    State:
        Two float64 values per biquad per channel; ``reset()`` zeroes them. Resets on any Gap
        (``on_gap`` RESET): the audio after a loss does not ring with the audio before it.
    """

    on_gap: ClassVar[GapPolicy] = GapPolicy.RESET

    def __init__(self, *, cutoff_hz: float = 80.0, order: int = 4, name: str | None = None) -> None:
        super().__init__(name=name)
        self.cutoff_hz, self.order = _check(cutoff_hz, order)
        self._rate = 0.0

    def negotiate(self, inputs: Mapping[str, StreamSpec]) -> dict[str, StreamSpec]:
        spec = inputs["in"]
        if spec.dtype != np.float32:
            raise ConfigError(f"{self.name}: needs float32 audio, got {spec.dtype}")
        if self.cutoff_hz >= spec.rate / 2:
            raise ConfigError(f"{self.name}: cutoff {self.cutoff_hz} Hz >= Nyquist ({float(spec.rate) / 2} Hz)")
        return {"out": spec}

    def start(self, ctx: Context) -> None:
        spec = ctx.input_spec("in")
        self._rate = float(spec.rate)
        self._sos = self._design()
        self._zi = np.zeros((self._sos.shape[0], 2, spec.channels), dtype=np.float64)
        # JIT warm-up on an input typed, shaped AND read-only like real chunks (numba compiles
        # non-writeable arrays separately), with a scratch state
        sos_filter(ctx.dummy_input("in", n=1), self._sos, self._zi.copy())

    def work(self, x: np.ndarray, ctx: Context) -> np.ndarray:
        if not x.flags.c_contiguous:  # keep the one compiled specialization: C layout, read-only
            x = np.ascontiguousarray(x)
            x.flags.writeable = False
        return sos_filter(x, self._sos, self._zi)

    def reset(self, cause: Gap | None = None) -> None:
        zi = getattr(self, "_zi", None)
        if zi is not None:
            zi[:] = 0.0

    def apply_params(self, changes: Mapping[str, Any]) -> None:
        """Re-design for a new ``cutoff_hz`` (state kept) or ``order`` (state reset)."""
        unknown = set(changes) - {"cutoff_hz", "order"}
        if unknown:
            raise ConfigError(f"{self.name}: unknown parameter(s) {sorted(unknown)}")
        fc, order = _check(changes.get("cutoff_hz", self.cutoff_hz), changes.get("order", self.order))
        if self._rate and fc >= self._rate / 2:
            raise ConfigError(f"{self.name}: cutoff {fc} Hz >= Nyquist ({self._rate / 2} Hz)")
        self.cutoff_hz, self.order = fc, order
        if self._rate:
            sos = self._design()
            if sos.shape != self._sos.shape:
                self._zi = np.zeros((sos.shape[0], 2, self._zi.shape[2]), dtype=np.float64)
            self._sos = sos

    def _design(self) -> np.ndarray:
        sos = butter(self.order, self.cutoff_hz, btype="highpass", fs=self._rate, output="sos")
        return np.ascontiguousarray(sos, dtype=np.float64)
