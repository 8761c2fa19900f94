"""Data generation: simulated HF receptions for training and testing speech detectors.

* :mod:`streamkit.data.hf_channel`: SSB/Watterson/AGC HF channel simulator, offline
  (:func:`simulate`) and as the streaming block ``data.hf_channel`` (:class:`HFChannel`).

Names are imported lazily (``from streamkit.data import simulate`` works) so that
``import streamkit.data`` does not pull in numba, scipy and soxr.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from streamkit.data.hf_channel import PROFILES, AgcParams, ChannelParams, HFChannel, SimResult, active_level_db, simulate

_EXPORTS = {
    name: "streamkit.data.hf_channel" for name in ("AgcParams", "ChannelParams", "HFChannel", "PROFILES", "SimResult", "active_level_db", "simulate")
}

__all__ = ["AgcParams", "ChannelParams", "HFChannel", "PROFILES", "SimResult", "active_level_db", "simulate"]


def __getattr__(name: str) -> Any:
    mod = _EXPORTS.get(name)
    if mod is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(mod), name)
