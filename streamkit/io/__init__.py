"""streamkit.io: sources, sinks and event sinks that connect graphs to the world.

Sources: :class:`ToneSource` (``io.tone``), :class:`NoiseSource` (``io.noise``),
:class:`DemoSignal` (``io.demo_signal``), :class:`FileSource` (``io.file``), :class:`MicSource`
(``io.mic``), :class:`VectorSource`. Sinks: :class:`WavSink` (``io.wav_sink``),
:class:`CollectSink` (``io.collect``). Event sinks: :class:`JsonlEventSink` (``io.jsonl_events``),
:class:`ConsoleSink` (``io.console``), :class:`EventCollector` (in memory).

Nothing here imports sounddevice at module level (PortAudio may be missing); :class:`MicSource`
and :func:`list_devices` import it when they need it. ``KiwiSource`` (``io.kiwi``) is loaded on
first access (``from streamkit.io import KiwiSource``), so importing this package never pulls in
the WebSocket stack.
"""

from typing import Any

from streamkit.io.collect import CollectSink, EventCollector, VectorSource
from streamkit.io.console import ConsoleSink, format_event, format_summary
from streamkit.io.file_source import FileSource
from streamkit.io.jsonl_events import JsonlEventSink, read_events
from streamkit.io.mic_source import MicSource, format_devices, list_devices
from streamkit.io.synthetic import KIWI_RATE, Burst, DemoSignal, NoiseSource, ToneSource
from streamkit.io.wav_sink import WavSink, read_sidecar

__all__ = [
    "KIWI_RATE",
    "Burst",
    "CollectSink",
    "ConsoleSink",
    "DemoSignal",
    "EventCollector",
    "FileSource",
    "JsonlEventSink",
    "MicSource",
    "NoiseSource",
    "ToneSource",
    "VectorSource",
    "WavSink",
    "format_devices",
    "format_event",
    "format_summary",
    "list_devices",
    "read_events",
    "read_sidecar",
]


def __getattr__(name: str) -> Any:  # PEP 562: lazy names
    if name == "KiwiSource":
        from streamkit.io.kiwi_source import KiwiSource

        return KiwiSource
    raise AttributeError(f"module 'streamkit.io' has no attribute {name!r}")
