"""streamkit: a real-time streaming audio engine (block graph, KiwiSDR/mic/file sources, detectors).

Public API: see :mod:`streamkit.core` (re-exported here). Blocks live in :mod:`streamkit.dsp`,
:mod:`streamkit.io` and :mod:`streamkit.models`.
"""

__version__ = "0.1.0"

from streamkit.core import *  # noqa: F401,F403
from streamkit.core import __all__ as _core_all

__all__ = ["__version__", *_core_all]
