"""The block registry: every name is a block class, broken modules are errors, plug-in entry points."""

from __future__ import annotations

import importlib.metadata
import sys

import pytest

from streamkit.core import registry
from streamkit.core.block import Block, EventSink, SyncBlock
from streamkit.core.errors import ConfigError
from streamkit.core.registry import BlockImportError, lookup, names, register


class PluginGain(SyncBlock):
    """A plug-in block, found through a (fake) entry point."""

    def __init__(self, *, name=None):
        super().__init__(name=name)

    def work(self, x, ctx):
        return x


def not_a_block():
    """A plug-in entry point pointing at a function."""


@pytest.fixture(autouse=True)
def _builtins_loaded():
    """Load the real registry before a test swaps it: a module first imported while a test's copy is
    in place would register only in the copy, and leave the real registry empty for the next test."""
    registry.names()


@pytest.fixture
def fresh_registry(monkeypatch):
    """An empty registry that imports the built-in modules again on first lookup (modules already
    imported register nothing again: for import-failure tests only); restored afterwards."""
    monkeypatch.setattr(registry, "_REGISTRY", {})
    monkeypatch.setattr(registry, "_loaded", False)
    return registry


def fake_entry_points(monkeypatch, *pairs):
    eps = [importlib.metadata.EntryPoint(name=n, value=v, group=registry.ENTRY_POINT_GROUP) for n, v in pairs]
    monkeypatch.setattr(registry, "_entry_points", lambda: eps)


def test_every_registered_name_is_a_block_class():
    got = names()
    assert "dsp.stft" in got and "dsp.istft" in got
    for n in got:
        cls = lookup(n)
        assert isinstance(cls, type) and issubclass(cls, (Block, EventSink)), (n, cls)
        assert cls.registry_name == n
    assert lookup("dsp.stft").__name__ == "STFT"


def test_register_refuses_what_is_not_a_block_class():
    def helper(blk, n):
        return n

    with pytest.raises(TypeError, match="not a Block or EventSink subclass"):
        register("test.helper")(helper)
    with pytest.raises(TypeError, match="not a Block"):
        register("test.plain")(type("Plain", (), {}))
    assert "test.helper" not in registry._REGISTRY and "test.plain" not in registry._REGISTRY


def test_a_broken_builtin_module_is_an_error_naming_it(fresh_registry, monkeypatch):
    # None in sys.modules makes `import streamkit.dsp.stft` raise ModuleNotFoundError, as a module
    # with a broken streamkit import would; the block must not silently disappear
    monkeypatch.delitem(sys.modules, "streamkit.dsp.stft", raising=False)
    monkeypatch.setitem(sys.modules, "streamkit.dsp.stft", None)
    for call in (lambda: lookup("dsp.stft"), lambda: lookup("dsp.resample"), names):
        with pytest.raises(BlockImportError, match=r"block module streamkit\.dsp\.stft failed to import"):
            call()


def test_a_missing_builtin_module_is_an_error(fresh_registry, monkeypatch):
    monkeypatch.setattr(registry, "BUILTIN_MODULES", (*registry.BUILTIN_MODULES, "streamkit.dsp.no_such_block_module"))
    with pytest.raises(BlockImportError, match=r"streamkit\.dsp\.no_such_block_module"):
        lookup("dsp.resample")


def test_plugin_entry_point_is_registered_on_lookup(monkeypatch):
    monkeypatch.setattr(registry, "_REGISTRY", dict(registry._REGISTRY))
    fake_entry_points(monkeypatch, ("test.plugin_gain", f"{__name__}:PluginGain"))
    assert lookup("test.plugin_gain") is PluginGain
    assert PluginGain.registry_name == "test.plugin_gain"
    assert "test.plugin_gain" in names() and "dsp.resample" in names()


def test_plugin_entry_point_usable_in_a_graph(monkeypatch):
    from streamkit.core.graph import Graph

    monkeypatch.setattr(registry, "_REGISTRY", dict(registry._REGISTRY))
    fake_entry_points(monkeypatch, ("test.plugin_gain", f"{__name__}:PluginGain"))
    g = Graph.from_spec({"name": "p", "blocks": {"src": {"type": "io.tone", "rate": 8000, "duration_s": 0.1}, "g": {"type": "test.plugin_gain"}},
                         "chain": ["src", "g"]})  # fmt: skip
    assert isinstance(g.blocks["g"], PluginGain)


@pytest.mark.parametrize(
    ("value", "msg"),
    [
        ("tests.core.no_such_plugin_module:X", "failed to load: ModuleNotFoundError"),
        (f"{__name__}:not_a_block", "not a Block or EventSink subclass"),
        ("streamkit.dsp.passthrough:Gain", "already registered as 'dsp.gain'"),
    ],
)
def test_broken_plugin_entry_point_is_an_error_naming_it(monkeypatch, value, msg):
    monkeypatch.setattr(registry, "_REGISTRY", dict(registry._REGISTRY))
    fake_entry_points(monkeypatch, ("test.bad_plugin", value))
    with pytest.raises(BlockImportError, match="entry point 'test.bad_plugin'") as ei:
        lookup("test.bad_plugin")
    assert msg in str(ei.value)
    with pytest.raises(BlockImportError, match="test.bad_plugin"):
        names()


def test_plugin_cannot_take_a_builtin_name(monkeypatch):
    monkeypatch.setattr(registry, "_REGISTRY", dict(registry._REGISTRY))
    fake_entry_points(monkeypatch, ("dsp.resample", f"{__name__}:PluginGain"))
    assert lookup("dsp.resample").__name__ == "Resample"
    with pytest.raises(BlockImportError, match="already used by streamkit.dsp.resample.Resample"):
        names()


def test_unknown_name_lists_known_ones():
    with pytest.raises(ConfigError, match=r"unknown block type 'dsp\.nope'.*dsp\.stft"):
        lookup("dsp.nope")
