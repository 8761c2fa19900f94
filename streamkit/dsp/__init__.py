"""DSP blocks: resampling, STFT/ISTFT, filters, meters and detectors.

The classes are imported lazily on first access (``from streamkit.dsp import Resample`` works as
usual) so that ``import streamkit.dsp`` does not pull in soxr, scipy.signal and numba until a block
that needs them is used.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from streamkit.dsp.energy_vad import EnergyVAD, VadDecision, VadState, VadStateMachine
    from streamkit.dsp.highpass import Highpass
    from streamkit.dsp.iq import IqReal
    from streamkit.dsp.level import LevelMeter
    from streamkit.dsp.passthrough import Gain, Mono, PassThrough
    from streamkit.dsp.resample import Resample
    from streamkit.dsp.stat_sad import StatSAD, stat_sad_scores
    from streamkit.dsp.stft import ISTFT, STFT

_EXPORTS = {
    "PassThrough": "streamkit.dsp.passthrough",
    "Gain": "streamkit.dsp.passthrough",
    "Mono": "streamkit.dsp.passthrough",
    "Resample": "streamkit.dsp.resample",
    "STFT": "streamkit.dsp.stft",
    "ISTFT": "streamkit.dsp.stft",
    "Highpass": "streamkit.dsp.highpass",
    "LevelMeter": "streamkit.dsp.level",
    "EnergyVAD": "streamkit.dsp.energy_vad",
    "VadStateMachine": "streamkit.dsp.energy_vad",
    "VadState": "streamkit.dsp.energy_vad",
    "VadDecision": "streamkit.dsp.energy_vad",
    "IqReal": "streamkit.dsp.iq",
    "StatSAD": "streamkit.dsp.stat_sad",
    "stat_sad_scores": "streamkit.dsp.stat_sad",
}

__all__ = [
    "EnergyVAD", "Gain", "Highpass", "ISTFT", "IqReal", "LevelMeter", "Mono", "PassThrough", "Resample", "STFT", "StatSAD", "VadDecision",
    "VadState", "VadStateMachine", "stat_sad_scores",
]  # fmt: skip


def __getattr__(name: str) -> Any:
    mod = _EXPORTS.get(name)
    if mod is None:
        raise AttributeError(f"module 'streamkit.dsp' has no attribute {name!r}")
    value = getattr(importlib.import_module(mod), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
