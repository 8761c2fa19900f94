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


@register("dsp.mono")
class Mono(SyncBlock):
    """Mix a multichannel stream down to one channel: the channels' mean, or one channel.

    The model blocks (``models.sed``, ``models.sad_dnn``, ``models.rnnt_asr``) take mono audio; put
    this in front of them for a stereo file or sound card. The mean is taken in float64 and rounded
    once to float32, as ``streamkit sed`` and ``sed_file`` mix a file, so a graph and the offline
    path see the same samples.

    Ports: in: float32, any rate, C >= 1 channels; out: float32, same rate, 1 channel.
    Parameters: channel: None (default) averages all channels; k (0-based) keeps channel k only.
    Tags: forwarded (same offsets: one output item per input item). Events: none. Latency: 0.
    State: none.
    """

    def __init__(self, *, channel: int | None = None, name: str | None = None) -> None:
        super().__init__(name=name)
        if channel is not None and (isinstance(channel, bool) or not isinstance(channel, int) or channel < 0):
            raise ConfigError(f"channel must be a channel index >= 0 (or None: the mean of all), got {channel!r}")
        self.channel = channel

    def negotiate(self, inputs: Mapping[str, StreamSpec]) -> dict[str, StreamSpec]:
        spec = inputs["in"]
        if spec.dtype != np.dtype(np.float32):
            raise ConfigError(f"needs float32 audio, got {spec.dtype}")
        if self.channel is not None and self.channel >= spec.channels:
            raise ConfigError(f"channel {self.channel} does not exist: the input has {spec.channels} channel(s)")
        return {"out": StreamSpec(spec.rate, 1, spec.dtype)}

    def work(self, x: np.ndarray, ctx: Context) -> np.ndarray:
        if self.channel is not None:
            return np.ascontiguousarray(x[:, self.channel : self.channel + 1])
        if x.shape[1] == 1:
            return x
        return x.mean(axis=1, dtype=np.float64, keepdims=True).astype(np.float32)
