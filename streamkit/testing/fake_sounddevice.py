"""A scriptable stand-in for the parts of ``sounddevice`` that :class:`MicSource` uses.

python-sounddevice has no test doubles and no automated tests of its own (python-sounddevice#64),
so streamkit brings one: a test calls :meth:`FakeInputStream.feed` to play the PortAudio callback
thread, with any block size, ADC time and status flags (``input_overflow`` ...).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass
class FakeCallbackFlags:
    """Mimics ``sounddevice.CallbackFlags`` (the bits MicSource reads)."""

    input_underflow: bool = False
    input_overflow: bool = False
    output_underflow: bool = False
    output_overflow: bool = False
    priming_output: bool = False

    def __bool__(self) -> bool:
        return any((self.input_underflow, self.input_overflow, self.output_underflow, self.output_overflow, self.priming_output))

    def __str__(self) -> str:
        names = [k for k in ("input_underflow", "input_overflow", "output_underflow", "output_overflow", "priming_output") if getattr(self, k)]
        return ", ".join(names)


@dataclass
class FakeTimeInfo:
    inputBufferAdcTime: float
    currentTime: float
    outputBufferDacTime: float = 0.0


class FakeInputStream:
    """Behaves like ``sounddevice.InputStream`` opened with a callback."""

    def __init__(self, *, samplerate: float, channels: int, dtype: str = "float32", blocksize: int = 0, latency: Any = "high",
                 device: Any = None, callback: Callable[..., None] | None = None, owner: FakeSoundDevice | None = None) -> None:  # fmt: skip
        self.samplerate = float(samplerate)
        self.channels = int(channels)
        self.dtype = dtype
        self.blocksize = blocksize
        self.device = device
        self.callback = callback
        self.latency = 0.0232 if latency == "low" else 0.0929
        self.active = False
        self.closed = False
        self._time = 0.0
        self._lock = threading.Lock()
        self.cpu_load = 0.0
        if owner is not None:
            owner.streams.append(self)

    @property
    def time(self) -> float:
        return self._time

    def start(self) -> None:
        self.active = True

    def stop(self) -> None:
        self.active = False

    def close(self) -> None:
        self.active = False
        self.closed = True

    def feed(self, indata: np.ndarray, *, input_overflow: bool = False, input_underflow: bool = False, adc_time: float | None = None) -> None:
        """Call the callback as PortAudio's thread would, with ``indata`` of shape (frames, channels)."""
        if not self.active:
            raise RuntimeError("stream not started")
        a = np.asarray(indata, dtype=np.float32)
        if a.ndim == 1:
            a = a[:, None]
        frames = a.shape[0]
        with self._lock:
            t_adc = self._time if adc_time is None else adc_time
            info = FakeTimeInfo(inputBufferAdcTime=t_adc, currentTime=t_adc + self.latency)
            self._time = t_adc + frames / self.samplerate
        flags = FakeCallbackFlags(input_overflow=input_overflow, input_underflow=input_underflow)
        assert self.callback is not None
        self.callback(a, frames, info, flags)


class FakeSoundDevice:
    """A module-like object: ``InputStream``, ``query_devices``, ``CallbackFlags``, ``PortAudioError``."""

    class PortAudioError(Exception):
        pass

    CallbackFlags = FakeCallbackFlags

    def __init__(self, devices: list[dict[str, Any]] | None = None, fail_open: str | None = None) -> None:
        self.streams: list[FakeInputStream] = []
        self.fail_open = fail_open
        self.devices = devices if devices is not None else [
            {"name": "Fake Microphone", "index": 0, "hostapi": 0, "max_input_channels": 2, "max_output_channels": 0, "default_samplerate": 48000.0},
            {"name": "Fake Speakers", "index": 1, "hostapi": 0, "max_input_channels": 0, "max_output_channels": 2, "default_samplerate": 48000.0},
        ]  # fmt: skip

    def InputStream(self, **kwargs: Any) -> FakeInputStream:  # noqa: N802 (sounddevice's name)
        if self.fail_open:
            raise self.PortAudioError(self.fail_open)
        return FakeInputStream(owner=self, **kwargs)

    def query_devices(self, device: Any = None, kind: str | None = None) -> Any:
        if device is None and kind is None:
            return list(self.devices)
        if kind == "input":
            for d in self.devices:
                if d["max_input_channels"] > 0:
                    return d
            raise self.PortAudioError("no input device")
        if isinstance(device, int):
            return self.devices[device]
        for d in self.devices:
            if str(device).lower() in d["name"].lower():
                return d
        raise ValueError(f"no device matching {device!r}")
