"""Small 1:1 blocks: pass-through, gain. Used by tests, the engine-overhead benchmark and graphs
that need a named tap point."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from streamkit.core.block import SyncBlock
from streamkit.core.context import Context
from streamkit.core.errors import ConfigError
from streamkit.core.registry import register
from streamkit.core.types import StreamSpec


@register("dsp.passthrough")
class PassThrough(SyncBlock):
    """Output = input.

    Ports: in, out: any spec (out == in). Parameters: none. Tags: forwarded. Events: none.
    Latency: 0. State: none.
    """

    def __init__(self, *, name: str | None = None) -> None:
        super().__init__(name=name)

    def work(self, x: np.ndarray, ctx: Context) -> np.ndarray:
        return x


@register("dsp.gain")
class Gain(SyncBlock):
    """Multiply by a constant gain (linear, or ``gain_db``).

    Ports: in, out: float32/complex64, any rate/channels (out == in).
    Parameters: gain (linear) or gain_db (dB); settable at run time with set_params(gain=...).
    Tags: forwarded. Events: none. Latency: 0. State: none.
    """

    def __init__(self, *, gain: float | None = None, gain_db: float | None = None, name: str | None = None) -> None:
        super().__init__(name=name)
        if gain is not None and gain_db is not None:
            raise ConfigError("give gain or gain_db, not both")
        self.gain = float(10 ** (gain_db / 20) if gain_db is not None else (1.0 if gain is None else gain))

    def negotiate(self, inputs: Mapping[str, StreamSpec]) -> dict[str, StreamSpec]:
        spec = inputs["in"]
        if spec.dtype not in (np.dtype(np.float32), np.dtype(np.complex64)):
            raise ConfigError(f"needs float32 or complex64 input, got {spec.dtype}")
        return {"out": spec}

    def start(self, ctx: Context) -> None:
        self._g = np.float32(self.gain)

    def apply_params(self, changes) -> None:  # type: ignore[no-untyped-def]
        super().apply_params(changes)
        self._g = np.float32(self.gain)

    def work(self, x: np.ndarray, ctx: Context) -> np.ndarray:
        return x * self._g
