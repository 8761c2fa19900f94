"""Registry names for blocks, so graph files can say ``type: dsp.resample``.

Blocks register with the :func:`register` decorator, which accepts only a subclass of
:class:`~streamkit.core.block.Block` or :class:`~streamkit.core.block.EventSink` (decorating
anything else is a ``TypeError`` at import time, so a misplaced decorator cannot hide a block).

Built-in blocks live in the modules of :data:`BUILTIN_MODULES`, imported lazily the first time a
name is looked up, so importing :mod:`streamkit` stays cheap. Their third-party imports at module
level are required dependencies of streamkit; an optional package (soundfile, sounddevice) is
imported where the block starts and reported there as "io.X: <package> unavailable ...". So an
``ImportError`` while importing a built-in module is a broken install or a bug: it is raised as a
:class:`BlockImportError` naming the module, never skipped (a block must not silently disappear).

Plug-ins register through the entry-point group ``streamkit.blocks``: the entry point's name is the
registry name and its value the class (``my_pkg.blocks:MyBlock``), e.g. in ``pyproject.toml``::

    [project.entry-points."streamkit.blocks"]
    "my.dc_block" = "my_pkg.blocks:DCBlock"

A plug-in is imported only when its name is looked up (or when :func:`names` lists everything); an
error while loading it is a :class:`BlockImportError` naming the entry point. A plug-in cannot take
a name a built-in block already has (:func:`lookup` finds the built-in; :func:`names` reports the
clash).
"""

from __future__ import annotations

import importlib
import importlib.metadata
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from streamkit.core.errors import ConfigError

T = TypeVar("T")

#: the entry-point group third-party packages register their blocks under
ENTRY_POINT_GROUP = "streamkit.blocks"

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
    "streamkit.dsp.marker_detect",  # dsp.marker_detect (chirp markers of a transmission, live)
    "streamkit.dsp.melody",  # dsp.melody (predominant f0: pYIN, optional Melodia)
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
    "streamkit.models.singer_id_block",  # models.singer_id (who is singing: singer.id events)
    "streamkit.web.tap",  # web.tap (feeds the live view)
)

_loaded = False


class BlockImportError(ConfigError):
    """A module (or plug-in entry point) that should register blocks failed to import."""


def _check_block_class(name: str, obj: Any) -> None:
    from streamkit.core.block import Block, EventSink

    if not (isinstance(obj, type) and issubclass(obj, (Block, EventSink))):
        what = f"{getattr(obj, '__module__', '?')}.{getattr(obj, '__qualname__', repr(obj))}"
        raise TypeError(f"registry name {name!r}: {what} is not a Block or EventSink subclass")


def register(name: str) -> Callable[[type[T]], type[T]]:
    """Class decorator: make ``cls`` (a Block or EventSink subclass) available to graph files under ``name``."""

    def deco(cls: type[T]) -> type[T]:
        _check_block_class(name, cls)
        prev = _REGISTRY.get(name)
        if prev is not None and prev is not cls and (prev.__module__, prev.__qualname__) != (cls.__module__, cls.__qualname__):
            raise ConfigError(f"registry name {name!r} already used by {prev.__module__}.{prev.__qualname__}")
        old = getattr(cls, "registry_name", None)
        if old is not None and old != name and _REGISTRY.get(old) is cls:
            raise ConfigError(f"{cls.__module__}.{cls.__qualname__} is already registered as {old!r}; it cannot also be {name!r}")
        _REGISTRY[name] = cls
        cls.registry_name = name  # type: ignore[attr-defined]
        return cls

    return deco


def _import_block_module(mod: str) -> None:
    try:
        importlib.import_module(mod)
    except ImportError as exc:
        raise BlockImportError(f"block module {mod} failed to import: {type(exc).__name__}: {exc}") from exc


def load_builtins() -> None:
    """Import the modules that register the built-in blocks (once; a failure is raised each time)."""
    global _loaded
    if _loaded:
        return
    for mod in BUILTIN_MODULES:
        _import_block_module(mod)
    _loaded = True


def _entry_points() -> Iterable[importlib.metadata.EntryPoint]:
    return importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)


def _load_entry_point(ep: importlib.metadata.EntryPoint) -> None:
    where = f"entry point {ep.name!r} = {ep.value!r} (group {ENTRY_POINT_GROUP})"
    try:
        obj = ep.load()
    except Exception as exc:  # a plug-in may fail in any way while importing
        raise BlockImportError(f"{where} failed to load: {type(exc).__name__}: {exc}") from exc
    if _REGISTRY.get(ep.name) is obj:
        return  # the class registered itself with @register under the same name
    try:
        register(ep.name)(obj)
    except (TypeError, ConfigError) as exc:  # not a block class, or a name already taken
        raise BlockImportError(f"{where}: {exc}") from None


def lookup(name: str) -> type[Any]:
    """The class registered as ``name`` (built-in, else a plug-in entry point of that name).

    Raises:
        ConfigError: unknown name (the message lists the known ones).
        BlockImportError: a block module or the plug-in of that name failed to import.
    """
    if name not in _REGISTRY:
        load_builtins()
    if name not in _REGISTRY:
        for ep in _entry_points():
            if ep.name == name:
                _load_entry_point(ep)
                break
    try:
        return _REGISTRY[name]
    except KeyError:
        known = ", ".join(sorted(_REGISTRY) + sorted({ep.name for ep in _entry_points()} - set(_REGISTRY)))
        raise ConfigError(f"unknown block type {name!r} (known: {known})") from None


def names() -> list[str]:
    """Every registered name: the built-ins and all plug-in entry points (which are loaded)."""
    load_builtins()
    for ep in _entry_points():
        _load_entry_point(ep)
    return sorted(_REGISTRY)
