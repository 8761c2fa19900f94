"""streamkit: a real-time streaming audio engine (block graph, KiwiSDR/mic/file sources, detectors).

One call per task (:mod:`streamkit.api`, imported on first use): :func:`detect_speech`,
:func:`transcribe`, :func:`detect_events` on a file or an array, and :func:`collect` for the events
of a graph of your own. The engine: see :mod:`streamkit.core` (re-exported here). Blocks live in
:mod:`streamkit.dsp`, :mod:`streamkit.io` and :mod:`streamkit.models`.
"""

from typing import Any

__version__ = "0.1.0"

from streamkit.core import *  # noqa: F401,F403,E402
from streamkit.core import __all__ as _core_all  # noqa: E402

#: names of :mod:`streamkit.api`, loaded when first used (``import streamkit`` stays cheap: no models, no torch)
_API = ("EventCollector", "Segment", "SoundEvent", "Utterance", "collect", "detect_events", "detect_speech", "transcribe")

__all__ = ["__version__", *_core_all, *_API]


def __getattr__(name: str) -> Any:
    if name in _API:
        from streamkit import api

        return getattr(api, name)
    raise AttributeError(f"module 'streamkit' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_API))
