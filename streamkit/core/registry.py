"""Registry names for blocks, so graph files can say ``type: dsp.resample``.

Blocks register with the :func:`register` decorator. Modules that hold built-in blocks are imported
lazily the first time a name is looked up, so importing :mod:`streamkit` stays cheap.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any, TypeVar

from streamkit.core.errors import ConfigError

T = TypeVar("T")

_REGISTRY: dict[str, type[Any]] = {}

#: modules whose import registers the built-in blocks (imported on first lookup)
BUILTIN_MODULES = (
    "streamkit.dsp.passthrough",
    "streamkit.dsp.resample",
    "streamkit.dsp.stft",
    "streamkit.dsp.highpass",
    "streamkit.dsp.level",
    "streamkit.dsp.energy_vad",
    "streamkit.dsp.iq",
    "streamkit.dsp.stat_sad",
    "streamkit.dsp.speech_gate",  # dsp.speech_gate (the statistical SAD as an audio pass-through with speech tags)
    "streamkit.io.synthetic",
    "streamkit.io.file_source",
    "streamkit.io.mic_source",
    "streamkit.io.wav_sink",
    "streamkit.io.jsonl_events",
    "streamkit.io.console",
    "streamkit.io.collect",
    "streamkit.io.kiwi_source",
    "streamkit.data.hf_channel",
    "streamkit.models.sad_dnn_block",  # models.sad_dnn (CNN-GRU SAD)
    "streamkit.models.rnnt_stream",  # models.rnnt_asr (multilingual RNN-T, no shipped weights yet)
    "streamkit.models.sed_stream",  # models.sed (sliding-window SED CRNN)
)

_loaded = False


def register(name: str) -> Callable[[type[T]], type[T]]:
    """Class decorator: make ``cls`` available to graph files under ``name``."""

    def deco(cls: type[T]) -> type[T]:
        prev = _REGISTRY.get(name)
        if prev is not None and prev is not cls and (prev.__module__, prev.__qualname__) != (cls.__module__, cls.__qualname__):
            raise ConfigError(f"registry name {name!r} already used by {prev.__module__}.{prev.__qualname__}")
        _REGISTRY[name] = cls
        cls.registry_name = name  # type: ignore[attr-defined]
        return cls

    return deco


def load_builtins() -> None:
    """Import the modules that register the built-in blocks (once)."""
    global _loaded
    if _loaded:
        return
    _loaded = True
    for mod in BUILTIN_MODULES:
        try:
            importlib.import_module(mod)
        except ModuleNotFoundError as exc:  # a module not written yet, or an optional extra
            if exc.name is not None and exc.name.startswith("streamkit"):
                continue
            raise


def lookup(name: str) -> type[Any]:
    """The class registered as ``name``.

    Raises:
        ConfigError: unknown name (the message lists the known ones).
    """
    if name not in _REGISTRY:
        load_builtins()
    if name not in _REGISTRY and "." in name:
        # allow "package.module:Class"-free names of external plug-ins: try importing the prefix
        pass
    try:
        return _REGISTRY[name]
    except KeyError:
        known = ", ".join(sorted(_REGISTRY))
        raise ConfigError(f"unknown block type {name!r} (known: {known})") from None


def names() -> list[str]:
    load_builtins()
    return sorted(_REGISTRY)
