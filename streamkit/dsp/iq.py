"""IQ helpers: turn a complex baseband stream into real audio."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from streamkit.core.block import SyncBlock
from streamkit.core.context import Context
from streamkit.core.errors import ConfigError
from streamkit.core.registry import register
from streamkit.core.types import StreamSpec


@register("dsp.iq_real")
class IqReal(SyncBlock):
    """Real part of a complex (I + jQ) stream: the double-sideband audio of a zero-IF IQ signal.

    Ports: in: complex64, any rate, 1 channel; out: float32, same rate.
    Parameters: none. Tags: forwarded. Events: none. Latency: 0. State: none.
    """

    def __init__(self, *, name: str | None = None) -> None:
        super().__init__(name=name)

    def negotiate(self, inputs: Mapping[str, StreamSpec]) -> dict[str, StreamSpec]:
        spec = inputs["in"]
        if spec.dtype != np.complex64:
            raise ConfigError(f"needs complex64 (IQ) input, got {spec.dtype}")
        return {"out": spec.replace(dtype=np.float32)}

    def work(self, x: np.ndarray, ctx: Context) -> np.ndarray:
        return np.ascontiguousarray(x.real, dtype=np.float32)
